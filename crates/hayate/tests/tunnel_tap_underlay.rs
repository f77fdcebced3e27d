//! A VM's TCP super-packets encapsulated whole (issue 18): Hayate on host 1 sends its VXLAN
//! traffic through a TAP underlay port, whose kernel (Linux 6.17 or later) takes
//! UDP-tunnelled super-packets and cuts them, each segment with its own outer headers, on
//! its way out to host 2, where a kernel VXLAN device in a Linux bridge ends the tunnel.
//!
//! ```text
//! vm1 ─veth─ Hayate (afpacket vm1, tap T, vxlan local 192.168.78.1) ═T═ host 1's kernel
//!   (T 192.168.78.254/24, forwarding) ─u1 192.168.77.1 ═veth═ 192.168.77.2 u2─ host 2:
//!   vxlan (remote 192.168.78.1) + vm2 in a bridge
//! ```
//!
//! Hayate is a host behind the TAP: its VTEP address 192.168.78.1 sits on Hayate's side
//! (the kernel reaches it through T by a static neighbour entry), and the tunnel's next hop
//! is the TAP's kernel side (`nexthop_mac=`, `local_mac=`). VM 1 keeps its offloads on, so
//! its TCP stack hands Hayate super-packets. Two runs of a 2-second stream: with the TAP's
//! `tunnel_gso=auto`, TCP crosses, Hayate encapsulated super-packets whole (`gso_tunnelled`,
//! none cut: `gso_segmented` 0) and the kernel received fewer frames from the TAP than the
//! segments the stream needed (how many fewer depends on the rate: a slow stream's TCP makes
//! smaller super-packets); with `tunnel_gso=off`, TCP crosses too, every super-packet cut
//! first, a frame per segment. With `auto` again and the tunnel's UDP checksums on (`csum=on`),
//! whole as well: host 2's kernel checks each segment's checksum, which host 1's kernel
//! completed. Then the other way (`iperf3 -R`): host 2's kernel VXLAN
//! device encapsulates VM 2's super-packets whole; with `auto` host 1's kernel hands them
//! to the TAP whole (fewer frames into the TAP than segments) and Hayate terminates them
//! whole, with `off` it cuts them first.

mod netns;

use netns::tunnel::{
    no_offloads, ns_ping, offloads_on, udp_stat, veths, TwoHosts, UNDERLAY_V4, VM_MTU, VM_V4, VNI,
};
use netns::{iperf3, must, pmd_counter, IperfServer, Net};

/// Hayate's VTEP address (behind the TAP) and the TAP's kernel-side address.
const VTEP: &str = "192.168.78.1";
const TAP_KERNEL: &str = "192.168.78.254";
const VTEP_MAC: &str = "02:00:00:00:78:01";
const TAP_MAC: &str = "02:00:00:00:78:fe";

#[test]
fn a_vm_s_super_packets_cross_a_tap_underlay_encapsulated_whole() {
    if !netns::can_run("tunnel_tap_underlay", &["ping", "iperf3", "ethtool"]) {
        return;
    }
    if !port::vnet_tnl::kernel_has_tunnel_gso() {
        eprintln!(
            "SKIPPED tunnel_tap_underlay: a TAP takes tunnelled super-packets from Linux 6.17"
        );
        return;
    }
    let mut net = Net::new();
    let hosts = TwoHosts::new(&mut net, UNDERLAY_V4, false, true);
    let (h1, h2) = (hosts.h1.clone(), hosts.h2.clone());
    // The TAP, made beforehand so that its MAC is known (Hayate attaches to it).
    let tap = format!("{}t1", net.prefix);
    let ip1 = |args: &[&str]| {
        let mut all = vec!["ip", "-n", h1.as_str()];
        all.extend_from_slice(args);
        must(&all);
    };
    ip1(&["tuntap", "add", "dev", &tap, "mode", "tap", "vnet_hdr"]);
    ip1(&["link", "set", &tap, "address", TAP_MAC]);
    let v6 = format!("net.ipv6.conf.{tap}.disable_ipv6=1");
    must(&["ip", "netns", "exec", &h1, "sysctl", "-q", "-w", &v6]);
    must(&[
        "ip",
        "netns",
        "exec",
        &h1,
        "sysctl",
        "-q",
        "-w",
        "net.ipv4.ip_forward=1",
    ]);
    ip1(&["addr", "add", &format!("{TAP_KERNEL}/24"), "dev", &tap]);
    ip1(&[
        "neigh",
        "replace",
        VTEP,
        "lladdr",
        VTEP_MAC,
        "dev",
        &tap,
        "nud",
        "permanent",
    ]);
    // Host 2: the way back to Hayate's VTEP, a kernel VXLAN device to it, VM 2.
    let h2run = |args: &[&str]| {
        let mut all = vec!["ip", "-n", h2.as_str()];
        all.extend_from_slice(args);
        must(&all);
    };
    h2run(&["route", "add", "192.168.78.0/24", "via", UNDERLAY_V4.one]);
    let (vx, br) = (format!("{}vx", net.prefix), format!("{}br", net.prefix));
    let vni = VNI.to_string();
    h2run(&[
        "link",
        "add",
        &vx,
        "type",
        "vxlan",
        "id",
        &vni,
        "remote",
        VTEP,
        "local",
        UNDERLAY_V4.two,
        "dstport",
        "4789",
        "dev",
        &hosts.u2,
    ]);
    let (vm2_ns, b2) = hosts.vm2(&mut net);
    h2run(&["link", "add", &br, "type", "bridge"]);
    for i in [&vx, &b2] {
        h2run(&["link", "set", i, "master", &br]);
    }
    for i in [&vx, &b2, &br] {
        h2run(&["link", "set", i, "up"]);
    }
    // The underlay and VM 2 with their offloads on, so that super-packets cross whole:
    // VM 2's TCP makes them, host 2's VXLAN device encapsulates them whole.
    for (ns, i) in [(&h1, &hosts.u1), (&h2, &hosts.u2), (&h2, &b2)] {
        offloads_on(ns, i);
    }
    for i in veths(&vm2_ns) {
        offloads_on(&vm2_ns, &i);
    }
    assert!(ns_ping(&h1, UNDERLAY_V4.two, 2), "underlay ping");

    let vm1 = hosts.vm1(&mut net);
    let tunnel = format!(
        "vxlan:remote={},local={VTEP},vni={VNI},underlay={tap},nexthop_mac={TAP_MAC},local_mac={VTEP_MAC}",
        UNDERLAY_V4.two
    );
    let tap_stat = |what: &str| -> u64 {
        let path = format!("/sys/class/net/{tap}/statistics/{what}");
        let o = must(&["ip", "netns", "exec", &h1, "cat", &path]);
        o.trim().parse().unwrap_or(0)
    };
    let mut configured = false;
    // With Hayate's tunnel summing its UDP datagrams too (`csum=on`): host 2's kernel checks
    // every segment's checksum, which its kernel completed.
    for (mode, csum) in [("auto", false), ("auto", true), ("off", false)] {
        let tunnel = if csum {
            format!("{tunnel},csum=on")
        } else {
            tunnel.clone()
        };
        let ports = [vm1.spec(), format!("tap:{tap},tunnel_gso={mode}"), tunnel];
        let mode = if csum { "auto (csum=on)" } else { mode };
        // With checksums, host 1's kernel cuts at the underlay (its offloads off), so that
        // host 2's kernel receives real segments and checks each one's UDP checksum.
        if csum {
            no_offloads(&h1, &hosts.u1);
        } else {
            offloads_on(&h1, &hosts.u1);
        }
        let csum_errors = udp_stat(&h2, "InCsumErrors");
        let hayate = net.hayate(
            &h1,
            &ports,
            &["in_port=1,actions=output:3", "in_port=3,actions=output:1"],
            &[1],
        );
        if !configured {
            // VM 1 with its offloads on (TSO: super-packets), MTU leaving room for 50 bytes.
            net.configure(&vm1, &h1);
            must(&[
                "ip",
                "-n",
                &vm1.host_ns,
                "link",
                "set",
                &vm1.host_if,
                "mtu",
                VM_MTU,
            ]);
            configured = true;
        }
        let reached = (0..10).any(|_| vm1.reaches(VM_V4[1]));
        assert!(reached, "{mode}: VM 1 -> VM 2; log: {}", hayate.log_text());
        assert!(ns_ping(&vm2_ns, VM_V4[0], 3), "{mode}: ping VM 2 -> VM 1");
        let rx0 = tap_stat("rx_packets");
        let server = IperfServer::start(&vm2_ns);
        let v = iperf3(&vm1, &["-c", VM_V4[1], "-t", "2"]);
        server.reap();
        let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        let frames = tap_stat("rx_packets") - rx0;
        let pmd = net.ctl("br0", &["dump-pmd"]);
        let (whole, cut) = (
            pmd_counter(&pmd, "gso_tunnelled"),
            pmd_counter(&pmd, "gso_segmented"),
        );
        eprintln!(
            "tunnel_gso={mode}: TCP VM 1 -> VM 2 {bytes} bytes in 2 s; the kernel took {frames} \
             frames from the TAP; super-packets encapsulated whole {whole}, cut {cut}"
        );
        assert!(
            bytes > 1_000_000,
            "{mode}: TCP through the tunnel: {bytes} bytes"
        );
        // A 1,348-byte segment each: bytes / 1348 segments' worth of data. Whole, each frame
        // carries at least two (a busy machine's slower stream makes smaller super-packets,
        // so no larger factor is asserted).
        let segments = bytes / 1348;
        if mode != "off" {
            assert!(whole > 0, "super-packets encapsulated whole: {pmd}");
            assert_eq!(cut, 0, "none cut in software: {pmd}");
            assert!(
                frames < segments,
                "{frames} frames from the TAP for {segments} segments' worth of data"
            );
        } else {
            assert_eq!(whole, 0, "tunnel_gso=off: none whole: {pmd}");
            assert!(cut > 0, "tunnel_gso=off: cut first: {pmd}");
            assert!(
                frames >= segments,
                "{frames} frames from the TAP for {segments} segments"
            );
        }
        assert_eq!(tap_stat("rx_frame_errors"), 0, "the kernel refused none");
        // The other way: host 2's kernel VXLAN device encapsulates VM 2's super-packets
        // whole, host 1's kernel routes them to the TAP, and (auto) hands them over whole:
        // Hayate terminates each whole and VM 1's port takes the plain super-packet inside.
        let tx0 = tap_stat("tx_packets");
        let server = IperfServer::start(&vm2_ns);
        let v = iperf3(&vm1, &["-c", VM_V4[1], "-t", "2", "-R"]);
        server.reap();
        let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        let frames = tap_stat("tx_packets") - tx0;
        eprintln!(
            "tunnel_gso={mode}: TCP VM 2 -> VM 1 {bytes} bytes in 2 s; the kernel gave the \
             TAP {frames} frames"
        );
        assert!(bytes > 1_000_000, "{mode}: TCP back: {bytes} bytes");
        let segments = bytes / 1348;
        if mode != "off" {
            assert!(
                frames < segments,
                "{frames} frames into the TAP for {segments} segments' worth of data"
            );
        } else {
            assert!(
                frames >= segments,
                "{frames} frames into the TAP for {segments} segments"
            );
        }
        let pmd = net.ctl("br0", &["dump-pmd"]);
        assert_eq!(pmd_counter(&pmd, "drop_malformed"), 0, "{pmd}");
        assert_eq!(
            udp_stat(&h2, "InCsumErrors"),
            csum_errors,
            "{mode}: host 2's kernel found no bad UDP checksum"
        );
        hayate.stop();
    }
}

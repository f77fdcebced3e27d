//! A `remote=flow,vni=flow` VXLAN port of `hayate run` (issue 18): the flows pick the remote
//! and the VNI (`set_field:IP->tun_dst,set_tunnel:42`), Hayate's control side resolves the
//! next hop the first packets ask for as soon as they ask (the bridge's periodic passes are a
//! day apart here, so only the datapath's wake can resolve it), and a VM behind Hayate
//! reaches a VM behind a Linux kernel VXLAN device in another namespace; the return flow
//! matches `tun_src` (an IPv4 underlay). The VM behind Hayate keeps its TCP offloads on: its super-packets are cut into
//! segments and each is encapsulated, so iperf3 TCP runs through the tunnel. Packet-outs to
//! the tunnel port (`ovs-ofctl packet-out ... set_tunnel:42,...->tun_dst,output:3`) reach
//! the kernel's VXLAN device.
//!
//! Host 1 runs Hayate (VM port, AF_PACKET underlay port owning 192.168.78.1, the tunnel port);
//! host 2 has the kernel's VXLAN device (VNI 42) in a bridge with its VM.

mod netns;

use netns::{iperf3, must, ns_run, IperfServer, Net, PortKind};

const UNDERLAY_1: &str = "192.168.78.1";
const UNDERLAY_2: &str = "192.168.78.2";

fn ip(ns: &str, args: &[&str]) {
    let mut a = vec!["ip", "-n", ns];
    a.extend_from_slice(args);
    must(&a);
}

fn no_offloads(ns: &str, ifname: &str) {
    ns_run(
        ns,
        &[
            "ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
        ],
    );
}

/// Packet-outs sent to the tunnel port.
const PACKET_OUTS: u64 = 20;

/// Packets the kernel device `ifname` in namespace `ns` received.
fn rx_packets(ns: &str, ifname: &str) -> u64 {
    let o = ns_run(
        ns,
        &[
            "cat",
            &format!("/sys/class/net/{ifname}/statistics/rx_packets"),
        ],
    );
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Whether `ovs-ofctl` is here (the packet-out part needs it).
fn have_ofctl() -> bool {
    let ok = std::process::Command::new("ovs-ofctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED the packet-out part of tunnel_flow: no ovs-ofctl");
    }
    ok
}

#[test]
fn flows_pick_the_remote_and_vni_of_a_flow_based_vxlan_port() {
    if !netns::can_run("tunnel_flow", &["ping", "iperf3", "ethtool"]) {
        return;
    }
    let mut net = Net::new();
    let h1 = net.switch_ns("h1");
    let h2 = net.switch_ns("h2");
    let (u1, u2) = net.trunk(&h1, &h2, "u");
    ip(
        &h1,
        &["addr", "add", &format!("{UNDERLAY_1}/24"), "dev", &u1],
    );
    ip(
        &h2,
        &["addr", "add", &format!("{UNDERLAY_2}/24"), "dev", &u2],
    );
    no_offloads(&h1, &u1);
    no_offloads(&h2, &u2);
    let vm1 = net.link(PortKind::AfPacket, "v1", &h1, &["10.78.0.1/24"]);
    let vm2_ns = net.ns("v2");
    let (b2, vm2_if) = net.trunk(&h2, &vm2_ns, "w");
    let vx = format!("{}vx", net.prefix);
    let br = format!("{}br", net.prefix);
    ip(
        &h2,
        &[
            "link", "add", &vx, "type", "vxlan", "id", "42", "remote", UNDERLAY_1, "local",
            UNDERLAY_2, "dstport", "4789", "dev", &u2,
        ],
    );
    ip(&h2, &["link", "add", &br, "type", "bridge"]);
    for i in [&vx, &b2] {
        ip(&h2, &["link", "set", i, "master", &br]);
        ip(&h2, &["link", "set", i, "up"]);
    }
    ip(&h2, &["link", "set", &br, "up"]);
    ip(&vm2_ns, &["addr", "add", "10.78.0.2/24", "dev", &vm2_if]);
    ip(&vm2_ns, &["link", "set", &vm2_if, "mtu", "1450"]);
    no_offloads(&vm2_ns, &vm2_if);
    let ports = [
        vm1.spec(),
        format!("afpacket:{u1},vnet_hdr=off"),
        format!("vxlan:remote=flow,vni=flow,local={UNDERLAY_1},underlay={u1}"),
    ];
    let hayate = net.hayate_with(
        &h1,
        &ports,
        &[
            &format!("in_port=1,actions=set_field:{UNDERLAY_2}->tun_dst,set_tunnel:42,output:3"),
            &format!("in_port=3,tun_id=42,tun_src={UNDERLAY_2},actions=output:1"),
        ],
        &[1],
        "tunnel_refresh_secs = 86400",
    );
    net.configure(&vm1, &h1);
    ip(&vm1.host_ns, &["link", "set", &vm1.host_if, "mtu", "1450"]);
    // The next hop's MAC in host 1's neighbour table.
    assert!(
        ns_run(&h1, &["ping", "-c", "2", "-W", "1", UNDERLAY_2])
            .status
            .success(),
        "underlay ping"
    );
    // The first packets ask for the destination; the request wakes the control side, which
    // resolves it at once (the next periodic pass is a day away).
    let ok = (0..10).any(|_| vm1.reaches("10.78.0.2"));
    assert!(ok, "VM 1 -> VM 2; log: {}", hayate.log_text());
    assert!(vm1.ping("10.78.0.2", 3), "ping VM 1 -> VM 2");
    assert!(
        ns_run(&vm2_ns, &["ping", "-c", "3", "-W", "1", "10.78.0.1"])
            .status
            .success(),
        "ping VM 2 -> VM 1"
    );
    // Packet-outs to the tunnel port, as a controller sends them with `ovs-ofctl`, are
    // encapsulated too: the kernel's VXLAN device receives every one.
    if have_ofctl() {
        let before = rx_packets(&h2, &vx);
        let target = format!("unix:{}", net.run_dir().join("br0.mgmt").display());
        let frame = concat!(
            "ffffffffffff020000000099080600010800060400010200000000990a4e0009",
            "0000000000000a4e0009"
        );
        for _ in 0..PACKET_OUTS {
            must(&[
                "ovs-ofctl",
                "-O",
                "OpenFlow13",
                "packet-out",
                &target,
                &format!(
                    "in_port=controller packet={frame} \
                     actions=set_tunnel:42,set_field:{UNDERLAY_2}->tun_dst,output:3"
                ),
            ]);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while rx_packets(&h2, &vx) < before + PACKET_OUTS && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let got = rx_packets(&h2, &vx) - before;
        assert!(got >= PACKET_OUTS, "packet-outs through the tunnel: {got}");
    }
    // VM 1 sends TCP super-packets (offloads on): cut, then encapsulated.
    let server = IperfServer::start(&vm2_ns);
    let v = iperf3(&vm1, &["-c", "10.78.0.2", "-t", "2"]);
    server.reap();
    let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    eprintln!("iperf3 TCP VM 1 -> VM 2 through the flow-based tunnel: {bytes} bytes in 2 s");
    assert!(bytes > 1_000_000, "TCP through the tunnel: {bytes} bytes");
    let log = hayate.log_text();
    assert!(
        log.contains("tunnel to 192.168.78.2 vni 42"),
        "the destination was resolved: {log}"
    );
    hayate.stop();
}

//! Hayate's VXLAN and Geneve tunnels against the Linux kernel's devices (issue 18). Host 1 is
//! a namespace running `hayate run` with a VM port (a veth to namespace "vm1"), an AF_PACKET
//! underlay port and a `vxlan:` / `geneve:` port; host 2 is a namespace with a kernel VXLAN /
//! Geneve device (VNI 42) in a Linux bridge with its own VM namespace. The hosts are joined by an underlay veth pair
//! whose addresses the hosts' kernels own (Hayate's next hop comes from host 1's routing and
//! neighbour tables). The VMs ping each other both ways and run iperf3 TCP through the tunnel.
//! Offloads are off on the VM and underlay veths: super-packets are not encapsulated whole yet.

mod netns;

use netns::{iperf3, must, ns_run, IperfServer, Net, PortKind};

const UNDERLAY_1: &str = "192.168.77.1";
const UNDERLAY_2: &str = "192.168.77.2";

fn no_offloads(ns: &str, ifname: &str) {
    ns_run(
        ns,
        &[
            "ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
        ],
    );
}

#[test]
fn vms_across_hayate_and_a_kernel_vxlan_device_ping_and_run_tcp() {
    if !netns::can_run("tunnel_vxlan", &["ping", "iperf3", "ethtool"]) {
        return;
    }
    across("vxlan");
}

#[test]
fn vms_across_hayate_and_a_kernel_geneve_device_ping_and_run_tcp() {
    if !netns::can_run("tunnel_geneve", &["ping", "iperf3", "ethtool"]) {
        return;
    }
    across("geneve");
}

/// VMs across Hayate's `kind` port and the kernel's `kind` device.
fn across(kind: &str) {
    let mut net = Net::new();
    let h1 = net.switch_ns("h1");
    let h2 = net.switch_ns("h2");
    // The underlay: host 1's end is Hayate's AF_PACKET port and carries host 1's address.
    let (u1, u2) = net.trunk(&h1, &h2, "u");
    must(&[
        "ip",
        "-n",
        &h1,
        "addr",
        "add",
        &format!("{UNDERLAY_1}/24"),
        "dev",
        &u1,
    ]);
    must(&[
        "ip",
        "-n",
        &h2,
        "addr",
        "add",
        &format!("{UNDERLAY_2}/24"),
        "dev",
        &u2,
    ]);
    no_offloads(&h1, &u1);
    no_offloads(&h2, &u2);
    // VM 1 behind Hayate.
    let vm1 = net.link(PortKind::AfPacket, "v1", &h1, &["10.77.0.1/24"]);
    // Host 2: kernel VXLAN in a bridge with VM 2.
    let vm2_ns = net.ns("v2");
    let (b2, vm2_if) = net.trunk(&h2, &vm2_ns, "w");
    let vx = format!("{}vx", net.prefix);
    let br = format!("{}br", net.prefix);
    if kind == "vxlan" {
        must(&[
            "ip", "-n", &h2, "link", "add", &vx, "type", "vxlan", "id", "42", "remote", UNDERLAY_1,
            "local", UNDERLAY_2, "dstport", "4789", "dev", &u2,
        ]);
    } else {
        let o = netns::run(&[
            "ip", "-n", &h2, "link", "add", &vx, "type", "geneve", "id", "42", "remote", UNDERLAY_1,
        ]);
        if !o.status.success() {
            eprintln!(
                "SKIPPED tunnel_geneve: this kernel has no Geneve devices ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
    }
    must(&["ip", "-n", &h2, "link", "add", &br, "type", "bridge"]);
    for i in [&vx, &b2] {
        must(&["ip", "-n", &h2, "link", "set", i, "master", &br]);
        must(&["ip", "-n", &h2, "link", "set", i, "up"]);
    }
    must(&["ip", "-n", &h2, "link", "set", &br, "up"]);
    must(&[
        "ip",
        "-n",
        &vm2_ns,
        "addr",
        "add",
        "10.77.0.2/24",
        "dev",
        &vm2_if,
    ]);
    // Room for the 50 bytes of outer headers on a 1500-byte underlay.
    must(&["ip", "-n", &vm2_ns, "link", "set", &vm2_if, "mtu", "1450"]);
    no_offloads(&vm2_ns, &vm2_if);
    let ports = [
        format!("{},vnet_hdr=off", vm1.spec()),
        format!("afpacket:{u1},vnet_hdr=off"),
        format!("{kind}:remote={UNDERLAY_2},vni=42"),
    ];
    let hayate = net.hayate(
        &h1,
        &ports,
        &["in_port=1,actions=output:3", "in_port=3,actions=output:1"],
        &[1],
    );
    net.configure(&vm1, &h1);
    must(&[
        "ip",
        "-n",
        &vm1.host_ns,
        "link",
        "set",
        &vm1.host_if,
        "mtu",
        "1450",
    ]);
    no_offloads(&vm1.host_ns, &vm1.host_if);
    // Host 1's kernel learns host 2's MAC (Hayate's next hop) from a ping on the underlay.
    assert!(
        ns_run(&h1, &["ping", "-c", "2", "-W", "1", UNDERLAY_2])
            .status
            .success(),
        "underlay ping"
    );
    let mut ok = false;
    for _ in 0..10 {
        if vm1.reaches("10.77.0.2") {
            ok = true;
            break;
        }
    }
    assert!(ok, "{kind}: VM 1 -> VM 2; log: {}", hayate.log_text());
    assert!(vm1.ping("10.77.0.2", 3), "{kind}: ping VM 1 -> VM 2");
    assert!(
        ns_run(&vm2_ns, &["ping", "-c", "3", "-W", "1", "10.77.0.1"])
            .status
            .success(),
        "{kind}: ping VM 2 -> VM 1"
    );
    let server = IperfServer::start(&vm2_ns);
    let v = iperf3(&vm1, &["-c", "10.77.0.2", "-t", "2"]);
    server.reap();
    let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    eprintln!("iperf3 TCP VM 1 -> VM 2 through the {kind} tunnel: {bytes} bytes in 2 s");
    assert!(
        bytes > 1_000_000,
        "{kind}: TCP through the tunnel: {bytes} bytes"
    );
    if kind == "vxlan" {
        // A VNI no port of Hayate's accepts: counted and dropped (and said in the log).
        let vx43 = format!("{}vx43", net.prefix);
        must(&[
            "ip", "-n", &h2, "link", "add", &vx43, "type", "vxlan", "id", "43", "remote",
            UNDERLAY_1, "local", UNDERLAY_2, "dstport", "4789", "dev", &u2,
        ]);
        must(&["ip", "-n", &h2, "addr", "add", "10.78.0.2/24", "dev", &vx43]);
        must(&["ip", "-n", &h2, "link", "set", &vx43, "up"]);
        let ping = ns_run(&h2, &["ping", "-c", "2", "-W", "1", "10.78.0.1"]);
        assert!(!ping.status.success(), "nobody answers on VNI 43");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !hayate.log_text().contains("tunnel_no_port=") && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert!(
            hayate.log_text().contains("tunnel_no_port="),
            "unknown VNI counted: {}",
            hayate.log_text()
        );
    }
    hayate.stop();
}

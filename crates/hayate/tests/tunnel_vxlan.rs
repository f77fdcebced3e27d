//! Hayate's VXLAN and Geneve tunnels against the Linux kernel's devices (issue 18), over an
//! IPv4 underlay. Host 1 is a namespace running `hayate run` with a VM port (a veth to
//! namespace "vm1"), an AF_PACKET underlay port and a `vxlan:` / `geneve:` port; host 2 is a
//! namespace with a kernel VXLAN / Geneve device (VNI 42) in a Linux bridge with its own VM
//! namespace. The hosts are joined by an underlay veth pair whose addresses the hosts'
//! kernels own (Hayate's next hop comes from host 1's routing and neighbour tables). The VMs
//! ping each other both ways and run iperf3 TCP through the tunnel (`netns/tunnel.rs`).
//! `tunnel_ipv6.rs` does the same with inner IPv6 and an IPv6 underlay.

mod netns;

use netns::tunnel::{TwoHosts, UNDERLAY_V4, VNI};
use netns::{must, ns_run, Net};

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
    let hosts = TwoHosts::new(&mut net, UNDERLAY_V4, false, true);
    let vm1 = hosts.vm1(&mut net);
    let Some(vm2_ns) = hosts.kernel_peer(&mut net, kind) else {
        return;
    };
    let spec = format!("{kind}:remote={},vni={VNI}", UNDERLAY_V4.two);
    let hayate = hosts.hayate(&net, &vm1, &spec);
    hosts.check_traffic(kind, &vm1, &vm2_ns, &hayate);
    if kind == "vxlan" {
        // A VNI no port of Hayate's accepts: counted and dropped (and said in the log).
        let (h2, u2) = (&hosts.h2, &hosts.u2);
        let vx43 = format!("{}vx43", net.prefix);
        must(&[
            "ip",
            "-n",
            h2,
            "link",
            "add",
            &vx43,
            "type",
            "vxlan",
            "id",
            "43",
            "remote",
            UNDERLAY_V4.one,
            "local",
            UNDERLAY_V4.two,
            "dstport",
            "4789",
            "dev",
            u2,
        ]);
        must(&["ip", "-n", h2, "addr", "add", "10.78.0.2/24", "dev", &vx43]);
        must(&["ip", "-n", h2, "link", "set", &vx43, "up"]);
        let ping = ns_run(h2, &["ping", "-c", "2", "-W", "1", "10.78.0.1"]);
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

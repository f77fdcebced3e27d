//! Hayate's VXLAN tunnel and IPv6 (issue 18), against a Linux kernel VXLAN device as in
//! `tunnel_vxlan.rs`: VMs with IPv4 and IPv6 addresses ping each other both ways in both
//! families and run iperf3 TCP in both, first over an IPv4 underlay (inner IPv6: neighbour
//! discovery and all through the tunnel), then over an IPv6 underlay (`remote=2001:db8::2`;
//! outer UDP checksums on, as both ends default to over IPv6).

mod netns;

use netns::tunnel::{TwoHosts, UnderlayAddrs, UNDERLAY_V4, UNDERLAY_V6, VNI};
use netns::Net;

#[test]
fn inner_ipv6_through_vxlan_over_an_ipv4_underlay() {
    if !netns::can_run("tunnel_ipv6_inner", &["ping", "iperf3", "ethtool"]) {
        return;
    }
    across(UNDERLAY_V4, "vxlan, IPv4 underlay");
}

#[test]
fn both_families_through_vxlan_over_an_ipv6_underlay() {
    if !netns::can_run("tunnel_ipv6_underlay", &["ping", "iperf3", "ethtool"]) {
        return;
    }
    across(UNDERLAY_V6, "vxlan, IPv6 underlay");
}

/// Dual-stack VMs across Hayate's `vxlan:` port and the kernel's VXLAN device over `under`.
fn across(under: UnderlayAddrs, what: &str) {
    let mut net = Net::new();
    let hosts = TwoHosts::new(&mut net, under, true, true);
    let vm1 = hosts.vm1(&mut net);
    let vm2_ns = hosts
        .kernel_peer(&mut net, "vxlan")
        .expect("the kernel has VXLAN devices");
    let spec = format!("vxlan:remote={},vni={VNI}", under.two);
    let hayate = hosts.hayate(&net, &vm1, &spec);
    hosts.check_traffic(what, &vm1, &vm2_ns, &hayate);
    hayate.stop();
}

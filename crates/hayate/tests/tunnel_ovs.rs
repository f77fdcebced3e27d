//! Hayate's VXLAN and Geneve tunnels against Open vSwitch's (issue 18). Host 1 runs Hayate
//! as in `tunnel_vxlan.rs`; host 2 runs Open vSwitch's userspace datapath (no kernel module:
//! this kernel has neither Open vSwitch's module nor Geneve devices, so Open vSwitch's Geneve
//! port stands in for the kernel's) set up for userspace tunnelling as its documentation
//! says: the underlay interface on bridge `brphy`, host 2's underlay address on that bridge's
//! internal port, and bridge `brint` with VM 2's veth and a `type=vxlan` / `type=geneve`
//! port. The VMs ping each other both ways and run iperf3 TCP through the tunnel, over an
//! IPv4 underlay and over an IPv6 one (there with IPv6 inside too).
//!
//! The Geneve case carries an option each way: Hayate sends class 0xffff type 1 with
//! 0x11223344 on every frame, and Open vSwitch's `brint` passes tunnel frames to VM 2 only
//! when `tun_metadata0` holds it (others hit a drop flow that must count nothing); Open
//! vSwitch sends 0xaabbccdd back, which Hayate must accept.

mod netns;

use netns::ovs::{self, Ovs};
use netns::tunnel::{add_addr, ns_ping, TwoHosts, UnderlayAddrs, UNDERLAY_V4, UNDERLAY_V6, VNI};
use netns::{must, Net};

#[test]
fn vms_across_hayate_and_open_vswitch_vxlan_ping_and_run_tcp() {
    if !can_run("tunnel_ovs_vxlan") {
        return;
    }
    across("vxlan", UNDERLAY_V4);
}

#[test]
fn vms_across_hayate_and_open_vswitch_geneve_with_options_ping_and_run_tcp() {
    if !can_run("tunnel_ovs_geneve") {
        return;
    }
    across("geneve", UNDERLAY_V4);
}

#[test]
fn dual_stack_vms_across_hayate_and_open_vswitch_vxlan_over_ipv6() {
    if !can_run("tunnel_ovs_vxlan6") {
        return;
    }
    across("vxlan", UNDERLAY_V6);
}

#[test]
fn dual_stack_vms_across_hayate_and_open_vswitch_geneve_over_ipv6() {
    if !can_run("tunnel_ovs_geneve6") {
        return;
    }
    across("geneve", UNDERLAY_V6);
}

fn can_run(test: &str) -> bool {
    if let Some(why) = ovs::unavailable() {
        eprintln!("SKIPPED {test}: {why}");
        return false;
    }
    netns::can_run(
        test,
        &[
            "ping",
            "iperf3",
            "ethtool",
            "ovs-vsctl",
            "ovs-ofctl",
            "ovs-appctl",
            "ovsdb-server",
        ],
    )
}

/// The Geneve option Hayate sends: class 0xffff, type 1, 4 bytes of data.
const HAYATE_OPTION: &str = "ffff010111223344";
/// Open vSwitch's mapping of that option to `tun_metadata0`.
const TLV_MAP: &str = "{class=0xffff,type=0x01,len=4}->tun_metadata0";

/// VMs across Hayate's `kind` port and Open vSwitch's over `under` (dual-stack VMs over an
/// IPv6 underlay).
fn across(kind: &str, under: UnderlayAddrs) {
    let mut net = Net::new();
    let v6 = under.one.contains(':');
    let hosts = TwoHosts::new(&mut net, under, v6, false);
    let vm1 = hosts.vm1(&mut net);
    let (vm2_ns, b2) = hosts.vm2(&mut net);
    let ovs = Ovs::start(&hosts.h2, &net.dir.path().join("ovs"));
    let mac = must(&[
        "ip",
        "netns",
        "exec",
        &hosts.h2,
        "cat",
        &format!("/sys/class/net/{}/address", hosts.u2),
    ]);
    let hwaddr = format!("other_config:hwaddr={}", mac.trim());
    ovs.vsctl(&[
        "add-br",
        "brphy",
        "--",
        "set",
        "bridge",
        "brphy",
        "datapath_type=netdev",
        &hwaddr,
        "--",
        "add-port",
        "brphy",
        &hosts.u2,
    ]);
    let remote = format!("options:remote_ip={}", under.one);
    let key = format!("options:key={VNI}");
    let tun_type = format!("type={kind}");
    ovs.vsctl(&[
        "add-br",
        "brint",
        "--",
        "set",
        "bridge",
        "brint",
        "datapath_type=netdev",
        "--",
        "add-port",
        "brint",
        &b2,
        "--",
        "set",
        "interface",
        &b2,
        "ofport_request=1",
        "--",
        "add-port",
        "brint",
        "tun",
        "--",
        "set",
        "interface",
        "tun",
        &tun_type,
        &remote,
        &key,
        "ofport_request=2",
    ]);
    add_addr(&hosts.h2, "brphy", under.two, under.prefix);
    must(&["ip", "-n", &hosts.h2, "link", "set", "brphy", "up"]);
    if kind == "geneve" {
        ovs.ofctl("add-tlv-map", "brint", &[TLV_MAP]);
        ovs.ofctl(
            "add-flow",
            "brint",
            &["priority=100,in_port=2,tun_metadata0=0x11223344,actions=output:1"],
        );
        ovs.ofctl("add-flow", "brint", &["priority=50,in_port=2,actions=drop"]);
        ovs.ofctl(
            "add-flow",
            "brint",
            &["priority=100,in_port=1,actions=set_field:0xaabbccdd->tun_metadata0,output:2"],
        );
    }
    let mut spec = format!("{kind}:remote={},vni={VNI}", under.two);
    if kind == "geneve" {
        spec += &format!(",options={HAYATE_OPTION}");
    }
    let hayate = hosts.hayate(&net, &vm1, &spec);
    // Open vSwitch's tunnel next hop: it learns host 1's MAC from the ARP packets and the
    // IPv6 neighbour advertisements it sees on brphy. Host 2's kernel may already hold host
    // 1's MAC (from host 1's own resolution), and then sends no solicitation that host 1
    // would answer: forget it first.
    must(&["ip", "-n", &hosts.h2, "neigh", "flush", "dev", "brphy"]);
    assert!(
        ns_ping(&hosts.h2, under.one, 2),
        "underlay ping from Open vSwitch's host; {}",
        ovs.log()
    );
    let neigh = ovs.appctl(&["tnl/neigh/show"]);
    assert!(neigh.contains(under.one), "tnl/neigh/show: {neigh}");
    hosts.check_traffic(&format!("{kind} to Open vSwitch"), &vm1, &vm2_ns, &hayate);
    if kind == "geneve" {
        let flows = ovs.ofctl("dump-flows", "brint", &[]);
        let count = |needle: &str| -> u64 {
            let line = flows
                .lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no flow with {needle}: {flows}"));
            let n = line.split("n_packets=").nth(1).expect("n_packets");
            n[..n.find(',').expect("n_packets=N,")]
                .parse()
                .expect("a count")
        };
        assert!(
            count("tun_metadata0=0x11223344") > 0,
            "Hayate's option reached Open vSwitch: {flows}"
        );
        assert_eq!(
            count("priority=50"),
            0,
            "every frame from Hayate carried its option: {flows}"
        );
    }
    hayate.stop();
}

//! Two access VLANs across a trunk between two Hayate instances: hosts a1/b1 in VLAN 10 and
//! a2/b2 in VLAN 20, all in one IPv4 subnet. a1, a2 hang off switch 1, b1, b2 off switch 2;
//! a veth trunk (AF_PACKET on both ends) joins the switches and carries 802.1Q tags.
//! Same-VLAN hosts ping; cross-VLAN hosts do not; counters add up on every port.

mod netns;

use netns::{freeze, port, Net, PortKind};

/// Flows of one switch: port 1 is the VLAN 10 access port, 2 the VLAN 20 one, 3 the trunk.
const FLOWS: [&str; 4] = [
    "priority=10,in_port=1,actions=push_vlan:0x8100,mod_vlan_vid:10,output:3",
    "priority=10,in_port=2,actions=push_vlan:0x8100,mod_vlan_vid:20,output:3",
    "priority=10,in_port=3,dl_vlan=10,actions=pop_vlan,output:1",
    "priority=10,in_port=3,dl_vlan=20,actions=pop_vlan,output:2",
];

#[test]
fn same_vlan_pings_and_cross_vlan_does_not() {
    if !netns::can_run("netns_vlan", &["ping"]) {
        return;
    }
    for kind in PortKind::ALL {
        let mut net = Net::new();
        let sw1 = net.switch_ns("s1");
        let sw2 = net.switch_ns("s2");
        let a1 = net.link(kind, "a1", &sw1, &["10.7.0.1/24"]);
        let a2 = net.link(kind, "a2", &sw1, &["10.7.0.3/24"]);
        let b1 = net.link(kind, "b1", &sw2, &["10.7.0.2/24"]);
        let b2 = net.link(kind, "b2", &sw2, &["10.7.0.4/24"]);
        let (t1, t2) = net.trunk(&sw1, &sw2, "t");
        let (t1, t2) = (PortKind::AfPacket.spec(&t1), PortKind::AfPacket.spec(&t2));
        let h1 = net.hayate(&sw1, &[a1.spec(), a2.spec(), t1.clone()], &FLOWS, &[0]);
        let h2 = net.hayate(&sw2, &[b1.spec(), b2.spec(), t2.clone()], &FLOWS, &[1]);
        for (l, sw) in [(&a1, &sw1), (&a2, &sw1), (&b1, &sw2), (&b2, &sw2)] {
            net.configure(l, sw);
        }

        assert!(a1.ping("10.7.0.2", 3), "{kind:?}: VLAN 10 a1 -> b1");
        assert!(b2.ping("10.7.0.3", 3), "{kind:?}: VLAN 20 b2 -> a2");
        assert!(
            !a1.reaches("10.7.0.4"),
            "{kind:?}: a1 (VLAN 10) reached b2 (VLAN 20)"
        );
        assert!(
            !b1.reaches("10.7.0.3"),
            "{kind:?}: b1 (VLAN 10) reached a2 (VLAN 20)"
        );
        assert!(
            !a2.reaches("10.7.0.2"),
            "{kind:?}: a2 (VLAN 20) reached b1 (VLAN 10)"
        );

        let hosts = freeze(&[&a1, &a2, &b1, &b2]);
        let (s1, s2) = (h1.stop(), h2.stop());
        for ((link, stats), (h_rx, h_tx, _, _)) in [(&a1, &s1), (&a2, &s1), (&b1, &s2), (&b2, &s2)]
            .iter()
            .zip(hosts)
        {
            let p = port(stats, &link.spec());
            assert_eq!(
                p.rx_packets,
                h_tx,
                "{kind:?} {}: switch rx = host tx",
                link.spec()
            );
            assert_eq!(
                p.tx_packets,
                h_rx,
                "{kind:?} {}: switch tx = host rx",
                link.spec()
            );
        }
        // Everything from the access ports went onto the trunk with a 4-byte tag, and the
        // other switch received all of it.
        for (stats, access, trunk, other, other_trunk) in [
            (&s1, [&a1, &a2], &t1, &s2, &t2),
            (&s2, [&b1, &b2], &t2, &s1, &t1),
        ] {
            let rx: Vec<_> = access.iter().map(|l| *port(stats, &l.spec())).collect();
            let (pkts, bytes) = rx
                .iter()
                .fold((0, 0), |(p, b), c| (p + c.rx_packets, b + c.rx_bytes));
            let t = port(stats, trunk);
            eprintln!("{kind:?} {trunk}: {t:?}");
            assert_eq!(t.tx_packets, pkts, "{kind:?}: trunk tx = access rx");
            assert_eq!(
                t.tx_bytes,
                bytes + 4 * pkts,
                "{kind:?}: each trunk frame is tagged"
            );
            assert_eq!(
                port(other, other_trunk).rx_packets,
                pkts,
                "{kind:?}: the other switch got every trunk frame"
            );
        }
    }
}

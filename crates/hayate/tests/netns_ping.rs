//! Two hosts through one standalone (L2 learning) Hayate: ARP + ping, IPv6 neighbour
//! discovery + ping6, and the switch's port counters equal what the hosts sent and got —
//! for every port kind.

mod netns;

use netns::{freeze, port, Net, PortKind};

#[test]
fn ping_and_ping6_through_the_switch_with_exact_counters() {
    if !netns::can_run("netns_ping", &["ping"]) {
        return;
    }
    for kind in PortKind::ALL {
        let mut net = Net::new();
        let sw = net.switch_ns("sw");
        let a = net.link(kind, "a", &sw, &["10.9.0.1/24", "fd09::1/64"]);
        let b = net.link(kind, "b", &sw, &["10.9.0.2/24", "fd09::2/64"]);
        let hayate = net.hayate(&sw, &[a.spec(), b.spec()], &[], &[1]);
        net.configure(&a, &sw);
        net.configure(&b, &sw);

        assert!(a.ping("10.9.0.2", 5), "{kind:?}: ARP + ping a -> b");
        assert!(b.ping("10.9.0.1", 3), "{kind:?}: ping b -> a");
        assert!(a.ping("fd09::2", 5), "{kind:?}: ND + ping6 a -> b");
        assert!(b.ping("fd09::1", 3), "{kind:?}: ping6 b -> a");

        let hosts = freeze(&[&a, &b]);
        let stats = hayate.stop();
        for (link, (h_rx, h_tx, h_rx_bytes, h_tx_bytes)) in [&a, &b].iter().zip(hosts) {
            let p = port(&stats, &link.spec());
            eprintln!(
                "{kind:?} {}: host sent {h_tx} ({h_tx_bytes} B) got {h_rx} ({h_rx_bytes} B); \
                 switch rx {} ({} B) tx {} ({} B)",
                link.host_if, p.rx_packets, p.rx_bytes, p.tx_packets, p.tx_bytes
            );
            assert_eq!(
                p.rx_packets,
                h_tx,
                "{kind:?} {}: switch rx = host tx",
                link.spec()
            );
            // A veth whose peer runs XDP (AF_XDP) counts its tx bytes after the Ethernet
            // header was pulled: 14 bytes a frame short of what went on the wire.
            let quirk = if kind == PortKind::AfXdp {
                14 * h_tx
            } else {
                0
            };
            assert_eq!(p.rx_bytes, h_tx_bytes + quirk, "{kind:?}: rx bytes");
            assert_eq!(
                p.tx_packets,
                h_rx,
                "{kind:?} {}: switch tx = host rx",
                link.spec()
            );
            assert_eq!(p.tx_bytes, h_rx_bytes, "{kind:?}: tx bytes");
            assert_eq!(p.rx_errors, 0, "{kind:?}: rx errors");
            // At least the 16 echo requests or replies each way plus ARP/ND.
            assert!(p.rx_packets >= 18, "{kind:?}: {p:?}");
        }
    }
}

/// Ports with two queues each, served by two poll threads: queues are spread over the threads
/// (AF_PACKET fanout / multi-queue tap), each thread sends on its own tx queue, and counters
/// sum over the queues.
#[test]
fn two_queues_on_two_threads() {
    if !netns::can_run("netns_ping two queues", &["ping"]) {
        return;
    }
    for kind in PortKind::ALL {
        let mut net = Net::new();
        let sw = net.switch_ns("sw");
        let a = net.link_queues(kind, "a", &sw, &["10.9.1.1/24", "fd09:1::1/64"], 2);
        let b = net.link_queues(kind, "b", &sw, &["10.9.1.2/24", "fd09:1::2/64"], 2);
        let (sa, sb) = (
            format!("{},queues=2", a.spec()),
            format!("{},queues=2", b.spec()),
        );
        let hayate = net.hayate(&sw, &[sa.clone(), sb.clone()], &[], &[0, 1]);
        net.configure(&a, &sw);
        net.configure(&b, &sw);
        assert!(a.ping("10.9.1.2", 3), "{kind:?}: ping a -> b");
        assert!(b.ping("fd09:1::1", 3), "{kind:?}: ping6 b -> a");
        let hosts = freeze(&[&a, &b]);
        let stats = hayate.stop();
        for (spec, (h_rx, h_tx, _, _)) in [&sa, &sb].iter().zip(hosts) {
            let p = port(&stats, spec);
            assert_eq!(
                (p.rx_packets, p.tx_packets),
                (h_tx, h_rx),
                "{kind:?} {spec}"
            );
        }
    }
}

/// `lane_core` puts the priority lane (the thread serving ARP, ICMP and TCP SYNs) on a core
/// of its own, away from the poll thread's; pings still cross with exact counters.
#[test]
fn the_priority_lane_runs_on_the_core_it_is_given() {
    if !netns::can_run("netns_ping lane_core", &["ping"]) {
        return;
    }
    let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let a = net.link(PortKind::AfPacket, "a", &sw, &["10.9.2.1/24"]);
    let b = net.link(PortKind::AfPacket, "b", &sw, &["10.9.2.2/24"]);
    let hayate = net.hayate_with(&sw, &[a.spec(), b.spec()], &[], &[last], "lane_core = 0");
    net.configure(&a, &sw);
    net.configure(&b, &sw);
    assert!(a.ping("10.9.2.2", 3), "ping a -> b");
    assert_eq!(hayate.thread_cpus("hayate-lane").as_deref(), Some("0"));
    assert_eq!(
        hayate.thread_cpus("hayate-pmd0").as_deref(),
        Some(last.to_string().as_str())
    );
    let hosts = freeze(&[&a, &b]);
    let stats = hayate.stop();
    for (spec, (h_rx, h_tx, _, _)) in [a.spec(), b.spec()].iter().zip(hosts) {
        let p = port(&stats, spec);
        assert_eq!((p.rx_packets, p.tx_packets), (h_tx, h_rx), "{spec}");
    }
}

//! Receive offload (`gro`): a TCP stream that reaches Hayate in MTU-sized segments (host A
//! behind an AF_XDP port, which takes no super-packets, so A's kernel cuts them) leaves
//! towards host B's AF_PACKET port with virtio-net headers as super-packets that B's kernel
//! takes whole, as a Linux bridge behind a NIC with GRO would deliver them.
//!
//! Asserted, with the default (`gro` on): the stream crosses; Hayate made super-packets
//! (`gro_supers`) of more than one segment each on average; B's interface received fewer
//! packets than A's sent (each super-packet is one). With `gro = false` on the bridge: the
//! stream crosses and nothing is joined. Throughput of both is printed, not asserted.

mod netns;

use netns::{iperf3, pmd_counter, IperfServer, Link, Net, PortKind};

/// A 3-second iperf3 stream from `a` to `b` (at 10.9.0.2): bytes received, Gbit/s.
fn stream(a: &Link, b: &Link) -> (u64, f64) {
    let s = IperfServer::start(&b.host_ns);
    let v = iperf3(a, &["-c", "10.9.0.2", "-t", "3"]);
    s.reap();
    let r = &v["end"]["sum_received"];
    (
        r["bytes"].as_u64().unwrap_or(0),
        r["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9,
    )
}

#[test]
fn segments_reach_a_vnet_port_joined_into_super_packets() {
    if !netns::can_run("netns_gro", &["ping", "iperf3", "ethtool"]) {
        return;
    }
    for gro in [true, false] {
        let mut net = Net::new();
        let sw = net.switch_ns("sw");
        let a = net.link(PortKind::AfXdp, "a", &sw, &["10.9.0.1/24"]);
        let b = net.link(PortKind::AfPacket, "b", &sw, &["10.9.0.2/24"]);
        let toml = if gro { "" } else { "gro = false" };
        let _h = net.hayate_with(&sw, &[a.spec(), b.spec()], &[], &[1], toml);
        net.configure(&a, &sw);
        net.configure(&b, &sw);
        assert!(a.ping("10.9.0.2", 2), "gro={gro}: ping");
        let (a_tx0, b_rx0) = (a.counters().1, b.counters().0);
        let (bytes, gbps) = stream(&a, &b);
        let (a_tx, b_rx) = (a.counters().1 - a_tx0, b.counters().0 - b_rx0);
        let pmd = net.ctl("br0", &["dump-pmd"]);
        let (supers, segs) = (
            pmd_counter(&pmd, "gro_supers"),
            pmd_counter(&pmd, "gro_segments"),
        );
        eprintln!(
            "gro={gro}: {gbps:.2} Gbit/s, {bytes} bytes; A sent {a_tx} packets, B received \
             {b_rx}; {supers} super-packets of {segs} segments"
        );
        assert!(bytes > 1_000_000, "gro={gro}: the stream crossed: {bytes}");
        if gro {
            assert!(supers > 0 && segs > supers, "joined: {pmd}");
            assert!(
                b_rx < a_tx,
                "B received fewer packets ({b_rx}) than A sent ({a_tx})"
            );
        } else {
            assert_eq!((supers, segs), (0, 0), "nothing joined: {pmd}");
        }
    }
}

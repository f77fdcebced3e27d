//! iperf3 TCP and UDP streams between two hosts through Hayate, with the hosts' checksum and
//! segmentation offloads ON (AF_PACKET and TAP ports carry TCP super-packets whole and ask the
//! receiving kernel to cut them, `packet::gso`, `port::vnet`; AF_XDP ports complete partial
//! checksums, `port::partial_csum`). Throughput is printed, not asserted; arrival and counters are asserted.

mod netns;

use netns::{freeze, iperf3, port, IperfServer, Link, Net, PortKind};

fn offloads_on(link: &Link) -> bool {
    feature_on(link, "tcp-segmentation-offload")
}

/// Whether `ethtool -k` shows `feature` on for the host's interface.
fn feature_on(link: &Link, feature: &str) -> bool {
    let out = link.run(&["ethtool", "-k", &link.host_if]);
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .any(|l| l.trim_start().starts_with(&format!("{feature}: on")))
}

#[test]
fn iperf3_tcp_and_udp_with_host_offloads_on() {
    if !netns::can_run("netns_iperf", &["ping", "iperf3", "ethtool"]) {
        return;
    }
    for kind in PortKind::ALL {
        let mut net = Net::new();
        let sw = net.switch_ns("sw");
        let a = net.link(kind, "a", &sw, &["10.8.0.1/24"]);
        let b = net.link(kind, "b", &sw, &["10.8.0.2/24"]);
        let hayate = net.hayate(&sw, &[a.spec(), b.spec()], &[], &[1]);
        net.configure(&a, &sw);
        net.configure(&b, &sw);
        if kind.carries_tso() {
            assert!(offloads_on(&a), "{kind:?}: TSO is off on {}", a.host_if);
        } else {
            // The kernel turns TSO off on a veth whose peer runs XDP; checksum offload stays
            // on (the default), so the switch must complete the partial checksums.
            for l in [&a, &b] {
                assert!(
                    feature_on(l, "tx-checksumming"),
                    "{kind:?}: checksum offload is off on {}",
                    l.host_if
                );
            }
        }
        assert!(a.ping("10.8.0.2", 2), "{kind:?}: ping before iperf3");

        let secs = if kind != PortKind::Tap { "10" } else { "5" };
        let s = IperfServer::start(&b.host_ns);
        let tcp = iperf3(&a, &["-c", "10.8.0.2", "-t", secs]);
        s.reap();
        let tcp_bytes = tcp["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        let tcp_bps = tcp["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        eprintln!(
            "{kind:?}: iperf3 TCP {secs} s: {:.2} Gbit/s received ({tcp_bytes} bytes)",
            tcp_bps / 1e9
        );
        assert!(tcp_bytes > 1_000_000, "{kind:?}: TCP stream: {tcp}");

        let s = IperfServer::start(&b.host_ns);
        let udp = iperf3(
            &a,
            &[
                "-c", "10.8.0.2", "-u", "-b", "200M", "-l", "1400", "-t", "3",
            ],
        );
        s.reap();
        let sum = &udp["end"]["sum"];
        let (packets, lost) = (
            sum["packets"].as_u64().unwrap_or(0),
            sum["lost_packets"].as_u64().unwrap_or(0),
        );
        eprintln!(
            "{kind:?}: iperf3 UDP 200 Mbit/s offered, 3 s: {packets} datagrams, {lost} lost \
             ({:.2}%), {:.1} Mbit/s",
            sum["lost_percent"].as_f64().unwrap_or(0.0),
            sum["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6
        );
        assert!(
            packets > 1000 && lost < packets,
            "{kind:?}: UDP stream: {udp}"
        );

        let hosts = freeze(&[&a, &b]);
        let stats = hayate.stop();
        let (pa, pb) = (port(&stats, &a.spec()), port(&stats, &b.spec()));
        eprintln!("{kind:?}: switch port a {pa:?}\n{kind:?}: switch port b {pb:?}");
        assert_eq!(
            (pa.rx_errors, pb.rx_errors),
            (0, 0),
            "{kind:?}: refused frames"
        );
        // Every byte the hosts sent reached the switch (compared as a lower bound: the host
        // and the switch may count a super-packet's headers differently).
        assert!(
            pa.rx_bytes >= hosts[0].3,
            "{kind:?}: a sent {} bytes",
            hosts[0].3
        );
        assert!(
            pb.tx_packets == hosts[1].0,
            "{kind:?}: b got what the switch sent"
        );
        assert!(pa.rx_bytes >= tcp_bytes, "{kind:?}: TCP bytes");
        // The host handed over TCP super-packets (offloads on) and the switch carried them
        // whole: its packets are on average longer than an Ethernet frame.
        assert!(
            !kind.carries_tso() || pa.rx_bytes / pa.rx_packets.max(1) > 1514,
            "{kind:?}: the switch received {} packets of {} bytes: no super-packets?",
            pa.rx_packets,
            pa.rx_bytes
        );
        assert!(
            !kind.carries_tso() || pb.tx_bytes / pb.tx_packets.max(1) > 1514,
            "{kind:?}: the switch sent {} packets of {} bytes to b: cut up?",
            pb.tx_packets,
            pb.tx_bytes
        );
    }
}

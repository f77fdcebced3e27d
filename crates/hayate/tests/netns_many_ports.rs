//! Many ports on one switch, as a host with many VMs or containers has: every AF_PACKET port
//! with virtio-net headers keeps a 64 KiB super-packet frame ready for each message of its
//! receive batch (`port::afpacket::mmsg`; its priority socket, which never receives one,
//! none), and so does every TAP port for its next read. With 48 such ports besides the two a
//! TCP stream crosses (opened after them), the stream's
//! super-packets must still land whole: the sender's TSO on, its port counts no receive
//! error (a super-packet with no frame to land in is cut short and counted there), and the
//! stream crosses; the switch has no warning about its pools.
//!
//! And when the ports keep more frames ready than the pool has (`--pool-frames` too small for
//! 40 ports), the switch says so in its log, naming the option to raise.

mod netns;

use std::time::{Duration, Instant};

use netns::{port, IperfServer, Net, PortKind};

/// Ports opened before the stream's two.
const FILLERS: usize = 48;

#[test]
fn a_tcp_stream_through_the_last_of_fifty_afpacket_ports_lands_whole() {
    if !netns::can_run("netns_many_ports", &["iperf3", "ethtool"]) {
        return;
    }
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let mut specs: Vec<String> = (0..FILLERS)
        .map(|i| {
            let (a, _b) = net.trunk(&sw, &sw, &format!("f{i}"));
            PortKind::AfPacket.spec(&a)
        })
        .collect();
    let a = net.link(PortKind::AfPacket, "a", &sw, &["10.9.0.1/24"]);
    let b = net.link(PortKind::AfPacket, "b", &sw, &["10.9.0.2/24"]);
    specs.push(a.spec());
    specs.push(b.spec());
    // Port numbers follow the specs: the fillers first, then A and B.
    let (pa, pb) = (FILLERS + 1, FILLERS + 2);
    let flows = [
        format!("table=0,priority=10,in_port={pa},actions=output:{pb}"),
        format!("table=0,priority=10,in_port={pb},actions=output:{pa}"),
    ];
    let flows: Vec<&str> = flows.iter().map(String::as_str).collect();
    let h = net.hayate(&sw, &specs, &flows, &[1]);
    net.configure(&a, &sw);
    net.configure(&b, &sw);
    // A's kernel hands its port super-packets (TSO on its veth).
    netns::ns_run(
        &a.host_ns,
        &["ethtool", "-K", &a.host_if, "tso", "on", "gso", "on"],
    );
    assert!(a.ping("10.9.0.2", 2), "ping across");
    let s = IperfServer::start(&b.host_ns);
    let v = netns::iperf3(&a, &["-c", "10.9.0.2", "-t", "2"]);
    s.reap();
    let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let log = h.log_text();
    let stats = h.stop();
    let pa = port(&stats, &a.spec());
    eprintln!("{bytes} bytes crossed; A's port: {pa:?}");
    assert!(bytes > 1_000_000, "the stream crossed: {bytes} bytes");
    assert!(!log.contains("ran out"), "no pool ran dry: {log}");
    assert_eq!(
        pa.rx_errors, 0,
        "no super-packet cut short on A's port (one with no frame to land in is): {pa:?}"
    );
    assert!(
        pa.rx_bytes / pa.rx_packets.max(1) > 3000,
        "A's port received super-packets (average {} bytes)",
        pa.rx_bytes / pa.rx_packets.max(1)
    );
}

#[test]
fn a_pool_too_small_for_its_ports_is_reported_with_the_option_to_raise() {
    if !netns::can_run("netns_many_ports_dry", &["ip"]) {
        return;
    }
    let mut net = Net::new();
    // 40 AF_PACKET ports keep some 40 × 128 frames ready for what they will receive.
    net.pool_frames = 2048;
    let sw = net.switch_ns("sw");
    let specs: Vec<String> = (0..40)
        .map(|i| {
            let (a, _b) = net.trunk(&sw, &sw, &format!("d{i}"));
            PortKind::AfPacket.spec(&a)
        })
        .collect();
    let h = net.hayate(&sw, &specs, &[], &[1]);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !h.log_text().contains("raise --pool-frames") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = h.log_text();
    assert!(
        log.contains("the packet pool ran out of frames")
            && log.contains("raise --pool-frames (now 2048)"),
        "a warning naming the fix: {log}"
    );
}

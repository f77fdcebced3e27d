//! iperf3 TCP and UDP streams between two hosts through Hayate, with the hosts' checksum and
//! segmentation offloads ON (AF_PACKET and TAP ports carry TCP super-packets whole and ask the
//! receiving kernel to cut them, `packet::gso`, `port::vnet`; AF_XDP ports complete partial
//! checksums, `port::partial_csum`). Throughput is printed, not asserted; arrival and counters are asserted.

mod netns;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netns::{freeze, port, Link, Net, PortKind};
use serde_json::Value;

/// `iperf3 -s -1` in the host's namespace (serves one test, then exits).
fn server(link: &Link) -> Child {
    let child = Command::new("ip")
        .args(["netns", "exec", &link.host_ns, "iperf3", "-s", "-1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start iperf3 server");
    // Wait (bounded) until it listens: on a busy machine starting takes seconds.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let out = link.run(&["ss", "-Hltn", "sport = :5201"]);
        if !out.stdout.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Runs an iperf3 client (retrying for ≤ 10 s while the server starts); returns its JSON.
fn client(link: &Link, args: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut full = vec!["timeout", "40", "iperf3", "-J"];
        full.extend_from_slice(args);
        let out = link.run(&full);
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let refused = json["error"]
            .as_str()
            .is_some_and(|e| e.contains("connect"));
        if out.status.success() || !refused || Instant::now() > deadline {
            assert!(
                out.status.success(),
                "iperf3 {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout)
            );
            return json;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn reap(mut c: Child) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

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
        let s = server(&b);
        let tcp = client(&a, &["-c", "10.8.0.2", "-t", secs]);
        reap(s);
        let tcp_bytes = tcp["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        let tcp_bps = tcp["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        eprintln!(
            "{kind:?}: iperf3 TCP {secs} s: {:.2} Gbit/s received ({tcp_bytes} bytes)",
            tcp_bps / 1e9
        );
        assert!(tcp_bytes > 1_000_000, "{kind:?}: TCP stream: {tcp}");

        let s = server(&b);
        let udp = client(
            &a,
            &[
                "-c", "10.8.0.2", "-u", "-b", "200M", "-l", "1400", "-t", "3",
            ],
        );
        reap(s);
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

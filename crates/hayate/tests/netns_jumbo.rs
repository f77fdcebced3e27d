//! Jumbo frames through Hayate on real veths (root): `hayate gen` sends 9000-byte frames on
//! an AF_PACKET port in one namespace, the switch (`--frame-size 16384`, AF_PACKET ports, MTU
//! 9000 everywhere) forwards them, and the generator's receive port counts every one, with
//! no loss, duplicates or reordering. With the default 2 KiB pool frames the same frames are
//! dropped by the switch and counted as receive errors, never forwarded cut short. Hosts
//! ping each other with 8000-byte packets that must not be fragmented.

mod netns;

use std::process::Command;

use netns::{must, ns_run, port, Net};

const HAYATE: &str = env!("CARGO_BIN_EXE_hayate");
const COUNT: u64 = 5_000;

/// Two veth pairs between the generator's namespace and the switch's, MTU 9000, up.
fn topology(net: &mut Net) -> (String, String, [String; 2], [String; 2]) {
    let (g, s) = (net.switch_ns("g"), net.switch_ns("s"));
    let gi = [format!("{}g0", net.prefix), format!("{}g1", net.prefix)];
    let si = [format!("{}s0", net.prefix), format!("{}s1", net.prefix)];
    for (a, b) in gi.iter().zip(&si) {
        must(&[
            "ip", "link", "add", a, "mtu", "9000", "netns", &g, "type", "veth", "peer", "name", b,
            "mtu", "9000", "netns", &s,
        ]);
        must(&["ip", "-n", &g, "link", "set", a, "up"]);
        must(&["ip", "-n", &s, "link", "set", b, "up"]);
    }
    (g, s, gi, si)
}

/// `hayate gen run` from `tx` to `rx` in namespace `ns`: COUNT frames of `size` bytes.
fn gen_run(ns: &str, tx: &str, rx: &str, size: u32) -> serde_json::Value {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, HAYATE, "gen", "run"])
        .args(["--tx", &format!("afpacket:{tx}")])
        .args(["--rx", &format!("afpacket:{rx}")])
        .args(["--size", &size.to_string(), "--rate", "20kpps"])
        .args(["--count", &COUNT.to_string(), "--duration", "20"])
        .args(["--drain", "0.5", "--json", "-", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hayate gen run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn jumbo_frames_cross_the_switch_whole() {
    if !netns::can_run("netns_jumbo", &[]) {
        return;
    }
    let mut net = Net::new();
    let (g, s, gi, si) = topology(&mut net);
    let ports: Vec<String> = si.iter().map(|i| format!("afpacket:{i}")).collect();
    let flows = ["in_port=1,actions=output:2", "in_port=2,actions=output:1"];

    net.run_args = vec!["--frame-size".into(), "16384".into()];
    let sw = net.hayate(&s, &ports, &flows, &[1]);
    let v = gen_run(&g, &gi[0], &gi[1], 9000);
    assert_eq!(v["tx_packets"], COUNT, "{v}");
    assert_eq!(v["rx_packets"], COUNT, "{v}");
    assert_eq!(v["rx_unique"], COUNT, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["duplicates"], 0, "{v}");
    assert_eq!(v["rx_bytes"], COUNT * 9000, "{v}");
    let stats = sw.stop();
    let (p1, p2) = (port(&stats, &ports[0]), port(&stats, &ports[1]));
    assert!(p1.rx_packets >= COUNT, "{p1:?}");
    assert!(p2.tx_packets >= COUNT, "{p2:?}");
    assert_eq!(p1.rx_errors, 0, "{p1:?}");

    // Default 2 KiB frames: too long, counted and dropped.
    net.run_args.clear();
    let sw = net.hayate(&s, &ports, &flows, &[1]);
    let v = gen_run(&g, &gi[0], &gi[1], 9000);
    assert_eq!(v["tx_packets"], COUNT, "{v}");
    assert_eq!(v["rx_packets"], 0, "{v}");
    let stats = sw.stop();
    let p1 = port(&stats, &ports[0]);
    assert!(p1.rx_errors >= COUNT, "{p1:?}");

    // Hosts on the same veths ping across the jumbo switch without fragmenting.
    net.run_args = vec!["--frame-size".into(), "16384".into()];
    let sw = net.hayate(&s, &ports, &flows, &[1]);
    let (a, b) = (net.ns("a"), net.ns("b"));
    for (i, (ifname, host)) in gi.iter().zip([&a, &b]).enumerate() {
        must(&["ip", "-n", &g, "link", "set", ifname, "netns", host]);
        let addr = format!("10.9.0.{}/24", i + 1);
        must(&["ip", "-n", host, "addr", "add", &addr, "dev", ifname]);
        must(&["ip", "-n", host, "link", "set", ifname, "up"]);
    }
    let out = ns_run(
        &a,
        &[
            "ping", "-c", "3", "-i", "0.2", "-W", "2", "-M", "do", "-s", "8000", "10.9.0.2",
        ],
    );
    assert!(
        out.status.success(),
        "8000-byte ping: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    drop(sw);
}

//! `hayate gen send --port xdplive:IF` on a real veth pair (root): every frame it reports sent
//! arrives at the peer, which receives through NAPI (GRO on), as the frame size it reports.

mod netns;

use std::process::Command;

use netns::{must, ns_run, Net};

const HAYATE: &str = env!("CARGO_BIN_EXE_hayate");

fn rx_packets(ns: &str, dev: &str) -> u64 {
    let out = ns_run(
        ns,
        &[
            "cat",
            &format!("/sys/class/net/{dev}/statistics/rx_packets"),
        ],
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn send(ns: &str, dev: &str, count: u64) -> serde_json::Value {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, HAYATE, "gen", "send"])
        .args(["--port", &format!("xdplive:{dev}"), "--size", "64"])
        .args(["--dst-mac", "02:00:00:00:99:99", "--duration", "20"])
        .args(["--count", &count.to_string(), "--json", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hayate gen send failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn xdplive_frames_arrive_at_a_napi_peer() {
    if !netns::can_run("netns_xdplive", &["ethtool"]) {
        return;
    }
    let mut net = Net::new();
    // IPv6 off: the interfaces' own ND/MLD frames would add to the count.
    let (g, k) = (net.switch_ns("g"), net.switch_ns("k"));
    let (g0, k0) = (format!("{}g0", net.prefix), format!("{}k0", net.prefix));
    must(&[
        "ip", "link", "add", &g0, "netns", &g, "type", "veth", "peer", "name", &k0, "netns", &k,
    ]);
    must(&["ip", "-n", &g, "link", "set", &g0, "up"]);
    must(&["ip", "-n", &k, "link", "set", &k0, "up"]);

    // With GRO on, the peer receives through NAPI: every frame arrives, none is dropped.
    must(&["ip", "netns", "exec", &k, "ethtool", "-K", &k0, "gro", "on"]);
    let before = rx_packets(&k, &k0);
    let v = send(&g, &g0, 200_000);
    assert_eq!(v["tx_packets"], 200_000);
    assert_eq!(v["frame"], 64);
    assert_eq!(rx_packets(&k, &k0) - before, 200_000);
}

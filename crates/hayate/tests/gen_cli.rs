//! Black-box tests of `hayate gen`: JSON out of loopback, run, send → pcap → recv, and
//! rfc2544 on a ring loop, plus errors that name the fix.

use std::process::Command;

const HAYATE: &str = env!("CARGO_BIN_EXE_hayate");

fn gen(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(HAYATE).arg("gen").args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> serde_json::Value {
    let (ok, out, err) = gen(args);
    assert!(ok, "hayate gen {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn run_counts_every_packet_of_a_ring_loop() {
    let v = json(&[
        "run", "--tx", "ring:t", "--rx", "ring:t", "--count", "50000", "--flows", "5", "--json",
    ]);
    assert_eq!(v["tx_packets"], 50_000);
    assert_eq!(v["rx_unique"], 50_000);
    assert_eq!(v["lost"], 0);
    assert_eq!(v["flows"].as_array().unwrap().len(), 5);
    assert!(v["latency"]["p50_ns"].as_u64().unwrap() > 0);
}

#[test]
fn loopback_reports_latency() {
    let v = json(&[
        "loopback",
        "--duration",
        "0.3",
        "--rate",
        "100kpps",
        "--json",
    ]);
    assert!(v["latency"]["samples"].as_u64().unwrap() > 10_000);
    assert_eq!(v["latency_kind"], "one-way");
}

#[test]
fn send_to_pcap_then_recv_finds_the_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("g.pcap");
    let out = format!("pcap:out={}", file.display());
    let v = json(&[
        "send", "--port", &out, "--count", "1000", "--proto", "udp6", "--size", "128", "--json",
    ]);
    assert_eq!(v["tx_packets"], 1000);
    let inp = format!("pcap:in={}", file.display());
    let v = json(&["recv", "--port", &inp, "--idle", "0.2", "--json"]);
    assert_eq!(v["rx_packets"], 1000);
    assert_eq!(v["rx_unique"], 1000);
    assert_eq!(v["lost"], 0);
}

#[test]
fn rfc2544_on_a_ring_loop_writes_json_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let json_file = dir.path().join("r.json");
    let plots = dir.path().join("plots");
    let (ok, out, err) = gen(&[
        "rfc2544",
        "--tx",
        "ring:r",
        "--rx",
        "ring:r",
        "--sizes",
        "64,1518",
        "--trial",
        "0.1",
        "--line-rate",
        "100M",
        "--no-frame-loss",
        "--b2b-secs",
        "0.01",
        "--json",
        json_file.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("RFC 2544"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    // 100 Mbit/s is far below what a ring carries: line rate passes at once (loosely: a
    // busy machine can starve the sender of a trial).
    assert!(results[0]["throughput_pct"].as_f64().unwrap() > 50.0, "{v}");
    assert!(plots.join("throughput.svg").exists());
    assert!(plots.join("latency-64.svg").exists());
}

#[test]
fn jumbo_frames_go_through_a_ring() {
    let v = json(&[
        "run", "--tx", "ring:j", "--rx", "ring:j", "--size", "9000", "--count", "1000", "--json",
    ]);
    assert_eq!(v["tx_packets"], 1000, "{v}");
    assert_eq!(v["rx_unique"], 1000, "{v}");
    assert_eq!(v["rx_bytes"], 9_000_000, "{v}");
}

#[test]
fn errors_name_the_fix() {
    let (ok, _, err) = gen(&["run", "--tx", "ring:e", "--rx", "ring:e", "--size", "17000"]);
    assert!(!ok);
    assert!(err.contains("give 64 to 16260 bytes"), "{err}");
    let (ok, _, err) = gen(&["recv", "--port", "ring:e", "--max-size", "20000"]);
    assert!(!ok);
    assert!(err.contains("largest pool frames hold 16260"), "{err}");
    let (ok, _, err) = gen(&["send", "--port", "null:sink", "--rate", "fast"]);
    assert!(!ok);
    assert!(err.contains("give max, line"), "{err}");
    let (ok, _, err) = gen(&["send", "--port", "bogus:x"]);
    assert!(!ok);
    assert!(err.contains("use one of"), "{err}");
    let (ok, _, err) = gen(&[
        "run", "--tx", "ring:f", "--rx", "ring:f", "--proto", "udp6", "--src-ip", "10.0.0.1",
    ]);
    assert!(!ok);
    assert!(err.contains("needs an IPv6 address"), "{err}");
}

#[test]
fn reflect_sends_frames_back_with_swapped_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.pcap"), dir.path().join("b.pcap"));
    let v = json(&[
        "send",
        "--port",
        &format!("pcap:out={}", a.display()),
        "--count",
        "10",
        "--json",
    ]);
    assert_eq!(v["tx_packets"], 10);
    let spec = format!("pcap:in={},out={}", a.display(), b.display());
    let v = json(&[
        "reflect",
        "--port",
        &spec,
        "--duration",
        "5",
        "--idle",
        "0.2",
        "--json",
    ]);
    assert_eq!(v["reflected"], 10);
    let back = std::fs::read(&b).unwrap();
    // First record after the 24-byte file header and 16-byte record header.
    assert_eq!(
        &back[40..46],
        &[2, 0, 0, 0, 0, 1],
        "destination is the old source"
    );
    assert_eq!(&back[46..52], &[2, 0, 0, 0, 0, 2]);
}

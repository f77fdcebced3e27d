//! Looking inside a running switch: `hayate ctl BRIDGE dump-megaflows`, `pmd-stats`,
//! `rxq-show` and `show`, on null ports whose source sends a known number of frames.

mod ofctl_common;

use std::time::{Duration, Instant};

use ofctl_common::Hayate;

/// 1,000 frames 10.0.0.1 → 10.0.0.2 (UDP) from port 1, forwarded to port 2.
const CONFIG: &str = r#"
[[bridge]]
name = "brl"
fail_mode = "secure"
flows = [
  "table=0,priority=100,udp,nw_src=10.0.0.0/8,actions=output:2",
  "table=0,priority=1,actions=drop",
]

[[bridge.port]]
name = "src"
spec = "null:limit=1000"

[[bridge.port]]
name = "dst"
spec = "null:sink"
"#;

/// Runs `ctl ARGS` until `done` holds for its output (counters reach dumps at the threads'
/// next maintenance pass); the last output.
fn until(h: &Hayate, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = h.ctl("brl", args);
        if done(&out) || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn megaflows_show_their_mask_actions_and_counts() {
    let h = Hayate::with_config(CONFIG);
    let out = until(&h, &["dump-megaflows"], |o| o.contains("packets:1000,"));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "one flow, one megaflow: {out}");
    let l = lines[0];
    assert!(l.starts_with("thread=0, "), "{l}");
    assert!(
        l.contains("nw_src=10.0.0.0/8"),
        "the mask the table consulted: {l}"
    );
    assert!(
        !l.contains("tp_dst"),
        "nothing the tables did not consult: {l}"
    );
    assert!(l.contains("packets:1000, bytes:64000"), "{l}");
    assert!(l.ends_with("actions:2"), "{l}");
    let json = h.ctl("brl", &["--json", "dump-megaflows"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["megaflows"][0]["packets"], 1000, "{json}");
    assert_eq!(v["megaflows"][0]["actions"], "2", "{json}");
}

#[test]
fn pmd_stats_count_since_a_reset() {
    let h = Hayate::with_config(CONFIG);
    let out = until(&h, &["pmd-stats"], |o| {
        o.contains("packets received: 1000\n")
    });
    assert!(out.starts_with("pmd thread 0 core "), "{out}");
    assert!(out.contains("  packets received: 1000\n"), "{out}");
    assert!(
        out.contains("  upcalls: 1 ("),
        "one new flow, one upcall: {out}"
    );
    assert!(out.contains("  packets sent: 1000\n"), "{out}");
    assert!(out.contains("  avg cycles per packet: "), "{out}");
    let json = h.ctl("brl", &["--json", "pmd-stats"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let t = &v["threads"][0];
    assert_eq!(t["packets"], 1000, "{json}");
    assert_eq!(t["upcalls"], 1, "{json}");
    // The batch that took the upcall is not a hit; every later one is.
    let hits = t["emc_hits"].as_u64().unwrap() + t["megaflow_hits"].as_u64().unwrap();
    assert!((1000 - 32..1000).contains(&hits), "{json}");
    // After a reset the source has stopped: nothing since.
    h.ctl("brl", &["pmd-stats", "--reset"]);
    let out = h.ctl("brl", &["pmd-stats"]);
    assert!(out.contains("  packets received: 0\n"), "{out}");
    // The raw counters (dump-pmd) are not reset.
    assert!(h.ctl("brl", &["dump-pmd"]).contains("  rx_packets: 1000\n"));
}

#[test]
fn rxq_show_puts_each_queue_on_its_thread() {
    let h = Hayate::with_config(CONFIG);
    let out = until(&h, &["rxq-show"], |o| o.contains("packets: 1000 "));
    assert!(out.starts_with("pmd thread 0 core "), "{out}");
    assert!(
        out.contains("  port: 1 (src)  queue-id: 0  packets: 1000  pmd usage: "),
        "{out}"
    );
    // null:sink has no rx queue.
    assert!(!out.contains("(dst)"), "{out}");
    let json = h.ctl("brl", &["--json", "rxq-show"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let usage = v["queues"][0]["usage_pct"].as_f64().unwrap();
    assert!(usage > 0.0 && usage <= 100.0, "{json}");
}

#[test]
fn show_lists_the_bridge_ports_and_controllers() {
    let h = Hayate::with_config(CONFIG);
    let out = h.ctl("brl", &["show"]);
    assert!(out.starts_with("Bridge brl\n"), "{out}");
    assert!(out.contains("    fail_mode: secure\n"), "{out}");
    assert!(out.contains("    Port 1 \"src\"\n"), "{out}");
    assert!(out.contains("    Port 2 \"dst\"\n"), "{out}");
    assert!(out.contains("config: 0, state: LIVE"), "{out}");
    assert!(out.contains("        is_connected: false"), "{out}");
    let json = h.ctl("brl", &["--json", "show"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["ports"].as_array().unwrap().len(), 2, "{json}");
    assert_eq!(v["ports"][1]["name"], "dst", "{json}");
    assert_eq!(v["fail_mode"], "secure", "{json}");

    // A controller connects: show lists it with its role.
    let mut session = h.session(Duration::from_secs(10));
    session.barrier(7);
    let out = h.ctl("brl", &["show"]);
    assert!(
        out.contains("        is_connected: true, role: equal, peer: 127.0.0.1:"),
        "{out}"
    );
    assert!(
        out.contains(&format!("Controller \"ptcp:{}:127.0.0.1\"", h.port)),
        "{out}"
    );
}

//! `hayate ctl BRIDGE trace`: a packet through the running switch's tables, given in
//! ovs-ofctl match syntax or as a frame's hex, in text and JSON.

mod ofctl_common;

use ofctl_common::Hayate;

const CONFIG: &str = r#"
[[bridge]]
name = "brt"
fail_mode = "secure"
flows = [
  "table=0,priority=100,udp,nw_src=10.0.0.0/8,actions=goto_table:1",
  "table=0,priority=1,actions=drop",
  "table=1,priority=50,cookie=0x77,in_port=1,udp,tp_dst=53,actions=set_field:10.9.9.9->ip_dst,output:2",
  "table=1,priority=0,actions=drop",
]

[[bridge.port]]
name = "a"
spec = "null:sink"

[[bridge.port]]
name = "b"
spec = "null:sink"
"#;

#[test]
fn trace_names_the_tables_and_flows_that_decide() {
    let h = Hayate::with_config(CONFIG);
    let out = h.ctl("brt", &["trace", "in_port=1,udp,nw_src=10.0.0.1,tp_dst=53"]);
    assert!(out.contains("bridge(\"brt\")"), "{out}");
    assert!(
        out.contains(" 0. priority=100,udp,nw_src=10.0.0.0/8 cookie=0x0"),
        "{out}"
    );
    assert!(out.contains("    actions: goto_table:1"), "{out}");
    assert!(
        out.contains(" 1. priority=50,udp,in_port=1,tp_dst=53 cookie=0x77"),
        "{out}"
    );
    assert!(
        out.contains("Final flow: udp,in_port=1,nw_src=10.0.0.1,nw_dst=10.9.9.9,tp_dst=53"),
        "{out}"
    );
    assert!(
        out.contains("Datapath actions: mod_nw_dst:10.9.9.9,2"),
        "{out}"
    );
    let megaflow = out
        .lines()
        .find_map(|l| l.strip_prefix("Megaflow: "))
        .unwrap_or_else(|| panic!("no megaflow line: {out}"));
    assert!(megaflow.contains("nw_src=10.0.0.0/8"), "{out}");
    assert!(megaflow.contains("tp_dst=53"), "{out}");

    // Another source misses table 0's first flow: one table, dropped.
    let out = h.ctl(
        "brt",
        &["trace", "in_port=1,udp,nw_src=192.168.0.1,tp_dst=53"],
    );
    assert!(
        out.contains(" 0. priority=1 cookie=0x0") || out.contains(" 0. priority=1,* cookie=0x0"),
        "{out}"
    );
    assert!(!out.contains(" 1. "), "{out}");
    assert!(out.contains("Datapath actions: drop"), "{out}");
}

#[test]
fn trace_takes_a_frame_in_hex_and_answers_in_json() {
    let h = Hayate::with_config(CONFIG);
    let frame = packet::builder::PacketSpec::udp4(
        [0, 0, 0, 0, 0, 2],
        [0, 0, 0, 0, 0, 1],
        std::net::Ipv4Addr::new(10, 1, 2, 3),
        std::net::Ipv4Addr::new(10, 0, 0, 2),
        1000,
        53,
        64,
    )
    .build();
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    let out = h.ctl("brt", &["--json", "trace", "--hex", &hex, "in_port=1"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2, "{out}");
    assert_eq!(tables[0]["table"], 0);
    assert_eq!(tables[0]["entry"]["priority"], 100);
    assert_eq!(tables[1]["entry"]["cookie"], "0x77");
    assert_eq!(v["datapath_actions"][1], "2", "{out}");
    assert!(
        v["flow"].as_str().unwrap().contains("nw_src=10.1.2.3"),
        "{out}"
    );
}

#[test]
fn a_bad_packet_is_refused_with_what_to_give() {
    let h = Hayate::with_config(CONFIG);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hayate"))
        .arg("ctl")
        .arg(h.file("brt.mgmt"))
        .args(["trace", "in_port=1,colour=red"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("colour"), "{err}");
}

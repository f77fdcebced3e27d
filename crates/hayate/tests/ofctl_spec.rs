//! Where OpenFlow 1.3 leaves a switch a choice, what Hayate chose (docs/openflow.md), seen
//! through the real `ovs-ofctl -O OpenFlow13`: the table count FEATURES_REPLY gives is the
//! number of tables that take flows (255: 0 to 254), and a flow may output to a port that
//! does not exist yet — it forwards there once the port is added.

mod ofctl_common;

use std::process::Command;
use std::time::{Duration, Instant};

use ofctl_common::{flows, have_ofctl, pcap_packets, Hayate, UDP_FRAME_HEX};

#[test]
fn every_table_features_reply_counts_takes_flows() {
    if !have_ofctl("every_table_features_reply_counts_takes_flows") {
        return;
    }
    let h = Hayate::secure_sinks();
    let show = h.ofctl("show", &[]);
    assert!(show.contains("n_tables:255,"), "{show}");
    // The last table (OFPTT_MAX, 254) takes flows and is a goto target.
    h.ofctl("add-flow", &["table=0,priority=1,actions=goto_table:254"]);
    h.ofctl("add-flow", &["table=254,priority=1,actions=output:2"]);
    assert_eq!(
        flows(&h.ofctl("dump-flows", &["table=254"])),
        ["cookie=0x0, table=254, n_packets=0, n_bytes=0, priority=1 actions=output:2"]
    );
    // Table stats list as many tables as FEATURES_REPLY counts, the last one active.
    let tables = h.ofctl("dump-tables", &[]);
    assert!(tables.contains("tables 2...253: ditto"), "{tables}");
    assert!(
        tables.contains("table 254:\n    active=1, lookup="),
        "{tables}"
    );
    assert!(!tables.contains("table 255"), "{tables}");
}

/// `hayate ctl --run-dir DIR br0 ARGS…`, which must succeed.
fn ctl(h: &Hayate, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .arg("ctl")
        .arg("--run-dir")
        .arg(h.dir.path())
        .arg("br0")
        .args(args)
        .output()
        .expect("run hayate ctl");
    assert!(
        out.status.success(),
        "hayate ctl {args:?}: {}\nswitch log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        h.log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Port `no`'s transmitted packets as dump-ports reports them.
fn tx_packets(h: &Hayate, no: u32) -> Option<u64> {
    let dump = h.ofctl("dump-ports", &[&no.to_string()]);
    let tx = dump.split("tx pkts=").nth(1)?;
    tx.split(',').next()?.parse().ok()
}

#[test]
fn output_to_a_port_that_does_not_exist_is_accepted_and_forwards_once_it_does() {
    if !have_ofctl("output_to_a_port_that_does_not_exist_is_accepted_and_forwards_once_it_does") {
        return;
    }
    let mut h = Hayate::secure_sinks();
    // Accepted (as Open vSwitch accepts it): port 9 does not exist.
    h.ofctl("add-flow", &["priority=7,udp,actions=output:9"]);
    let packet_out = format!("in_port=1 packet={UDP_FRAME_HEX} actions=table");
    h.ofctl("packet-out", &[&packet_out]);
    // The flow matched; its only output went nowhere.
    assert_eq!(
        flows(&h.ofctl("dump-flows", &[])),
        ["cookie=0x0, table=0, n_packets=1, n_bytes=60, priority=7,udp actions=output:9"]
    );
    // Port 9 appears: the same flow now forwards to it.
    let pcap = h.file("nine.pcap");
    let spec = format!("pcap:out={}", pcap.display());
    ctl(&h, &["add-port", &spec, "ofport=9", "name=nine"]);
    h.ofctl("packet-out", &[&packet_out]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tx_packets(&h, 9) != Some(1) {
        assert!(
            Instant::now() < deadline,
            "port 9 sent nothing within 10 s: {}",
            h.ofctl("dump-ports", &["9"])
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    h.stop();
    let pkts = pcap_packets(&pcap);
    assert_eq!(pkts.len(), 1, "only the packet sent after the port came");
    assert_eq!(pkts[0].len(), 60);
}

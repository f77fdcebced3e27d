//! The real `ovs-ofctl -O OpenFlow13` against `hayate run` listening on ptcp: every
//! command's output compared with what was installed.

mod ofctl_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ofctl_common::{
    flows, have_ofctl, sent_on_port_2, sink_and_pcap, unhex, Hayate, UDP_FRAME_HEX,
};

#[test]
fn add_mod_del_and_dump_flows() {
    if !have_ofctl("add_mod_del_and_dump_flows") {
        return;
    }
    let h = Hayate::secure_sinks();
    h.ofctl("add-flow", &["priority=10,in_port=1,actions=output:2"]);
    let file = h.file("flows.txt");
    std::fs::write(
        &file,
        "table=0,priority=20,ip,nw_dst=10.0.0.2,actions=output:1\n\
         table=0,priority=30,cookie=0x5,udp,tp_dst=53,actions=drop\n",
    )
    .unwrap();
    h.ofctl("add-flows", &[file.to_str().unwrap()]);
    assert_eq!(
        flows(&h.ofctl("dump-flows", &[])),
        [
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=10,in_port=1 actions=output:2",
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=20,ip,nw_dst=10.0.0.2 actions=output:1",
            "cookie=0x5, table=0, n_packets=0, n_bytes=0, priority=30,udp,tp_dst=53 actions=drop",
        ]
    );
    // mod-flows (non-strict: every flow whose match is covered).
    h.ofctl("mod-flows", &["ip,nw_dst=10.0.0.2,actions=output:2"]);
    let after_mod = flows(&h.ofctl("dump-flows", &[]));
    assert!(
        after_mod
            .iter()
            .any(|l| l.ends_with("priority=20,ip,nw_dst=10.0.0.2 actions=output:2")),
        "{after_mod:?}"
    );
    // del-flows --strict removes only the exact priority+match.
    h.ofctl("del-flows", &["--strict", "priority=10,in_port=1"]);
    let left = flows(&h.ofctl("dump-flows", &[]));
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.iter().all(|l| !l.contains("in_port=1")));
    // A strict delete that names no existing entry removes nothing.
    h.ofctl("del-flows", &["--strict", "priority=31,udp,tp_dst=53"]);
    assert_eq!(flows(&h.ofctl("dump-flows", &[])).len(), 2);
    // Non-strict with a cookie filter, then everything.
    h.ofctl("del-flows", &["cookie=0x5/-1"]);
    let left = flows(&h.ofctl("dump-flows", &[]));
    assert_eq!(left.len(), 1, "{left:?}");
    h.ofctl("del-flows", &[]);
    assert!(flows(&h.ofctl("dump-flows", &[])).is_empty());
}

#[test]
fn counters_ports_and_tables() {
    if !have_ofctl("counters_ports_and_tables") {
        return;
    }
    let h = Hayate::with_config(
        r#"
[[bridge]]
name = "brc"
fail_mode = "secure"
flows = ["table=0,priority=5,in_port=1,actions=output:2"]

[[bridge.port]]
name = "src"
spec = "null:limit=50"

[[bridge.port]]
name = "dst"
spec = "null:sink"
"#,
    );
    // Flow counters reach the tables every ~100 ms.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut dump = String::new();
    while Instant::now() < deadline {
        dump = h.ofctl("dump-flows", &[]);
        if dump.contains("n_packets=50,") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        flows(&dump),
        ["cookie=0x0, table=0, n_packets=50, n_bytes=3200, priority=5,in_port=1 actions=output:2"],
        "{dump}"
    );
    let ports = h.ofctl("dump-ports", &[]);
    assert!(ports.contains("port  1: rx pkts=50, bytes=3200"), "{ports}");
    assert!(ports.contains("tx pkts=50, bytes=3200"), "{ports}");
    let desc = h.ofctl("dump-ports-desc", &[]);
    assert!(desc.contains(" 1(src): addr:"), "{desc}");
    assert!(desc.contains(" 2(dst): addr:"), "{desc}");
    let tables = h.ofctl("dump-tables", &[]);
    assert!(
        tables.contains("table 0:\n    active=1, lookup="),
        "{tables}"
    );
    assert!(tables.contains("tables 2...254: ditto"), "{tables}");
    // mod-port: down, then back up; port-desc shows it.
    h.ofctl("mod-port", &["2", "down"]);
    let desc = h.ofctl("dump-ports-desc", &[]);
    let port2 = desc.split(" 2(dst)").nth(1).unwrap_or("");
    assert!(port2.contains("config:     PORT_DOWN"), "{desc}");
    h.ofctl("mod-port", &["2", "up"]);
    let desc = h.ofctl("dump-ports-desc", &[]);
    let port2 = desc.split(" 2(dst)").nth(1).unwrap_or("");
    assert!(port2.contains("config:     0"), "{desc}");
}

#[test]
fn groups_and_meters() {
    if !have_ofctl("groups_and_meters") {
        return;
    }
    let h = Hayate::secure_sinks();
    h.ofctl(
        "add-group",
        &["group_id=1,type=all,bucket=output:1,bucket=output:2"],
    );
    h.ofctl("add-group", &["group_id=2,type=indirect,bucket=output:2"]);
    let groups = h.ofctl("dump-groups", &[]);
    assert!(
        groups.contains("group_id=1,type=all,bucket=actions=output:1,bucket=actions=output:2"),
        "{groups}"
    );
    assert!(
        groups.contains("group_id=2,type=indirect,bucket=actions=output:2"),
        "{groups}"
    );
    h.ofctl("add-meter", &["meter=1,kbps,band=type=drop,rate=1000"]);
    let meters = h.ofctl("dump-meters", &[]);
    assert!(meters.contains("meter=1 kbps"), "{meters}");
    assert!(meters.contains("type=drop rate=1000"), "{meters}");
    // Flags read back as they were sent (issue 20): no stats unless asked for.
    assert!(!meters.contains("stats"), "{meters}");
    h.ofctl(
        "add-meter",
        &["meter=2,pktps,burst,stats,band=type=drop,rate=10,burst_size=5"],
    );
    let meters = h.ofctl("dump-meters", &[]);
    assert!(meters.contains("meter=2 pktps burst stats"), "{meters}");
    // A flow using both.
    h.ofctl("add-flow", &["priority=1,actions=meter:1,group:1"]);
    let dump = flows(&h.ofctl("dump-flows", &[]));
    assert_eq!(dump.len(), 1);
    assert!(dump[0].ends_with("actions=meter:1,group:1"), "{dump:?}");
    h.ofctl("del-groups", &["group_id=2"]);
    let groups = h.ofctl("dump-groups", &[]);
    assert!(!groups.contains("group_id=2"), "{groups}");
}

#[test]
fn packet_out_reaches_a_pcap_port() {
    if !have_ofctl("packet_out_reaches_a_pcap_port") {
        return;
    }
    let mut h = sink_and_pcap();
    // Directly, and through the tables (which count it).
    h.ofctl("add-flow", &["priority=7,udp,actions=output:2"]);
    h.ofctl(
        "packet-out",
        &[&format!(
            "in_port=1 packet={UDP_FRAME_HEX} actions=output:2"
        )],
    );
    h.ofctl(
        "packet-out",
        &[&format!("in_port=1 packet={UDP_FRAME_HEX} actions=table")],
    );
    let dump = flows(&h.ofctl("dump-flows", &[]));
    assert_eq!(
        dump,
        ["cookie=0x0, table=0, n_packets=1, n_bytes=60, priority=7,udp actions=output:2"]
    );
    let pkts = sent_on_port_2(&mut h, 2);
    let want = unhex(UDP_FRAME_HEX);
    assert!(pkts.iter().all(|p| *p == want));
}

#[test]
fn monitor_sees_packet_ins() {
    if !have_ofctl("monitor_sees_packet_ins") {
        return;
    }
    let h = Hayate::secure_sinks();
    h.ofctl("add-flow", &["priority=9,in_port=1,udp,actions=controller"]);
    // ovs-ofctl monitor prints what it receives on stderr.
    let mut mon = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "monitor", &h.target(), "65534"])
        // Its control socket goes to the run dir, not /var/run/openvswitch.
        .env("OVS_RUNDIR", h.dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ovs-ofctl monitor");
    let stdout = mon.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // A packet arrives on port 1 and meets the flow (packet-out through the tables); again
    // every half second until the monitor, which may still be connecting, reports it.
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut seen = Vec::new();
    let mut found = false;
    while !found && Instant::now() < deadline {
        h.ofctl(
            "packet-out",
            &[&format!("in_port=1 packet={UDP_FRAME_HEX} actions=table")],
        );
        while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
            found |= line.contains("OFPT_PACKET_IN") && line.contains("(via action)");
            seen.push(line);
        }
    }
    // A port change and an expired flow that asked for a notice reach the monitor too.
    h.ofctl("mod-port", &["2", "no-packet-in"]);
    h.ofctl(
        "add-flow",
        &["idle_timeout=1,send_flow_rem,priority=3,ip,actions=drop"],
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut status, mut removed) = (false, false);
    while !(status && removed) && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            status |= line.contains("OFPT_PORT_STATUS");
            removed |= line.contains("OFPT_FLOW_REMOVED") && line.contains("reason=idle");
            seen.push(line);
        }
    }
    mon.kill().ok();
    mon.wait().ok();
    assert!(
        status && removed,
        "port-status {status}, flow-removed {removed}: {seen:#?}"
    );
    assert!(
        found,
        "no packet-in seen by the monitor: {seen:#?}\nswitch log: {}",
        h.log()
    );
    let all = seen.join("\n");
    assert!(all.contains("in_port=1"), "{all}");
    assert!(all.contains("total_len=60"), "{all}");
}

#[test]
fn a_dump_leaves_standalone_alone_and_a_flow_mod_takes_charge() {
    if !have_ofctl("a_dump_leaves_standalone_alone_and_a_flow_mod_takes_charge") {
        return;
    }
    let h = Hayate::start(&["--port", "null:sink", "--port", "null:sink"]);
    // The management socket is not a controller: it sees the fail-open NORMAL flow.
    let ctl = |args: &[&str]| h.ctl("br0", args);
    let before = flows(&ctl(&["dump-flows"]));
    assert_eq!(before.len(), 1, "{before:?}");
    assert!(
        before[0].ends_with("priority=0 actions=NORMAL"),
        "{before:?}"
    );
    // A connection to the listener that only reads is a service connection (as in Open
    // vSwitch): it sees the fail-open flow, which stays.
    assert_eq!(flows(&h.ofctl("dump-flows", &[])), before);
    assert_eq!(flows(&ctl(&["dump-flows"])), before);
    // One that changes the tables takes charge: the fail-open flow goes before its flow
    // goes in.
    h.ofctl("add-flow", &["priority=5,in_port=1,actions=output:2"]);
    let after = flows(&ctl(&["dump-flows"]));
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(after[0].contains("priority=5,in_port=1"), "{after:?}");
}

/// A table bigger than one piece of a streamed reply (1,024 flows): `ovs-ofctl dump-flows`
/// and `dump-aggregate` and `hayate ctl dump-flows` read every flow back.
#[test]
fn a_big_table_dumps_whole() {
    if !have_ofctl("a_big_table_dumps_whole") {
        return;
    }
    let h = Hayate::secure_sinks();
    let n = 5000;
    let text: String = (0..n)
        .map(|i| {
            format!(
                "priority={},ip,nw_dst=11.0.{}.{},actions=output:2\n",
                i % 7,
                i / 256,
                i % 256
            )
        })
        .collect();
    let file = h.file("flows.txt");
    std::fs::write(&file, text).unwrap();
    h.ofctl("add-flows", &[file.to_str().unwrap()]);
    let dump = flows(&h.ofctl("dump-flows", &[]));
    assert_eq!(dump.len(), n);
    assert!(
        dump.iter().any(|l| l.contains("nw_dst=11.0.19.135")),
        "the last flow"
    );
    let agg = h.ofctl("dump-aggregate", &[]);
    assert!(agg.contains(&format!("flow_count={n}")), "{agg}");
    assert_eq!(flows(&h.ctl("br0", &["dump-flows"])).len(), n);
}

/// MPLS through the wire: `ovs-ofctl` installs a label push and a label match with pop,
/// dumps them back in its own words, and a packet-out through the tables leaves labelled.
#[test]
fn mpls_flows_install_dump_and_label_packets() {
    if !have_ofctl("mpls_flows_install_dump_and_label_packets") {
        return;
    }
    let mut h = sink_and_pcap();
    h.ofctl(
        "add-flow",
        &[
            "priority=10,in_port=1,ip,actions=push_mpls:0x8847,set_mpls_label:16,\
           set_mpls_tc:2,set_mpls_ttl:9,dec_mpls_ttl,output:2",
        ],
    );
    h.ofctl(
        "add-flow",
        &[
            "priority=11,mpls,mpls_label=16,mpls_tc=2,mpls_bos=1,mpls_ttl=9,\
           actions=pop_mpls:0x0800,output:2",
        ],
    );
    assert_eq!(
        flows(&h.ofctl("dump-flows", &[])),
        [
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=10,ip,in_port=1 \
             actions=push_mpls:0x8847,set_field:16->mpls_label,set_field:2->mpls_tc,\
             set_mpls_ttl(9),dec_mpls_ttl,output:2",
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=11,mpls,mpls_label=16,\
             mpls_tc=2,mpls_ttl=9,mpls_bos=1 actions=pop_mpls:0x0800,output:2",
        ]
    );
    h.ofctl(
        "packet-out",
        &[&format!("in_port=1 packet={UDP_FRAME_HEX} actions=table")],
    );
    // The packet-out's own actions: the new entry takes the IP TTL (64).
    h.ofctl(
        "packet-out",
        &[&format!(
            "in_port=1 packet={UDP_FRAME_HEX} actions=push_mpls:0x8848,set_mpls_label:5,output:2"
        )],
    );
    let pkts = sent_on_port_2(&mut h, 2);
    let orig = unhex(UDP_FRAME_HEX);
    for p in &pkts {
        assert_eq!(p.len(), orig.len() + 4);
        assert_eq!(&p[18..], &orig[14..]);
    }
    // Ethertype 0x8847, then label 16 · TC 2 · bottom of stack · TTL 9 - 1.
    assert_eq!(&pkts[0][12..18], &[0x88, 0x47, 0x00, 0x01, 0x05, 0x08]);
    // Ethertype 0x8848, label 5 · TC 0 · bottom of stack · TTL 64.
    assert_eq!(&pkts[1][12..18], &[0x88, 0x48, 0x00, 0x00, 0x51, 0x40]);
}

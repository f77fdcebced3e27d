use std::process::Command as Process;

use super::*;
use crate::churn::rules::{churn_mod, redirects, Table};

/// What `ovs-ofctl ofp-parse` prints for `bytes`, or `None` when ovs-ofctl is not installed.
fn ofp_parse(bytes: &[u8]) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("msgs.bin");
    std::fs::write(&p, bytes).unwrap();
    let out = Process::new("ovs-ofctl")
        .arg("ofp-parse")
        .arg(&p)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn ovs_ofctl_reads_back_what_is_encoded() {
    let mut b = Vec::new();
    let drop = Table::Drop.flows(1);
    drop[0].encode(Command::Add, 1, &mut b);
    drop[1].encode(Command::Add, 2, &mut b);
    Table::PerFlow.flows(1)[1].encode(Command::Add, 3, &mut b);
    let [(_, narrow), (_, wide)] = redirects();
    wide.encode(Command::Add, 4, &mut b);
    wide.encode(Command::DeleteStrict, 5, &mut b);
    let (f, c) = churn_mod(2000 + 513, 0, 1);
    f.encode(c, 6, &mut b);
    barrier(7, &mut b);
    port_stats_request(3, 8, &mut b);
    narrow.encode(Command::Add, 9, &mut b);
    // Every message is a whole number of 8-byte words and says its own length.
    let mut at = 0;
    while at < b.len() {
        let len = u16::from_be_bytes([b[at + 2], b[at + 3]]) as usize;
        assert_eq!(len % 8, 0, "message at {at}");
        at += len;
    }
    assert_eq!(at, b.len());
    let Some(text) = ofp_parse(&b) else {
        eprintln!("ovs-ofctl not installed: the read-back is not checked");
        return;
    };
    for want in [
        "OFPT_FLOW_MOD (OF1.3) (xid=0x1): ADD priority=100,udp,nw_src=11.1.1.1 actions=drop",
        "OFPT_FLOW_MOD (OF1.3) (xid=0x2): ADD priority=10,in_port=1 actions=output:2",
        "OFPT_FLOW_MOD (OF1.3) (xid=0x3): ADD priority=0 actions=drop",
        "OFPT_FLOW_MOD (OF1.3) (xid=0x4): ADD priority=200,udp,tp_src=1024 actions=output:3",
        "OFPT_FLOW_MOD (OF1.3) (xid=0x5): DEL_STRICT priority=200,udp,tp_src=1024 actions=drop",
        "OFPT_FLOW_MOD (OF1.3) (xid=0x6): ADD priority=50,udp,nw_dst=192.168.2.1 actions=drop",
        "OFPT_BARRIER_REQUEST (OF1.3) (xid=0x7):",
        "OFPST_PORT request (OF1.3) (xid=0x8): port_no=3",
        "OFPT_FLOW_MOD (OF1.3) (xid=0x9): ADD priority=200,udp,nw_src=10.0.0.0/255.0.15.255 actions=output:3",
    ] {
        assert!(text.contains(want), "{want}\nnot in:\n{text}");
    }
}

#[test]
fn port_stats_replies_parse_by_port() {
    let mut body = vec![0u8; 2 * 112];
    body[3] = 2;
    body[8..16].copy_from_slice(&5u64.to_be_bytes());
    body[16..24].copy_from_slice(&7u64.to_be_bytes());
    body[112 + 3] = 3;
    body[112 + 16..112 + 24].copy_from_slice(&99u64.to_be_bytes());
    assert_eq!(parse_port_stats(&body, 2), Some(PortCount { rx: 5, tx: 7 }));
    assert_eq!(
        parse_port_stats(&body, 3),
        Some(PortCount { rx: 0, tx: 99 })
    );
    assert_eq!(parse_port_stats(&body, 4), None);
    assert_eq!(parse_port_stats(&body[..100], 2), None);
}

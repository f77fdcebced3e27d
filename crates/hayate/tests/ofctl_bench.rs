//! Benchmark (ignored by default): 1,000,000 flow entries installed through OpenFlow over
//! TCP, in batches, with a barrier at the end, while the datapath forwards between two null
//! ports. Reports the install rate, the switch's RSS growth per entry and the packets
//! forwarded meanwhile.
//!
//! ```text
//! cargo test --release -p hayate --test ofctl_bench -- --ignored --nocapture
//! ```
//! (`HAYATE_BENCH_FLOWS=N` changes the count.)

mod ofctl_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ofctl_common::Hayate;
use openflow::messages::mods::FlowModMsg;
use openflow::{Hello, Message, MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use packet::Field;
use pipeline::model::{Action, FlowMod, Instruction, Match};

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn read_msg(s: &mut TcpStream) -> (u32, Message) {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).unwrap();
    let len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let mut m = h.to_vec();
    m.resize(len, 0);
    s.read_exact(&mut m[8..]).unwrap();
    let (hdr, msg) = openflow::decode(&m).unwrap();
    (hdr.xid, msg)
}

/// Reads until the reply to `xid`, answering echo requests; panics on an error.
fn wait_for(s: &mut TcpStream, xid: u32) -> Message {
    loop {
        match read_msg(s) {
            (x, Message::EchoRequest(d)) => {
                let mut b = Vec::new();
                openflow::encode(x, &Message::EchoReply(d), &mut b).unwrap();
                s.write_all(&b).unwrap();
            }
            (x, Message::Error(e)) => panic!("the switch refused request {x}: {e:?}"),
            (x, m) if x == xid => return m,
            _ => {}
        }
    }
}

fn tx_packets(s: &mut TcpStream, xid: u32) -> u64 {
    let mut b = Vec::new();
    openflow::encode(
        xid,
        &Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: MultipartRequestBody::PortStats { port_no: 2 },
        }),
        &mut b,
    )
    .unwrap();
    s.write_all(&b).unwrap();
    match wait_for(s, xid) {
        Message::MultipartReply(r) => match r.body {
            MultipartReplyBody::PortStats(v) => v.iter().map(|p| p.tx_packets).sum(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn million_flows_through_openflow() {
    let n: u32 = std::env::var("HAYATE_BENCH_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("br.toml");
    std::fs::write(
        &cfg,
        r#"
[[bridge]]
name = "brb"
fail_mode = "secure"
flows = ["table=0,priority=1,in_port=1,actions=output:2"]

[[bridge.port]]
name = "src"
spec = "null:flows=64"

[[bridge.port]]
name = "dst"
spec = "null:sink"
"#,
    )
    .unwrap();
    let h = Hayate::start_in(dir, &["--config", cfg.to_str().unwrap()]);
    let pid = h.pid();
    let mut s = TcpStream::connect(("127.0.0.1", h.port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut b = Vec::new();
    openflow::encode(1, &Message::Hello(Hello::default()), &mut b).unwrap();
    s.write_all(&b).unwrap();
    assert!(matches!(read_msg(&mut s), (_, Message::Hello(_))));
    std::thread::sleep(Duration::from_millis(500));
    let rss0 = rss_kib(pid);
    let tx0 = tx_packets(&mut s, 2);
    let t0 = Instant::now();
    // Batches of 1000 flow-mods per write: exact IPv4 destinations 11.x.y.z, one table.
    let mut buf = Vec::with_capacity(1 << 20);
    for i in 0..n {
        let mut m = Match::ANY;
        m.set_exact(Field::EthType, 0x0800);
        m.set_exact(Field::Ipv4Dst, u128::from(0x0b00_0000 | i));
        let fm = FlowMod::add(
            0,
            100,
            m,
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: 2,
                max_len: 0,
            }])],
        );
        openflow::encode(
            10 + i,
            &Message::FlowMod(FlowModMsg {
                flow_mod: fm,
                buffer_id: openflow::NO_BUFFER,
            }),
            &mut buf,
        )
        .unwrap();
        if (i + 1) % 1000 == 0 || i + 1 == n {
            s.write_all(&buf).unwrap();
            buf.clear();
        }
    }
    let barrier = u32::MAX - 1;
    b.clear();
    openflow::encode(barrier, &Message::BarrierRequest, &mut b).unwrap();
    s.write_all(&b).unwrap();
    assert_eq!(wait_for(&mut s, barrier), Message::BarrierReply);
    let secs = t0.elapsed().as_secs_f64();
    let tx1 = tx_packets(&mut s, 3);
    let rss1 = rss_kib(pid);
    let per_entry = (rss1.saturating_sub(rss0) as f64 * 1024.0) / f64::from(n);
    println!(
        "flows: {n} installed in {secs:.2} s = {:.0} flow-mods/s; RSS {} MiB -> {} MiB, {per_entry:.0} B per entry; datapath forwarded {} packets meanwhile ({:.2} Mpps)",
        f64::from(n) / secs,
        rss0 / 1024,
        rss1 / 1024,
        tx1 - tx0,
        (tx1 - tx0) as f64 / secs / 1e6
    );
    assert!(tx1 > tx0, "the datapath kept forwarding");
}

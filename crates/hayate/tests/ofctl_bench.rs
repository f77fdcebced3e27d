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

use std::time::{Duration, Instant};

use ofctl_common::{Hayate, Session};
use openflow::messages::mods::FlowModMsg;
use openflow::{Message, MultipartReplyBody, MultipartRequestBody};
use packet::Field;
use pipeline::model::{Action, FlowMod, Instruction, Match};

/// Packets the switch sent on port 2.
fn tx_packets(s: &mut Session, xid: u32) -> u64 {
    match s.multipart(xid, MultipartRequestBody::PortStats { port_no: 2 }) {
        MultipartReplyBody::PortStats(v) => v.iter().map(|p| p.tx_packets).sum(),
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
    let h = Hayate::with_config(
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
    );
    let mut s = h.session(Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(500));
    let rss0 = h.status_kib("VmRSS:");
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
            s.send_raw(&buf);
            buf.clear();
        }
    }
    s.barrier(u32::MAX - 1);
    let secs = t0.elapsed().as_secs_f64();
    let tx1 = tx_packets(&mut s, 3);
    let rss1 = h.status_kib("VmRSS:");
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

//! Benchmark (ignored by default): big requests on a big table must not stall other
//! controllers. 2,000,000 flow entries go in through OpenFlow, each asking for FLOW_REMOVED;
//! then one session asks for every flow's statistics, the aggregate, modifies half the
//! flows (`mod-flows ip,nw_dst=11.0.0.0/12`), deletes the other half
//! (`del-flows ip,nw_dst=11.16.0.0/12`) and last every flow, each followed by a barrier and,
//! for the deletes, by reading every FLOW_REMOVED, while a second session (which asked for no
//! FLOW_REMOVED, SET_ASYNC) sends echo requests one after the other, 1 ms apart. Reports each
//! request's time and reply size, the echo round trips that overlapped it, and the switch's
//! RSS growth meanwhile.
//!
//! ```text
//! cargo test --release -p hayate --test ofctl_dump_bench -- --ignored --nocapture
//! ```
//! `HAYATE_BENCH_FLOWS=N` changes the count; `HAYATE_BENCH_BIN=PATH` runs another `hayate`
//! binary (e.g. an older build) under the same load.

mod ofctl_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ofctl_common::{status_kib, Hayate};
use openflow::messages::mods::FlowModMsg;
use openflow::multipart::{FlowStatsRequest, MORE};
use openflow::{Hello, Message, MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use packet::Field;
use pipeline::model::{Action, FlowMod, Instruction, Match};

/// Most echoes one measurement sends (it stops earlier when the request is answered).
const MAX_ECHOES: usize = 1_000_000;
/// Longest one measurement runs.
const MAX_WAIT: Duration = Duration::from_secs(300);

fn send(s: &mut TcpStream, xid: u32, m: &Message) {
    let mut b = Vec::new();
    openflow::encode(xid, m, &mut b).unwrap();
    s.write_all(&b).unwrap();
}

/// The next message, raw.
fn read_raw(s: &mut TcpStream) -> Vec<u8> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).unwrap();
    let len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let mut m = h.to_vec();
    m.resize(len, 0);
    s.read_exact(&mut m[8..]).unwrap();
    m
}

fn read_msg(s: &mut TcpStream) -> (u32, Message) {
    let m = read_raw(s);
    let (hdr, msg) = openflow::decode(&m).unwrap();
    (hdr.xid, msg)
}

/// A session, HELLO done.
fn session(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(MAX_WAIT)).unwrap();
    send(&mut s, 1, &Message::Hello(Hello::default()));
    assert!(matches!(read_msg(&mut s), (_, Message::Hello(_))));
    s
}

/// Reads until the reply to `xid`, answering echo requests; panics on an error.
fn wait_for(s: &mut TcpStream, xid: u32) -> Message {
    loop {
        match read_msg(s) {
            (x, Message::EchoRequest(d)) => send(s, x, &Message::EchoReply(d)),
            (x, Message::Error(e)) => panic!("the switch refused request {x}: {e:?}"),
            (x, m) if x == xid => return m,
            _ => {}
        }
    }
}

/// `n` flows in table 0 (exact IPv4 destinations), 1000 flow-mods per write, then a barrier.
fn install(s: &mut TcpStream, n: u32) {
    let mut buf = Vec::with_capacity(1 << 20);
    for i in 0..n {
        let mut m = Match::ANY;
        m.set_exact(Field::EthType, 0x0800);
        m.set_exact(Field::Ipv4Dst, u128::from(0x0b00_0000 | i));
        let mut fm = FlowMod::add(
            0,
            100,
            m,
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: 2,
                max_len: 0,
            }])],
        );
        fm.flags.send_flow_rem = true;
        let msg = Message::FlowMod(FlowModMsg {
            flow_mod: fm,
            buffer_id: openflow::NO_BUFFER,
        });
        openflow::encode(10 + i, &msg, &mut buf).unwrap();
        if (i + 1) % 1000 == 0 || i + 1 == n {
            s.write_all(&buf).unwrap();
            buf.clear();
        }
    }
    send(s, u32::MAX - 1, &Message::BarrierRequest);
    assert_eq!(wait_for(s, u32::MAX - 1), Message::BarrierReply);
}

/// The switch's peak RSS until `stop`, looked at every 10 ms.
fn peak_rss(pid: u32, stop: Arc<AtomicBool>) -> u64 {
    let mut peak = 0;
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) && t0.elapsed() < MAX_WAIT {
        peak = peak.max(status_kib(pid, "VmRSS:"));
        std::thread::sleep(Duration::from_millis(10));
    }
    peak
}

/// Pause between one echo's reply and the next request: the echoes sample the switch's
/// responsiveness without taking a core from it.
const ECHO_GAP: Duration = Duration::from_millis(1);

/// Echo round trips on `s` until `stop`, each with its start.
fn echoes(mut s: TcpStream, stop: Arc<AtomicBool>) -> Vec<(Instant, Duration)> {
    let mut rtts = Vec::new();
    let t0 = Instant::now();
    for xid in 0..MAX_ECHOES as u32 {
        if stop.load(Ordering::Relaxed) || t0.elapsed() > MAX_WAIT {
            break;
        }
        let t = Instant::now();
        send(&mut s, xid, &Message::EchoRequest(b"rtt".to_vec()));
        // A switch that stalled may probe this session meanwhile: answer it.
        let reply = wait_for(&mut s, xid);
        rtts.push((t, t.elapsed()));
        assert_eq!(reply, Message::EchoReply(b"rtt".to_vec()));
        std::thread::sleep(ECHO_GAP);
    }
    rtts
}

/// Asks for `body` on `a` and reads the whole reply: (flows reported, bytes, messages).
fn multipart(a: &mut TcpStream, body: MultipartRequestBody) -> (u64, usize, usize) {
    send(
        a,
        7,
        &Message::MultipartRequest(MultipartRequest { flags: 0, body }),
    );
    let (mut flows, mut bytes, mut messages) = (0u64, 0usize, 0usize);
    loop {
        let raw = read_raw(a);
        let (h, m) = openflow::decode(&raw).unwrap();
        if let Message::EchoRequest(d) = m {
            send(a, h.xid, &Message::EchoReply(d));
            continue;
        }
        assert_eq!(h.xid, 7, "{m:?}");
        bytes += raw.len();
        messages += 1;
        let Message::MultipartReply(r) = m else {
            panic!("{m:?}")
        };
        match r.body {
            MultipartReplyBody::Flow(v) => flows += v.len() as u64,
            MultipartReplyBody::Aggregate(agg) => flows += u64::from(agg.flow_count),
            other => panic!("{other:?}"),
        }
        if r.flags & MORE == 0 {
            return (flows, bytes, messages);
        }
    }
}

/// How long the FLOW_REMOVED stream may pause before a delete's notices count as all in (a
/// switch that drops them on full queues never sends the rest).
const NOTICE_QUIET: Duration = Duration::from_secs(3);

/// `ip,nw_dst=11.X.0.0/12`.
fn ip_dst_12(second_octet: u8) -> Match {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    m.set_masked(
        Field::Ipv4Dst,
        u128::from(0x0b00_0000u32 | u32::from(second_octet) << 16),
        0xfff0_0000,
    );
    m
}

/// Sends `fm` and a barrier on `a`; waits for the barrier reply, then (`notices`) for the
/// FLOW_REMOVED messages until [`NOTICE_QUIET`] passes without one: (notices, bytes of
/// them, messages).
fn flow_mod_and_barrier(a: &mut TcpStream, fm: FlowMod, notices: bool) -> (u64, usize, usize) {
    let t0 = Instant::now();
    let msg = Message::FlowMod(FlowModMsg {
        flow_mod: fm,
        buffer_id: openflow::NO_BUFFER,
    });
    send(a, 8, &msg);
    send(a, 9, &Message::BarrierRequest);
    let mut removed = 0u64;
    let mut bytes = 0usize;
    loop {
        let raw = read_raw(a);
        let (h, m) = openflow::decode(&raw).unwrap();
        match m {
            Message::EchoRequest(d) => send(a, h.xid, &Message::EchoReply(d)),
            Message::Error(e) => panic!("the switch refused request {}: {e:?}", h.xid),
            Message::FlowRemoved(_) => {
                removed += 1;
                bytes += raw.len();
            }
            Message::BarrierReply if h.xid == 9 => break,
            _ => {}
        }
    }
    println!("  barrier reply after {:.2} s", t0.elapsed().as_secs_f64());
    if notices {
        a.set_read_timeout(Some(NOTICE_QUIET)).unwrap();
        let mut last = t0.elapsed();
        while let Some(raw) = try_read_raw(a) {
            if raw[1] == openflow::header::msg_type::FLOW_REMOVED {
                removed += 1;
                bytes += raw.len();
                last = t0.elapsed();
            } else if raw[1] == openflow::header::msg_type::ECHO_REQUEST {
                let (h, m) = openflow::decode(&raw).unwrap();
                if let Message::EchoRequest(d) = m {
                    send(a, h.xid, &Message::EchoReply(d));
                }
            }
        }
        a.set_read_timeout(Some(MAX_WAIT)).unwrap();
        println!(
            "  last FLOW_REMOVED after {:.2} s (the time below adds {} s of quiet)",
            last.as_secs_f64(),
            NOTICE_QUIET.as_secs()
        );
    }
    (removed, bytes, removed as usize)
}

/// The next message, raw; `None` when none came within the read timeout.
fn try_read_raw(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).ok()?;
    let len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let mut m = h.to_vec();
    m.resize(len, 0);
    s.read_exact(&mut m[8..]).unwrap();
    Some(m)
}

/// A delete flow-mod of `m` in every table.
fn delete(m: Match) -> FlowMod {
    let mut del = FlowMod::add(pipeline::model::ALL_TABLES, 0, m, Vec::new());
    del.command = pipeline::model::FlowModCommand::Delete;
    del
}

/// `request` on `a` while `b` measures echoes: what `request` returns, the time it took, the
/// round trips of the echoes under way meanwhile, the peak RSS (KiB).
fn measure(
    a: &mut TcpStream,
    b: &TcpStream,
    pid: u32,
    request: impl FnOnce(&mut TcpStream) -> (u64, usize, usize),
    log: impl Fn() -> String,
) -> ((u64, usize, usize), Duration, Vec<Duration>, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let b = b.try_clone().unwrap();
    let echo = {
        let stop = stop.clone();
        std::thread::spawn(move || echoes(b, stop))
    };
    let rss = {
        let stop = stop.clone();
        std::thread::spawn(move || peak_rss(pid, stop))
    };
    // Let the echo loop run first, so it is under way when the request arrives.
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let got = request(a);
    let took = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let Ok(rtts) = echo.join() else {
        panic!("the echo session failed; switch log:\n{}", log());
    };
    let peak = rss.join().unwrap();
    // Every echo that was under way at some time during the request.
    let during: Vec<Duration> = rtts
        .iter()
        .filter(|(t, rtt)| *t + *rtt >= t0 && *t <= t0 + took)
        .map(|x| x.1)
        .collect();
    (got, took, during, peak)
}

fn describe(rtts: &mut [Duration]) -> String {
    if rtts.is_empty() {
        return "none".into();
    }
    rtts.sort();
    let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q) as usize];
    format!(
        "{} echoes, median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        rtts.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        rtts[rtts.len() - 1].as_secs_f64() * 1e3
    )
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn a_big_dump_does_not_stall_other_sessions() {
    let n: u32 = std::env::var("HAYATE_BENCH_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let bin = std::env::var_os("HAYATE_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hayate")));
    let h = Hayate::with_config_binary(
        &bin,
        r#"
[[bridge]]
name = "brd"
fail_mode = "secure"

[[bridge.port]]
name = "a"
spec = "null:sink"

[[bridge.port]]
name = "b"
spec = "null:sink"
"#,
        900,
    );
    let pid = h.pid();
    let mut a = session(h.port);
    let t = Instant::now();
    install(&mut a, n);
    // Connected now: an idle session would have had to answer the switch's probes.
    let mut b = session(h.port);
    // The echo session takes no FLOW_REMOVED (as a controller may ask): its echoes measure
    // the switch, not a million notices queued in its own socket ahead of each reply.
    let mut quiet = openflow::AsyncConfig::DEFAULT;
    quiet.flow_removed_mask = [0, 0];
    send(&mut b, 3, &Message::SetAsync(quiet));
    send(&mut b, 4, &Message::BarrierRequest);
    assert_eq!(wait_for(&mut b, 4), Message::BarrierReply);
    println!(
        "{}: {n} flows installed in {:.1} s, RSS {} MiB",
        bin.display(),
        t.elapsed().as_secs_f64(),
        status_kib(pid, "VmRSS:") / 1024
    );
    let report =
        |name: &str,
         (got, took, mut rtts, peak): ((u64, usize, usize), Duration, Vec<Duration>, u64),
         rss0: u64| {
            let (flows, bytes, messages) = got;
            println!(
                "{name}: {flows} flows, {:.1} MB in {messages} messages, {:.2} s; \
             echoes of another session meanwhile: {}; RSS {} MiB, peak +{} MiB",
                bytes as f64 / 1e6,
                took.as_secs_f64(),
                describe(&mut rtts),
                rss0 / 1024,
                peak.saturating_sub(rss0) / 1024
            );
            flows
        };
    for (name, body) in [
        (
            "flow stats",
            MultipartRequestBody::Flow(FlowStatsRequest::default()),
        ),
        (
            "aggregate",
            MultipartRequestBody::Aggregate(FlowStatsRequest::default()),
        ),
    ] {
        let rss0 = status_kib(pid, "VmRSS:");
        let m = measure(&mut a, &b, pid, |a| multipart(a, body), || h.log());
        assert_eq!(report(name, m, rss0), u64::from(n), "{name}");
    }
    // Half the flows modified, the other half deleted, then the rest: each time with a
    // barrier, and for the deletes every FLOW_REMOVED read (on both sessions).
    let half = n.min(1 << 20);
    let rss0 = status_kib(pid, "VmRSS:");
    let mut modify = FlowMod::add(
        0,
        0,
        ip_dst_12(0),
        vec![Instruction::ApplyActions(vec![Action::Output {
            port: 1,
            max_len: 0,
        }])],
    );
    modify.command = pipeline::model::FlowModCommand::Modify;
    let m = measure(
        &mut a,
        &b,
        pid,
        |a| flow_mod_and_barrier(a, modify, false),
        || h.log(),
    );
    report(
        &format!("mod-flows ip,nw_dst=11.0.0.0/12 ({half} flows) + barrier"),
        m,
        rss0,
    );
    for (name, m, want) in [
        ("del-flows ip,nw_dst=11.16.0.0/12", ip_dst_12(16), n - half),
        ("del-flows (every flow)", Match::ANY, half),
    ] {
        let rss0 = status_kib(pid, "VmRSS:");
        let got = measure(
            &mut a,
            &b,
            pid,
            |a| flow_mod_and_barrier(a, delete(m), true),
            || h.log(),
        );
        let removed = report(
            &format!("{name} ({want} flows) + barrier + FLOW_REMOVED (as flows)"),
            got,
            rss0,
        );
        println!("  FLOW_REMOVED received: {removed} of {want}");
    }
}

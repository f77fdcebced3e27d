//! Looking inside a running bridge from its management socket (`hayate ctl BRIDGE …`), each
//! answer as text an operator reads or as JSON:
//!
//! | command | shows | like Open vSwitch's |
//! |---|---|---|
//! | `trace FLOW`, `trace --hex HEX [in_port=N]` | the tables a packet visits, the flow entry deciding in each, its actions, the datapath actions and the megaflow | `ofproto/trace` |
//! | `pmd-stats [--reset]` | per poll thread: packets, cycles per packet, EMC and megaflow hit shares, upcalls, idle share, since the last reset | `dpif-netdev/pmd-stats-show` |
//! | `rxq-show` | which rx queue each thread polls and the queue's share of the thread's cycles | `dpif-netdev/pmd-rxq-show` |
//! | `dump-megaflows` | every thread's megaflows: match and mask, actions, packets, bytes, age | `dpctl/dump-flows` |
//! | `show` | the bridge, its ports (number, name, state), its controllers and fail mode | `ovs-vsctl show` + `ovs-ofctl show` |
//! | `dump-queues [PORT]` | each port's egress queues: rates, packets and bytes sent, drops, packets held (`qos_show.rs`) | `qos/show` |
//! | `capture PORT [FILTER]` | the frames a port receives and sends, live (`capture.rs`) | `tcpdump -i PORT` |
//!
//! Nothing here touches a poll thread: thread counters and rx queue counters are read as the
//! threads leave them (relaxed loads), megaflows are copied by each thread in its
//! maintenance check ([`datapath::look`]), and a trace walks the published tables with
//! translation's observer hook ([`pipeline::trace`]), changing no counter.

use std::fmt::Write as _;
use std::time::Duration;

use datapath::{MegaflowRecord, RxQueueStats, Snapshot, ThreadStats};
use openflow::port::{port_config, port_state};
use openflow::Experimenter;
use pipeline::trace::{format_dp_action, format_key, key_from_flow, key_from_frame, Trace};
use serde_json::{json, Value};

use super::features::port_desc;
use super::handle::reply;
use super::port_cmd::{done_bytes, exp_error, exp_type, parse_look_request, refusal};
use super::OfBridge;

/// How long `dump-megaflows` waits for the threads' answers.
const DUMP_DEADLINE: Duration = Duration::from_secs(3);

/// Answers a request of [`exp_type::PMD_STATS`] … [`exp_type::TRACE`] (already known to come
/// from the management socket).
pub(super) fn handle(b: &OfBridge, xid: u32, e: &Experimenter, out: &mut Vec<u8>) {
    let t = e.exp_type;
    let answer = parse_look_request(e).and_then(|(json, args)| {
        if (exp_type::CAPTURE_START..=exp_type::CAPTURE_STOP).contains(&t) {
            super::capture::answer(b, &b.counters.captures, t, &args)
        } else {
            answer(b, t, json, &args).map(String::into_bytes)
        }
    });
    match answer {
        Ok(bytes) => {
            for m in done_bytes(&bytes) {
                reply(out, xid, &m);
            }
        }
        Err(text) => reply(out, xid, &refusal(exp_error::REFUSED, &text)),
    }
}

fn answer(b: &OfBridge, t: u32, json: bool, args: &[String]) -> Result<String, String> {
    let v = match t {
        exp_type::TRACE => return trace(b, json, args),
        exp_type::PMD_STATS => {
            let reset = args.iter().any(|a| a == "--reset" || a == "reset");
            let dp = datapath(b)?;
            let threads = b.counters.threads_since_reset(&*dp, reset);
            if reset {
                return Ok(if json {
                    "{}".into()
                } else {
                    "pmd stats reset\n".into()
                });
            }
            pmd_stats(&threads, json)
        }
        exp_type::RXQ_SHOW => {
            let dp = datapath(b)?;
            rxq_show(b, &dp.threads(), &dp.rx_queues(), json)
        }
        exp_type::DUMP_MEGAFLOWS => {
            let dp = datapath(b)?;
            let (mfs, silent) = dp.megaflows(DUMP_DEADLINE);
            megaflows(&mfs, &silent, pipeline::dpaction::now_ms(), json)
        }
        exp_type::SHOW => show(b, json),
        exp_type::DUMP_QUEUES => return super::qos_show::dump_queues(b, json, args),
        other => return Err(format!("unknown Hayate dump {other}")),
    };
    Ok(v)
}

fn datapath(b: &OfBridge) -> Result<std::sync::Arc<dyn super::DatapathCounters>, String> {
    b.datapath_counters()
        .ok_or_else(|| format!("bridge {} has no running datapath", b.cfg.name))
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// `part / whole` as a percentage (0 when `whole` is 0).
fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn thread_title(t: &ThreadStats) -> String {
    let core = t.core.map_or_else(|| "-".to_string(), |c| c.to_string());
    let lane = if t.lane { " (priority lane)" } else { "" };
    format!("pmd thread {} core {core}{lane}", t.index)
}

/// `pmd-stats`: per thread, as `dpif-netdev/pmd-stats-show` (module docs).
fn pmd_stats(threads: &[ThreadStats], json: bool) -> String {
    let one = |s: &Snapshot| {
        let cycles = s.busy_cycles + s.idle_cycles;
        json!({
            "packets": s.rx_packets,
            "emc_hits": s.emc_hits,
            "emc_hit_pct": pct(s.emc_hits, s.rx_packets),
            "megaflow_hits": s.megaflow_hits,
            "megaflow_hit_pct": pct(s.megaflow_hits, s.rx_packets),
            "subtable_lookups_per_megaflow_hit": ratio(s.megaflow_probes, s.megaflow_hits),
            "upcalls": s.upcalls,
            "upcall_shed": s.upcall_shed,
            "upcall_cycles": s.upcall_cycles,
            "idle_cycles": s.idle_cycles,
            "idle_pct": pct(s.idle_cycles, cycles),
            "busy_cycles": s.busy_cycles,
            "busy_pct": pct(s.busy_cycles, cycles),
            "cycles_per_packet": ratio(cycles, s.rx_packets),
            "busy_cycles_per_packet": ratio(s.busy_cycles, s.rx_packets),
            "tx_packets": s.tx_packets,
            "drops": s.drops(),
        })
    };
    if json {
        let v: Vec<Value> = threads
            .iter()
            .map(|t| {
                let mut o = one(&t.stats);
                o["thread"] = json!(t.index);
                o["core"] = json!(t.core);
                o["lane"] = json!(t.lane);
                o
            })
            .collect();
        return pretty(&json!({ "threads": v }));
    }
    let mut s = String::new();
    for t in threads {
        let st = &t.stats;
        let cycles = st.busy_cycles + st.idle_cycles;
        let _ = writeln!(s, "{}:", thread_title(t));
        let _ = writeln!(s, "  packets received: {}", st.rx_packets);
        let _ = writeln!(
            s,
            "  emc hits: {} ({:.1}%)",
            st.emc_hits,
            pct(st.emc_hits, st.rx_packets)
        );
        let _ = writeln!(
            s,
            "  megaflow hits: {} ({:.1}%)",
            st.megaflow_hits,
            pct(st.megaflow_hits, st.rx_packets)
        );
        let _ = writeln!(
            s,
            "  avg. subtable lookups per megaflow hit: {:.2}",
            ratio(st.megaflow_probes, st.megaflow_hits)
        );
        let _ = writeln!(s, "  upcalls: {} ({} cycles)", st.upcalls, st.upcall_cycles);
        let _ = writeln!(s, "  misses shed without an upcall: {}", st.upcall_shed);
        let _ = writeln!(
            s,
            "  idle cycles: {} ({:.1}%)",
            st.idle_cycles,
            pct(st.idle_cycles, cycles)
        );
        let _ = writeln!(
            s,
            "  processing cycles: {} ({:.1}%)",
            st.busy_cycles,
            pct(st.busy_cycles, cycles)
        );
        let _ = writeln!(
            s,
            "  avg cycles per packet: {:.1} ({:.1} processing)",
            ratio(cycles, st.rx_packets),
            ratio(st.busy_cycles, st.rx_packets)
        );
        let _ = writeln!(s, "  packets sent: {}", st.tx_packets);
        let _ = writeln!(s, "  drops: {}", st.drops());
    }
    s
}

/// `rxq-show`: the queues of each thread, with each queue's share of the thread's cycles
/// since start (`pmd usage`, as Open vSwitch's).
fn rxq_show(b: &OfBridge, threads: &[ThreadStats], queues: &[RxQueueStats], json: bool) -> String {
    let names: Vec<(u32, String)> = b.ports().into_iter().map(|p| (p.no, p.name)).collect();
    let name = |no: u32| {
        names
            .iter()
            .find(|(n, _)| *n == no)
            .map_or_else(|| "?".to_string(), |(_, s)| s.clone())
    };
    let usage = |q: &RxQueueStats| {
        let total = threads
            .iter()
            .find(|t| t.index == q.thread)
            .map_or(0, |t| t.stats.busy_cycles + t.stats.idle_cycles);
        pct(q.stats.busy_cycles, total)
    };
    if json {
        let v: Vec<Value> = queues
            .iter()
            .map(|q| {
                json!({
                    "thread": q.thread,
                    "ofport": q.ofport,
                    "port": name(q.ofport),
                    "queue": q.queue,
                    "packets": q.stats.rx_packets,
                    "busy_cycles": q.stats.busy_cycles,
                    "usage_pct": usage(q),
                })
            })
            .collect();
        return pretty(&json!({ "queues": v }));
    }
    let mut s = String::new();
    for t in threads {
        let _ = writeln!(s, "{}:", thread_title(t));
        let mine: Vec<_> = queues.iter().filter(|q| q.thread == t.index).collect();
        if mine.is_empty() {
            let _ = writeln!(s, "  no rx queue");
        }
        for q in mine {
            let _ = writeln!(
                s,
                "  port: {} ({})  queue-id: {}  packets: {}  pmd usage: {:.1} %",
                q.ofport,
                name(q.ofport),
                q.queue,
                q.stats.rx_packets,
                usage(q)
            );
        }
    }
    s
}

/// `dump-megaflows`: one line per megaflow, as `dpctl/dump-flows` (module docs).
fn megaflows(mfs: &[MegaflowRecord], silent: &[usize], now_ms: u64, json: bool) -> String {
    let age = |m: &MegaflowRecord| now_ms.saturating_sub(m.installed_ms);
    let used = |m: &MegaflowRecord| now_ms.saturating_sub(m.used_ms);
    if json {
        let v: Vec<Value> = mfs
            .iter()
            .map(|m| {
                json!({
                    "thread": m.thread,
                    "match": format_key(&m.key, &m.mask),
                    "actions": m.actions,
                    "packets": m.packets,
                    "bytes": m.bytes,
                    "age_ms": age(m),
                    "used_ms_ago": used(m),
                })
            })
            .collect();
        return pretty(&json!({ "megaflows": v, "threads_not_answering": silent }));
    }
    let mut s = String::new();
    for m in mfs {
        let _ = writeln!(
            s,
            "thread={}, {}, packets:{}, bytes:{}, age:{:.3}s, used:{:.3}s, actions:{}",
            m.thread,
            format_key(&m.key, &m.mask),
            m.packets,
            m.bytes,
            age(m) as f64 / 1000.0,
            used(m) as f64 / 1000.0,
            m.actions
        );
    }
    if !silent.is_empty() {
        let _ = writeln!(s, "(threads {silent:?} did not answer in time)");
    }
    s
}

/// `trace FLOW` or `trace --hex HEX [in_port=N]` (module docs).
fn trace(b: &OfBridge, json: bool, args: &[String]) -> Result<String, String> {
    let key = match args {
        [flag, hex, rest @ ..] if flag == "--hex" => {
            let in_port = match rest {
                [] => 0,
                [p] => p
                    .strip_prefix("in_port=")
                    .unwrap_or(p)
                    .parse()
                    .map_err(|_| format!("{p:?} is not in_port=N"))?,
                _ => return Err("trace --hex takes the frame and at most in_port=N".into()),
            };
            key_from_frame(hex, in_port)?
        }
        [flow] => key_from_flow(flow)?,
        _ => {
            return Err("trace takes a packet: FLOW (ovs-ofctl match syntax, e.g. \
                        in_port=1,udp,nw_src=10.0.0.1,tp_dst=53) or --hex FRAME [in_port=N]"
                .into())
        }
    };
    let pipeline = b.lock().control.published();
    let t = pipeline.trace(&key);
    Ok(if json {
        pretty(&trace_json(&t))
    } else {
        t.to_text(&b.cfg.name)
    })
}

fn trace_json(t: &Trace) -> Value {
    let acts = &t.translation.actions;
    let steps: Vec<Value> = t
        .steps
        .iter()
        .enumerate()
        .map(|(i, st)| {
            let end = t.steps.get(i + 1).map_or(acts.len(), |n| n.first_action);
            let dp: Vec<String> = acts
                .get(st.first_action..end)
                .unwrap_or(&[])
                .iter()
                .map(format_dp_action)
                .collect();
            let entry = st.entry.as_ref().map(|e| {
                json!({
                    "priority": e.priority,
                    "match": format_key(&e.matcher.value, &e.matcher.mask),
                    "cookie": format!("0x{:x}", e.cookie),
                    "actions": pipeline::ofctl::format_actions(&e.instructions),
                })
            });
            json!({ "table": st.table, "entry": entry, "datapath_actions": dp })
        })
        .collect();
    let dp: Vec<String> = acts.iter().map(format_dp_action).collect();
    json!({
        "flow": pipeline::trace::format_packet(&t.key),
        "tables": steps,
        "megaflow": format_key(&t.key, &t.translation.mask),
        "datapath_actions": dp,
        "cacheable": t.translation.cacheable,
    })
}

/// Names of the set bits of `v` from `names`.
fn flag_names(v: u32, names: &[(u32, &'static str)]) -> Vec<&'static str> {
    names
        .iter()
        .filter(|(b, _)| v & b != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// `show`: the bridge, its controllers and ports (module docs).
pub(super) fn show(b: &OfBridge, json: bool) -> String {
    let (descs, fail_open) = {
        let st = b.lock();
        let d: Vec<_> = st
            .ports
            .iter()
            .map(|p| (port_desc(p), p.port.port.clone()))
            .collect();
        (d, st.fail_open)
    };
    let ctl = b.counters.controllers();
    let targets = ctl.as_ref().map(|c| c.targets()).unwrap_or_default();
    let connected = ctl.as_ref().map(|c| c.connected()).unwrap_or_default();
    let fail_mode = format!("{:?}", b.cfg.fail_mode).to_lowercase();
    let ports: Vec<Value> = descs
        .iter()
        .map(|(d, port)| {
            let caps = port.capabilities();
            let mac: Vec<String> = d.hw_addr.iter().map(|x| format!("{x:02x}")).collect();
            let (policing, egress) = b.rates_text(d.port_no);
            json!({
                "ofport": d.port_no,
                "name": d.name,
                "backend": port.name(),
                "addr": mac.join(":"),
                "config": flag_names(d.config, &[
                    (port_config::PORT_DOWN, "PORT_DOWN"),
                    (port_config::NO_RECV, "NO_RECV"),
                    (port_config::NO_FWD, "NO_FWD"),
                    (port_config::NO_PACKET_IN, "NO_PACKET_IN"),
                ]),
                "state": flag_names(d.state, &[
                    (port_state::LINK_DOWN, "LINK_DOWN"),
                    (port_state::BLOCKED, "BLOCKED"),
                    (port_state::LIVE, "LIVE"),
                ]),
                "rx_queues": caps.rx_queues,
                "tx_queues": caps.tx_queues,
                "ingress_policing": policing,
                "egress_queues": egress,
                "link_status": port.link_status(),
            })
        })
        .collect();
    let controllers: Vec<Value> = connected
        .iter()
        .map(
            |c| json!({ "target": c.target, "peer": c.peer, "role": c.role, "is_connected": true }),
        )
        .collect();
    let v = json!({
        "bridge": b.cfg.name,
        "datapath_id": format!("{:016x}", b.cfg.datapath_id),
        "fail_mode": fail_mode,
        "fail_open_flow": fail_open,
        "targets": targets,
        "controllers": controllers,
        "ports": ports,
    });
    if json {
        return pretty(&v);
    }
    let mut s = String::new();
    let _ = writeln!(s, "Bridge {}", b.cfg.name);
    let _ = writeln!(s, "    datapath_id: {:016x}", b.cfg.datapath_id);
    let _ = writeln!(
        s,
        "    fail_mode: {fail_mode}{}",
        if fail_open {
            " (no controller: acting as a learning switch)"
        } else {
            ""
        }
    );
    for t in &targets {
        let _ = writeln!(s, "    Controller \"{t}\"");
    }
    if connected.is_empty() {
        let _ = writeln!(s, "        is_connected: false");
    }
    for c in &connected {
        let _ = writeln!(
            s,
            "        is_connected: true, role: {}, peer: {} (through {})",
            c.role, c.peer, c.target
        );
    }
    for p in &ports {
        let list = |k: &str| {
            let v: Vec<&str> = p[k]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if v.is_empty() {
                "0".to_string()
            } else {
                v.join(" ")
            }
        };
        let _ = writeln!(
            s,
            "    Port {} \"{}\"",
            p["ofport"],
            p["name"].as_str().unwrap_or("")
        );
        let _ = writeln!(
            s,
            "        backend: {}, addr: {}, rx queues: {}, tx queues: {}",
            p["backend"].as_str().unwrap_or(""),
            p["addr"].as_str().unwrap_or(""),
            p["rx_queues"],
            p["tx_queues"]
        );
        let _ = writeln!(
            s,
            "        config: {}, state: {}",
            list("config"),
            list("state")
        );
        if let Some(p) = p["ingress_policing"].as_str() {
            let _ = writeln!(s, "        ingress policing: {p}");
        }
        if let Some(e) = p["egress_queues"].as_str() {
            let _ = writeln!(s, "        egress: {e}");
        }
        if let Some(why) = p["link_status"].as_str() {
            let _ = writeln!(s, "        link down: {why}");
        }
    }
    s
}

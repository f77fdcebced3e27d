//! `dump-queues [PORT]` (`hayate ctl BRIDGE dump-queues`): each port's egress queues with
//! their rates and what they did — packets and bytes sent, packets dropped (over the rates
//! when the port polices, at a full queue when it shapes: tail drops), and for a shaper the
//! packets its queues hold now, all poll threads together — and the port's drops for a queue
//! it lacks. Open vSwitch shows the same with `ovs-appctl qos/show` (rates, and the tc
//! class's `tx_packets`, `tx_bytes`, `tx_errors`); `ovs-ofctl queue-stats` gives the counters
//! without the held packets (its `errors` are the drops, as Open vSwitch's `linux-htb` counts
//! the HTB class's drops as `tx_errors`).

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::OfBridge;

/// The text (or JSON) of `dump-queues`, for every port with queues or a cap, or the one port
/// named (by name or number) in `args`.
pub(super) fn dump_queues(b: &OfBridge, json: bool, args: &[String]) -> Result<String, String> {
    let rates = b
        .rates()
        .ok_or_else(|| format!("bridge {} has no running datapath", b.cfg.name))?;
    let ports = b.ports();
    let asked = args.first();
    if let Some(w) = asked {
        if !ports.iter().any(|p| &p.name == w || p.no.to_string() == *w) {
            return Err(format!(
                "bridge {} has no port {w}; give a port's name or number",
                b.cfg.name
            ));
        }
    }
    let mut out = Vec::new();
    for p in &ports {
        if asked.is_some_and(|w| *w != p.name && *w != p.no.to_string()) {
            continue;
        }
        let e = rates.egress(p.no);
        if !e.is_on() && asked.is_none() {
            continue;
        }
        let (mut queues, unknown) = rates.egress_queues(p.no);
        // Queue 0 without a row still carries the unqueued packets: shown, marked.
        let default = rates.egress_default_queue(p.no);
        queues.extend(default);
        queues.sort_by_key(|q| q.queue);
        let queues: Vec<Value> = queues
            .iter()
            .map(|q| {
                json!({
                    "queue": q.queue,
                    "row": !(q.queue == 0 && default.is_some()),
                    "min_rate_kbps": q.rates.min_kbps,
                    "max_rate_kbps": q.rates.max_kbps,
                    "burst_kbit": q.rates.burst_kbit,
                    "tx_packets": q.counts.tx_packets,
                    "tx_bytes": q.counts.tx_bytes,
                    "dropped": q.counts.dropped,
                    "held": q.counts.backlog,
                })
            })
            .collect();
        out.push(json!({
            "ofport": p.no,
            "name": p.name,
            "qos_type": e.qos_type.name(),
            "max_rate_kbps": e.max_kbps,
            "backlog_per_thread": e.backlog_limit(),
            "unknown_queue_drops": unknown,
            "queues": queues,
        }));
    }
    if json {
        let mut s = serde_json::to_string_pretty(&json!({ "ports": out })).unwrap_or_default();
        s.push('\n');
        return Ok(s);
    }
    Ok(text(&out))
}

fn text(ports: &[Value]) -> String {
    let mut s = String::new();
    if ports.is_empty() {
        s.push_str("no port has egress queues\n");
    }
    for p in ports {
        let _ = write!(
            s,
            "port {} ({}): {}",
            p["ofport"],
            str_of(&p["name"]),
            str_of(&p["qos_type"])
        );
        match p["max_rate_kbps"].as_u64() {
            Some(0) | None => s.push_str(", no port cap"),
            Some(m) => {
                let _ = write!(s, ", port cap {m} kbit/s");
            }
        }
        if let Some(b) = p["backlog_per_thread"].as_u64().filter(|&b| b != 0) {
            let _ = write!(s, ", {b} packets a queue per thread");
        }
        let _ = writeln!(s, ", unknown-queue drops {}", p["unknown_queue_drops"]);
        for q in p["queues"].as_array().into_iter().flatten() {
            let rate = |k: &str| match q[k].as_u64() {
                Some(0) | None => "-".to_string(),
                Some(v) => v.to_string(),
            };
            let default = if q["row"] == false {
                " (no row: the port's default queue)"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "  queue {}{default}: min_rate={} max_rate={} burst={} tx_packets={} \
                 tx_bytes={} dropped={} held={}",
                q["queue"],
                rate("min_rate_kbps"),
                rate("max_rate_kbps"),
                rate("burst_kbit"),
                q["tx_packets"],
                q["tx_bytes"],
                q["dropped"],
                q["held"],
            );
        }
    }
    s
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

//! Reading the counters a window is measured with: `dump-ports` (ovs-ofctl's and `hayate
//! ctl`'s, the same layout), DPDK telemetry's `/ethdev/stats`, the OVS PMD's idle and
//! processing cycles (`dpif-netdev/pmd-stats-show`), and the rates between two readings.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};

/// One port's packet counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCount {
    /// Packets received.
    pub rx: u64,
    /// Packets sent.
    pub tx: u64,
    /// Packets the port could not send.
    pub tx_drop: u64,
}

fn field(text: &str, key: &str) -> Option<u64> {
    let at = text.find(key)? + key.len();
    let v: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    v.parse().ok()
}

/// The numbered ports of a `dump-ports` reply (`LOCAL` and named ports are left out; `?`
/// counts read as 0).
pub fn parse_dump_ports(text: &str) -> BTreeMap<u32, PortCount> {
    let mut out = BTreeMap::new();
    let mut cur: Option<u32> = None;
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("port ") {
            cur = None;
            let Some((id, counts)) = rest.split_once(':') else {
                continue;
            };
            if let Ok(no) = id.trim().trim_matches('"').parse::<u32>() {
                let e: &mut PortCount = out.entry(no).or_default();
                e.rx = field(counts, "rx pkts=").unwrap_or(0);
                cur = Some(no);
            }
        } else if let (Some(no), Some(counts)) = (cur, l.strip_prefix("tx ")) {
            let e = out.entry(no).or_default();
            e.tx = field(counts, "pkts=").unwrap_or(0);
            e.tx_drop = field(counts, "drop=").unwrap_or(0);
        }
    }
    out
}

/// `(ipackets, opackets)` of a DPDK telemetry `/ethdev/stats,N` reply.
pub fn parse_ethdev_stats(json: &str) -> Result<(u64, u64)> {
    let v: serde_json::Value =
        serde_json::from_str(json).with_context(|| format!("telemetry reply {json:?}"))?;
    let s = &v["/ethdev/stats"];
    let get = |k: &str| {
        s[k].as_u64()
            .ok_or_else(|| anyhow!("telemetry reply without {k}: {json}"))
    };
    Ok((get("ipackets")?, get("opackets")?))
}

/// `(idle, processing)` cycles of the OVS PMD thread on `core` in `pmd-stats-show` output.
pub fn parse_pmd_cycles(text: &str, core: usize) -> Option<(u64, u64)> {
    let head = format!("core_id {core}:");
    let mut on = false;
    let (mut idle, mut busy) = (None, None);
    for line in text.lines() {
        if line.starts_with("pmd thread") || line.starts_with("main thread") {
            on = line.starts_with("pmd thread") && line.contains(&head);
            continue;
        }
        if !on {
            continue;
        }
        let l = line.trim();
        if let Some(r) = l.strip_prefix("idle cycles:") {
            idle = r.split_whitespace().next()?.parse().ok();
        } else if let Some(r) = l.strip_prefix("processing cycles:") {
            busy = r.split_whitespace().next()?.parse().ok();
        }
    }
    Some((idle?, busy?))
}

/// `(idle, busy)` cycles of Hayate's poll threads pinned to `core`, summed, in `hayate ctl
/// BRIDGE dump-pmd` output (`pmd thread N core C:` then `  idle_cycles: V`, `  busy_cycles:
/// V`, ...); `None` when no thread is on that core.
pub fn parse_hayate_pmd_cycles(text: &str, core: usize) -> Option<(u64, u64)> {
    let head = format!(" core {core}:");
    let (mut on, mut seen) = (false, false);
    let (mut idle, mut busy) = (0u64, 0u64);
    for line in text.lines() {
        if !line.starts_with(' ') {
            on = line.starts_with("pmd thread") && line.ends_with(&head);
            seen |= on;
            continue;
        }
        if !on {
            continue;
        }
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        let v: u64 = v.trim().parse().ok()?;
        match k {
            "idle_cycles" => idle += v,
            "busy_cycles" => busy += v,
            _ => {}
        }
    }
    seen.then_some((idle, busy))
}

/// Counters read at one moment (the middle of the read), by key (`switch.p3.tx`, ...).
#[derive(Debug, Clone)]
pub struct Reading {
    /// When.
    pub at: Instant,
    /// The values.
    pub values: BTreeMap<String, u64>,
}

impl Reading {
    /// Reads with `f`, stamping the middle of the read.
    pub fn take(f: impl FnOnce() -> Result<BTreeMap<String, u64>>) -> Result<Reading> {
        let t0 = Instant::now();
        let values = f()?;
        let half = t0.elapsed() / 2;
        Ok(Reading {
            at: t0 + half,
            values,
        })
    }
}

/// Adds `prefix.p<N>.{rx,tx,txdrop}` of every port to `m`.
pub fn put_ports(m: &mut BTreeMap<String, u64>, prefix: &str, ports: &BTreeMap<u32, PortCount>) {
    for (no, c) in ports {
        m.insert(format!("{prefix}.p{no}.rx"), c.rx);
        m.insert(format!("{prefix}.p{no}.tx"), c.tx);
        m.insert(format!("{prefix}.p{no}.txdrop"), c.tx_drop);
    }
}

/// Per-second rates of every key both readings of each source have: `(b - a) / (tb - ta)`,
/// sources paired by position.
pub fn rates(a: &[Reading], b: &[Reading]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (ra, rb) in a.iter().zip(b) {
        let dt = rb.at.saturating_duration_since(ra.at).as_secs_f64();
        if dt <= 0.0 {
            continue;
        }
        for (k, &vb) in &rb.values {
            if let Some(&va) = ra.values.get(k) {
                out.insert(k.clone(), vb.saturating_sub(va) as f64 / dt);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ovs_and_hayate_port_dumps_parse_alike() {
        let ovs = "OFPST_PORT reply (xid=0x2): 3 ports\n  \
            port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0\n           \
            tx pkts=0, bytes=0, drop=0, errs=0, coll=0\n  \
            port  3: rx pkts=0, bytes=0, drop=?, errs=?, frame=?, over=?, crc=?\n           \
            tx pkts=77943210, bytes=4676592600, drop=0, errs=?, coll=?\n  \
            port  1: rx pkts=80000001, bytes=?, drop=?, errs=0, frame=?, over=?, crc=?\n           \
            tx pkts=0, bytes=0, drop=12, errs=?, coll=?\n";
        let p = parse_dump_ports(ovs);
        assert_eq!(p.len(), 2);
        assert_eq!(p[&3].tx, 77_943_210);
        assert_eq!(
            p[&1],
            PortCount {
                rx: 80_000_001,
                tx: 0,
                tx_drop: 12
            }
        );
        let hayate = "OFPST_PORT reply (OF1.3): 2 ports\n  \
            port  2: rx pkts=5, bytes=300, drop=0, errs=0, frame=0, over=0, crc=0\n           \
            tx pkts=7, bytes=420, drop=3, errs=0, coll=0\n           \
            duration=12.000000000s\n  \
            port 10: rx pkts=1, bytes=60, drop=0, errs=0, frame=0, over=0, crc=0\n           \
            tx pkts=2, bytes=120, drop=0, errs=0, coll=0\n";
        let p = parse_dump_ports(hayate);
        assert_eq!(
            p[&2],
            PortCount {
                rx: 5,
                tx: 7,
                tx_drop: 3
            }
        );
        assert_eq!(p[&10].tx, 2);
    }

    #[test]
    fn telemetry_and_pmd_stats_parse() {
        let j = r#"{"/ethdev/stats": {"ipackets": 120, "opackets": 118, "ibytes": 7200,
                    "q_ipackets": [120]}}"#;
        assert_eq!(parse_ethdev_stats(j).unwrap(), (120, 118));
        assert!(parse_ethdev_stats(r#"{"/ethdev/stats": null}"#).is_err());
        let pmd = "pmd thread numa_id 0 core_id 1:\n  packets received: 10\n  \
                   idle cycles: 140 (1.40%)\n  processing cycles: 9860 (98.60%)\n\
                   main thread:\n  idle cycles: 5 (50.00%)\n  processing cycles: 5 (50.00%)\n";
        assert_eq!(parse_pmd_cycles(pmd, 1), Some((140, 9860)));
        assert_eq!(parse_pmd_cycles(pmd, 0), None);
    }

    #[test]
    fn hayate_pmd_cycles_parse_for_the_threads_on_a_core() {
        let text = "pmd thread 0 core 1:\n  rx_packets: 10\n  busy_cycles: 900\n  \
                    idle_cycles: 100\npmd thread 1 core -:\n  busy_cycles: 5\n  \
                    idle_cycles: 5\ntotal:\n  busy_cycles: 905\n  idle_cycles: 105\n";
        assert_eq!(parse_hayate_pmd_cycles(text, 1), Some((100, 900)));
        assert_eq!(parse_hayate_pmd_cycles(text, 0), None);
        let two = "pmd thread 0 core 1:\n  busy_cycles: 1\n  idle_cycles: 2\n\
                   pmd thread 1 core 1:\n  busy_cycles: 10\n  idle_cycles: 20\n";
        assert_eq!(parse_hayate_pmd_cycles(two, 1), Some((22, 11)));
    }

    #[test]
    fn rates_use_each_sources_own_time() {
        let t = Instant::now();
        let r = |at: Instant, v: u64| Reading {
            at,
            values: [("s.p3.tx".to_string(), v)].into_iter().collect(),
        };
        let a = [r(t, 1_000)];
        let b = [r(t + Duration::from_millis(2_000), 21_000)];
        assert_eq!(rates(&a, &b)["s.p3.tx"], 10_000.0);
    }
}

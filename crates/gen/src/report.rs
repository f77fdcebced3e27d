//! Results: the types `--json` prints (field names are the JSON schema; a test pins them) and
//! the terminal tables.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::analyzer::StreamCounts;

/// Latency figures from a histogram of nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Probes measured.
    pub samples: u64,
    /// Smallest, ns.
    pub min_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// 99.9th percentile, ns.
    pub p999_ns: u64,
    /// 99.99th percentile, ns.
    pub p9999_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
    /// RFC 3550 interarrival jitter (the largest over the streams), ns.
    pub jitter_ns: u64,
}

impl Latency {
    /// The figures of `h`, with `jitter_ns`; `None` when `h` is empty.
    pub fn from_histogram(h: &Histogram<u64>, jitter_ns: u64) -> Option<Latency> {
        if h.is_empty() {
            return None;
        }
        Some(Latency {
            samples: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            p9999_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
            jitter_ns,
        })
    }
}

/// Buckets of a latency histogram for plots: (upper bound in ns, count), log-spaced.
pub fn buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_log(h.min().max(1), 1.25)
        .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
        .collect()
}

/// Packets of one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlowCounts {
    /// Flow index.
    pub flow: u32,
    /// Sent (0 when the sender is not in this process).
    pub tx: u64,
    /// Received.
    pub rx: u64,
}

/// Rates over one sampling interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// End of the interval, seconds since the start.
    pub t: f64,
    /// Packets per second sent.
    pub tx_pps: f64,
    /// Packets per second received.
    pub rx_pps: f64,
    /// Gbit/s sent on the wire (frame + 20 bytes).
    pub tx_gbps: f64,
    /// Gbit/s received on the wire.
    pub rx_gbps: f64,
}

/// The result of one run (`send`, `recv`, `run`, `loopback`, or one RFC 2544 trial).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunReport {
    /// Transmit port spec (empty when not sending).
    pub tx_port: String,
    /// Receive port spec (empty when not receiving).
    pub rx_port: String,
    /// Traffic: protocol, sizes, flows.
    pub traffic: String,
    /// Target rate in packets per second (`None`: as fast as possible).
    pub target_pps: Option<f64>,
    /// Seconds from the first to the last packet sent (or the receive window).
    pub seconds: f64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent (FCS included).
    pub tx_bytes: u64,
    /// Times the transmit port took less than offered (the rest was retried).
    pub tx_pushback: u64,
    /// Frames sent too short to carry a probe (their loss is counted from frames
    /// received without a probe; no sequence or latency).
    pub tx_without_probe: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received (FCS included).
    pub rx_bytes: u64,
    /// Received frames without a probe.
    pub rx_foreign: u64,
    /// Distinct probes received.
    pub rx_unique: u64,
    /// Extra copies of probes.
    pub duplicates: u64,
    /// Probes that arrived after a higher sequence number.
    pub reordered: u64,
    /// Probes sent and never received (receive-only: highest sequence + 1 − distinct).
    pub lost: u64,
    /// `lost` in percent of what was sent.
    pub loss_pct: f64,
    /// Million packets per second sent.
    pub tx_mpps: f64,
    /// Gbit/s sent on the wire.
    pub tx_gbps: f64,
    /// Million packets per second received.
    pub rx_mpps: f64,
    /// Gbit/s received on the wire.
    pub rx_gbps: f64,
    /// `one-way` (sender and receiver read one clock) or `round-trip` (a reflector).
    pub latency_kind: String,
    /// Latency figures (absent when no probe arrived).
    pub latency: Option<Latency>,
    /// Latency histogram: (upper bound ns, count), log-spaced.
    pub latency_histogram: Vec<(u64, u64)>,
    /// Per stream (sending thread).
    pub streams: Vec<StreamCounts>,
    /// Per flow (the first 1024 flows).
    pub flows: Vec<FlowCounts>,
    /// Rates over time.
    pub samples: Vec<Sample>,
    /// Measured time-stamp-counter rate, GHz.
    pub tsc_ghz: f64,
    /// CPU time the worker threads got, seconds (below `seconds` × threads when other
    /// processes took the cores).
    pub worker_cpu_secs: f64,
}

fn si(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} k", v / 1e3)
    } else {
        format!("{v:.0} ")
    }
}

/// Nanoseconds as text with a fitting unit.
pub fn ns(v: u64) -> String {
    if v >= 1_000_000 {
        format!("{:.2} ms", v as f64 / 1e6)
    } else if v >= 1_000 {
        format!("{:.2} µs", v as f64 / 1e3)
    } else {
        format!("{v} ns")
    }
}

impl RunReport {
    /// The report as terminal text.
    pub fn table(&self) -> String {
        let mut o = String::new();
        o.push_str(&format!("traffic   {}\n", self.traffic));
        if !self.tx_port.is_empty() {
            let target = self
                .target_pps
                .map_or("max".to_string(), |p| format!("{}pps", si(p)));
            o.push_str(&format!(
                "sent      {:>14} pkts  {:>12}pps  {:>8.3} Gbit/s  in {:.3} s  (target {target}, pushback {})  on {}\n",
                self.tx_packets,
                si(self.tx_mpps * 1e6),
                self.tx_gbps,
                self.seconds,
                self.tx_pushback,
                self.tx_port
            ));
        }
        // Per busy core only means something when the workers ran flat out.
        if self.worker_cpu_secs > 0.0 && self.target_pps.is_none() {
            let pkts = self.tx_packets.max(self.rx_packets) as f64;
            o.push_str(&format!(
                "cpu       {:.3} s on worker threads: {:.2} Mpps per busy core\n",
                self.worker_cpu_secs,
                pkts / self.worker_cpu_secs / 1e6
            ));
        }
        if !self.rx_port.is_empty() {
            o.push_str(&format!(
                "received  {:>14} pkts  {:>12}pps  {:>8.3} Gbit/s  on {}\n",
                self.rx_packets,
                si(self.rx_mpps * 1e6),
                self.rx_gbps,
                self.rx_port
            ));
            if self.tx_without_probe > 0 {
                o.push_str(&format!(
                    "note      {} frames sent too short for a probe: counted by number only\n",
                    self.tx_without_probe
                ));
            }
            o.push_str(&format!(
                "probes    {} distinct, {} lost ({:.4} %), {} reordered, {} duplicates, {} foreign frames\n",
                self.rx_unique, self.lost, self.loss_pct, self.reordered, self.duplicates, self.rx_foreign
            ));
            match &self.latency {
                Some(l) => o.push_str(&format!(
                    "latency   ({}) min {}  median {}  p99 {}  p99.9 {}  p99.99 {}  max {}  mean {}  jitter {}\n",
                    self.latency_kind,
                    ns(l.min_ns),
                    ns(l.p50_ns),
                    ns(l.p99_ns),
                    ns(l.p999_ns),
                    ns(l.p9999_ns),
                    ns(l.max_ns),
                    ns(l.mean_ns as u64),
                    ns(l.jitter_ns)
                )),
                None => o.push_str("latency   no probe arrived\n"),
            }
            let lossy: Vec<&FlowCounts> = self
                .flows
                .iter()
                .filter(|f| f.tx != f.rx && f.tx > 0)
                .collect();
            if !lossy.is_empty() {
                o.push_str(&format!(
                    "flows with loss: {} of {}",
                    lossy.len(),
                    self.flows.len()
                ));
                for f in lossy.iter().take(8) {
                    o.push_str(&format!("  #{} {}/{}", f.flow, f.rx, f.tx));
                }
                o.push('\n');
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_figures_from_a_histogram() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 1_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap();
        }
        let l = Latency::from_histogram(&h, 7).unwrap();
        assert_eq!((l.samples, l.min_ns, l.jitter_ns), (1000, 10, 7));
        // HDR values are exact to 3 significant digits.
        assert!(l.max_ns.abs_diff(10_000) <= 10);
        assert!(l.p50_ns.abs_diff(5000) <= 5);
        assert!(l.p99_ns.abs_diff(9900) <= 10);
        assert!(Latency::from_histogram(&Histogram::new(3).unwrap(), 0).is_none());
        let b = buckets(&h);
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 1000);
    }

    #[test]
    fn table_names_the_figures() {
        let r = RunReport {
            tx_port: "ring:x".into(),
            rx_port: "ring:x".into(),
            traffic: "udp4 64 B".into(),
            latency_kind: "one-way".into(),
            ..RunReport::default()
        };
        let t = r.table();
        assert!(t.contains("sent") && t.contains("received") && t.contains("no probe arrived"));
        assert_eq!(ns(1500), "1.50 µs");
        assert_eq!(ns(15), "15 ns");
    }
}

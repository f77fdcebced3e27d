//! The results of `hayate bench compare`: a table with ratios to the Linux bridge, JSON, and
//! an SVG plot of throughput by frame size.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::measure::{Latency, Rate, Tcp};
use crate::report::{firsts, lines, opt, Align, Lines, Table};

/// Everything measured on one switch.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SwitchResult {
    /// The switch's name.
    pub switch: String,
    /// "ok", or why it could not be measured.
    pub status: String,
    /// Packet rate A→B by frame size (host offloads off: the same frames for every switch).
    pub rates: Vec<Rate>,
    /// Ping A→B on an idle switch.
    pub ping_idle: Option<Latency>,
    /// CPU the switch's process used while idle (no traffic), percent of one core.
    pub idle_cpu_pct: Option<f64>,
    /// One TCP stream with the hosts' offloads on (checksum, TSO, GSO).
    pub tcp_offloads_on: Option<Tcp>,
    /// One TCP stream with the hosts' offloads off (MTU-sized, fully formed frames).
    pub tcp_offloads_off: Option<Tcp>,
}

impl SwitchResult {
    fn pps(&self, frame: usize) -> Option<f64> {
        self.rates.iter().find(|r| r.frame == frame).map(|r| r.pps)
    }
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Generator used for the packet-rate tests.
    pub generator: String,
    /// How host B disposed of the packet-rate test's frames (`ingress` or `stack`, see
    /// `--sink`).
    pub sink: String,
    /// Core of the generator, iperf3 and ping.
    pub gen_core: usize,
    /// Core of the switch.
    pub switch_core: usize,
    /// Measured window per frame size, seconds.
    pub window_s: f64,
    /// Runs per switch (`--repeat`).
    pub repeat: usize,
    /// Per switch: each figure the median over its runs.
    pub results: Vec<SwitchResult>,
    /// Every run of every switch, when there were several (`--repeat N`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Vec<SwitchResult>>,
}

fn ratio(v: Option<f64>, base: Option<f64>) -> String {
    opt(crate::report::ratio(v, base), 2, "x")
}

fn lat(l: &Option<Latency>) -> String {
    match l {
        Some(l) if l.loss_pct < 100.0 => {
            format!("{:.0}/{:.0}/{:.0}", l.min_us, l.median_us, l.p99_us)
        }
        Some(_) => "no reply".into(),
        None => "-".into(),
    }
}

impl Report {
    /// The terminal table: one row per switch, rates and ratios to the Linux bridge.
    pub fn table(&self) -> String {
        let base = self.results.iter().find(|r| r.switch == "linux-bridge");
        let frames = firsts(self.results.iter().flat_map(|r| &r.rates), |x| x.frame);
        let mut t = Table::new().col("switch", 16, Align::Left);
        for f in &frames {
            t = t.col(&format!("{f}B Mpps"), 15, Align::Right);
        }
        let mut t = t
            .col("TCP on Gb/s", 14, Align::Right)
            .col("TCP off Gb/s", 14, Align::Right)
            .col("ping idle µs", 16, Align::Right)
            .col("ping load µs", 16, Align::Right)
            .col("idle CPU", 9, Align::Right)
            .col(" status", 0, Align::Left);
        let mut note = format!(
            "{} (min/median/p99 for pings; ratios to the Linux bridge",
            " ".repeat(16)
        );
        if self.repeat > 1 {
            note.push_str(&format!("; each figure the median of {} runs", self.repeat));
        }
        t.text(note + ")");
        for r in &self.results {
            let mut cells = vec![r.switch.clone()];
            for f in &frames {
                let v = r.pps(*f);
                cells.push(match v {
                    Some(p) => format!("{:.3} {}", p / 1e6, ratio(v, base.and_then(|b| b.pps(*f)))),
                    None => "-".into(),
                });
            }
            let tcp = |t: &Option<Tcp>, b: Option<&Option<Tcp>>| match t {
                Some(t) if t.error.is_some() => format!("{:.2} stall", t.gbps),
                Some(t) => format!(
                    "{:.2} {}",
                    t.gbps,
                    ratio(Some(t.gbps), b.and_then(|b| b.as_ref().map(|x| x.gbps)))
                ),
                None => "-".into(),
            };
            cells.extend([
                tcp(&r.tcp_offloads_on, base.map(|b| &b.tcp_offloads_on)),
                tcp(&r.tcp_offloads_off, base.map(|b| &b.tcp_offloads_off)),
                lat(&r.ping_idle),
                lat(&r.tcp_offloads_on.as_ref().map(|t| t.ping_load)),
                opt(r.idle_cpu_pct, 1, "%"),
                format!(" {}", r.status),
            ]);
            t.row(cells);
        }
        t.render()
    }

    /// Writes an SVG plot of throughput by frame size (Mpps, one line per switch).
    pub fn plot(&self, path: &Path) -> Result<()> {
        let series = self
            .results
            .iter()
            .filter(|r| !r.rates.is_empty())
            .map(|r| {
                let points = r.rates.iter().map(|x| (x.frame as f64, x.pps / 1e6));
                (r.switch.clone(), points.collect())
            })
            .collect();
        lines(
            path,
            &Lines {
                caption: "Throughput A→B by frame size (two hosts, veth, one switch core)".into(),
                x_desc: "frame size (bytes, FCS included)".into(),
                y_desc: "Mpps".into(),
                series,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let rate = |frame, pps| Rate {
            frame,
            pps,
            offered_pps: pps,
            switch_cpu_pct: None,
        };
        let tcp = |gbps| Tcp {
            gbps,
            ping_load: Latency {
                min_us: 10.0,
                median_us: 20.0,
                p99_us: 90.0,
                loss_pct: 0.0,
            },
            error: None,
        };
        Report {
            generator: "trafgen".into(),
            sink: "ingress".into(),
            gen_core: 0,
            switch_core: 1,
            window_s: 3.0,
            results: vec![
                SwitchResult {
                    switch: "linux-bridge".into(),
                    status: "ok".into(),
                    rates: vec![rate(64, 1.0e6), rate(1518, 0.9e6)],
                    ping_idle: None,
                    idle_cpu_pct: None,
                    tcp_offloads_on: Some(tcp(10.0)),
                    tcp_offloads_off: None,
                },
                SwitchResult {
                    switch: "hayate-afxdp".into(),
                    status: "ok".into(),
                    rates: vec![rate(64, 2.5e6), rate(1518, 1.8e6)],
                    ping_idle: None,
                    idle_cpu_pct: None,
                    tcp_offloads_on: Some(tcp(15.0)),
                    tcp_offloads_off: None,
                },
            ],
            repeat: 1,
            runs: Vec::new(),
        }
    }

    #[test]
    fn table_shows_ratios_to_the_bridge() {
        let t = sample().table();
        assert!(t.contains("2.500 2.50x"), "{t}");
        assert!(t.contains("1.800 2.00x"), "{t}");
        assert!(t.contains("15.00 1.50x"), "{t}");
        assert!(t.contains("10/20/90"), "{t}");
    }

    #[test]
    fn plot_writes_an_svg() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.svg");
        sample().plot(&p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        assert!(svg.contains("hayate-afxdp") && svg.contains("linux-bridge"));
    }
}

//! The results of `hayate bench compare`: a table with ratios to the Linux bridge, JSON, and
//! an SVG plot of throughput by frame size.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use serde::Serialize;

use super::measure::{Latency, Rate, Tcp};

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
    match (v, base) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:.2}x", v / b),
        _ => "-".into(),
    }
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
        let frames: Vec<usize> = self
            .results
            .iter()
            .flat_map(|r| r.rates.iter().map(|x| x.frame))
            .fold(Vec::new(), |mut v, f| {
                if !v.contains(&f) {
                    v.push(f);
                }
                v
            });
        let mut s = String::new();
        let _ = write!(s, "{:<16}", "switch");
        for f in &frames {
            let _ = write!(s, " {:>15}", format!("{f}B Mpps"));
        }
        let _ = writeln!(
            s,
            " {:>14} {:>14} {:>16} {:>16} {:>9}  status",
            "TCP on Gb/s", "TCP off Gb/s", "ping idle µs", "ping load µs", "idle CPU"
        );
        s.push_str(&" ".repeat(16));
        s.push_str(" (min/median/p99 for pings; ratios to the Linux bridge");
        if self.repeat > 1 {
            let _ = write!(s, "; each figure the median of {} runs", self.repeat);
        }
        s.push_str(")\n");
        for r in &self.results {
            let _ = write!(s, "{:<16}", r.switch);
            for f in &frames {
                let v = r.pps(*f);
                let cell = match v {
                    Some(p) => format!("{:.3} {}", p / 1e6, ratio(v, base.and_then(|b| b.pps(*f)))),
                    None => "-".into(),
                };
                let _ = write!(s, " {cell:>15}");
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
            let idle = r
                .idle_cpu_pct
                .map(|c| format!("{c:.1}%"))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                " {:>14} {:>14} {:>16} {:>16} {:>9}  {}",
                tcp(&r.tcp_offloads_on, base.map(|b| &b.tcp_offloads_on)),
                tcp(&r.tcp_offloads_off, base.map(|b| &b.tcp_offloads_off)),
                lat(&r.ping_idle),
                lat(&r.tcp_offloads_on.as_ref().map(|t| t.ping_load)),
                idle,
                r.status
            );
        }
        s
    }

    /// Writes an SVG plot of throughput by frame size (Mpps, one line per switch).
    pub fn plot(&self, path: &Path) -> Result<()> {
        let series: Vec<(&str, Vec<(f64, f64)>)> = self
            .results
            .iter()
            .filter(|r| !r.rates.is_empty())
            .map(|r| {
                (
                    r.switch.as_str(),
                    r.rates
                        .iter()
                        .map(|x| (x.frame as f64, x.pps / 1e6))
                        .collect(),
                )
            })
            .collect();
        let max_y = series
            .iter()
            .flat_map(|(_, v)| v.iter().map(|p| p.1))
            .fold(0.1f64, f64::max)
            * 1.15;
        let max_x = series
            .iter()
            .flat_map(|(_, v)| v.iter().map(|p| p.0))
            .fold(128.0f64, f64::max);
        let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| anyhow!("plotting {}: {e}", path.display());
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Throughput A→B by frame size (two hosts, veth, one switch core)",
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..max_x * 1.05, 0f64..max_y)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("frame size (bytes, FCS included)")
            .y_desc("Mpps")
            .draw()
            .map_err(|e| err(&e))?;
        for (i, (name, points)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| err(&e))?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
        Ok(())
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

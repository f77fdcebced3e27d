//! The results of `hayate bench vhost`: each (topology, switch) the median of its runs, with
//! ratios to Open vSwitch with DPDK and to the DPDK vhost floor of the same run; a table,
//! JSON, and an SVG bar chart of Mpps per switch and topology.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::report::{bars, find, grid, groups, opt, ratio, Align, Bars, Entry, Runs, Table};

/// The reference every ratio is taken to.
pub const OVS: &str = "ovs-dpdk";
/// The floor.
pub const FLOOR: &str = "dpdk-vhost";
/// The switch the targets are about.
pub const HAYATE: &str = "hayate";

/// One measurement.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    /// Topology: pvp or v2v.
    pub topology: String,
    /// Switch name.
    pub switch: String,
    /// "ok", "skipped: ...", or "failed: ...".
    pub status: String,
    /// Delivered rate, Mpps.
    pub mpps: Option<f64>,
    /// What entered the path (phy-in receive, or VM A's transmit), Mpps.
    pub offered_mpps: Option<f64>,
    /// Share of the switch core's cycles spent on packets, when the switch reports it.
    pub busy_share: Option<f64>,
    /// Switch-core cycles per delivered packet: TSC Hz × busy share / rate (busy share 1
    /// when not reported: the core busy-polls, so this is then an upper bound).
    pub cycles_per_packet: Option<f64>,
    /// Seconds between the window's readings.
    pub window_s: Option<f64>,
    /// Every counter rate read over the window, packets per second.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub rates: BTreeMap<String, f64>,
}

/// One (topology, switch) over its runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    /// Topology.
    pub topology: String,
    /// Switch.
    pub switch: String,
    /// "ok", "ok in K of N runs", or the first run's status when none was ok.
    pub status: String,
    /// Median delivered rate, Mpps.
    pub mpps: Option<f64>,
    /// Median cycles per packet.
    pub cycles_per_packet: Option<f64>,
    /// Median busy share (None: not reported, cycles are TSC Hz / rate).
    pub busy_share: Option<f64>,
    /// Rate ÷ Open vSwitch with DPDK's, same topology.
    pub vs_ovs_dpdk: Option<f64>,
    /// Rate ÷ the DPDK vhost floor's, same topology.
    pub vs_floor: Option<f64>,
}

/// The whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Frame size, bytes with FCS.
    pub frame_bytes: usize,
    /// Switch core.
    pub switch_core: usize,
    /// VM core.
    pub vm_core: usize,
    /// virtio queue size.
    pub vq: u32,
    /// "memfd" (--no-huge) or "huge".
    pub vm_memory: String,
    /// Window, seconds.
    pub window_s: f64,
    /// Warm-up, seconds.
    pub warmup_s: f64,
    /// Runs per (topology, switch).
    pub repeat: usize,
    /// Time-stamp counter rate.
    pub tsc_hz: f64,
    /// /proc/loadavg when the run began and ended (the machine may be shared).
    pub load_start: String,
    /// As above, at the end.
    pub load_end: String,
    /// Medians and ratios.
    pub rows: Vec<Row>,
    /// Every run.
    pub runs: Vec<Run>,
}

/// A row's case is its topology.
impl Entry for Row {
    fn case(&self) -> String {
        self.topology.clone()
    }
    fn switch(&self) -> &str {
        &self.switch
    }
}

/// Rows in the order (topology, switch) first appear in `runs`, each the median of its ok
/// runs, with ratios to ovs-dpdk and the floor of the same topology.
pub fn summarize(runs: &[Run]) -> Vec<Row> {
    let mut rows: Vec<Row> = groups(runs, |r| (r.topology.clone(), r.switch.clone()))
        .into_iter()
        .map(|((topology, switch), all)| {
            let g = Runs::of(&all, |r| &r.status);
            Row {
                topology,
                switch,
                mpps: g.median(|r| r.mpps),
                cycles_per_packet: g.median(|r| r.cycles_per_packet),
                busy_share: g.median(|r| r.busy_share),
                status: g.status,
                ..Row::default()
            }
        })
        .collect();
    let snapshot = rows.clone();
    for r in &mut rows {
        let rate = |sw: &str| find(&snapshot, &r.topology, sw).and_then(|o| o.mpps);
        r.vs_ovs_dpdk = ratio(r.mpps, rate(OVS));
        r.vs_floor = ratio(r.mpps, rate(FLOOR));
    }
    rows
}

impl Report {
    /// The terminal table, with the targets checked.
    pub fn table(&self) -> String {
        let mut t = Table::new()
            .col("topo", 5, Align::Left)
            .col("switch", 11, Align::Left)
            .col("Mpps", 8, Align::Right)
            .col("cyc/pkt", 9, Align::Right)
            .col("busy", 6, Align::Right)
            .col("÷ovs-dpdk", 10, Align::Right)
            .col("÷dpdk-vhost", 12, Align::Right)
            .col(" status", 0, Align::Left);
        for r in &self.rows {
            let cyc = match (r.cycles_per_packet, r.busy_share) {
                (Some(c), None) => format!("{c:.0}*"),
                (c, _) => opt(c, 0, ""),
            };
            t.row(vec![
                r.topology.clone(),
                r.switch.clone(),
                opt(r.mpps, 2, ""),
                cyc,
                opt(r.busy_share.map(|b| b * 100.0), 1, "%"),
                opt(r.vs_ovs_dpdk, 2, "x"),
                opt(r.vs_floor, 2, "x"),
                format!(" {}", r.status),
            ]);
        }
        t.text(format!(
            "({} B frames; switch on CPU {}, VMs on CPU {}; virtio queues of {}; VM memory {}; \
             {} s windows after {} s warm-up; median of {} run(s); TSC {:.0} MHz)",
            self.frame_bytes,
            self.switch_core,
            self.vm_core,
            self.vq,
            self.vm_memory,
            self.window_s,
            self.warmup_s,
            self.repeat,
            self.tsc_hz / 1e6
        ));
        t.text(
            "cyc/pkt: TSC Hz × busy share / rate; * = busy share not reported (TSC Hz / rate \
             of a busy-polling core: an upper bound)",
        );
        t.text(self.targets());
        t.text(format!(
            "load average at start: {}; at end: {}",
            self.load_start, self.load_end
        ));
        t.render()
    }

    /// The targets against this run: Hayate ≥ 1.5 × ovs-dpdk in PVP and V2V, ≈ 95 %
    /// of the floor in PVP.
    pub fn targets(&self) -> String {
        let row = |t: &str| {
            self.rows
                .iter()
                .find(|r| r.topology == t && r.switch == HAYATE)
        };
        let mut parts = Vec::new();
        for t in ["pvp", "v2v"] {
            if let Some(v) = row(t).and_then(|r| r.vs_ovs_dpdk) {
                let met = if v >= 1.5 { "met" } else { "not met" };
                parts.push(format!("{t} {v:.2}x ovs-dpdk (≥ 1.50x: {met})"));
            }
        }
        if let Some(v) = row("pvp").and_then(|r| r.vs_floor) {
            let met = if v >= 0.95 { "met" } else { "not met" };
            parts.push(format!(
                "pvp {:.0} % of dpdk-vhost (≈ 95 %: {met})",
                v * 100.0
            ));
        }
        // No target of its own: where V2V stands against what the rings alone reach there.
        if let Some(v) = row("v2v").and_then(|r| r.vs_floor) {
            parts.push(format!("v2v {:.0} % of dpdk-vhost", v * 100.0));
        }
        if parts.is_empty() {
            "targets (issue 16): not measured in this run".into()
        } else {
            format!("targets (issue 16): hayate {}", parts.join("; "))
        }
    }

    /// Writes an SVG bar chart: Mpps per switch, grouped by topology.
    pub fn plot(&self, path: &Path) -> Result<()> {
        let (topos, series) = grid(&self.rows, |r| r.mpps);
        bars(
            path,
            &Bars {
                caption: format!(
                    "vhost-user, {} B frames, one switch core: Mpps",
                    self.frame_bytes
                ),
                y_desc: "Mpps".into(),
                groups: topos,
                series,
                digits: 2,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: &str, s: &str, mpps: f64, status: &str) -> Run {
        Run {
            topology: t.into(),
            switch: s.into(),
            status: status.into(),
            mpps: Some(mpps),
            cycles_per_packet: Some(2600.0 / mpps),
            ..Run::default()
        }
    }

    fn sample() -> Report {
        let runs = vec![
            run("pvp", "hayate", 12.0, "ok"),
            run("pvp", "ovs-dpdk", 8.0, "ok"),
            run("pvp", "dpdk-vhost", 12.5, "ok"),
            run("pvp", "hayate", 11.0, "ok"),
            run("pvp", "ovs-dpdk", 7.0, "ok"),
            run("pvp", "dpdk-vhost", 13.5, "ok"),
            run("pvp", "hayate", 99.0, "failed: gone"),
            run("v2v", "hayate", 15.0, "ok"),
            run("v2v", "ovs-dpdk", 12.0, "ok"),
            Run {
                topology: "v2v".into(),
                switch: "dpdk-vhost".into(),
                status: "skipped: not installed".into(),
                ..Run::default()
            },
        ];
        Report {
            frame_bytes: 64,
            switch_core: 1,
            repeat: 2,
            tsc_hz: 2.6e9,
            rows: summarize(&runs),
            runs,
            ..Report::default()
        }
    }

    #[test]
    fn medians_and_ratios_per_topology() {
        let r = sample();
        let row = |t: &str, s: &str| {
            r.rows
                .iter()
                .find(|x| x.topology == t && x.switch == s)
                .unwrap()
                .clone()
        };
        let h = row("pvp", "hayate");
        assert_eq!(h.mpps, Some(11.5));
        assert_eq!(h.status, "ok in 2 of 3 runs");
        assert_eq!(h.vs_ovs_dpdk, Some(11.5 / 7.5));
        assert_eq!(h.vs_floor, Some(11.5 / 13.0));
        let v = row("v2v", "hayate");
        assert_eq!(v.vs_ovs_dpdk, Some(1.25));
        assert_eq!(v.vs_floor, None);
        assert_eq!(row("v2v", "dpdk-vhost").status, "skipped: not installed");
        let t = r.table();
        assert!(t.contains("1.53x"), "{t}");
        assert!(t.contains("pvp 1.53x ovs-dpdk (≥ 1.50x: met)"), "{t}");
        assert!(t.contains("v2v 1.25x ovs-dpdk (≥ 1.50x: not met)"), "{t}");
        assert!(t.contains("pvp 88 % of dpdk-vhost"), "{t}");
    }

    #[test]
    fn v2v_stands_against_its_floor_when_measured() {
        let runs = vec![
            run("v2v", "hayate", 12.0, "ok"),
            run("v2v", "ovs-dpdk", 10.0, "ok"),
            run("v2v", "dpdk-vhost", 12.5, "ok"),
        ];
        let r = Report {
            rows: summarize(&runs),
            runs,
            ..Report::default()
        };
        let t = r.targets();
        assert!(t.contains("v2v 1.20x ovs-dpdk (≥ 1.50x: not met)"), "{t}");
        assert!(t.contains("v2v 96 % of dpdk-vhost"), "{t}");
    }

    #[test]
    fn the_plot_has_a_bar_per_measured_switch_and_topology() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.svg");
        sample().plot(&p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"));
        for s in ["hayate", "ovs-dpdk", "dpdk-vhost", "pvp", "v2v", "11.50"] {
            assert!(svg.contains(s), "{s} missing");
        }
        // 5 bars (the skipped floor has none) + 3 legend swatches, in the switches' colors.
        let colored = |i: usize| {
            use plotters::style::{Color, Palette, Palette99};
            let c = Palette99::pick(i).to_rgba();
            svg.matches(&format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2))
                .count()
        };
        assert_eq!(colored(0), 3, "hayate: 2 bars + legend");
        assert_eq!(colored(1), 3, "ovs-dpdk: 2 bars + legend");
        assert_eq!(colored(2), 2, "dpdk-vhost: 1 bar + legend");
    }
}

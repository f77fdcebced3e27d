//! The results of `bench churn-compare`: for each (table, churn rate, switch) the rate without
//! and with churn, the share kept, the flow-mods per second achieved, and Hayate's rate during
//! churn ÷ Open vSwitch with DPDK's; the effect test's medians; the target (the drop
//! table during churn: ≥ 3× Open vSwitch with DPDK); a table, JSON and an SVG bar chart.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::measure::Effect;
use crate::report::{
    bars, find, grid, groups, median, opt, ratio, Align, Bars, Entry, Runs, Table,
};

/// The reference of every ratio.
pub const OVS: &str = "ovs-dpdk";
/// The switch the target is about.
pub const HAYATE: &str = "hayate";
/// The target: Hayate's rate during churn on the drop table ÷ Open vSwitch's.
pub const TARGET: f64 = 3.0;

/// One churn window and the window without churn before it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    /// Rule table: per-flow or drop.
    pub table: String,
    /// The churn: flow-mods per second asked, and "+1%" when one in 100 rewrites a used rule.
    pub case: String,
    /// Switch.
    pub switch: String,
    /// "ok" or "failed: ...".
    pub status: String,
    /// Out-port rate without churn, Mpps.
    pub base_mpps: Option<f64>,
    /// Out-port rate during churn, Mpps.
    pub churn_mpps: Option<f64>,
    /// Flow-mods (each with its barrier) applied per second.
    pub mods_per_s: Option<f64>,
}

/// One effect test of one (table, switch) start.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EffectRun {
    /// Rule table.
    pub table: String,
    /// Which redirect rule (`nw_src` or `tp_src`, see [`super::rules::redirects`]).
    pub rule: String,
    /// Switch.
    pub switch: String,
    /// "ok" or "failed: ...".
    pub status: String,
    /// The trials.
    #[serde(flatten)]
    pub effect: Effect,
}

/// How long a switch took to take a table and warm up.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Setup {
    /// Rule table.
    pub table: String,
    /// Switch.
    pub switch: String,
    /// `ovs-ofctl add-flows` of the whole table, seconds.
    pub install_s: Option<f64>,
    /// Warm-up until the rate was steady, seconds.
    pub warm_s: Option<f64>,
}

/// One (table, case, switch) over its runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    /// Rule table.
    pub table: String,
    /// Churn case.
    pub case: String,
    /// Switch.
    pub switch: String,
    /// "ok", "ok in K of N runs", or the first run's status.
    pub status: String,
    /// Median rate without churn, Mpps.
    pub base_mpps: Option<f64>,
    /// Median rate during churn, Mpps.
    pub churn_mpps: Option<f64>,
    /// Median of each run's churn ÷ no-churn rate.
    pub share: Option<f64>,
    /// Median flow-mods per second achieved.
    pub mods_per_s: Option<f64>,
    /// Rate during churn ÷ Open vSwitch with DPDK's, same table and case.
    pub vs_ovs_dpdk: Option<f64>,
}

/// One effect test of one (table, switch) over its runs: medians of every trial.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EffectRow {
    /// Rule table.
    pub table: String,
    /// Which redirect rule.
    pub rule: String,
    /// Switch.
    pub switch: String,
    /// Trials that completed.
    pub trials: usize,
    /// Median time to the barrier reply, ms.
    pub barrier_ms: Option<f64>,
    /// Median time until port 3 showed the moved traffic, ms.
    pub effect_ms: Option<f64>,
    /// Median poll round trip, ms.
    pub poll_ms: Option<f64>,
}

/// The whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Flows (sources) in the traffic.
    pub flows: u32,
    /// Frame size, bytes with FCS.
    pub frame_bytes: usize,
    /// Switch core.
    pub switch_core: usize,
    /// Main core (control threads, the churn, the counters).
    pub main_core: usize,
    /// Window, seconds.
    pub window_s: f64,
    /// Least warm-up, seconds.
    pub warmup_s: f64,
    /// Runs per (table, switch).
    pub repeat: usize,
    /// /proc/loadavg at the start.
    pub load_start: String,
    /// /proc/loadavg at the end.
    pub load_end: String,
    /// Medians and ratios.
    pub rows: Vec<Row>,
    /// The effect test's medians.
    pub effects: Vec<EffectRow>,
    /// Install and warm-up times.
    pub setups: Vec<Setup>,
    /// Every window pair.
    pub runs: Vec<Run>,
    /// Every effect test.
    pub effect_runs: Vec<EffectRun>,
}

/// A row's case is its table and churn rate (`drop 1k/s`).
impl Entry for Row {
    fn case(&self) -> String {
        format!("{} {}", self.table, self.case)
    }
    fn switch(&self) -> &str {
        &self.switch
    }
}

/// Rows per (table, case, switch), each the median of its ok runs, with the ratio of the
/// churn rate to Open vSwitch with DPDK's.
pub fn summarize(runs: &[Run]) -> Vec<Row> {
    let mut rows: Vec<Row> = groups(runs, |r| {
        (r.table.clone(), r.case.clone(), r.switch.clone())
    })
    .into_iter()
    .map(|((table, case, switch), all)| {
        let g = Runs::of(&all, |r| &r.status);
        Row {
            table,
            case,
            switch,
            base_mpps: g.median(|r| r.base_mpps),
            churn_mpps: g.median(|r| r.churn_mpps),
            share: g.median(|r| ratio(r.churn_mpps, r.base_mpps)),
            mods_per_s: g.median(|r| r.mods_per_s),
            status: g.status,
            vs_ovs_dpdk: None,
        }
    })
    .collect();
    let snapshot = rows.clone();
    for r in &mut rows {
        let ovs = find(&snapshot, &r.case(), OVS).and_then(|o| o.churn_mpps);
        r.vs_ovs_dpdk = ratio(r.churn_mpps, ovs);
    }
    rows
}

/// The effect tests per (table, rule, switch): medians over every completed trial.
pub fn summarize_effects(runs: &[EffectRun]) -> Vec<EffectRow> {
    groups(runs, |r| {
        (r.table.clone(), r.rule.clone(), r.switch.clone())
    })
    .into_iter()
    .map(|((t, rule, s), all)| {
        let ok = Runs::of(&all, |r| &r.status).ok;
        let all = |f: fn(&Effect) -> &Vec<f64>| {
            median(
                ok.iter()
                    .flat_map(|r| f(&r.effect).iter().copied())
                    .collect(),
            )
        };
        EffectRow {
            trials: ok.iter().map(|r| r.effect.effect_ms.len()).sum(),
            barrier_ms: all(|e| &e.barrier_ms),
            effect_ms: all(|e| &e.effect_ms),
            poll_ms: median(ok.iter().filter_map(|r| r.effect.poll_ms).collect()),
            table: t,
            rule,
            switch: s,
        }
    })
    .collect()
}

impl Report {
    /// The terminal tables and the target.
    pub fn table(&self) -> String {
        let mut t = Table::new()
            .col("table", 8, Align::Left)
            .col("churn", 9, Align::Left)
            .col("switch", 8, Align::Left)
            .col("no-churn Mpps", 13, Align::Right)
            .col("churn Mpps", 10, Align::Right)
            .col("share", 6, Align::Right)
            .col("mods/s", 7, Align::Right)
            .col("÷ovs-dpdk", 9, Align::Right)
            .col(" status", 0, Align::Left);
        for r in &self.rows {
            t.row(vec![
                r.table.clone(),
                r.case.clone(),
                r.switch.clone(),
                opt(r.base_mpps, 3, ""),
                opt(r.churn_mpps, 3, ""),
                opt(r.share.map(|s| s * 100.0), 1, "%"),
                opt(r.mods_per_s, 0, ""),
                opt(r.vs_ovs_dpdk, 2, "x"),
                format!(" {}", r.status),
            ]);
        }
        t.text(format!(
            "({} flows of {} B frames; switch on CPU {}, control and churn on CPU {}; {} s \
             windows, no churn then churn, after ≥ {} s warm-up; median of {} run(s); each \
             flow-mod followed by a barrier whose reply comes before the next)",
            self.flows,
            self.frame_bytes,
            self.switch_core,
            self.main_core,
            self.window_s,
            self.warmup_s,
            self.repeat
        ));
        let mut e = Table::new()
            .col("effect", 8, Align::Left)
            .col("rule", 6, Align::Left)
            .col("switch", 8, Align::Left)
            .col("barrier ms", 10, Align::Right)
            .col("effect ms", 9, Align::Right)
            .col("poll ms", 7, Align::Right)
            .col("trials", 6, Align::Right);
        for r in &self.effects {
            e.row(vec![
                r.table.clone(),
                r.rule.clone(),
                r.switch.clone(),
                opt(r.barrier_ms, 2, ""),
                opt(r.effect_ms, 2, ""),
                opt(r.poll_ms, 3, ""),
                r.trials.to_string(),
            ]);
        }
        e.text(
            "(a flow-mod moving the flows of sources 10.0.0.0 + 4096·k — one frame in 4096 — to \
             port 3, by nw_src=10.0.0.0/255.0.15.255 (overlaps only their megaflows in the \
             per-flow table) or tp_src=1024 (overlaps every megaflow): medians from sending it \
             to its barrier reply and to the first port-statistics reply showing packets on \
             port 3)",
        );
        let mut s = t.render();
        s.push('\n');
        s.push_str(&e.render());
        for r in &self.setups {
            s.push_str(&format!(
                "{} on {}: table installed in {} s, warm in {} s\n",
                r.switch,
                r.table,
                opt(r.install_s, 1, ""),
                opt(r.warm_s, 1, "")
            ));
        }
        s.push_str(&self.targets());
        s.push('\n');
        s.push_str(&format!(
            "load average at start: {}; at end: {}\n",
            self.load_start, self.load_end
        ));
        s
    }

    /// The target on this run: on the drop table, Hayate's rate during churn ≥ 3× Open
    /// vSwitch with DPDK's, per churn rate.
    pub fn targets(&self) -> String {
        let parts: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.table == "drop" && r.switch == HAYATE)
            .filter_map(|r| {
                let v = r.vs_ovs_dpdk?;
                let met = if v >= TARGET { "met" } else { "not met" };
                Some(format!("{} {v:.2}x ({met})", r.case))
            })
            .collect();
        if parts.is_empty() {
            "target (issue 20, drop table during churn ≥ 3x ovs-dpdk): not measured".into()
        } else {
            format!(
                "target (issue 20, drop table during churn ≥ 3x ovs-dpdk): hayate {}",
                parts.join("; ")
            )
        }
    }

    /// Writes an SVG bar chart: Mpps during churn per switch, grouped by (table, case).
    pub fn plot(&self, path: &Path) -> Result<()> {
        let (groups, series) = grid(&self.rows, |r| r.churn_mpps);
        bars(
            path,
            &Bars {
                caption: format!(
                    "{} flows, one switch core: Mpps during churn (flow-mods/s)",
                    self.flows
                ),
                y_desc: "Mpps".into(),
                groups,
                series,
                digits: 2,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(table: &str, case: &str, sw: &str, base: f64, churn: f64, status: &str) -> Run {
        Run {
            table: table.into(),
            case: case.into(),
            switch: sw.into(),
            status: status.into(),
            base_mpps: Some(base),
            churn_mpps: Some(churn),
            mods_per_s: Some(1000.0),
        }
    }

    fn sample() -> Report {
        let runs = vec![
            run("drop", "1k/s", "hayate", 20.0, 19.0, "ok"),
            run("drop", "1k/s", "ovs-dpdk", 10.0, 5.0, "ok"),
            run("drop", "1k/s", "hayate", 20.0, 17.0, "ok"),
            run("drop", "1k/s", "ovs-dpdk", 10.0, 7.0, "ok"),
            run("drop", "1k/s", "hayate", 1.0, 1.0, "failed: gone"),
            run("per-flow", "1k/s", "hayate", 10.0, 9.0, "ok"),
            run("per-flow", "1k/s", "ovs-dpdk", 4.0, 3.0, "ok"),
        ];
        let effect_runs = vec![EffectRun {
            table: "drop".into(),
            rule: "nw_src".into(),
            switch: "hayate".into(),
            status: "ok".into(),
            effect: Effect {
                barrier_ms: vec![0.2, 0.4, 0.3],
                effect_ms: vec![0.5, 0.7, 0.6],
                poll_ms: Some(0.05),
            },
        }];
        Report {
            flows: 100_000,
            frame_bytes: 64,
            rows: summarize(&runs),
            effects: summarize_effects(&effect_runs),
            runs,
            effect_runs,
            ..Report::default()
        }
    }

    #[test]
    fn shares_ratios_and_the_target() {
        let r = sample();
        let row = |t: &str, s: &str| {
            r.rows
                .iter()
                .find(|x| x.table == t && x.switch == s)
                .unwrap()
                .clone()
        };
        let h = row("drop", "hayate");
        assert_eq!(h.status, "ok in 2 of 3 runs");
        assert_eq!(h.churn_mpps, Some(18.0));
        assert!((h.share.unwrap() - 0.9).abs() < 1e-12, "{:?}", h.share);
        assert_eq!(h.vs_ovs_dpdk, Some(3.0));
        assert_eq!(row("drop", "ovs-dpdk").share, Some(0.6));
        assert_eq!(row("per-flow", "hayate").vs_ovs_dpdk, Some(3.0));
        let e = &r.effects[0];
        assert_eq!(
            (e.trials, e.barrier_ms, e.effect_ms),
            (3, Some(0.3), Some(0.6))
        );
        let t = r.table();
        assert!(t.contains("90.0%") && t.contains("3.00x"), "{t}");
        assert!(t.contains("hayate 1k/s 3.00x (met)"), "{t}");
        assert!(t.contains("0.30") && t.contains("0.60"), "{t}");
    }

    #[test]
    fn the_plot_groups_by_table_and_case() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.svg");
        sample().plot(&p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        for s in ["drop 1k/s", "per-flow 1k/s", "hayate", "ovs-dpdk", "18.00"] {
            assert!(svg.contains(s), "{s} missing");
        }
    }
}

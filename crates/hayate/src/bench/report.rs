//! Benchmark results: one row per (scenario, frame size), printed as a table or JSON.

use serde::Serialize;

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Scenario name.
    pub scenario: String,
    /// Frame length in bytes, FCS included (the buffer holds `frame_len - 4` bytes).
    pub frame_len: usize,
    /// Million packets per second delivered to the sink ports.
    pub mpps: f64,
    /// Gigabits per second on the wire (frame + 20 bytes of preamble and inter-frame gap).
    pub gbps: f64,
    /// Time-stamp-counter cycles per delivered packet on the switch's thread.
    pub cycles_per_packet: f64,
    /// Flow setups (megaflow installs) per second, for setup-rate scenarios.
    pub setups_per_sec: Option<f64>,
    /// Packets delivered during the measured window.
    pub packets: u64,
    /// Length of the measured window in seconds.
    pub seconds: f64,
    /// Measured TSC rate in GHz.
    pub tsc_ghz: f64,
    /// Cache behaviour during the window: exact-match hits, megaflow hits, upcalls.
    pub emc_hits: u64,
    /// Megaflow classifier hits.
    pub megaflow_hits: u64,
    /// Megaflow subtables probed per megaflow hit (0 without hits).
    pub probes_per_hit: f64,
    /// Translations through the OpenFlow tables.
    pub upcalls: u64,
    /// Megaflows installed at the end of the window.
    pub megaflows: usize,
    /// Distinct megaflow masks (megaflow classifier subtables) at the end of the window.
    pub masks: usize,
    /// Packets dropped by the switch during the window (any reason).
    pub drops: u64,
    /// Core the switch thread ran on.
    pub core: usize,
    /// How many runs this row is the median of.
    pub runs: usize,
    /// Flow-mods applied (each published) per second during the window, for churn
    /// scenarios.
    pub flow_mods_per_sec: Option<f64>,
    /// Times the switch thread emptied its caches during the window.
    pub cache_flushes: u64,
    /// Megaflows removed by revalidation during the window.
    pub invalidated: u64,
    /// The scenario this one's rate is compared with (without churn; p2p-1flow for tunnels).
    pub baseline: Option<String>,
    /// This rate as a share of the baseline's at the same frame size in the same run (1.0 =
    /// as fast); `None` when the baseline did not run.
    pub vs_baseline: Option<f64>,
}

/// Sets every row's [`Row::vs_baseline`] from the baseline's row of the same frame size.
pub fn fill_ratios(rows: &mut [Row]) {
    let rates: Vec<(String, usize, f64)> = rows
        .iter()
        .map(|r| (r.scenario.clone(), r.frame_len, r.mpps))
        .collect();
    for r in rows.iter_mut() {
        r.vs_baseline = r.baseline.as_ref().and_then(|b| {
            rates
                .iter()
                .find(|(n, len, _)| n == b && *len == r.frame_len)
                .filter(|(_, _, mpps)| *mpps > 0.0)
                .map(|(_, _, mpps)| r.mpps / mpps)
        });
    }
}

/// Wire bits per frame of `frame_len` bytes (FCS included): the frame, preamble and
/// inter-frame gap.
pub fn wire_bits(frame_len: usize) -> f64 {
    ((frame_len + 20) * 8) as f64
}

/// The run with the median rate (the upper median for an even count), with `runs` set.
pub fn median(mut runs: Vec<Row>) -> Row {
    assert!(!runs.is_empty(), "median of no runs");
    runs.sort_by(|a, b| a.mpps.total_cmp(&b.mpps));
    let n = runs.len();
    let mut row = runs.swap_remove(n / 2);
    row.runs = n;
    row
}

/// Renders rows as an aligned text table.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<16} {:>6} {:>9} {:>8} {:>8} {:>12} {:>11} {:>11} {:>7} {:>10} {:>9} {:>5} {:>9}\n",
        "scenario",
        "bytes",
        "Mpps",
        "Gbit/s",
        "cyc/pkt",
        "setups/s",
        "emc hits",
        "mflow hits",
        "probes",
        "upcalls",
        "megaflows",
        "masks",
        "drops"
    ));
    for r in rows {
        let setups = r
            .setups_per_sec
            .map(|s| format!("{:.0}", s))
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "{:<16} {:>6} {:>9.2} {:>8.2} {:>8.1} {:>12} {:>11} {:>11} {:>7.2} {:>10} {:>9} {:>5} {:>9}\n",
            r.scenario,
            r.frame_len,
            r.mpps,
            r.gbps,
            r.cycles_per_packet,
            setups,
            r.emc_hits,
            r.megaflow_hits,
            r.probes_per_hit,
            r.upcalls,
            r.megaflows,
            r.masks,
            r.drops
        ));
    }
    for r in rows
        .iter()
        .filter(|r| r.flow_mods_per_sec.is_none() && r.baseline.is_some())
    {
        let b = r.baseline.as_deref().unwrap_or_default();
        out.push_str(&match r.vs_baseline {
            Some(v) => format!(
                "{} {} B: {:.1} % of {b}'s rate in this run\n",
                r.scenario,
                r.frame_len,
                100.0 * v
            ),
            None => format!(
                "{} {} B: no ratio; run {b} in the same command to compare\n",
                r.scenario, r.frame_len
            ),
        });
    }
    for r in rows.iter().filter(|r| r.flow_mods_per_sec.is_some()) {
        let share = r
            .baseline
            .as_ref()
            .and_then(|name| rows.iter().find(|b| &b.scenario == name))
            .map(|b| format!(", {:.0} % of {}", 100.0 * r.mpps / b.mpps, b.scenario))
            .unwrap_or_default();
        out.push_str(&format!(
            "{}: {:.0} flow-mods/s published{share}; {} cache flushes, {} megaflows revalidated away\n",
            r.scenario,
            r.flow_mods_per_sec.unwrap_or(0.0),
            r.cache_flushes,
            r.invalidated,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_rate_of_64_byte_frames() {
        // 14.88 Mpps of 64-byte frames fill 10 Gbit/s.
        let bits = wire_bits(64);
        assert!((14.88e6 * bits / 1e9 - 10.0).abs() < 0.01);
    }

    #[test]
    fn table_has_one_line_per_row_plus_header() {
        let r = Row {
            scenario: "p2p-1flow".into(),
            frame_len: 64,
            mpps: 50.0,
            gbps: 36.0,
            cycles_per_packet: 40.0,
            setups_per_sec: None,
            packets: 1,
            seconds: 1.0,
            tsc_ghz: 2.0,
            emc_hits: 1,
            megaflow_hits: 0,
            probes_per_hit: 0.0,
            upcalls: 1,
            megaflows: 1,
            masks: 1,
            drops: 0,
            core: 1,
            runs: 1,
            flow_mods_per_sec: None,
            cache_flushes: 0,
            invalidated: 0,
            baseline: None,
            vs_baseline: None,
        };
        let t = table(&[r.clone(), r]);
        assert_eq!(t.lines().count(), 3);
        assert!(t.contains("p2p-1flow"));
    }

    #[test]
    fn tunnel_rows_get_their_share_of_p2p_at_the_same_size() {
        let mk = |name: &str, len: usize, mpps: f64, base: Option<&str>| Row {
            scenario: name.into(),
            frame_len: len,
            mpps,
            baseline: base.map(str::to_string),
            ..median(vec![template()])
        };
        let mut rows = vec![
            mk("p2p-1flow", 64, 40.0, None),
            mk("p2p-1flow", 128, 20.0, None),
            mk("vxlan-encap", 64, 30.0, Some("p2p-1flow")),
            mk("vxlan-encap", 128, 18.0, Some("p2p-1flow")),
            mk("vxlan-decap", 256, 10.0, Some("p2p-1flow")),
        ];
        fill_ratios(&mut rows);
        assert_eq!(rows[2].vs_baseline, Some(0.75));
        assert_eq!(rows[3].vs_baseline, Some(0.9));
        assert_eq!(rows[4].vs_baseline, None);
        assert_eq!(rows[0].vs_baseline, None);
        let t = table(&rows);
        assert!(
            t.contains("vxlan-encap 64 B: 75.0 % of p2p-1flow's rate"),
            "{t}"
        );
        assert!(
            t.contains("vxlan-decap 256 B: no ratio; run p2p-1flow"),
            "{t}"
        );
    }

    fn template() -> Row {
        Row {
            scenario: String::new(),
            frame_len: 64,
            mpps: 0.0,
            gbps: 0.0,
            cycles_per_packet: 0.0,
            setups_per_sec: None,
            packets: 1,
            seconds: 1.0,
            tsc_ghz: 1.0,
            emc_hits: 0,
            megaflow_hits: 0,
            probes_per_hit: 0.0,
            upcalls: 0,
            megaflows: 0,
            masks: 0,
            drops: 0,
            core: 0,
            runs: 1,
            flow_mods_per_sec: None,
            cache_flushes: 0,
            invalidated: 0,
            baseline: None,
            vs_baseline: None,
        }
    }

    #[test]
    fn median_picks_the_middle_rate() {
        let mk = |mpps: f64| Row {
            scenario: "x".into(),
            mpps,
            ..template()
        };
        let m = median(vec![mk(3.0), mk(1.0), mk(2.0)]);
        assert_eq!(m.mpps, 2.0);
        assert_eq!(m.runs, 3);
        assert_eq!(median(vec![mk(5.0)]).mpps, 5.0);
    }
}

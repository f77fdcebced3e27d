//! `hayate bench churn-compare`: the forwarding rate while a controller changes the rules, for
//! Hayate and Open vSwitch with DPDK in one run, on the same frames and cores (issue 20; the
//! peers' churn-ovs.sh measured Open vSwitch alone this way).
//!
//! ```text
//! pcap of N flows ─► port 1 ─► switch (one core) ─► port 2 (sink)   rate: port 2's transmit
//!                                        └─────────► port 3 (sink)   the effect test
//!        ovs-ofctl add-flows (the table) ─┐
//!   churn: FLOW_MOD + BARRIER, paced ─────┼─► the switch's OpenFlow management socket
//!   counters: port statistics ────────────┘
//! ```
//!
//! Each switch in turn, fresh for each table: install the table with `ovs-ofctl -O OpenFlow13
//! add-flows` (the same file for both), warm up until the rate is steady, then for each churn
//! rate a window without churn and a window with it; the share kept is the second rate over
//! the first. Then the effect test. The tables are the issue's: a rule per source plus a
//! catch-all (every switch needs a megaflow per flow), and one drop rule no packet meets above
//! a rule that forwards everything ([`rules`]).
//!
//! Files: [`args`](ChurnArgs) and the run here; [`rules`]: tables and flow-mods;
//! [`openflow`]: the messages and one connection; [`switch`]: starting each switch;
//! [`measure`]: warm-up, windows, the churning thread, the effect test; `turn`: one switch
//! on one table, start to stop; [`report`]: tables, JSON, SVG.

pub mod measure;
pub mod openflow;
pub mod report;
pub mod rules;
pub mod switch;
mod turn;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::bench;
use crate::frame;
use crate::needs;
use crate::sys::{guard, host};
use report::Report;
use rules::Table;
use switch::{Ctx, Sw};

/// Options of `hayate bench churn-compare`.
#[derive(Args, Debug, Clone)]
pub struct ChurnArgs {
    /// Switches (default: both; Open vSwitch with DPDK only when installed): hayate, ovs-dpdk.
    #[arg(long, value_delimiter = ',')]
    pub switches: Vec<String>,
    /// Rule tables: per-flow (a rule per source + catch-all), drop (one drop rule no packet
    /// meets above a forward-all rule).
    #[arg(long, value_delimiter = ',', default_value = "per-flow,drop")]
    pub tables: Vec<String>,
    /// Flow-mods per second of the churn windows (each with a barrier), rules no packet
    /// matches.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    pub rates: Vec<u32>,
    /// Rate of one more window on the per-flow table where 1 % of the flow-mods rewrite a
    /// rule the traffic uses (0: none).
    #[arg(long, default_value_t = 1000)]
    pub matching_rate: u32,
    /// Flows (sources) in the traffic, and rules of the per-flow table.
    #[arg(long, default_value_t = 100_000)]
    pub flows: u32,
    /// Each window, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Least warm-up after the table is installed, seconds (it goes on until the rate is
    /// steady, and for Open vSwitch until its datapath flow limit is above its flows).
    #[arg(long, default_value_t = 6.0)]
    pub warmup: f64,
    /// Most warm-up, seconds.
    #[arg(long, default_value_t = 120.0)]
    pub warmup_max: f64,
    /// Install the table before the traffic's port is added (as the in-process `churn-*`
    /// scenarios, whose flows are in place before the first packet); by default the traffic
    /// runs while the table goes in, as under a live controller.
    #[arg(long)]
    pub table_first: bool,
    /// Trials of the effect test per (table, switch) (0: none).
    #[arg(long, default_value_t = 10)]
    pub trials: usize,
    /// Measure every (table, switch) this many times, the switches taking turns.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Core of the switch's forwarding (default: the last core).
    #[arg(long)]
    pub switch_core: Option<usize>,
    /// Core of the switches' other threads, the churn and the counter reads.
    #[arg(long, default_value_t = 0)]
    pub main_core: usize,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an SVG bar chart (Mpps during churn per switch and case) to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Folder for logs, configs, the pcap and sockets (default: a fresh one under /tmp; kept).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// The `hayate` binary to run as the switch (default: this one; e.g. a release build
    /// when this one is a debug build).
    #[arg(long)]
    pub hayate: Option<PathBuf>,
}

/// One churn window: flow-mods per second, and one in how many rewrites a used rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// Flow-mods per second.
    pub per_sec: u32,
    /// 0, or 100 for "1 % rewrite a rule the traffic uses".
    pub matching_every: u32,
}

impl Case {
    /// Its label: `100/s`, `1k/s`, `10k/s+1%`.
    pub fn label(self) -> String {
        let n = self.per_sec;
        let mut s = if n >= 1000 && n.is_multiple_of(1000) {
            format!("{}k/s", n / 1000)
        } else {
            format!("{n}/s")
        };
        if let Some(pct) = 100u32.checked_div(self.matching_every) {
            let _ = write!(s, "+{pct}%");
        }
        s
    }
}

/// The cases of `table`: every rate, and on the per-flow table the 1 % window.
pub fn cases(table: Table, rates: &[u32], matching_rate: u32) -> Vec<Case> {
    let mut v: Vec<Case> = rates
        .iter()
        .map(|&per_sec| Case {
            per_sec,
            matching_every: 0,
        })
        .collect();
    if table == Table::PerFlow && matching_rate > 0 {
        v.push(Case {
            per_sec: matching_rate,
            matching_every: 100,
        });
    }
    v
}

fn check_args(a: &ChurnArgs) -> Result<()> {
    if !(a.seconds > 0.0 && a.seconds <= 600.0) {
        bail!("--seconds must be in (0, 600]");
    }
    if !(0.0..=600.0).contains(&a.warmup) || a.warmup_max < a.warmup || a.warmup_max > 1200.0 {
        bail!("--warmup must be in [0, 600] and --warmup-max in [--warmup, 1200]");
    }
    bench::check_repeat(a.repeat, 20)?;
    if a.trials > 1000 {
        bail!("--trials must be at most 1000");
    }
    if !(1..=1_000_000).contains(&a.flows) {
        bail!("--flows must be in 1..=1000000");
    }
    if a.rates.iter().any(|&r| !(1..=100_000).contains(&r)) || a.matching_rate > 100_000 {
        bail!("churn rates must be in 1..=100000 flow-mods per second");
    }
    Ok(())
}

/// Runs `hayate bench churn-compare`.
pub fn main(args: ChurnArgs) -> Result<()> {
    check_args(&args)?;
    let tables: Vec<Table> = args
        .tables
        .iter()
        .map(|t| Table::from_name(t))
        .collect::<Result<_>>()?;
    let asked = bench::chosen(&args.switches, || switch::ALL.to_vec(), Sw::from_name)?;
    if let Some(why) = needs::unmet(&[needs::OVS_OFCTL]) {
        bail!("the tables are installed with ovs-ofctl: {why}");
    }
    let mut switches = Vec::new();
    for sw in asked {
        match (sw, needs::unmet(needs::OVS_DPDK)) {
            (Sw::OvsDpdk, Some(why)) if args.switches.is_empty() => {
                eprintln!("hayate: skipping ovs-dpdk: {why}")
            }
            (Sw::OvsDpdk, Some(why)) => bail!("ovs-dpdk: {why}"),
            _ => switches.push(sw),
        }
    }
    let with_ovs = switches.contains(&Sw::OvsDpdk);
    // SAFETY: geteuid has no preconditions.
    if with_ovs && unsafe { libc::geteuid() } != 0 {
        bail!("Open vSwitch with DPDK needs huge pages and a namespace: run as root");
    }
    let switch_core = bench::switch_core(args.switch_core, args.main_core, "main")?;
    bench::take_core(args.main_core)?;
    let dir = bench::workdir(args.workdir.as_deref(), "churn")?;
    eprintln!("hayate: logs, configs and sockets in {}", dir.display());
    let pcap = dir.join(format!("udp64-{}.pcap", args.flows));
    frame::write_pcap(&pcap, &frame::flows(args.flows))?;
    // Open vSwitch: 1 GiB of DPDK socket memory, and some room.
    let huge = with_ovs.then(|| host::Huge::add(576, &dir)).transpose()?;
    let mut ctx = Ctx {
        tag: format!("hc{}", std::process::id()),
        switch_core,
        main_core: args.main_core,
        pcap,
        huge: huge.as_ref().map(|h| h.path().to_path_buf()),
        hayate: match &args.hayate {
            Some(p) => p.clone(),
            None => std::env::current_exe().context("finding the hayate binary")?,
        },
        lifetime: Duration::from_secs_f64(
            900.0 + args.warmup_max + 12.0 * args.seconds * (args.rates.len() + 1) as f64,
        ),
    };
    let mut report = Report {
        flows: args.flows,
        frame_bytes: frame::FRAME_LEN + 4,
        switch_core,
        main_core: args.main_core,
        window_s: args.seconds,
        warmup_s: args.warmup,
        repeat: args.repeat,
        load_start: host::loadavg(),
        ..Report::default()
    };
    let base_tag = ctx.tag.clone();
    for rep in 0..args.repeat {
        for &table in &tables {
            let flows_file = dir.join(format!("{}.flows", table.name()));
            if !flows_file.exists() {
                let text: String = table
                    .flows(args.flows)
                    .iter()
                    .map(|f| f.text() + "\n")
                    .collect();
                std::fs::write(&flows_file, text)?;
            }
            for &sw in &switches {
                guard::check()?;
                ctx.tag = format!("{base_tag}r{rep}");
                eprintln!(
                    "hayate: {} on the {} table (run {} of {}) ...",
                    sw.name(),
                    table.name(),
                    rep + 1,
                    args.repeat
                );
                let at = dir.join(format!("{}-{}-{rep}", sw.name(), table.name()));
                let turn = turn::Turn {
                    args: &args,
                    ctx: &ctx,
                    sw,
                    table,
                    flows_file: &flows_file,
                    dir: &at,
                };
                turn.run(&mut report);
                guard::check()?;
            }
        }
    }
    report.load_end = host::loadavg();
    report.rows = report::summarize(&report.runs);
    report.effects = report::summarize_effects(&report.effect_runs);
    print!("{}", report.table());
    bench::write_json(args.json.as_deref(), &report)?;
    if let Some(p) = &args.plot {
        report.plot(p)?;
    }
    drop(huge);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_and_their_labels() {
        let c = cases(Table::PerFlow, &[100, 1000, 10_000], 1000);
        let l: Vec<String> = c.iter().map(|c| c.label()).collect();
        assert_eq!(l, ["100/s", "1k/s", "10k/s", "1k/s+1%"]);
        assert_eq!(cases(Table::Drop, &[100, 1000], 1000).len(), 2);
        assert_eq!(cases(Table::PerFlow, &[1500], 0)[0].label(), "1500/s");
    }
}

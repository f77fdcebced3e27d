//! One switch on one table, start to stop: start it, install the table, warm up, a window
//! without and one with churn for each case, the effect tests, and what it said about itself
//! after each; every failure kept as the status of what it stopped.

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::measure;
use super::openflow::Conn;
use super::report::{EffectRun, Report, Run, Setup};
use super::rules::{self, Table};
use super::switch::{self, Ctx, Running, Sw};
use super::{cases, Case, ChurnArgs};
use crate::report::{median, opt};

/// What one turn is given.
pub struct Turn<'a> {
    /// The bench's options.
    pub args: &'a ChurnArgs,
    /// What every switch is started with.
    pub ctx: &'a Ctx,
    /// The switch.
    pub sw: Sw,
    /// The table.
    pub table: Table,
    /// The table in ovs-ofctl syntax.
    pub flows_file: &'a Path,
    /// Its folder.
    pub dir: &'a Path,
}

/// What one turn gives.
struct Results {
    runs: Vec<Run>,
    setup: Setup,
    effects: Vec<EffectRun>,
}

impl Turn<'_> {
    /// Measures and adds the results to `report`.
    pub fn run(&self, report: &mut Report) {
        let (table, sw) = (self.table.name(), self.sw.name());
        let cases = cases(self.table, &self.args.rates, self.args.matching_rate);
        let mut res = Results {
            runs: cases
                .iter()
                .map(|c| Run {
                    table: table.into(),
                    case: c.label(),
                    switch: sw.into(),
                    status: "not run".into(),
                    ..Run::default()
                })
                .collect(),
            setup: Setup {
                table: table.into(),
                switch: sw.into(),
                ..Setup::default()
            },
            effects: rules::redirects()
                .iter()
                .map(|(rule, _)| EffectRun {
                    table: table.into(),
                    rule: (*rule).into(),
                    switch: sw.into(),
                    status: "not run".into(),
                    ..EffectRun::default()
                })
                .collect(),
        };
        if let Err(e) = self.measure(&cases, &mut res) {
            let why = format!("failed: {e:#} (logs in {})", self.dir.display());
            eprintln!("hayate:   {why}");
            for r in res.runs.iter_mut().filter(|r| r.status == "not run") {
                r.status = why.clone();
            }
            for e in res.effects.iter_mut().filter(|e| e.status == "not run") {
                e.status = why.clone();
            }
        }
        report.runs.extend(res.runs);
        report.setups.push(res.setup);
        if self.args.trials > 0 {
            report.effect_runs.extend(res.effects);
        }
    }

    fn measure(&self, cases: &[Case], res: &mut Results) -> Result<()> {
        let (args, dir) = (self.args, self.dir);
        let mut sw = Running::start(self.sw, self.ctx, dir, !args.table_first)?;
        let mgmt = sw.mgmt(dir);
        let install = switch::install(&mgmt, self.flows_file)?;
        res.setup.install_s = Some(install);
        eprintln!("hayate:   table installed in {install:.1} s");
        if args.table_first {
            sw.add_source(self.ctx)?;
        }
        let mut stats = Conn::connect(&mgmt)?;
        let warm = {
            let sw = RefCell::new(&mut sw);
            measure::warm(
                &mut stats,
                Duration::from_secs_f64(args.warmup),
                Duration::from_secs_f64(args.warmup_max),
                &mut || sw.borrow_mut().alive(),
                &mut || sw.borrow().settled(),
            )?
        };
        res.setup.warm_s = Some(warm);
        eprintln!("hayate:   warm in {warm:.1} s");
        sw.keep_diagnostics(dir, "warm");
        for (case, run) in cases.iter().zip(res.runs.iter_mut()) {
            let base = measure::window(&mut stats, args.seconds)?;
            sw.alive()?;
            let ch = measure::churn_window(
                &mut stats,
                &mgmt,
                case.per_sec,
                case.matching_every,
                args.flows,
                args.seconds,
            )?;
            sw.alive()?;
            sw.keep_diagnostics(dir, &format!("churn-{}", case.label().replace('/', "")));
            switch::clean_churn(&mgmt)?;
            run.base_mpps = Some(base / 1e6);
            run.churn_mpps = Some(ch.pps / 1e6);
            run.mods_per_s = Some(ch.mods_per_s);
            run.status = "ok".into();
            eprintln!(
                "hayate:   {}: {:.3} Mpps without churn, {:.3} Mpps with {:.0} flow-mods/s",
                case.label(),
                base / 1e6,
                ch.pps / 1e6,
                ch.mods_per_s
            );
        }
        if args.trials > 0 {
            for (e, (_, rule)) in res.effects.iter_mut().zip(rules::redirects()) {
                e.effect = measure::effect(&mgmt, &rule, args.trials, &mut || sw.alive())?;
                e.status = "ok".into();
                sw.keep_diagnostics(dir, &format!("effect-{}", e.rule));
                eprintln!(
                    "hayate:   effect by {}: barrier {} ms, traffic moved {} ms (medians)",
                    e.rule,
                    opt(median(e.effect.barrier_ms.clone()), 2, ""),
                    opt(median(e.effect.effect_ms.clone()), 2, "")
                );
            }
        }
        sw.alive()
    }
}

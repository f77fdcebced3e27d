//! `--repeat N`: one switch's figures over several runs, summarized figure by figure as the
//! median of its runs (this machine's run-to-run spread is ±15 %, so one run decides little).

use super::measure::{Latency, Rate, Tcp};
use super::report::SwitchResult;
use crate::report::{median, Runs};

/// Each field of the latencies, medianed separately.
fn latency(ls: &[&Latency]) -> Option<Latency> {
    let f = |g: fn(&Latency) -> f64| median(ls.iter().map(|l| g(l)).collect());
    Some(Latency {
        min_us: f(|l| l.min_us)?,
        median_us: f(|l| l.median_us)?,
        p99_us: f(|l| l.p99_us)?,
        loss_pct: f(|l| l.loss_pct)?,
    })
}

/// The median of the completed streams; a stream that failed in every run keeps the first
/// run's error.
fn tcp(ts: &[&Option<Tcp>]) -> Option<Tcp> {
    let done: Vec<&Tcp> = ts
        .iter()
        .filter_map(|t| t.as_ref())
        .filter(|t| t.error.is_none())
        .collect();
    if done.is_empty() {
        return ts.iter().find_map(|t| (*t).clone());
    }
    let pings: Vec<&Latency> = done.iter().map(|t| &t.ping_load).collect();
    Some(Tcp {
        gbps: median(done.iter().map(|t| t.gbps).collect())?,
        ping_load: latency(&pings)?,
        error: None,
    })
}

/// One switch's runs summarized: each figure the median of the runs that measured it. Runs
/// that failed are left out; when all failed, the first run is returned as it is.
pub fn summarize(runs: &[SwitchResult]) -> SwitchResult {
    let all: Vec<&SwitchResult> = runs.iter().collect();
    let Runs { ok, status } = Runs::of(&all, |r| &r.status);
    let Some(first) = ok.first() else {
        return runs.first().cloned().unwrap_or_default();
    };
    let frames: Vec<usize> = first.rates.iter().map(|r| r.frame).collect();
    let rates = frames
        .iter()
        .filter_map(|&frame| {
            let rs: Vec<&Rate> = ok
                .iter()
                .filter_map(|r| r.rates.iter().find(|x| x.frame == frame))
                .collect();
            Some(Rate {
                frame,
                pps: median(rs.iter().map(|r| r.pps).collect())?,
                offered_pps: median(rs.iter().map(|r| r.offered_pps).collect())?,
                switch_cpu_pct: median(rs.iter().filter_map(|r| r.switch_cpu_pct).collect()),
            })
        })
        .collect();
    let idle: Vec<&Latency> = ok.iter().filter_map(|r| r.ping_idle.as_ref()).collect();
    let on: Vec<&Option<Tcp>> = ok.iter().map(|r| &r.tcp_offloads_on).collect();
    let off: Vec<&Option<Tcp>> = ok.iter().map(|r| &r.tcp_offloads_off).collect();
    SwitchResult {
        switch: first.switch.clone(),
        status,
        rates,
        ping_idle: latency(&idle),
        idle_cpu_pct: median(ok.iter().filter_map(|r| r.idle_cpu_pct).collect()),
        tcp_offloads_on: tcp(&on),
        tcp_offloads_off: tcp(&off),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pps: f64, gbps: f64, p99: f64, status: &str) -> SwitchResult {
        let lat = |p99_us| Latency {
            min_us: 10.0,
            median_us: 20.0,
            p99_us,
            loss_pct: 0.0,
        };
        SwitchResult {
            switch: "s".into(),
            status: status.into(),
            rates: vec![Rate {
                frame: 64,
                pps,
                offered_pps: pps * 2.0,
                switch_cpu_pct: Some(99.0),
            }],
            ping_idle: Some(lat(p99)),
            idle_cpu_pct: Some(0.5),
            tcp_offloads_on: Some(Tcp {
                gbps,
                ping_load: lat(p99 * 10.0),
                error: None,
            }),
            tcp_offloads_off: None,
        }
    }

    #[test]
    fn each_figure_is_the_median_of_the_runs() {
        let s = summarize(&[
            run(3.0, 10.0, 100.0, "ok"),
            run(1.0, 30.0, 300.0, "ok"),
            run(2.0, 20.0, 200.0, "ok"),
        ]);
        assert_eq!(s.status, "ok");
        assert_eq!(s.rates[0].pps, 2.0);
        assert_eq!(s.rates[0].offered_pps, 4.0);
        assert_eq!(s.ping_idle.unwrap().p99_us, 200.0);
        let t = s.tcp_offloads_on.unwrap();
        assert_eq!((t.gbps, t.ping_load.p99_us), (20.0, 2000.0));
        assert!(s.tcp_offloads_off.is_none());
    }

    #[test]
    fn failed_runs_are_left_out_and_said() {
        let s = summarize(&[
            run(1.0, 10.0, 100.0, "ok"),
            run(9.0, 90.0, 900.0, "failed: gone"),
            run(3.0, 30.0, 300.0, "ok"),
        ]);
        assert_eq!(s.status, "ok in 2 of 3 runs");
        assert_eq!(s.rates[0].pps, 2.0);
        let all_failed = summarize(&[run(1.0, 1.0, 1.0, "failed: x")]);
        assert_eq!(all_failed.status, "failed: x");
    }

    #[test]
    fn a_stream_that_failed_everywhere_keeps_its_error() {
        let mut a = run(1.0, 0.0, 1.0, "ok");
        a.tcp_offloads_on.as_mut().unwrap().error = Some("stalls".into());
        let b = a.clone();
        let s = summarize(&[a, b]);
        assert_eq!(s.tcp_offloads_on.unwrap().error.as_deref(), Some("stalls"));
    }
}

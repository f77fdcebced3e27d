//! What `hayate bench noisy` reports: per switch and policing setting, the victim's figures
//! alone and under each flood, and under a flood each as a share of alone (throughput and
//! transactions: flood ÷ alone; latencies: flood ÷ alone, so 1.0 is untouched and 2.0 twice
//! as slow). Printed as a table; written as JSON.

use serde::Serialize;

use super::noise::NoiseSched;
use super::NoisyArgs;
use crate::report::{Align, Table};

/// What the noisy host does during a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Case {
    /// Nothing: the victim alone.
    Alone,
    /// Floods one flow.
    Flood,
    /// Floods new flows (the UDP source port counting up).
    FloodNewFlows,
}

impl Case {
    /// In the order they run.
    pub const ALL: [Case; 3] = [Case::Alone, Case::Flood, Case::FloodNewFlows];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Case::Alone => "alone",
            Case::Flood => "flood",
            Case::FloodNewFlows => "flood-new-flows",
        }
    }

    /// The flood's flows (`None`: no flood).
    pub fn flows(self, new_flows: u32) -> Option<u32> {
        match self {
            Case::Alone => None,
            Case::Flood => Some(1),
            Case::FloodNewFlows => Some(new_flows),
        }
    }
}

/// The victim's figures in one case, and the noise beside them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    /// iperf3 TCP A → B, Gbit/s.
    pub tcp_gbps: f64,
    /// Why the stream did not complete, if it did not.
    pub tcp_error: Option<String>,
    /// Ping A → B under the TCP stream: 99th percentile, microseconds.
    pub ping_p99_us: f64,
    /// Pings without a reply, percent.
    pub ping_loss_pct: f64,
    /// Request/response transactions per second.
    pub rr_tps: f64,
    /// Request/response transaction time, 99th percentile, microseconds.
    pub rr_p99_us: f64,
    /// Why the request/response load failed, if it did.
    pub rr_error: Option<String>,
    /// Frames a second the noisy host sent during the TCP stream.
    pub noise_offered_pps: f64,
    /// Frames a second of the noise the sink received during the TCP stream.
    pub noise_delivered_pps: f64,
    /// Frames a second the noisy host sent during the request/response load.
    pub noise_offered_rr_pps: f64,
    /// Frames a second of the noise the sink received during the request/response load.
    pub noise_delivered_rr_pps: f64,
}

impl Figures {
    /// One line for the progress log.
    pub fn line(&self) -> String {
        format!(
            "TCP {:.2} Gbit/s, ping p99 {:.0} µs, RR {:.0}/s p99 {:.0} µs; noise {:.3} Mpps offered, {:.3} delivered (TCP), {:.3} / {:.3} (RR)",
            self.tcp_gbps,
            self.ping_p99_us,
            self.rr_tps,
            self.rr_p99_us,
            self.noise_offered_pps / 1e6,
            self.noise_delivered_pps / 1e6,
            self.noise_offered_rr_pps / 1e6,
            self.noise_delivered_rr_pps / 1e6
        )
    }
}

/// A flood case's figures against the same switch start's alone figures.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Share {
    /// TCP throughput, flood ÷ alone.
    pub tcp: f64,
    /// Ping p99 under the TCP stream, flood ÷ alone.
    pub ping_p99: f64,
    /// Transactions per second, flood ÷ alone.
    pub rr_tps: f64,
    /// Transaction p99, flood ÷ alone.
    pub rr_p99: f64,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

impl Share {
    /// `f` against `alone`.
    pub fn of(f: &Figures, alone: &Figures) -> Share {
        Share {
            tcp: ratio(f.tcp_gbps, alone.tcp_gbps),
            ping_p99: ratio(f.ping_p99_us, alone.ping_p99_us),
            rr_tps: ratio(f.rr_tps, alone.rr_tps),
            rr_p99: ratio(f.rr_p99_us, alone.rr_p99_us),
        }
    }
}

/// One case on one switch start.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// The switch.
    pub switch: String,
    /// Whether the noisy port was policed.
    pub policing: bool,
    /// What the noisy host did.
    pub case: Case,
    /// ok, skipped: why, failed: why.
    pub status: String,
    /// The figures, when measured.
    pub figures: Option<Figures>,
    /// Against alone (flood cases).
    pub share: Option<Share>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Policing rate of the noisy port, kbit/s.
    pub police_kbps: u64,
    /// Its bucket, kbit.
    pub police_burst_kbit: u64,
    /// Flows of the new-flow flood.
    pub new_flows: u32,
    /// Each measurement's length, seconds.
    pub seconds: u64,
    /// Cores: the switch's, the victim's, the noisy host's.
    pub switch_core: usize,
    /// The victim's core.
    pub gen_core: usize,
    /// The noisy host's core.
    pub noise_core: usize,
    /// How the noisy generator was scheduled.
    pub noise_sched: NoiseSched,
    /// Every case of every switch start.
    pub runs: Vec<Run>,
}

impl Report {
    /// An empty report of a run with `args`.
    pub fn new(args: &NoisyArgs) -> Report {
        Report {
            police_kbps: args.police_kbps,
            police_burst_kbit: args.police_burst_kbit,
            new_flows: args.new_flows,
            seconds: args.seconds,
            switch_core: args.switch_core,
            gen_core: args.gen_core,
            noise_core: args.noise_core.unwrap_or(args.gen_core),
            noise_sched: args.noise_sched,
            runs: Vec::new(),
        }
    }

    /// Adds a measured case; a flood case gets its share of the same start's alone case.
    pub fn add(&mut self, mut run: Run) {
        if run.case != Case::Alone {
            let alone = self.runs.iter().rev().find(|r| {
                r.switch == run.switch && r.policing == run.policing && r.case == Case::Alone
            });
            if let (Some(a), Some(f)) = (alone.and_then(|a| a.figures.as_ref()), &run.figures) {
                run.share = Some(Share::of(f, a));
            }
        }
        self.runs.push(run);
    }

    fn status(&mut self, switch: &str, policing: bool, status: String) {
        for case in Case::ALL {
            let done = self
                .runs
                .iter()
                .any(|r| r.switch == switch && r.policing == policing && r.case == case);
            if !done {
                self.runs.push(Run {
                    switch: switch.into(),
                    policing,
                    case,
                    status: status.clone(),
                    figures: None,
                    share: None,
                });
            }
        }
    }

    /// Marks a switch start's cases not measured as skipped.
    pub fn skipped(&mut self, switch: &str, policing: bool, why: &str) {
        self.status(switch, policing, format!("skipped: {why}"));
    }

    /// Marks a switch start's cases not measured as failed.
    pub fn failed(&mut self, switch: &str, policing: bool, why: &str) {
        self.status(switch, policing, format!("failed: {why}"));
    }

    /// The table: one row per case of every switch start.
    pub fn table(&self) -> String {
        let (l, r_) = (Align::Left, Align::Right);
        let mut t = Table::new()
            .col("switch", 16, l)
            .col("policing", 8, l)
            .col("case", 15, l)
            .col("TCP Gbit/s", 10, r_)
            .col("share", 5, r_)
            .col("ping p99 µs", 11, r_)
            .col("×alone", 6, r_)
            .col("RR/s", 7, r_)
            .col("share", 5, r_)
            .col("RR p99 µs", 9, r_)
            .col("×alone", 6, r_)
            .col("noise Mpps in/out TCP", 21, r_)
            .col("in/out RR", 11, r_);
        for r in &self.runs {
            let pol = if r.policing { "on" } else { "off" };
            let Some(f) = &r.figures else {
                t.text(format!(
                    "{} policing {pol} {}: {}",
                    r.switch,
                    r.case.name(),
                    r.status
                ));
                continue;
            };
            let s = |v: Option<f64>| v.map_or("".into(), |v| format!("{v:.2}"));
            t.row(vec![
                r.switch.clone(),
                pol.into(),
                r.case.name().into(),
                format!("{:.2}", f.tcp_gbps),
                s(r.share.map(|x| x.tcp)),
                format!("{:.0}", f.ping_p99_us),
                s(r.share.map(|x| x.ping_p99)),
                format!("{:.0}", f.rr_tps),
                s(r.share.map(|x| x.rr_tps)),
                format!("{:.0}", f.rr_p99_us),
                s(r.share.map(|x| x.rr_p99)),
                format!(
                    "{:.3}/{:.3}",
                    f.noise_offered_pps / 1e6,
                    f.noise_delivered_pps / 1e6
                ),
                format!(
                    "{:.3}/{:.3}",
                    f.noise_offered_rr_pps / 1e6,
                    f.noise_delivered_rr_pps / 1e6
                ),
            ]);
        }
        let mut out = format!(
            "Noisy neighbours: victim A → B while C floods D (64-byte frames); policing {} kbit/s, burst {} kbit; new flows {}; noisy generator on core {} ({})\n",
            self.police_kbps, self.police_burst_kbit, self.new_flows, self.noise_core,
            match self.noise_sched {
                NoiseSched::Normal => "normal scheduling",
                NoiseSched::Idle => "SCHED_IDLE",
            }
        );
        out += &t.render();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(tcp: f64, p99: f64, tps: f64) -> Figures {
        Figures {
            tcp_gbps: tcp,
            ping_p99_us: p99,
            rr_tps: tps,
            rr_p99_us: p99,
            ..Figures::default()
        }
    }

    #[test]
    fn floods_are_shares_of_their_own_starts_alone_figures() {
        let mut r = Report {
            police_kbps: 1,
            police_burst_kbit: 13,
            new_flows: 1,
            seconds: 1,
            switch_core: 1,
            gen_core: 0,
            noise_core: 0,
            noise_sched: NoiseSched::Normal,
            runs: Vec::new(),
        };
        let run = |policing, case, f| Run {
            switch: "s".into(),
            policing,
            case,
            status: "ok".into(),
            figures: Some(f),
            share: None,
        };
        r.add(run(false, Case::Alone, fig(10.0, 100.0, 1000.0)));
        r.add(run(true, Case::Alone, fig(8.0, 50.0, 500.0)));
        r.add(run(false, Case::Flood, fig(5.0, 300.0, 250.0)));
        r.add(run(true, Case::Flood, fig(8.0, 50.0, 500.0)));
        let s = r.runs[2].share.unwrap();
        assert_eq!(
            (s.tcp, s.ping_p99, s.rr_tps, s.rr_p99),
            (0.5, 3.0, 0.25, 3.0)
        );
        let s = r.runs[3].share.unwrap();
        assert_eq!((s.tcp, s.rr_tps), (1.0, 1.0));
        r.failed("s", true, "boom");
        assert_eq!(r.runs.len(), 5, "only the case not measured is marked");
        assert_eq!(r.runs[4].case, Case::FloodNewFlows);
        let t = r.table();
        assert!(t.contains("failed: boom") && t.contains("0.50"), "{t}");
    }
}

//! What `hayate bench tunnel-tcp` reports: per overlay, every stream's TCP throughput and
//! the pings under it, the median stream, and each Hayate overlay's median as a share of the
//! kernel's (linux-vxlan) measured in the same run. Printed as a table; written as JSON.

use serde::Serialize;

use super::TunnelTcpArgs;
use crate::compare::measure::Tcp;
use crate::report::{median, ratio, Align, Table};

/// One stream through one overlay.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// The overlay's name.
    pub overlay: String,
    /// `ok`, or `failed` (the overlay did not come up or the stream did not complete).
    pub status: String,
    /// iperf3 TCP A → B, Gbit/s received.
    pub tcp_gbps: Option<f64>,
    /// Pings under the stream: median and 99th percentile round trip, microseconds.
    pub ping_median_us: Option<f64>,
    /// 99th percentile round trip under the stream, microseconds.
    pub ping_p99_us: Option<f64>,
    /// Pings without a reply, percent.
    pub ping_loss_pct: Option<f64>,
    /// Why it failed.
    pub error: Option<String>,
}

impl Run {
    /// A measured stream (failed when iperf3 says so).
    pub fn measured(overlay: &str, t: Tcp) -> Run {
        Run {
            overlay: overlay.to_string(),
            status: if t.error.is_none() { "ok" } else { "failed" }.into(),
            tcp_gbps: Some(t.gbps),
            ping_median_us: Some(t.ping_load.median_us),
            ping_p99_us: Some(t.ping_load.p99_us),
            ping_loss_pct: Some(t.ping_load.loss_pct),
            error: t.error,
        }
    }

    /// An overlay that could not be measured, and why.
    pub fn failed(overlay: &str, why: &str) -> Run {
        Run {
            overlay: overlay.to_string(),
            status: "failed".into(),
            tcp_gbps: None,
            ping_median_us: None,
            ping_p99_us: None,
            ping_loss_pct: None,
            error: Some(why.to_string()),
        }
    }

    fn ok(&self) -> bool {
        self.status == "ok"
    }
}

/// The medians of one overlay's streams.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The overlay's name.
    pub overlay: String,
    /// Streams that completed, of all run.
    pub ok_runs: usize,
    /// Streams run.
    pub runs: usize,
    /// Median TCP throughput, Gbit/s.
    pub tcp_gbps: Option<f64>,
    /// Median of the streams' ping medians, microseconds.
    pub ping_median_us: Option<f64>,
    /// Median of the streams' ping 99th percentiles, microseconds.
    pub ping_p99_us: Option<f64>,
    /// Median TCP throughput as a share of linux-vxlan's (Hayate overlays only).
    pub tcp_vs_kernel: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The command's options.
    pub seconds: u64,
    /// Streams per overlay.
    pub repeat: usize,
    /// The VMs' programs' core.
    pub host_core: usize,
    /// Host 1's and host 2's switch cores.
    pub switch_cores: Vec<usize>,
    /// Whether those cores are shared (each Hayate then yields its core after an empty poll).
    pub shared_core: bool,
    /// The VMs' offloads (`on`: they hand over TCP super-packets).
    pub offloads: String,
    /// Whether the Hayates joined segments for their VMs' ports (`gro`: on or off).
    pub gro: String,
    /// The underlay veths' transmit offloads (`on`: routed super-packets cross it whole).
    pub underlay_offloads: String,
    /// The load average when the run started.
    pub loadavg_at_start: String,
    /// Every stream, in the order run.
    pub runs: Vec<Run>,
    /// Per overlay.
    pub summary: Vec<Summary>,
}

/// The overlay every Hayate overlay is compared with.
pub const KERNEL: &str = "linux-vxlan";

impl Report {
    /// An empty report for `args`.
    pub fn new(args: &TunnelTcpArgs) -> Report {
        Report {
            seconds: args.seconds,
            repeat: args.repeat,
            host_core: args.host_core,
            switch_cores: args.switch_cores.clone(),
            shared_core: args.shares_cores(),
            offloads: args.offloads.clone(),
            gro: args.gro.clone(),
            underlay_offloads: args.underlay_offloads.clone(),
            loadavg_at_start: crate::sys::host::loadavg(),
            runs: Vec::new(),
            summary: Vec::new(),
        }
    }

    /// Adds a stream.
    pub fn add(&mut self, r: Run) {
        self.runs.push(r);
    }

    /// Computes the summary from the runs.
    pub fn finish(&mut self) {
        let mut names: Vec<&str> = Vec::new();
        for r in &self.runs {
            if !names.contains(&r.overlay.as_str()) {
                names.push(&r.overlay);
            }
        }
        let of = |name: &str, f: fn(&Run) -> Option<f64>| {
            median(
                self.runs
                    .iter()
                    .filter(|r| r.overlay == name && r.ok())
                    .filter_map(f)
                    .collect(),
            )
        };
        let kernel = of(KERNEL, |r| r.tcp_gbps);
        self.summary = names
            .iter()
            .map(|&n| {
                let tcp = of(n, |r| r.tcp_gbps);
                Summary {
                    overlay: n.to_string(),
                    ok_runs: self
                        .runs
                        .iter()
                        .filter(|r| r.overlay == n && r.ok())
                        .count(),
                    runs: self.runs.iter().filter(|r| r.overlay == n).count(),
                    tcp_gbps: tcp,
                    ping_median_us: of(n, |r| r.ping_median_us),
                    ping_p99_us: of(n, |r| r.ping_p99_us),
                    tcp_vs_kernel: (n != KERNEL).then(|| ratio(tcp, kernel)).flatten(),
                }
            })
            .collect();
    }

    /// The summary as a table, then the failures.
    pub fn table(&self) -> String {
        let (l, r) = (Align::Left, Align::Right);
        let mut t = Table::new()
            .col("overlay", 16, l)
            .col("streams ok", 10, r)
            .col("TCP Gbit/s", 10, r)
            .col("ping med us", 11, r)
            .col("ping p99 us", 11, r)
            .col("vs linux-vxlan", 14, r);
        let f = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$}"));
        for s in &self.summary {
            t.row(vec![
                s.overlay.clone(),
                format!("{}/{}", s.ok_runs, s.runs),
                f(s.tcp_gbps, 2),
                f(s.ping_median_us, 0),
                f(s.ping_p99_us, 0),
                s.tcp_vs_kernel.map_or("-".into(), |v| format!("{v:.2}x")),
            ]);
        }
        let mut out = t.render();
        out += &format!(
            "  one iperf3 TCP stream VM A -> VM B per run, {} s, through VXLAN (VNI 42) between two hosts; \
             VMs MTU 1450, offloads {}, Hayate's gro {}, underlay offloads {}; hosts' programs and receive processing (RPS) on core {}, switches on cores {:?} ({}); \
             load average at start {}\n",
            self.seconds,
            self.offloads,
            self.gro,
            self.underlay_offloads,
            self.host_core,
            self.switch_cores,
            if self.shared_core {
                "shared: each Hayate yields its core after an empty poll, --shared-core"
            } else {
                "a core each: Hayate busy-polls"
            },
            self.loadavg_at_start
        );
        for r in self.runs.iter().filter(|r| !r.ok()) {
            out += &format!(
                "  {} failed: {}\n",
                r.overlay,
                r.error.as_deref().unwrap_or("?")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::measure::Latency;

    fn args() -> TunnelTcpArgs {
        TunnelTcpArgs {
            switches: vec![],
            seconds: 1,
            repeat: 3,
            pings: 10,
            host_core: 0,
            switch_cores: vec![1, 1],
            offloads: "off".into(),
            gro: "on".into(),
            underlay_offloads: "off".into(),
            json: None,
            workdir: None,
        }
    }

    fn tcp(gbps: f64) -> Tcp {
        Tcp {
            gbps,
            ping_load: Latency {
                median_us: 50.0,
                p99_us: 90.0,
                ..Latency::default()
            },
            error: None,
        }
    }

    #[test]
    fn hayate_is_compared_with_the_kernel_by_medians_of_ok_streams() {
        let mut rep = Report::new(&args());
        for g in [2.0, 3.0, 9.0] {
            rep.add(Run::measured("hayate-afpacket", tcp(g)));
        }
        for g in [1.0, 2.0] {
            rep.add(Run::measured(KERNEL, tcp(g)));
        }
        rep.add(Run::failed(KERNEL, "the bridge did not come up"));
        rep.add(Run::failed("hayate-afxdp", "no XDP"));
        rep.finish();
        let h = &rep.summary[0];
        assert_eq!((h.ok_runs, h.runs, h.tcp_gbps), (3, 3, Some(3.0)));
        // The kernel's median of two streams is their mean: 1.5.
        assert_eq!(h.tcp_vs_kernel, Some(2.0));
        let k = &rep.summary[1];
        assert_eq!((k.ok_runs, k.runs, k.tcp_gbps), (2, 3, Some(1.5)));
        assert_eq!(k.tcp_vs_kernel, None);
        let x = &rep.summary[2];
        assert_eq!((x.tcp_gbps, x.tcp_vs_kernel), (None, None));
        let t = rep.table();
        assert!(
            t.contains("2.00x") && t.contains("hayate-afxdp failed: no XDP"),
            "{t}"
        );
    }
}

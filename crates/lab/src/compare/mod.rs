//! `hayate bench compare`: the same two-host veth topology for each switch in turn — Hayate
//! with AF_XDP ports, Hayate with AF_PACKET ports, the Linux bridge, Open vSwitch's userspace
//! datapath on system and on AF_XDP ports (when installed) — measured in one run: packet rate
//! A→B by frame size, iperf3 TCP with the hosts' offloads on and off, and ping latency idle and
//! under load. Prints a table with ratios to the Linux bridge, writes JSON and an SVG plot.
//!
//! Each switch gets a fresh topology (`topo`); the generator, iperf3 and ping run on one core
//! and the switch on another. Needs root.

pub(crate) mod generator;
pub(crate) mod measure;
pub(crate) mod median;
pub(crate) mod peers;
mod report;
pub(crate) mod topo;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::bench;
use generator::Generator;
use peers::{Peer, StartCtx};
use report::{Report, SwitchResult};
use topo::{Sink, Topo};

/// Options of `hayate bench compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Switches to measure (default: all that are installed): linux-bridge,
    /// linux-bridge-rps (the bridge's work steered to the switch core), hayate-afxdp,
    /// hayate-afpacket, hayate-afxdp-noprio, hayate-afpacket-noprio (no priority lane for
    /// control frames), hayate-afpacket-lane-host (the lane on the hosts' core), ovs-netdev,
    /// ovs-netdev-tso (its userspace TSO on), ovs-afxdp, ovs-dpdk (Open vSwitch with DPDK on
    /// `net_af_packet` ports), testpmd-afxdp (dpdk-testpmd io
    /// forwarding on AF_XDP ports: no lookup, the floor of a userspace switch's cost on these
    /// ports).
    #[arg(long, value_delimiter = ',')]
    pub switches: Vec<String>,
    /// Frame sizes for the packet-rate test, bytes with FCS.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1518"
    )]
    pub sizes: Vec<usize>,
    /// Measured window per frame size, seconds.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Sending before each window, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Length of each iperf3 TCP stream, seconds (0: no TCP test).
    #[arg(long, default_value_t = 10)]
    pub tcp_seconds: u64,
    /// Measure every switch this many times, the switches taking turns; the table shows
    /// each figure's median over the runs, the JSON also keeps every run.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Pings per latency measurement (one per millisecond).
    #[arg(long, default_value_t = 1000)]
    pub pings: usize,
    /// Packet-rate generator: hayate-afxdp (`hayate gen send` on AF_XDP), hayate-afpacket,
    /// trafgen (Debian netsniff-ng), testpmd-afxdp or testpmd-afpacket (dpdk-testpmd txonly).
    #[arg(long, default_value = "hayate-afxdp")]
    pub generator: String,
    /// How host B disposes of the generator's frames: stack (its IP stack's failed route
    /// lookup, which allocates a route entry per frame, on the core that sent into B's veth:
    /// the switch's, for a userspace switch) or ingress (an nftables drop rule at B's
    /// interface, the first thing its kernel does: less of the figure is B's).
    #[arg(long, value_enum, default_value_t = Sink::Stack)]
    pub sink: Sink,
    /// Core of the generator, iperf3 and ping.
    #[arg(long, default_value_t = 0)]
    pub gen_core: usize,
    /// Core of the switch.
    #[arg(long, default_value_t = 1)]
    pub switch_core: usize,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an SVG plot of throughput by frame size to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Folder for logs and generator configs (default: a fresh one under /tmp).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
}

fn check_tools(gen: Generator, sink: Sink) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("bench compare builds network namespaces: run it as root");
    }
    let mut missing = Vec::new();
    let mut need = vec![
        ("ip", "iproute2"),
        ("ethtool", "ethtool"),
        ("ping", "iputils-ping"),
    ];
    need.push(("iperf3", "iperf3"));
    need.push(("taskset", "util-linux"));
    need.extend(sink.needs());
    if let Some(why) = gen.unavailable() {
        bail!("the generator {} is {why}", gen.name());
    }
    for (bin, pkg) in need {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).exists()))
            .unwrap_or(false);
        if !found {
            missing.push(pkg);
        }
    }
    if !missing.is_empty() {
        bail!(
            "missing programs; install them with: apt-get install -y {}",
            missing.join(" ")
        );
    }
    Ok(())
}

/// Runs `hayate bench compare`.
pub fn main(args: CompareArgs) -> Result<()> {
    let gen = Generator::from_name(&args.generator)?;
    check_tools(gen, args.sink)?;
    bench::check_window(args.seconds, args.warmup)?;
    bench::check_repeat(args.repeat, 20)?;
    bench::check_sizes(&args.sizes)?;
    let switches = bench::chosen(&args.switches, peers::all, peers::by_name)?;
    let hayate = std::env::current_exe().context("finding the hayate binary")?;
    let dir = bench::workdir(args.workdir.as_deref(), "compare")?;
    let mut report = Report {
        generator: gen.name().into(),
        sink: args.sink.name().into(),
        gen_core: args.gen_core,
        switch_core: args.switch_core,
        window_s: args.seconds,
        repeat: args.repeat,
        results: Vec::new(),
        runs: Vec::new(),
    };
    let mut runs: Vec<Vec<SwitchResult>> = vec![Vec::new(); switches.len()];
    for rep in 0..args.repeat {
        for (i, sw) in switches.iter().enumerate() {
            let mut r = SwitchResult {
                switch: sw.name().into(),
                ..SwitchResult::default()
            };
            if let Some(why) = sw.unavailable() {
                if rep == 0 {
                    eprintln!("hayate: skipping {}: {why}", sw.name());
                }
                r.status = format!("skipped: {why}");
            } else {
                eprintln!(
                    "hayate: measuring {} (run {} of {}) ...",
                    sw.name(),
                    rep + 1,
                    args.repeat
                );
                r.status = match measure_switch(sw.as_ref(), &args, gen, &hayate, &dir, &mut r) {
                    Ok(()) => "ok".into(),
                    Err(e) => {
                        eprintln!("hayate: {}: {e:#}", sw.name());
                        format!("failed: {e:#}")
                    }
                };
            }
            runs[i].push(r);
        }
    }
    report.results = runs.iter().map(|r| median::summarize(r)).collect();
    if args.repeat > 1 {
        report.runs = runs;
    }
    print!("{}", report.table());
    bench::write_json(args.json.as_deref(), &report)?;
    if let Some(p) = &args.plot {
        report.plot(p)?;
    }
    Ok(())
}

fn measure_switch(
    sw: &dyn Peer,
    args: &CompareArgs,
    gen: Generator,
    hayate: &std::path::Path,
    dir: &std::path::Path,
    r: &mut SwitchResult,
) -> Result<()> {
    let prefix = format!("hc{}", std::process::id() % 100_000);
    let topo = Topo::up(&prefix)?;
    topo.sink(args.sink)?;
    topo.host_offloads(false)?;
    let mut running = sw.start(&StartCtx {
        topo: &topo,
        hayate,
        core: args.switch_core,
        host_core: args.gen_core,
        dir,
        police: None,
        flows: &[],
    })?;
    if !measure::reachable(&topo, Duration::from_secs(10)) {
        running.check_alive()?;
        bail!("host A cannot reach host B through the switch");
    }
    let pid = running.pid();
    if let Some(pid) = pid {
        std::thread::sleep(Duration::from_secs(1));
        r.idle_cpu_pct = measure::cpu_share(pid, Duration::from_secs(2));
    }
    let test = measure::RateTest {
        topo: &topo,
        gen,
        warmup: args.warmup,
        window: args.seconds,
        core: args.gen_core,
        other_core: args.switch_core,
        dir,
        switch_pid: pid,
    };
    for &size in &args.sizes {
        let rate = measure::rate(&test, size)?;
        eprintln!(
            "hayate:   {size:>4} B: {:.3} Mpps (offered {:.3})",
            rate.pps / 1e6,
            rate.offered_pps / 1e6
        );
        r.rates.push(rate);
        running.check_alive()?;
    }
    r.ping_idle = Some(measure::ping(&topo, args.pings, args.gen_core)?);
    if args.tcp_seconds > 0 {
        let t = measure::tcp(&topo, args.tcp_seconds, args.pings, args.gen_core, dir)?;
        eprintln!("hayate:   TCP, offloads off: {}", tcp_line(&t));
        r.tcp_offloads_off = Some(t);
        topo.host_offloads(true)?;
        let t = measure::tcp(&topo, args.tcp_seconds, args.pings, args.gen_core, dir)?;
        eprintln!("hayate:   TCP, offloads on: {}", tcp_line(&t));
        r.tcp_offloads_on = Some(t);
    }
    running.check_alive()?;
    drop(running);
    drop(topo);
    Ok(())
}

fn tcp_line(t: &measure::Tcp) -> String {
    match &t.error {
        Some(e) => format!("{:.2} Gbit/s ({e})", t.gbps),
        None => format!("{:.2} Gbit/s", t.gbps),
    }
}

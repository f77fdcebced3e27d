//! `hayate bench noisy`: does a flooding neighbour take a victim's bandwidth, latency or
//! transactions? Four hosts in namespaces on one switch (the compare bench's topology with two
//! more hosts, [`Topo::up_with`]): the victim pair A → B runs an iperf3 TCP stream with pings
//! under it and a request/response load ([`rr`]); the noisy host C floods 64-byte frames to
//! host D at the highest rate its generator reaches ([`noise`]), with one flow and with new
//! flows. Each switch — Hayate, the Linux bridge, Open vSwitch, through the compare bench's
//! peers — runs without and with ingress policing on C's port (Hayate's and Open vSwitch's
//! `ingress_policing_rate`, a tc police action on the bridge), its victim figures as a share
//! of what the victim got alone on the same switch start ([`report`]).
//!
//! The switch runs on its own core; the hosts (victim and noisy) on another
//! (`--gen-core`), or the noisy host on a third (`--noise-core`) where the machine has one:
//! on a two-core machine the noisy generator and the victim's programs share a core, so part
//! of what the victim loses is that core, not the switch. The flows the switches are given
//! (Hayate and Open vSwitch; the bridge has none) make every UDP source port a flow of its
//! own (`udp,tp_src=9,actions=drop` above NORMAL: a megaflow must know the source port), so
//! the new-flow flood costs an upcall per frame until the flows are cached. Needs root.

pub mod noise;
pub mod report;
pub mod rr;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::bench;
use crate::compare::measure;
use crate::compare::peers::{self, Peer, Police, StartCtx};
use crate::compare::topo::{Topo, IP_B};
use noise::{Flood, NoiseGen, NoiseSched};
use report::{Case, Figures, Report, Run};

/// The flows every switch that takes flows is given.
pub const FLOWS: [&str; 1] = ["priority=100,udp,tp_src=9,actions=drop"];

/// Options of `hayate bench noisy`.
#[derive(Args, Debug, Clone)]
pub struct NoisyArgs {
    /// Switches to measure (default: hayate-afxdp, hayate-afpacket, linux-bridge,
    /// ovs-netdev, ovs-dpdk; those not installed are skipped); any of `hayate bench compare`'s but
    /// testpmd-afxdp.
    #[arg(long, value_delimiter = ',')]
    pub switches: Vec<String>,
    /// Run each switch without policing (off), with policing on the noisy port (on), or both.
    #[arg(long, value_delimiter = ',', default_value = "off,on")]
    pub policing: Vec<String>,
    /// Policing rate of the noisy port, kbit/s (10 Mbit/s: about 20,000 64-byte frames a
    /// second).
    #[arg(long, default_value_t = 10_000)]
    pub police_kbps: u64,
    /// Policing bucket of the noisy port, kbit (Open vSwitch's advice: a tenth of the rate
    /// or more).
    #[arg(long, default_value_t = 1_000)]
    pub police_burst_kbit: u64,
    /// Flows of the new-flow flood (UDP source ports 10000 upwards).
    #[arg(long, default_value_t = 50_000)]
    pub new_flows: u32,
    /// Length of each measurement (the TCP stream, the request/response load), seconds.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Flooding before the victim's measurements start, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Pings under the victim's TCP stream (one per millisecond).
    #[arg(long, default_value_t = 1000)]
    pub pings: usize,
    /// The noisy host's generator.
    #[arg(long, value_enum, default_value_t = NoiseGen::HayateAfxdp)]
    pub generator: NoiseGen,
    /// Core of the victim's programs (and of the noisy host's, without --noise-core).
    #[arg(long, default_value_t = 0)]
    pub gen_core: usize,
    /// Core of the noisy host's generator (default: --gen-core).
    #[arg(long)]
    pub noise_core: Option<usize>,
    /// How the noisy generator is scheduled on its core: `normal`, or `idle` (`SCHED_IDLE`:
    /// it never delays the victim's programs when it shares their core; see `NoiseSched`).
    #[arg(long, value_enum, default_value_t = NoiseSched::Normal)]
    pub noise_sched: NoiseSched,
    /// Core of the switch.
    #[arg(long, default_value_t = 1)]
    pub switch_core: usize,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Folder for logs (default: a fresh one under /tmp).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
}

/// The switches measured when none are named.
const DEFAULT_SWITCHES: [&str; 5] = [
    "hayate-afxdp",
    "hayate-afpacket",
    "linux-bridge",
    "ovs-netdev",
    "ovs-dpdk",
];

fn check(args: &NoisyArgs) -> Result<()> {
    bench::check_root_and_tools(
        "bench noisy",
        &[
            ("iperf3", "iperf3"),
            ("nft", "nftables"),
            ("tc", "iproute2"),
            ("ping", "iputils-ping"),
            ("taskset", "util-linux"),
        ],
    )?;
    bench::check_window(args.seconds as f64, args.warmup)?;
    if args.police_kbps == 0 || args.police_burst_kbit < 13 {
        bail!("--police-kbps must be at least 1 and --police-burst-kbit at least 13 (one 1518-byte frame)");
    }
    if args.new_flows == 0 || args.new_flows > 55_000 {
        bail!("--new-flows must be in 1..=55000 (UDP source ports from 10000)");
    }
    for p in &args.policing {
        if p != "off" && p != "on" {
            bail!("--policing takes off, on or off,on; not '{p}'");
        }
    }
    Ok(())
}

/// Runs `hayate bench noisy`.
pub fn main(args: NoisyArgs) -> Result<()> {
    check(&args)?;
    let names: Vec<String> = if args.switches.is_empty() {
        DEFAULT_SWITCHES.iter().map(|s| s.to_string()).collect()
    } else {
        args.switches.clone()
    };
    let switches = names
        .iter()
        .map(|n| peers::by_name(n))
        .collect::<Result<Vec<_>>>()?;
    if let Some(sw) = switches.iter().find(|s| !s.multiport()) {
        bail!("{} joins two ports only; bench noisy needs four", sw.name());
    }
    let hayate = std::env::current_exe().context("finding the hayate binary")?;
    let dir = bench::workdir(args.workdir.as_deref(), "noisy")?;
    let mut report = Report::new(&args);
    for sw in &switches {
        for policing in &args.policing {
            let on = policing == "on";
            if let Some(why) = sw.unavailable() {
                eprintln!("hayate: skipping {}: {why}", sw.name());
                report.skipped(sw.name(), on, &why);
                continue;
            }
            eprintln!("hayate: {} with policing {policing} ...", sw.name());
            if let Err(e) = measure_switch(sw.as_ref(), on, &args, &hayate, &dir, &mut report) {
                eprintln!("hayate: {}: {e:#}", sw.name());
                report.failed(sw.name(), on, &format!("{e:#}"));
            }
        }
    }
    print!("{}", report.table());
    bench::write_json(args.json.as_deref(), &report)?;
    Ok(())
}

/// One switch start: the victim alone, then under each flood.
fn measure_switch(
    sw: &dyn Peer,
    policed: bool,
    args: &NoisyArgs,
    hayate: &Path,
    dir: &Path,
    report: &mut Report,
) -> Result<()> {
    let prefix = format!("hn{}", std::process::id() % 100_000);
    let topo = Topo::up_with(&prefix, 2)?;
    let (noisy, sink) = (topo.extra[0].clone(), topo.extra[1].clone());
    noise::sink(&topo, &sink)?;
    topo.host_offloads(false)?;
    let police = Police {
        dev: noisy.sw.clone(),
        kbps: args.police_kbps,
        burst_kbit: args.police_burst_kbit,
    };
    let flows: Vec<String> = FLOWS.iter().map(|f| f.to_string()).collect();
    let mut running = sw.start(&StartCtx {
        topo: &topo,
        hayate,
        core: args.switch_core,
        host_core: args.gen_core,
        dir,
        police: policed.then_some(&police),
        flows: &flows,
    })?;
    if !measure::reachable(&topo, Duration::from_secs(10)) {
        running.check_alive()?;
        bail!("host A cannot reach host B through the switch");
    }
    // The sink's MAC must be known to the switch, or the flood is flooded to every host:
    // the sink pings the noisy host now and then for the whole run.
    topo.sh(
        &sink.ns,
        &format!("ping -q -n -i 0.5 {} >/dev/null 2>&1 &", noisy.ip),
    )?;
    std::thread::sleep(Duration::from_secs(1));
    let noise_core = args.noise_core.unwrap_or(args.gen_core);
    for case in Case::ALL {
        let mut flood = match case.flows(args.new_flows) {
            None => None,
            Some(flows) => {
                // Long enough for every measurement; stopped when the case ends.
                let secs = args.warmup + 2.0 * args.seconds as f64 + 60.0;
                let f = Flood::start(
                    args.generator,
                    args.noise_sched,
                    &noisy,
                    &sink,
                    flows,
                    noise_core,
                    secs,
                    dir,
                )?;
                std::thread::sleep(Duration::from_secs_f64(args.warmup));
                Some(f)
            }
        };
        let (sent0, got0, t0) = {
            let (s, g) = noise::counts(&topo, &noisy, &sink)?;
            (s, g, Instant::now())
        };
        let tcp = measure::tcp(&topo, args.seconds, args.pings, args.gen_core, dir)?;
        let (sent_t, got_t, t_t) = {
            let (s, g) = noise::counts(&topo, &noisy, &sink)?;
            (s, g, Instant::now())
        };
        let rr = rr::run(
            &topo.ns_a,
            &topo.ns_b,
            IP_B,
            args.gen_core,
            Duration::from_secs(args.seconds),
        );
        let (sent1, got1) = noise::counts(&topo, &noisy, &sink)?;
        let (w_tcp, w_rr) = (
            t_t.duration_since(t0).as_secs_f64(),
            t_t.elapsed().as_secs_f64(),
        );
        if let Some(f) = flood.as_mut() {
            f.check_alive(dir)?;
        }
        drop(flood);
        running.check_alive()?;
        let figures = Figures {
            tcp_gbps: tcp.gbps,
            tcp_error: tcp.error.clone(),
            ping_p99_us: tcp.ping_load.p99_us,
            ping_loss_pct: tcp.ping_load.loss_pct,
            rr_tps: rr.as_ref().map_or(0.0, |r| r.tps),
            rr_p99_us: rr.as_ref().map_or(0.0, |r| r.p99_us),
            rr_error: rr.as_ref().err().map(|e| format!("{e:#}")),
            noise_offered_pps: (sent_t - sent0) as f64 / w_tcp,
            noise_delivered_pps: (got_t - got0) as f64 / w_tcp,
            noise_offered_rr_pps: (sent1 - sent_t) as f64 / w_rr,
            noise_delivered_rr_pps: (got1 - got_t) as f64 / w_rr,
        };
        eprintln!("hayate:   {}: {}", case.name(), figures.line());
        report.add(Run {
            switch: sw.name().into(),
            policing: policed,
            case,
            status: "ok".into(),
            figures: Some(figures),
            share: None,
        });
    }
    drop(running);
    drop(topo);
    Ok(())
}

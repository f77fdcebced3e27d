//! `hayate bench vhost`: vhost-user packet rates on one switch core, Hayate beside Open
//! vSwitch with DPDK and DPDK's own vhost library, in one run (issue 16; the peers' pvp.sh
//! measured the latter two the same way).
//!
//! ```text
//! pvp:  phy-in ─► switch ─► vhost-user ─► VM (testpmd io, loop) ─► vhost-user ─► switch ─► phy-out
//! v2v:  testpmd: net_pcap ─► vmA ══► switch ══► vmB ─► net_null        (rate: what vmB receives)
//! ```
//!
//! The "VMs" are dpdk-testpmd on virtio-user ports (`--no-pci`, memfd memory by default,
//! `server=1`: they own the sockets and the switch connects) on the VM core; the switch's
//! forwarding runs on the switch core. 64-byte frames (60 B + FCS). Each (topology, switch)
//! gets fresh processes and sockets; the switches take turns over `--repeat` runs and the
//! table shows medians, with ratios to Open vSwitch with DPDK and to the floor.
//!
//! Files: [`args`](VhostArgs) here; [`hayate`], `ovs`, `floor`: the three switches (Open
//! vSwitch's private instance is [`crate::ovs_dpdk`]'s); `testpmd`: the VMs and telemetry;
//! `window` and `counters`: the measurement; `report`: table, JSON, SVG; `needs`:
//! packages. Children and host changes, always undone, are [`crate::sys`]'s; the test frame
//! [`crate::frame`]'s.

pub(crate) mod counters;
mod floor;
pub mod hayate;
mod needs;
mod ovs;
mod report;
mod testpmd;
mod window;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::bench;
use crate::frame;
use crate::sys::{guard, host};
use report::{Report, Run};
use window::Measured;

/// Options of `hayate bench vhost`.
#[derive(Args, Debug, Clone)]
pub struct VhostArgs {
    /// Switches to measure (default: all that are installed): hayate, ovs-dpdk (Open vSwitch
    /// with DPDK, dpdkvhostuserclient ports), dpdk-vhost (DPDK's vhost library in
    /// dpdk-testpmd io forwarding: no switch, the floor).
    #[arg(long, value_delimiter = ',')]
    pub switches: Vec<String>,
    /// Topologies: pvp (phy → switch → VM → switch → phy), v2v (VM A → switch → VM B).
    #[arg(long, value_delimiter = ',', default_value = "pvp,v2v")]
    pub topologies: Vec<String>,
    /// Measured window, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Forwarding before each window, seconds.
    #[arg(long, default_value_t = 4.0)]
    pub warmup: f64,
    /// Measure every (topology, switch) this many times, the switches taking turns; the
    /// table shows medians, the JSON every run.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an SVG bar chart (Mpps per switch and topology) to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// virtio queue size of the VMs' ports (`queue_size`).
    #[arg(long, default_value_t = 256)]
    pub vq: u32,
    /// The VMs' memory: memfd (4 KiB pages, `--no-huge`) or huge (the private hugetlbfs, as
    /// the peers' published table).
    #[arg(long, default_value = "memfd")]
    pub vm_memory: String,
    /// Core of the switch's forwarding (default: the last core).
    #[arg(long)]
    pub switch_core: Option<usize>,
    /// Core of the VMs and of every switch's other threads.
    #[arg(long, default_value_t = 0)]
    pub vm_core: usize,
    /// Folder for logs, configs and sockets (default: a fresh one under /tmp; kept).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
}

/// A switch under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sw {
    /// Hayate (`hayate run --busy-poll`, vhostuser ports in client mode).
    Hayate,
    /// Open vSwitch with DPDK.
    OvsDpdk,
    /// DPDK's vhost library in testpmd io forwarding (the floor).
    DpdkVhost,
}

const ALL: [Sw; 3] = [Sw::Hayate, Sw::OvsDpdk, Sw::DpdkVhost];

impl Sw {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Sw::Hayate => report::HAYATE,
            Sw::OvsDpdk => report::OVS,
            Sw::DpdkVhost => report::FLOOR,
        }
    }

    fn from_name(n: &str) -> Result<Sw> {
        crate::bench::by_name(ALL, |s| s.name(), "switch", n)
    }
}

/// A topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// phy → switch → VM → switch → phy.
    Pvp,
    /// VM A → switch → VM B.
    V2v,
}

impl Topology {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Pvp => "pvp",
            Topology::V2v => "v2v",
        }
    }

    fn from_name(n: &str) -> Result<Topology> {
        match n {
            "pvp" => Ok(Topology::Pvp),
            "v2v" => Ok(Topology::V2v),
            _ => bail!("unknown topology '{n}'; use pvp or v2v"),
        }
    }
}

/// What every measurement shares.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Prefix of DPDK file prefixes and the namespace (unique to this process).
    pub tag: String,
    /// Switch core.
    pub switch_core: usize,
    /// VM core.
    pub vm_core: usize,
    /// virtio queue size.
    pub vq: u32,
    /// The test frame's pcap.
    pub pcap: PathBuf,
    /// The private hugetlbfs, when mounted.
    pub huge: Option<PathBuf>,
    /// Whether the VMs use it.
    pub vm_huge: bool,
    /// Warm-up, seconds.
    pub warmup: f64,
    /// Window, seconds.
    pub seconds: f64,
    /// This binary.
    pub hayate: PathBuf,
}

impl Ctx {
    /// How long any child may live (the watchdog kills it after).
    pub fn lifetime(&self) -> Duration {
        Duration::from_secs_f64(150.0 + self.warmup + self.seconds)
    }
}

fn check_args(a: &VhostArgs) -> Result<()> {
    bench::check_window(a.seconds, a.warmup)?;
    bench::check_repeat(a.repeat, 20)?;
    if !(a.vq.is_power_of_two() && (64..=4096).contains(&a.vq)) {
        bail!("--vq must be a power of two in 64..=4096");
    }
    if a.vm_memory != "memfd" && a.vm_memory != "huge" {
        bail!("--vm-memory is memfd or huge");
    }
    Ok(())
}

/// Runs `hayate bench vhost`.
pub fn main(args: VhostArgs) -> Result<()> {
    check_args(&args)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("bench vhost mounts hugetlbfs and runs DPDK: run it as root");
    }
    let topos: Vec<Topology> = args
        .topologies
        .iter()
        .map(|t| Topology::from_name(t))
        .collect::<Result<_>>()?;
    let asked = bench::chosen(&args.switches, || ALL.to_vec(), Sw::from_name)?;
    let common = needs::missing_common(&topos);
    if !common.is_empty() {
        bail!(
            "the VMs (dpdk-testpmd on virtio-user) need packages that are missing; install \
             them with: apt-get install -y {}",
            common.join(" ")
        );
    }
    let mut skipped: Vec<(Sw, String)> = Vec::new();
    let mut switches = Vec::new();
    for sw in asked {
        match needs::unavailable(sw) {
            Some(why) => {
                eprintln!("hayate: skipping {}: {why}", sw.name());
                skipped.push((sw, format!("skipped: {why}")));
            }
            None => switches.push(sw),
        }
    }
    let switch_core = bench::switch_core(args.switch_core, args.vm_core, "VM")?;
    // This process (and the helpers it runs: ovs-ofctl, hayate ctl) stays on the VM core,
    // ahead of the busy-polling VMs there.
    bench::take_core(args.vm_core)?;
    let dir = bench::workdir(args.workdir.as_deref(), "vhost")?;
    let pcap = dir.join("udp64.pcap");
    frame::write_pcap(&pcap, &[frame::frame()])?;
    let vm_huge = args.vm_memory == "huge";
    let need_huge = vm_huge || switches.iter().any(|s| *s != Sw::Hayate);
    // OVS: 1 GiB of socket memory; the floor 512 MiB; VMs on huge pages 512 MiB more.
    let sw_pages = if switches.contains(&Sw::OvsDpdk) {
        512
    } else {
        256
    };
    let pages = sw_pages + if vm_huge { 256 } else { 0 } + 64;
    let huge = need_huge
        .then(|| host::Huge::add(pages, &dir))
        .transpose()?;
    let mut ctx = Ctx {
        tag: format!("hv{}", std::process::id()),
        switch_core,
        vm_core: args.vm_core,
        vq: args.vq,
        pcap,
        huge: huge.as_ref().map(|h| h.path().to_path_buf()),
        vm_huge,
        warmup: args.warmup,
        seconds: args.seconds,
        hayate: std::env::current_exe().context("finding the hayate binary")?,
    };
    let tsc_hz = cpu::Tsc::calibrate(Duration::from_millis(200)).hz;
    let mut report = Report {
        frame_bytes: frame::FRAME_LEN + 4,
        switch_core,
        vm_core: args.vm_core,
        vq: args.vq,
        vm_memory: args.vm_memory.clone(),
        window_s: args.seconds,
        warmup_s: args.warmup,
        repeat: args.repeat,
        tsc_hz,
        load_start: host::loadavg(),
        ..Report::default()
    };
    eprintln!("hayate: logs, configs and sockets in {}", dir.display());
    let base_tag = ctx.tag.clone();
    for rep in 0..args.repeat {
        for &topo in &topos {
            for (sw, why) in &skipped {
                if rep == 0 {
                    report.runs.push(skipped_run(topo, *sw, why));
                }
            }
            for &sw in &switches {
                guard::check()?;
                ctx.tag = format!("{base_tag}r{rep}");
                eprintln!(
                    "hayate: {} {} (run {} of {}) ...",
                    topo.name(),
                    sw.name(),
                    rep + 1,
                    args.repeat
                );
                let run = measure(
                    &ctx,
                    sw,
                    topo,
                    &dir.join(format!("{}-{}-{rep}", sw.name(), topo.name())),
                    tsc_hz,
                );
                eprintln!("hayate:   {}", line(&run));
                report.runs.push(run);
                guard::check()?;
            }
        }
    }
    report.load_end = host::loadavg();
    report.rows = report::summarize(&report.runs);
    print!("{}", report.table());
    bench::write_json(args.json.as_deref(), &report)?;
    if let Some(p) = &args.plot {
        report.plot(p)?;
    }
    drop(huge);
    Ok(())
}

fn skipped_run(topo: Topology, sw: Sw, why: &str) -> Run {
    Run {
        topology: topo.name().into(),
        switch: sw.name().into(),
        status: why.into(),
        ..Run::default()
    }
}

fn line(r: &Run) -> String {
    match r.mpps {
        Some(m) if r.status == "ok" => format!(
            "{m:.3} Mpps (offered {}), {} cycles/packet{}",
            r.offered_mpps
                .map(|o| format!("{o:.3}"))
                .unwrap_or_else(|| "-".into()),
            r.cycles_per_packet
                .map(|c| format!("{c:.0}"))
                .unwrap_or_else(|| "-".into()),
            r.busy_share
                .map(|b| format!(", switch core {:.1} % busy", b * 100.0))
                .unwrap_or_default()
        ),
        _ => r.status.clone(),
    }
}

/// One measurement, failures kept as the run's status.
fn measure(ctx: &Ctx, sw: Sw, topo: Topology, dir: &std::path::Path, tsc_hz: f64) -> Run {
    let mut run = Run {
        topology: topo.name().into(),
        switch: sw.name().into(),
        ..Run::default()
    };
    let got = std::fs::create_dir_all(dir)
        .map_err(anyhow::Error::from)
        .and_then(|_| match sw {
            Sw::Hayate => hayate::measure(ctx, topo, dir),
            Sw::OvsDpdk => ovs::measure(ctx, topo, dir),
            Sw::DpdkVhost => floor::measure(ctx, topo, dir),
        });
    match got {
        Ok(m) => fill(&mut run, m, tsc_hz),
        Err(e) => run.status = format!("failed: {e:#} (logs in {})", dir.display()),
    }
    run
}

fn fill(run: &mut Run, m: Measured, tsc_hz: f64) {
    let pps = m.rates.get(&m.delivered).copied();
    run.mpps = pps.map(|p| p / 1e6);
    run.offered_mpps = m
        .offered
        .as_ref()
        .and_then(|k| m.rates.get(k))
        .map(|p| p / 1e6);
    run.busy_share = m.busy_share;
    run.cycles_per_packet = pps
        .filter(|p| *p > 0.0)
        .map(|p| tsc_hz * m.busy_share.unwrap_or(1.0) / p);
    run.window_s = Some(m.window_s);
    run.rates = m.rates;
    run.status = if pps.is_some_and(|p| p > 0.0) {
        "ok".into()
    } else {
        "failed: nothing delivered in the window".into()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_cycles_follow_the_busy_share() {
        for s in ALL {
            assert_eq!(Sw::from_name(s.name()).unwrap(), s);
        }
        assert!(Sw::from_name("ovs")
            .unwrap_err()
            .to_string()
            .contains("ovs-dpdk"));
        assert!(Topology::from_name("p2p").is_err());
        let mut r = Run::default();
        let m = Measured {
            rates: [("switch.p3.tx".to_string(), 10e6)].into_iter().collect(),
            delivered: "switch.p3.tx".into(),
            busy_share: Some(0.5),
            ..Measured::default()
        };
        fill(&mut r, m, 2.6e9);
        assert_eq!(r.status, "ok");
        assert_eq!(r.mpps, Some(10.0));
        assert_eq!(r.cycles_per_packet, Some(130.0));
    }
}

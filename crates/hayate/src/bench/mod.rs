//! `hayate bench`: named scenarios run in this process on null ports with one pinned thread.
//!
//! Each scenario builds a bridge whose ports are null ports (endless sources of a UDP
//! template, and sinks), installs its flows, drives one poll-mode thread inline on a pinned
//! core, and counts what the sinks received over a measured window after a warm-up. The
//! figures are Mpps, Gbit/s on the wire and time-stamp-counter cycles per packet.

mod report;
mod runner;
mod scenario;

use hayate_lab::{churn, compare, generators, noisy, soak, tunnel_tcp, vhost};

use anyhow::{bail, Result};
use clap::{Args, Subcommand};

/// Options of `hayate bench`.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// `compare`: Hayate beside the Linux bridge and Open vSwitch on real veths.
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// Scenarios to run (default: all). `hayate bench --list` names them.
    pub scenarios: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// Frame sizes in bytes, FCS included (default: 64..1518 for size-sensitive scenarios,
    /// 64 for the others).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Length of each measured window, in seconds.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Warm-up before each window (caches fill, flows are set up), in seconds.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Runs per (scenario, size); the run with the median rate is reported (this machine's
    /// noise makes single runs vary by ±10 %).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Core to pin the switch thread to (default: the last core).
    #[arg(long)]
    pub core: Option<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Turn the tables' address prefix tracking off in every scenario (to compare: rules
    /// on exact addresses then make a megaflow per address).
    #[arg(long)]
    pub no_prefix_tracking: bool,
    /// Empty every cache on every published flow change instead of revalidating (to compare
    /// with the churn scenarios' default).
    #[arg(long)]
    pub no_revalidate: bool,
}

/// Benchmarks with their own options.
#[derive(Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Two hosts in network namespaces joined by each switch in turn (Hayate on AF_XDP and
    /// AF_PACKET ports, the Linux bridge, Open vSwitch): packet rates by frame size, TCP
    /// throughput, ping latency; a table with ratios to the Linux bridge, JSON, SVG plot.
    Compare(compare::CompareArgs),
    /// Packet generators side by side on one veth pair (Hayate's own on AF_XDP and
    /// AF_PACKET, trafgen, dpdk-testpmd txonly): packets per second on one pinned core.
    Generators(generators::GeneratorsArgs),
    /// vhost-user on one switch core: PVP and VM-to-VM with dpdk-testpmd "VMs" on
    /// virtio-user, Hayate beside Open vSwitch with DPDK and DPDK's vhost library (the
    /// floor); Mpps, cycles per packet, ratios to OVS-DPDK, JSON, SVG bar chart.
    Vhost(vhost::VhostArgs),
    /// The control side under everything at once for N minutes (flow churn with barriers,
    /// whole-table dumps, connection floods and stray HELLOs, malformed frames, ports added
    /// and removed) while a ping crosses in standalone mode; fails unless the ping lost
    /// nothing and memory and descriptors came back.
    Soak(soak::SoakArgs),
    /// The `churn-*` scenarios on real processes, Hayate beside Open vSwitch with DPDK on the
    /// same frames and cores: each switch driven over its OpenFlow socket by ovs-ofctl (the
    /// table) and paced flow-mods with barriers (the churn); the rate during churn as a share
    /// of the rate without, the ratio to OVS-DPDK, and how soon a changed flow takes effect.
    ChurnCompare(churn::ChurnArgs),
    /// Noisy neighbours: a victim pair of hosts runs TCP, pings and request/response
    /// transactions while a neighbour on the same switch core floods 64-byte frames (one flow,
    /// then new flows), without and with ingress policing on the neighbour's port; Hayate
    /// beside the Linux bridge and Open vSwitch; the victim's figures as a share of alone.
    Noisy(noisy::NoisyArgs),
    /// TCP between VMs on two hosts through a VXLAN overlay: two Hayates (AF_PACKET or
    /// AF_XDP underlays, a vxlan port each) beside two Linux kernel VXLAN devices in Linux
    /// bridges, in one run; iperf3 Gbit/s, pings under load, Hayate ÷ kernel.
    TunnelTcp(tunnel_tcp::TunnelTcpArgs),
}

/// Runs `hayate bench`.
pub fn main(args: BenchArgs) -> Result<()> {
    match args.command {
        Some(BenchCommand::Compare(c)) => return compare::main(c),
        Some(BenchCommand::Generators(g)) => return generators::main(g),
        Some(BenchCommand::Vhost(v)) => return vhost::main(v),
        Some(BenchCommand::Soak(s)) => return soak::main(s),
        Some(BenchCommand::ChurnCompare(c)) => return churn::main(c),
        Some(BenchCommand::Noisy(n)) => return noisy::main(n),
        Some(BenchCommand::TunnelTcp(t)) => return tunnel_tcp::main(t),
        None => {}
    }
    if args.list {
        for s in scenario::all() {
            println!("{:<16} {}", s.name, s.about);
        }
        return Ok(());
    }
    if !(args.seconds > 0.0 && args.seconds <= 600.0) {
        bail!("--seconds must be in (0, 600]");
    }
    if !(args.warmup >= 0.0 && args.warmup <= 600.0) {
        bail!("--warmup must be in [0, 600]");
    }
    if !(1..=99).contains(&args.repeat) {
        bail!("--repeat must be in 1..=99");
    }
    for &s in &args.sizes {
        if !(64..=1518).contains(&s) {
            bail!("frame size {s} is out of range; use 64..=1518");
        }
    }
    let scenarios = scenario::select(&args.scenarios).map_err(anyhow::Error::msg)?;
    let core = args
        .core
        .unwrap_or_else(|| cpu::available_cores().saturating_sub(1));
    let hz = cpu::Tsc::calibrate(std::time::Duration::from_millis(100)).hz;
    let mut rows = Vec::new();
    for sc in &scenarios {
        let sizes: Vec<usize> = if !args.sizes.is_empty() {
            args.sizes.clone()
        } else if sc.size_sensitive {
            scenario::FRAME_SIZES.to_vec()
        } else {
            vec![64]
        };
        for &size in &sizes {
            let opts = runner::Opts {
                frame_len: size,
                seconds: args.seconds,
                warmup: args.warmup,
                core,
                tsc_hz: hz,
                prefix_tracking: !args.no_prefix_tracking,
                revalidate: !args.no_revalidate,
            };
            let mut runs = Vec::with_capacity(args.repeat);
            for _ in 0..args.repeat {
                runs.push(runner::run(sc, &opts)?);
            }
            let row = report::median(runs);
            if !args.json {
                eprint!(
                    "\r{:<16} {:>5} B  {:>8.2} Mpps  {:>6.1} cyc/pkt          ",
                    row.scenario, row.frame_len, row.mpps, row.cycles_per_packet
                );
            }
            rows.push(row);
        }
    }
    report::fill_ratios(&mut rows);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        eprintln!("\r{:<80}", "");
        print!("{}", report::table(&rows));
        println!(
            "(one thread pinned to core {core}; TSC {:.2} GHz; {} s windows after {} s warm-up; median of {} run(s))",
            hz / 1e9,
            args.seconds,
            args.warmup,
            args.repeat
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_vhost_benchs_configs_are_valid_hayate_configs() {
        use hayate_lab::vhost::{hayate::config, Topology};
        use std::path::Path;
        let (a, b) = (Path::new("/tmp/v/vmA.sock"), Path::new("/tmp/v/vmB.sock"));
        for topo in [Topology::Pvp, Topology::V2v] {
            let text = config(topo, &[a, b], 1, Path::new("/tmp/v/run/ctl.sock"));
            let bridges = crate::config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(bridges.len(), 1);
            assert_eq!(bridges[0].cores, vec![1]);
            let n = if topo == Topology::Pvp { 3 } else { 2 };
            assert_eq!(bridges[0].ports.len(), n, "{text}");
        }
    }

    #[test]
    fn the_tunnel_benchs_config_is_a_valid_hayate_config() {
        let text =
            hayate_lab::tunnel_tcp::hayate_config("afxdp", "a1", "c1", "192.168.77.2", 1, false);
        let bridges = crate::config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(bridges[0].ports.len(), 3, "{text}");
        assert_eq!(bridges[0].cores, vec![1]);
        let vx = &bridges[0].ports[2].2;
        let t = crate::tunnels::conf(3, "vx", vx).unwrap().unwrap();
        assert_eq!(t.spec.vni, tunnel::PerFlow::Fixed(42));
        // hayate-tap's: the TAP underlay named by the tunnel, with a static next hop.
        let text = hayate_lab::tunnel_tcp::tap_config("a1", "t0", 0, 1, true);
        let bridges = crate::config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let vx = &bridges[0].ports[2].2;
        let t = crate::tunnels::conf(3, "vx", vx).unwrap().unwrap();
        assert_eq!(t.spec.vni, tunnel::PerFlow::Fixed(42));
        assert_eq!(t.underlay.as_deref(), Some("t0"));
        assert!(t.next_hop.is_some(), "static next hop: {text}");
    }

    #[test]
    fn the_churn_benchs_config_is_a_valid_hayate_config() {
        use hayate_lab::churn::switch::hayate_config;
        use std::path::Path;
        let text = hayate_config(
            Some(Path::new("/tmp/c/f.pcap")),
            1,
            Path::new("/tmp/c/cbr.mgmt"),
        );
        let bridges = crate::config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(bridges.len(), 1);
        assert_eq!(bridges[0].cores, vec![1]);
        assert_eq!(bridges[0].ports.len(), 3, "{text}");
        assert_eq!(
            bridges[0].controllers,
            vec!["punix:/tmp/c/cbr.mgmt".to_string()]
        );
    }
}

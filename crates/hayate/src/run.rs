//! `hayate run` and `hayate check`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use clap::Args;
use packet::{Pool, PoolConfig};

use crate::config;
use crate::switch::{Switch, SwitchPort};

/// Options of `hayate run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// A TOML config of bridges, ports and flows (see docs/config.md).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Without a config: a port of the one standalone bridge, numbered in the order given
    /// (`null:`, `null:sink`, `ring:NAME`, `pcap:in=FILE`, `pcap:out=FILE`, `afxdp:IFNAME`,
    /// `afpacket:IFNAME`, `tap:NAME`).
    #[arg(long = "port", short = 'p')]
    pub ports: Vec<String>,
    /// Without a config: cores for poll threads (default: the last core).
    #[arg(long = "core")]
    pub cores: Vec<usize>,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Print port counters every this many seconds (0: only at exit).
    #[arg(long, default_value_t = 1.0)]
    pub stats_interval: f64,
    /// Frames in the packet buffer pool.
    #[arg(long, default_value_t = 65536)]
    pub pool_frames: u32,
    /// Busy-poll even when idle (lowest latency, a full core per thread). By default a thread
    /// whose queues stay empty for 200 µs sleeps until packets arrive.
    #[arg(long)]
    pub busy_poll: bool,
    /// At exit, write every port's final counters to this file as JSON:
    /// `[{"bridge", "ofport", "name", "rx_packets", "rx_bytes", ...}]`.
    #[arg(long)]
    pub stats_json: Option<PathBuf>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn bridges_from(args: &RunArgs) -> Result<Vec<config::Bridge>> {
    if let Some(path) = &args.config {
        if !args.ports.is_empty() {
            bail!(
                "--port is for running without a config; put ports in {}",
                path.display()
            );
        }
        return Ok(config::load(path)?);
    }
    if args.ports.is_empty() {
        bail!(
            "nothing to run: give --config FILE, or ports with --port SPEC (e.g. --port null: --port null:sink)"
        );
    }
    Ok(vec![config::Bridge {
        name: "br0".into(),
        cores: args.cores.clone(),
        ports: args
            .ports
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u32 + 1, s.clone(), s.clone()))
            .collect(),
        flows: Vec::new(),
    }])
}

/// Runs `hayate run`.
pub fn run(args: RunArgs) -> Result<()> {
    let bridges = bridges_from(&args)?;
    let pool = Pool::new(&PoolConfig {
        frames: args.pool_frames,
        hugepages: true,
        populate: false,
    })?;
    let last_core = crate::pin::available_cores().saturating_sub(1);
    let mut running = Vec::new();
    for b in bridges {
        let mut ports = Vec::new();
        for (no, name, spec) in &b.ports {
            let port =
                port::spec::open(spec, &pool).map_err(|e| anyhow!("bridge {}: {e}", b.name))?;
            ports.push(SwitchPort {
                ofport: *no,
                name: name.clone(),
                port,
            });
        }
        let mut sw = Switch::with_flow_mods(&b.name, pool.clone(), ports, b.flows)?;
        sw.config.idle.sleep = !args.busy_poll;
        let cores: Vec<Option<usize>> = if b.cores.is_empty() {
            vec![Some(last_core)]
        } else {
            b.cores.iter().map(|c| Some(*c)).collect()
        };
        let handle = sw.start(&cores)?;
        eprintln!(
            "hayate: bridge {} running: {} ports, {} thread(s) on cores {:?}",
            sw.name,
            sw.ports.len(),
            cores.len(),
            cores.iter().flatten().collect::<Vec<_>>()
        );
        running.push((sw, handle));
    }
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    let start = Instant::now();
    let mut last_print = Instant::now();
    while !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        // Timeouts and MAC aging run on the control side, never in the poll threads.
        for (sw, _) in running.iter_mut() {
            sw.control.tick(pipeline::dpaction::now_ms());
        }
        if let Some(d) = args.duration {
            if start.elapsed().as_secs_f64() >= d {
                break;
            }
        }
        if args.stats_interval > 0.0 && last_print.elapsed().as_secs_f64() >= args.stats_interval {
            print_stats(&running);
            last_print = Instant::now();
        }
    }
    for (_, handle) in running.iter_mut() {
        handle.stop();
    }
    print_stats(&running);
    if let Some(path) = &args.stats_json {
        write_stats_json(path, &running)?;
    }
    Ok(())
}

fn write_stats_json(path: &Path, running: &[(Switch, datapath::Running)]) -> Result<()> {
    let mut rows = Vec::new();
    for (sw, _) in running {
        for p in &sw.ports {
            let s = p.port.stats();
            rows.push(serde_json::json!({
                "bridge": sw.name,
                "ofport": p.ofport,
                "name": p.name,
                "rx_packets": s.rx_packets,
                "rx_bytes": s.rx_bytes,
                "rx_dropped": s.rx_dropped,
                "rx_errors": s.rx_errors,
                "tx_packets": s.tx_packets,
                "tx_bytes": s.tx_bytes,
                "tx_dropped": s.tx_dropped,
                "tx_errors": s.tx_errors,
            }));
        }
    }
    let text = serde_json::to_string_pretty(&rows)?;
    std::fs::write(path, text)
        .map_err(|e| anyhow!("--stats-json {}: cannot write: {e}", path.display()))
}

/// Prints every port's counters. A closed stdout (the reader went away) is not an error
/// worth stopping a switch for: the lines are dropped.
fn print_stats(running: &[(Switch, datapath::Running)]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for (sw, _) in running {
        for p in &sw.ports {
            let s = p.port.stats();
            let _ = writeln!(
                out,
                "{} port {} ({}): rx {} pkts {} bytes, tx {} pkts {} bytes, drops rx {} tx {}",
                sw.name,
                p.ofport,
                p.name,
                s.rx_packets,
                s.rx_bytes,
                s.tx_packets,
                s.tx_bytes,
                s.rx_dropped,
                s.tx_dropped
            );
        }
    }
}

/// Runs `hayate check FILE`: validates and prints the bridges.
pub fn check(path: &Path) -> Result<()> {
    let bridges = config::load(path)?;
    for b in &bridges {
        println!("bridge {} (cores {:?})", b.name, b.cores);
        for (no, name, spec) in &b.ports {
            println!("  port {no}: {name} ({spec})");
        }
        if b.flows.is_empty() {
            println!("  flows: none (standalone: L2 learning)");
        }
        for f in &b.flows {
            println!("  {}", pipeline::ofctl::format_flow_mod(f));
        }
    }
    Ok(())
}

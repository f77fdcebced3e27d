//! `hayate gen`: the traffic generator and analyzer on any port spec.
//!
//! - `send --port SPEC` — generate only;
//! - `recv --port SPEC` — receive and analyze only (probes from a `send` elsewhere);
//! - `run --tx SPEC --rx SPEC` — both in one process: loss, reordering, one-way latency;
//! - `rfc2544 --tx SPEC --rx SPEC` — throughput, latency, frame loss, back-to-back;
//! - `reflect --port SPEC` — send everything back (the far end of `run --round-trip`);
//! - `loopback` — ring to ring with nothing between: the tool's own latency floor.

mod args;
mod xdplive;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use cpu::Tsc;
use hayate_gen::engine::{self, Ports};
use hayate_gen::report::{RunReport, Sample};
use hayate_gen::rfc2544::{self, PortDut, Rfc2544Config, Rfc2544Report, STANDARD_SIZES};
use hayate_gen::{plot, template::Sizes};
use packet::{Pool, PoolConfig};
use port::Port;

use args::{OutputArgs, RateArgs, TrafficArgs};

/// Options of `hayate gen`.
#[derive(Args, Debug)]
pub struct GenArgs {
    #[command(subcommand)]
    command: Box<GenCommand>,
}

#[derive(Subcommand, Debug)]
enum GenCommand {
    /// Send traffic on a port.
    Send {
        /// The port to send on (e.g. ring:x, null:sink, pcap:out=FILE, afpacket:veth0), or
        /// xdplive:IFNAME (XDP live frames: one frame repeated at the driver's rate).
        #[arg(long)]
        port: String,
        #[command(flatten)]
        traffic: TrafficArgs,
        #[command(flatten)]
        rate: RateArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Receive on a port and analyze the probes (stops after --duration, or after --idle
    /// seconds without a packet once traffic arrived).
    Recv {
        /// The port to receive on.
        #[arg(long)]
        port: String,
        /// Longest time to listen, seconds.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
        /// Stop after this many seconds without a packet (once one arrived).
        #[arg(long, default_value_t = 1.0)]
        idle: f64,
        /// Flows to count one by one.
        #[arg(long, default_value_t = 1024)]
        flows: u32,
        /// Worker threads (each takes every threads-th receive queue).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Pin worker i to the i-th core of this list.
        #[arg(long, value_delimiter = ',')]
        cores: Vec<usize>,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Send on one port and analyze what arrives on another, in one process.
    Run {
        /// The port to send on.
        #[arg(long)]
        tx: String,
        /// The port to receive on (the same ring name as --tx gives the ring's other end).
        #[arg(long)]
        rx: String,
        /// Packets come back through a reflector: label latency as round-trip.
        #[arg(long)]
        round_trip: bool,
        #[command(flatten)]
        traffic: TrafficArgs,
        #[command(flatten)]
        rate: RateArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// RFC 2544: throughput (binary search), latency, frame loss rate, back-to-back.
    Rfc2544 {
        /// The port to send on.
        #[arg(long)]
        tx: String,
        /// The port to receive on.
        #[arg(long)]
        rx: String,
        /// Frame sizes (FCS included).
        #[arg(long, value_delimiter = ',', default_values_t = STANDARD_SIZES.to_vec())]
        sizes: Vec<usize>,
        /// Seconds per trial.
        #[arg(long, default_value_t = 2.0)]
        trial: f64,
        /// Loss accepted in a passing trial, percent.
        #[arg(long, default_value_t = 0.0)]
        loss_tolerance: f64,
        /// Line rate (default 10G, also for ring and kernel ports).
        #[arg(long, default_value = "10G")]
        line_rate: String,
        /// Stop the search when the bracket is narrower than this, percent of line rate.
        #[arg(long, default_value_t = 0.5)]
        resolution: f64,
        /// Most trials per search.
        #[arg(long, default_value_t = 16)]
        max_trials: u32,
        /// Longest back-to-back burst, in seconds of line-rate frames.
        #[arg(long, default_value_t = 0.1)]
        b2b_secs: f64,
        /// Skip the latency test.
        #[arg(long)]
        no_latency: bool,
        /// Skip the frame-loss-rate test.
        #[arg(long)]
        no_frame_loss: bool,
        /// Skip the back-to-back test.
        #[arg(long)]
        no_back_to_back: bool,
        /// Worker threads.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Seconds to wait for stragglers after each trial.
        #[arg(long, default_value_t = 0.2)]
        drain: f64,
        #[command(flatten)]
        traffic: TrafficArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Send every received frame back with Ethernet addresses swapped (the far end of
    /// `run --round-trip`).
    Reflect {
        /// The port to reflect on.
        #[arg(long)]
        port: String,
        /// Longest time to run, seconds.
        #[arg(long, default_value_t = 60.0)]
        duration: f64,
        /// Stop after this many seconds without a frame once one arrived (0: never).
        #[arg(long, default_value_t = 0.0)]
        idle: f64,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Ring to ring in this process, nothing between: the generator's own latency floor.
    Loopback {
        #[command(flatten)]
        traffic: TrafficArgs,
        /// Rate (the floor is measured below saturation; `max` measures queueing instead).
        #[arg(long, default_value = "1Mpps")]
        rate: String,
        /// Seconds.
        #[arg(long, default_value_t = 2.0)]
        duration: f64,
        /// Pin the worker to this core.
        #[arg(long)]
        core: Option<usize>,
        #[command(flatten)]
        out: OutputArgs,
    },
}

/// Runs `hayate gen`.
pub fn main(args: GenArgs) -> Result<()> {
    let tsc = Tsc::calibrate(Duration::from_millis(50));
    match *args.command {
        GenCommand::Send {
            port,
            traffic,
            rate,
            out,
        } => {
            if let Some(ifname) = port.strip_prefix("xdplive:") {
                return xdplive::send(ifname, &traffic, &rate, &out);
            }
            let traffic = traffic.traffic()?;
            let pool = pool(&out, traffic.sizes.largest())?;
            let cfg = rate.config(traffic)?;
            run_ports(&cfg, Some(&port), None, &pool, tsc, &out)
        }
        GenCommand::Recv {
            port,
            duration,
            idle,
            flows,
            threads,
            cores,
            out,
        } => {
            let pool = pool(&out, 0)?;
            let cfg = engine::RunConfig {
                traffic: hayate_gen::template::Traffic {
                    flows: flows.max(1),
                    ..Default::default()
                },
                duration,
                drain: idle,
                threads,
                cores,
                latency_kind: "one-way (valid when the sender runs on this host)".into(),
                ..Default::default()
            };
            run_ports(&cfg, None, Some(&port), &pool, tsc, &out)
        }
        GenCommand::Run {
            tx,
            rx,
            round_trip,
            traffic,
            rate,
            out,
        } => {
            let traffic = traffic.traffic()?;
            let pool = pool(&out, traffic.sizes.largest())?;
            let mut cfg = rate.config(traffic)?;
            if round_trip {
                cfg.latency_kind = "round-trip".into();
            }
            run_ports(&cfg, Some(&tx), Some(&rx), &pool, tsc, &out)
        }
        GenCommand::Reflect {
            port,
            duration,
            idle,
            out,
        } => {
            if !(duration > 0.0 && duration <= 86_400.0) {
                bail!("--duration {duration}: give more than 0 and at most 86400 seconds");
            }
            let pool = pool(&out, 0)?;
            let (p, _) = open(&port, &pool)?;
            let stop = std::sync::atomic::AtomicBool::new(false);
            let st = hayate_gen::reflect::reflect(&p, &pool, tsc, duration, idle, &stop)
                .map_err(anyhow::Error::msg)?;
            match &out.json {
                Some(dest) => write_json(&st, dest)?,
                None => println!(
                    "reflected {} frames on {port} ({} push-backs, {} left unsent at the end, {} runts)",
                    st.reflected, st.pushback, st.dropped, st.runts
                ),
            }
            Ok(())
        }
        GenCommand::Loopback {
            traffic,
            rate,
            duration,
            core,
            out,
        } => {
            let traffic = traffic.traffic()?;
            let pool = pool(&out, traffic.sizes.largest())?;
            let rate_args = RateArgs {
                rate,
                line_rate: "10G".into(),
                duration,
                count: None,
                threads: 1,
                burst: 32,
                cores: core.into_iter().collect(),
                drain: 0.1,
            };
            let cfg = rate_args.config(traffic)?;
            let name = format!("ring:gen-loopback-{}", std::process::id());
            run_ports(&cfg, Some(&name), Some(&name), &pool, tsc, &out)
        }
        GenCommand::Rfc2544 {
            tx,
            rx,
            sizes,
            trial,
            loss_tolerance,
            line_rate,
            resolution,
            max_trials,
            b2b_secs,
            no_latency,
            no_frame_loss,
            no_back_to_back,
            threads,
            drain,
            traffic,
            out,
        } => {
            let base_traffic = traffic.traffic()?;
            if base_traffic.sizes == Sizes::Imix {
                bail!("rfc2544 runs one frame size at a time; give sizes with --sizes, not --size imix");
            }
            let pool = pool(&out, sizes.iter().copied().max().unwrap_or(0))?;
            for &s in &sizes {
                hayate_gen::template::Traffic {
                    sizes: Sizes::Fixed(s),
                    ..base_traffic.clone()
                }
                .compile_for(pool.max_data())
                .map_err(|e| anyhow!("--sizes: {e}"))?;
            }
            let line_bps =
                hayate_gen::rate::parse_bps(&line_rate).map_err(|e| anyhow!("--line-rate: {e}"))?;
            if !(resolution > 0.0 && resolution <= 50.0) {
                bail!("--resolution {resolution}: give more than 0 and at most 50 percent");
            }
            let cfg = Rfc2544Config {
                sizes,
                trial_secs: trial,
                loss_tolerance_pct: loss_tolerance,
                line_bps,
                resolution_pct: resolution,
                max_trials,
                latency: !no_latency,
                frame_loss: !no_frame_loss,
                back_to_back: !no_back_to_back,
                b2b_secs,
            };
            let base = engine::RunConfig {
                traffic: base_traffic,
                threads,
                drain,
                ..Default::default()
            };
            let mut dut = PortDut::new(
                open(&tx, &pool)?,
                open(&rx, &pool)?,
                pool.clone(),
                tsc,
                base,
            );
            let progress = Progress::new(&out);
            let results = rfc2544::run(&cfg, &mut dut, &mut |line| progress.line(line))
                .map_err(anyhow::Error::msg)?;
            progress.done();
            let rep = Rfc2544Report {
                tx_port: tx,
                rx_port: rx,
                line_bps,
                trial_secs: trial,
                loss_tolerance_pct: loss_tolerance,
                results,
                tsc_ghz: tsc.hz / 1e9,
            };
            emit_rfc2544(&rep, &out)
        }
    }
}

/// The generator's pool: frames large enough for `largest_sent` (a frame size, FCS
/// included; 0 when nothing is sent) and for `--max-size`, 2 KiB unless that needs more.
/// Larger frames come fewer, so that the pool's memory stays what `--pool-frames` asks for.
fn pool(out: &OutputArgs, largest_sent: usize) -> Result<Pool> {
    if out.pool_frames < 1024 {
        bail!("--pool-frames {}: give at least 1024", out.pool_frames);
    }
    let largest = largest_sent
        .max(out.max_size.unwrap_or(0))
        .max(hayate_gen::template::MIN_FRAME);
    let frame_size =
        packet::frame_size_for(largest - hayate_gen::template::FCS).ok_or_else(|| {
            anyhow!(
                "frame size {largest}: the largest pool frames hold {} bytes",
                hayate_gen::template::MAX_FRAME
            )
        })?;
    let frames = (u64::from(out.pool_frames) * packet::FRAME_SIZE as u64 / frame_size as u64)
        .max(1024) as u32;
    Pool::new(&PoolConfig {
        frames,
        hugepages: true,
        populate: true,
        frame_size,
    })
    .context("packet pool (lower --pool-frames if memory is short)")
}

fn open(spec: &str, pool: &Pool) -> Result<(Arc<dyn Port>, String)> {
    let p = port::open(&without_priority_path(spec), pool).map_err(|e| anyhow!("{e}"))?;
    Ok((p, spec.to_string()))
}

/// A generator reads every frame itself, so its kernel ports get no priority path (which
/// only the switch's priority lane reads) unless the spec asks for one.
fn without_priority_path(spec: &str) -> String {
    let kind = spec.split(':').next().unwrap_or("");
    if matches!(kind, "afxdp" | "afpacket") && !spec.contains("prio=") {
        format!("{spec},prio=off")
    } else {
        spec.to_string()
    }
}

/// What a long run prints as it goes: one line on stderr, written over, when stderr is a
/// terminal and `--quiet` is not given.
struct Progress {
    show: bool,
}

impl Progress {
    fn new(out: &OutputArgs) -> Progress {
        Progress {
            show: !out.quiet && std::io::stderr().is_terminal(),
        }
    }

    /// Shows `text` in place of the last line.
    fn line(&self, text: &str) {
        if self.show {
            eprint!("\r{text:<100}");
            let _ = std::io::stderr().flush();
        }
    }

    /// Clears the line.
    fn done(&self) {
        if self.show {
            eprint!("\r{:<100}\r", "");
        }
    }
}

/// Sends on `tx` and receives on `rx` (either may be absent) as `cfg` says, showing the
/// rates as it goes, then prints or writes the report.
fn run_ports(
    cfg: &engine::RunConfig,
    tx: Option<&str>,
    rx: Option<&str>,
    pool: &Pool,
    tsc: Tsc,
    out: &OutputArgs,
) -> Result<()> {
    let ports = Ports {
        tx: tx.map(|spec| open(spec, pool)).transpose()?,
        rx: rx.map(|spec| open(spec, pool)).transpose()?,
    };
    let progress = Progress::new(out);
    let mut last_print = 0.0;
    let rep = engine::run(cfg, &ports, pool, tsc, &mut |s: &Sample| {
        if s.t - last_print >= 0.25 {
            last_print = s.t;
            progress.line(&format!(
                "{:>6.1} s  tx {:>9.3} Mpps {:>7.3} Gbit/s   rx {:>9.3} Mpps {:>7.3} Gbit/s",
                s.t,
                s.tx_pps / 1e6,
                s.tx_gbps,
                s.rx_pps / 1e6,
                s.rx_gbps
            ));
        }
    })
    .map_err(anyhow::Error::msg)?;
    progress.done();
    emit_run(&rep, out)
}

fn write_json<T: serde::Serialize>(v: &T, dest: &str) -> Result<()> {
    let text = serde_json::to_string_pretty(v)?;
    if dest == "-" {
        println!("{text}");
    } else {
        std::fs::write(dest, text + "\n").with_context(|| format!("cannot write --json {dest}"))?;
        eprintln!("wrote {dest}");
    }
    Ok(())
}

fn plot_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create --plot directory {}", dir.display()))
}

fn emit_run(rep: &RunReport, out: &OutputArgs) -> Result<()> {
    match &out.json {
        Some(dest) => {
            write_json(rep, dest)?;
            if dest != "-" {
                print!("{}", rep.table());
            }
        }
        None => print!("{}", rep.table()),
    }
    if let Some(dir) = &out.plot {
        plot_dir(dir)?;
        plot::rate_over_time(&dir.join("rate.svg"), &rep.samples).map_err(anyhow::Error::msg)?;
        if !rep.latency_histogram.is_empty() {
            plot::latency_histogram(&dir.join("latency.svg"), &rep.latency_histogram, "Latency")
                .map_err(anyhow::Error::msg)?;
        }
        eprintln!("plots in {}", dir.display());
    }
    Ok(())
}

fn rfc2544_table(rep: &Rfc2544Report) -> String {
    let mut o = format!(
        "RFC 2544  {} -> {}  line {:.1} Gbit/s  trials {} s  loss tolerance {} %\n",
        rep.tx_port,
        rep.rx_port,
        rep.line_bps / 1e9,
        rep.trial_secs,
        rep.loss_tolerance_pct
    );
    o.push_str(&format!(
        "{:>6} {:>10} {:>9} {:>8} {:>7} {:>10} {:>10} {:>10} {:>10} {:>12}\n",
        "bytes",
        "line Mpps",
        "Mpps",
        "Gbit/s",
        "% line",
        "lat min",
        "lat p50",
        "lat p99",
        "lat max",
        "back-to-back"
    ));
    let ns = |v: Option<u64>| v.map_or("-".to_string(), hayate_gen::report::ns);
    for r in &rep.results {
        let l = r.latency.as_ref().and_then(|t| t.latency);
        o.push_str(&format!(
            "{:>6} {:>10.3} {:>9.3} {:>8.3} {:>6.2}{} {:>10} {:>10} {:>10} {:>10} {:>12}\n",
            r.frame_size,
            r.line_pps / 1e6,
            r.throughput_mpps,
            r.throughput_gbps,
            r.throughput_pct,
            if r.generator_limited { "*" } else { " " },
            ns(l.map(|l| l.min_ns)),
            ns(l.map(|l| l.p50_ns)),
            ns(l.map(|l| l.p99_ns)),
            ns(l.map(|l| l.max_ns)),
            r.back_to_back_frames.map_or("-".into(), |b| b.to_string()),
        ));
    }
    if rep.results.iter().any(|r| r.generator_limited) {
        o.push_str("* the generator could not offer a higher rate: the figure is a lower bound for the device\n");
    }
    for r in rep.results.iter().filter(|r| !r.frame_loss.is_empty()) {
        o.push_str(&format!("frame loss {:>5} B:", r.frame_size));
        for p in &r.frame_loss {
            o.push_str(&format!("  {:.0}%→{:.3}%", p.load_pct, p.loss_pct));
        }
        o.push('\n');
    }
    o
}

fn emit_rfc2544(rep: &Rfc2544Report, out: &OutputArgs) -> Result<()> {
    match &out.json {
        Some(dest) => {
            write_json(rep, dest)?;
            if dest != "-" {
                print!("{}", rfc2544_table(rep));
            }
        }
        None => print!("{}", rfc2544_table(rep)),
    }
    if let Some(dir) = &out.plot {
        plot_dir(dir)?;
        plot::throughput(&dir.join("throughput.svg"), &rep.results, rep.line_bps)
            .map_err(anyhow::Error::msg)?;
        for r in &rep.results {
            if let Some(t) = &r.latency {
                if !t.latency_histogram.is_empty() {
                    plot::latency_histogram(
                        &dir.join(format!("latency-{}.svg", r.frame_size)),
                        &t.latency_histogram,
                        &format!("Latency at throughput, {} B frames", r.frame_size),
                    )
                    .map_err(anyhow::Error::msg)?;
                }
            }
        }
        eprintln!("plots in {}", dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::without_priority_path;

    #[test]
    fn kernel_ports_of_a_generator_have_no_priority_path_unless_asked() {
        assert_eq!(without_priority_path("afxdp:v0"), "afxdp:v0,prio=off");
        assert_eq!(
            without_priority_path("afpacket:v0,queues=2"),
            "afpacket:v0,queues=2,prio=off"
        );
        assert_eq!(
            without_priority_path("afpacket:v0,prio=on"),
            "afpacket:v0,prio=on"
        );
        assert_eq!(without_priority_path("ring:x"), "ring:x");
        assert_eq!(without_priority_path("xdplive:v0"), "xdplive:v0");
    }
}

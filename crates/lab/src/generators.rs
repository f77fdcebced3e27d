//! `hayate bench generators`: packet generators side by side on one veth pair — Hayate's own
//! (`hayate gen send` on AF_XDP, on AF_PACKET and with XDP live frames), trafgen, and dpdk-testpmd txonly on
//! net_af_xdp and net_af_packet vdevs — each in turn on the same pinned core, the same frames,
//! counted by the receiving end's interface counter.
//!
//! ```text
//! netns <p>G: <p>g0 ──veth── <p>g1 :netns <p>K (a sink: frames to a MAC it does not own)
//! ```
//!
//! The sink receives through NAPI (`ethtool -K g1 gro on`) for every generator: XDP live
//! frames reach a veth only that way.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use super::compare::generator::{Generator, GENERATORS};
use super::compare::topo::{in_ns, run, Topo};
use crate::bench;

/// Options of `hayate bench generators`.
#[derive(Args, Debug, Clone)]
pub struct GeneratorsArgs {
    /// Generators to measure (default: all that are installed): hayate-afxdp,
    /// hayate-afpacket, hayate-xdplive, trafgen, testpmd-afxdp, testpmd-afpacket.
    #[arg(long, value_delimiter = ',')]
    pub generators: Vec<String>,
    /// Frame sizes, bytes with FCS.
    #[arg(long, value_delimiter = ',', default_value = "64")]
    pub sizes: Vec<usize>,
    /// Measured window per run, seconds.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Sending before each window, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Rounds over all generators; the median of each generator's rounds is reported
    /// (rounds interleave the generators, so a noisy moment hits them alike).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Core every generator is pinned to.
    #[arg(long, default_value_t = 1)]
    pub core: usize,
    /// Core where a generator's idle helper thread (DPDK's main lcore) may sleep.
    #[arg(long, default_value_t = 0)]
    pub other_core: usize,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One generator at one frame size.
#[derive(Debug, Clone, Serialize)]
pub struct GenResult {
    /// Generator name.
    pub generator: String,
    /// Frame size in bytes, FCS included.
    pub frame: usize,
    /// "ok", "skipped: …" or "failed: …".
    pub status: String,
    /// Packets per second the receiving end counted, one per round, in ascending order.
    pub rounds_pps: Vec<f64>,
    /// Median of `rounds_pps`.
    pub pps: f64,
    /// Packets per second the sending interface counted (median round).
    pub sent_pps: f64,
    /// CPU the generator used, percent of one core (median round; kernel time on its
    /// behalf in softirq context is not always charged to it).
    pub cpu_pct: Option<f64>,
}

/// A veth pair between two namespaces, removed on drop.
struct Pair {
    ns_g: String,
    ns_k: String,
    g0: String,
    g1: String,
}

impl Pair {
    fn up(prefix: &str) -> Result<Pair> {
        let p = Pair {
            ns_g: format!("{prefix}G"),
            ns_k: format!("{prefix}K"),
            g0: format!("{prefix}g0"),
            g1: format!("{prefix}g1"),
        };
        for ns in [&p.ns_g, &p.ns_k] {
            run(Command::new("ip").args(["netns", "add", ns]))?;
            run(&mut in_ns(
                ns,
                &[
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            ))?;
        }
        run(Command::new("ip").args([
            "link", "add", &p.g0, "netns", &p.ns_g, "type", "veth", "peer", "name", &p.g1, "netns",
            &p.ns_k,
        ]))?;
        run(&mut in_ns(&p.ns_g, &["ip", "link", "set", &p.g0, "up"]))?;
        run(&mut in_ns(&p.ns_k, &["ip", "link", "set", &p.g1, "up"]))?;
        // The sink receives through NAPI (GRO on), the same for every generator: XDP live
        // frames reach a veth only that way, and the others' frames take the same path.
        run(&mut in_ns(&p.ns_k, &["ethtool", "-K", &p.g1, "gro", "on"]))?;
        Ok(p)
    }

    fn counter(&self, ns: &str, dev: &str, name: &str) -> Result<u64> {
        let out = run(&mut in_ns(
            ns,
            &["cat", &format!("/sys/class/net/{dev}/statistics/{name}")],
        ))?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .with_context(|| format!("reading {name} of {dev}"))
    }

    fn received(&self) -> Result<u64> {
        self.counter(&self.ns_k, &self.g1, "rx_packets")
    }

    fn sent(&self) -> Result<u64> {
        self.counter(&self.ns_g, &self.g0, "tx_packets")
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.ns_g, &self.ns_k] {
            Topo::kill_all(ns);
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .output();
        }
    }
}

struct Round {
    pps: f64,
    sent_pps: f64,
    cpu_pct: Option<f64>,
}

fn one_round(
    pair: &Pair,
    g: Generator,
    frame: usize,
    args: &GeneratorsArgs,
    dir: &std::path::Path,
) -> Result<Round> {
    let secs = args.warmup + args.seconds + 2.0;
    let mut child = g.start(
        &pair.ns_g,
        &pair.g0,
        frame,
        args.core,
        args.other_core,
        secs,
        dir,
    )?;
    let result = (|| {
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
        if let Some(status) = child.try_wait()? {
            let err = std::fs::read_to_string(dir.join(format!("{}-{frame}.err", g.name())))
                .unwrap_or_default();
            bail!("{} exited early ({status}): {}", g.name(), err.trim());
        }
        let c0 = super::compare::measure::cpu_seconds(child.id());
        let (r0, s0, w0) = (pair.received()?, pair.sent()?, Instant::now());
        std::thread::sleep(Duration::from_secs_f64(args.seconds));
        let (r1, s1, w) = (pair.received()?, pair.sent()?, w0.elapsed().as_secs_f64());
        let c1 = super::compare::measure::cpu_seconds(child.id());
        Ok(Round {
            pps: (r1 - r0) as f64 / w,
            sent_pps: (s1 - s0) as f64 / w,
            cpu_pct: c0.zip(c1).map(|(a, b)| 100.0 * (b - a) / w),
        })
    })();
    // SIGINT reaches the generator: `ip netns exec` runs it in place.
    crate::sys::proc::terminate(&mut child, libc::SIGINT);
    // trafgen forks a sender that outlives its parent: nothing else runs in the namespace.
    Topo::kill_all(&pair.ns_g);
    std::thread::sleep(Duration::from_millis(300));
    result
}

/// Runs `hayate bench generators`.
pub fn main(args: GeneratorsArgs) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("bench generators builds network namespaces: run it as root");
    }
    bench::check_window(args.seconds, args.warmup)?;
    bench::check_repeat(args.repeat, 100)?;
    bench::check_sizes(&args.sizes)?;
    let gens = bench::chosen(
        &args.generators,
        || GENERATORS.to_vec(),
        Generator::from_name,
    )?;
    let dir = bench::workdir(None, "gens")?;
    let pair = Pair::up(&format!("hg{}", std::process::id() % 100_000))?;
    let mut results = Vec::new();
    for &frame in &args.sizes {
        let mut rounds: Vec<Vec<Round>> = gens.iter().map(|_| Vec::new()).collect();
        let mut status: Vec<String> = gens
            .iter()
            .map(|g| match g.unavailable() {
                Some(why) => format!("skipped: {why}"),
                None => "ok".into(),
            })
            .collect();
        for round in 0..args.repeat {
            for (i, &g) in gens.iter().enumerate() {
                if status[i] != "ok" {
                    continue;
                }
                match one_round(&pair, g, frame, &args, &dir) {
                    Ok(r) => {
                        eprintln!(
                            "hayate: {:<16} {frame:>4} B round {}: {:.3} Mpps received, {:.3} sent",
                            g.name(),
                            round + 1,
                            r.pps / 1e6,
                            r.sent_pps / 1e6
                        );
                        rounds[i].push(r);
                    }
                    Err(e) => {
                        eprintln!("hayate: {}: {e:#}", g.name());
                        status[i] = format!("failed: {e:#}");
                    }
                }
            }
        }
        for (i, &g) in gens.iter().enumerate() {
            let rs = &mut rounds[i];
            rs.sort_by(|a, b| a.pps.total_cmp(&b.pps));
            let mid = rs.get(rs.len() / 2);
            results.push(GenResult {
                generator: g.name().into(),
                frame,
                status: status[i].clone(),
                rounds_pps: rs.iter().map(|r| r.pps).collect(),
                pps: mid.map_or(0.0, |r| r.pps),
                sent_pps: mid.map_or(0.0, |r| r.sent_pps),
                cpu_pct: mid.and_then(|r| r.cpu_pct),
            });
        }
    }
    drop(pair);
    print!("{}", table(&results));
    bench::write_json(args.json.as_deref(), &results)?;
    Ok(())
}

/// The results as a table, each rate also as a ratio to trafgen's and to the better of the
/// two dpdk-testpmd variants at the same frame size.
fn table(results: &[GenResult]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<17} {:>5} {:>10} {:>10} {:>6} {:>10} {:>10}  status",
        "generator", "frame", "recv Mpps", "sent Mpps", "cpu %", "x trafgen", "x testpmd"
    );
    let best = |frame: usize, names: &[&str]| {
        results
            .iter()
            .filter(|r| r.frame == frame && r.status == "ok" && names.contains(&&*r.generator))
            .map(|r| r.pps)
            .fold(0.0, f64::max)
    };
    for r in results {
        let tg = best(r.frame, &["trafgen"]);
        let tp = best(r.frame, &["testpmd-afxdp", "testpmd-afpacket"]);
        let ratio = |base: f64| {
            if base > 0.0 && r.status == "ok" {
                format!("{:.2}", r.pps / base)
            } else {
                "-".into()
            }
        };
        let _ = writeln!(
            s,
            "{:<17} {:>5} {:>10.3} {:>10.3} {:>6} {:>10} {:>10}  {}",
            r.generator,
            r.frame,
            r.pps / 1e6,
            r.sent_pps / 1e6,
            r.cpu_pct.map_or("-".into(), |c| format!("{c:.0}")),
            ratio(tg),
            ratio(tp),
            r.status
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(g: &str, pps: f64, status: &str) -> GenResult {
        GenResult {
            generator: g.into(),
            frame: 64,
            status: status.into(),
            rounds_pps: vec![pps],
            pps,
            sent_pps: pps,
            cpu_pct: Some(100.0),
        }
    }

    #[test]
    fn ratios_are_taken_to_trafgen_and_the_better_testpmd() {
        let t = table(&[
            row("hayate-afxdp", 6e6, "ok"),
            row("trafgen", 2e6, "ok"),
            row("testpmd-afxdp", 4e6, "ok"),
            row("testpmd-afpacket", 3e6, "ok"),
            row("hayate-afpacket", 0.0, "failed: x"),
        ]);
        let line = t.lines().find(|l| l.starts_with("hayate-afxdp")).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[5], "3.00", "{line}");
        assert_eq!(cols[6], "1.50", "{line}");
        let failed = t
            .lines()
            .find(|l| l.starts_with("hayate-afpacket"))
            .unwrap();
        assert!(failed.contains(" - "), "{failed}");
    }
}

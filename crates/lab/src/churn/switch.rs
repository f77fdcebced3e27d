//! The switches of `bench churn-compare`, each started on the same frames and cores: port 1
//! replays the pcap of the flows without end, ports 2 and 3 are sinks; the forwarding on the
//! switch core, everything else on the main core; an OpenFlow management socket (a Unix
//! socket) that ovs-ofctl and the bench's own connections drive alike.
//!
//! - Hayate: `hayate run --config FILE --busy-poll`, ports `pcap:in=FILE,loops=0` and
//!   `null:sink`, controller listener `punix:` in its run folder.
//! - Open vSwitch with DPDK: the private instance of [`crate::ovs_dpdk`], ports net_pcap
//!   (`infinite_rx=1`) and net_null, its bridge's `.mgmt` socket (as churn-ovs.sh).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::ovs_dpdk::{self, Ovs};
use crate::sys::guard::nap;
use crate::sys::proc::{Proc, Spawn};

/// What every switch is started with.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Prefix of DPDK file prefixes and the namespace (unique to this process and run).
    pub tag: String,
    /// Core of the forwarding.
    pub switch_core: usize,
    /// Core of everything else (and of this process).
    pub main_core: usize,
    /// The frames' pcap.
    pub pcap: PathBuf,
    /// The private hugetlbfs, when mounted.
    pub huge: Option<PathBuf>,
    /// The `hayate` binary.
    pub hayate: PathBuf,
    /// How long any child may live.
    pub lifetime: Duration,
}

/// A switch under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sw {
    /// Hayate.
    Hayate,
    /// Open vSwitch with DPDK.
    OvsDpdk,
}

/// Every switch, in the order they take turns.
pub const ALL: [Sw; 2] = [Sw::Hayate, Sw::OvsDpdk];

impl Sw {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Sw::Hayate => "hayate",
            Sw::OvsDpdk => "ovs-dpdk",
        }
    }

    /// Looks a switch up by name.
    pub fn from_name(n: &str) -> Result<Sw> {
        crate::bench::by_name(ALL, |s| s.name(), "switch", n)
    }
}

/// A running switch; dropping it stops it.
pub enum Running {
    /// Hayate's process, its binary and run folder (for `hayate ctl`).
    Hayate(Proc, PathBuf, PathBuf),
    /// Open vSwitch's daemons.
    Ovs(Ovs),
}

/// The bridge of Hayate's config.
const BRIDGE: &str = "cbr";

/// Hayate's TOML config: ports 1 `in` (the pcap, replayed forever; left out without
/// `pcap`), 2 `out` and 3 `alt` (sinks), no flows, the controller listener on `mgmt`.
pub fn hayate_config(pcap: Option<&Path>, switch_core: usize, mgmt: &Path) -> String {
    let mut s = format!(
        "[[bridge]]\nname = \"{BRIDGE}\"\ncores = [{switch_core}]\nfail_mode = \"secure\"\n\
         controllers = [\"punix:{}\"]\n",
        mgmt.display()
    );
    let source = pcap.map(|p| (1, "in", source_spec(p)));
    let sinks = [
        (2, "out", "null:sink".into()),
        (3, "alt", "null:sink".into()),
    ];
    for (no, name, spec) in source.into_iter().chain(sinks) {
        s.push_str(&format!(
            "\n[[bridge.port]]\nname = \"{name}\"\nspec = \"{spec}\"\nofport = {no}\n"
        ));
    }
    s
}

/// Hayate's spec of the traffic's port.
fn source_spec(pcap: &Path) -> String {
    format!("pcap:in={},loops=0", pcap.display())
}

/// Open vSwitch's port `no` (`type=dpdk`, DPDK device arguments).
fn ovs_port(
    name: &'static str,
    no: u32,
    devargs: String,
) -> (&'static str, u32, &'static str, Vec<String>) {
    (
        name,
        no,
        "dpdk",
        vec![format!("options:dpdk-devargs={devargs}")],
    )
}

impl Running {
    /// Starts `sw` with its logs and sockets in `dir`; without `source`, the traffic's port
    /// is left out until [`Running::add_source`].
    pub fn start(sw: Sw, ctx: &Ctx, dir: &Path, source: bool) -> Result<Running> {
        std::fs::create_dir_all(dir)?;
        let mut r = match sw {
            Sw::Hayate => {
                let run = dir.join("run");
                std::fs::create_dir_all(&run)?;
                let cfg = dir.join("hayate.toml");
                std::fs::write(
                    &cfg,
                    hayate_config(
                        source.then_some(ctx.pcap.as_path()),
                        ctx.switch_core,
                        &dir.join("cbr.mgmt"),
                    ),
                )?;
                let p = Spawn::new("hayate", &ctx.hayate.to_string_lossy())
                    .args(["run", "--config"])
                    .args([cfg.to_string_lossy(), "--run-dir".into()])
                    .args([run.to_string_lossy()])
                    .args(["--busy-poll", "--stats-interval", "0"])
                    .cpus(&[ctx.main_core])
                    .lifetime(ctx.lifetime)
                    .start(dir)?;
                Running::Hayate(p, ctx.hayate.clone(), run)
            }
            Sw::OvsDpdk => {
                let Some(huge) = &ctx.huge else {
                    bail!("Open vSwitch with DPDK needs the private hugetlbfs");
                };
                let setup = ovs_dpdk::Setup {
                    tag: ctx.tag.clone(),
                    pmd_core: ctx.switch_core,
                    main_core: ctx.main_core,
                    lifetime: ctx.lifetime,
                    netns: None,
                };
                let ovs = Ovs::start(&setup, &dir.join("ovs"), huge)?;
                ovs.vsctl(&[
                    "set",
                    "bridge",
                    ovs_dpdk::BRIDGE,
                    "protocols=OpenFlow13",
                    "fail_mode=secure",
                ])?;
                let mut ports = vec![
                    ovs_port("out", 2, "net_null1,no-rx=1".into()),
                    ovs_port("alt", 3, "net_null2,no-rx=1".into()),
                ];
                if source {
                    ports.insert(0, ovs_source(ctx));
                }
                ovs.add_ports(&ports)?;
                Running::Ovs(ovs)
            }
        };
        let mgmt = r.mgmt(dir);
        for _ in 0..300 {
            if mgmt.exists() {
                return Ok(r);
            }
            r.alive()?;
            nap(Duration::from_millis(100))?;
        }
        bail!("{} never opened {}", sw.name(), mgmt.display())
    }

    /// Adds the traffic's port (1) to a switch started without it.
    pub fn add_source(&self, ctx: &Ctx) -> Result<()> {
        match self {
            Running::Hayate(_, bin, run) => crate::sys::proc::run(
                Command::new(bin)
                    .arg("ctl")
                    .arg("--run-dir")
                    .arg(run)
                    .args([
                        BRIDGE,
                        "add-port",
                        &source_spec(&ctx.pcap),
                        "ofport=1",
                        "name=in",
                    ]),
                Duration::from_secs(30),
            )
            .map(|_| ()),
            Running::Ovs(o) => o.add_ports(&[ovs_source(ctx)]),
        }
    }

    /// The OpenFlow management socket (in `dir`, the folder it was started with).
    pub fn mgmt(&self, dir: &Path) -> PathBuf {
        match self {
            Running::Hayate(..) => dir.join("cbr.mgmt"),
            Running::Ovs(o) => o.mgmt(),
        }
    }

    /// Fails when it has exited.
    pub fn alive(&mut self) -> Result<()> {
        match self {
            Running::Hayate(p, ..) => p.alive(),
            Running::Ovs(o) => o.alive(),
        }
    }

    /// Whether it is done warming up beyond a steady rate: Open vSwitch's revalidators raise
    /// its datapath flow limit step by step, so it must be well above the flows it holds
    /// (as churn-ovs.sh waits); Hayate has no such limit.
    pub fn settled(&self) -> Result<bool> {
        match self {
            Running::Hayate(..) => Ok(true),
            Running::Ovs(o) => Ok(parse_upcall_show(&o.appctl(&["upcall/show"])?)
                .is_some_and(|(cur, limit)| limit > cur + 1000)),
        }
    }

    /// Writes what it says about itself into `dir` (Hayate's poll-thread counters: cache
    /// flushes, megaflows revalidation removed, upcalls; Open vSwitch's PMD statistics and
    /// datapath flow counts), each file named `NAME.WHAT.txt`.
    pub fn keep_diagnostics(&self, dir: &Path, name: &str) {
        let put = |what: &str, text: Result<String>| {
            if let Ok(t) = text {
                let _ = std::fs::write(dir.join(format!("{name}.{what}.txt")), t);
            }
        };
        match self {
            Running::Hayate(_, bin, run) => put(
                "dump-pmd",
                crate::sys::proc::run(
                    Command::new(bin)
                        .arg("ctl")
                        .arg("--run-dir")
                        .arg(run)
                        .args([BRIDGE, "dump-pmd"]),
                    Duration::from_secs(10),
                ),
            ),
            Running::Ovs(o) => {
                put("pmd-stats", o.appctl(&["dpif-netdev/pmd-stats-show"]));
                put("upcall", o.appctl(&["upcall/show"]));
            }
        }
    }
}

/// Open vSwitch's traffic port: net_pcap replaying the pcap without end.
fn ovs_source(ctx: &Ctx) -> (&'static str, u32, &'static str, Vec<String>) {
    ovs_port(
        "in",
        1,
        format!("net_pcap0,rx_pcap={},infinite_rx=1", ctx.pcap.display()),
    )
}

/// `(current, limit)` datapath flows in `ovs-appctl upcall/show`.
pub fn parse_upcall_show(text: &str) -> Option<(u64, u64)> {
    let l = text.lines().find(|l| l.trim_start().starts_with("flows"))?;
    let num = |key: &str| -> Option<u64> {
        let at = l.find(key)? + key.len();
        l[at..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Some((num("(current")?, num("(limit")?))
}

/// Installs `flows_file` (ovs-ofctl syntax, one entry a line) on the switch at `mgmt` with
/// `ovs-ofctl -O OpenFlow13 add-flows` after emptying its table; returns the seconds it took.
pub fn install(mgmt: &Path, flows_file: &Path) -> Result<f64> {
    let target = format!("unix:{}", mgmt.display());
    let ofctl = |args: &[&str], secs: u64| {
        crate::sys::proc::run(
            Command::new("ovs-ofctl")
                .args(["-O", "OpenFlow13"])
                .args(args),
            Duration::from_secs(secs),
        )
    };
    ofctl(&["del-flows", &target], 60)?;
    let t = std::time::Instant::now();
    ofctl(&["add-flows", &target, &flows_file.to_string_lossy()], 600)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Deletes every rule the churn may have left (`priority=50,udp,nw_dst=192.168.X.Y`); the
/// table's own rules match no `nw_dst` and stay.
pub fn clean_churn(mgmt: &Path) -> Result<()> {
    crate::sys::proc::run(
        Command::new("ovs-ofctl").args([
            "-O",
            "OpenFlow13",
            "del-flows",
            &format!("unix:{}", mgmt.display()),
            "udp,nw_dst=192.168.0.0/16",
        ]),
        Duration::from_secs(60),
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upcall_show_gives_flows_and_limit() {
        let t = "system@ovs-netdev:\n  flows         : (current 100012) (avg 99000) (max 100500) \
                 (limit 200000)\n  dump duration : 120ms\n";
        assert_eq!(parse_upcall_show(t), Some((100_012, 200_000)));
        assert_eq!(parse_upcall_show("nothing"), None);
        assert_eq!(Sw::from_name("ovs-dpdk").unwrap(), Sw::OvsDpdk);
        assert!(Sw::from_name("ovs").is_err());
        let c = hayate_config(Some(Path::new("/t/f.pcap")), 1, Path::new("/t/cbr.mgmt"));
        assert!(c.contains("spec = \"pcap:in=/t/f.pcap,loops=0\""), "{c}");
        assert!(
            c.contains("punix:/t/cbr.mgmt") && c.contains("ofport = 3"),
            "{c}"
        );
        let c = hayate_config(None, 1, Path::new("/t/cbr.mgmt"));
        assert!(!c.contains("pcap") && !c.contains("ofport = 1"), "{c}");
    }
}

//! The programs that send the packet-rate tests' frames: Hayate's own generator (`hayate gen
//! send` on an AF_XDP or AF_PACKET port, or with XDP live frames), trafgen (Debian netsniff-ng), and DPDK's
//! dpdk-testpmd in txonly mode on a net_af_xdp or net_af_packet vdev. Each sends UDP frames
//! from host A's address to a destination behind B's MAC that B drops (how: `topo::Sink`).

use std::path::Path;
use std::process::{Child, Stdio};

use anyhow::{Context, Result};

use super::topo::{in_ns, run, IP_A, IP_SINK, MAC_A, MAC_B};

/// One packet generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generator {
    /// `hayate gen send` on an AF_XDP port (copy mode on a veth).
    HayateAfxdp,
    /// `hayate gen send` on an AF_PACKET port.
    HayateAfpacket,
    /// `hayate gen send` with XDP live frames (`xdplive:`; the receiving veth must use NAPI:
    /// an XDP program or GRO on).
    HayateXdpLive,
    /// trafgen (Debian netsniff-ng): AF_PACKET tx ring.
    Trafgen,
    /// dpdk-testpmd `--forward-mode=txonly` on a net_af_xdp vdev.
    TestpmdAfxdp,
    /// dpdk-testpmd `--forward-mode=txonly` on a net_af_packet vdev.
    TestpmdAfpacket,
}

/// Every generator, in the order `hayate bench generators` measures them.
pub const GENERATORS: [Generator; 6] = [
    Generator::HayateAfxdp,
    Generator::HayateAfpacket,
    Generator::HayateXdpLive,
    Generator::Trafgen,
    Generator::TestpmdAfxdp,
    Generator::TestpmdAfpacket,
];

/// Private hugetlbfs mount for dpdk-testpmd's memory.
const HUGE_DIR: &str = "/run/hayate-bench-huge";
/// 2 MiB huge pages to have reserved for dpdk-testpmd (raised to, never lowered).
const HUGE_PAGES: u64 = 256;

impl Generator {
    /// The generator named `name`.
    pub fn from_name(name: &str) -> Result<Generator> {
        crate::bench::by_name(GENERATORS, |g| g.name(), "generator", name)
    }

    /// Its name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Generator::HayateAfxdp => "hayate-afxdp",
            Generator::HayateAfpacket => "hayate-afpacket",
            Generator::HayateXdpLive => "hayate-xdplive",
            Generator::Trafgen => "trafgen",
            Generator::TestpmdAfxdp => "testpmd-afxdp",
            Generator::TestpmdAfpacket => "testpmd-afpacket",
        }
    }

    /// The program it needs on PATH and the Debian packages that bring it (none for Hayate's
    /// own generator, which is this binary).
    pub fn needs(self) -> Option<(&'static str, &'static str)> {
        match self {
            Generator::HayateAfxdp | Generator::HayateAfpacket | Generator::HayateXdpLive => None,
            Generator::Trafgen => Some(("trafgen", "netsniff-ng")),
            Generator::TestpmdAfxdp => Some((
                "dpdk-testpmd",
                "dpdk dpdk-dev librte-mempool-ring23 librte-net-af-xdp23",
            )),
            Generator::TestpmdAfpacket => Some((
                "dpdk-testpmd",
                "dpdk dpdk-dev librte-mempool-ring23 librte-net-af-packet23",
            )),
        }
    }

    /// Why this generator cannot run here, if it cannot (a missing program or DPDK driver).
    pub fn unavailable(self) -> Option<String> {
        let (bin, pkgs) = self.needs()?;
        let on_path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).exists()))
            .unwrap_or(false);
        let pmd = match self {
            Generator::TestpmdAfxdp => Some("librte_net_af_xdp.so"),
            Generator::TestpmdAfpacket => Some("librte_net_af_packet.so"),
            _ => None,
        };
        let pmd_missing = pmd.is_some_and(|lib| {
            !std::fs::read_dir("/usr/lib/x86_64-linux-gnu/dpdk")
                .into_iter()
                .flatten()
                .flatten()
                .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
                .any(|f| f.file_name().to_string_lossy().starts_with(lib))
        });
        (!on_path || pmd_missing).then(|| format!("not installed (apt-get install -y {pkgs})"))
    }

    /// Starts sending `frame`-byte frames (FCS included) on `dev` in namespace `ns` as fast
    /// as it can, pinned to `core`, for at most `seconds`. `other_core` is where a DPDK main
    /// lcore may sleep. Logs go to `dir`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        self,
        ns: &str,
        dev: &str,
        frame: usize,
        core: usize,
        other_core: usize,
        seconds: f64,
        dir: &Path,
    ) -> Result<Child> {
        let err = std::fs::File::create(dir.join(format!("{}-{frame}.err", self.name())))?;
        let core_s = core.to_string();
        let cmd = match self {
            Generator::HayateAfxdp | Generator::HayateAfpacket | Generator::HayateXdpLive => {
                let kind = match self {
                    Generator::HayateAfxdp => "afxdp",
                    Generator::HayateAfpacket => "afpacket",
                    _ => "xdplive",
                };
                let exe = std::env::current_exe().context("finding the hayate binary")?;
                let json = dir.join(format!("{}-{frame}.json", self.name()));
                let (size, secs) = (frame.to_string(), format!("{seconds:.1}"));
                let port = format!("{kind}:{dev}");
                in_ns(
                    ns,
                    &[
                        &exe.to_string_lossy(),
                        "gen",
                        "send",
                        "--port",
                        &port,
                        "--size",
                        &size,
                        "--src-mac",
                        MAC_A,
                        "--dst-mac",
                        MAC_B,
                        "--src-ip",
                        IP_A,
                        "--dst-ip",
                        IP_SINK,
                        "--dport",
                        "9",
                        "--rate",
                        "max",
                        "--duration",
                        &secs,
                        "--cores",
                        &core_s,
                        "--quiet",
                        "--json",
                        &json.to_string_lossy(),
                    ],
                )
            }
            Generator::Trafgen => {
                // Without the 4-byte FCS, which the wire does not carry to software.
                let payload = frame - 4 - 42;
                let cfg = dir.join(format!("trafgen-{frame}.cfg"));
                std::fs::write(
                    &cfg,
                    format!(
                        "{{ eth(da={MAC_B}, sa={MAC_A}, type=0x0800),\n  \
                         ipv4(saddr={IP_A}, daddr={IP_SINK}, ttl=64, df),\n  \
                         udp(sport=1024, dport=9),\n  fill(0x5a, {payload}) }}\n"
                    ),
                )?;
                in_ns(
                    ns,
                    &[
                        "taskset",
                        "-c",
                        &core_s,
                        "trafgen",
                        "--dev",
                        dev,
                        "--conf",
                        &cfg.to_string_lossy(),
                        "--cpus",
                        "1",
                        "--no-sock-mem",
                        "--no-cpu-stats",
                    ],
                )
            }
            Generator::TestpmdAfxdp | Generator::TestpmdAfpacket => {
                let vdev = if self == Generator::TestpmdAfxdp {
                    format!("net_af_xdp0,iface={dev},start_queue=0,queue_count=1")
                } else {
                    format!("net_af_packet0,iface={dev},qpairs=1,qdisc_bypass=1")
                };
                let lcores = format!("{core},{other_core}");
                let main = other_core.to_string();
                testpmd(
                    ns,
                    &["-l", &lcores, "--main-lcore", &main],
                    "gen",
                    &[vdev],
                    &[
                        "--forward-mode=txonly",
                        &format!("--eth-peer=0,{MAC_B}"),
                        &format!("--tx-ip={IP_A},{IP_SINK}"),
                        &format!("--txpkts={}", frame - 4),
                        "--total-num-mbufs=8192",
                    ],
                )?
            }
        };
        let mut cmd = cmd;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {}", self.name()))
    }
}

/// `dpdk-testpmd` in namespace `ns`, one forwarding core, started at once: huge pages
/// reserved first, then the EAL settings every use here shares (no PCI, in memory, the private
/// hugetlbfs, 256 MiB, a file prefix unique to `tag` and this process), the given lcore
/// arguments and vdevs, and after `--` the `app` arguments and a stats period (without one
/// testpmd reads stdin and stops at its end).
pub(crate) fn testpmd(
    ns: &str,
    lcores: &[&str],
    tag: &str,
    vdevs: &[String],
    app: &[&str],
) -> Result<std::process::Command> {
    hugepages()?;
    let prefix = format!("hayate{tag}{}", std::process::id());
    let mut args: Vec<String> = vec!["dpdk-testpmd".into()];
    args.extend(lcores.iter().map(|a| a.to_string()));
    for a in [
        "--no-pci",
        "--in-memory",
        "--huge-dir",
        HUGE_DIR,
        "--file-prefix",
    ] {
        args.push(a.into());
    }
    args.extend([prefix, "-m".into(), "256".into()]);
    args.extend(vdevs.iter().map(|v| format!("--vdev={v}")));
    args.push("--".into());
    args.extend(app.iter().map(|a| a.to_string()));
    for a in ["--auto-start", "--nb-cores=1", "--stats-period", "60"] {
        args.push(a.into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Ok(in_ns(ns, &args))
}

/// Reserves huge pages (only ever raising the count) and mounts a private hugetlbfs for
/// dpdk-testpmd.
fn hugepages() -> Result<()> {
    let path = "/proc/sys/vm/nr_hugepages";
    let cur: u64 = std::fs::read_to_string(path)?.trim().parse().unwrap_or(0);
    if cur < HUGE_PAGES {
        std::fs::write(path, HUGE_PAGES.to_string()).context("reserving huge pages")?;
    }
    std::fs::create_dir_all(HUGE_DIR)?;
    let mounted = std::fs::read_to_string("/proc/mounts")?
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(HUGE_DIR));
    if !mounted {
        run(std::process::Command::new("mount").args([
            "-t",
            "hugetlbfs",
            "-o",
            "pagesize=2M",
            "nodev",
            HUGE_DIR,
        ]))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generator_is_found_by_its_name() {
        for g in GENERATORS {
            assert_eq!(Generator::from_name(g.name()).unwrap(), g);
        }
        let e = Generator::from_name("pktgen").unwrap_err().to_string();
        assert!(e.contains("trafgen") && e.contains("hayate-afxdp"), "{e}");
    }

    #[test]
    fn hayate_needs_nothing_installed() {
        assert_eq!(Generator::HayateAfxdp.unavailable(), None);
        assert_eq!(Generator::HayateAfpacket.unavailable(), None);
        assert_eq!(Generator::HayateXdpLive.unavailable(), None);
    }
}

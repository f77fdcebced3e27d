//! The noisy host's flood: 64-byte UDP frames from host C to host D at the highest rate the
//! generator reaches (`hayate gen send` on AF_XDP or AF_PACKET), one flow or many new ones
//! (the UDP source port counting up over `flows` values), and what it offered and what
//! crossed the switch. Host D drops every frame at its interface's ingress (nftables), the
//! first thing its kernel does, so the sink costs the switch's core little.

use std::path::Path;
use std::process::{Child, Stdio};

use anyhow::{Context, Result};

use crate::compare::topo::{in_ns, Host, Topo};

/// The noisy host's generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NoiseGen {
    /// `hayate gen send` on an AF_XDP port (copy mode on a veth).
    HayateAfxdp,
    /// `hayate gen send` on an AF_PACKET port.
    HayateAfpacket,
}

impl NoiseGen {
    fn kind(self) -> &'static str {
        match self {
            NoiseGen::HayateAfxdp => "afxdp",
            NoiseGen::HayateAfpacket => "afpacket",
        }
    }
}

/// How the noisy generator is scheduled on its core.
///
/// On a machine too small to give the noisy host a core of its own, the generator shares the
/// victim's core, and the kernel's scheduler, not the switch, can then decide the victim's
/// latency: a victim thread woken from another core (where a poll-mode switch delivers its
/// frames) waits behind the running generator until that has used its time slice (EEVDF lets
/// a running task reach parity before a wake-up preempts it), while a thread woken by the
/// Linux bridge is woken from its own core's softirq, where the generator is not running.
/// `idle` runs the generator as `SCHED_IDLE`: it gets all the time the victim leaves and
/// never delays the victim's wake-ups, which is what a noisy VM on a core of its own does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoiseSched {
    /// The default policy: the generator competes with the victim's programs for the core.
    Normal,
    /// `SCHED_IDLE`: the generator runs only when the victim's programs do not want the core.
    Idle,
}

/// Makes host `sink` drop everything it receives at its interface's ingress.
pub fn sink(topo: &Topo, sink: &Host) -> Result<()> {
    topo.sh(
        &sink.ns,
        &format!(
            "nft add table netdev sink && \
             nft add chain netdev sink in '{{ type filter hook ingress device {} priority 0; }}' && \
             nft add rule netdev sink in udp dport 9 counter drop",
            sink.dev
        ),
    )
    .map(|_| ())
}

/// A running flood; dropping it stops the generator.
pub struct Flood {
    child: Child,
    ns: String,
}

impl Flood {
    /// Starts flooding from `from` to `to` on `core`, scheduled as `sched`, with `flows` flows
    /// (1: one flow) for at most `seconds`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        gen: NoiseGen,
        sched: NoiseSched,
        from: &Host,
        to: &Host,
        flows: u32,
        core: usize,
        seconds: f64,
        dir: &Path,
    ) -> Result<Flood> {
        let exe = std::env::current_exe().context("finding the hayate binary")?;
        let port = format!("{}:{}", gen.kind(), from.dev);
        let (flows_s, core_s, secs) =
            (flows.to_string(), core.to_string(), format!("{seconds:.1}"));
        let err = std::fs::File::create(dir.join("noise.err"))?;
        let exe = exe.to_string_lossy();
        let mut argv: Vec<&str> = match sched {
            NoiseSched::Normal => vec![],
            NoiseSched::Idle => vec!["chrt", "--idle", "0"],
        };
        argv.extend([
            &*exe,
            "gen",
            "send",
            "--port",
            &port,
            "--size",
            "64",
            "--src-mac",
            &from.mac,
            "--dst-mac",
            &to.mac,
            "--src-ip",
            &from.ip,
            "--dst-ip",
            &to.ip,
            "--sport",
            "10000",
            "--dport",
            "9",
            "--flows",
            &flows_s,
            "--vary",
            "src-port",
            "--rate",
            "max",
            "--duration",
            &secs,
            "--cores",
            &core_s,
            "--quiet",
        ]);
        let child = in_ns(&from.ns, &argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .context("starting the noisy host's generator")?;
        Ok(Flood {
            child,
            ns: from.ns.clone(),
        })
    }

    /// Fails with the generator's words if it has exited.
    pub fn check_alive(&mut self, dir: &Path) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let msg = std::fs::read_to_string(dir.join("noise.err")).unwrap_or_default();
            anyhow::bail!(
                "the noisy host's generator exited ({status}): {}",
                msg.trim()
            );
        }
        Ok(())
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        crate::sys::proc::terminate(&mut self.child, libc::SIGINT);
        Topo::kill_all(&self.ns);
    }
}

/// Frames the noisy host sent and the sink received so far.
pub fn counts(topo: &Topo, from: &Host, to: &Host) -> Result<(u64, u64)> {
    Ok((
        topo.counter(&from.ns, &from.dev, "tx_packets")?,
        topo.counter(&to.ns, &to.dev, "rx_packets")?,
    ))
}

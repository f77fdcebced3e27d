//! Keeping the host's stack off the tunnel packets an AF_PACKET underlay port's switch
//! terminates (`bpf/host_skip.c`, a tc ingress program on a TCX link).
//!
//! An AF_PACKET socket taps frames; the kernel receives them as well. For VXLAN or Geneve
//! addressed to the switch's tunnel endpoint, the host has no socket on the port and answers
//! each packet with an ICMP port unreachable, after a route lookup: measured on a TCP stream
//! through two Hayates on AF_PACKET underlays, 20 % of the switches' core went to those
//! answers and 31 % to the host's receive of frames the switch had already taken. The program
//! drops, after the tap, UDP to the tunnels' ports at the tunnels' local addresses; the rest
//! reaches the host as before. The link belongs to this process: it goes when the switch does.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};

use aya::maps::{HashMap, PerCpuArray};
use aya::programs::tc::{SchedClassifierLinkId, TcAttachType};
use aya::programs::SchedClassifier;
use aya::Ebpf;

/// The object built from `bpf/host_skip.c`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/host_skip.o"));
const PROGRAM_NAME: &str = "hayate_host_skip";
/// The verdict that drops (`linux/pkt_cls.h`).
const TC_ACT_SHOT: u32 = 2;

/// An error about `ifname`, with what it means for the host.
fn fail(ifname: &str, what: &str, e: &dyn std::fmt::Display) -> String {
    format!("{ifname}: {what}: {e} (the host's stack will receive tunnel packets too)")
}

/// The loaded program of `ebpf` (checked by [`HostSkip::load`]).
fn program(ebpf: &mut Ebpf) -> &mut SchedClassifier {
    ebpf.program_mut(PROGRAM_NAME)
        .and_then(|p| <&mut SchedClassifier>::try_from(p).ok())
        .expect("checked when loaded")
}

/// What the program drops: UDP to these ports at these addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Tunnels' UDP destination ports.
    pub ports: BTreeSet<u16>,
    /// Tunnels' local addresses.
    pub locals: BTreeSet<IpAddr>,
}

/// The program, attached to one interface's ingress while this lives.
pub struct HostSkip {
    ebpf: Ebpf,
    ifname: String,
    /// `None` only for a program loaded to be asked ([`HostSkip::verdict`]), in tests.
    _link: Option<SchedClassifierLinkId>,
    now: Skipped,
}

impl std::fmt::Debug for HostSkip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSkip")
            .field("ifname", &self.ifname)
            .field("now", &self.now)
            .finish()
    }
}

impl HostSkip {
    /// Loads the program and attaches it to `ifname`'s ingress (in the calling thread's
    /// namespace), dropping nothing yet ([`HostSkip::set`]). Needs Linux 6.6 (TCX links)
    /// and CAP_BPF with CAP_NET_ADMIN.
    pub fn attach(ifname: &str) -> Result<HostSkip, String> {
        let mut s = HostSkip::load(ifname)?;
        let link = program(&mut s.ebpf)
            .attach(ifname, TcAttachType::Ingress)
            .map_err(|e| fail(ifname, "attaching the tc program to ingress", &e))?;
        s._link = Some(link);
        Ok(s)
    }

    /// Loads the program for `ifname` without attaching it.
    fn load(ifname: &str) -> Result<HostSkip, String> {
        let mut ebpf =
            Ebpf::load(OBJECT).map_err(|e| fail(ifname, "loading the tc program", &e))?;
        let prog: &mut SchedClassifier = ebpf
            .program_mut(PROGRAM_NAME)
            .ok_or_else(|| {
                fail(
                    ifname,
                    "the tc object",
                    &format!("no program {PROGRAM_NAME}"),
                )
            })?
            .try_into()
            .map_err(|e| fail(ifname, "the tc object's program", &e))?;
        prog.load()
            .map_err(|e| fail(ifname, "loading the tc program into the kernel", &e))?;
        Ok(HostSkip {
            ebpf,
            ifname: ifname.to_string(),
            _link: None,
            now: Skipped::default(),
        })
    }

    /// Whether the program drops `frame` (Ethernet header on) at ingress, asked of the kernel
    /// (`BPF_PROG_TEST_RUN`).
    pub fn verdict(&mut self, frame: &[u8]) -> std::io::Result<bool> {
        let fd = program(&mut self.ebpf)
            .fd()
            .map_err(std::io::Error::other)?
            .as_fd()
            .as_raw_fd();
        Ok(crate::bpf_test_run::run_skb(fd, frame)? == TC_ACT_SHOT)
    }

    /// Makes the program drop exactly `want` (UDP to those ports at those addresses).
    pub fn set(&mut self, want: &Skipped) -> Result<(), String> {
        if *want == self.now {
            return Ok(());
        }
        let err =
            |e: &dyn std::fmt::Display| format!("{}: updating the tc program: {e}", self.ifname);
        let mut ports: HashMap<_, u16, u8> =
            HashMap::try_from(self.ebpf.map_mut("hayate_udp_ports").ok_or("no port map")?)
                .map_err(|e| err(&e))?;
        for p in self.now.ports.difference(&want.ports) {
            ports.remove(p).map_err(|e| err(&e))?;
        }
        for p in want.ports.difference(&self.now.ports) {
            ports.insert(p, 1, 0).map_err(|e| err(&e))?;
        }
        for (addrs, add) in [
            (self.now.locals.difference(&want.locals), false),
            (want.locals.difference(&self.now.locals), true),
        ] {
            for a in addrs {
                match a {
                    IpAddr::V4(a) => {
                        let mut m: HashMap<_, u32, u8> = HashMap::try_from(
                            self.ebpf.map_mut("hayate_v4_locals").ok_or("no map")?,
                        )
                        .map_err(|e| err(&e))?;
                        let k = u32::from_ne_bytes(a.octets());
                        if add { m.insert(k, 1, 0) } else { m.remove(&k) }.map_err(|e| err(&e))?;
                    }
                    IpAddr::V6(a) => {
                        let mut m: HashMap<_, [u8; 16], u8> = HashMap::try_from(
                            self.ebpf.map_mut("hayate_v6_locals").ok_or("no map")?,
                        )
                        .map_err(|e| err(&e))?;
                        let k = a.octets();
                        if add { m.insert(k, 1, 0) } else { m.remove(&k) }.map_err(|e| err(&e))?;
                    }
                }
            }
        }
        self.now = want.clone();
        Ok(())
    }

    /// Packets dropped so far (summed over CPUs).
    pub fn skipped(&self) -> u64 {
        let Some(m) = self.ebpf.map("hayate_skipped") else {
            return 0;
        };
        let Ok(a) = PerCpuArray::<_, u64>::try_from(m) else {
            return 0;
        };
        a.get(&0, 0).map_or(0, |v| v.iter().sum())
    }
}

#[cfg(test)]
#[path = "host_skip_tests.rs"]
mod tests;

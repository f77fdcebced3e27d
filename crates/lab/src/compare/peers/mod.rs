//! The switches `hayate bench compare` measures ("peers"), each a small module behind one
//! trait: [`Peer`] says what it is called, whether it can run here and how to start it between
//! the topology's two switch-side veths; what it returns, a [`Started`], stops the switch when
//! dropped. Adding a peer is a new file and one line in [`all`].
//!
//! - [`bridge`]: the Linux bridge (the reference every ratio is taken to), also with RPS
//!   moving its work to the switch core;
//! - [`hayate`]: Hayate on AF_XDP or AF_PACKET ports, with or without the priority lane;
//! - [`ovs`]: Open vSwitch's userspace datapath on system ports (also with its userspace TSO)
//!   or on AF_XDP ports, a private instance;
//! - [`ovs_dpdk`]: Open vSwitch with DPDK on `net_af_packet` ports (it polices in userspace,
//!   where the kernel lacks tc's police action);
//! - [`testpmd`]: dpdk-testpmd io forwarding between two AF_XDP ports, the I/O floor.
//!
//! `hayate bench noisy` starts the same peers on a topology with more hosts
//! ([`Topo::switch_ports`]), some with ingress policing on one port ([`Police`]) and flows
//! of their own ([`StartCtx::flows`]).

mod bridge;
pub mod child;
mod hayate;
mod ovs;
mod ovs_dpdk;
mod testpmd;

use std::path::Path;

use anyhow::Result;

use super::topo::Topo;

/// Ingress policing of one of the switch's interfaces, each peer in its own terms (Hayate:
/// `ingress_policing_rate`; Open vSwitch: the same column; the Linux bridge: a tc police
/// action on the interface's ingress).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Police {
    /// The switch's interface whose received frames are policed.
    pub dev: String,
    /// Rate, kbit/s.
    pub kbps: u64,
    /// Bucket, kbit.
    pub burst_kbit: u64,
}

/// Where a peer starts.
pub struct StartCtx<'a> {
    /// The topology (the switch joins its [`Topo::switch_ports`] in its switch namespace).
    pub topo: &'a Topo,
    /// The hayate binary.
    pub hayate: &'a Path,
    /// The switch core: all of the switch's work goes there.
    pub core: usize,
    /// The hosts' core (only a peer that puts its priority lane there uses it).
    pub host_core: usize,
    /// The run's folder for logs.
    pub dir: &'a Path,
    /// Ingress policing of one interface, if any.
    pub police: Option<&'a Police>,
    /// Flows (ovs-ofctl syntax) added above the switch's default forwarding (standalone
    /// NORMAL), for switches that take flows; the Linux bridge ignores them.
    pub flows: &'a [String],
}

/// A switch `hayate bench compare` can measure.
pub trait Peer {
    /// Its name on the command line and in reports.
    fn name(&self) -> &'static str;
    /// Why it cannot run on this machine, if it cannot.
    fn unavailable(&self) -> Option<String> {
        None
    }
    /// Whether it can join more than two interfaces and police ([`Police`]).
    fn multiport(&self) -> bool {
        true
    }
    /// Starts it on the topology's [`Topo::switch_ports`].
    fn start(&self, cx: &StartCtx<'_>) -> Result<Box<dyn Started>>;
}

/// A started switch; dropping it stops the switch and removes what it made.
pub trait Started {
    /// Fails, with the switch's own words, when its process has exited.
    fn check_alive(&mut self) -> Result<()> {
        Ok(())
    }
    /// The process that does its forwarding, if it has one of its own.
    fn pid(&self) -> Option<u32> {
        None
    }
}

/// Every peer, in the order they are measured.
pub fn all() -> Vec<Box<dyn Peer>> {
    use hayate::{Hayate, Kind};
    use ovs::{Mode, OvsPeer};
    vec![
        Box::new(bridge::Bridge { rps: false }),
        Box::new(bridge::Bridge { rps: true }),
        Box::new(Hayate::new(Kind::Afxdp, true, false)),
        Box::new(Hayate::new(Kind::Afxdp, false, false)),
        Box::new(Hayate::new(Kind::Afpacket, true, false)),
        Box::new(Hayate::new(Kind::Afpacket, false, false)),
        Box::new(Hayate::new(Kind::Afpacket, true, true)),
        Box::new(OvsPeer(Mode::Netdev)),
        Box::new(OvsPeer(Mode::NetdevTso)),
        Box::new(OvsPeer(Mode::Afxdp)),
        Box::new(ovs_dpdk::OvsDpdk),
        Box::new(testpmd::TestpmdAfxdp),
    ]
}

/// The peer named `name`; an unknown name gets the list of known ones.
pub fn by_name(name: &str) -> Result<Box<dyn Peer>> {
    crate::bench::by_name(all(), |p| p.name(), "switch", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_is_found_by_its_unique_name_and_unknown_names_list_them() {
        let names: Vec<_> = all().iter().map(|p| p.name()).collect();
        for n in &names {
            assert_eq!(by_name(n).unwrap().name(), *n);
            assert_eq!(names.iter().filter(|m| *m == n).count(), 1, "{n}");
        }
        assert_eq!(
            names,
            [
                "linux-bridge",
                "linux-bridge-rps",
                "hayate-afxdp",
                "hayate-afxdp-noprio",
                "hayate-afpacket",
                "hayate-afpacket-noprio",
                "hayate-afpacket-lane-host",
                "ovs-netdev",
                "ovs-netdev-tso",
                "ovs-afxdp",
                "ovs-dpdk",
                "testpmd-afxdp",
            ]
        );
        let e = by_name("linux-brigde").err().unwrap().to_string();
        assert!(
            e.contains("linux-bridge-rps") && e.contains("hayate-afxdp"),
            "{e}"
        );
    }
}

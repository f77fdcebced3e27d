//! Output to tunnel ports whose remote or tunnel id is chosen per flow (`remote=flow`,
//! `vni=flow`; issue 18): which ports those are, the outer headers per (port, remote, VNI)
//! the control side resolved, and the bounded queue of (port, remote, VNI) that translation
//! found no headers for.
//!
//! When a megaflow is compiled, the `tun_dst`/`tun_ipv6_dst` and `tun_id` its actions set
//! before the output are constants ([`TunFields`]), so the output compiles to the headers of
//! that destination like a fixed tunnel's output. A destination with no headers yet compiles
//! to a counted drop (`tunnel_unresolved`) and is queued for the control side, which resolves
//! its next hop, installs its headers and drops the cached megaflows so they compile again.
//! Nothing here runs per packet but the drop counters.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use packet::Field;

/// A tunnel port whose remote or VNI (or both) come from each flow's `tun_dst` / `tun_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerFlowPort {
    /// The fixed remote (`None`: `remote=flow`).
    pub remote: Option<IpAddr>,
    /// The fixed VNI (`None`: `vni=flow`).
    pub vni: Option<u32>,
}

/// Where one flow's output to a per-flow tunnel port goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowDest {
    /// The tunnel port.
    pub ofport: u32,
    /// The remote endpoint.
    pub remote: IpAddr,
    /// The 24-bit tunnel id.
    pub vni: u32,
}

/// The tunnel fields a flow's actions set so far (tracked while compiling them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunFields {
    /// The last `tun_dst` / `tun_ipv6_dst` set.
    pub dst: Option<IpAddr>,
    /// The last `tun_id` set.
    pub id: Option<u64>,
}

impl TunFields {
    /// Notes a set-field action; returns whether `field` is a tunnel field (one that changes
    /// no packet byte).
    pub fn see(&mut self, field: Field, value: u128) -> bool {
        match field {
            Field::TunDst => self.dst = Some(IpAddr::V4(Ipv4Addr::from(value as u32))),
            Field::TunIpv6Dst => self.dst = Some(IpAddr::V6(Ipv6Addr::from(value))),
            Field::TunnelId => self.id = Some(value as u64),
            Field::TunSrc | Field::TunIpv6Src => {}
            _ => return false,
        }
        true
    }

    /// Where output to `port` (tunnel port `ofport`) goes with these fields: `None` when the
    /// flow set no (or an unspecified) remote, or no tunnel id, that the port needs.
    pub fn dest(&self, ofport: u32, port: &PerFlowPort) -> Option<FlowDest> {
        let remote = match port.remote {
            Some(r) => r,
            None => self.dst.filter(|d| !d.is_unspecified())?,
        };
        let vni = match port.vni {
            Some(v) => v,
            None => (self.id? & 0x00ff_ffff) as u32,
        };
        Some(FlowDest {
            ofport,
            remote,
            vni,
        })
    }
}

/// Most destinations waiting for the control side; more are not queued (the control side
/// sees that the queue overflowed and makes the megaflows compile, and ask, again).
pub const REQUESTS_MAX: usize = 256;

/// Destinations translation found no headers for, waiting for the control side.
#[derive(Debug, Default)]
pub struct Requests {
    list: Vec<FlowDest>,
    overflowed: bool,
}

impl Requests {
    /// Queues `d` (once), unless the queue is full.
    pub fn push(&mut self, d: FlowDest) {
        if self.list.contains(&d) {
            return;
        }
        if self.list.len() >= REQUESTS_MAX {
            self.overflowed = true;
            return;
        }
        self.list.push(d);
    }

    /// Takes the queue: the destinations and whether some were not queued for lack of room.
    pub fn take(&mut self) -> (Vec<FlowDest>, bool) {
        let overflowed = std::mem::take(&mut self.overflowed);
        (std::mem::take(&mut self.list), overflowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_destination_comes_from_the_fields_the_port_leaves_to_the_flow() {
        let mut t = TunFields::default();
        let flow = PerFlowPort {
            remote: None,
            vni: None,
        };
        assert!(!t.see(Field::Ipv4Dst, 1));
        assert_eq!(t.dest(9, &flow), None, "nothing set");
        assert!(t.see(Field::TunDst, 0x0a00_0002));
        assert_eq!(t.dest(9, &flow), None, "no tun_id");
        assert!(t.see(Field::TunnelId, 0x1_0000_002a));
        let d = t.dest(9, &flow).unwrap();
        assert_eq!((d.remote, d.vni), ("10.0.0.2".parse().unwrap(), 42));
        t.see(Field::TunIpv6Dst, 0x2001_0db8 << 96 | 2);
        assert_eq!(
            t.dest(9, &flow).unwrap().remote,
            "2001:db8::2".parse::<IpAddr>().unwrap()
        );
        // A fixed remote with vni=flow (Neutron's `remote_ip=X, key=flow`).
        let keyed = PerFlowPort {
            remote: Some("192.0.2.9".parse().unwrap()),
            vni: None,
        };
        let d = TunFields {
            dst: None,
            id: Some(7),
        }
        .dest(3, &keyed)
        .unwrap();
        assert_eq!((d.remote, d.vni), ("192.0.2.9".parse().unwrap(), 7));
        // tun_dst=0.0.0.0 names no remote.
        let zero = TunFields {
            dst: Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            id: Some(1),
        };
        assert_eq!(zero.dest(9, &flow), None);
    }

    #[test]
    fn requests_are_queued_once_and_bounded() {
        let mut r = Requests::default();
        let d = |i: u32| FlowDest {
            ofport: 1,
            remote: IpAddr::V4(Ipv4Addr::from(i)),
            vni: 0,
        };
        r.push(d(1));
        r.push(d(1));
        assert_eq!(r.take(), (vec![d(1)], false));
        for i in 0..REQUESTS_MAX as u32 + 3 {
            r.push(d(i));
        }
        let (list, overflowed) = r.take();
        assert_eq!((list.len(), overflowed), (REQUESTS_MAX, true));
        assert_eq!(r.take(), (vec![], false));
    }
}

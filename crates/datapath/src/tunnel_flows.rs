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
//! Queuing a destination raises a [`RequestSignal`] that wakes the control side's thread at
//! once, so the first packets to a new destination wait for one resolution, not for the
//! control side's next periodic pass. Nothing here runs per packet but the drop counters.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

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
    /// Queues `d` (once), unless the queue is full. Returns whether the queue changed (`d`
    /// is new in it, or it just overflowed): whether the control side has news.
    pub fn push(&mut self, d: FlowDest) -> bool {
        if self.list.contains(&d) {
            return false;
        }
        if self.list.len() >= REQUESTS_MAX {
            return !std::mem::replace(&mut self.overflowed, true);
        }
        self.list.push(d);
        true
    }

    /// Takes the queue: the destinations and whether some were not queued for lack of room.
    pub fn take(&mut self) -> (Vec<FlowDest>, bool) {
        let overflowed = std::mem::take(&mut self.overflowed);
        (std::mem::take(&mut self.list), overflowed)
    }
}

/// Tells the control side's thread that destinations were queued: raised by translation
/// (when a megaflow is compiled, never per packet, and only when the queue changed), waited
/// for by the thread between its periodic passes. Raises while one is pending are absorbed
/// into it, so a burst of requests costs the thread one wake.
#[derive(Debug, Default)]
pub struct RequestSignal {
    raised: Mutex<bool>,
    cv: Condvar,
}

impl RequestSignal {
    /// Raises the signal: a thread waiting in [`RequestSignal::wait_until`] returns now, or
    /// the next call does.
    pub fn raise(&self) {
        *self.raised.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Waits until the signal is raised (then lowers it and returns `true`) or until
    /// `deadline` (`false`). Returns at once when it was raised before the call.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut raised = self.raised.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if std::mem::take(&mut *raised) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            raised = self
                .cv
                .wait_timeout(raised, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

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
        assert!(r.push(d(1)), "new");
        assert!(!r.push(d(1)), "queued already");
        assert_eq!(r.take(), (vec![d(1)], false));
        let news: Vec<bool> = (0..REQUESTS_MAX as u32 + 3).map(|i| r.push(d(i))).collect();
        assert!(news[..REQUESTS_MAX].iter().all(|n| *n));
        assert_eq!(
            news[REQUESTS_MAX..],
            [true, false, false],
            "overflowed once"
        );
        let (list, overflowed) = r.take();
        assert_eq!((list.len(), overflowed), (REQUESTS_MAX, true));
        assert_eq!(r.take(), (vec![], false));
    }

    /// A raise before the wait is kept; one raise is one wake; a thread waiting with a
    /// deadline an hour away returns when another raises the signal.
    #[test]
    fn a_raised_signal_wakes_one_wait() {
        let s = Arc::new(RequestSignal::default());
        assert!(!s.wait_until(Instant::now()), "not raised");
        s.raise();
        s.raise();
        assert!(s.wait_until(Instant::now()), "raised before the wait");
        assert!(!s.wait_until(Instant::now()), "lowered by the wait");
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || s.wait_until(Instant::now() + Duration::from_secs(3600)))
        };
        s.raise();
        assert!(waiter.join().unwrap(), "woken, not timed out");
    }
}

//! The tunnel drops of each port, by reason (issue 18): termination's on the underlay port
//! the frame arrived on ([`tunnel::RxDrop`]), the send side's on the tunnel port the packet
//! was output to ([`SendDrop`]). `hayate ctl BR dump-drops` and the metrics show them.
//!
//! Size and owner: one [`TunnelDrops`] per port that is (or was) an underlay or a tunnel
//! port, made by the control side when it publishes the port ([`DropBook`]) and kept across
//! republishing, so the counts survive next-hop changes. The poll-mode threads reach it
//! through the entries they already load (a terminator, a tunnel output) and add to it only
//! when a frame is dropped: no lookup per packet.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tunnel::RxDrop;

/// Declares the send-side reasons: one line each, `Variant = "counter_name"`.
macro_rules! send_drops {
    ($($(#[$doc:meta])* $v:ident = $name:literal,)+) => {
        /// Why a packet output to a tunnel port was not sent.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub enum SendDrop {
            $($(#[$doc])* $v,)+
        }

        impl SendDrop {
            /// Every reason with its counter name, in index order.
            pub const ALL: &'static [(SendDrop, &'static str)] = &[$((SendDrop::$v, $name),)+];
        }
    };
}

send_drops! {
    /// Too large for the underlay's MTU once encapsulated (answered with ICMP where due).
    TooBig = "tunnel_too_big",
    /// To a per-flow destination (`remote=flow` / `vni=flow`) whose headers are not known
    /// yet or whose remote cannot be reached (counted by per-flow send).
    Unresolved = "tunnel_unresolved",
    /// To a per-flow port from a flow that set no `tun_dst` / `tun_id` it needs (counted by
    /// per-flow send).
    FlowUnset = "tunnel_flow_unset",
    /// To a tunnel port with a fixed remote that cannot be reached now (no route or no
    /// neighbour; the port is down and its status says why).
    Unreachable = "tunnel_unreachable",
}

impl SendDrop {
    /// Number of reasons.
    pub const COUNT: usize = SendDrop::ALL.len();

    /// The counter's name.
    pub fn name(self) -> &'static str {
        SendDrop::ALL[self as usize].1
    }
}

/// Which side of a tunnel a port's drops are counted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// An underlay port: termination's drops ([`RxDrop`]).
    Underlay,
    /// A tunnel port: the send side's ([`SendDrop`]).
    Tunnel,
}

/// One port's tunnel drops: one counter per reason of its [`Side`].
#[derive(Debug)]
pub struct TunnelDrops {
    side: Side,
    counts: Box<[AtomicU64]>,
}

impl TunnelDrops {
    fn new(side: Side) -> TunnelDrops {
        let n = match side {
            Side::Underlay => RxDrop::COUNT,
            Side::Tunnel => SendDrop::COUNT,
        };
        TunnelDrops {
            side,
            counts: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts a termination drop (an underlay port's).
    #[inline]
    pub fn rx(&self, d: RxDrop) {
        if let Some(c) = self.counts.get(d.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a send-side drop (a tunnel port's).
    #[inline]
    pub fn send(&self, d: SendDrop) {
        if let Some(c) = self.counts.get(d as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `(reason, count)` for every reason of the port's side.
    pub fn read(&self) -> Vec<(&'static str, u64)> {
        let names: Vec<&'static str> = match self.side {
            Side::Underlay => RxDrop::names().collect(),
            Side::Tunnel => SendDrop::ALL.iter().map(|r| r.1).collect(),
        };
        names
            .into_iter()
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect()
    }
}

/// One send-side counter of one tunnel port, to carry in a compiled action (a megaflow op
/// that drops and counts): [`SendCounter::add`] is one relaxed atomic add.
#[derive(Debug, Clone)]
pub struct SendCounter {
    drops: Arc<TunnelDrops>,
    reason: SendDrop,
}

impl SendCounter {
    /// `reason` on the send-side counters `drops` (a tunnel port's).
    pub fn new(drops: Arc<TunnelDrops>, reason: SendDrop) -> SendCounter {
        SendCounter { drops, reason }
    }

    /// Counts one drop.
    #[inline]
    pub fn add(&self) {
        self.drops.send(self.reason);
    }
}

/// Every port's [`TunnelDrops`], by OpenFlow port and side (control side only).
#[derive(Debug, Default)]
pub struct DropBook {
    ports: Mutex<BTreeMap<(u32, u8), Arc<TunnelDrops>>>,
}

impl DropBook {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(u32, u8), Arc<TunnelDrops>>> {
        self.ports.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counters of port `ofport` on `side`, made on first use.
    pub fn of(&self, ofport: u32, side: Side) -> Arc<TunnelDrops> {
        self.lock()
            .entry((ofport, side as u8))
            .or_insert_with(|| Arc::new(TunnelDrops::new(side)))
            .clone()
    }

    /// Port `ofport`'s drops: termination's when it is an underlay, then the send side's
    /// when it is a tunnel port (empty for other ports).
    pub fn port(&self, ofport: u32) -> Vec<(&'static str, u64)> {
        let ports = self.lock();
        [Side::Underlay, Side::Tunnel]
            .iter()
            .filter_map(|s| ports.get(&(ofport, *s as u8)))
            .flat_map(|d| d.read())
            .collect()
    }

    /// Every reason summed over the ports (termination's, then the send side's).
    pub fn total(&self) -> Vec<(&'static str, u64)> {
        let mut sums: Vec<(&'static str, u64)> = RxDrop::names()
            .chain(SendDrop::ALL.iter().map(|r| r.1))
            .map(|n| (n, 0))
            .collect();
        for d in self.lock().values() {
            for (name, v) in d.read() {
                if let Some(s) = sums.iter_mut().find(|s| s.0 == name) {
                    s.1 += v;
                }
            }
        }
        sums
    }

    /// Forgets port `ofport`'s counters (it left the bridge; a new port of that number
    /// starts from zero).
    pub fn forget(&self, ofport: u32) {
        self.lock().retain(|k, _| k.0 != ofport);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_kept_per_port_and_side_and_summed() {
        let book = DropBook::default();
        book.of(1, Side::Underlay).rx(RxDrop::NoPort);
        book.of(1, Side::Underlay).rx(RxDrop::NoPort);
        book.of(9, Side::Tunnel).send(SendDrop::TooBig);
        SendCounter::new(book.of(9, Side::Tunnel), SendDrop::Unresolved).add();
        assert!(book.port(1).contains(&("tunnel_no_port", 2)));
        assert!(!book.port(1).iter().any(|d| d.0 == "tunnel_too_big"));
        let names: Vec<&str> = SendDrop::ALL.iter().map(|r| r.1).collect();
        let counts: Vec<u64> = names
            .iter()
            .map(|n| match *n {
                "tunnel_too_big" | "tunnel_unresolved" => 1,
                _ => 0,
            })
            .collect();
        let want: Vec<(&str, u64)> = names.into_iter().zip(counts).collect();
        assert_eq!(book.port(9), want);
        assert!(book.port(2).is_empty());
        let total = book.total();
        assert!(total.contains(&("tunnel_no_port", 2)));
        assert!(total.contains(&("tunnel_too_big", 1)));
        book.forget(1);
        assert!(book.port(1).is_empty());
        assert_eq!(SendDrop::TooBig.name(), "tunnel_too_big");
    }
}

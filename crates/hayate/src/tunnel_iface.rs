//! A tunnel port as the OpenFlow bridge sees it (issue 18): a [`port::Port`] with no queues
//! (the datapath serves it through its underlay port) whose link is up while its remote has a
//! next hop, and whose [`port::Port::link_status`] says why it is down. The bridge's link
//! watch turns a change into `OFPPS_LINK_DOWN` and a PORT_STATUS to the controllers; `hayate
//! ctl show` and an OVSDB Interface's `link_state` / `error` read the same.
//!
//! Its counters ([`port::Port::stats`]) are what the datapath counted for the tunnel port
//! ([`datapath::Tunnels::port_counts`]): `rx_packets`/`rx_bytes` the frames terminated into
//! it, `tx_packets`/`tx_bytes` those encapsulated out of it, bytes of the inner frame as Open
//! vSwitch counts them; `tx_dropped` its send-side tunnel drops (`dump-drops`). So
//! `dump-ports`, `show`, the metrics and OVSDB's Interface statistics show them.
//!
//! Size and owner: one per tunnel port, shared by the bridge (its port list) and the tunnel
//! housekeeping (`tunnels.rs`), which sets its state once a second when it changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use datapath::Tunnels;

use port::{Capabilities, Port, PortError, PortStats, RxQueue, TxQueue};

/// What a tunnel port says before its first next-hop resolution.
pub const NOT_RESOLVED: &str = "the next hop of its remote is not resolved yet";

/// A tunnel port's link: up, or down with a reason.
#[derive(Debug)]
pub struct TunnelIface {
    name: String,
    up: AtomicBool,
    why: Mutex<Option<String>>,
    /// Where its counters are read: the datapath's tunnel table and its port number.
    counted: Mutex<Option<(Weak<Tunnels>, u32)>>,
}

impl TunnelIface {
    /// A tunnel port named `name`, down until its next hop is resolved.
    pub fn new(name: &str) -> TunnelIface {
        TunnelIface {
            name: name.to_string(),
            up: AtomicBool::new(false),
            why: Mutex::new(Some(NOT_RESOLVED.to_string())),
            counted: Mutex::new(None),
        }
    }

    /// Reads its counters from `dp`'s tunnel port `ofport` (control side, when the port is
    /// added to the tunnels).
    pub fn count_from(&self, dp: &Arc<Tunnels>, ofport: u32) {
        *self.counted.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Arc::downgrade(dp), ofport));
    }

    /// Sets the link: up (`None`) or down because of `why`.
    pub fn set(&self, why: Option<String>) {
        self.up.store(why.is_none(), Ordering::Relaxed);
        *self.why.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }
}

impl Port for TunnelIface {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            rx_queues: 0,
            tx_queues: 0,
            vnet_hdr: false,
            max_frame: u32::from(u16::MAX),
        }
    }

    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        Err(PortError::new(
            &self.name,
            format!("is a tunnel port: it has no receive queue {queue} (its underlay has)"),
        ))
    }

    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        Err(PortError::new(
            &self.name,
            format!("is a tunnel port: it has no transmit queue {queue} (its underlay has)"),
        ))
    }

    fn link_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    fn link_may_change(&self) -> bool {
        true
    }

    fn link_status(&self) -> Option<String> {
        self.why.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn stats(&self) -> PortStats {
        let counted = self
            .counted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some((dp, ofport)) = counted.and_then(|(dp, p)| Some((dp.upgrade()?, p))) else {
            return PortStats::default();
        };
        let c = dp.port_counts(ofport).unwrap_or_default();
        PortStats {
            rx_packets: c.rx_packets,
            rx_bytes: c.rx_bytes,
            tx_packets: c.tx_packets,
            tx_bytes: c.tx_bytes,
            tx_dropped: dp.port_drops(ofport).iter().map(|d| d.1).sum(),
            ..PortStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_is_down_with_a_reason_until_set_up() {
        let t = TunnelIface::new("vx1");
        assert!(!t.link_up());
        assert_eq!(t.link_status().as_deref(), Some(NOT_RESOLVED));
        t.set(None);
        assert!(t.link_up());
        assert_eq!(t.link_status(), None);
        t.set(Some("no route to host".into()));
        assert!(!t.link_up());
        assert_eq!(t.link_status().as_deref(), Some("no route to host"));
        assert_eq!(t.capabilities().rx_queues, 0);
        assert!(t.open_rx(0).is_err());
    }

    #[test]
    fn its_counters_are_the_datapaths_for_its_port() {
        use tunnel::{Encap, EncapTemplate, OuterAddrs, TunnelKind};
        let t = TunnelIface::new("vx1");
        assert_eq!(t.stats(), PortStats::default(), "not counted yet");
        let dp = Arc::new(Tunnels::new());
        t.count_from(&dp, 5);
        let a = OuterAddrs {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: std::net::Ipv4Addr::new(192, 0, 2, 1).into(),
            dst: std::net::Ipv4Addr::new(192, 0, 2, 2).into(),
        };
        let tpl = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 42, false), &a).unwrap();
        dp.set_output(5, Some((1, tpl, 1500)));
        let out = dp.output(5).unwrap();
        out.counts.tx(0, 2, 120);
        out.counts.tx(1, 1, 60);
        out.counts.drops().send(datapath::SendDrop::TooBig);
        let s = t.stats();
        assert_eq!((s.tx_packets, s.tx_bytes, s.tx_dropped), (3, 180, 1));
        assert_eq!((s.rx_packets, s.rx_bytes), (0, 0));
        dp.forget(5);
        assert_eq!(
            t.stats(),
            PortStats::default(),
            "a removed port's counters go"
        );
    }
}

//! A tunnel port as the OpenFlow bridge sees it (issue 18): a [`port::Port`] with no queues
//! (the datapath serves it through its underlay port) whose link is up while its remote has a
//! next hop, and whose [`port::Port::link_status`] says why it is down. The bridge's link
//! watch turns a change into `OFPPS_LINK_DOWN` and a PORT_STATUS to the controllers; `hayate
//! ctl show` and an OVSDB Interface's `link_state` / `error` read the same.
//!
//! Size and owner: one per tunnel port, shared by the bridge (its port list) and the tunnel
//! housekeeping (`tunnels.rs`), which sets its state once a second when it changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use port::{Capabilities, Port, PortError, PortStats, RxQueue, TxQueue};

/// What a tunnel port says before its first next-hop resolution.
pub const NOT_RESOLVED: &str = "the next hop of its remote is not resolved yet";

/// A tunnel port's link: up, or down with a reason.
#[derive(Debug)]
pub struct TunnelIface {
    name: String,
    up: AtomicBool,
    why: Mutex<Option<String>>,
}

impl TunnelIface {
    /// A tunnel port named `name`, down until its next hop is resolved.
    pub fn new(name: &str) -> TunnelIface {
        TunnelIface {
            name: name.to_string(),
            up: AtomicBool::new(false),
            why: Mutex::new(Some(NOT_RESOLVED.to_string())),
        }
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
        PortStats::default()
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
}

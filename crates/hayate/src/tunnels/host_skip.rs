//! Keeping each AF_PACKET underlay's host stack off the tunnel packets the switch terminates
//! there ([`port::afpacket::host_skip`]): after each housekeeping pass, the underlay's tc
//! program drops UDP to its tunnels' ports at their local addresses, once the switch's socket
//! has its copy. AF_XDP underlays need nothing (their XDP program takes the frames before the
//! host sees them); a TAP's frames are the host's to route.

use std::collections::BTreeMap;
use std::net::IpAddr;

use port::afpacket::host_skip::{HostSkip, Skipped};
use tunnel::TunnelPort;

use super::Underlay;

/// Each AF_PACKET underlay's program (`None`: it could not be attached; warned once).
#[derive(Debug, Default)]
pub(super) struct HostSkips {
    by_port: BTreeMap<u32, Option<HostSkip>>,
}

impl HostSkips {
    /// Makes underlay `u`'s program drop what `ports` (the tunnels it terminates) at
    /// `locals` receive; attaches it the first time there is something to drop.
    pub(super) fn update(&mut self, u: &Underlay, ports: &[TunnelPort], locals: &[IpAddr]) {
        let (Some(ifname), true) = (u.ifname.as_deref(), u.host_sees) else {
            return;
        };
        let want = Skipped {
            ports: ports.iter().map(|p| p.dst_port).collect(),
            locals: locals
                .iter()
                .copied()
                .chain(ports.iter().filter_map(|p| p.local))
                .collect(),
        };
        if want.ports.is_empty() || want.locals.is_empty() {
            if let Some(Some(s)) = self.by_port.get_mut(&u.ofport) {
                warn_on(&u.name, s.set(&want));
            }
            return;
        }
        let slot = self.by_port.entry(u.ofport).or_insert_with(|| {
            match HostSkip::attach(ifname) {
                Ok(s) => {
                    tracing::info!(port = %u.name, "tunnel packets on {ifname} kept from the host's stack");
                    Some(s)
                }
                Err(e) => {
                    tracing::warn!(port = %u.name, "{e}");
                    None
                }
            }
        });
        if let Some(s) = slot {
            warn_on(&u.name, s.set(&want));
        }
    }

    /// Detaches underlay `ofport`'s program (the port left the bridge).
    pub(super) fn remove(&mut self, ofport: u32) {
        self.by_port.remove(&ofport);
    }
}

fn warn_on(port: &str, r: Result<(), String>) {
    if let Err(e) = r {
        tracing::warn!(port = %port, "{e}");
    }
}

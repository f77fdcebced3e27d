//! Ports that join and leave a running bridge (`hayate ctl BR add-port` / `del-port`), and
//! link state: the OpenFlow side of issue 16.
//!
//! - add-port: the number is the one asked for (refused, naming its holder, when taken) or
//!   the lowest free one from 1; no other port is renumbered. The port is opened and put in
//!   the datapath through the [`PortPlug`] the switch attached, then the pipeline learns the
//!   port list ([`pipeline::Control::set_ports`], published at once) and controllers get
//!   `OFPT_PORT_STATUS` with reason ADD.
//! - del-port (a name or a number): the datapath lets go of the port first (every poll thread
//!   drops its queues), then the pipeline forgets it and controllers get reason DELETE.
//! - link state: the pump looks at each port's [`port::Port::link_up`] every [`LINK_POLL`];
//!   a change sets the port's liveness in the pipeline (fast-failover groups) and sends
//!   reason MODIFY with `OFPPS_LINK_DOWN` set or cleared.
//!
//! Only the management socket may add or remove ports ([`super::Secondary`] connections),
//! not controllers: a controller asking gets an experimenter error that says so.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openflow::port::port_config;
use openflow::{Experimenter, PortReason, PortStatus};
use pipeline::PortInfo;
use port::Port;

use super::handle::reply;
use super::port_cmd::{done, exp_error, refusal, PortCmd, HAYATE_EXPERIMENTER};
use super::{features, mac_from_name, OfBridge, OfPort, PortState, State, SECONDARY_BIT};
use crate::ConnId;

/// How often the pump looks at the ports' link state.
pub const LINK_POLL: Duration = Duration::from_millis(100);

/// What the switch does for add-port and del-port: open a port from its spec and put it in
/// the running datapath, or take one out. Attached with [`OfBridge::attach_plug`].
pub trait PortPlug: Send + Sync {
    /// Opens the port `spec` describes (not yet in the datapath). The error names the
    /// problem and the fix (the port crate's text).
    fn open(&self, spec: &str) -> Result<Arc<dyn Port>, String>;

    /// Adds `port` to the running datapath as OpenFlow port `ofport`; returns once the poll
    /// threads poll it.
    fn plug(&self, ofport: u32, port: Arc<dyn Port>) -> Result<(), String>;

    /// Takes OpenFlow port `ofport` out of the running datapath; returns once no poll thread
    /// holds a queue of it.
    fn unplug(&self, ofport: u32) -> Result<(), String>;

    /// A warning about `port`, opened from `spec`, that the operator should see with the
    /// reply (e.g. an interface MTU larger than a pool frame). Default: none.
    fn warning(&self, spec: &str, port: &dyn Port) -> Option<String> {
        let _ = (spec, port);
        None
    }
}

impl OfBridge {
    /// Lets add-port and del-port change the running datapath through `plug`.
    pub fn attach_plug(&self, plug: Arc<dyn PortPlug>) {
        *self.plug.lock().unwrap_or_else(|e| e.into_inner()) = Some(plug);
    }

    /// Whether a port of this bridge has had its link down (a vhost-user port until its VM
    /// runs the rings): the pump should then run at least every [`LINK_POLL`]. Ports whose
    /// link was never down (every other backend's is always up) are looked at whenever the
    /// pump runs.
    pub fn watches_links(&self) -> bool {
        self.watch_links.load(Relaxed)
    }

    /// The bridge's ports now, by OpenFlow number.
    pub fn ports(&self) -> Vec<OfPort> {
        self.lock().ports.iter().map(|p| p.port.clone()).collect()
    }

    fn plugger(&self) -> Result<Arc<dyn PortPlug>, String> {
        self.plug
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                format!(
                    "bridge {} cannot change its ports: it has no running datapath",
                    self.cfg.name
                )
            })
    }

    /// Opens `spec` and adds it as OpenFlow port `ofport` (the lowest free number when
    /// `None`), named `name` (the port's own name when `None`). Returns what was done.
    pub fn add_port(
        &self,
        spec: &str,
        ofport: Option<u32>,
        name: Option<&str>,
    ) -> Result<String, String> {
        let plug = self.plugger()?;
        let bridge = &self.cfg.name;
        let mut st = self.lock();
        let no = match ofport {
            Some(n) => {
                if let Some(p) = st.ports.iter().find(|p| p.port.no == n) {
                    return Err(format!(
                        "OpenFlow port {n} is in use by port {} on bridge {bridge}; give \
                         another ofport= or leave it out for the lowest free number",
                        p.port.name
                    ));
                }
                n
            }
            None => (1..)
                .find(|n| st.ports.iter().all(|p| p.port.no != *n))
                .unwrap_or(1),
        };
        if let Some(n) = name {
            in_use(&st, n, bridge)?;
        }
        let port = plug.open(spec)?;
        let name = name.unwrap_or(port.name()).to_string();
        // Dropping `port` on these errors closes what the open made.
        in_use(&st, &name, bridge)?;
        if name.is_empty() {
            return Err(format!(
                "{spec} opened a port without a name; give name=NAME"
            ));
        }
        plug.plug(no, port.clone())?;
        let link = port.link_up();
        if !link || port.link_may_change() {
            self.watch_links.store(true, Relaxed);
        }
        st.ports.push(PortState {
            port: OfPort {
                no,
                hw_addr: mac_from_name(&format!("{bridge}/{name}")),
                name: name.clone(),
                port,
            },
            config: 0,
            since: Instant::now(),
            link,
        });
        st.ports.sort_by_key(|p| p.port.no);
        let mut infos = st.control.ports().to_vec();
        infos.push(PortInfo {
            no,
            name: name.clone(),
            live: link,
            ..PortInfo::default()
        });
        st.control.set_ports(infos);
        st.dirty = true;
        st.publish();
        let desc = st
            .ports
            .iter()
            .find(|p| p.port.no == no)
            .map(features::port_desc);
        if let Some(desc) = desc {
            st.port_status.push(PortStatus {
                reason: PortReason::Add,
                desc,
            });
        }
        tracing::info!(bridge = %bridge, port = %name, ofport = no, spec, "port added");
        let warning = match st.ports.iter().find(|p| p.port.no == no) {
            Some(p) => plug.warning(spec, &*p.port.port),
            None => None,
        };
        if let Some(w) = &warning {
            tracing::warn!(bridge = %bridge, port = %name, "{w}");
        }
        Ok(format!(
            "added port {name} ({spec}) to bridge {bridge} as OpenFlow port {no}{}{}",
            if link { "" } else { "; its link is down" },
            warning.map_or_else(String::new, |w| format!("\nwarning: {w}"))
        ))
    }

    /// Removes the port `which` names (its name, its OpenFlow number, or its backend's name
    /// when only one port has that backend name) from the datapath and then from the bridge.
    /// Returns what was done.
    pub fn del_port(&self, which: &str) -> Result<String, String> {
        let plug = self.plugger()?;
        let bridge = &self.cfg.name;
        let mut st = self.lock();
        let Some(i) = find(&st, which) else {
            let have: Vec<String> = st
                .ports
                .iter()
                .map(|p| format!("{}({})", p.port.no, p.port.name))
                .collect();
            return Err(format!(
                "bridge {bridge} has no port {which:?}; its ports are {} (give a name or a number)",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            ));
        };
        let no = st.ports[i].port.no;
        plug.unplug(no)?;
        let gone = st.ports.remove(i);
        let mut desc = features::port_desc(&gone);
        let name = gone.port.name.clone();
        // The datapath let go of it; this was the bridge's last handle on the port.
        drop(gone);
        let infos: Vec<PortInfo> = st
            .control
            .ports()
            .iter()
            .filter(|p| p.no != no)
            .cloned()
            .collect();
        st.control.set_ports(infos);
        st.dirty = true;
        st.publish();
        desc.state |= openflow::port::port_state::LINK_DOWN;
        desc.state &= !openflow::port::port_state::LIVE;
        st.port_status.push(PortStatus {
            reason: PortReason::Delete,
            desc,
        });
        tracing::info!(bridge = %bridge, port = %name, ofport = no, "port removed");
        Ok(format!(
            "removed port {name} (OpenFlow port {no}) from bridge {bridge}"
        ))
    }
}

/// The port `which` names: a port of that name, else of that OpenFlow number, else the one
/// port whose backend has that name.
pub(super) fn find(st: &State, which: &str) -> Option<usize> {
    let ports = &st.ports;
    if let Some(i) = ports.iter().position(|p| p.port.name == which) {
        return Some(i);
    }
    if let Ok(no) = which.parse::<u32>() {
        if let Some(i) = ports.iter().position(|p| p.port.no == no) {
            return Some(i);
        }
    }
    let mut backends = ports
        .iter()
        .enumerate()
        .filter(|(_, p)| p.port.port.name() == which);
    match (backends.next(), backends.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

/// Refuses `name` when a port of the bridge has it.
fn in_use(st: &State, name: &str, bridge: &str) -> Result<(), String> {
    match st.ports.iter().find(|p| p.port.name == name) {
        Some(p) => Err(format!(
            "a port named {name} is already on bridge {bridge} (OpenFlow port {}); del-port it \
             first, or give the new one another name with name=NAME",
            p.port.no
        )),
        None => Ok(()),
    }
}

impl State {
    /// Looks at every port's link; on a change sets its liveness in the pipeline (published
    /// at once) and queues a PORT_STATUS MODIFY. Returns whether some link is down now.
    pub(super) fn poll_links(&mut self) -> bool {
        let mut down = false;
        for i in 0..self.ports.len() {
            let up = self.ports[i].port.port.link_up();
            down |= !up;
            if up == self.ports[i].link {
                continue;
            }
            let p = &mut self.ports[i];
            p.link = up;
            let no = p.port.no;
            let live = up && p.config & port_config::PORT_DOWN == 0;
            tracing::info!(port = %p.port.name, ofport = no, up, "link changed");
            let desc = features::port_desc(p);
            self.control.set_port_live(no, live);
            self.port_status.push(PortStatus {
                reason: PortReason::Modify,
                desc,
            });
        }
        down
    }
}

/// A Hayate experimenter message (add-port, del-port): done for management connections,
/// refused for controllers and for anything malformed.
pub(super) fn handle(b: &OfBridge, conn: ConnId, xid: u32, e: &Experimenter, out: &mut Vec<u8>) {
    debug_assert_eq!(e.experimenter, HAYATE_EXPERIMENTER);
    if conn.0 & SECONDARY_BIT == 0 {
        let text = format!(
            "ports are added and removed through bridge {}'s management socket (hayate ctl {} \
             add-port / del-port), not by controllers",
            b.cfg.name, b.cfg.name
        );
        reply(out, xid, &refusal(exp_error::NOT_PERMITTED, &text));
        return;
    }
    let result = match PortCmd::from_experimenter(e) {
        Err(text) => {
            reply(out, xid, &refusal(exp_error::BAD_REQUEST, &text));
            return;
        }
        Ok(PortCmd::Add { spec, ofport, name }) => b.add_port(&spec, ofport, name.as_deref()),
        Ok(PortCmd::Del { port }) => b.del_port(&port),
    };
    match result {
        Ok(text) => reply(out, xid, &done(&text)),
        Err(text) => {
            tracing::info!(bridge = %b.cfg.name, "port command refused: {text}");
            reply(out, xid, &refusal(exp_error::REFUSED, &text));
        }
    }
}

#[cfg(test)]
#[path = "live_ports_tests.rs"]
mod tests;

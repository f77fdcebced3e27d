//! How `hayate ctl BRIDGE add-port` / `del-port` reach a running bridge: the
//! [`agent::ofproto::PortPlug`] that opens a port from its spec in the bridge's buffer pool
//! and hands it to the running datapath ([`datapath::Running::add_port`]) or takes one out.
//!
//! The datapath waits for its poll threads to take a change (microseconds while they poll, up
//! to a nap or a wake-up when they sleep); the request arrives on the agent runtime, so the
//! wait runs in `block_in_place` there and the runtime's other tasks go on meanwhile.
//!
//! A spec's ingress policing and egress queue options (`port::policing`, `port::egress`)
//! are the datapath's: `open` takes them out of the spec and keeps them beside the port it
//! opened until `plug` hands both to the datapath.
//!
//! Tunnel ports (`vxlan:`, `geneve:`) have no queues: `open` makes their
//! [`crate::tunnel_iface::TunnelIface`] and `plug` hands them to the bridge's tunnel
//! housekeeping ([`crate::tunnels::BridgeTunnels`]), not to the poll threads. Every other port
//! plugged becomes a candidate underlay for them.

use std::sync::{Arc, Mutex, Weak};

use agent::ofproto::PortPlug;
use packet::Pool;
use port::Port;

use crate::tunnel_iface::TunnelIface;
use crate::tunnels::{BridgeTunnels, TunnelConf, Underlay};

/// A port's ingress policing and egress queues.
pub type Rates = (port::Policing, port::Egress);

/// Opens ports in `pool` and plugs them into one bridge's running datapath.
pub struct Plugger {
    /// The bridge's buffer pool.
    pub pool: Pool,
    /// The running datapath (weak: the plug must not keep it running at exit).
    pub datapath: Weak<datapath::Running>,
    /// Bridge name, for messages.
    pub bridge: String,
    /// Ports opened and not plugged yet (a port dropped before its plug leaves a dead
    /// entry, cleared at the next open).
    pub pending: Mutex<Vec<(Weak<dyn Port>, Pending)>>,
    /// The bridge's tunnel ports and their underlays.
    pub tunnels: Arc<BridgeTunnels>,
}

/// What `open` learnt of a port that `plug` needs.
pub enum Pending {
    /// A port for the poll threads: its spec (without the datapath's options), policing and
    /// egress queues.
    Queued(String, Rates),
    /// A tunnel port (its number is set by `plug`) and its link.
    Tunnel(TunnelConf, Arc<TunnelIface>),
}

impl Plugger {
    fn running(&self) -> Result<Arc<datapath::Running>, String> {
        self.datapath
            .upgrade()
            .ok_or_else(|| format!("bridge {}: the datapath has stopped", self.bridge))
    }
}

/// Runs `f`, which may wait, without stalling a multi-threaded runtime it is called from.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Plugger {
    /// Keeps what `plug` will need of `port`.
    fn keep(&self, port: &Arc<dyn Port>, what: Pending) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|(w, _)| w.strong_count() > 0);
        pending.push((Arc::downgrade(port), what));
    }

    /// Takes what `open` kept about `port`.
    fn take_pending(&self, port: &Arc<dyn Port>) -> Option<Pending> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let at = pending
            .iter()
            .position(|(w, _)| w.upgrade().is_some_and(|p| address(&p) == address(port)));
        at.map(|i| pending.swap_remove(i).1)
    }
}

/// A port's address, to know it again between `open` and `plug`.
fn address(port: &Arc<dyn Port>) -> usize {
    Arc::as_ptr(port) as *const u8 as usize
}

impl PortPlug for Plugger {
    fn open(&self, spec: &str) -> Result<Arc<dyn Port>, String> {
        if let Some(t) = crate::tunnels::conf(0, "", spec) {
            let mut conf = t?;
            conf.name = crate::tunnels::default_name(&conf.spec);
            let iface = Arc::new(TunnelIface::new(&conf.name));
            let port: Arc<dyn Port> = iface.clone();
            self.keep(&port, Pending::Tunnel(conf, iface));
            return Ok(port);
        }
        let (spec, options) = port::dp_options::split_spec(spec).map_err(|e| e.to_string())?;
        if !options.rxq_affinity.is_empty() {
            return Err(
                "rxq_affinity is set when the bridge starts (its config or --port); \
                 a port added while running goes to the threads with the fewest queues"
                    .into(),
            );
        }
        let rates = (options.policing, options.egress);
        let port = blocking(|| port::spec::open(&spec, &self.pool)).map_err(|e| e.to_string())?;
        self.keep(&port, Pending::Queued(spec, rates));
        Ok(port)
    }

    fn plug(&self, ofport: u32, port: Arc<dyn Port>) -> Result<(), String> {
        let running = self.running()?;
        let (spec, (policing, egress)) = match self.take_pending(&port) {
            Some(Pending::Tunnel(conf, iface)) => {
                let conf = TunnelConf { ofport, ..conf };
                // The bridge's port list holds the same link the housekeeping sets.
                self.tunnels.add_tunnel(conf, iface);
                return Ok(());
            }
            Some(Pending::Queued(spec, rates)) => (Some(spec), rates),
            None => (None, Rates::default()),
        };
        // Before the queues reach the threads, so the port's first frame is policed.
        running.set_policing(ofport, policing);
        running.set_egress(ofport, egress);
        let name = port.name().to_string();
        blocking(|| running.add_port(ofport, port)).map_err(|e| e.to_string())?;
        if let Some(spec) = spec {
            self.tunnels
                .add_underlay(Underlay::of(ofport, &name, &spec));
        }
        Ok(())
    }

    fn unplug(&self, ofport: u32) -> Result<(), String> {
        if self.tunnels.remove(ofport) {
            return Ok(());
        }
        let running = self.running()?;
        blocking(|| running.remove_port(ofport)).map_err(|e| e.to_string())
    }

    fn warning(&self, spec: &str, port: &dyn Port) -> Option<String> {
        let w = port::mtu::check(spec, port.capabilities().max_frame)?;
        eprintln!("warning: bridge {}: port {spec}: {w}", self.bridge);
        Some(w)
    }
}

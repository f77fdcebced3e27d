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

use std::sync::{Arc, Mutex, Weak};

use agent::ofproto::PortPlug;
use packet::Pool;
use port::Port;

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
    /// Policing and egress queues of ports opened and not plugged yet, by the port's
    /// address.
    pub pending: Mutex<Vec<(usize, Rates)>>,
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
    fn pending_rates(&self) -> std::sync::MutexGuard<'_, Vec<(usize, Rates)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A port's address, to know it again between `open` and `plug`.
fn address(port: &Arc<dyn Port>) -> usize {
    Arc::as_ptr(port) as *const u8 as usize
}

impl PortPlug for Plugger {
    fn open(&self, spec: &str) -> Result<Arc<dyn Port>, String> {
        let (spec, options) = port::dp_options::split_spec(spec).map_err(|e| e.to_string())?;
        if !options.rxq_affinity.is_empty() {
            return Err(
                "rxq_affinity is set when the bridge starts (its config or --port); \
                 a port added while running goes to the threads with the fewest queues"
                    .into(),
            );
        }
        let (policing, egress) = (options.policing, options.egress);
        let port = blocking(|| port::spec::open(&spec, &self.pool)).map_err(|e| e.to_string())?;
        if policing.is_on() || egress.is_on() {
            self.pending_rates()
                .push((address(&port), (policing, egress)));
        }
        Ok(port)
    }

    fn plug(&self, ofport: u32, port: Arc<dyn Port>) -> Result<(), String> {
        let running = self.running()?;
        let (policing, egress) = {
            let mut pending = self.pending_rates();
            let at = pending.iter().position(|(a, _)| *a == address(&port));
            at.map(|i| pending.swap_remove(i).1).unwrap_or_default()
        };
        // Before the queues reach the threads, so the port's first frame is policed.
        running.set_policing(ofport, policing);
        running.set_egress(ofport, egress);
        blocking(|| running.add_port(ofport, port)).map_err(|e| e.to_string())
    }

    fn unplug(&self, ofport: u32) -> Result<(), String> {
        let running = self.running()?;
        blocking(|| running.remove_port(ofport)).map_err(|e| e.to_string())
    }

    fn warning(&self, spec: &str, port: &dyn Port) -> Option<String> {
        let w = port::mtu::check(spec, port.capabilities().max_frame)?;
        eprintln!("warning: bridge {}: port {spec}: {w}", self.bridge);
        Some(w)
    }
}

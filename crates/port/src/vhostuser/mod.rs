//! `vhostuser`: a VM's virtio-net device served from the switch's poll threads, over the
//! vhost-user protocol (the way Open vSwitch with DPDK reaches VMs).
//!
//! Spec: `vhostuser:PATH[,mode=client|server][,queues=N][,name=NAME]`.
//!
//! ```text
//!  QEMU / virtio-user ──unix socket──► protocol thread (conn.rs, backend.rs: `vhost` crate)
//!        │ guest memory (memfd / hugetlbfs, mapped by vm-memory: memory.rs)      │
//!        │                                                  publishes LiveRings (live.rs)
//!        ▼                                                                        ▼
//!  vring 2q+1 (guest TX) ──► VhostRx q (rx.rs) ── poll thread ── VhostTx q (tx.rs) ──► vring 2q (guest RX)
//! ```
//!
//! - The rings are the product's hot path and are written here (`ring.rs`): a polled split
//!   virtqueue that keeps host pointers into the guest's regions, takes and returns heads in
//!   batches, publishes the used index once per batch and interrupts the guest only when it
//!   asked (event idx or its flag). No allocation, lock or system call per packet; one copy
//!   each way.
//! - Queue pair `q` is receive queue `q` (the guest's transmit vring `2q + 1`) and transmit
//!   queue `q` (the guest's receive vring `2q`). A queue whose vring is not running receives
//!   nothing and sends nothing (the datapath counts what it could not send).
//! - `mode=client` (default): the VM's QEMU owns the socket and the switch connects, again
//!   and again as either side restarts. `mode=server`: the switch creates the socket (and
//!   replaces a stale socket nobody listens on; refuses anything else at the path).
//! - The link is up while at least one vring runs ([`Port::link_up`]).
//! - A guest is not trusted: every descriptor, index and address is checked before use
//!   (`ring.rs`); what fails is refused and counted in `rx_errors` / `tx_errors`, and the
//!   front end's protocol errors in [`VhostUserPort::protocol_errors`].
//!
//! Not yet: waking an idle poll thread by the guest's kick (queues of this port have no
//! readiness descriptor, so a thread that serves one naps for at most 1 ms when idle), live
//! migration (dirty logging), the packed ring.

mod backend;
mod conn;
pub(crate) mod fuzz;
pub mod guest;
pub mod live;
pub mod memory;
pub mod ring;
mod rx;
mod tx;

pub use backend::offered_features;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use packet::Pool;

use crate::claim::{claim_queue, QueueSlot};
use crate::{Capabilities, Port, PortError, PortStats, QueueCounters, RxQueue, TxQueue};

use live::VringSlot;

/// Most queue pairs a port may have.
pub const MAX_QUEUES: u16 = 64;

/// Who owns the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The front end (QEMU) listens; the switch connects and reconnects.
    #[default]
    Client,
    /// The switch listens.
    Server,
}

/// What a [`VhostUserPort`] opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VhostUserConfig {
    /// The socket's path.
    pub path: PathBuf,
    /// Who owns the socket.
    pub mode: Mode,
    /// Queue pairs offered (1 to [`MAX_QUEUES`]).
    pub queues: u16,
    /// The port's name (default: the socket file's name without its extension).
    pub name: Option<String>,
}

impl VhostUserConfig {
    /// One queue pair, client mode, on `path`.
    pub fn new(path: impl Into<PathBuf>) -> VhostUserConfig {
        VhostUserConfig {
            path: path.into(),
            mode: Mode::Client,
            queues: 1,
            name: None,
        }
    }

    fn port_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            self.path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| self.path.display().to_string())
        })
    }
}

/// What the protocol thread and the queues share.
pub(crate) struct Shared {
    name: String,
    vrings: Vec<Arc<VringSlot>>,
    rx: Vec<QueueCounters>,
    tx: Vec<QueueCounters>,
    link: AtomicBool,
    link_changes: AtomicU64,
    protocol_errors: AtomicU64,
}

impl Shared {
    fn new(name: &str, queues: usize) -> std::io::Result<Shared> {
        Ok(Shared {
            name: name.to_string(),
            vrings: (0..2 * queues)
                .map(|_| VringSlot::new().map(Arc::new))
                .collect::<std::io::Result<_>>()?,
            rx: (0..queues).map(|_| QueueCounters::default()).collect(),
            tx: (0..queues).map(|_| QueueCounters::default()).collect(),
            link: AtomicBool::new(false),
            link_changes: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
        })
    }

    fn set_link(&self, up: bool) {
        if self.link.swap(up, Ordering::Relaxed) != up {
            self.link_changes.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                "vhost-user port {}: link {}",
                self.name,
                if up { "up" } else { "down" }
            );
        }
    }

    fn count_protocol_error(&self) {
        self.protocol_errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// A vhost-user port; see the [module docs](self).
pub struct VhostUserPort {
    cfg: VhostUserConfig,
    name: String,
    pool: Pool,
    shared: Arc<Shared>,
    rx_slots: Vec<QueueSlot>,
    tx_slots: Vec<QueueSlot>,
    ctl: Arc<conn::Control>,
    thread: Option<JoinHandle<()>>,
    /// The socket this port created (server mode), removed on drop.
    created: Option<PathBuf>,
}

impl std::fmt::Debug for VhostUserPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostUserPort")
            .field("name", &self.name)
            .field("cfg", &self.cfg)
            .finish()
    }
}

impl VhostUserPort {
    /// Opens the port: in server mode creates the socket (see `listen`),
    /// then starts the protocol thread. Frames are drawn from `pool`.
    pub fn open(cfg: VhostUserConfig, pool: &Pool) -> Result<VhostUserPort, PortError> {
        let name = cfg.port_name();
        let err = |what: String| PortError::new(&name, what);
        if cfg.queues == 0 || cfg.queues > MAX_QUEUES {
            return Err(err(format!(
                "queues={}: give 1 to {MAX_QUEUES} queue pairs",
                cfg.queues
            )));
        }
        let endpoint = match cfg.mode {
            Mode::Client => conn::Endpoint::Client(cfg.path.clone()),
            Mode::Server => {
                let l = listen(&cfg.path).map_err(err)?;
                conn::Endpoint::Server(l)
            }
        };
        let n = usize::from(cfg.queues);
        let shared = Arc::new(
            Shared::new(&name, n).map_err(|e| err(format!("cannot set the queues up: {e}")))?,
        );
        let ctl = Arc::new(conn::Control::default());
        let created = (cfg.mode == Mode::Server).then(|| cfg.path.clone());
        let thread = {
            let (shared, ctl) = (shared.clone(), ctl.clone());
            std::thread::Builder::new()
                .name(format!("hayate-vhu-{}", truncate(&name, 6)))
                .spawn(move || conn::run(endpoint, shared, ctl))
                .map_err(|e| err(format!("cannot start the protocol thread: {e}")))?
        };
        Ok(VhostUserPort {
            name,
            pool: pool.clone(),
            rx_slots: (0..n).map(|_| QueueSlot::default()).collect(),
            tx_slots: (0..n).map(|_| QueueSlot::default()).collect(),
            cfg,
            shared,
            ctl,
            thread: Some(thread),
            created,
        })
    }

    /// Requests of the front end that were refused or ended a session with an error.
    pub fn protocol_errors(&self) -> u64 {
        self.shared.protocol_errors.load(Ordering::Relaxed)
    }

    /// How many times the link went up or down.
    pub fn link_changes(&self) -> u64 {
        self.shared.link_changes.load(Ordering::Relaxed)
    }

    /// The port's configuration.
    pub fn config(&self) -> &VhostUserConfig {
        &self.cfg
    }
}

/// Creates the listening socket of a server-mode port at `path`. A socket file nobody
/// listens on (left by a switch that was killed) is replaced; anything else at the path
/// is refused.
fn listen(path: &std::path::Path) -> Result<std::os::unix::net::UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::net::{UnixListener, UnixStream};
    if let Ok(m) = path.symlink_metadata() {
        if !m.file_type().is_socket() {
            return Err(format!(
                "{} exists and is not a socket; in mode=server the switch creates the socket: \
                 remove the file or choose another path",
                path.display()
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "{} is a socket another process listens on (a second switch?); choose another \
                 path, or use mode=client if the VM's QEMU owns it",
                path.display()
            ));
        }
        tracing::info!("vhost-user: replacing the stale socket {}", path.display());
        let _ = std::fs::remove_file(path);
    }
    let l = UnixListener::bind(path).map_err(|e| {
        format!(
            "cannot create the socket {}: {e}; check that its folder exists and is writable",
            path.display()
        )
    })?;
    l.set_nonblocking(true)
        .map_err(|e| format!("cannot make the socket non-blocking: {e}"))?;
    Ok(l)
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

impl Drop for VhostUserPort {
    fn drop(&mut self) {
        self.ctl.shut();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = &self.created {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Port for VhostUserPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            rx_queues: self.cfg.queues,
            tx_queues: self.cfg.queues,
            vnet_hdr: true,
            max_frame: 65535 + 14 + 4,
        }
    }

    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        let claim = claim_queue(&self.rx_slots, &self.name, "rx", queue)?;
        Ok(Box::new(rx::VhostRx::new(
            self.shared.clone(),
            usize::from(queue),
            self.pool.cache(),
            claim,
        )))
    }

    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        let claim = claim_queue(&self.tx_slots, &self.name, "tx", queue)?;
        Ok(Box::new(tx::VhostTx::new(
            self.shared.clone(),
            usize::from(queue),
            self.pool.cache(),
            claim,
        )))
    }

    fn link_up(&self) -> bool {
        self.shared.link.load(Ordering::Relaxed)
    }

    fn stats(&self) -> PortStats {
        let mut s = PortStats::default();
        for q in 0..self.shared.rx.len() {
            let one = PortStats::from_queues(&self.shared.rx[q], &self.shared.tx[q]);
            s.rx_packets += one.rx_packets;
            s.rx_bytes += one.rx_bytes;
            s.rx_dropped += one.rx_dropped;
            s.rx_errors += one.rx_errors;
            s.tx_packets += one.tx_packets;
            s.tx_bytes += one.tx_bytes;
            s.tx_dropped += one.tx_dropped;
            s.tx_errors += one.tx_errors;
        }
        s
    }
}

#[cfg(test)]
mod tests;

//! Assembling a datapath: ports, threads, queue assignment, starting and stopping.
//!
//! Rx queues of all ports are dealt round-robin to the threads (ports added while running,
//! [`Running::add_port`], go to the threads with the fewest; [`crate::plug`]). A queue pinned
//! to a core ([`Builder::rxq_affinity`], as Open vSwitch's `pmd-rxq-affinity`) goes to the
//! poll thread of that core, and a thread with a pinned queue is dedicated: the unpinned
//! queues are dealt to the other threads (to all when every thread has a pinned queue). Every thread has a tx table
//! with one entry per port; thread `t` sends on tx queue `t % tx_queues` of each port. When a
//! port has fewer tx queues than there are threads, the threads that land on the same queue
//! share it behind a mutex taken once per tx batch; otherwise each thread owns its queue.
//!
//! The priority lane: when ports keep control frames apart in priority receive queues
//! ([`port::Port::priority_queues`]; AF_PACKET and AF_XDP ports by default: ARP, ICMP,
//! ICMPv6, TCP SYNs),
//! one more thread reads them all. It shares thread 0's core unless given one of its own
//! ([`Builder::lane_core`]: a housekeeping core, where it never waits for a poll thread's
//! system call to end), runs as a real-time thread
//! (`SCHED_FIFO`, so the kernel switches to it as soon as a control frame wakes it, at the
//! poll thread's next system call or preemption point) and sleeps as soon as its queues are
//! empty, so a ping does not wait behind the poll threads' bulk work (a TCP stream's
//! super-packets: 30–110 µs of kernel copying each on a veth) and costs the bulk traffic one
//! context switch. It may be busy a quarter of each millisecond at most (a flood of pings
//! then slows itself, not the bulk traffic; `lane_yields` counts the times). It is a poll
//! thread like the others (own caches, own counters, index after the last poll thread); a
//! port with priority queues keeps its last transmit queue for it (the poll threads share
//! the others), other ports' queues it shares like any thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use packet::{Pool, PoolCache};
use port::Port;

use crate::capture::Taps;
use crate::config::DpConfig;
use crate::egress::{EgressQueue, Shapers};
use crate::execute::{PacketIn, TxPort};
use crate::inject::{InjectQueue, Injected, Injector, Wake, INJECT_QUEUE};
use crate::look::{Look, MegaflowRecord};
use crate::plug::{tx_entries, Plugboard};
use crate::pmd::{Pmd, PmdParts};
use crate::police::Policers;
use crate::rx_drops::RxQueueStats;
use crate::stats::{PmdStats, Snapshot};
use crate::tunnels::Tunnels;
use crate::upcall::{Upcall, UpcallFactory};

/// Errors building or starting a datapath; the message names the thing and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpError(pub String);

impl std::fmt::Display for DpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "datapath: {}", self.0)
    }
}

impl std::error::Error for DpError {}

/// Most megaflows the priority lane keeps (control frames are few flows).
const LANE_MEGAFLOWS: usize = 4096;

/// Builds a [`Datapath`]; start with [`Datapath::builder`].
#[derive(Default)]
pub struct Builder {
    pool: Option<Pool>,
    ports: Vec<(u32, Arc<dyn Port>)>,
    upcall: Option<UpcallFactory>,
    threads: Vec<Option<usize>>,
    lane_core: Option<usize>,
    config: DpConfig,
    policers: Arc<Policers>,
    shapers: Arc<Shapers>,
    affinity: BTreeMap<u32, Vec<(u16, usize)>>,
}

impl Builder {
    /// The buffer pool packets are copied into (multi-output, packet-in).
    pub fn pool(mut self, pool: Pool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Adds a port under OpenFlow port number `ofport`.
    pub fn port(mut self, ofport: u32, port: Arc<dyn Port>) -> Self {
        self.ports.push((ofport, port));
        self
    }

    /// Polices port `ofport`'s ingress ([`crate::police`]); change it while running with
    /// [`Running::set_policing`].
    pub fn policing(self, ofport: u32, policing: port::Policing) -> Self {
        self.policers.set(ofport, policing);
        self
    }

    /// Gives port `ofport` egress queues ([`crate::egress`]); change them while running
    /// with [`Running::set_egress`].
    pub fn egress(self, ofport: u32, egress: port::Egress) -> Self {
        self.shapers.set(ofport, egress);
        self
    }

    /// Pins port `ofport`'s rx queues to the poll threads of cores: `(queue, core)` pairs
    /// (module docs). [`Builder::build`] refuses a queue the port lacks and a core no
    /// thread runs on.
    pub fn rxq_affinity(mut self, ofport: u32, pins: Vec<(u16, usize)>) -> Self {
        if !pins.is_empty() {
            self.affinity.insert(ofport, pins);
        }
        self
    }

    /// How each thread gets its translator of cache misses (called with the thread index).
    pub fn upcall_factory(
        mut self,
        f: impl Fn(usize) -> Box<dyn Upcall> + Send + Sync + 'static,
    ) -> Self {
        self.upcall = Some(Box::new(f));
        self
    }

    /// Translate misses through the OpenFlow pipeline published in `cell` (every thread
    /// shares it).
    pub fn pipeline(self, cell: Arc<pipeline::PipelineCell>) -> Self {
        self.upcall_factory(move |_| Box::new(cell.clone()))
    }

    /// One poll-mode thread per element, pinned to that core (`None`: not pinned). Default:
    /// one unpinned thread.
    pub fn threads(mut self, cores: Vec<Option<usize>>) -> Self {
        self.threads = cores;
        self
    }

    /// The core the priority lane is pinned to (default, `None`: the first poll thread's).
    /// A core no poll thread uses — a host's housekeeping core — spares control frames the
    /// wait for a poll thread's current system call.
    pub fn lane_core(mut self, core: Option<usize>) -> Self {
        self.lane_core = core;
        self
    }

    /// Tunables.
    pub fn config(mut self, config: DpConfig) -> Self {
        self.config = config;
        self
    }

    /// [`Builder::build`], then [`Datapath::build_pmds`]. Packet-ins of these threads are
    /// counted as dropped (nobody could take them); build a [`Datapath`] to keep them.
    pub fn build_pmds(self) -> Result<Vec<Pmd>, DpError> {
        self.build()?.build_pmds()
    }

    /// [`Builder::build`], then [`Datapath::start`]; the [`Running`] handle also takes the
    /// packet-ins ([`Running::packet_ins`]).
    pub fn start(self) -> Result<Running, DpError> {
        self.build()?.start()
    }

    /// Checks the pieces and makes the datapath (no queue is opened yet).
    pub fn build(self) -> Result<Datapath, DpError> {
        let pool = self
            .pool
            .ok_or_else(|| DpError("no buffer pool; call .pool(pool) on the builder".into()))?;
        let upcall = self.upcall.ok_or_else(|| {
            DpError(
                "no translator for cache misses; call .upcall_factory(..) or .pipeline(..)".into(),
            )
        })?;
        self.config.validate().map_err(DpError)?;
        let mut seen = BTreeMap::new();
        for (ofport, p) in &self.ports {
            if let Some(other) = seen.insert(*ofport, p.name().to_string()) {
                return Err(DpError(format!(
                    "OpenFlow port {ofport} is given to both {other} and {}; number them apart",
                    p.name()
                )));
            }
        }
        let threads = if self.threads.is_empty() {
            vec![None]
        } else {
            self.threads
        };
        let affinity = check_affinity(&self.affinity, &self.ports, &threads)?;
        let (pi_tx, pi_rx) = sync_channel(self.config.packet_in_queue);
        let packet_ins = Arc::new(PacketInQueue {
            rx: Mutex::new(pi_rx),
            cache: Mutex::new(pool.cache()),
        });
        let (inject_tx, inject_rx) = sync_channel(INJECT_QUEUE);
        let wake = Arc::new(Wake::new());
        let packet_in_wake = Arc::new(Wake::new());
        let depth = Arc::new(AtomicUsize::new(0));
        let injector = Injector::new(inject_tx, pool.cache(), wake.clone(), depth.clone());
        Ok(Datapath {
            injector,
            inject_rx: Mutex::new(Some((inject_rx, wake, depth))),
            packet_in_wake,
            pool,
            ports: self.ports,
            upcall,
            threads,
            lane_core: self.lane_core,
            config: self.config,
            policers: self.policers,
            shapers: self.shapers,
            affinity,
            pi_tx,
            packet_ins,
            tunnels: Arc::new(Tunnels::new()),
        })
    }
}

/// A configured datapath: its ports, threads and translator. Make its threads' state with
/// [`Datapath::build_pmds`] (to drive them yourself) or run them with [`Datapath::start`].
pub struct Datapath {
    pool: Pool,
    ports: Vec<(u32, Arc<dyn Port>)>,
    upcall: UpcallFactory,
    threads: Vec<Option<usize>>,
    lane_core: Option<usize>,
    config: DpConfig,
    /// Each port's ingress policer ([`crate::police`]).
    policers: Arc<Policers>,
    /// Each port's egress queues ([`crate::egress`]).
    shapers: Arc<Shapers>,
    /// The thread of each pinned rx queue: (port, queue) → thread index.
    affinity: BTreeMap<(u32, u16), usize>,
    pi_tx: SyncSender<PacketIn>,
    packet_ins: Arc<PacketInQueue>,
    injector: Injector,
    #[allow(clippy::type_complexity)]
    inject_rx: Mutex<Option<(Receiver<Injected>, Arc<Wake>, Arc<AtomicUsize>)>>,
    packet_in_wake: Arc<Wake>,
    /// The underlay ports' tunnel termination ([`crate::tunnels`]).
    tunnels: Arc<Tunnels>,
}

/// The receiving end of the packet-in queue (control side; a mutex is fine here).
struct PacketInQueue {
    rx: Mutex<Receiver<PacketIn>>,
    cache: Mutex<PoolCache>,
}

impl PacketInQueue {
    fn take(&self, max: usize, mut f: impl FnMut(&PacketIn)) -> usize {
        let rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while n < max {
            let Ok(pi) = rx.try_recv() else { break };
            f(&pi);
            cache.free(pi.packet);
            n += 1;
        }
        n
    }
}

impl Drop for PacketInQueue {
    fn drop(&mut self) {
        // Give back the frames of packet-ins nobody took.
        self.take(usize::MAX, |_| {});
    }
}

impl std::fmt::Debug for Datapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Datapath")
            .field("ports", &self.ports.iter().map(|p| p.0).collect::<Vec<_>>())
            .field("threads", &self.threads)
            .field("lane_core", &self.lane_core)
            .finish()
    }
}

impl Datapath {
    /// Which underlay ports terminate which tunnel ports ([`crate::tunnels`]); the running
    /// datapath shares it ([`Running::tunnels`]).
    pub fn tunnels(&self) -> &Arc<Tunnels> {
        &self.tunnels
    }

    /// A new builder.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The tunables.
    pub fn config(&self) -> &DpConfig {
        &self.config
    }

    /// Polices port `ofport`'s ingress from now on, also in threads already made by
    /// [`Datapath::build_pmds`] (as [`Running::set_policing`]).
    pub fn set_policing(&self, ofport: u32, policing: port::Policing) {
        self.policers.set(ofport, policing);
    }

    /// Gives port `ofport` egress queues, also after [`Datapath::build_pmds`] (as
    /// [`Running::set_egress`]).
    pub fn set_egress(&self, ofport: u32, egress: port::Egress) {
        self.shapers.set(ofport, egress);
    }

    /// Port `ofport`'s egress queues with their counters, and the packets it dropped for a
    /// queue it lacks (as [`Running::egress_queues`]).
    pub fn egress_queues(&self, ofport: u32) -> (Vec<EgressQueue>, u64) {
        let s = self.shapers.port(ofport);
        (s.queues(), s.unknown())
    }

    /// Opens every queue and makes one [`Pmd`] per thread, without starting threads (for
    /// `hayate bench` and tests). Queues open once: call this or [`Datapath::start`], once.
    pub fn build_pmds(&self) -> Result<Vec<Pmd>, DpError> {
        let nthreads = self.threads.len();
        let open_err = |e: port::PortError| DpError(e.to_string());
        // Rx queues, dealt round-robin.
        let mut rx: Vec<Vec<(u32, Box<dyn port::RxQueue>)>> =
            (0..nthreads).map(|_| Vec::new()).collect();
        // Threads with a pinned queue are dedicated to their pinned queues.
        let free: Vec<usize> = (0..nthreads)
            .filter(|t| !self.affinity.values().any(|a| a == t))
            .collect();
        let free = if free.is_empty() {
            (0..nthreads).collect()
        } else {
            free
        };
        let mut k = 0;
        for (ofport, p) in &self.ports {
            for q in 0..p.capabilities().rx_queues {
                let t = match self.affinity.get(&(*ofport, q)) {
                    Some(&t) => t,
                    None => {
                        k += 1;
                        free[(k - 1) % free.len()]
                    }
                };
                rx[t].push((*ofport, p.open_rx(q).map_err(open_err)?));
            }
        }
        // Priority queues go to a thread of their own, the priority lane (module docs).
        let mut lane_rx: Vec<(u32, Box<dyn port::RxQueue>)> = Vec::new();
        for (ofport, p) in &self.ports {
            for q in 0..p.priority_queues() {
                lane_rx.push((*ofport, p.open_priority_rx(q).map_err(open_err)?));
            }
        }
        let lane = !lane_rx.is_empty();
        if lane {
            rx.push(lane_rx);
        }
        let nthreads = nthreads + usize::from(lane);
        // Tx tables: one entry per port per thread. Ports with virtio-net headers may deliver
        // TCP super-packets kept whole; ports without them get them cut.
        let supers = self.ports.iter().any(|(_, p)| p.capabilities().vnet_hdr);
        let mut tx: Vec<Vec<TxPort>> = (0..nthreads).map(|_| Vec::new()).collect();
        for (ofport, p) in &self.ports {
            let segment = supers && !p.capabilities().vnet_hdr;
            let gro = self.config.gro && p.capabilities().vnet_hdr;
            let entries = tx_entries(&**p, *ofport, nthreads, lane, segment, gro)?;
            for (table, entry) in tx.iter_mut().zip(entries) {
                table.push(entry);
            }
        }
        let mut pmds = Vec::with_capacity(nthreads);
        for (i, (rx, tx)) in rx.into_iter().zip(tx).enumerate() {
            let is_lane = lane && i == nthreads - 1;
            let mut pmd = Pmd::new(PmdParts {
                index: i,
                core: if is_lane {
                    self.lane_core.or(self.threads[0])
                } else {
                    self.threads[i]
                },
                rx,
                tx,
                cache: self.pool.cache(),
                upcall: (self.upcall)(i),
                packet_ins: self.pi_tx.clone(),
                config: if is_lane {
                    DpConfig {
                        max_megaflows: self.config.max_megaflows.min(LANE_MEGAFLOWS),
                        ..self.config.clone()
                    }
                } else {
                    self.config.clone()
                },
            });
            if is_lane {
                pmd.make_lane();
            }
            pmd.attach_policers(&self.policers);
            pmd.attach_shapers(&self.shapers);
            pmds.push(pmd);
        }
        let inject_rx = self
            .inject_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let (Some((rx, wake, depth)), Some(first)) = (inject_rx, pmds.first_mut()) {
            first.attach_inject(InjectQueue::new(rx, wake, depth));
        }
        for p in pmds.iter_mut() {
            p.attach_packet_in_wake(self.packet_in_wake.clone());
            p.attach_tunnels(self.tunnels.clone());
        }
        Ok(pmds)
    }

    /// Opens every queue and starts the poll-mode threads, pinned to their cores when asked
    /// (when pinning fails the thread warns on stderr and runs unpinned).
    pub fn start(&self) -> Result<Running, DpError> {
        let mut pmds = self.build_pmds()?;
        let plug = Plugboard::wire(
            &mut pmds,
            &self.ports,
            self.policers.clone(),
            self.shapers.clone(),
            self.config.gro,
        );
        let stop = Arc::new(AtomicBool::new(false));
        // One eventfd wakes every sleeping thread when the datapath stops, so a sleep need
        // not end on its own to notice the stop flag.
        let stop_wake = Arc::new(Wake::new());
        let taps = Arc::new(Taps::new(pmds.len()));
        let mut stats = Vec::with_capacity(pmds.len());
        let mut looks = Vec::with_capacity(pmds.len());
        let mut threads = Vec::with_capacity(pmds.len());
        let mut handles = Vec::with_capacity(pmds.len());
        for mut pmd in pmds {
            pmd.attach_stop_wake(stop_wake.clone());
            pmd.attach_taps(taps.clone());
            stats.push(pmd.stats_handle().clone());
            looks.push(pmd.look().clone());
            threads.push((pmd.index(), pmd.core(), pmd.is_lane()));
            let stop = stop.clone();
            let name = if pmd.is_lane() {
                "hayate-lane".to_string()
            } else {
                format!("hayate-pmd{}", pmd.index())
            };
            let h = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    if let Some(core) = pmd.core() {
                        if let Err(e) = cpu::pin_current(core) {
                            eprintln!("{name}: {e}; running unpinned");
                        }
                    }
                    if pmd.is_lane() {
                        if let Err(e) = realtime() {
                            eprintln!("{name}: cannot run as a real-time thread ({e}); control frames may wait behind bulk work");
                        }
                    }
                    pmd.run(&stop);
                })
                .map_err(|e| DpError(format!("cannot start a poll-mode thread: {e}")))?;
            handles.push(h);
        }
        Ok(Running {
            plug: Mutex::new(plug),
            policers: self.policers.clone(),
            shapers: self.shapers.clone(),
            handles,
            stop,
            stop_wake,
            stats,
            looks,
            taps,
            threads,
            packet_ins: self.packet_ins.clone(),
            pool: self.pool.clone(),
            injector: self.injector.clone(),
            packet_in_wake: self.packet_in_wake.clone(),
            tunnels: self.tunnels.clone(),
        })
    }

    /// Takes up to `max` packet-ins from the queue, calling `f` on each (the packet's frame
    /// goes back to the pool afterwards). Returns how many were taken. Never blocks.
    pub fn packet_ins(&self, max: usize, f: impl FnMut(&PacketIn)) -> usize {
        self.packet_ins.take(max, f)
    }

    /// The packet-out queue (run by thread 0; see [`crate::inject`]).
    pub fn injector(&self) -> Injector {
        self.injector.clone()
    }
}

/// Running poll-mode threads. Dropping it stops them.
pub struct Running {
    /// The ports and the threads' mailboxes ([`crate::plug`]).
    plug: Mutex<Plugboard>,
    /// Each port's ingress policer ([`crate::police`]).
    policers: Arc<Policers>,
    /// Each port's egress queues ([`crate::egress`]).
    shapers: Arc<Shapers>,
    handles: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// Signalled after `stop` is set: wakes threads sleeping in `poll(2)`.
    stop_wake: Arc<Wake>,
    stats: Vec<Arc<PmdStats>>,
    /// Where each thread's megaflows are asked for ([`crate::look`]), as `stats`.
    looks: Vec<Arc<Look>>,
    /// Running captures ([`crate::capture`]).
    taps: Arc<Taps>,
    /// Index, core and whether it is the priority lane, per thread (as `stats`).
    threads: Vec<(usize, Option<usize>, bool)>,
    packet_ins: Arc<PacketInQueue>,
    /// The buffer pool its ports' queues take frames from.
    pool: Pool,
    injector: Injector,
    packet_in_wake: Arc<Wake>,
    /// The underlay ports' tunnel termination, as the datapath's.
    tunnels: Arc<Tunnels>,
}

/// One poll thread's counters with what the operator needs to tell it apart
/// ([`Running::threads`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadStats {
    /// Thread index (`hayate-pmdN`; the priority lane has the last one).
    pub index: usize,
    /// The core it is pinned to, if any.
    pub core: Option<usize>,
    /// Whether it is the priority lane ([`Pmd::is_lane`]).
    pub lane: bool,
    /// Its counters now.
    pub stats: Snapshot,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("threads", &self.handles.len())
            .finish()
    }
}

impl Running {
    /// The buffer pool its ports' queues take frames from (for its gauges).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Counters summed over the threads.
    pub fn stats(&self) -> Snapshot {
        self.stats.iter().map(|s| s.snapshot()).sum()
    }

    /// Counters of each thread.
    pub fn thread_stats(&self) -> Vec<Snapshot> {
        self.stats.iter().map(|s| s.snapshot()).collect()
    }

    /// Each thread's counters with its index, core and role, in index order.
    pub fn threads(&self) -> Vec<ThreadStats> {
        self.threads
            .iter()
            .zip(&self.stats)
            .map(|(&(index, core, lane), s)| ThreadStats {
                index,
                core,
                lane,
                stats: s.snapshot(),
            })
            .collect()
    }

    /// What the threads dropped of the packets port `ofport` delivered, by reason
    /// ([`crate::rx_drops::IN_PORT_DROPS`]; with `rx_packets` and `busy_cycles`, the other
    /// fields are 0), summed over its rx queues at read time. A port the datapath does not
    /// have reads all zero.
    pub fn port_drops(&self, ofport: u32) -> Snapshot {
        self.plugboard().port_drops(ofport)
    }

    /// Every rx queue with the thread that polls it and its counters ([`crate::rx_drops`]:
    /// drops by reason, `rx_packets`, `busy_cycles`).
    pub fn rx_queues(&self) -> Vec<RxQueueStats> {
        self.plugboard().rx_queues()
    }

    /// Megaflows alive in each thread, as of its last maintenance pass (at most
    /// `maintenance_ms` old; a sleeping thread's as it fell asleep).
    pub fn megaflow_counts(&self) -> Vec<u64> {
        self.looks.iter().map(|l| l.live()).collect()
    }

    /// Which underlay ports terminate which tunnel ports, and the drops of termination
    /// ([`crate::tunnels`]); set it before or after `start`.
    pub fn tunnels(&self) -> &Arc<Tunnels> {
        &self.tunnels
    }

    /// The captures of this datapath's frames ([`crate::capture`]).
    pub fn taps(&self) -> &Arc<Taps> {
        &self.taps
    }

    /// Every thread's megaflows, each thread answering from its maintenance check
    /// ([`crate::look`]); waits at most `deadline` and also returns the threads that did not
    /// answer in time.
    pub fn megaflows(&self, deadline: std::time::Duration) -> (Vec<MegaflowRecord>, Vec<usize>) {
        crate::look::dump(&self.looks, deadline)
    }

    /// Signalled when poll threads queued packet-ins (wait on its descriptor instead of
    /// polling the queue; clear it before taking them).
    pub fn packet_in_wake(&self) -> Arc<Wake> {
        self.packet_in_wake.clone()
    }

    /// The packet-out queue (as [`Datapath::injector`]).
    pub fn injector(&self) -> Injector {
        self.injector.clone()
    }

    /// Takes up to `max` packet-ins (as [`Datapath::packet_ins`]).
    pub fn packet_ins(&self, max: usize, f: impl FnMut(&PacketIn)) -> usize {
        self.packet_ins.take(max, f)
    }

    /// Adds `port` as OpenFlow port `ofport` while the threads run: its queues are opened
    /// and dealt out as [`Builder`] does (rx queues to the threads with the fewest), and this
    /// returns once every thread polls them (see [`crate::plug`]). Fails, changing nothing,
    /// when the number is taken, a queue does not open, or the datapath is stopped.
    pub fn add_port(&self, ofport: u32, port: Arc<dyn Port>) -> Result<(), DpError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(DpError(format!(
                "cannot add {}: the datapath is stopped",
                port.name()
            )));
        }
        self.plugboard().add(ofport, port)
    }

    /// Takes OpenFlow port `ofport` out while the threads run: every thread sends what it
    /// buffered for it, drops its queues and empties its caches; then the datapath lets go
    /// of the port (see [`crate::plug`]).
    pub fn remove_port(&self, ofport: u32) -> Result<(), DpError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(DpError(format!(
                "cannot remove port {ofport}: the datapath is stopped"
            )));
        }
        self.plugboard().remove(ofport)
    }

    /// Polices port `ofport`'s ingress from now on (`Policing::default()`: not at all);
    /// takes effect at each thread's next batch of the port. Also for a port not added yet.
    pub fn set_policing(&self, ofport: u32, policing: port::Policing) {
        self.policers.set(ofport, policing);
    }

    /// Port `ofport`'s ingress policing.
    pub fn policing(&self, ofport: u32) -> port::Policing {
        self.policers.port(ofport).policing()
    }

    /// Gives port `ofport` these egress queues from now on (`Egress::default()`: none);
    /// takes effect at each thread's next output batch to it. Also for a port not added yet.
    pub fn set_egress(&self, ofport: u32, egress: port::Egress) {
        self.shapers.set(ofport, egress);
    }

    /// Port `ofport`'s egress queues and cap as given.
    pub fn egress(&self, ofport: u32) -> port::Egress {
        self.shapers.port(ofport).egress()
    }

    /// Port `ofport`'s egress queues with their counters, and the packets it dropped for a
    /// queue it lacks ([`crate::egress`]).
    pub fn egress_queues(&self, ofport: u32) -> (Vec<EgressQueue>, u64) {
        let s = self.shapers.port(ofport);
        (s.queues(), s.unknown())
    }

    /// Port `ofport`'s queue 0 when it carries the port's unqueued packets without a row of
    /// its own ([`crate::egress::PortShaper::default_queue`]).
    pub fn egress_default_queue(&self, ofport: u32) -> Option<EgressQueue> {
        self.shapers.port(ofport).default_queue()
    }

    /// The OpenFlow numbers of the datapath's ports, in the order they joined.
    pub fn ports(&self) -> Vec<u32> {
        self.plugboard().ports()
    }

    fn plugboard(&self) -> std::sync::MutexGuard<'_, Plugboard> {
        self.plug.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the threads and waits for them; every packet they buffered is freed and every
    /// megaflow counter flushed. Counters stay readable; stopping twice does nothing.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.stop_wake.signal();
        for h in self.handles.drain(..) {
            if h.join().is_err() {
                eprintln!("datapath: a poll-mode thread panicked");
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread of each pinned queue, or an error naming the queue or core and the fix.
fn check_affinity(
    pins: &BTreeMap<u32, Vec<(u16, usize)>>,
    ports: &[(u32, Arc<dyn Port>)],
    threads: &[Option<usize>],
) -> Result<BTreeMap<(u32, u16), usize>, DpError> {
    let mut out = BTreeMap::new();
    for (ofport, pins) in pins {
        let Some((_, p)) = ports.iter().find(|(o, _)| o == ofport) else {
            return Err(DpError(format!(
                "rxq_affinity for OpenFlow port {ofport}, which the datapath does not have"
            )));
        };
        let queues = p.capabilities().rx_queues;
        for &(q, core) in pins {
            if q >= queues {
                return Err(DpError(format!(
                    "rxq_affinity={q}:{core} on {}: it has rx queues 0 ..= {}; fix the queue",
                    p.name(),
                    queues.saturating_sub(1)
                )));
            }
            let Some(t) = threads.iter().position(|c| *c == Some(core)) else {
                let cores: Vec<String> = threads
                    .iter()
                    .map(|c| c.map_or("unpinned".into(), |c| c.to_string()))
                    .collect();
                return Err(DpError(format!(
                    "rxq_affinity={q}:{core} on {}: no poll thread runs on core {core} (threads' \
                     cores: {}); add core {core} to the bridge's cores or fix the option",
                    p.name(),
                    cores.join(", ")
                )));
            };
            out.insert((*ofport, q), t);
        }
    }
    Ok(out)
}

/// Makes the calling thread a real-time one (`SCHED_FIFO`, the lowest real-time priority):
/// it runs as soon as it wakes, ahead of every normal thread on its core.
fn realtime() -> Result<(), String> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid sched_param for the call; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

//! The poll-mode thread state ([`Pmd`]) and the per-batch packet path.
//!
//! Size and owner: one `Pmd` per poll-mode thread, owning everything it touches per packet:
//! its rx queues, one tx queue per port, the exact-match cache, the megaflow classifier, the
//! megaflow arena, its [`PmdStats`] and scratch arrays for one batch (32 keys, hashes, ids),
//! all allocated once. Nothing else reads or writes them, so the path needs no lock.
//!
//! One rx batch goes: recv → (a policed port's excess dropped) → extract keys and hashes (prefetching the next packet) → EMC batch
//! lookup → classifier batch lookup for the EMC misses (hits are offered to the EMC) →
//! upcalls for the classifier misses, within the upcall budget → execute → flush outputs.
//!
//! Packets stay in the rx batch until they are executed, and each is moved once: into its
//! output batch. When every packet that is not dropped leaves through the same port (by the
//! output that takes the packet itself, whatever megaflows they hit), the actions before that
//! output run in place and the rx batch itself is handed to the output port
//! ([`Executor::forward_batch`]): no packet is moved at all. Otherwise packets run in arrival
//! order. Megaflow counters are added once per megaflow per batch.
//! Time for meters and budgets comes from a [`TscClock`], not a system call per batch.
//! While shaped egress queues hold packets ([`crate::egress`]), every poll — packets or not —
//! sends what their rates allow by then, and the thread does not sleep.
//!
//! Cache validity: at the start of each batch the thread compares [`Upcall::generation`] with
//! the generation its caches were built at. On a change it takes what the publishes changed
//! ([`Revalidator::take`]); every megaflow hit afterwards (EMC, classifier, or found again on
//! the upcall path) whose stamp is older is checked before use and removed when a change may
//! affect it ([`crate::revalidate`]), so the very next packets meet the new tables while the
//! megaflows no change reaches keep forwarding. Untracked changes (groups, meters, ports, MAC
//! learning) flush every megaflow's counters and empty the EMC, the classifier and the arena.
//!
//! Misses with the same key in one batch share one translation, within the upcall budget.
//!
//! This file is the path of a batch; beside it: `budget.rs` (the upcall budget and the
//! packet-in allowance, per rx queue), `police.rs` (a policed port's excess dropped right
//! after receive), `changes.rs`
//! (flow changes taken per generation and megaflows checked on a hit), `lane.rs` (the
//! priority lane's share of its core), `maintain.rs` (the periodic pass: counters flushed,
//! subtables re-ranked, idle megaflows swept), `time.rs` (the two time bases).

mod budget;
mod changes;
mod lane;
mod maintain;
mod police;
mod time;

pub use time::now_ns;

use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use packet::batch::low_bits;
use packet::key::parsed;
use packet::{extract_packet_on, Batch, FlowKey, Packet, PoolCache, BATCH_SIZE};
use pipeline::Translation;
use port::{Policing, RxQueue};

use crate::bits::{bit_iter, prefetch};
use crate::clock::TscClock;
use crate::config::DpConfig;
use crate::dpcls::{Dpcls, Insert};
use crate::emc::Emc;
use crate::emc_gate::EmcGate;
use crate::execute::{Executor, PacketIn, TxPort};
use crate::idle::{Idle, Step};
use crate::inject::{InjectQueue, Wake};
use crate::look::Look;
use crate::megaflow::{Actions, Arena, InPlace, MegaflowId, MegaflowPool, Plan, PortMap};
use crate::plug::Mailbox;
use crate::police::{Policers, PortPolicer};
use crate::revalidate::Revalidator;
use crate::rx_drops::{RxDrops, RxSlot};
use crate::stats::{cycles, Counter, LocalStats, PmdStats, Snapshot};
use crate::target::{Packed, Target};
use crate::tunnels::{Rx, Tunnels};
use crate::upcall::{Policer, Upcall};

use budget::Budget;
use lane::LaneWindow;
use maintain::SWEEP_SLOTS;
use time::pipeline_ms;

/// After a batch without trains (packets with the same key as the one before), batches
/// between two checks for them.
const TRAIN_RECHECK: u32 = 16;
/// Frames with these `parsed` bits are dropped before lookup (and counted).
const BAD_FRAME: u16 = parsed::TRUNCATED | parsed::MALFORMED;

/// Empty polls between clock reads when idle (for maintenance).
const IDLE_POLLS_PER_CHECK: u32 = 1024;

/// One batch's worth of working memory, allocated once.
struct Scratch {
    keys: [FlowKey; BATCH_SIZE],
    hashes: [u32; BATCH_SIZE],
    ids: [Option<MegaflowId>; BATCH_SIZE],
    targets: [Packed; BATCH_SIZE],
    /// Bit `i`: packet `i` has the same key as packet `i - 1`.
    same: u32,
    /// Bit `i`: packet `i` is truncated or malformed (dropped before lookup).
    malformed: u32,
    /// Bit `i`: `hashes[i]` holds packet `i`'s key hash.
    hashed: u32,
    /// Whether the last batch checked for trains had one.
    had_trains: bool,
    /// Batches since the last check for trains.
    since_train_check: u32,
    /// The rx batch; packets stay here until they are executed.
    batch: Batch,
    /// Bit `i`: packet `i` was a tunnel frame that termination dropped (counted by reason
    /// there; a subset of `malformed`, which takes it out of the batch).
    tun_dropped: u32,
    tr: Translation,
    /// Translations of this batch that were not installed, compiled.
    uncached: MegaflowPool,
    /// Idle megaflows found by a sweep.
    idle: Vec<MegaflowId>,
}

/// One poll-mode thread's state. Drive it with [`Pmd::poll_once`] (or [`Pmd::run`]).
pub struct Pmd {
    index: usize,
    core: Option<usize>,
    rx: Vec<RxSlot>,
    exec: Executor,
    emc: Emc,
    /// Whether the EMC is worth probing ([`crate::emc_gate`]).
    emc_gate: EmcGate,
    cls: Dpcls,
    arena: Arena,
    ports: PortMap,
    upcall: Box<dyn Upcall>,
    cfg: DpConfig,
    stats: Arc<PmdStats>,
    local: LocalStats,
    cache_gen: u64,
    /// What recent flow changes may have affected ([`crate::revalidate`]).
    reval: Revalidator,
    budget: Budget,
    next_maintenance_ns: u64,
    sweep_at: usize,
    idle_polls: u32,
    clock: TscClock,
    idle: Idle,
    s: Box<Scratch>,
    /// Packet-outs to run (thread 0 only; see [`crate::inject`]).
    inject: Option<InjectQueue>,
    /// The datapath's stop eventfd (among the descriptors the thread sleeps on).
    stop_wake: Option<Arc<Wake>>,
    /// Signalled after a poll that queued packet-ins.
    packet_in_wake: Option<Arc<Wake>>,
    /// Ports plugged in or out while running ([`crate::plug`]).
    mailbox: Option<Mailbox>,
    /// This thread is the priority lane.
    lane: bool,
    /// The lane's share of the core: busy time in the current window.
    lane_window: LaneWindow,
    /// Dumps asked of this thread ([`crate::look`]) and the last one answered.
    look: Arc<Look>,
    look_answered: u64,
    /// The datapath's terminating underlay ports ([`crate::tunnels`]).
    tunnels: Option<Arc<Tunnels>>,
}

impl std::fmt::Debug for Pmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmd")
            .field("index", &self.index)
            .field("core", &self.core)
            .field("rx_queues", &self.rx.len())
            .field("megaflows", &self.arena.len())
            .finish()
    }
}

/// Everything a [`Pmd`] is made of (see [`crate::Datapath::build_pmds`] for the usual way).
pub struct PmdParts {
    /// Thread index.
    pub index: usize,
    /// Core to pin to, if any.
    pub core: Option<usize>,
    /// Receive queues with the OpenFlow port they belong to.
    pub rx: Vec<(u32, Box<dyn RxQueue>)>,
    /// The tx table: one entry per port, in port order.
    pub tx: Vec<TxPort>,
    /// The thread's pool cache.
    pub cache: PoolCache,
    /// Translation of misses.
    pub upcall: Box<dyn Upcall>,
    /// Where packet-ins go.
    pub packet_ins: SyncSender<PacketIn>,
    /// Tunables.
    pub config: DpConfig,
}

impl Pmd {
    /// Assembles a thread's state. Allocates every table up front.
    pub fn new(p: PmdParts) -> Pmd {
        let ports = PortMap::new(
            p.tx.iter()
                .enumerate()
                .map(|(i, t)| (t.ofport, i as u16))
                .collect(),
        );
        let cfg = p.config;
        let uncached_cap = cfg.max_upcalls_per_batch as usize;
        let s = Box::new(Scratch {
            keys: [FlowKey::ZERO; BATCH_SIZE],
            hashes: [0; BATCH_SIZE],
            ids: [None; BATCH_SIZE],
            targets: [Packed::NONE; BATCH_SIZE],
            same: 0,
            malformed: 0,
            hashed: 0,
            had_trains: true,
            since_train_check: 0,
            batch: Batch::new(),
            tun_dropped: 0,
            tr: Translation::default(),
            uncached: MegaflowPool::with_capacity(uncached_cap.min(BATCH_SIZE)),
            idle: Vec::with_capacity(SWEEP_SLOTS),
        });
        let cache_gen = p.upcall.generation();
        let mut reval = Revalidator::new();
        reval.sync(&*p.upcall);
        let mut arena = Arena::new(cfg.max_megaflows);
        arena.set_stamp(reval.stamp());
        let look = Arc::new(Look::new());
        let idle = Idle::new(
            cfg.idle,
            p.rx.iter()
                .map(|(_, q)| q.readiness_fd())
                .chain(std::iter::once(look.wake.raw_fd())),
        );
        let rx =
            p.rx.into_iter()
                .map(|(ofport, q)| {
                    RxSlot::new(ofport, q, Arc::new(PortPolicer::new(Policing::default())))
                })
                .collect();
        Pmd {
            index: p.index,
            core: p.core,
            rx,
            exec: Executor::new(p.tx, p.cache, p.packet_ins).on_thread(p.index),
            emc: Emc::new(cfg.emc_entries, cfg.emc_insert_inv_prob),
            emc_gate: EmcGate::default(),
            cls: Dpcls::new(cfg.max_megaflows),
            arena,
            ports,
            upcall: p.upcall,
            stats: Arc::new(PmdStats::new()),
            local: LocalStats::default(),
            cache_gen,
            reval,
            budget: Budget::default(),
            next_maintenance_ns: 0,
            sweep_at: 0,
            idle_polls: 0,
            clock: TscClock::new(),
            idle,
            s,
            cfg,
            inject: None,
            stop_wake: None,
            packet_in_wake: None,
            mailbox: None,
            lane: false,
            lane_window: LaneWindow::default(),
            look,
            look_answered: 0,
            tunnels: None,
        }
    }

    /// Thread index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Core this thread should be pinned to.
    pub fn core(&self) -> Option<usize> {
        self.core
    }

    /// A copy of the thread's counters.
    pub fn stats(&self) -> Snapshot {
        self.stats.snapshot()
    }

    /// The thread's counters themselves (shared, readable from any thread).
    pub fn stats_handle(&self) -> &Arc<PmdStats> {
        &self.stats
    }

    /// Where dumps of this thread are asked for and answered ([`crate::look`]).
    pub fn look(&self) -> &Arc<Look> {
        &self.look
    }

    /// Megaflows installed in this thread.
    pub fn megaflows(&self) -> usize {
        self.arena.len()
    }

    /// Distinct megaflow masks (classifier subtables) in this thread.
    pub fn subtables(&self) -> usize {
        self.cls.subtables()
    }

    /// OpenFlow ports of the rx queues this thread polls.
    pub fn rx_ports(&self) -> impl Iterator<Item = u32> + '_ {
        self.rx.iter().map(|r| r.ofport)
    }

    /// The drop counters of each rx queue this thread polls, with its OpenFlow port.
    pub fn rx_drops(&self) -> impl Iterator<Item = (u32, &Arc<RxDrops>)> + '_ {
        self.rx.iter().map(|r| (r.ofport, &r.drops))
    }

    /// Whether this thread is the priority lane: the thread that reads the ports' priority
    /// receive queues ([`port::Port::priority_queues`]) and runs ahead of the poll threads.
    pub fn is_lane(&self) -> bool {
        self.lane
    }

    /// Polices each rx queue by its port's policer in `policers` ([`crate::police`]).
    pub(crate) fn attach_policers(&mut self, policers: &Policers) {
        for r in self.rx.iter_mut() {
            r.police = policers.port(r.ofport);
        }
    }

    /// Judges each output by its port's egress queues in `shapers` ([`crate::egress`]).
    pub(crate) fn attach_shapers(&mut self, shapers: &crate::egress::Shapers) {
        self.exec.attach_shapers(shapers);
    }

    /// Lets the datapath's captures ([`crate::capture`]) see this thread's frames.
    pub(crate) fn attach_taps(&mut self, taps: Arc<crate::capture::Taps>) {
        self.exec.tap = crate::capture::Tap::new(taps, self.index);
    }

    /// Lets this thread terminate the tunnels the datapath's table names ([`crate::tunnels`]).
    pub(crate) fn attach_tunnels(&mut self, tunnels: Arc<Tunnels>) {
        self.ports.set_tunnels(Some(tunnels.clone()));
        self.tunnels = Some(tunnels);
    }

    /// Signals `wake` after each poll that queued packet-ins.
    pub(crate) fn attach_packet_in_wake(&mut self, wake: Arc<Wake>) {
        self.packet_in_wake = Some(wake);
    }

    /// Makes this thread the one that runs packet-outs; their eventfd joins the descriptors
    /// it sleeps on.
    pub(crate) fn attach_inject(&mut self, q: InjectQueue) {
        self.inject = Some(q);
        self.rebuild_idle();
    }

    /// The datapath's stop eventfd joins the descriptors this thread sleeps on.
    pub(crate) fn attach_stop_wake(&mut self, wake: Arc<Wake>) {
        self.stop_wake = Some(wake);
        self.rebuild_idle();
    }

    /// Port changes reach this thread through `mailbox`; its eventfd joins the descriptors
    /// it sleeps on.
    pub(crate) fn attach_mailbox(&mut self, mailbox: Mailbox) {
        self.mailbox = Some(mailbox);
        self.rebuild_idle();
    }

    /// Idle state over the rx queues' descriptors and the wake-ups (packet-outs, stop, port
    /// changes).
    fn rebuild_idle(&mut self) {
        let inject = self.inject.as_ref().map(|q| q.wake_fd());
        let stop = self.stop_wake.as_ref().map(|w| w.raw_fd());
        let plug = self.mailbox.as_ref().map(|m| m.wake_fd());
        let look = self.look.wake.raw_fd();
        self.idle = Idle::new(
            self.cfg.idle,
            self.rx
                .iter()
                .map(|r| r.queue.readiness_fd())
                .chain(inject)
                .chain(stop)
                .chain(plug)
                .chain(std::iter::once(look)),
        );
    }

    /// Polls every rx queue once and processes what arrived. Returns packets processed.
    ///
    /// The fair share of the thread: each queue gets one receive of at most one batch (32
    /// packets) per round, in turn, so a queue that always has packets takes one batch's
    /// time per round and the others still get theirs (`pmd/tests.rs`,
    /// `a_full_queue_does_not_starve_its_neighbour`).
    pub fn poll_once(&mut self) -> usize {
        if self.mailbox.as_ref().is_some_and(Mailbox::changed) {
            self.take_port_changes();
        }
        let mut total = 0;
        if let Some(q) = &mut self.inject {
            let n = q.drain(
                &mut self.exec,
                &self.ports,
                &*self.upcall,
                &now_ns,
                &mut self.local,
            );
            if n != 0 {
                self.exec.flush(&mut self.local);
                total += n;
            }
        }
        for q in 0..self.rx.len() {
            let t0 = cycles();
            let slot = &mut self.rx[q];
            let ofport = slot.ofport;
            let n = slot.queue.recv(&mut self.s.batch);
            if n == 0 {
                self.local
                    .add(Counter::IdleCycles, cycles().wrapping_sub(t0));
                continue;
            }
            if self.exec.tap.active() {
                let now = self.clock.at(t0);
                self.exec
                    .tap
                    .offer(ofport, true, self.s.batch.as_slice(), now);
            }
            // Drops of this batch are the rx queue's too (per port, `crate::rx_drops`).
            let mark = RxDrops::mark(&self.local);
            if self.rx[q].police.is_on() && self.police(q, t0) == 0 {
                self.rx[q].drops.record(&mark, &self.local);
                total += n;
                continue;
            }
            self.process(ofport, q, t0);
            self.rx[q].drops.record(&mark, &self.local);
            total += n;
        }
        if self.exec.holds_packets() {
            // Shaped queues hold packets: send what their rates allow by now.
            self.exec.now_ns = self.clock.now_ns();
            self.exec.release_held(&mut self.local);
        }
        if total == 0 {
            self.idle_polls += 1;
            if self.idle_polls >= IDLE_POLLS_PER_CHECK {
                self.idle_polls = 0;
                let now = self.clock.now_ns();
                self.maybe_maintain(now);
            }
        }
        if let Some(w) = &self.packet_in_wake {
            if self.local.get(Counter::PacketIns) != 0 {
                w.signal();
            }
        }
        self.stats.absorb(&mut self.local);
        total
    }

    /// Polls until `stop` turns true, then flushes counters and frees buffered packets.
    /// Sleeps when the queues stay empty (see [`crate::idle`]).
    pub fn run(&mut self, stop: &std::sync::atomic::AtomicBool) {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let t0 = if self.lane { self.clock.now_ns() } else { 0 };
            if self.poll_once() != 0 {
                self.idle.busy();
                if self.lane {
                    self.lane_budget(t0);
                }
                continue;
            }
            if self.exec.holds_packets() {
                // Never asleep while holding packets: they leave as the rates allow (a
                // thread that shares its core still lets the core's other threads run).
                if self.cfg.idle.yield_when_empty {
                    Idle::yield_core();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            let now = self.clock.now_ns();
            match self.idle.empty(now) {
                Step::Spin => std::hint::spin_loop(),
                Step::Yield => Idle::yield_core(),
                Step::Sleep => {
                    self.maybe_maintain(now);
                    // Sleeps may be long: leave the flow entries' counters current.
                    self.arena.flush_dirty(pipeline_ms(now));
                    // No megaflow to age: sleep until packets, a packet-out or the stop.
                    let stoppable = self
                        .stop_wake
                        .as_ref()
                        .is_some_and(|w| w.raw_fd().is_some());
                    self.idle.sleep(stoppable && self.arena.is_empty());
                    self.local.add(Counter::IdleSleeps, 1);
                    self.stats.absorb(&mut self.local);
                }
            }
        }
        self.shutdown();
    }

    /// Flushes megaflow counters and frees every packet this thread still buffers.
    pub fn shutdown(&mut self) {
        if let Some(q) = &mut self.inject {
            q.discard(self.exec.cache());
        }
        self.arena.flush_dirty(pipeline::dpaction::now_ms());
        self.exec.discard();
        self.s.batch.free_into(self.exec.cache());
        self.stats.absorb(&mut self.local);
    }

    /// Processes the packets in the scratch batch, received on `in_port` from rx queue `q`.
    fn process(&mut self, in_port: u32, q: usize, t0: u64) {
        let now = self.clock.at(t0);
        self.exec.now_ns = now;
        self.check_generation();
        // When a classifier lookup probes few subtables it costs about what an EMC probe
        // does, and the EMC only adds a probe (and inserts) in front of it.
        let probe = self.emc_in_use() && self.emc.probe_this_batch();
        let mut n = self.extract(in_port, probe);
        if self.s.malformed != 0 {
            n = self.drop_malformed();
            if n == 0 {
                return;
            }
        }
        let (hits, miss) = self.lookup(n, probe);
        self.roll_budget(now, hits);
        if miss != 0 {
            self.ensure_hashes(miss);
            self.handle_misses(q, miss, t0);
        }
        if self.cfg.packet_in_port_rate != 0 {
            let allowed = self.allow_packet_ins(q, now);
            self.execute(n);
            self.settle_packet_ins(q, allowed);
        } else {
            self.execute(n);
        }
        self.exec.flush(&mut self.local);
        self.s.uncached.clear();
        let busy = cycles().wrapping_sub(t0);
        self.local.add(Counter::BusyCycles, busy);
        self.budget.busy += busy;
        self.maybe_maintain(now);
    }

    /// Whether the EMC is probed and filled at all: always with `emc_min_subtables` 0, else
    /// while the classifier has more subtables than that and its lookups probe many of them
    /// ([`crate::emc_gate`]).
    #[inline(always)]
    fn emc_in_use(&self) -> bool {
        self.cfg.emc_min_subtables == 0
            || (self.cls.subtables() > self.cfg.emc_min_subtables && self.emc_gate.is_open())
    }

    fn check_generation(&mut self) {
        let g = self.upcall.generation();
        if g != self.cache_gen {
            self.cache_gen = g;
            if self.cfg.revalidate {
                self.take_changes();
            } else {
                self.flush_caches();
            }
        }
    }

    /// Empties the EMC, the classifier and the arena (megaflow counters flushed first).
    fn flush_caches(&mut self) {
        self.arena.clear(pipeline::dpaction::now_ms());
        self.cls.clear();
        self.emc.clear();
        self.local.add(Counter::CacheFlushes, 1);
    }

    /// Applies the port changes posted to this thread, between batches ([`crate::plug`]):
    /// queues in or out, then caches emptied (megaflows name outputs by tx-table index),
    /// then acknowledged.
    #[cold]
    fn take_port_changes(&mut self) {
        let Some(mut mailbox) = self.mailbox.take() else {
            return;
        };
        let acks: Vec<_> = mailbox
            .take()
            .into_iter()
            .map(|l| l.apply(&mut self.rx, &mut self.exec, &mut self.local))
            .collect();
        self.mailbox = Some(mailbox);
        self.ports = self.exec.port_map();
        self.ports.set_tunnels(self.tunnels.clone());
        self.flush_caches();
        self.rebuild_idle();
        self.stats.absorb(&mut self.local);
        for ack in acks {
            ack.send();
        }
    }

    /// Extracts keys and hashes of the packets in the rx batch (they stay where they are),
    /// terminating tunnel frames first when `in_port` is an underlay port
    /// ([`crate::tunnels`]): a tunnel packet is extracted from its inner frame, with the
    /// outer headers' fields in its key; a frame termination drops is marked `malformed`
    /// and `tun_dropped` (it leaves with the malformed ones, counted as received).
    /// A packet whose key equals the previous packet's (a train of one flow) takes that
    /// packet's hash and is marked in `s.same`, so the lookup can skip it. Hashes are only
    /// computed when the EMC is probed in this batch (`hash`); otherwise they are computed
    /// later for the packets that need one ([`Pmd::ensure_hashes`], EMC inserts).
    fn extract(&mut self, in_port: u32, hash: bool) -> usize {
        let table = self.tunnels.as_deref().map(Tunnels::rx_table);
        let term = table.as_ref().and_then(|t| t.port(in_port));
        let thread = self.index;
        let s = &mut *self.s;
        let pkts = s.batch.as_mut_slice();
        let n = pkts.len();
        s.same = 0;
        s.malformed = 0;
        s.tun_dropped = 0;
        s.targets[..n].fill(Packed::NONE);
        // Stage 1: parse every packet (asking for the bytes of the one two places on:
        // `parse_next`); a loop of its own for an underlay port, so that a plain port's
        // packets pay nothing for tunnels.
        let bytes = match term {
            None => {
                let mut bytes = 0u64;
                ask_for_first::<1>(pkts);
                for i in 0..n {
                    let p = parse_next::<1>(pkts, i);
                    let parsed = extract_packet_on(p, in_port, &mut s.keys[i]);
                    s.malformed |= bad_frame(parsed) << i;
                    bytes += p.len() as u64;
                }
                bytes
            }
            Some(mut t) => {
                let mut bytes = 0u64;
                ask_for_first::<2>(pkts);
                for i in 0..n {
                    let p = parse_next::<2>(pkts, i);
                    // A frame of the batch's train first, on a path of nothing else: its
                    // inner frame's bytes go to the parse straight from the train's check.
                    let parsed = if let Some(m) = t.follow(p) {
                        extract_tunneled(p, m, &mut s.keys[i])
                    } else {
                        match t.receive(thread, p) {
                            Rx::Tunnel(m) => extract_tunneled(p, m, &mut s.keys[i]),
                            Rx::NotTunnel => extract_packet_on(p, in_port, &mut s.keys[i]),
                            Rx::Drop => {
                                p.meta.in_port = in_port;
                                s.keys[i] = FlowKey::ZERO;
                                s.tun_dropped |= 1 << i;
                                parsed::MALFORMED
                            }
                        }
                    };
                    s.malformed |= bad_frame(parsed) << i;
                    bytes += p.len() as u64;
                }
                t.finish(thread);
                bytes
            }
        };
        // Stage 2: hash, reading the keys with wide loads only now that the narrow stores of
        // stage 1 are done (a wide load right after them cannot be forwarded and stalls).
        // Look for trains only while they occur (and in one batch in TRAIN_RECHECK after a
        // batch without any): with every packet a different flow the compare is wasted.
        s.since_train_check += 1;
        let trains = s.had_trains || s.since_train_check >= TRAIN_RECHECK;
        if trains {
            s.since_train_check = 0;
        }
        if hash {
            for (i, p) in pkts.iter_mut().enumerate() {
                let h = if trains && i > 0 && s.keys[i] == s.keys[i - 1] {
                    s.same |= 1 << i;
                    s.hashes[i - 1]
                } else {
                    s.keys[i].hash()
                };
                p.meta.hash = h;
                s.hashes[i] = h;
            }
            s.hashed = low_bits(n);
        } else {
            for i in 1..n {
                if trains && s.keys[i] == s.keys[i - 1] {
                    s.same |= 1 << i;
                }
            }
            s.hashed = 0;
        }
        if trains {
            s.had_trains = s.same != 0;
        }
        self.local.add(Counter::RxPackets, n as u64);
        self.local.add(Counter::RxBytes, bytes);
        n
    }

    /// Takes truncated or malformed frames out of the batch (freed, counted as
    /// `drop_malformed`, or by termination when it dropped them; they stay counted as
    /// received) and closes the gaps in the keys,
    /// hashes and targets extracted for the rest, so nothing is extracted twice. Runs only
    /// for batches that carried such a frame.
    #[cold]
    fn drop_malformed(&mut self) -> usize {
        let s = &mut *self.s;
        let bad = s.malformed;
        let (mut k, mut hashed) = (0usize, 0u32);
        for i in 0..s.batch.len() {
            if bad & (1 << i) != 0 {
                continue;
            }
            if k != i {
                s.keys[k] = s.keys[i];
                s.hashes[k] = s.hashes[i];
                s.targets[k] = s.targets[i];
            }
            hashed |= ((s.hashed >> i) & 1) << k;
            k += 1;
        }
        let (mut i, mut dropped) = (0, 0u64);
        let cache = self.exec.cache();
        s.batch.retain_or(
            |_| {
                let keep = bad & (1 << i) == 0;
                i += 1;
                keep
            },
            |p| {
                dropped += 1;
                cache.free(p);
            },
        );
        s.hashed = hashed;
        // A survivor's predecessor may have gone: no packet takes another's result.
        s.same = 0;
        s.malformed = 0;
        // Termination counted its own drops, by reason.
        let tunnel = u64::from(s.tun_dropped.count_ones());
        s.tun_dropped = 0;
        self.local.add(Counter::DropMalformed, dropped - tunnel);
        k
    }

    /// EMC then classifier. Returns (cache hits, mask of packets that missed both).
    /// Packets with the same key as their predecessor (`s.same`) are not looked up: they
    /// take its result, counted in the tier that answered it (and go on to the upcall with it
    /// when both missed). When the EMC is not probed in this batch (it thrashes, or the
    /// classifier is as cheap), the other packets go straight to the classifier.
    fn lookup(&mut self, n: usize, probe_emc: bool) -> (u64, u32) {
        let s = &mut *self.s;
        let all = low_bits(n);
        let lead = all & !s.same;
        let probe = if probe_emc { lead } else { 0 };
        let mut miss = if probe_emc {
            self.emc
                .lookup_masked(&s.keys[..n], &s.hashes[..n], probe, &mut s.ids)
        } else {
            lead
        };
        // An EMC entry whose megaflow died is a miss.
        let mut emc_hit = probe & !miss;
        for i in bit_iter(emc_hit) {
            let id = self.s.ids[i];
            match id {
                Some(id) if self.usable(id) => self.s.targets[i] = Target::Flow(id).into(),
                _ => {
                    miss |= 1 << i;
                    emc_hit &= !(1 << i);
                }
            }
        }
        let mut cls_hit = 0u32;
        if miss != 0 && !self.cls.is_empty() {
            let s = &mut *self.s;
            let mut probes = 0;
            let left = self
                .cls
                .lookup_batch(&s.keys[..n], miss, &mut s.ids, &mut probes);
            self.local.add(Counter::MegaflowProbes, probes);
            cls_hit = miss & !left;
            self.emc_gate.record(cls_hit.count_ones(), probes);
            miss = left;
            // The megaflows are scattered over a table larger than L1: start loading every
            // hit's hot entry now, so the loads overlap each other and the EMC inserts below.
            for i in bit_iter(cls_hit) {
                if let Some(id) = s.ids[i] {
                    self.arena.prefetch(id);
                }
            }
            for i in bit_iter(cls_hit) {
                if let Some(id) = self.s.ids[i] {
                    if !self.usable(id) {
                        cls_hit &= !(1 << i);
                        miss |= 1 << i;
                        continue;
                    }
                    let s = &mut *self.s;
                    s.targets[i] = Target::Flow(id).into();
                    if probe_emc {
                        let (key, hashed, hash) =
                            (&s.keys[i], s.hashed & (1 << i) != 0, s.hashes[i]);
                        self.emc
                            .insert_with(key, id, || if hashed { hash } else { key.hash() });
                    }
                }
            }
        }
        // Followers take their predecessor's result (in order: a follower may lead the next).
        let s = &mut *self.s;
        for i in bit_iter(s.same & all) {
            let prev = 1u32 << (i - 1);
            if miss & prev != 0 {
                miss |= 1 << i;
            } else {
                s.targets[i] = s.targets[i - 1];
                if emc_hit & prev != 0 {
                    emc_hit |= 1 << i;
                } else {
                    cls_hit |= 1 << i;
                }
            }
        }
        let emc_hits = emc_hit.count_ones() as u64;
        let cls_hits = cls_hit.count_ones() as u64;
        self.local.add(Counter::EmcHits, emc_hits);
        self.local.add(Counter::MegaflowHits, cls_hits);
        (emc_hits + cls_hits, miss)
    }

    /// Computes the key hash of every packet in `bits` that has none yet (before upcalls,
    /// which use hashes to find repeated keys and to fill the EMC).
    fn ensure_hashes(&mut self, bits: u32) {
        let s = &mut *self.s;
        let pkts = s.batch.as_mut_slice();
        for i in bit_iter(bits & !s.hashed) {
            if let Some(p) = pkts.get_mut(i) {
                let h = s.keys[i].hash();
                p.meta.hash = h;
                s.hashes[i] = h;
            }
        }
        s.hashed |= bits;
    }

    fn handle_misses(&mut self, q: usize, miss: u32, batch_t0: u64) {
        // The batch's time, not a clock read per upcall.
        let now_ms = pipeline_ms(self.exec.now_ns);
        // One cycle-counter read per upcall: the end of one is the start of the next (the
        // duplicate checks in between count as upcall work).
        let mut t = cycles();
        let mut done = 0u32;
        let mut installed = false;
        let mut bits = miss;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            // One translation per new flow: reuse an earlier miss's result for the same key
            // (hashes first: a full key compare only when they agree).
            let earlier = miss & low_bits(i);
            let s = &*self.s;
            if let Some(j) =
                bit_iter(earlier).find(|&j| s.hashes[j] == s.hashes[i] && s.keys[j] == s.keys[i])
            {
                self.s.targets[i] = self.s.targets[j];
                continue;
            }
            // A megaflow installed for an earlier miss of this batch may cover this key.
            if installed {
                if let Some(id) = self.cls.lookup(&self.s.keys[i]) {
                    if self.usable(id) {
                        self.s.targets[i] = Target::Flow(id).into();
                        continue;
                    }
                }
            }
            if !self.upcall_allowed(q, done, batch_t0, t) {
                self.s.targets[i] = Target::Shed.into();
                continue;
            }
            done += 1;
            let target = self.upcall_one(i, now_ms);
            if matches!(target, Target::Flow(_)) {
                installed = true;
            }
            self.s.targets[i] = target.into();
            let t_end = cycles();
            let spent = t_end.wrapping_sub(t);
            t = t_end;
            if let Some(r) = self.rx.get_mut(q) {
                r.upcall_cycles += spent;
            }
            self.local.add(Counter::UpcallCycles, spent);
        }
        self.local.add(Counter::Upcalls, done as u64);
    }

    /// Translates the key of packet `i` and installs its megaflow, evicting the least
    /// recently used one (a clock sweep, [`Arena::victim`]) when the table is full. The
    /// megaflow is kept for this batch only when it may not be cached, or when every
    /// megaflow is in use by this batch. Allocates nothing once the arena slots are warm.
    ///
    /// The victim is chosen first and its classifier slot prefetched, so the translation
    /// hides that cache miss; the new megaflow takes the arena's spare slot and is compiled
    /// while the victim's classifier entry loads, and only then is the victim removed.
    fn upcall_one(&mut self, i: usize, now_ms: u64) -> Target {
        let emc_in_use = self.emc_in_use();
        let s = &mut *self.s;
        let victim = if self.arena.is_full() {
            // Megaflows this batch's packets already resolved to must survive until execute.
            let targets = &s.targets;
            let v = self
                .arena
                .victim(|id| targets.contains(&Target::Flow(id).into()));
            v.and_then(|v| {
                let mf = self.arena.get(v)?;
                Some((v, self.cls.prefetch_remove(&mf.key, &mf.mask)))
            })
        } else {
            None
        };
        s.tr.clear();
        self.upcall.translate(&s.keys[i], &mut s.tr);
        let upcall = &self.upcall;
        let meter = |id: u32| upcall.meter(id);
        let key = &s.keys[i];
        if !s.tr.cacheable {
            return push_uncached(&mut s.uncached, key, &s.tr, &self.ports, &meter, now_ms);
        }
        match victim {
            Some((_, Some(hint))) => self.cls.prefetch_remove_entry(hint),
            Some((_, None)) => {}
            None if self.arena.is_full() => {
                self.local.add(Counter::MegaflowFull, 1);
                return push_uncached(&mut s.uncached, key, &s.tr, &self.ports, &meter, now_ms);
            }
            None => {}
        }
        let Some((id, mf)) = self.arena.insert_from(key, &s.tr, now_ms) else {
            self.local.add(Counter::MegaflowFull, 1);
            return push_uncached(&mut s.uncached, key, &s.tr, &self.ports, &meter, now_ms);
        };
        mf.actions.compile(&s.tr.actions, &self.ports, &meter);
        self.arena.compiled(id);
        if let Some((v, hint)) = victim {
            if let Some(old) = self.arena.remove(v, now_ms) {
                match hint {
                    Some(hint) => self.cls.remove_hinted(hint, &old.key, &old.mask),
                    None => self.cls.remove(&old.key, &old.mask),
                };
                self.local.add(Counter::MegaflowEvictions, 1);
            }
        }
        let Some(mf) = self.arena.get(id) else {
            // Cannot happen (nothing removes it in between); handle the packet anyway.
            return push_uncached(&mut s.uncached, key, &s.tr, &self.ports, &meter, now_ms);
        };
        let trail = mf.trail;
        let mut inserted = self.cls.insert(&mf.key, &mf.mask, id);
        if let Insert::Duplicate(existing) = inserted {
            if !self.arena.is_current(existing) {
                // A megaflow with this key and mask from before a publish, not checked since:
                // this fresh translation replaces it.
                if let Some(old) = self.arena.remove(existing, now_ms) {
                    self.cls.remove(&old.key, &old.mask);
                    self.local.add(Counter::MegaflowInvalidated, 1);
                }
                if let Some(mf) = self.arena.get(id) {
                    inserted = self.cls.insert(&mf.key, &mf.mask, id);
                }
            }
        }
        match inserted {
            Insert::Installed => {
                self.reval.note_install(&trail);
                self.local.add(Counter::MegaflowInstalls, 1);
                if emc_in_use {
                    self.emc.insert(key, s.hashes[i], id);
                }
                Target::Flow(id)
            }
            Insert::Duplicate(existing) => {
                self.arena.remove(id, now_ms);
                Target::Flow(existing)
            }
            Insert::Full => {
                self.arena.remove(id, now_ms);
                self.local.add(Counter::MegaflowFull, 1);
                push_uncached(&mut s.uncached, key, &s.tr, &self.ports, &meter, now_ms)
            }
        }
    }

    /// Runs every packet's actions and empties the rx batch. Packets run in arrival order (so
    /// each output sees them in that order).
    ///
    /// When every packet that is not dropped leaves through the same port, by the output that
    /// takes the packet itself (the usual case: one flow, or many flows to one uplink), the
    /// actions before that output run on the packets where they are, dropped packets are
    /// taken out, and the rx batch is handed to the port ([`Executor::forward_batch`]): no
    /// packet is moved. Otherwise each packet is moved once, into its output's batch.
    fn execute(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        if let Some((port, rewrites)) = self.count_and_route(n) {
            self.hand_over(n, port, rewrites);
            return;
        }
        let Scratch {
            batch,
            targets,
            uncached,
            ..
        } = &mut *self.s;
        let mut current = Packed::NONE;
        let mut actions: Option<&Actions> = None;
        for (j, pkt) in batch.drain().enumerate() {
            let target = targets[j];
            if target != current {
                current = target;
                actions = Pmd::actions_of(&self.arena, uncached, target.get());
            }
            match actions {
                Some(a) => self.exec.run(pkt, a, &mut self.local),
                None => {
                    self.local.add(Counter::UpcallShed, 1);
                    self.exec.cache().free(pkt);
                }
            }
        }
    }

    /// The actions of `target`, if it has any.
    #[inline(always)]
    fn actions_of<'a>(
        arena: &'a Arena,
        uncached: &'a MegaflowPool,
        target: Target,
    ) -> Option<&'a Actions> {
        match target {
            Target::Flow(id) => arena.get(id).map(|m| &m.actions),
            Target::Uncached(u) => uncached.get(u as usize).map(|m| &m.actions),
            Target::None | Target::Shed => None,
        }
    }

    /// One pass over the batch's runs of packets with the same target: adds each run's
    /// packets and bytes to its megaflow's counters, and finds the one port every kept
    /// packet leaves through by its moving output, with whether some packet has work to do
    /// in place first (ops before the output, or a drop). `None` when packets go to several
    /// ports, need the general path, or are all dropped.
    fn count_and_route(&mut self, n: usize) -> Option<(u16, bool)> {
        let s = &mut *self.s;
        let pkts = s.batch.as_slice();
        let n = n.min(pkts.len());
        let now_ms = pipeline_ms(self.exec.now_ns);
        let mut port = None;
        let mut work = false;
        let mut single = true;
        let mut j = 0;
        while j < n {
            let target = s.targets[j];
            let (mut packets, mut bytes) = (0u64, 0u64);
            while j < n && s.targets[j] == target {
                packets += 1;
                bytes += pkts[j].len() as u64;
                j += 1;
            }
            // A megaflow's hot entry counts the run and says where it goes, without loading
            // the megaflow itself.
            let fast = match target.get() {
                Target::Flow(id) => self.arena.count_fast(id, packets, bytes),
                Target::Uncached(u) => s.uncached.get_mut(u as usize).map(|m| {
                    m.count(packets, bytes);
                    m.flush(now_ms);
                    let a = &m.actions;
                    (a.in_place(), !matches!(a.plan, Plan::Forward(_)))
                }),
                Target::None | Target::Shed => None,
            };
            if !single {
                continue;
            }
            match fast {
                None => work = true,
                Some((InPlace::Forward(p), needs_work)) => {
                    single = *port.get_or_insert(p) == p;
                    work |= needs_work;
                }
                Some((InPlace::Drop, _)) => work = true,
                Some((InPlace::No, _)) => single = false,
            }
        }
        if single {
            port.map(|p| (p, work))
        } else {
            None
        }
    }

    /// Runs in-place work (when `work`), takes dropped packets out, hands the batch to `port`.
    fn hand_over(&mut self, n: usize, port: u16, work: bool) {
        let Scratch {
            batch,
            targets,
            uncached,
            same,
            ..
        } = &mut *self.s;
        let mut dropped = 0u32;
        if work {
            let pkts = batch.as_mut_slice();
            let n = n.min(pkts.len());
            let mut j = 0;
            while j < n {
                let target = targets[j];
                let start = j;
                while j < n && targets[j] == target {
                    j += 1;
                }
                match Pmd::actions_of(&self.arena, uncached, target.get()) {
                    Some(a) => {
                        let run = &mut pkts[start..j];
                        let d = self
                            .exec
                            .run_in_place(run, a, *same >> start, &mut self.local);
                        dropped |= d << start;
                    }
                    None => {
                        self.local.add(Counter::UpcallShed, (j - start) as u64);
                        dropped |= low_bits(j - start) << start;
                    }
                }
            }
        }
        if dropped != 0 {
            let mut j = 0;
            let exec = &mut self.exec;
            batch.retain_or(
                |_| {
                    let keep = dropped & (1 << j) == 0;
                    j += 1;
                    keep
                },
                |p| exec.cache().free(p),
            );
        }
        self.exec.forward_batch(port, batch, &mut self.local);
    }
}

impl Drop for Pmd {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Keeps the translation `tr` of `key` as a megaflow for this batch only.
fn push_uncached(
    pool: &mut MegaflowPool,
    key: &FlowKey,
    tr: &Translation,
    ports: &PortMap,
    meter: &dyn Fn(u32) -> Option<Arc<dyn Policer>>,
    now_ms: u64,
) -> Target {
    let (i, mf) = pool.push_from(key, tr, now_ms);
    mf.actions.compile(&tr.actions, ports, meter);
    Target::Uncached(i as u8)
}

/// Asks for the first `LINES` cache lines of the frame of `pkt`: 1 on a plain port (the
/// headers of a common frame fit in its first line), 2 on an underlay port, where a tunnel
/// packet's inner headers start 50 bytes in.
#[inline(always)]
fn ask_for<const LINES: usize>(pkt: &Packet) {
    let d = pkt.data().as_ptr();
    for line in 0..LINES {
        prefetch(d.wrapping_add(line * 64));
    }
}

/// [`ask_for`] the first two packets of a batch, which [`parse_next`] does not.
#[inline(always)]
fn ask_for_first<const LINES: usize>(pkts: &[Packet]) {
    pkts.iter().take(2).for_each(ask_for::<LINES>);
}

/// Packet `i` of a batch about to be parsed, with the bytes of the one two places on asked
/// for ([`ask_for`]) and its queue reset (queue 0 until a `set_queue` says otherwise:
/// `crate::egress`). Two places on, not one: a frame's lines, written by the port a moment
/// ago, are often out of L1 already, and one packet's parse is too short a wait for them.
#[inline(always)]
fn parse_next<const LINES: usize>(pkts: &mut [Packet], i: usize) -> &mut Packet {
    if let Some(next) = pkts.get(i + 2) {
        ask_for::<LINES>(next);
    }
    let p = &mut pkts[i];
    p.meta.user = 0;
    p
}

/// Extracts the key of `p`, a terminated tunnel packet now holding its inner frame, with its
/// tunnel port as `in_port` and the outer headers' fields from `m`; the inner frame's
/// `parsed` bits.
#[inline(always)]
fn extract_tunneled(p: &mut Packet, m: &tunnel::TunMeta, key: &mut FlowKey) -> u16 {
    let parsed = extract_packet_on(p, m.ofport, key);
    m.write(key);
    parsed
}

/// 1 when extraction found the frame truncated or malformed (its `parsed` bits), else 0.
#[inline(always)]
fn bad_frame(parsed: u16) -> u32 {
    ((parsed & BAD_FRAME) != 0) as u32
}

#[cfg(test)]
mod tests;

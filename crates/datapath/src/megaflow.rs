//! Megaflows: a masked key, the mask, the compiled actions and counters — and the per-thread
//! arena that owns them.
//!
//! Size and owner: one [`Arena`] per poll-mode thread holding at most `max_megaflows`
//! (default 200k) megaflows of 384 bytes each (77 MB at the default), reserved up front and
//! never grown; only that thread reads or writes it. The exact-match cache and the classifier
//! name megaflows by [`MegaflowId`] (slot index + slot generation), so a slot that is freed
//! and reused never answers for an id that pointed at its previous tenant.
//!
//! A full arena makes room by eviction, not by refusing the install: [`Arena::victim`] runs a
//! clock sweep over the slots (approximate LRU: a megaflow used since the hand last passed it
//! gets a second chance), the victim's counters are flushed and its slot is refilled in place
//! by the next install ([`Arena::insert_from`]), its action and flow-counter lists reused. So
//! a flood of new flows reaches a steady state with no allocation and no page faults.
//!
//! Actions are compiled once, at install: `Output(ofport)` becomes an index into the thread's
//! tx table, meters are resolved to their token bucket, and a [`Plan`] records the cheap cases
//! (drop, a single output that moves the packet) so the executor skips the general loop.
//!
//! Counters: a megaflow counts packets and bytes in plain `u64`s (the thread owns it) and adds
//! them to the flow entries' [`FlowCounters`] when the thread flushes (every ~100 ms and when the
//! megaflow dies). Flushing walks only the "dirty" list of megaflows hit since the last flush.

use std::sync::Arc;

use packet::{Field, FlowKey};
use pipeline::{DpAction, FlowCounters, PacketInReason, Translation};

use crate::upcall::Policer;

/// Names a megaflow in its thread's [`Arena`]: slot index plus the slot's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MegaflowId {
    idx: u32,
    gen: u32,
}

impl MegaflowId {
    /// An id for slot `idx` at generation `gen`.
    pub const fn new(idx: u32, gen: u32) -> MegaflowId {
        MegaflowId { idx, gen }
    }

    /// The slot index.
    pub const fn index(self) -> usize {
        self.idx as usize
    }

    /// The slot generation the id was issued at.
    pub const fn generation(self) -> u32 {
        self.gen
    }
}

/// One compiled action.
#[derive(Clone)]
pub enum Op {
    /// Send to the port at this index of the thread's tx table.
    Output(u16),
    /// Rewrite a header field.
    SetField {
        /// The field.
        field: Field,
        /// Its new value.
        value: u128,
    },
    /// Push a VLAN tag.
    PushVlan {
        /// Ethertype of the tag.
        tpid: u16,
        /// PCP/DEI/VID.
        tci: u16,
    },
    /// Pop the outer VLAN tag.
    PopVlan,
    /// Decrement the TTL / hop limit.
    DecTtl,
    /// Set the egress queue (stored in `Meta::user`).
    SetQueue(u32),
    /// Police through a meter.
    Meter(Arc<dyn Policer>),
    /// Copy the packet to the packet-in queue.
    Controller {
        /// Why.
        reason: PacketInReason,
        /// Bytes to copy at most.
        max_len: u16,
        /// Deciding table.
        table_id: u8,
        /// Deciding flow entry's cookie.
        cookie: u64,
    },
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Output(i) => write!(f, "output(tx#{i})"),
            Op::SetField { field, value } => write!(f, "set({}={value:#x})", field.name()),
            Op::PushVlan { tpid, tci } => write!(f, "push_vlan({tpid:#06x},{tci:#06x})"),
            Op::PopVlan => f.write_str("pop_vlan"),
            Op::DecTtl => f.write_str("dec_ttl"),
            Op::SetQueue(q) => write!(f, "set_queue({q})"),
            Op::Meter(_) => f.write_str("meter"),
            Op::Controller { reason, .. } => write!(f, "controller({reason:?})"),
        }
    }
}

/// How the executor handles a megaflow's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No output, no packet-in: free the packet (counted as "no action").
    Drop,
    /// The only action is one output: move the packet there, no copy, no rewrite.
    Forward(u16),
    /// Run the ops in order. `move_at` is the op index whose output takes the packet itself
    /// (the last output, when no packet-in follows it); every other output sends a copy.
    General {
        /// Index into the ops of the output that moves the packet.
        move_at: Option<usize>,
    },
}

/// Compiled actions: the ops and the plan. The plan comes first (`repr(C)`) so that it
/// shares a cache line with a [`Megaflow`]'s generation and counters.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct Actions {
    /// The shortcut the executor takes.
    pub plan: Plan,
    /// The ops, in order.
    pub ops: Vec<Op>,
}

impl Default for Actions {
    fn default() -> Self {
        Actions {
            ops: Vec::new(),
            plan: Plan::Drop,
        }
    }
}

/// Maps OpenFlow port numbers to the thread's tx table indices. Sorted; looked up only when a
/// megaflow is compiled.
#[derive(Debug, Clone, Default)]
pub struct PortMap {
    sorted: Vec<(u32, u16)>,
}

impl PortMap {
    /// Builds the map from `(ofport, tx index)` pairs.
    pub fn new(mut pairs: Vec<(u32, u16)>) -> PortMap {
        pairs.sort_unstable();
        PortMap { sorted: pairs }
    }

    /// The tx index of `ofport`.
    pub fn get(&self, ofport: u32) -> Option<u16> {
        self.sorted
            .binary_search_by_key(&ofport, |p| p.0)
            .ok()
            .map(|i| self.sorted[i].1)
    }
}

impl Actions {
    /// Compiles a translation's actions into `self` (reusing its storage). Outputs to ports
    /// this thread does not know are left out, as are meters `meter` cannot resolve.
    pub fn compile(
        &mut self,
        actions: &[DpAction],
        ports: &PortMap,
        meter: &dyn Fn(u32) -> Option<Arc<dyn Policer>>,
    ) {
        self.ops.clear();
        for a in actions {
            let op = match *a {
                DpAction::Output(p) => match ports.get(p) {
                    Some(i) => Op::Output(i),
                    None => continue,
                },
                DpAction::SetField { field, value } => Op::SetField { field, value },
                DpAction::PushVlan { tpid, tci } => Op::PushVlan { tpid, tci },
                DpAction::PopVlan => Op::PopVlan,
                DpAction::DecTtl => Op::DecTtl,
                DpAction::SetQueue(q) => Op::SetQueue(q),
                DpAction::Meter(id) => match meter(id) {
                    Some(m) => Op::Meter(m),
                    None => continue,
                },
                DpAction::Controller {
                    reason,
                    max_len,
                    table_id,
                    cookie,
                } => Op::Controller {
                    reason,
                    max_len,
                    table_id,
                    cookie,
                },
            };
            self.ops.push(op);
        }
        self.plan = plan_of(&self.ops);
    }
}

fn plan_of(ops: &[Op]) -> Plan {
    if let [Op::Output(i)] = ops {
        return Plan::Forward(*i);
    }
    let last_out = ops.iter().rposition(|o| matches!(o, Op::Output(_)));
    let last_pi = ops.iter().rposition(|o| matches!(o, Op::Controller { .. }));
    match (last_out, last_pi) {
        (None, None) => Plan::Drop,
        (Some(o), Some(p)) if p > o => Plan::General { move_at: None },
        (o, _) => Plan::General { move_at: o },
    }
}

/// A cached flow: packets equal to `key` under `mask` get `actions`.
///
/// Layout (`repr(C)`, 384 bytes): the first cache line holds what every hit reads or
/// writes (the arena slot's generation, the counters, the flow counter list and the plan),
/// the second the ops, the rest the key and mask (read at install and eviction only).
#[derive(Debug)]
#[repr(C)]
pub struct Megaflow {
    /// Generation of the arena slot holding it (see [`MegaflowId`]).
    gen: u32,
    /// Whether it is alive in its arena slot.
    live: bool,
    dirty: bool,
    /// Batches that hit it since the eviction clock hand last passed it (saturating; see
    /// [`Arena::victim`]).
    uses: u8,
    /// Not yet passed by the clock hand: the batch that installed it does not count as a use.
    fresh: bool,
    packets: u64,
    bytes: u64,
    flows: Vec<Arc<FlowCounters>>,
    /// Compiled actions.
    pub actions: Actions,
    /// Last time (ms of `pipeline::dpaction::now_ms`) a packet hit it, updated at flush.
    pub last_used_ms: u64,
    /// The key, already masked.
    pub key: FlowKey,
    /// The mask.
    pub mask: FlowKey,
}

const _: () = assert!(std::mem::size_of::<Megaflow>() == 384);
// The plan ends within the first cache line.
const _: () = assert!(std::mem::offset_of!(Megaflow, actions) + std::mem::size_of::<Plan>() <= 64);

impl Megaflow {
    /// A megaflow for `key` under `tr.mask` with compiled `actions`. Allocates; the upcall
    /// path refills arena slots in place instead ([`Arena::insert_from`]).
    pub fn new(key: &FlowKey, tr: &Translation, actions: Actions, now_ms: u64) -> Megaflow {
        let mut mf = Megaflow::vacant();
        mf.refill(key, tr, now_ms);
        mf.actions = actions;
        mf
    }

    /// A megaflow that matches nothing yet: storage waiting for [`Megaflow::refill`].
    fn vacant() -> Megaflow {
        Megaflow {
            gen: 1,
            live: false,
            dirty: false,
            uses: 0,
            fresh: true,
            packets: 0,
            bytes: 0,
            flows: Vec::new(),
            actions: Actions::default(),
            last_used_ms: 0,
            key: FlowKey::ZERO,
            mask: FlowKey::ZERO,
        }
    }

    /// Makes this megaflow the one for `key` under `tr.mask`, reusing its storage: the flow
    /// counter list is refilled in place (no allocation once it has grown), counts restart at
    /// zero. The actions are left as they are; compile into [`Megaflow::actions`] next.
    pub fn refill(&mut self, key: &FlowKey, tr: &Translation, now_ms: u64) {
        self.key = key.masked(&tr.mask);
        self.mask = tr.mask;
        // A churning table mostly replaces a megaflow with one for the same flow entries:
        // keep the counter references then (no reference-count traffic).
        let same = self.flows.len() == tr.flows.len()
            && self
                .flows
                .iter()
                .zip(&tr.flows)
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.flows.clear();
            self.flows.extend(tr.flows.iter().cloned());
        }
        self.packets = 0;
        self.bytes = 0;
        self.dirty = false;
        self.uses = 0;
        self.fresh = true;
        self.last_used_ms = now_ms;
    }

    /// Counts packets not yet flushed.
    pub fn unflushed(&self) -> (u64, u64) {
        (self.packets, self.bytes)
    }

    /// Counts packets directly on the megaflow (for one not in an [`Arena`]).
    pub fn count(&mut self, packets: u64, bytes: u64) {
        self.packets += packets;
        self.bytes += bytes;
    }

    /// Adds the unflushed counts to every flow entry's counters and zeroes them.
    pub fn flush(&mut self, now_ms: u64) {
        if self.packets != 0 {
            for f in &self.flows {
                f.add(self.packets, self.bytes, now_ms);
            }
            self.last_used_ms = now_ms;
        }
        self.packets = 0;
        self.bytes = 0;
        self.dirty = false;
    }
}

/// Slots a victim search looks at before it settles for the oldest one it passed.
const VICTIM_SCAN: usize = 64;

/// The megaflows of one thread, by [`MegaflowId`].
///
/// Memory is bounded: `capacity` slots plus one spare, reserved when the arena is made and
/// touched once as the first megaflows arrive. The spare lets an install take a slot before
/// the eviction that makes room, so that the two overlap their memory loads; [`Arena::is_full`]
/// says when an eviction is due. A dead slot keeps its megaflow's storage (action and
/// counter lists) for the next tenant, so a churning table reaches a steady state with no
/// allocation. When full, [`Arena::victim`] names the megaflow to evict (approximate LRU).
pub struct Arena {
    /// The slots. A megaflow's storage stays in its slot when it dies and is refilled by the
    /// next tenant; the slot generation changes on every death, so old ids never match.
    slots: Vec<Megaflow>,
    capacity: usize,
    free: Vec<u32>,
    dirty: Vec<u32>,
    live: usize,
    /// The eviction clock hand: the slot the next victim search starts at.
    hand: usize,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("live", &self.live)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl Arena {
    /// An empty arena for at most `capacity` megaflows, with every table reserved up front.
    pub fn new(capacity: usize) -> Arena {
        Arena {
            slots: Vec::with_capacity(capacity + 1),
            capacity,
            free: Vec::with_capacity(capacity + 1),
            // Each live megaflow is listed at most once, and [`Arena::remove`] flushes before
            // stale entries of dead ones could pass `capacity`: this never grows.
            dirty: Vec::with_capacity(2 * capacity + 3),
            live: 0,
            hand: 0,
        }
    }

    /// Megaflows alive.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no megaflow is alive.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Most megaflows the arena keeps (one more may be in for a moment: see the type docs).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether an eviction is due (an insert may still take the spare slot first).
    pub fn is_full(&self) -> bool {
        self.live >= self.capacity
    }

    /// Bytes the arena has reserved for slots (fixed from creation on; for tests and stats).
    pub fn reserved_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Megaflow>()
    }

    /// A free slot index, or `None` when the arena is full.
    fn take_slot(&mut self) -> Option<usize> {
        if let Some(i) = self.free.pop() {
            return Some(i as usize);
        }
        if self.slots.len() <= self.capacity {
            self.slots.push(Megaflow::vacant());
            return Some(self.slots.len() - 1);
        }
        None
    }

    fn occupy(&mut self, i: usize) -> MegaflowId {
        let s = &mut self.slots[i];
        s.live = true;
        self.live += 1;
        MegaflowId::new(i as u32, s.gen)
    }

    /// Stores a megaflow and returns its id; `None` (and nothing stored) when even the spare
    /// slot is taken.
    pub fn insert(&mut self, mf: Megaflow) -> Option<MegaflowId> {
        let i = self.take_slot()?;
        let gen = self.slots[i].gen;
        self.slots[i] = mf;
        self.slots[i].gen = gen;
        Some(self.occupy(i))
    }

    /// Refills a free slot in place with the megaflow for `key` under `tr` (see
    /// [`Megaflow::refill`]) and returns its id and the megaflow, whose actions the caller
    /// compiles next. `None` when even the spare slot is taken. Does not allocate once the
    /// slot's lists have grown.
    pub fn insert_from(
        &mut self,
        key: &FlowKey,
        tr: &Translation,
        now_ms: u64,
    ) -> Option<(MegaflowId, &mut Megaflow)> {
        let i = self.take_slot()?;
        self.slots[i].refill(key, tr, now_ms);
        let id = self.occupy(i);
        Some((id, &mut self.slots[i]))
    }

    /// The megaflow `id` names, if it is still alive.
    #[inline(always)]
    pub fn get(&self, id: MegaflowId) -> Option<&Megaflow> {
        match self.slots.get(id.index()) {
            // A slot's generation changes when its megaflow dies: a match means alive.
            Some(s) if s.gen == id.gen => Some(s),
            _ => None,
        }
    }

    /// The megaflow `id` names, writable.
    #[inline(always)]
    pub fn get_mut(&mut self, id: MegaflowId) -> Option<&mut Megaflow> {
        match self.slots.get_mut(id.index()) {
            Some(s) if s.gen == id.gen => Some(s),
            _ => None,
        }
    }

    /// Counts one packet of `bytes` on megaflow `id` (no-op for a stale id).
    #[inline(always)]
    pub fn count(&mut self, id: MegaflowId, packets: u64, bytes: u64) {
        if let Some(s) = self.slots.get_mut(id.index()) {
            if s.gen == id.gen {
                let mf = s;
                mf.packets += packets;
                mf.bytes += bytes;
                mf.uses = mf.uses.saturating_add(1);
                if !mf.dirty {
                    mf.dirty = true;
                    self.dirty.push(id.idx);
                }
            }
        }
    }

    /// Removes megaflow `id`, flushing its counters first, and returns it (readable until
    /// the slot's next tenant arrives). The id (and every copy of it in the caches) goes
    /// stale.
    pub fn remove(&mut self, id: MegaflowId, now_ms: u64) -> Option<&Megaflow> {
        let s = self.slots.get_mut(id.index())?;
        if s.gen != id.gen || !s.live {
            return None;
        }
        s.flush(now_ms);
        // The flow counter list stays for the next tenant (see `Megaflow::refill`).
        s.gen = s.gen.wrapping_add(1).max(1);
        s.live = false;
        self.free.push(id.idx);
        self.live -= 1;
        if self.dirty.len() >= self.capacity {
            // Entries of dead megaflows linger in the dirty list; keep it within its bound.
            self.flush_dirty(now_ms);
        }
        Some(&self.slots[id.index()])
    }

    /// Flushes the counters of every megaflow hit since the last flush.
    ///
    /// Megaflows of a single flow entry that follow one another in the list and credit the
    /// same entry (the common case under a flood of new flows through one rule) are summed
    /// and added once, saving two locked adds per megaflow.
    pub fn flush_dirty(&mut self, now_ms: u64) {
        // The listed slots are scattered: load their first lines well ahead, and once those
        // are in, the flow counter lists they point to.
        const AHEAD: usize = 8;
        // (slot whose single flow entry collects the sum, packets, bytes)
        let mut run: Option<(usize, u64, u64)> = None;
        for k in 0..self.dirty.len() {
            if let Some(&j) = self.dirty.get(k + 2 * AHEAD) {
                self.prefetch_line(j as usize);
            }
            if let Some(&j) = self.dirty.get(k + AHEAD) {
                if let Some(s) = self.slots.get(j as usize) {
                    prefetch(s.flows.as_ptr().cast());
                }
            }
            let i = self.dirty[k] as usize;
            let s = &self.slots[i];
            if !s.live {
                continue;
            }
            if s.packets == 0 || s.flows.len() != 1 {
                self.slots[i].flush(now_ms);
                continue;
            }
            let (packets, bytes) = (s.packets, s.bytes);
            match run {
                Some((r, ref mut p, ref mut b))
                    if Arc::ptr_eq(&self.slots[r].flows[0], &s.flows[0]) =>
                {
                    *p += packets;
                    *b += bytes;
                }
                _ => {
                    if let Some((r, p, b)) = run {
                        self.slots[r].flows[0].add(p, b, now_ms);
                    }
                    run = Some((i, packets, bytes));
                }
            }
            let s = &mut self.slots[i];
            s.packets = 0;
            s.bytes = 0;
            s.dirty = false;
            s.last_used_ms = now_ms;
        }
        if let Some((r, p, b)) = run {
            self.slots[r].flows[0].add(p, b, now_ms);
        }
        self.dirty.clear();
    }

    /// Flushes every counter, then removes every megaflow (their storage stays for reuse).
    pub fn clear(&mut self, now_ms: u64) {
        self.flush_dirty(now_ms);
        self.free.clear();
        for (i, s) in self.slots.iter_mut().enumerate().rev() {
            if s.live {
                s.live = false;
                s.gen = s.gen.wrapping_add(1).max(1);
                s.flows.clear();
            }
            self.free.push(i as u32);
        }
        self.live = 0;
        self.hand = 0;
    }

    /// The megaflow to evict to make room: a clock sweep (approximate LRU). The hand skips
    /// megaflows used since it last passed them (clearing the mark: a second chance; for a
    /// megaflow it has not passed yet, the batch that installed it is not a use, so a flood
    /// of one-packet flows goes out oldest first while flows in use stay) and those `busy`
    /// names (in use by the current batch), and stops at the first other one; after
    /// [`VICTIM_SCAN`] slots it takes the first eligible one it passed. `None` when every
    /// megaflow is busy or the arena is empty.
    pub fn victim(&mut self, busy: impl Fn(MegaflowId) -> bool) -> Option<MegaflowId> {
        let len = self.slots.len();
        if self.live == 0 || len == 0 {
            return None;
        }
        let mut i = self.hand % len;
        let mut fallback = None;
        for step in 0..len {
            let s = &mut self.slots[i];
            let id = MegaflowId::new(i as u32, s.gen);
            let here = i;
            i = if i + 1 == len { 0 } else { i + 1 };
            if !s.live {
                continue;
            }
            if s.uses <= u8::from(s.fresh) {
                if busy(id) {
                    continue;
                }
                self.hand = i;
                // The next search most likely takes the slot at the hand: start loading it.
                self.prefetch_slot(i);
                return Some(id);
            }
            s.uses = 0;
            s.fresh = false;
            if fallback.is_none() && !busy(id) {
                fallback = Some((here, id));
            }
            if step + 1 >= VICTIM_SCAN {
                if let Some((at, id)) = fallback {
                    self.hand = at + 1;
                    return Some(id);
                }
            }
        }
        fallback.map(|(here, id)| {
            self.hand = here + 1;
            id
        })
    }

    /// Starts loading the first cache line of slot `i` (generation, counters, flow list).
    #[inline]
    fn prefetch_line(&self, i: usize) {
        if let Some(s) = self.slots.get(i) {
            prefetch((s as *const Megaflow).cast());
        }
    }

    /// Starts loading every cache line of slot `i` (no-op past the end).
    #[inline]
    fn prefetch_slot(&self, i: usize) {
        if let Some(s) = self.slots.get(i) {
            let p = (s as *const Megaflow).cast::<u8>();
            for line in 0..std::mem::size_of::<Megaflow>() / 64 {
                prefetch(p.wrapping_add(line * 64));
            }
        }
    }

    /// Ids of the megaflows in slots `start..start + n` (wrapping), for incremental sweeps.
    /// Returns the slot to start the next sweep at.
    pub fn sweep(&self, start: usize, n: usize, mut f: impl FnMut(MegaflowId, &Megaflow)) -> usize {
        let len = self.slots.len();
        if len == 0 {
            return 0;
        }
        let mut i = start % len;
        for _ in 0..n.min(len) {
            let s = &self.slots[i];
            if s.live {
                f(MegaflowId::new(i as u32, s.gen), s);
            }
            i = (i + 1) % len;
        }
        i
    }
}

/// Megaflows of one batch that are run but not cached (uncacheable translations, or no room),
/// refilled in place batch after batch so they do not allocate once warm.
#[derive(Debug, Default)]
pub struct MegaflowPool {
    flows: Vec<Megaflow>,
    len: usize,
}

impl MegaflowPool {
    /// A pool with storage for `n` megaflows.
    pub fn with_capacity(n: usize) -> MegaflowPool {
        MegaflowPool {
            flows: (0..n).map(|_| Megaflow::vacant()).collect(),
            len: 0,
        }
    }

    /// Megaflows in use.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is in use.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Megaflow `i` of this batch.
    pub fn get(&self, i: usize) -> Option<&Megaflow> {
        self.flows[..self.len].get(i)
    }

    /// Megaflow `i` of this batch, writable.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Megaflow> {
        self.flows[..self.len].get_mut(i)
    }

    /// Refills the next megaflow for `key` under `tr` and returns its index and the megaflow
    /// (compile its actions next).
    pub fn push_from(
        &mut self,
        key: &FlowKey,
        tr: &Translation,
        now_ms: u64,
    ) -> (usize, &mut Megaflow) {
        if self.len == self.flows.len() {
            self.flows.push(Megaflow::vacant());
        }
        let i = self.len;
        self.len += 1;
        let mf = &mut self.flows[i];
        mf.refill(key, tr, now_ms);
        (i, mf)
    }

    /// Ends the batch: every megaflow is released (storage kept).
    pub fn clear(&mut self) {
        for mf in &mut self.flows[..self.len] {
            mf.flows.clear();
        }
        self.len = 0;
    }
}

#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
#[path = "megaflow_tests.rs"]
mod tests;

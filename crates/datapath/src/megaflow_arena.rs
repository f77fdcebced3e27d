//! The per-thread megaflow arena: bounded slots refilled in place, the dirty list for
//! counter flushes, and the eviction clock (see the parent module's docs).

use std::sync::Arc;

use packet::FlowKey;
use pipeline::Translation;

use super::{Megaflow, MegaflowId, Plan};
use crate::bits::prefetch;
use crate::megaflow::InPlace;

/// Slots a victim search looks at before it settles for the oldest one it passed.
const VICTIM_SCAN: usize = 64;

/// What a hit reads and writes, kept apart from the megaflow's other 384 bytes: 32 bytes a
/// slot, two to a cache line, so that the hot part of 10,000 megaflows (320 KB) stays in L2
/// while their keys, masks, ops and flow lists stay in memory until an install, a flush or an
/// eviction needs them.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub struct Hot {
    /// Generation of the slot (see [`MegaflowId`]); changes when the megaflow dies.
    gen: u32,
    /// Listed in the dirty list since the last flush.
    dirty: bool,
    /// Whether a megaflow lives in the slot.
    live: bool,
    /// Not yet passed by the clock hand: the batch that installed it does not count as a use.
    fresh: bool,
    /// Batches that hit it since the eviction clock hand last passed it (saturating).
    uses: u8,
    /// Whether the actions run in place before one output takes the packet (what the
    /// executor would find out from the plan and ops).
    work: bool,
    /// [`super::Actions::in_place`] of the compiled actions; [`InPlace::No`] (the general path,
    /// always correct) until [`Arena::compiled`] is told about them.
    fast: InPlace,
    /// Low 16 bits of the publish the megaflow was last known good at
    /// ([`crate::revalidate`]); a hit with another stamp than the arena's checks it first.
    checked: u16,
    /// Packets not yet flushed to the flow entries.
    packets: u64,
    /// Bytes not yet flushed to the flow entries.
    bytes: u64,
}

const _: () = assert!(std::mem::size_of::<Hot>() == 32);

/// A megaflow's counts since install (what a dump shows; [`Arena::life`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Life {
    /// Packets flushed so far.
    pub packets: u64,
    /// Bytes flushed so far.
    pub bytes: u64,
    /// When it was installed (ms of `pipeline::dpaction::now_ms`).
    pub installed_ms: u64,
}

impl Hot {
    const VACANT: Hot = Hot {
        gen: 1,
        dirty: false,
        live: false,
        fresh: true,
        uses: 0,
        work: true,
        fast: InPlace::No,
        checked: 0,
        packets: 0,
        bytes: 0,
    };
}

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
    pub(super) slots: Vec<Megaflow>,
    /// Per slot, what a hit touches (generation, counters, plan); see [`Hot`].
    hot: Vec<Hot>,
    /// Per slot, the megaflow's whole life: packets and bytes since install (added at each
    /// flush, never on a hit) and when it was installed, for dumps.
    life: Vec<Life>,
    capacity: usize,
    free: Vec<u32>,
    pub(super) dirty: Vec<u32>,
    live: usize,
    /// The eviction clock hand: the slot the next victim search starts at.
    hand: usize,
    /// The stamp megaflows installed now get ([`crate::revalidate`]).
    stamp: u16,
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
            hot: Vec::with_capacity(capacity + 1),
            life: Vec::with_capacity(capacity + 1),
            capacity,
            free: Vec::with_capacity(capacity + 1),
            // Each live megaflow is listed at most once, and [`Arena::remove`] flushes before
            // stale entries of dead ones could pass `capacity`: this never grows.
            dirty: Vec::with_capacity(2 * capacity + 3),
            live: 0,
            hand: 0,
            stamp: 0,
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
            + self.hot.capacity() * std::mem::size_of::<Hot>()
            + self.life.capacity() * std::mem::size_of::<Life>()
    }

    /// A free slot index, or `None` when the arena is full.
    fn take_slot(&mut self) -> Option<usize> {
        if let Some(i) = self.free.pop() {
            return Some(i as usize);
        }
        if self.slots.len() <= self.capacity {
            self.slots.push(Megaflow::vacant());
            self.hot.push(Hot::VACANT);
            self.life.push(Life::default());
            return Some(self.slots.len() - 1);
        }
        None
    }

    fn occupy(&mut self, i: usize, now_ms: u64) -> MegaflowId {
        self.live += 1;
        self.life[i] = Life {
            installed_ms: now_ms,
            ..Life::default()
        };
        let h = &mut self.hot[i];
        *h = Hot {
            gen: h.gen,
            live: true,
            checked: self.stamp,
            ..Hot::VACANT
        };
        MegaflowId::new(i as u32, h.gen)
    }

    /// Stores a megaflow and returns its id; `None` (and nothing stored) when even the spare
    /// slot is taken.
    pub fn insert(&mut self, mf: Megaflow) -> Option<MegaflowId> {
        let i = self.take_slot()?;
        let now_ms = mf.last_used_ms;
        self.slots[i] = mf;
        let id = self.occupy(i, now_ms);
        self.compiled(id);
        Some(id)
    }

    /// Refills a free slot in place with the megaflow for `key` under `tr` (see
    /// [`Megaflow::refill`]) and returns its id and the megaflow, whose actions the caller
    /// compiles next and then reports with [`Arena::compiled`] (until then hits take the
    /// general path). `None` when even the spare slot is taken. Does not allocate once the
    /// slot's lists have grown.
    pub fn insert_from(
        &mut self,
        key: &FlowKey,
        tr: &Translation,
        now_ms: u64,
    ) -> Option<(MegaflowId, &mut Megaflow)> {
        let i = self.take_slot()?;
        self.slots[i].refill(key, tr, now_ms);
        let id = self.occupy(i, now_ms);
        Some((id, &mut self.slots[i]))
    }

    /// Whether the megaflow `id` names is still alive (reads only its [`Hot`] entry).
    #[inline(always)]
    pub fn is_live(&self, id: MegaflowId) -> bool {
        // A slot's generation changes when its megaflow dies: a match means alive.
        matches!(self.hot.get(id.index()), Some(h) if h.gen == id.gen)
    }

    /// Whether megaflow `id` is alive and known good as of the arena's stamp (reads only its
    /// [`Hot`] entry). When not, [`crate::revalidate::Revalidator::holds`] decides.
    #[inline(always)]
    pub fn is_current(&self, id: MegaflowId) -> bool {
        matches!(self.hot.get(id.index()), Some(h) if h.gen == id.gen && h.checked == self.stamp)
    }

    /// The stamp of megaflow `id` (see [`Arena::is_current`]); `None` for a stale id.
    #[inline]
    pub fn stamp_of(&self, id: MegaflowId) -> Option<u16> {
        match self.hot.get(id.index()) {
            Some(h) if h.gen == id.gen => Some(h.checked),
            _ => None,
        }
    }

    /// Sets the stamp megaflows installed from now on get, and that [`Arena::is_current`]
    /// compares with.
    pub fn set_stamp(&mut self, stamp: u16) {
        self.stamp = stamp;
    }

    /// Marks megaflow `id` known good as of the arena's stamp (no-op for a stale id).
    #[inline]
    pub fn mark_current(&mut self, id: MegaflowId) {
        let stamp = self.stamp;
        if let Some(h) = self.hot.get_mut(id.index()) {
            if h.gen == id.gen {
                h.checked = stamp;
            }
        }
    }

    /// Appends to `out` the live megaflows whose stamp is more than `behind` publishes older
    /// than the arena's (16-bit distance).
    pub fn older_than(&self, behind: usize, out: &mut Vec<MegaflowId>) {
        for (i, h) in self.hot.iter().enumerate() {
            if h.live && usize::from(self.stamp.wrapping_sub(h.checked)) > behind {
                out.push(MegaflowId::new(i as u32, h.gen));
            }
        }
    }

    /// The megaflow `id` names, if it is still alive.
    #[inline(always)]
    pub fn get(&self, id: MegaflowId) -> Option<&Megaflow> {
        if self.is_live(id) {
            self.slots.get(id.index())
        } else {
            None
        }
    }

    /// The megaflow `id` names, writable. Report recompiled actions with
    /// [`Arena::compiled`].
    #[inline(always)]
    pub fn get_mut(&mut self, id: MegaflowId) -> Option<&mut Megaflow> {
        if self.is_live(id) {
            self.slots.get_mut(id.index())
        } else {
            None
        }
    }

    /// Records what the executor needs per hit from megaflow `id`'s compiled actions (call
    /// after compiling them; no-op for a stale id).
    pub fn compiled(&mut self, id: MegaflowId) {
        if !self.is_live(id) {
            return;
        }
        let actions = &self.slots[id.index()].actions;
        let h = &mut self.hot[id.index()];
        h.fast = actions.in_place();
        h.work = !matches!(actions.plan, Plan::Forward(_));
    }

    /// The whole life of megaflow `id` (counts since install, unflushed ones included);
    /// `None` for a stale id.
    pub fn life(&self, id: MegaflowId) -> Option<Life> {
        let h = self
            .hot
            .get(id.index())
            .filter(|h| h.gen == id.gen && h.live)?;
        let l = self.life[id.index()];
        Some(Life {
            packets: l.packets + h.packets,
            bytes: l.bytes + h.bytes,
            ..l
        })
    }

    /// Packets and bytes counted on `id` and not yet flushed ((0, 0) for a stale id).
    pub fn unflushed(&self, id: MegaflowId) -> (u64, u64) {
        match self.hot.get(id.index()) {
            Some(h) if h.gen == id.gen => (h.packets, h.bytes),
            _ => (0, 0),
        }
    }

    /// Counts `packets` packets of `bytes` bytes in all on megaflow `id` (no-op for a stale
    /// id). Touches only its [`Hot`] entry (and the dirty list, once per flush period).
    #[inline(always)]
    pub fn count(&mut self, id: MegaflowId, packets: u64, bytes: u64) {
        self.count_fast(id, packets, bytes);
    }

    /// [`Arena::count`], and what a batch of hits on `id` does, from its [`Hot`] entry alone
    /// (the poll loop asks both for every run of packets of one megaflow): where the packets
    /// go by the output that takes them ([`super::Actions::in_place`]) and whether actions run on
    /// them in place first. `None` for a stale id, which counts nothing.
    #[inline(always)]
    pub fn count_fast(
        &mut self,
        id: MegaflowId,
        packets: u64,
        bytes: u64,
    ) -> Option<(InPlace, bool)> {
        let h = self.hot.get_mut(id.index())?;
        if h.gen != id.gen {
            return None;
        }
        h.packets += packets;
        h.bytes += bytes;
        h.uses = h.uses.saturating_add(1);
        if !h.dirty {
            h.dirty = true;
            self.dirty.push(id.idx);
        }
        Some((h.fast, h.work))
    }

    /// Moves slot `i`'s unflushed counts from its [`Hot`] entry onto the megaflow (whose
    /// [`Megaflow::flush`] adds them to the flow entries) and returns them.
    #[inline]
    fn settle(&mut self, i: usize) -> (u64, u64) {
        let h = &mut self.hot[i];
        let (p, b) = (h.packets, h.bytes);
        h.packets = 0;
        h.bytes = 0;
        h.dirty = false;
        if p != 0 {
            self.slots[i].count(p, b);
            let l = &mut self.life[i];
            l.packets += p;
            l.bytes += b;
        }
        (p, b)
    }

    /// Removes megaflow `id`, flushing its counters first, and returns it (readable until
    /// the slot's next tenant arrives). The id (and every copy of it in the caches) goes
    /// stale.
    pub fn remove(&mut self, id: MegaflowId, now_ms: u64) -> Option<&Megaflow> {
        if !self.is_live(id) || !self.hot[id.index()].live {
            return None;
        }
        self.settle(id.index());
        let s = &mut self.slots[id.index()];
        s.flush(now_ms);
        // The flow counter list stays for the next tenant (see `Megaflow::refill`).
        let h = &mut self.hot[id.index()];
        h.gen = h.gen.wrapping_add(1).max(1);
        h.live = false;
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
        self.flush_oldest(self.dirty.len(), now_ms);
    }

    /// Flushes the counters of the `n` megaflows listed first in the dirty list (those hit
    /// longest ago without a flush), so that a thread with many busy megaflows can spread the
    /// flushes over several maintenance passes instead of stalling for all of them at once.
    ///
    /// Cost: two locked adds and about two cache misses per megaflow; the list's tail moves
    /// up (4 bytes an entry).
    pub fn flush_oldest(&mut self, n: usize, now_ms: u64) {
        // The listed slots are scattered: load their first lines well ahead, and once those
        // are in, the flow counter lists they point to.
        const AHEAD: usize = 8;
        let n = n.min(self.dirty.len());
        // (slot whose single flow entry collects the sum, packets, bytes)
        let mut run: Option<(usize, u64, u64)> = None;
        for k in 0..n {
            if let Some(&j) = self.dirty[..n].get(k + 2 * AHEAD) {
                self.prefetch_line(j as usize);
            }
            if let Some(&j) = self.dirty[..n].get(k + AHEAD) {
                if let Some(s) = self.slots.get(j as usize) {
                    prefetch(s.flows.as_ptr().cast());
                }
            }
            let i = self.dirty[k] as usize;
            if !self.hot[i].live {
                continue;
            }
            let (packets, bytes) = self.settle(i);
            let s = &self.slots[i];
            if packets == 0 || s.flows.len() != 1 {
                self.slots[i].flush(now_ms);
                continue;
            }
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
        if n == self.dirty.len() {
            self.dirty.clear();
        } else {
            self.dirty.drain(..n);
        }
    }

    /// Megaflows hit since their last flush (the dirty list's length; may count a dead
    /// megaflow's entry until the next flush).
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }

    /// Flushes every counter, then removes every megaflow (their storage stays for reuse).
    pub fn clear(&mut self, now_ms: u64) {
        self.flush_dirty(now_ms);
        self.free.clear();
        for (i, (s, h)) in self.slots.iter_mut().zip(&mut self.hot).enumerate().rev() {
            if h.live {
                h.live = false;
                h.gen = h.gen.wrapping_add(1).max(1);
                h.dirty = false;
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
    /// `VICTIM_SCAN` (64) slots it takes the first eligible one it passed. `None` when every
    /// megaflow is busy or the arena is empty.
    pub fn victim(&mut self, busy: impl Fn(MegaflowId) -> bool) -> Option<MegaflowId> {
        let len = self.slots.len();
        if self.live == 0 || len == 0 {
            return None;
        }
        let mut i = self.hand % len;
        let mut fallback = None;
        // Only the dense hot entries are scanned.
        for step in 0..len {
            let h = &mut self.hot[i];
            let id = MegaflowId::new(i as u32, h.gen);
            let here = i;
            i = if i + 1 == len { 0 } else { i + 1 };
            if !h.live {
                continue;
            }
            if h.uses <= u8::from(h.fresh) {
                if busy(id) {
                    continue;
                }
                self.hand = i;
                // The next search most likely takes the slot at the hand: start loading it.
                self.prefetch_slot(i);
                return Some(id);
            }
            h.uses = 0;
            h.fresh = false;
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

    /// Starts loading what a hit on `id` reads and writes (its [`Hot`] entry: generation,
    /// counters, plan), so that a batch's lookups overlap their misses. A hint:
    /// no-op for an index past the end, harmless for a stale id.
    #[inline(always)]
    pub fn prefetch(&self, id: MegaflowId) {
        if let Some(h) = self.hot.get(id.index()) {
            prefetch((h as *const Hot).cast());
        }
    }

    /// Starts loading the first cache line of slot `i` (generation, counters, flow list).
    #[inline]
    fn prefetch_line(&self, i: usize) {
        if let Some(s) = self.slots.get(i) {
            prefetch((s as *const Megaflow).cast());
        }
        // A flush also adds to the megaflow's life counts.
        if let Some(l) = self.life.get(i) {
            prefetch((l as *const Life).cast());
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

    /// Ids of the megaflows in slots `start..start + n`, stopping at the last slot, for
    /// incremental sweeps. Returns the slot to start the next sweep at: 0 once the last slot
    /// was passed, so that the sweeps from one 0 to the next see every slot exactly once.
    pub fn sweep(&self, start: usize, n: usize, mut f: impl FnMut(MegaflowId, &Megaflow)) -> usize {
        let len = self.slots.len();
        let start = if start < len { start } else { 0 };
        let end = start.saturating_add(n).min(len);
        for i in start..end {
            let h = &self.hot[i];
            if h.live {
                f(MegaflowId::new(i as u32, h.gen), &self.slots[i]);
            }
        }
        if end >= len {
            0
        } else {
            end
        }
    }
}

//! The per-thread megaflow arena: bounded slots refilled in place, the dirty list for
//! counter flushes, and the eviction clock (see the parent module's docs).

use std::sync::Arc;

use packet::FlowKey;
use pipeline::Translation;

use super::{Megaflow, MegaflowId};

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
    pub(super) slots: Vec<Megaflow>,
    capacity: usize,
    free: Vec<u32>,
    pub(super) dirty: Vec<u32>,
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
    /// `VICTIM_SCAN` (64) slots it takes the first eligible one it passed. `None` when every
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

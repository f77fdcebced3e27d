//! The shaper's buffer (QoS type `linux-htb`): the packets one poll thread holds for one
//! shaped port, a ring per queue, and the order they leave in.
//!
//! Size and owner: one [`Backlog`] in each thread's tx entry of a port (`execute::TxPort`),
//! owned by that thread alone (no lock); a pointer while the port does not shape. Its rings,
//! one per slot of the port's queues (`egress_slots.rs`), are allocated when the thread first
//! sees a configuration of the port's [`PortShaper`] that shapes (its generation changes),
//! to the port's `qos_backlog` packets for each queue the port has (and queue 0), and freed
//! when it stops shaping; a ring whose slot passes to another queue drops what it held for
//! the old one (counted as for a queue the port lacks). An arriving packet that
//! finds its ring full is dropped (tail drop, counted as the queue's `dropped`; a batch's
//! packets join their rings before any leaves, so a ring never holds more than that), and so
//! is one larger than a bucket it must pass can hold (it could never leave). Nothing is
//! allocated per packet: a ring is a `VecDeque` filled only up to the capacity it was given.
//! The buckets stay the [`PortShaper`]'s, shared by every thread, so the rates are the port's
//! whatever threads send to it.
//!
//! Order of release, at most one batch per call ([`Backlog::shape`]):
//!
//! 1. **Guarantees**: each queue with a `min_rate` sends from its head what its committed
//!    bucket holds (while its `max_rate` bucket has room too: a queue at its cap has had its
//!    guarantee); that traffic also uses its `max_rate` bucket and the port's
//!    `qos_max_rate` bucket (as a debt when that is empty, so the guarantee is never refused
//!    but comes out of the port's cap).
//! 2. **Borrowing**: deficit round robin over the queues still holding packets, as Linux
//!    HTB's classes borrow from their parent: each queue's turn adds its quantum (bytes, by
//!    its `min_rate`: `egress::quantum`) to its deficit, and it sends from its head while
//!    the deficit covers the head packet; so queues borrow in proportion to their
//!    guarantees and in bytes, not packets. A queue whose `max_rate` bucket lacks room for
//!    its head packet is done for this call (and forfeits its deficit); one that empties
//!    keeps none; a packet the port's bucket lacks room for ends the call, and the next
//!    call goes on with the same turn. A queue with no `max_rate` of its own is limited by
//!    the port's cap only, and with no port cap either, by nothing.
//!
//! Counters are added once per queue per call (packets and bytes sent, tail drops, the held
//! gauge), not per packet. On port removal and at shutdown the thread frees what it holds
//! ([`Backlog::discard`]).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use packet::{Batch, Packet, PoolCache};

use super::{cost, PortShaper, FREE, SLOTS};

const _: () = assert!(SLOTS <= 64, "a slot is a bit of a u64 mask");

/// What one call did to each queue slot, added to the shared counters at its end; kept
/// between calls (zeroed as it is added) so that a call clears only the slots it touched.
struct Tally {
    /// Bit `s`: slot `s` has something to add.
    touched: u64,
    tx_packets: [u64; SLOTS],
    tx_bytes: [u64; SLOTS],
    dropped: [u64; SLOTS],
    /// Change of the held gauge.
    held: [i64; SLOTS],
    unknown: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            touched: 0,
            tx_packets: [0; SLOTS],
            tx_bytes: [0; SLOTS],
            dropped: [0; SLOTS],
            held: [0; SLOTS],
            unknown: 0,
        }
    }

    #[inline]
    fn sent(&mut self, q: usize, p: &Packet) {
        self.touched |= 1 << q;
        self.tx_packets[q] += 1;
        self.tx_bytes[q] += cost(p) / 8000;
        self.held[q] -= 1;
    }

    #[inline]
    fn dropped(&mut self, q: usize, held: bool) {
        self.touched |= 1 << q;
        self.dropped[q] += 1;
        self.held[q] -= i64::from(held);
    }

    #[inline]
    fn held(&mut self, q: usize, n: i64) {
        self.touched |= 1 << q;
        self.held[q] += n;
    }

    /// Adds what it holds to `s`'s counters (none: forgets it) and starts again from 0.
    fn add_to(&mut self, s: Option<&PortShaper>) {
        let mut m = std::mem::take(&mut self.touched);
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            let (tx, bytes, dropped, held) = (
                std::mem::take(&mut self.tx_packets[q]),
                std::mem::take(&mut self.tx_bytes[q]),
                std::mem::take(&mut self.dropped[q]),
                std::mem::take(&mut self.held[q]),
            );
            let Some(qs) = s.map(|s| &s.queues[q]) else {
                continue;
            };
            if tx != 0 {
                qs.tx_packets.fetch_add(tx, Ordering::Relaxed);
                qs.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            if dropped != 0 {
                qs.dropped.fetch_add(dropped, Ordering::Relaxed);
            }
            if held != 0 {
                qs.held.fetch_add(held as u64, Ordering::Relaxed);
            }
        }
        let unknown = std::mem::take(&mut self.unknown);
        if let Some(s) = s.filter(|_| unknown != 0) {
            s.unknown.fetch_add(unknown, Ordering::Relaxed);
        }
    }
}

/// Whether a packet of `cost` in queue slot `q` can ever leave: the buckets it must pass
/// can hold it (a jumbo frame or a super-packet over a small `burst` could not, and would
/// block its queue for good; it is dropped and counted instead, as a policer would).
#[inline]
fn passable(s: &PortShaper, q: usize, cost: u64) -> bool {
    let qs = &s.queues[q];
    let on = qs.on.load(Ordering::Relaxed);
    let peak = on && qs.max.rate() != 0;
    if peak && cost > qs.max.capacity() {
        return false;
    }
    let guaranteed = on && qs.min.rate() != 0 && cost <= qs.min.capacity();
    guaranteed || s.port.rate() == 0 || cost <= s.port.capacity()
}

/// The first slot of `open` (not empty) at or after `q`, wrapping around.
#[inline]
fn next_at_or_after(open: u64, q: usize) -> usize {
    let from_q = open & u64::MAX.checked_shl(q as u32).unwrap_or(0);
    if from_q != 0 { from_q } else { open }.trailing_zeros() as usize
}

/// One thread's packets waiting in one shaped port's queues (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    /// The [`PortShaper`] generation it follows (`None`: none seen yet).
    generation: Option<u64>,
    /// The rings, while the port shapes.
    rings: Option<Box<Rings>>,
}

/// The rings of a [`Backlog`] and the state of its round robin.
struct Rings {
    /// Packets a ring may hold.
    limit: usize,
    /// The queue id each ring holds packets of ([`FREE`]: none).
    ids: [u32; SLOTS],
    rings: [VecDeque<Packet>; SLOTS],
    /// Bit `q`: `rings[q]` holds packets.
    held: u64,
    /// The slot whose borrowing turn is under way, or where the next one starts.
    next: usize,
    /// Whether `next`'s turn is under way (its quantum already added).
    visiting: bool,
    /// Millibits each queue may still borrow in its turn (deficit round robin).
    deficit: [u64; SLOTS],
    t: Tally,
}

impl std::fmt::Debug for Rings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rings")
            .field("limit", &self.limit)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl Backlog {
    /// Whether it holds no packet.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.rings.as_ref().is_none_or(|r| r.held == 0)
    }

    /// Packets it holds (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.rings
            .as_ref()
            .map_or(0, |r| r.rings.iter().map(VecDeque::len).sum())
    }

    /// Follows a change of `s`'s configuration (one load when there was none): each ring
    /// sized for the port's backlog when the port has its queue, else none; a ring holding
    /// more than its new size drops the newest packets (counted); no rings when the port
    /// does not shape.
    #[inline]
    pub(crate) fn follow(&mut self, s: &PortShaper, cache: &mut PoolCache) {
        let g = s.generation.load(Ordering::Acquire);
        if self.generation == Some(g) {
            return;
        }
        self.resize(s, g, cache);
    }

    #[cold]
    fn resize(&mut self, s: &PortShaper, g: u64, cache: &mut PoolCache) {
        self.generation = Some(g);
        let limit = s.backlog.load(Ordering::Acquire) as usize;
        if limit == 0 {
            if let Some(mut r) = self.rings.take() {
                r.empty(s, cache);
            }
            return;
        }
        let r = self.rings.get_or_insert_with(|| {
            Box::new(Rings {
                limit,
                ids: [FREE; SLOTS],
                rings: std::array::from_fn(|_| VecDeque::new()),
                held: 0,
                next: 0,
                visiting: false,
                deficit: [0; SLOTS],
                t: Tally::new(),
            })
        });
        r.resize(s, limit, cache);
    }

    /// Takes the packets of `b` into their queues (a queue the port lacks: dropped and
    /// counted as unknown; a full queue: tail drop), then fills `b` with what the buckets
    /// let go at `now_ns` (see the module docs). Call [`Backlog::follow`] first (a port that
    /// does not shape has no rings: `b` is left as it is).
    pub(crate) fn shape(
        &mut self,
        s: &PortShaper,
        now_ns: u64,
        b: &mut Batch,
        cache: &mut PoolCache,
    ) {
        if let Some(r) = self.rings.as_mut() {
            r.shape(s, now_ns, b, cache);
        }
    }

    /// Frees every packet it holds (port removal, shutdown), taking them off `s`'s gauge.
    pub(crate) fn discard(&mut self, s: Option<&PortShaper>, cache: &mut PoolCache) {
        if let Some(r) = self.rings.as_mut() {
            r.discard(s, cache);
        }
    }
}

impl Rings {
    fn resize(&mut self, s: &PortShaper, limit: usize, cache: &mut PoolCache) {
        self.limit = limit;
        for q in 0..SLOTS {
            let id = s.slots.id(q);
            let has = id != FREE && (q == 0 || s.queues[q].on.load(Ordering::Relaxed));
            let want = if has { limit } else { 0 };
            let ring = &mut self.rings[q];
            if self.ids[q] != id {
                // The slot serves another queue now: what it held was for one that went.
                let n = ring.len();
                for p in ring.drain(..) {
                    cache.free(p);
                }
                self.t.unknown += n as u64;
                self.t.held(q, -(n as i64));
                self.ids[q] = id;
                self.deficit[q] = 0;
            }
            while ring.len() > want {
                if let Some(p) = ring.pop_back() {
                    cache.free(p);
                    self.t.dropped(q, true);
                }
            }
            if want == 0 {
                *ring = VecDeque::new();
            } else if ring.capacity() < want {
                ring.reserve_exact(want - ring.len());
            }
            if ring.is_empty() {
                self.held &= !(1 << q);
                self.deficit[q] = 0;
            }
        }
        self.t.add_to(Some(s));
    }

    /// Drops everything it holds, counted as dropped (the port stops shaping).
    fn empty(&mut self, s: &PortShaper, cache: &mut PoolCache) {
        for (q, ring) in self.rings.iter_mut().enumerate() {
            for p in ring.drain(..) {
                cache.free(p);
                self.t.dropped(q, true);
            }
        }
        self.held = 0;
        self.t.add_to(Some(s));
    }

    fn shape(&mut self, s: &PortShaper, now_ns: u64, b: &mut Batch, cache: &mut PoolCache) {
        // The slot of the last queue looked up: packets of one queue come in runs.
        let mut last: Option<(u32, Option<usize>)> = None;
        for p in b.drain() {
            let id = p.meta.user;
            let slot = match last {
                Some((l, slot)) if l == id => slot,
                _ => {
                    // A slot the thread has not followed yet to this queue is no ring of its.
                    let slot = s.slot_of(id).filter(|&q| self.ids[q] == id);
                    last = Some((id, slot));
                    slot
                }
            };
            let Some(q) = slot else {
                self.t.unknown += 1;
                cache.free(p);
                continue;
            };
            if self.rings[q].len() >= self.limit || !passable(s, q, cost(&p)) {
                self.t.dropped(q, false);
                cache.free(p);
            } else {
                self.rings[q].push_back(p);
                self.held |= 1 << q;
                self.t.held(q, 1);
            }
        }
        if self.held != 0 {
            self.release(s, now_ns, b);
        }
        self.t.add_to(Some(s));
    }

    /// Moves into `out` (empty) what the buckets allow at `now_ns`, at most one batch.
    fn release(&mut self, s: &PortShaper, now_ns: u64, out: &mut Batch) {
        let capped = s.refill_port(now_ns);
        // 1. What each queue's guarantee allows.
        let mut m = self.held;
        while m != 0 && !out.is_full() {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            let qs = &s.queues[q];
            if !qs.on.load(Ordering::Relaxed) || qs.min.rate() == 0 {
                continue;
            }
            qs.min.refill(now_ns);
            let peak = qs.max.rate() != 0;
            if peak {
                qs.max.refill(now_ns);
            }
            while !out.is_full() {
                let Some(c) = self.rings[q].front().map(cost) else {
                    break;
                };
                // At its cap (it borrowed up to it): it has had more than its guarantee.
                if (peak && qs.max.tokens() < c) || !qs.min.take(c) {
                    break;
                }
                if peak {
                    qs.max.charge(c);
                }
                if capped {
                    s.owe(s.port.charge(c));
                }
                self.send(q, out);
            }
        }
        // 2. What each may borrow up to its cap from the port's spare room.
        self.borrow(s, now_ns, capped, out);
    }

    /// Deficit round robin over the queues holding packets (see the module docs), from
    /// where the last call stopped, until the batch is full, the port's bucket is empty or
    /// no queue may send.
    fn borrow(&mut self, s: &PortShaper, now_ns: u64, capped: bool, out: &mut Batch) {
        let mut open = self.held;
        let mut m = open;
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            let qs = &s.queues[q];
            if qs.on.load(Ordering::Relaxed) && qs.max.rate() != 0 {
                qs.max.refill(now_ns);
            }
        }
        let (mut q, mut visiting) = (self.next, self.visiting);
        while open != 0 && !out.is_full() {
            if !visiting || open & (1 << q) == 0 {
                q = next_at_or_after(open, q);
                self.deficit[q] += s.queues[q].quantum.load(Ordering::Relaxed);
                visiting = true;
            }
            let Some(c) = self.rings[q].front().map(cost) else {
                open &= !(1 << q);
                continue;
            };
            let qs = &s.queues[q];
            let peak = qs.on.load(Ordering::Relaxed) && qs.max.rate() != 0;
            if peak && qs.max.tokens() < c {
                // At its cap: out of this call, and what it had not used is forfeit.
                open &= !(1 << q);
                self.deficit[q] = 0;
                (q, visiting) = ((q + 1) % SLOTS, false);
                continue;
            }
            if c > self.deficit[q] {
                // Its turn is over; the rest of its deficit waits for its next turn.
                (q, visiting) = ((q + 1) % SLOTS, false);
                continue;
            }
            if capped && !s.port.take(c) {
                break;
            }
            if peak {
                qs.max.charge(c);
            }
            self.deficit[q] -= c;
            self.send(q, out);
            if self.held & (1 << q) == 0 {
                open &= !(1 << q);
                (q, visiting) = ((q + 1) % SLOTS, false);
            }
        }
        (self.next, self.visiting) = (q, visiting);
    }

    /// Moves the head of ring `q` into `out` and counts it; an emptied queue keeps no
    /// deficit (no credit while it has nothing to send).
    #[inline(always)]
    fn send(&mut self, q: usize, out: &mut Batch) {
        if let Some(p) = self.rings[q].pop_front() {
            self.t.sent(q, &p);
            if out.push(p).is_err() {
                unreachable!("release stops when its batch is full");
            }
        }
        if self.rings[q].is_empty() {
            self.held &= !(1 << q);
            self.deficit[q] = 0;
        }
    }

    /// Frees every packet it holds, taking them off `s`'s gauge.
    fn discard(&mut self, s: Option<&PortShaper>, cache: &mut PoolCache) {
        for (q, ring) in self.rings.iter_mut().enumerate() {
            let n = ring.len();
            for p in ring.drain(..) {
                cache.free(p);
            }
            if n != 0 {
                self.t.held(q, -(n as i64));
            }
        }
        self.held = 0;
        self.t.add_to(s);
    }
}

#[cfg(test)]
#[path = "egress_backlog_tests.rs"]
mod tests;

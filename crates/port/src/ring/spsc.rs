//! A lock-free single-producer / single-consumer ring of [`Packet`]s.
//!
//! Layout: a power-of-two array of slots and two free-running indices, `tail` (next slot the
//! producer writes) and `head` (next slot the consumer reads). Both only grow (wrapping), so
//! `tail - head` is the fill level and `index & mask` the slot. Each index is written by one
//! side only and sits on its own cache line.
//!
//! Each side also keeps a private copy of the other side's index (`cached_head` in the
//! [`Producer`], `cached_tail` in the [`Consumer`]) and reloads the shared one only when the
//! copy says there is not enough room (or data). In steady state each side touches the other
//! side's cache line about once per wrap instead of once per batch, which avoids cache-line
//! ping-pong between the two cores.
//!
//! A whole batch moves with one index update: the producer writes `k` slots, then publishes
//! them with one Release store of `tail`; the consumer reads `k` slots, then frees them with
//! one Release store of `head`.
//!
//! Packets left in the ring when both sides are gone are given back to the ring's pool when
//! the ring is dropped.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use packet::{Batch, Packet, Pool};

/// The largest ring accepted (slots), so a typo cannot ask for gigabytes.
pub const MAX_CAPACITY: usize = 1 << 22;

/// Keeps a value on its own cache line (128 bytes: two lines, for the adjacent-line
/// prefetcher).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded<T>(T);

/// The memory shared by the two sides.
pub(crate) struct Shared {
    /// Next slot the consumer reads. Written by the consumer only.
    head: Padded<AtomicUsize>,
    /// Next slot the producer writes. Written by the producer only.
    tail: Padded<AtomicUsize>,
    mask: usize,
    slots: Box<[UnsafeCell<MaybeUninit<Packet>>]>,
    /// Where leftover packets go on drop.
    pool: Pool,
}

// SAFETY: a slot is written only by the producer while it is outside `head..tail` and read
// only by the consumer while it is inside; the Release/Acquire pairs on `head` and `tail`
// order those accesses. `Packet` is `Send`.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// A ring of `capacity` slots (a power of two between 1 and [`MAX_CAPACITY`]; checked by
    /// the caller).
    pub(crate) fn new(capacity: usize, pool: &Pool) -> Arc<Shared> {
        debug_assert!(capacity.is_power_of_two() && capacity <= MAX_CAPACITY);
        let slots = (0..capacity)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect();
        Arc::new(Shared {
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            mask: capacity - 1,
            slots,
            pool: pool.clone(),
        })
    }

    /// Number of slots.
    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Packets in the ring right now (a snapshot; exact only when both sides are idle).
    pub(crate) fn len(&self) -> usize {
        let tail = self.tail.0.load(Ordering::Acquire);
        let head = self.head.0.load(Ordering::Acquire);
        tail.wrapping_sub(head)
    }

    #[inline(always)]
    fn slot(&self, index: usize) -> *mut MaybeUninit<Packet> {
        self.slots[index & self.mask].get()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // `&mut self`: both sides are gone, nobody else touches the ring.
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut();
        let mut cache = self.pool.cache();
        let mut i = head;
        while i != tail {
            // SAFETY: slots in head..tail hold packets that were published and never read.
            let pkt = unsafe { (*self.slot(i)).assume_init_read() };
            // A packet of another pool cannot be freed here; it goes out of scope unfreed,
            // which leaks its frame safely (`Packet` has no `Drop`, and its pool keeps the
            // memory mapped while frames are out).
            if cache.owns(&pkt) {
                cache.free(pkt);
            }
            i = i.wrapping_add(1);
        }
    }
}

/// The sending side. Exactly one exists per ring at a time (the port enforces it).
pub(crate) struct Producer {
    shared: Arc<Shared>,
    /// Our own `tail` (only we write it, so no need to load it).
    tail: usize,
    /// Last `head` we read; the consumer may have moved further since.
    cached_head: usize,
}

impl Producer {
    /// The producer of `shared`. The caller guarantees there is only one at a time.
    pub(crate) fn new(shared: Arc<Shared>) -> Producer {
        // Acquire: a previous producer's Release of `tail` (and the slots it wrote) is
        // visible before we continue from it.
        let tail = shared.tail.0.load(Ordering::Acquire);
        let cached_head = shared.head.0.load(Ordering::Acquire);
        Producer {
            shared,
            tail,
            cached_head,
        }
    }

    /// Moves as many packets as fit from the front of `batch` into the ring (the rest stay in
    /// `batch`, in order). Returns `(packets, bytes)` moved.
    #[inline]
    pub(crate) fn enqueue(&mut self, batch: &mut Batch) -> (usize, usize) {
        let want = batch.len();
        let cap = self.shared.capacity();
        let mut free = cap - self.tail.wrapping_sub(self.cached_head);
        if free < want {
            // Acquire pairs with the consumer's Release store of `head`: its reads of the
            // slots before `head` are done before we overwrite them.
            self.cached_head = self.shared.head.0.load(Ordering::Acquire);
            free = cap - self.tail.wrapping_sub(self.cached_head);
        }
        let k = want.min(free);
        if k == 0 {
            return (0, 0);
        }
        let mut bytes = 0;
        for (i, pkt) in batch.drain_front(k).enumerate() {
            bytes += pkt.len();
            // SAFETY: slot tail+i is outside head..tail (we checked the room), so the consumer
            // does not read it, and the packet it held (if any) was moved out already.
            unsafe { (*self.shared.slot(self.tail.wrapping_add(i))).write(pkt) };
        }
        self.tail = self.tail.wrapping_add(k);
        // Release: the slot writes above become visible before the consumer sees the new
        // `tail` (it loads `tail` with Acquire).
        self.shared.tail.0.store(self.tail, Ordering::Release);
        (k, bytes)
    }
}

/// The receiving side. Exactly one exists per ring at a time (the port enforces it).
pub(crate) struct Consumer {
    shared: Arc<Shared>,
    /// Our own `head`.
    head: usize,
    /// Last `tail` we read; the producer may have published more since.
    cached_tail: usize,
}

impl Consumer {
    /// The consumer of `shared`. The caller guarantees there is only one at a time.
    pub(crate) fn new(shared: Arc<Shared>) -> Consumer {
        // Acquire: see `Producer::new`.
        let head = shared.head.0.load(Ordering::Acquire);
        let cached_tail = shared.tail.0.load(Ordering::Acquire);
        Consumer {
            shared,
            head,
            cached_tail,
        }
    }

    /// Moves up to `batch.room()` packets from the ring to the end of `batch`, in order.
    /// Returns `(packets, bytes)` moved.
    #[inline]
    pub(crate) fn dequeue(&mut self, batch: &mut Batch) -> (usize, usize) {
        let want = batch.room();
        let mut avail = self.cached_tail.wrapping_sub(self.head);
        if avail < want {
            // Acquire pairs with the producer's Release store of `tail`: the slots it wrote
            // before publishing are visible to our reads below.
            self.cached_tail = self.shared.tail.0.load(Ordering::Acquire);
            avail = self.cached_tail.wrapping_sub(self.head);
        }
        let k = want.min(avail);
        if k == 0 {
            return (0, 0);
        }
        let mut bytes = 0;
        for i in 0..k {
            // SAFETY: slot head+i is inside head..tail: published by the producer and not yet
            // read; reading moves the packet out, and the slot is logically empty after the
            // `head` update below.
            let pkt = unsafe { (*self.shared.slot(self.head.wrapping_add(i))).assume_init_read() };
            bytes += pkt.len();
            let pushed = batch.push(pkt);
            // Cannot fail: k <= room.
            debug_assert!(pushed.is_ok());
        }
        self.head = self.head.wrapping_add(k);
        // Release: our reads of the slots complete before the producer sees them free (it
        // loads `head` with Acquire before overwriting).
        self.shared.head.0.store(self.head, Ordering::Release);
        (k, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(batch: &mut Batch, cache: &mut packet::PoolCache, from: u8, n: usize) {
        for i in 0..n {
            let p = cache.alloc_from(&[from.wrapping_add(i as u8)]).unwrap();
            batch.push(p).unwrap();
        }
    }

    #[test]
    fn full_ring_takes_what_fits_and_keeps_order() {
        let pool = Pool::with_frames(256);
        let mut cache = pool.cache();
        let ring = Shared::new(8, &pool);
        let mut tx = Producer::new(ring.clone());
        let mut rx = Consumer::new(ring.clone());
        let mut b = Batch::new();
        fill(&mut b, &mut cache, 0, 12);
        assert_eq!(tx.enqueue(&mut b), (8, 8));
        assert_eq!(b.len(), 4);
        assert_eq!(b[0].data(), &[8]);
        assert_eq!(ring.len(), 8);

        let mut out = Batch::new();
        assert_eq!(rx.dequeue(&mut out), (8, 8));
        let got: Vec<u8> = out.as_slice().iter().map(|p| p.data()[0]).collect();
        assert_eq!(got, (0..8).collect::<Vec<u8>>());
        out.free_into(&mut cache);

        // Wraps around the end of the slot array.
        assert_eq!(tx.enqueue(&mut b), (4, 4));
        assert_eq!(rx.dequeue(&mut out), (4, 4));
        assert_eq!(out[0].data(), &[8]);
        out.free_into(&mut cache);
        assert_eq!(rx.dequeue(&mut out), (0, 0));
        drop(cache);
        drop((tx, rx, ring));
        assert_eq!(pool.shared_free(), 256);
    }

    #[test]
    fn dequeue_respects_batch_room() {
        let pool = Pool::with_frames(128);
        let mut cache = pool.cache();
        let ring = Shared::new(64, &pool);
        let mut tx = Producer::new(ring.clone());
        let mut rx = Consumer::new(ring.clone());
        for round in 0..2u8 {
            let mut b = Batch::new();
            fill(&mut b, &mut cache, round * 32, 32);
            assert_eq!(tx.enqueue(&mut b).0, 32);
        }
        let mut out = Batch::new();
        fill(&mut out, &mut cache, 200, 30);
        assert_eq!(rx.dequeue(&mut out).0, 2);
        assert_eq!(out[30].data(), &[0]);
        out.free_into(&mut cache);
        drop(cache);
        drop((tx, rx, ring));
        // 62 packets left in the ring come back on drop.
        assert_eq!(pool.shared_free(), 128);
    }
}

//! What each tunnel port carried (issue 18): packets and bytes terminated into it (rx) and
//! encapsulated out of it (tx), the counters `dump-ports`, `show`, the metrics and OVSDB show
//! for a tunnel port. Bytes are the inner frame's, as Open vSwitch counts them on a tunnel
//! port (the outer headers are the underlay port's traffic).
//!
//! Size and owner: one [`TunnelCounts`] per tunnel port, made by the control side when it
//! publishes the port ([`CountBook`]) and kept across republishing (next hops change, the
//! termination table is swapped), so the counts survive; a removed port's go with it. The
//! poll-mode threads reach it through the entries they already load (a tunnel output, a
//! terminator's entry) and add once per batch (per run of frames to one port when a batch's
//! frames went to several; once per packet for copies and segments).
//!
//! Each thread writes only its own cache line ([`SLOTS`] of them, by thread index) with a
//! relaxed load and store, as [`crate::stats`] does: no atomic read-modify-write on the fast
//! path. A thread whose index is past the last own slot shares the last one, with an atomic
//! add (more than `SLOTS - 1` poll threads only). Readers sum the slots.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::tunnel_drops::TunnelDrops;

/// Slots per tunnel port: threads `0..SLOTS - 1` own one each, the rest share the last.
pub const SLOTS: usize = 32;

/// One thread's counts of one tunnel port, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
}

/// Adds `n` to `c`, a counter only this thread writes (relaxed load and store), or, in the
/// shared slot, with an atomic add.
#[inline(always)]
fn bump(c: &AtomicU64, n: u64, shared: bool) {
    if shared {
        c.fetch_add(n, Ordering::Relaxed);
    } else {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

/// A tunnel port's counts as read: the sum over the threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunnelPortCounts {
    /// Packets terminated into the port.
    pub rx_packets: u64,
    /// Their inner frames' bytes.
    pub rx_bytes: u64,
    /// Packets encapsulated and handed to the underlay.
    pub tx_packets: u64,
    /// Their inner frames' bytes.
    pub tx_bytes: u64,
}

/// One tunnel port's per-thread counts, with its send-side drops (one pointer for a tunnel
/// output to carry).
#[derive(Debug)]
pub struct TunnelCounts {
    slots: [Slot; SLOTS],
    drops: Arc<TunnelDrops>,
}

impl TunnelCounts {
    /// Counts from zero, beside the port's send-side drops `drops`.
    pub fn new(drops: Arc<TunnelDrops>) -> TunnelCounts {
        TunnelCounts {
            slots: std::array::from_fn(|_| Slot::default()),
            drops,
        }
    }

    /// The port's send-side drops ([`crate::tunnel_drops::SendDrop`]).
    #[inline]
    pub fn drops(&self) -> &TunnelDrops {
        &self.drops
    }

    /// Thread `thread`'s slot, and whether it is the shared one.
    #[inline(always)]
    fn slot(&self, thread: usize) -> (&Slot, bool) {
        let i = thread.min(SLOTS - 1);
        (&self.slots[i], i == SLOTS - 1)
    }

    /// Asks for thread `thread`'s slot to be brought into the cache (a hint).
    #[inline]
    pub fn prefetch(&self, thread: usize) {
        let (s, _) = self.slot(thread);
        crate::bits::prefetch((s as *const Slot).cast());
    }

    /// Thread `thread` terminated `packets` frames of `bytes` (inner) into the port.
    #[inline]
    pub fn rx(&self, thread: usize, packets: u64, bytes: u64) {
        let (s, shared) = self.slot(thread);
        bump(&s.rx_packets, packets, shared);
        bump(&s.rx_bytes, bytes, shared);
    }

    /// Thread `thread` encapsulated `packets` frames of `bytes` (inner) out of the port.
    #[inline]
    pub fn tx(&self, thread: usize, packets: u64, bytes: u64) {
        let (s, shared) = self.slot(thread);
        bump(&s.tx_packets, packets, shared);
        bump(&s.tx_bytes, bytes, shared);
    }

    /// The sum over the threads.
    pub fn read(&self) -> TunnelPortCounts {
        let sum = |f: fn(&Slot) -> &AtomicU64| {
            self.slots
                .iter()
                .map(|s| f(s).load(Ordering::Relaxed))
                .fold(0u64, u64::wrapping_add)
        };
        TunnelPortCounts {
            rx_packets: sum(|s| &s.rx_packets),
            rx_bytes: sum(|s| &s.rx_bytes),
            tx_packets: sum(|s| &s.tx_packets),
            tx_bytes: sum(|s| &s.tx_bytes),
        }
    }
}

/// Every tunnel port's [`TunnelCounts`], by OpenFlow port (control side only).
#[derive(Debug, Default)]
pub struct CountBook {
    ports: Mutex<BTreeMap<u32, Arc<TunnelCounts>>>,
}

impl CountBook {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Arc<TunnelCounts>>> {
        self.ports.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counts of tunnel port `ofport`, made on first use beside its send-side drops
    /// `drops`.
    pub fn of(&self, ofport: u32, drops: impl FnOnce() -> Arc<TunnelDrops>) -> Arc<TunnelCounts> {
        self.lock()
            .entry(ofport)
            .or_insert_with(|| Arc::new(TunnelCounts::new(drops())))
            .clone()
    }

    /// Tunnel port `ofport`'s counts (`None`: it was never published).
    pub fn read(&self, ofport: u32) -> Option<TunnelPortCounts> {
        self.lock().get(&ofport).map(|c| c.read())
    }

    /// Forgets port `ofport`'s counts (it left the bridge; a new port of that number starts
    /// from zero).
    pub fn forget(&self, ofport: u32) {
        self.lock().remove(&ofport);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tunnel_drops::{DropBook, Side};

    #[test]
    fn threads_add_to_their_own_slots_and_reads_sum_them() {
        let (book, drops) = (CountBook::default(), DropBook::default());
        let of = |p| book.of(p, || drops.of(p, Side::Tunnel));
        let c = of(9);
        c.rx(0, 2, 120);
        c.rx(3, 1, 60);
        c.tx(1, 4, 400);
        // Past the last own slot: the shared one, added to atomically.
        c.tx(SLOTS + 5, 1, 100);
        c.tx(SLOTS - 1, 1, 100);
        let want = TunnelPortCounts {
            rx_packets: 3,
            rx_bytes: 180,
            tx_packets: 6,
            tx_bytes: 600,
        };
        assert_eq!(book.read(9), Some(want));
        assert!(Arc::ptr_eq(&of(9), &c), "kept across lookups");
        assert_eq!(book.read(8), None);
        book.forget(9);
        assert_eq!(book.read(9), None);
        assert_eq!(of(9).read(), TunnelPortCounts::default());
        assert_eq!(std::mem::align_of::<Slot>(), 64);
    }
}

//! A batch: up to [`BATCH_SIZE`] packets moved together through every stage.
//!
//! The caller owns the batch (usually on its stack or in its thread state); ports fill it on
//! receive and drain it on send. Nothing here allocates.

use arrayvec::ArrayVec;

use crate::pool::{Packet, PoolCache};

/// The most packets in one batch.
pub const BATCH_SIZE: usize = 32;

/// The mask of a batch's first `n` packets (bit `i` for packet `i`; all 32 from `n` = 32
/// on): the batch masks the datapath's stages pass along (same-key, drop, miss) are `u32`.
#[inline(always)]
pub fn low_bits(n: usize) -> u32 {
    const _: () = assert!(BATCH_SIZE == 32);
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// Up to [`BATCH_SIZE`] packets.
#[derive(Debug, Default)]
pub struct Batch {
    pkts: ArrayVec<Packet, BATCH_SIZE>,
}

impl Batch {
    /// An empty batch.
    #[inline]
    pub fn new() -> Batch {
        Batch {
            pkts: ArrayVec::new_const(),
        }
    }

    /// Number of packets.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// Whether the batch holds no packet.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Whether the batch holds [`BATCH_SIZE`] packets.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.pkts.is_full()
    }

    /// Room left.
    #[inline(always)]
    pub fn room(&self) -> usize {
        BATCH_SIZE - self.pkts.len()
    }

    /// Appends a packet; gives it back when the batch is full.
    #[inline(always)]
    pub fn push(&mut self, pkt: Packet) -> Result<(), Packet> {
        self.pkts.try_push(pkt).map_err(|e| e.element())
    }

    /// Removes and returns the last packet.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<Packet> {
        self.pkts.pop()
    }

    /// The packets, in order.
    #[inline(always)]
    pub fn as_slice(&self) -> &[Packet] {
        &self.pkts
    }

    /// The packets, writable.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [Packet] {
        &mut self.pkts
    }

    /// Removes the packets, in order.
    #[inline]
    pub fn drain(&mut self) -> arrayvec::Drain<'_, Packet, BATCH_SIZE> {
        self.pkts.drain(..)
    }

    /// Removes the first `n` packets (those a port sent), keeping the rest in order.
    #[inline]
    pub fn drain_front(&mut self, n: usize) -> arrayvec::Drain<'_, Packet, BATCH_SIZE> {
        self.pkts.drain(..n)
    }

    /// Gives every packet's frame back to `cache`, leaving the batch empty. Returns how many.
    #[inline]
    pub fn free_into(&mut self, cache: &mut PoolCache) -> usize {
        let n = self.pkts.len();
        for p in self.pkts.drain(..) {
            cache.free(p);
        }
        n
    }

    /// Keeps the packets for which `keep` is true, in order; the others are passed to
    /// `reject`.
    #[inline]
    pub fn retain_or(
        &mut self,
        mut keep: impl FnMut(&mut Packet) -> bool,
        mut reject: impl FnMut(Packet),
    ) {
        let mut kept = ArrayVec::<Packet, BATCH_SIZE>::new_const();
        for mut p in self.pkts.drain(..) {
            if keep(&mut p) {
                kept.push(p);
            } else {
                reject(p);
            }
        }
        self.pkts = kept;
    }
}

impl std::ops::Index<usize> for Batch {
    type Output = Packet;
    #[inline(always)]
    fn index(&self, i: usize) -> &Packet {
        &self.pkts[i]
    }
}

impl std::ops::IndexMut<usize> for Batch {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut Packet {
        &mut self.pkts[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Pool;

    #[test]
    fn fills_to_capacity_and_frees() {
        let pool = Pool::with_frames(64);
        let mut cache = pool.cache();
        let mut b = Batch::new();
        for i in 0..BATCH_SIZE {
            assert!(b.push(cache.alloc_from(&[i as u8]).unwrap()).is_ok());
        }
        let extra = cache.alloc().unwrap();
        let extra = b.push(extra).unwrap_err();
        cache.free(extra);
        assert!(b.is_full());
        let firsts: Vec<u8> = b
            .drain_front(2)
            .map(|p| {
                let v = p.data()[0];
                cache.free(p);
                v
            })
            .collect();
        assert_eq!(firsts, vec![0, 1]);
        assert_eq!(b[0].data(), &[2]);
        b.retain_or(|p| p.data()[0] % 2 == 0, |p| cache.free(p));
        assert!(b.as_slice().iter().all(|p| p.data()[0] % 2 == 0));
        b.free_into(&mut cache);
        assert!(b.is_empty());
        drop(cache);
        assert_eq!(pool.shared_free(), 64);
    }
}

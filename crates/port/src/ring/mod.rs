//! `ring`: in-memory port pairs, so switches and generators can be chained in one process.
//!
//! [`pair`] makes two connected ends: what is sent on one end is received on the other. Each
//! direction is a lock-free single-producer / single-consumer ring (module `spsc`); each end has
//! one rx and one tx queue, and each queue has one owner at a time (a second open fails), so
//! the single-producer / single-consumer rule always holds.
//!
//! A full ring takes what fits: `send` returns fewer than offered and the rest stay in the
//! batch. Packets still in a ring when every end and queue is dropped go back to the pool.
//!
//! For configs and the CLI, [`open_named`] finds ends by name in a process-wide [`Registry`]:
//! the first open of a name returns end A, the second end B.

mod registry;
mod spsc;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use packet::{Batch, Pool};

use crate::claim::{QueueClaim, QueueSlot};
use crate::{
    check_single_queue, Capabilities, Port, PortError, PortStats, QueueCounters, RxQueue, TxQueue,
};

pub use registry::{open_named, Registry};
pub use spsc::MAX_CAPACITY;

/// Ring size used by specs that do not give one (`ring:NAME`).
pub const DEFAULT_CAPACITY: usize = 1024;

/// One end of a ring pair.
pub struct RingPort {
    name: String,
    /// Packets from the peer to us.
    rx_ring: Arc<spsc::Shared>,
    /// Packets from us to the peer.
    tx_ring: Arc<spsc::Shared>,
    rx_slot: QueueSlot,
    tx_slot: QueueSlot,
    rx_counters: Arc<QueueCounters>,
    tx_counters: Arc<QueueCounters>,
    /// The most bytes one packet of the pool holds.
    max_frame: u32,
    /// What [`Port::udp_tunnel_gso`] answers ([`RingPort::set_udp_tunnel_gso`]).
    tunnel_gso: AtomicBool,
}

impl std::fmt::Debug for RingPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingPort")
            .field("name", &self.name)
            .field("capacity", &self.capacity())
            .finish()
    }
}

/// Makes two connected ring ends named `name_a` and `name_b`. Each direction holds
/// `capacity` packets, rounded up to a power of two and clamped to `1..=`[`MAX_CAPACITY`]
/// (see [`RingPort::capacity`] for the size chosen). Packets left inside at the end are
/// given back to `pool`.
pub fn pair(
    name_a: &str,
    name_b: &str,
    capacity: usize,
    pool: &Pool,
) -> (Arc<RingPort>, Arc<RingPort>) {
    let capacity = capacity.clamp(1, MAX_CAPACITY).next_power_of_two();
    let a_to_b = spsc::Shared::new(capacity, pool);
    let b_to_a = spsc::Shared::new(capacity, pool);
    let max = pool.max_data() as u32;
    let a = RingPort::end(name_a, b_to_a.clone(), a_to_b.clone(), max);
    let b = RingPort::end(name_b, a_to_b, b_to_a, max);
    (Arc::new(a), Arc::new(b))
}

impl RingPort {
    fn end(
        name: &str,
        rx_ring: Arc<spsc::Shared>,
        tx_ring: Arc<spsc::Shared>,
        max_frame: u32,
    ) -> RingPort {
        RingPort {
            name: name.to_string(),
            rx_ring,
            tx_ring,
            rx_slot: QueueSlot::default(),
            tx_slot: QueueSlot::default(),
            rx_counters: Arc::default(),
            tx_counters: Arc::default(),
            max_frame,
            tunnel_gso: AtomicBool::new(false),
        }
    }

    /// Makes this end stand for a port whose kernel cuts UDP-tunnelled super-packets
    /// ([`Port::udp_tunnel_gso`]), so that tests see what a tunnel sends such a port: its
    /// peer receives super-packets encapsulated whole. Takes effect for tx queues the
    /// datapath sets up after the call.
    pub fn set_udp_tunnel_gso(&self, on: bool) {
        self.tunnel_gso.store(on, Ordering::Relaxed);
    }

    /// Slots in each direction.
    pub fn capacity(&self) -> usize {
        self.tx_ring.capacity()
    }

    /// Packets waiting to be received on this end (a snapshot).
    pub fn pending_rx(&self) -> usize {
        self.rx_ring.len()
    }
}

impl Port for RingPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn udp_tunnel_gso(&self) -> bool {
        self.tunnel_gso.load(Ordering::Relaxed)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            rx_queues: 1,
            tx_queues: 1,
            vnet_hdr: false,
            max_frame: self.max_frame,
        }
    }

    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        check_single_queue(&self.name, "ring", "rx", queue)?;
        let claim = self.rx_slot.claim(&self.name, "rx queue 0")?;
        Ok(Box::new(RingRx {
            ring: spsc::Consumer::new(self.rx_ring.clone()),
            counters: self.rx_counters.clone(),
            _claim: claim,
        }))
    }

    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        check_single_queue(&self.name, "ring", "tx", queue)?;
        let claim = self.tx_slot.claim(&self.name, "tx queue 0")?;
        Ok(Box::new(RingTx {
            ring: spsc::Producer::new(self.tx_ring.clone()),
            counters: self.tx_counters.clone(),
            _claim: claim,
        }))
    }

    fn stats(&self) -> PortStats {
        PortStats::from_queues(&self.rx_counters, &self.tx_counters)
    }
}

/// The receive queue of a ring end: the consumer of the peer's ring.
struct RingRx {
    ring: spsc::Consumer,
    counters: Arc<QueueCounters>,
    _claim: QueueClaim,
}

impl RxQueue for RingRx {
    #[inline]
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let (n, bytes) = self.ring.dequeue(batch);
        self.counters.add_batch(n, bytes as u64, 0);
        n
    }
}

/// The transmit queue of a ring end: the producer of our ring.
struct RingTx {
    ring: spsc::Producer,
    counters: Arc<QueueCounters>,
    _claim: QueueClaim,
}

impl TxQueue for RingTx {
    fn dropped(&mut self, n: u64) {
        self.counters.add_dropped(n);
    }

    #[inline]
    fn send(&mut self, batch: &mut Batch) -> usize {
        let (n, bytes) = self.ring.enqueue(batch);
        self.counters.add_batch(n, bytes as u64, 0);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_on_one_end_arrives_on_the_other_both_ways() {
        let pool = Pool::with_frames(64);
        let mut cache = pool.cache();
        let (a, b) = pair("a", "b", 16, &pool);
        let (mut a_rx, mut a_tx) = (a.open_rx(0).unwrap(), a.open_tx(0).unwrap());
        let (mut b_rx, mut b_tx) = (b.open_rx(0).unwrap(), b.open_tx(0).unwrap());

        let mut batch = Batch::new();
        batch.push(cache.alloc_from(b"to b").unwrap()).unwrap();
        assert_eq!(a_tx.send(&mut batch), 1);
        batch.push(cache.alloc_from(b"to a!").unwrap()).unwrap();
        assert_eq!(b_tx.send(&mut batch), 1);
        assert_eq!(b.pending_rx(), 1);

        assert_eq!(b_rx.recv(&mut batch), 1);
        assert_eq!(batch[0].data(), b"to b");
        batch.free_into(&mut cache);
        assert_eq!(a_rx.recv(&mut batch), 1);
        assert_eq!(batch[0].data(), b"to a!");
        batch.free_into(&mut cache);

        assert_eq!(a.stats().tx_packets, 1);
        assert_eq!(a.stats().tx_bytes, 4);
        assert_eq!(a.stats().rx_bytes, 5);
        assert_eq!(b.stats().rx_packets, 1);
    }

    #[test]
    fn queues_open_once_and_only_queue_zero_exists() {
        let pool = Pool::with_frames(8);
        let (a, _b) = pair("a", "b", 8, &pool);
        let rx = a.open_rx(0).unwrap();
        let err = a.open_rx(0).err().unwrap();
        assert!(err.to_string().contains("already open"), "{err}");
        let err = a.open_tx(1).err().unwrap();
        assert!(err.to_string().contains("queue 0, not 1"), "{err}");
        drop(rx);
        assert!(a.open_rx(0).is_ok());
    }

    #[test]
    fn capacity_is_rounded_to_a_power_of_two() {
        let pool = Pool::with_frames(8);
        assert_eq!(pair("a", "b", 100, &pool).0.capacity(), 128);
        assert_eq!(pair("a", "b", 0, &pool).0.capacity(), 1);
        assert_eq!(pair("a", "b", usize::MAX, &pool).0.capacity(), MAX_CAPACITY);
    }

    #[test]
    fn a_million_numbered_packets_cross_threads_in_order() {
        const N: u64 = 1_000_000;
        let pool = Pool::with_frames(4096);
        let (a, b) = pair("a", "b", 512, &pool);
        let mut tx = a.open_tx(0).unwrap();
        let mut rx = b.open_rx(0).unwrap();
        let producer_pool = pool.clone();
        let producer = std::thread::spawn(move || {
            let mut cache = producer_pool.cache();
            let mut batch = Batch::new();
            let mut next = 0u64;
            while next < N || !batch.is_empty() {
                while next < N && !batch.is_full() {
                    match cache.alloc_from(&next.to_le_bytes()) {
                        Some(p) => {
                            batch.push(p).unwrap();
                            next += 1;
                        }
                        None => break,
                    }
                }
                if tx.send(&mut batch) == 0 {
                    std::thread::yield_now();
                }
            }
        });
        let mut cache = pool.cache();
        let mut batch = Batch::new();
        let mut expect = 0u64;
        while expect < N {
            if rx.recv(&mut batch) == 0 {
                std::thread::yield_now();
                continue;
            }
            for p in batch.drain() {
                let got = u64::from_le_bytes(p.data().try_into().unwrap());
                assert_eq!(got, expect, "packet out of order");
                expect += 1;
                cache.free(p);
            }
        }
        producer.join().unwrap();
        assert_eq!(b.stats().rx_packets, N);
        assert_eq!(a.stats().tx_bytes, N * 8);
        drop(cache);
        drop((rx, a, b));
        assert_eq!(pool.shared_free(), 4096);
    }
}

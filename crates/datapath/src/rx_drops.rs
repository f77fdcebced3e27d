//! Drops by reason per receive queue: what the switch dropped of the packets one rx queue
//! delivered, so that each port can show its own (`hayate ctl BRIDGE dump-drops`, and
//! `rx_dropped` / `rx_errors` in `dump-ports`); and the queue's packets and the thread's busy
//! cycles spent on them, so that each queue's share of its thread shows
//! (`hayate ctl BRIDGE rxq-show`).
//!
//! Size and owner: one [`RxDrops`] per rx queue (priority queues included), made by the
//! control side when the queue opens and moved with the queue to the poll thread that reads
//! it. Only that thread writes it (a relaxed load and store, as [`crate::PmdStats`]); the
//! control side keeps a handle and sums a port's queues when asked. So the counters are per
//! thread, and the per-packet path pays nothing: a batch comes from one rx queue, and the
//! thread compares its batch-local drop counts before and after the batch (a few loads) and
//! stores the difference only when the batch dropped something.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use port::RxQueue;

use pipeline::meter::TokenBucket;

use crate::police::PortPolicer;
use crate::stats::{Counter, LocalStats, Snapshot};

/// An rx queue as a poll thread holds it: its OpenFlow port, the queue, its drop counters,
/// its port's ingress policer and the queue's share of the upcall budget.
pub(crate) struct RxSlot {
    pub(crate) ofport: u32,
    pub(crate) queue: Box<dyn RxQueue>,
    pub(crate) drops: Arc<RxDrops>,
    /// The port's policer, shared with its other queues ([`crate::police`]).
    pub(crate) police: Arc<PortPolicer>,
    /// Cycles this queue's upcalls took in the upcall budget's window (`pmd/budget.rs`).
    pub(crate) upcall_cycles: u64,
    /// The queue's packet-in allowance, made at its first batch when
    /// [`crate::DpConfig::packet_in_port_rate`] is set (`pmd/budget.rs`).
    pub(crate) packet_ins: Option<TokenBucket>,
}

impl RxSlot {
    /// A slot for `queue` of port `ofport`, policed by `police`, with new counters.
    pub(crate) fn new(ofport: u32, queue: Box<dyn RxQueue>, police: Arc<PortPolicer>) -> RxSlot {
        RxSlot {
            ofport,
            queue,
            drops: Arc::new(RxDrops::new()),
            police,
            upcall_cycles: 0,
            packet_ins: None,
        }
    }
}

/// One rx queue as the control side sees it ([`crate::Running::rx_queues`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxQueueStats {
    /// The poll thread that reads it.
    pub thread: usize,
    /// Its port.
    pub ofport: u32,
    /// Its number among the port's queues, in the order the threads poll them.
    pub queue: usize,
    /// Its counters: drops by reason ([`IN_PORT_DROPS`]), `rx_packets`, `busy_cycles`.
    pub stats: Snapshot,
}

/// The drop reasons counted against the port a packet came in on. Drops at output
/// (`drop_tx_full`) are counted by the output port itself ([`port::TxQueue::dropped`]).
pub const IN_PORT_DROPS: [Counter; 9] = [
    Counter::DropPoliced,
    Counter::DropMalformed,
    Counter::UpcallShed,
    Counter::DropNoAction,
    Counter::DropRewrite,
    Counter::DropMeter,
    Counter::DropPoolEmpty,
    Counter::DropPacketInFull,
    Counter::DropPacketInBudget,
];

/// What is counted per rx queue: [`IN_PORT_DROPS`], then the queue's packets and the busy
/// cycles of its batches.
const PER_QUEUE: [Counter; 11] = [
    IN_PORT_DROPS[0],
    IN_PORT_DROPS[1],
    IN_PORT_DROPS[2],
    IN_PORT_DROPS[3],
    IN_PORT_DROPS[4],
    IN_PORT_DROPS[5],
    IN_PORT_DROPS[6],
    IN_PORT_DROPS[7],
    IN_PORT_DROPS[8],
    Counter::RxPackets,
    Counter::BusyCycles,
];

const N: usize = PER_QUEUE.len();

/// A batch's drop counts when it started (see [`RxDrops::record`]).
pub(crate) type Mark = [u64; N];

/// Drops of the packets one rx queue delivered, by reason ([`IN_PORT_DROPS`]). Written by
/// the thread that owns the queue; read by anyone.
#[derive(Debug, Default)]
pub struct RxDrops {
    c: [AtomicU64; N],
}

impl RxDrops {
    /// All zero.
    pub fn new() -> RxDrops {
        RxDrops::default()
    }

    /// The thread's batch-local drop counts now, to pass to [`RxDrops::record`] after the
    /// batch.
    #[inline(always)]
    pub(crate) fn mark(local: &LocalStats) -> Mark {
        PER_QUEUE.map(|c| local.get(c))
    }

    /// Adds what the batch dropped since `mark` (owning thread only).
    #[inline(always)]
    pub(crate) fn record(&self, mark: &Mark, local: &LocalStats) {
        for (i, c) in PER_QUEUE.iter().enumerate() {
            let d = local.get(*c).wrapping_sub(mark[i]);
            if d != 0 {
                let a = &self.c[i];
                a.store(a.load(Ordering::Relaxed).wrapping_add(d), Ordering::Relaxed);
            }
        }
    }

    /// The counts as a [`Snapshot`] (only the [`IN_PORT_DROPS`] fields, `rx_packets` and
    /// `busy_cycles` are set), so that queues add up with `+` and print with
    /// [`Counter::name`].
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::default();
        for (i, c) in PER_QUEUE.iter().enumerate() {
            s[*c] = self.c[i].load(Ordering::Relaxed);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_adds_only_what_it_dropped() {
        let d = RxDrops::new();
        let mut local = LocalStats::default();
        // Counts of an earlier queue's batch in the same poll are not this queue's.
        local.add(Counter::DropMeter, 5);
        local.add(Counter::RxPackets, 32);
        let mark = RxDrops::mark(&local);
        local.add(Counter::DropMalformed, 2);
        local.add(Counter::UpcallShed, 3);
        local.add(Counter::RxPackets, 32);
        d.record(&mark, &local);
        let s = d.snapshot();
        assert_eq!(s.drop_malformed, 2);
        assert_eq!(s.upcall_shed, 3);
        assert_eq!(s.drop_meter, 0);
        assert_eq!(s.rx_packets, 32, "only this batch's packets");
        assert_eq!(s.tx_packets, 0, "nothing else is counted per queue");
        assert_eq!(s.drops(), 5);
    }
}

//! The upcall budget ("a flood of new flows slows only new flows", and only that queue's):
//! at most `max_upcalls_per_batch` translations per batch; and while, over a decaying
//! window of about 1 ms, one rx queue's upcalls took more than `upcall_share` of this
//! thread's busy cycles and the window also saw cache hits, that queue's further misses are
//! shed (dropped, counted as `upcall_shed` against its port) beyond
//! `min_upcalls_per_batch`. Each queue is judged by its own upcalls: a port flooding new
//! flows spends its own share, and another port's new flows on the same thread are
//! translated as before.
//!
//! Packet-ins are budgeted per rx queue too, when `packet_in_port_rate` is set: each queue
//! has a token bucket of packet-ins (its own, not shared: a port with queues on several
//! threads gets the rate per queue); a batch may queue as many as the bucket holds, and what
//! it queued is taken out after the batch.

use pipeline::meter::TokenBucket;

use super::Pmd;

/// Length of the upcall-budget window.
const WINDOW_NS: u64 = 1_000_000;
/// The upcall budget's decaying window (the queues' upcall cycles are in their
/// [`crate::rx_drops::RxSlot`]s).
#[derive(Debug, Default)]
pub(super) struct Budget {
    window_start_ns: u64,
    /// Busy cycles in the window.
    pub(super) busy: u64,
    hits: u64,
}

impl Pmd {
    /// Adds a batch's cache hits to the window, halving it when [`WINDOW_NS`] has passed.
    pub(super) fn roll_budget(&mut self, now: u64, hits: u64) {
        let b = &mut self.budget;
        if now.wrapping_sub(b.window_start_ns) >= WINDOW_NS {
            // Decay instead of reset, so the decision never starts from nothing.
            b.busy /= 2;
            b.hits /= 2;
            b.window_start_ns = now;
            for r in self.rx.iter_mut() {
                r.upcall_cycles /= 2;
            }
        }
        b.hits += hits;
    }

    /// Before a batch of rx queue `q`: lets the executor queue as many packet-ins as the
    /// queue's allowance holds at `now` (ns). Returns that number, for
    /// [`Pmd::settle_packet_ins`].
    pub(super) fn allow_packet_ins(&mut self, q: usize, now: u64) -> u32 {
        let (rate, burst) = (
            u64::from(self.cfg.packet_in_port_rate),
            u64::from(self.cfg.packet_in_port_burst),
        );
        let Some(slot) = self.rx.get_mut(q) else {
            return u32::MAX;
        };
        let b = slot
            .packet_ins
            .get_or_insert_with(|| TokenBucket::new(rate * 1000, burst * 1000));
        b.refill(now);
        let allow = (b.tokens() / 1000).min(u64::from(u32::MAX - 1)) as u32;
        self.exec.packet_in_allow = allow;
        allow
    }

    /// After the batch: takes the packet-ins it queued out of queue `q`'s allowance.
    pub(super) fn settle_packet_ins(&mut self, q: usize, allowed: u32) {
        let used = allowed.saturating_sub(self.exec.packet_in_allow);
        self.exec.packet_in_allow = u32::MAX;
        if let Some(b) = self.rx.get(q).and_then(|r| r.packet_ins.as_ref()) {
            b.take(u64::from(used) * 1000);
        }
    }

    /// Whether one more upcall is allowed in this batch of rx queue `q`.
    /// `now` is a recent [`cycles`] reading.
    pub(super) fn upcall_allowed(&self, q: usize, done: u32, batch_t0: u64, now: u64) -> bool {
        if done >= self.cfg.max_upcalls_per_batch {
            return false;
        }
        if done < self.cfg.min_upcalls_per_batch {
            return true;
        }
        let b = &self.budget;
        let busy = b.busy + now.wrapping_sub(batch_t0);
        let spent = self.rx.get(q).map_or(0, |r| r.upcall_cycles);
        !(b.hits > 0 && spent as f64 > self.cfg.upcall_share * busy as f64)
    }
}

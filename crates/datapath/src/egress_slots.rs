//! Which slot of a port's shaper serves which queue id: queue ids run 0 ..=
//! [`port::egress::MAX_QUEUE_ID`] (Open vSwitch's `linux-htb` range) but a port has at most
//! [`SLOTS`] queues, so each queue the port has is given one of [`SLOTS`] slots (its
//! buckets, counters and, per poll thread, its ring).
//!
//! Size and owner: one [`QueueSlots`] per [`super::PortShaper`], a slot's id one atomic, read
//! by every thread that sends to the port and written by the control side only (under the
//! shaper's configuration mutex). Slot 0 is queue 0's for good (it exists with or without a
//! row of its own). A queue keeps its slot while the port keeps it, so its counters and held
//! packets stay where they are across changes of other queues; a new queue takes the lowest
//! free slot. A lookup ([`QueueSlots::slot`]) scans the slots in use — no allocation, no hash:
//! the datapath looks up once per queue present in an output batch (policing) or once per
//! run of packets of the same queue (shaping).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Queues a port can have, queue 0 among them.
pub(crate) const SLOTS: usize = port::egress::MAX_QUEUES;

/// A slot no queue has.
pub(crate) const FREE: u32 = u32::MAX;

/// The queue id of each slot (see the module docs).
#[derive(Debug)]
pub(crate) struct QueueSlots {
    ids: [AtomicU32; SLOTS],
    /// One past the highest slot in use.
    len: AtomicUsize,
}

/// A new assignment of ids to slots, made by [`QueueSlots::plan`] and applied by
/// [`QueueSlots::publish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The id each slot will serve ([`FREE`]: none).
    pub ids: [u32; SLOTS],
    /// Bit `s`: slot `s` changes to a queue it did not serve.
    pub fresh: u64,
}

impl Default for QueueSlots {
    fn default() -> Self {
        let s = QueueSlots {
            ids: std::array::from_fn(|_| AtomicU32::new(FREE)),
            len: AtomicUsize::new(1),
        };
        s.ids[0].store(0, Ordering::Relaxed);
        s
    }
}

impl QueueSlots {
    /// The slot of queue `id`, if the port has it (queue 0: always slot 0).
    #[inline]
    pub(crate) fn slot(&self, id: u32) -> Option<usize> {
        if id == 0 {
            return Some(0);
        }
        let n = self.len.load(Ordering::Acquire).min(SLOTS);
        (1..n).find(|&s| self.ids[s].load(Ordering::Relaxed) == id)
    }

    /// The queue id slot `s` serves ([`FREE`]: none).
    #[inline]
    pub(crate) fn id(&self, s: usize) -> u32 {
        self.ids[s].load(Ordering::Relaxed)
    }

    /// Slots for queues `want` (ids, each once; queue 0 needs none of its own): a queue
    /// that has a slot keeps it, a new one takes the lowest free slot, the slots of queues not
    /// wanted are freed. Queues beyond [`SLOTS`] get none (`port::egress` refuses them first).
    pub(crate) fn plan(&self, want: impl IntoIterator<Item = u32>) -> Plan {
        let mut want: Vec<u32> = want.into_iter().filter(|&id| id != 0).collect();
        want.sort_unstable();
        want.dedup();
        let mut p = Plan {
            ids: [FREE; SLOTS],
            fresh: 0,
        };
        p.ids[0] = 0;
        let mut new = Vec::new();
        for id in want {
            match (1..SLOTS).find(|&s| self.id(s) == id) {
                Some(s) => p.ids[s] = id,
                None => new.push(id),
            }
        }
        let mut free = (1..SLOTS).filter(|&s| p.ids[s] == FREE).collect::<Vec<_>>();
        free.reverse();
        for id in new {
            let Some(s) = free.pop() else { break };
            p.ids[s] = id;
            p.fresh |= 1 << s;
        }
        p
    }

    /// Applies `p` (control side, after the slots' rates are set).
    pub(crate) fn publish(&self, p: &Plan) {
        for (slot, &id) in self.ids.iter().zip(&p.ids) {
            slot.store(id, Ordering::Relaxed);
        }
        let len = p
            .ids
            .iter()
            .rposition(|&id| id != FREE)
            .map_or(1, |s| s + 1);
        self.len.store(len, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_keep_their_slots_and_new_ones_take_the_lowest_free() {
        let s = QueueSlots::default();
        assert_eq!((s.slot(0), s.slot(1)), (Some(0), None));
        let p = s.plan([0xefff, 1, 7]);
        assert_eq!(&p.ids[..5], &[0, 1, 7, 0xefff, FREE]);
        assert_eq!(p.fresh, 0b1110);
        s.publish(&p);
        assert_eq!(
            (s.slot(1), s.slot(7), s.slot(0xefff), s.slot(2)),
            (Some(1), Some(2), Some(3), None)
        );
        // Queue 7 goes, 1000 comes: 1 and 0xefff stay put, 1000 takes 7's slot.
        let p = s.plan([1, 0xefff, 1000]);
        assert_eq!(&p.ids[..4], &[0, 1, 1000, 0xefff]);
        assert_eq!(p.fresh, 0b100);
        s.publish(&p);
        assert_eq!((s.slot(7), s.slot(1000)), (None, Some(2)));
        // All gone: only queue 0 is left.
        s.publish(&s.plan([]));
        assert_eq!(
            (s.slot(0), s.slot(1), s.len.load(Ordering::Relaxed)),
            (Some(0), None, 1)
        );
    }

    #[test]
    fn at_most_slots_queues_get_a_slot() {
        let s = QueueSlots::default();
        let p = s.plan(1..=SLOTS as u32 + 5);
        s.publish(&p);
        assert_eq!(s.slot(SLOTS as u32 - 1), Some(SLOTS - 1));
        assert_eq!(s.slot(SLOTS as u32), None, "no slot left");
    }
}

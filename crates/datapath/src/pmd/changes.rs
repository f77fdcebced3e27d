//! Flow changes in the poll thread: the records a generation change brings are taken before
//! any lookup, and a megaflow hit after them is checked before its packet uses it (the
//! design is in [`crate::revalidate`]).

use super::time::pipeline_ms;
use super::Pmd;
use crate::megaflow::MegaflowId;
use crate::revalidate::Verdict;
use crate::stats::Counter;

impl Pmd {
    /// Takes what the publishes since the last look changed: megaflows are then checked as
    /// they are hit; untracked changes empty the caches.
    #[cold]
    pub(super) fn take_changes(&mut self) {
        match self.reval.take(&*self.upcall) {
            Verdict::Flush => self.flush_caches(),
            Verdict::Lazy => {}
            Verdict::Walk => {
                self.arena.set_stamp(self.reval.stamp());
                let now_ms = pipeline::dpaction::now_ms();
                let old = &mut self.s.idle;
                old.clear();
                self.arena.older_than(self.reval.ring_len(), old);
                for &id in old.iter() {
                    if let Some(mf) = self.arena.remove(id, now_ms) {
                        self.cls.remove(&mf.key, &mf.mask);
                        self.local.add(Counter::MegaflowInvalidated, 1);
                    }
                }
            }
        }
        self.arena.set_stamp(self.reval.stamp());
    }

    /// Whether megaflow `id`, found by a lookup, may be used: alive and, when a publish came
    /// since it was last checked, not affected by what changed (else it is removed).
    #[inline(always)]
    pub(super) fn usable(&mut self, id: MegaflowId) -> bool {
        self.arena.is_current(id) || self.revalidate(id)
    }

    /// The slow half of [`Pmd::usable`].
    #[cold]
    #[inline(never)]
    fn revalidate(&mut self, id: MegaflowId) -> bool {
        let Some(stamp) = self.arena.stamp_of(id) else {
            return false;
        };
        let holds = self
            .arena
            .get(id)
            .is_some_and(|mf| self.reval.holds(stamp, mf));
        if holds {
            self.arena.mark_current(id);
            self.local.add(Counter::MegaflowRevalidated, 1);
            return true;
        }
        if let Some(mf) = self.arena.remove(id, pipeline_ms(self.exec.now_ns)) {
            self.cls.remove(&mf.key, &mf.mask);
            self.local.add(Counter::MegaflowInvalidated, 1);
        }
        false
    }
}

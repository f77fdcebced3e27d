//! The maintenance pass, at most every `maintenance_ms` (after a batch, or while idle): the
//! megaflows' counters flushed to their flow entries, the classifier's subtables re-ranked
//! by use, and a sweep of [`SWEEP_SLOTS`] megaflow slots that removes those idle for longer
//! than `megaflow_idle_ms`.
//!
//! Counter flushes cost two locked adds and about two cache misses a megaflow: with 100,000
//! busy megaflows, flushing them all every pass took a tenth of the thread (and stalled it
//! for ~10 ms each time). A pass flushes the [`FLUSH_SHARE`]-th of the dirty list hit longest
//! ago (and at least [`FLUSH_MIN`]), so a flow entry's counters and idle time lag its packets
//! by at most `FLUSH_SHARE` passes (500 ms by default) however many megaflows are busy, and
//! by one pass when at most `FLUSH_MIN` are.
//!
//! The sweep also tells revalidation which priorities still decide some megaflow: each live
//! megaflow it passes is noted, and when it has passed the last slot the lowest deciding
//! priority per table becomes what it saw (with what was installed meanwhile), so a table
//! that once decided megaflows at a low priority (a catch-all, before the controller's rules
//! came) stops making every later change reach them ([`crate::revalidate`]).
//!
//! Before the schedule is looked at, a dump asked of the thread ([`crate::look`]) is
//! answered: one load and compare per batch while none is asked. Each pass also leaves the
//! count of live megaflows where the metrics read it.

use super::time::pipeline_ms;
use super::Pmd;
use crate::look::{op_text, MegaflowRecord};
use crate::stats::Counter;

/// Megaflow slots examined per maintenance pass for idleness.
pub(super) const SWEEP_SLOTS: usize = 4096;
/// A pass flushes at least this share (1/N) of the megaflows hit since their last flush.
pub(super) const FLUSH_SHARE: usize = 5;
/// A pass flushes at least this many of them (all, when fewer are listed).
pub(super) const FLUSH_MIN: usize = 8192;

impl Pmd {
    /// Runs the pass when it is due at `now` (ns).
    pub(super) fn maybe_maintain(&mut self, now: u64) {
        if self.look.wanted() != self.look_answered {
            self.answer_look();
        }
        if now < self.next_maintenance_ns {
            return;
        }
        self.next_maintenance_ns = now + self.cfg.maintenance_ms * 1_000_000;
        let now_ms = pipeline_ms(now);
        let dirty = self.arena.dirty_len();
        self.arena
            .flush_oldest(FLUSH_MIN.max(dirty.div_ceil(FLUSH_SHARE)), now_ms);
        self.cls.rerank();
        let idle_ms = self.cfg.megaflow_idle_ms;
        let idle = &mut self.s.idle;
        idle.clear();
        let arena = &self.arena;
        let reval = &mut self.reval;
        self.sweep_at = arena.sweep(self.sweep_at, SWEEP_SLOTS, |id, mf| {
            reval.note_live(&mf.trail);
            let (p, _) = arena.unflushed(id);
            if p == 0 && now_ms.saturating_sub(mf.last_used_ms) > idle_ms {
                idle.push(id);
            }
        });
        if self.sweep_at == 0 {
            self.reval.end_sweep();
        }
        for &id in idle.iter() {
            if let Some(mf) = self.arena.remove(id, now_ms) {
                self.cls.remove(&mf.key, &mf.mask);
                self.local.add(Counter::MegaflowEvictions, 1);
            }
        }
        self.look.set_live(self.arena.len());
    }

    /// Answers the dumps asked of this thread: its megaflows, copied (see [`crate::look`]).
    #[cold]
    fn answer_look(&mut self) {
        loop {
            // Clear the wake-up before reading the request: one asked later signals again.
            self.look.wake.clear();
            let n = self.look.wanted();
            if n == self.look_answered {
                return;
            }
            let mut records = Vec::with_capacity(self.arena.len());
            let (arena, ports, thread) = (&self.arena, &self.ports, self.index);
            arena.sweep(0, usize::MAX, |id, mf| {
                let Some(life) = arena.life(id) else { return };
                let ops: Vec<String> = mf
                    .actions
                    .ops
                    .iter()
                    .map(|op| op_text(op, |i| ports.ofport_of(i)))
                    .collect();
                records.push(MegaflowRecord {
                    thread,
                    key: mf.key,
                    mask: mf.mask,
                    actions: if ops.is_empty() {
                        "drop".into()
                    } else {
                        ops.join(",")
                    },
                    packets: life.packets,
                    bytes: life.bytes,
                    installed_ms: life.installed_ms,
                    used_ms: mf.last_used_ms,
                });
            });
            self.look.answer(n, records);
            self.look_answered = n;
        }
    }
}

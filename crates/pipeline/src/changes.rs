//! What a publish changed, so that the datapath can keep the megaflows a change cannot
//! affect instead of emptying its caches ("revalidation instead of flushing").
//!
//! # The rule
//!
//! Adding, deleting or modifying a flow entry of priority `q` with match `M` (mask `Mm`,
//! value `Mv`) in table `T` can change the translation only of packets that reach `T`, that
//! match `M` there, and whose entry in `T` had priority `<= q` (or that matched none): a
//! lookup's result is the highest-priority entry the packet matches, so an entry below the
//! one that decided, or one the packet does not match, never decides. A megaflow (key `K`,
//! mask `W`) records its [`Trail`]: the tables its translation looked up, in order, with the
//! priority of the entry that decided in each (0 when none did, which every change reaches).
//! It may be affected by the change only when `T` is on its trail with a priority `p <= q`
//! and, when the key that reached `T` was the packet's own, some packet of the megaflow
//! matches `M`: `((K ^ Mv) & W & Mm) == 0` (the two boxes intersect). When an earlier table
//! rewrote the key (apply-actions set-field, push/pop VLAN, TTL, write-metadata), the key
//! reaching `T` is no longer the packet's, so the trail marks the first such lookup and every
//! change of priority `>= p` in that table or a later one on the trail affects it. A
//! translation that looked up more than [`TRAIL_LEN`] tables is affected by every change.
//!
//! Why the megaflow's actions stay right: for every packet `P` it covers, no lookup on the
//! trail can answer differently (the entries `P` matches above the deciding one are the same,
//! the deciding one is unchanged), so the walk, the actions and the mask's promise hold on the
//! new tables. The mask a fresh translation would make may differ (narrower or wider); that is
//! a matter of cache efficiency, not correctness.
//!
//! Everything else that translation reads (groups, meters, ports and their liveness, the
//! NORMAL MAC table) is not tracked: a change to it asks for a full flush, as does a publish
//! with more than [`MAX_CHANGES`] changed entries or a reader that fell more than
//! [`LOG_LEN`] publishes behind.
//!
//! # The log
//!
//! Each publish makes one [`Published`] record (its sequence number and changed entries)
//! and stores it in a ring of [`LOG_LEN`] slots in the cell; a reader holding a [`Cursor`]
//! collects the records since its last look ([`crate::PipelineCell::changes_since`]) once per
//! generation change, lock-free. Ordering: the control side stores the snapshot, then the
//! record, then the sequence number (release), then bumps the generation; a reader that sees
//! sequence number `s` translates with a snapshot at least as new as `s`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use packet::{FlowKey, KEY_WORDS};

use crate::model::Match;

/// Most tables a [`Trail`] records; a longer translation is affected by every change.
pub const TRAIL_LEN: usize = 6;

/// Most changed entries one publish records; more ask for a full flush.
pub const MAX_CHANGES: usize = 4096;

/// Publishes the cell remembers; a reader further behind gets a full flush.
pub const LOG_LEN: usize = 4096;

/// One changed flow entry: added, deleted, modified or expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// Its table.
    pub table: u8,
    /// Its priority.
    pub priority: u16,
    /// Its match.
    pub matcher: Match,
}

/// What one publish changed.
#[derive(Debug, Default)]
pub struct Published {
    /// The publish's sequence number (1, 2, …).
    pub seq: u64,
    /// Something not tracked changed (groups, meters, ports, too many entries): every
    /// megaflow must go.
    pub full: bool,
    /// The changed entries (empty when `full`).
    pub changes: Vec<Change>,
}

/// The tables a translation looked up and what decided in each (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trail {
    len: u8,
    /// Index of the first lookup made with a rewritten key (`u8::MAX` when none was).
    rewritten_from: u8,
    /// More than [`TRAIL_LEN`] lookups: every change affects the megaflow.
    overflow: bool,
    tables: [u8; TRAIL_LEN],
    priorities: [u16; TRAIL_LEN],
}

const _: () = assert!(std::mem::size_of::<Trail>() == 2 * TRAIL_LEN + TRAIL_LEN + 4);

impl Default for Trail {
    fn default() -> Self {
        Trail::EMPTY
    }
}

impl Trail {
    /// No lookup yet.
    pub const EMPTY: Trail = Trail {
        len: 0,
        rewritten_from: u8::MAX,
        overflow: false,
        tables: [0; TRAIL_LEN],
        priorities: [0; TRAIL_LEN],
    };

    /// A trail every change affects (for megaflows whose translation is not known).
    pub const UNKNOWN: Trail = Trail {
        overflow: true,
        ..Trail::EMPTY
    };

    /// Records a lookup in `table` that `priority`'s entry decided (0 for no entry), made
    /// with a rewritten key when `rewritten`.
    pub fn push(&mut self, table: u8, priority: u16, rewritten: bool) {
        let i = self.len as usize;
        if i >= TRAIL_LEN {
            self.overflow = true;
            return;
        }
        self.tables[i] = table;
        self.priorities[i] = priority;
        if rewritten && self.rewritten_from > self.len {
            self.rewritten_from = self.len;
        }
        self.len += 1;
    }

    /// Whether the trail gave up (more lookups than it holds).
    pub fn is_overflow(&self) -> bool {
        self.overflow
    }

    /// The lookups: `(table, deciding priority, made with a rewritten key)`.
    pub fn lookups(&self) -> impl Iterator<Item = (u8, u16, bool)> + '_ {
        (0..self.len as usize).map(|i| {
            (
                self.tables[i],
                self.priorities[i],
                i >= self.rewritten_from as usize,
            )
        })
    }

    /// Whether a change of priority `priority` in `table` reaches this trail by table and
    /// priority alone: `Some(rewritten)` when it does (the box test is then needed unless
    /// `rewritten`), `None` when it cannot affect it.
    #[inline]
    pub fn reached_by(&self, table: u8, priority: u16) -> Option<bool> {
        if self.overflow {
            return Some(true);
        }
        (0..self.len as usize)
            .find(|&i| self.tables[i] == table)
            .filter(|&i| priority >= self.priorities[i])
            .map(|i| i >= self.rewritten_from as usize)
    }

    /// Whether `change` may affect the megaflow with this trail, key `key` and mask `mask`
    /// (the rule of the module docs).
    pub fn affected_by(&self, key: &FlowKey, mask: &FlowKey, change: &Change) -> bool {
        match self.reached_by(change.table, change.priority) {
            None => false,
            Some(true) => true,
            Some(false) => boxes_meet(key, mask, &change.matcher),
        }
    }
}

/// Whether some packet equal to `key` under `mask` matches `m`.
#[inline]
pub fn boxes_meet(key: &FlowKey, mask: &FlowKey, m: &Match) -> bool {
    // Only the words the match constrains are read: the megaflow's key and mask are
    // cold when the datapath asks.
    (0..KEY_WORDS).all(|i| {
        let mm = m.mask.w[i];
        mm == 0 || (key.w[i] ^ m.value.w[i]) & mask.w[i] & mm == 0
    })
}

/// Changes the control side has made since its last publish.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    full: bool,
    changes: Vec<Change>,
}

impl Pending {
    /// Records a changed entry.
    pub(crate) fn entry(&mut self, table: u8, priority: u16, matcher: &Match) {
        if self.full {
            return;
        }
        if self.changes.len() >= MAX_CHANGES {
            self.full();
            return;
        }
        self.changes.push(Change {
            table,
            priority,
            matcher: *matcher,
        });
    }

    /// Records a change that is not tracked: the next publish asks for a full flush.
    pub(crate) fn full(&mut self) {
        self.full = true;
        self.changes = Vec::new();
    }

    /// The record of publish `seq`; pending is empty afterwards.
    pub(crate) fn take(&mut self, seq: u64) -> Published {
        let p = Published {
            seq,
            full: self.full,
            changes: std::mem::take(&mut self.changes),
        };
        self.full = false;
        p
    }
}

/// The ring of recent publishes' records, in the cell.
#[derive(Debug)]
pub(crate) struct Log {
    slots: Vec<ArcSwapOption<Published>>,
    /// Sequence number of the newest record stored.
    seq: AtomicU64,
    /// Full flushes asked for so far (by publishes and by untracked changes).
    fulls: AtomicU64,
}

impl Log {
    pub(crate) fn new() -> Log {
        Log {
            slots: (0..LOG_LEN).map(|_| ArcSwapOption::empty()).collect(),
            seq: AtomicU64::new(0),
            fulls: AtomicU64::new(0),
        }
    }

    /// Stores the record of the newest publish (control side only; call after the
    /// snapshot is stored, before the generation is bumped).
    pub(crate) fn store(&self, p: Published) {
        let seq = p.seq;
        let full = p.full;
        self.slots[seq as usize % LOG_LEN].store(Some(Arc::new(p)));
        if full {
            self.fulls.fetch_add(1, Ordering::Release);
        }
        self.seq.store(seq, Ordering::Release);
    }

    /// Asks every reader for a full flush (before the generation is bumped).
    pub(crate) fn full(&self) {
        self.fulls.fetch_add(1, Ordering::Release);
    }
}

/// Where a reader of the change log is (see [`crate::PipelineCell::changes_since`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    /// The newest publish whose record the reader has taken.
    pub seq: u64,
    fulls: u64,
}

/// What [`crate::PipelineCell::changes_since`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// Every cached translation must go.
    Full,
    /// The records of the publishes since the cursor's last position were appended (possibly
    /// none).
    Changes,
}

impl Log {
    /// Appends the records since `cursor` to `out` and moves the cursor, or says that a full
    /// flush is due (then `out` is left as it was, the cursor moved to now).
    pub(crate) fn since(&self, cursor: &mut Cursor, out: &mut Vec<Arc<Published>>) -> Since {
        let fulls = self.fulls.load(Ordering::Acquire);
        let seq = self.seq.load(Ordering::Acquire);
        let from = cursor.seq;
        let full_seen = fulls != cursor.fulls;
        cursor.fulls = fulls;
        cursor.seq = seq;
        if full_seen || seq.saturating_sub(from) > LOG_LEN as u64 || seq < from {
            return Since::Full;
        }
        let start = out.len();
        for s in from + 1..=seq {
            match self.slots[s as usize % LOG_LEN].load_full() {
                Some(p) if p.seq == s && !p.full => out.push(p),
                _ => {
                    out.truncate(start);
                    return Since::Full;
                }
            }
        }
        Since::Changes
    }
}

#[cfg(test)]
#[path = "changes_tests.rs"]
mod tests;

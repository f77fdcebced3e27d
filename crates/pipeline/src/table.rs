//! One OpenFlow flow table: a [`Classifier`] of [`FlowEntry`]s plus the selection rules of
//! flow-mods and flow-stats requests (strict and non-strict matches, cookie, out_port and
//! out_group filters), and the table's lookup statistics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::classifier::Classifier;
use crate::flow::FlowEntry;
use crate::model::{ports, FlowMod, FlowModCommand, Match, GROUP_ANY};

/// Which entries a modify, delete or dump selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowFilter {
    /// Non-strict: entries whose match is at least as specific as this one. Strict: exactly
    /// this match.
    pub matcher: Match,
    /// `Some(priority)`: strict selection (same match and priority).
    pub strict_priority: Option<u16>,
    /// Cookie value to select on (only the bits in `cookie_mask`).
    pub cookie: u64,
    /// Cookie bits that must equal `cookie` (0: any cookie).
    pub cookie_mask: u64,
    /// Only entries with an output to this port ([`ports::ANY`]: no filter).
    pub out_port: u32,
    /// Only entries applying this group ([`GROUP_ANY`]: no filter).
    pub out_group: u32,
}

impl FlowFilter {
    /// Selects every entry.
    pub const ALL: FlowFilter = FlowFilter {
        matcher: Match::ANY,
        strict_priority: None,
        cookie: 0,
        cookie_mask: 0,
        out_port: ports::ANY,
        out_group: GROUP_ANY,
    };

    /// The selection a modify or delete flow-mod makes.
    pub fn from_flow_mod(m: &FlowMod) -> Self {
        let strict = matches!(
            m.command,
            FlowModCommand::ModifyStrict | FlowModCommand::DeleteStrict
        );
        // OpenFlow 1.3: out_port and out_group filter deletes only; modifies ignore them.
        let delete = matches!(
            m.command,
            FlowModCommand::Delete | FlowModCommand::DeleteStrict
        );
        FlowFilter {
            matcher: m.matcher,
            strict_priority: strict.then_some(m.priority),
            cookie: m.cookie,
            cookie_mask: m.cookie_mask,
            out_port: if delete { m.out_port } else { ports::ANY },
            out_group: if delete { m.out_group } else { GROUP_ANY },
        }
    }

    /// Whether the filter selects `e`.
    pub fn selects(&self, e: &FlowEntry) -> bool {
        let match_ok = match self.strict_priority {
            Some(p) => e.priority == p && e.matcher == self.matcher,
            None => {
                self.matcher.mask.is_subset_of(&e.matcher.mask)
                    && e.matcher.value.masked(&self.matcher.mask) == self.matcher.value
            }
        };
        match_ok
            && (e.cookie ^ self.cookie) & self.cookie_mask == 0
            && (self.out_port == ports::ANY || e.outputs_to(self.out_port))
            && (self.out_group == GROUP_ANY || e.uses_group(self.out_group))
    }
}

/// Lookup statistics of one table, shared by every snapshot. Counted per translation (cache
/// miss), not per packet, so they are approximate: packets handled by a cached megaflow do
/// not appear.
#[derive(Debug, Default)]
pub struct TableStats {
    /// Translations that looked this table up.
    pub lookups: AtomicU64,
    /// Of those, the ones that found no entry (counted instead of the matches, which are the
    /// common case: one locked add per table per translation instead of two).
    pub missed: AtomicU64,
}

impl TableStats {
    /// `(lookups, matched)`.
    pub fn get(&self) -> (u64, u64) {
        // Read the misses first: a translation adds its lookup before any miss, so the
        // difference never underflows.
        let missed = self.missed.load(Ordering::Relaxed);
        let lookups = self.lookups.load(Ordering::Relaxed);
        (lookups, lookups.saturating_sub(missed))
    }
}

/// One flow table.
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    /// The entries.
    pub classifier: Classifier<FlowEntry>,
    /// How many entries have a timeout (lets `tick` skip tables without any).
    pub timed: usize,
    /// How many entries ask for FLOW_REMOVED (lets a delete of everything skip the walk
    /// for notices when none does).
    pub notify: usize,
}

impl FlowTable {
    /// An empty table; `prefixes`: whether its classifier tracks address prefixes
    /// ([`PipelineConfig::prefix_tracking`](crate::PipelineConfig::prefix_tracking)).
    pub fn new(prefixes: bool) -> Self {
        FlowTable {
            classifier: Classifier::with_prefix_tracking(prefixes),
            timed: 0,
            notify: 0,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.classifier.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.classifier.is_empty()
    }

    /// Inserts `e`, returning the entry with the same match and priority it replaced.
    pub fn insert(&mut self, e: Arc<FlowEntry>) -> Option<Arc<FlowEntry>> {
        if e.has_timeout() {
            self.timed += 1;
        }
        self.notify += usize::from(e.flags.send_flow_rem);
        let old = self.classifier.insert(e);
        if old.as_ref().is_some_and(|o| o.has_timeout()) {
            self.timed -= 1;
        }
        if let Some(o) = &old {
            self.notify -= usize::from(o.flags.send_flow_rem);
        }
        old
    }

    /// Removes the entry with `e`'s match and priority.
    pub fn remove(&mut self, e: &FlowEntry) -> Option<Arc<FlowEntry>> {
        let old = self.classifier.remove(&e.matcher, e.priority)?;
        if old.has_timeout() {
            self.timed -= 1;
        }
        self.notify -= usize::from(old.flags.send_flow_rem);
        Some(old)
    }

    /// Entries the filter selects.
    pub fn select(&self, f: &FlowFilter) -> Vec<Arc<FlowEntry>> {
        if let Some(p) = f.strict_priority {
            return self
                .classifier
                .find_exact(&f.matcher, p)
                .filter(|e| f.selects(e))
                .cloned()
                .into_iter()
                .collect();
        }
        self.classifier
            .iter_covering(&f.matcher.mask)
            .filter(|e| f.selects(e))
            .cloned()
            .collect()
    }

    /// Whether an entry of priority `priority` overlaps `m` (some packet matches both).
    pub fn overlaps(&self, m: &Match, priority: u16) -> bool {
        self.classifier.iter().any(|e| {
            e.priority == priority && {
                let mut diff = 0u64;
                for i in 0..packet::KEY_WORDS {
                    diff |=
                        (e.matcher.value.w[i] ^ m.value.w[i]) & e.matcher.mask.w[i] & m.mask.w[i];
                }
                diff == 0
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpaction::FlowCounters;
    use crate::model::{Action, FlowFlags, Instruction};
    use packet::Field;

    fn entry(seq: u64, p: u16, m: Match, cookie: u64, port: u32) -> Arc<FlowEntry> {
        Arc::new(FlowEntry {
            seq,
            table_id: 0,
            priority: p,
            matcher: m,
            instructions: vec![Instruction::ApplyActions(vec![Action::Output {
                port,
                max_len: 0,
            }])],
            given_order: 0,
            matcher_as_sent: None,
            instructions_as_sent: None,
            cookie,
            flags: FlowFlags::default(),
            idle_timeout: 0,
            hard_timeout: 0,
            install_ms: 0,
            counters: Arc::new(FlowCounters::default()),
        })
    }

    #[test]
    fn strict_and_loose_selection_with_filters() {
        let mut t = FlowTable::default();
        let mut a = Match::ANY;
        a.set_exact(Field::InPort, 1);
        let mut ab = a;
        ab.set_exact(Field::EthType, 0x0800);
        t.insert(entry(1, 10, a, 0x10, 2));
        t.insert(entry(2, 20, ab, 0x20, 3));
        t.insert(entry(3, 5, Match::ANY, 0x10, 3));

        let loose = FlowFilter {
            matcher: a,
            ..FlowFilter::ALL
        };
        assert_eq!(t.select(&loose).len(), 2);
        let strict = FlowFilter {
            matcher: a,
            strict_priority: Some(10),
            ..FlowFilter::ALL
        };
        assert_eq!(t.select(&strict)[0].seq, 1);
        let wrong_prio = FlowFilter {
            strict_priority: Some(11),
            ..strict
        };
        assert!(t.select(&wrong_prio).is_empty());
        let cookie = FlowFilter {
            cookie: 0x10,
            cookie_mask: 0xff,
            ..FlowFilter::ALL
        };
        assert_eq!(t.select(&cookie).len(), 2);
        let port = FlowFilter {
            out_port: 3,
            ..FlowFilter::ALL
        };
        assert_eq!(t.select(&port).len(), 2);
        assert_eq!(t.select(&FlowFilter::ALL).len(), 3);
    }

    #[test]
    fn entries_asking_for_flow_removed_are_counted() {
        let mut t = FlowTable::default();
        let mut a = Match::ANY;
        a.set_exact(Field::InPort, 1);
        let noisy = |seq| {
            let mut e = entry(seq, 10, a, 0, 2);
            Arc::get_mut(&mut e).unwrap().flags.send_flow_rem = true;
            e
        };
        t.insert(noisy(1));
        t.insert(entry(2, 20, a, 0, 2));
        assert_eq!(t.notify, 1);
        t.insert(entry(3, 10, a, 0, 2)); // replaces the noisy one
        assert_eq!(t.notify, 0);
        t.insert(noisy(4));
        assert_eq!(t.notify, 1);
        t.remove(&noisy(5));
        assert_eq!((t.notify, t.len()), (0, 1));
    }

    #[test]
    fn overlap_detection() {
        let mut t = FlowTable::default();
        let mut a = Match::ANY;
        a.set_exact(Field::InPort, 1);
        t.insert(entry(1, 10, a, 0, 2));
        let mut b = Match::ANY;
        b.set_exact(Field::EthType, 0x0800);
        assert!(
            t.overlaps(&b, 10),
            "in_port=1 and eth_type=0x0800 share packets"
        );
        assert!(!t.overlaps(&b, 11));
        let mut c = Match::ANY;
        c.set_exact(Field::InPort, 2);
        assert!(!t.overlaps(&c, 10));
    }
}

//! Flow dumps walked without the control side's lock: [`Control::dump`] takes a snapshot of
//! the tables a dump reads (one `Arc` per table, O(tables) whatever their size) and the
//! walk — the selection, the views, the counters — runs on the snapshot, on any thread,
//! while the control side goes on changing its working copy (copy-on-write: a table the
//! snapshot holds is copied, shallowly, by the first change to it, as after a publish).
//!
//! The snapshot is consistent: it is the working copy at the moment of the request, the
//! flow-mods before it in and the ones after it out. It keeps the entries it holds alive
//! until it is dropped, so memory freed by a delete during a dump comes back when the dump
//! ends.
//!
//! Memory: [`FlowDump::for_each_chunk`] makes views for at most `chunk` entries at a time; to
//! keep the order of [`Control::flows`] (table by table, each by descending priority) it sorts
//! one table's selected entries as pointers (8 bytes an entry) first.

use std::cmp::Reverse;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::dpaction::now_ms;
use crate::flow::FlowEntry;
use crate::model::{ALL_TABLES, MAX_TABLE};
use crate::stats::FlowView;
use crate::table::{FlowFilter, FlowTable};
use crate::Control;

/// The tables a flow dump reads, as they were when it was asked for (see the module docs).
#[derive(Debug, Clone)]
pub struct FlowDump {
    tables: Vec<Arc<FlowTable>>,
    filter: FlowFilter,
}

/// Totals of the flows a dump selects (OpenFlow's aggregate statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Aggregate {
    /// Packets matched, summed.
    pub packets: u64,
    /// Bytes matched, summed.
    pub bytes: u64,
    /// Flows selected.
    pub flows: u64,
}

impl Control {
    /// A snapshot of `table` (or every table for [`ALL_TABLES`]) for a dump of the flows `filter` selects, to walk without holding the
    /// control side: [`FlowDump::for_each_chunk`] gives what [`Control::flows`] returns.
    pub fn dump(&self, table: u8, filter: &FlowFilter) -> FlowDump {
        let range = if table == ALL_TABLES {
            0..=MAX_TABLE
        } else {
            table..=table.min(MAX_TABLE)
        };
        let tables = range
            .map(|t| self.table_snapshot(t))
            .filter(|t| !t.is_empty())
            .collect();
        FlowDump {
            tables,
            filter: *filter,
        }
    }
}

impl FlowDump {
    /// How many flows the dump can select at most: the entries of the tables it reads.
    pub fn max_flows(&self) -> usize {
        self.tables.iter().map(|t| t.len()).sum()
    }

    /// Entries of one table the filter selects, unordered.
    fn selected<'a>(
        &'a self,
        t: &'a FlowTable,
    ) -> Box<dyn Iterator<Item = &'a Arc<FlowEntry>> + 'a> {
        let f = &self.filter;
        match f.strict_priority {
            Some(p) => Box::new(
                t.classifier
                    .find_exact(&f.matcher, p)
                    .into_iter()
                    .filter(move |e| f.selects(e)),
            ),
            None => Box::new(
                t.classifier
                    .iter_covering(&f.matcher.mask)
                    .filter(move |e| f.selects(e)),
            ),
        }
    }

    /// Calls `f` with the views of the selected flows, at most `chunk` (at least 1) at a
    /// time, table by table and each table by descending priority (the order of
    /// [`Control::flows`]). `f` returns false to stop the walk. Returns whether it ran to the
    /// end.
    pub fn for_each_chunk(&self, chunk: usize, mut f: impl FnMut(&[FlowView]) -> bool) -> bool {
        let chunk = chunk.max(1);
        let mut views = Vec::with_capacity(chunk);
        for t in &self.tables {
            let mut entries: Vec<&Arc<FlowEntry>> = self.selected(t).collect();
            entries.sort_by_key(|e| Reverse(e.priority));
            for part in entries.chunks(chunk) {
                let now = now_ms();
                views.clear();
                views.extend(part.iter().map(|e| FlowView::of(e, now)));
                if !f(&views) {
                    return false;
                }
            }
        }
        true
    }

    /// The totals of the selected flows (no view is made).
    pub fn aggregate(&self) -> Aggregate {
        let mut a = Aggregate::default();
        for t in &self.tables {
            for e in self.selected(t) {
                a.packets = a.packets.wrapping_add(e.counters.packets.load(Relaxed));
                a.bytes = a.bytes.wrapping_add(e.counters.bytes.load(Relaxed));
                a.flows += 1;
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Action, FlowMod, Instruction, Match};
    use crate::PipelineConfig;
    use packet::Field;

    fn add(c: &mut Control, table: u8, priority: u16, port: u128) {
        let mut m = Match::ANY;
        m.set_exact(Field::InPort, port);
        let out = vec![Instruction::ApplyActions(vec![Action::Output {
            port: 1,
            max_len: 0,
        }])];
        c.flow_mod(&FlowMod::add(table, priority, m, out)).unwrap();
    }

    fn walk(d: &FlowDump, chunk: usize) -> Vec<FlowView> {
        let mut all = Vec::new();
        assert!(d.for_each_chunk(chunk, |v| {
            assert!(!v.is_empty() && v.len() <= chunk);
            all.extend_from_slice(v);
            true
        }));
        all
    }

    /// Without the durations, which move with the clock.
    fn key(v: &[FlowView]) -> Vec<(u8, u16, Match)> {
        v.iter()
            .map(|f| (f.table_id, f.priority, f.matcher))
            .collect()
    }

    #[test]
    fn a_dump_walks_what_flows_returns_in_chunks() {
        let (mut c, _cell) = Control::new(PipelineConfig::default());
        for i in 0..500u16 {
            add(&mut c, (i % 3) as u8 * 100, i % 7, u128::from(i) + 1);
        }
        for (table, filter) in [
            (ALL_TABLES, FlowFilter::ALL),
            (100, FlowFilter::ALL),
            (
                ALL_TABLES,
                FlowFilter {
                    strict_priority: Some(3),
                    matcher: {
                        let mut m = Match::ANY;
                        m.set_exact(Field::InPort, 4);
                        m
                    },
                    ..FlowFilter::ALL
                },
            ),
            (7, FlowFilter::ALL),
        ] {
            let want = c.flows(table, &filter);
            let d = c.dump(table, &filter);
            for chunk in [1, 7, 64, 10_000] {
                assert_eq!(
                    key(&walk(&d, chunk)),
                    key(&want),
                    "table {table} chunk {chunk}"
                );
            }
            let a = d.aggregate();
            assert_eq!(a.flows, want.len() as u64);
        }
    }

    #[test]
    fn a_dump_is_the_tables_as_they_were_and_can_stop() {
        let (mut c, _cell) = Control::new(PipelineConfig::default());
        for i in 0..100u16 {
            add(&mut c, 0, 10, u128::from(i) + 1);
        }
        let d = c.dump(ALL_TABLES, &FlowFilter::ALL);
        // Changes after the snapshot do not show in it.
        c.flow_mod(&FlowMod {
            command: crate::model::FlowModCommand::Delete,
            ..FlowMod::add(ALL_TABLES, 0, Match::ANY, Vec::new())
        })
        .unwrap();
        add(&mut c, 5, 1, 1);
        assert_eq!(c.flows(ALL_TABLES, &FlowFilter::ALL).len(), 1);
        let seen = walk(&d, 30);
        assert_eq!(seen.len(), 100);
        assert!(seen.iter().all(|f| f.table_id == 0));
        assert_eq!(d.aggregate().flows, 100);
        // Stopping after the first chunk.
        let mut calls = 0;
        assert!(!d.for_each_chunk(30, |_| {
            calls += 1;
            false
        }));
        assert_eq!(calls, 1);
    }
}

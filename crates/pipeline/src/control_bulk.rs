//! Bulk flow-mods — a non-strict modify, or a non-strict delete that does not select every
//! flow (`del-flows ip`, `mod-flows udp,actions=…` over millions of flows) — worked out
//! without holding the control side: [`Control::plan_bulk`] takes a snapshot of the tables
//! it reads (an `Arc` each), [`BulkPlan::prepare`] walks the snapshot and builds the new
//! tables on any thread, and [`Control::finish_bulk`] swaps them in, back on the control
//! side, in one step (a table pointer each).
//!
//! The result is exactly the flow-mod applied at the moment of the swap. Changes other
//! requests made to those tables in between are known by their keys (match and priority):
//! from the plan on, every change to a watched table records its key ([`Watch`]), and at the
//! swap each such key is decided again on the working copy as it is then — kept as it is,
//! modified, or removed (with its FLOW_REMOVED) as the flow-mod says. When more than
//! [`MAX_TOUCHED`] keys changed, a table was replaced whole (a delete of everything, another
//! bulk flow-mod), or, for a modify, the groups or meters changed, `finish_bulk` answers
//! `None` and the caller plans again (or applies the flow-mod in place after a few tries).
//!
//! Cost on the control side: the plan and the swap are O(tables + changed keys); the walk,
//! the selection, the validation of a modify's instructions against each entry and building
//! the new tables — seconds for millions of entries — happen in `prepare`.

use std::collections::HashSet;
use std::sync::Arc;

use super::{modified, Control, Removal, TRIM_AFTER_DELETES, TRIM_DELAY_MS};
use crate::changes::MAX_CHANGES;
use crate::dpaction::now_ms;
use crate::error::FlowModError;
use crate::flow::{check_instructions, check_match, FlowEntry, RemovedReason};
use crate::group::GroupTable;
use crate::meter::MeterState;
use crate::model::{FlowMod, FlowModCommand, Match, ALL_TABLES, MAX_TABLE};
use crate::table::{FlowFilter, FlowTable};

/// A modify or delete is done in bulk when the tables it reads hold more entries than this;
/// below, walking them in place takes a few milliseconds, less than a snapshot, a thread
/// and a swap (and such flow-mods, frequent in churn, then take no reply-producer slot from
/// the dumps).
pub const BULK_MIN: usize = 65_536;

/// Most changed keys a bulk flow-mod takes into account at its swap; past them it plans
/// again.
pub const MAX_TOUCHED: usize = 4_096;

/// Most bulk flow-mods watched at once; a further one ends the oldest watch (which then
/// plans again).
const MAX_WATCHES: usize = 8;

/// Keys changed in some tables since a bulk flow-mod's snapshot.
#[derive(Debug)]
pub(super) struct Watch {
    id: u64,
    tables: Vec<u8>,
    touched: Vec<(u8, Match, u16)>,
    /// Too many keys, or a table replaced whole: the keys do not tell the changes.
    overflow: bool,
}

/// A bulk flow-mod's snapshot (see the module docs); [`BulkPlan::prepare`] it anywhere.
#[derive(Debug)]
pub struct BulkPlan {
    watch: u64,
    m: FlowMod,
    filter: FlowFilter,
    tables: Vec<(u8, Arc<FlowTable>)>,
    groups: Arc<GroupTable>,
    meters: Arc<std::collections::HashMap<u32, Arc<MeterState>>>,
    prefixes: bool,
}

/// The new tables of a bulk flow-mod, ready for [`Control::finish_bulk`].
#[derive(Debug)]
pub struct BulkReady {
    plan: BulkPlan,
    /// Per table of the plan (same order): its new contents, `None` when unchanged.
    new: Vec<Option<FlowTable>>,
    /// Removed entries that asked for FLOW_REMOVED.
    noticed: Vec<Arc<FlowEntry>>,
    /// Entries removed or modified.
    changed: usize,
    /// Their keys, for the datapath's revalidation (`None`: too many, a full flush).
    changes: Option<Vec<(u8, u16, Match)>>,
}

/// What [`Control::finish_bulk`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkDone {
    /// Applied: this many entries removed or modified.
    Applied(usize),
    /// The tables changed too much since the plan: plan again.
    Stale,
}

fn is_delete(m: &FlowMod) -> bool {
    m.command == FlowModCommand::Delete
}

impl Control {
    /// Whether `m` is a flow-mod to do in bulk: a non-strict modify or delete (not of
    /// everything) over tables of more than [`BULK_MIN`] entries.
    pub fn is_bulk(&self, m: &FlowMod) -> bool {
        let filter = FlowFilter::from_flow_mod(m);
        match m.command {
            FlowModCommand::Modify => {}
            FlowModCommand::Delete if filter != FlowFilter::ALL => {}
            _ => return false,
        }
        let size: usize = match m.table_id {
            ALL_TABLES if is_delete(m) => self.tables.iter().map(|t| t.len()).sum(),
            t if t <= MAX_TABLE => self.tables[usize::from(t)].len(),
            _ => 0,
        };
        size > BULK_MIN
    }

    /// Checks `m` and takes the snapshot of a bulk flow-mod; from here on changes to its
    /// tables are watched until [`Control::finish_bulk`].
    pub fn plan_bulk(&mut self, m: &FlowMod) -> Result<BulkPlan, FlowModError> {
        check_match(&m.matcher)?;
        if m.matcher.with_implied() != m.matcher {
            let mut implied = m.clone();
            implied.matcher = m.matcher.with_implied();
            return self.plan_bulk(&implied);
        }
        let range = match m.table_id {
            ALL_TABLES if is_delete(m) => 0..=MAX_TABLE,
            t if t <= MAX_TABLE => t..=t,
            t => return Err(FlowModError::BadTableId(t)),
        };
        let tables: Vec<(u8, Arc<FlowTable>)> = range
            .filter(|&t| !self.tables[usize::from(t)].is_empty())
            .map(|t| (t, self.tables[usize::from(t)].clone()))
            .collect();
        self.seq += 1;
        let watch = self.seq;
        if self.watches.len() >= MAX_WATCHES {
            self.watches.remove(0);
        }
        self.watches.push(Watch {
            id: watch,
            tables: tables.iter().map(|(t, _)| *t).collect(),
            touched: Vec::new(),
            overflow: false,
        });
        Ok(BulkPlan {
            watch,
            m: m.clone(),
            filter: FlowFilter::from_flow_mod(m),
            tables,
            groups: self.groups.clone(),
            meters: self.meters.clone(),
            prefixes: self.config.prefix_tracking,
        })
    }

    /// Records that the entry with key (`m`, `priority`) of table `t` changed, for the bulk
    /// flow-mods watching `t`.
    pub(super) fn touch(&mut self, t: u8, m: &Match, priority: u16) {
        for w in &mut self.watches {
            if w.overflow || !w.tables.contains(&t) {
                continue;
            }
            if w.touched.len() >= MAX_TOUCHED {
                w.overflow = true;
                w.touched = Vec::new();
            } else {
                w.touched.push((t, *m, priority));
            }
        }
    }

    /// Records that table `t` was replaced whole.
    pub(super) fn touch_all(&mut self, t: u8) {
        for w in &mut self.watches {
            if w.tables.contains(&t) {
                w.overflow = true;
                w.touched = Vec::new();
            }
        }
    }

    /// Swaps in the tables `ready` built, after deciding again every key changed since its
    /// plan (see the module docs). `Ok(Stale)`: plan again. An error (a modify whose
    /// instructions do not suit an entry changed meanwhile) changes nothing.
    pub fn finish_bulk(&mut self, ready: BulkReady) -> Result<BulkDone, FlowModError> {
        let Some(i) = self.watches.iter().position(|w| w.id == ready.plan.watch) else {
            return Ok(BulkDone::Stale);
        };
        let watch = self.watches.remove(i);
        let plan = &ready.plan;
        let modify = !is_delete(&plan.m);
        let moved =
            !Arc::ptr_eq(&self.groups, &plan.groups) || !Arc::ptr_eq(&self.meters, &plan.meters);
        if watch.overflow || (modify && moved) {
            return Ok(BulkDone::Stale);
        }
        let BulkReady {
            plan,
            mut new,
            mut noticed,
            mut changed,
            mut changes,
        } = ready;
        // The changed keys, decided again on the working copy as it is now.
        let mut stale: HashSet<*const FlowEntry> = HashSet::new();
        let mut extra: Vec<Arc<FlowEntry>> = Vec::new();
        for (slot, (t, snap)) in plan.tables.iter().enumerate() {
            let current = &self.tables[usize::from(*t)];
            if Arc::ptr_eq(current, snap) {
                continue;
            }
            let keys: HashSet<(Match, u16)> = watch
                .touched
                .iter()
                .filter(|k| k.0 == *t)
                .map(|&(_, m, p)| (m, p))
                .collect();
            if keys.is_empty() {
                // Changed without a recorded key: nothing to go by.
                return Ok(BulkDone::Stale);
            }
            let table = new[slot].get_or_insert_with(|| (**snap).clone());
            for (m, p) in keys {
                if let Some(s) = snap.classifier.find_exact(&m, p) {
                    if plan.filter.selects(s) {
                        // Counted (and noticed) from the snapshot; decided below instead.
                        stale.insert(Arc::as_ptr(s));
                        changed -= 1;
                    }
                }
                let Some(c) = current.classifier.find_exact(&m, p) else {
                    if let Some(e) = table.classifier.find_exact(&m, p).cloned() {
                        table.remove(&e);
                    }
                    continue;
                };
                if !plan.filter.selects(c) {
                    table.insert(c.clone());
                    continue;
                }
                changed += 1;
                if let Some(list) = &mut changes {
                    list.push((*t, p, m));
                }
                if modify {
                    let groups = &self.groups;
                    let meters = &self.meters;
                    let ins = check_instructions(
                        c.table_id,
                        &c.matcher,
                        &plan.m.instructions,
                        &|g| groups.contains(g),
                        &|id| meters.contains_key(&id),
                    )?;
                    table.insert(Arc::new(modified(c, &plan.m, ins)));
                } else {
                    if let Some(e) = table.classifier.find_exact(&m, p).cloned() {
                        table.remove(&e);
                    }
                    if c.flags.send_flow_rem {
                        extra.push(c.clone());
                    }
                }
            }
        }
        if !stale.is_empty() {
            noticed.retain(|e| !stale.contains(&Arc::as_ptr(e)));
        }
        noticed.extend(extra);
        // The swap.
        let now = now_ms();
        let reason = RemovedReason::Delete;
        for ((t, _), table) in plan.tables.iter().zip(new) {
            let Some(table) = table else { continue };
            self.touch_all(*t);
            let old = std::mem::replace(&mut self.tables[usize::from(*t)], Arc::new(table));
            self.emptied.push(old);
        }
        self.timed_tables = None;
        match changes {
            Some(list) if list.len() <= MAX_CHANGES => {
                for (t, p, m) in &list {
                    self.pending.entry(*t, *p, m);
                }
            }
            _ => self.pending.full(),
        }
        self.removed
            .extend(noticed.into_iter().map(|entry| Removal {
                entry,
                reason,
                at_ms: now,
            }));
        if !modify && changed >= TRIM_AFTER_DELETES {
            self.trim_at = Some(now + TRIM_DELAY_MS);
        }
        Ok(BulkDone::Applied(changed))
    }
}

impl BulkPlan {
    /// Walks the snapshot and builds the new tables (the long part; any thread). An error:
    /// a modify whose instructions do not suit a selected entry (nothing changes).
    pub fn prepare(self) -> Result<BulkReady, FlowModError> {
        let modify = !is_delete(&self.m);
        let mut new = Vec::with_capacity(self.tables.len());
        let mut noticed = Vec::new();
        let mut changed = 0;
        let mut changes = Some(Vec::new());
        for (t, snap) in &self.tables {
            let selected = snap.select(&self.filter);
            if selected.is_empty() {
                new.push(None);
                continue;
            }
            changed += selected.len();
            match &mut changes {
                Some(list) if list.len() + selected.len() <= MAX_CHANGES => {
                    list.extend(selected.iter().map(|e| (*t, e.priority, e.matcher)));
                }
                _ => changes = None,
            }
            let table = if modify {
                let mut table = (**snap).clone();
                for e in &selected {
                    let ins = check_instructions(
                        e.table_id,
                        &e.matcher,
                        &self.m.instructions,
                        &|g| self.groups.contains(g),
                        &|id| self.meters.contains_key(&id),
                    )?;
                    table.insert(Arc::new(modified(e, &self.m, ins)));
                }
                table
            } else {
                noticed.extend(selected.iter().filter(|e| e.flags.send_flow_rem).cloned());
                if selected.len() * 2 > snap.len() {
                    // Most go: build the table of those that stay.
                    let mut table = FlowTable::new(self.prefixes);
                    for e in snap.classifier.iter().filter(|e| !self.filter.selects(e)) {
                        table.insert(e.clone());
                    }
                    table
                } else {
                    let mut table = (**snap).clone();
                    for e in &selected {
                        table.remove(e);
                    }
                    table
                }
            };
            new.push(Some(table));
        }
        Ok(BulkReady {
            plan: self,
            new,
            noticed,
            changed,
            changes,
        })
    }
}

#[cfg(test)]
#[path = "control_bulk_tests.rs"]
mod tests;

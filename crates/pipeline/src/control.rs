//! The control side of a pipeline: the single owner that applies flow-mods, group-mods and
//! meter-mods to a working copy and publishes snapshots to the datapath.
//!
//! Publishing: `flow_mod`, `apply`, `group_mod`, `meter_mod` and `set_ports` change only the
//! working copy; call [`Control::publish`] to make changes visible (once per batch).
//! [`Control::set_port_live`] and [`Control::tick`] (when it removes flows) publish by
//! themselves, because they report events rather than configuration.
//!
//! Cost: the working copy shares structure with the published snapshot (an `Arc` per table,
//! per subtable and per hash bucket), so the first change to a subtable after a publish
//! copies that subtable's bucket pointers once and later changes in the same batch are
//! in place. Publishing copies 255 table pointers. A delete of every flow swaps in empty
//! tables and frees the old ones on a thread of their own after the next publish (millions
//! of entries take seconds to remove one by one and to free). Non-strict modify/delete and
//! check_overlap scan the table (only subtables whose mask covers the filter's, for the
//! former); `tick` scans the tables that hold entries with timeouts.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::as_sent::{given_order, FormCache};
use crate::changes::Pending;
use crate::dpaction::{now_ms, FlowCounters};
use crate::error::{FlowModError, GroupModError, MeterModError};
use crate::flow::{check_instructions, check_match, FlowEntry, RemovedReason};
use crate::group::GroupTable;
use crate::meter::{check_meter_mod, MeterState};
use crate::model::{
    FlowMod, FlowModCommand, GroupMod, GroupModCommand, MeterMod, MeterModCommand, ALL_TABLES,
    MAX_TABLE, METER_ALL,
};
use crate::pipeline::{Pipeline, PipelineCell, PipelineConfig, PortInfo, Shared};
use crate::stats::{FlowView, RemovedFlow, TableStatsView};
use crate::table::{FlowFilter, FlowTable};

/// A flow removed by a delete, waiting for its FLOW_REMOVED.
#[derive(Debug)]
struct Removal {
    entry: Arc<FlowEntry>,
    reason: RemovedReason,
    at_ms: u64,
}

impl Removal {
    fn view(&self) -> RemovedFlow {
        RemovedFlow {
            reason: self.reason,
            flow: FlowView::of(&self.entry, self.at_ms),
        }
    }
}

/// A delete that removes at least this many entries gives memory back afterwards.
const TRIM_AFTER_DELETES: usize = 10_000;
/// How long after such a delete (ms): time for the datapath threads to drop the old tables.
const TRIM_DELAY_MS: u64 = 1_000;

/// The control side of one pipeline (see the module docs).
#[derive(Debug)]
pub struct Control {
    cell: Arc<PipelineCell>,
    shared: Arc<Shared>,
    tables: Vec<Arc<FlowTable>>,
    groups: Arc<GroupTable>,
    meters: Arc<HashMap<u32, Arc<MeterState>>>,
    ports: Arc<Vec<PortInfo>>,
    config: PipelineConfig,
    seq: u64,
    /// Flows removed by deletes (with send_flow_rem) not yet taken: the entries themselves
    /// (a pointer each, whatever the instructions), made views only when taken, so a delete of
    /// millions holds no million views.
    removed: VecDeque<Removal>,
    /// Bulk flow-mods walking a snapshot off the lock ([`bulk`]), each with the keys changed
    /// since its snapshot.
    watches: Vec<bulk::Watch>,
    /// Tables holding flows with timeouts, as of the last [`Control::tick`] (`None`: a table
    /// changed since). A tick walks only these, so an idle bridge's tick touches no table: a
    /// thousand bridges' ticks would otherwise walk 255 tables each.
    timed_tables: Option<Vec<u8>>,
    /// When to give freed memory back to the system (after a mass delete), on the clock of
    /// [`crate::dpaction::now_ms`].
    trim_at: Option<u64>,
    /// Entries changed since the last publish (see [`crate::changes`]).
    pending: Pending,
    /// Publishes so far.
    published_seq: u64,
    /// Tables emptied at once by a delete of everything; dropped on a thread of their own
    /// after the next publish (which then gives the memory back), so that freeing a big
    /// table's entries does not hold up the control side.
    emptied: Vec<Arc<FlowTable>>,
    /// The match forms flows hold, shared (see [`crate::as_sent`]).
    forms: FormCache,
}

impl Control {
    /// A pipeline with empty tables, and the cell datapath threads read it through.
    pub fn new(config: PipelineConfig) -> (Control, Arc<PipelineCell>) {
        let shared = Arc::new(Shared::new(&config));
        let empty = Arc::new(FlowTable::new(config.prefix_tracking));
        let mut c = Control {
            cell: Arc::new(PipelineCell {
                current: ArcSwap::from_pointee(Pipeline {
                    tables: Vec::new(),
                    groups: Arc::default(),
                    meters: Arc::default(),
                    ports: Arc::default(),
                    config: config.clone(),
                    shared: shared.clone(),
                }),
                shared: shared.clone(),
            }),
            shared,
            tables: (0..=MAX_TABLE).map(|_| empty.clone()).collect(),
            groups: Arc::default(),
            meters: Arc::default(),
            ports: Arc::default(),
            config,
            seq: 0,
            removed: VecDeque::new(),
            watches: Vec::new(),
            timed_tables: None,
            trim_at: None,
            pending: Pending::default(),
            published_seq: 0,
            emptied: Vec::new(),
            forms: FormCache::default(),
        };
        c.publish();
        let cell = c.cell.clone();
        (c, cell)
    }

    /// Makes every change so far visible to the datapath and bumps the generation.
    pub fn publish(&mut self) {
        let p = Pipeline {
            tables: self.tables.clone(),
            groups: self.groups.clone(),
            meters: self.meters.clone(),
            ports: self.ports.clone(),
            config: self.config.clone(),
            shared: self.shared.clone(),
        };
        self.cell.current.store(Arc::new(p));
        self.published_seq += 1;
        let record = self.pending.take(self.published_seq);
        self.shared.log.store(record);
        self.shared.bump_published();
        if !self.emptied.is_empty() {
            // The published snapshot no longer holds them: their last owner frees them here.
            let emptied = std::mem::take(&mut self.emptied);
            // When no thread can start, the closure and the tables are dropped right here.
            let _ = std::thread::Builder::new()
                .name("hayate-free".into())
                .spawn(move || {
                    drop(emptied);
                    give_back_memory();
                });
        }
    }

    /// Table `t` for writing (copied first if a published snapshot shares it); forgets the
    /// list of tables with timed flows, which the next tick rebuilds.
    fn table_mut(&mut self, t: usize) -> &mut FlowTable {
        self.timed_tables = None;
        Arc::make_mut(&mut self.tables[t])
    }

    /// Table `t` of the working copy, shared: what a dump's snapshot holds
    /// ([`Control::dump`]).
    pub(crate) fn table_snapshot(&self, t: u8) -> Arc<FlowTable> {
        self.tables[usize::from(t)].clone()
    }

    /// The snapshot the datapath currently sees.
    pub fn published(&self) -> Arc<Pipeline> {
        self.cell.load()
    }

    /// Applies one flow-mod to the working copy (not published). Either it applies fully or
    /// nothing changes.
    pub fn flow_mod(&mut self, m: &FlowMod) -> Result<(), FlowModError> {
        check_match(&m.matcher)?;
        if m.matcher.with_implied() != m.matcher {
            // `tun_src=X` means an IPv4 underlay: stored and looked up with that bit.
            let mut implied = m.clone();
            implied.matcher = m.matcher.with_implied();
            return self.flow_mod(&implied);
        }
        match m.command {
            FlowModCommand::Add => self.add(m),
            FlowModCommand::Modify | FlowModCommand::ModifyStrict => self.modify(m),
            FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
                if m.table_id > MAX_TABLE && m.table_id != ALL_TABLES {
                    return Err(FlowModError::BadTableId(m.table_id));
                }
                self.delete(
                    m.table_id,
                    &FlowFilter::from_flow_mod(m),
                    RemovedReason::Delete,
                );
                Ok(())
            }
        }
    }

    /// Applies flow-mods in order, all or nothing: on the first error nothing has changed
    /// and the error comes with the index of the failing flow-mod. Not published.
    pub fn apply(&mut self, mods: &[FlowMod]) -> Result<(), (usize, FlowModError)> {
        let saved = (self.tables.clone(), self.removed.len(), self.seq);
        for (i, m) in mods.iter().enumerate() {
            if let Err(e) = self.flow_mod(m) {
                self.tables = saved.0;
                self.timed_tables = None;
                self.removed.truncate(saved.1);
                self.seq = saved.2;
                return Err((i, e));
            }
        }
        Ok(())
    }

    fn check_table(id: u8) -> Result<usize, FlowModError> {
        if id > MAX_TABLE {
            return Err(FlowModError::BadTableId(id));
        }
        Ok(id as usize)
    }

    fn check_instructions(
        &self,
        table: u8,
        m: &crate::model::Match,
        ins: &[crate::model::Instruction],
    ) -> Result<Vec<crate::model::Instruction>, FlowModError> {
        let groups = &self.groups;
        let meters = &self.meters;
        check_instructions(table, m, ins, &|g| groups.contains(g), &|id| {
            meters.contains_key(&id)
        })
    }

    fn add(&mut self, m: &FlowMod) -> Result<(), FlowModError> {
        let t = Self::check_table(m.table_id)?;
        let instructions = self.check_instructions(m.table_id, &m.matcher, &m.instructions)?;
        let table = &self.tables[t];
        let old = table.classifier.find_exact(&m.matcher, m.priority).cloned();
        if old.is_none() && table.len() >= self.config.table_capacity {
            return Err(FlowModError::TableFull {
                table: m.table_id,
                capacity: self.config.table_capacity,
            });
        }
        if old.is_none() && self.flow_count() >= self.config.total_capacity {
            return Err(FlowModError::AllTablesFull {
                capacity: self.config.total_capacity,
            });
        }
        if m.flags.check_overlap && table.overlaps(&m.matcher, m.priority) {
            return Err(FlowModError::Overlap {
                table: m.table_id,
                priority: m.priority,
            });
        }
        let counters = match &old {
            Some(o) if !m.flags.reset_counts => o.counters.clone(),
            _ => Arc::new(FlowCounters::default()),
        };
        self.seq += 1;
        let e = FlowEntry {
            seq: self.seq,
            table_id: m.table_id,
            priority: m.priority,
            matcher: m.matcher,
            instructions,
            given_order: given_order(&m.instructions),
            matcher_as_sent: self.forms.intern(&m.matcher_as_sent),
            instructions_as_sent: m.instructions_as_sent.clone(),
            cookie: m.cookie,
            flags: m.flags,
            idle_timeout: m.idle_timeout,
            hard_timeout: m.hard_timeout,
            install_ms: now_ms(),
            counters,
        };
        self.pending.entry(m.table_id, m.priority, &m.matcher);
        self.touch(m.table_id, &m.matcher, m.priority);
        self.table_mut(t).insert(Arc::new(e));
        Ok(())
    }

    fn modify(&mut self, m: &FlowMod) -> Result<(), FlowModError> {
        let t = Self::check_table(m.table_id)?;
        let filter = FlowFilter::from_flow_mod(m);
        let selected = self.tables[t].select(&filter);
        // Validate against every selected entry's match before changing anything.
        let mut replacements = Vec::with_capacity(selected.len());
        for e in &selected {
            let instructions = self.check_instructions(e.table_id, &e.matcher, &m.instructions)?;
            replacements.push(modified(e, m, instructions));
        }
        if !replacements.is_empty() {
            for r in &replacements {
                self.pending.entry(r.table_id, r.priority, &r.matcher);
                self.touch(r.table_id, &r.matcher, r.priority);
            }
            let table = self.table_mut(t);
            for r in replacements {
                table.insert(Arc::new(r));
            }
        }
        Ok(())
    }

    /// Flow entries in all tables.
    pub fn flow_count(&self) -> usize {
        self.tables.iter().map(|t| t.len()).sum()
    }

    /// Removes the entries `filter` selects in `table` (or every table), queueing notices.
    /// After a mass delete the memory goes back to the system once the datapath has let go
    /// of the old tables ([`Self::tick`]).
    fn delete(&mut self, table: u8, filter: &FlowFilter, reason: RemovedReason) -> usize {
        let n = self.delete_entries(table, filter, reason);
        if n >= TRIM_AFTER_DELETES {
            self.trim_at = Some(now_ms() + TRIM_DELAY_MS);
        }
        n
    }

    fn delete_entries(&mut self, table: u8, filter: &FlowFilter, reason: RemovedReason) -> usize {
        let range = if table == ALL_TABLES {
            0..=MAX_TABLE
        } else {
            table..=table
        };
        let now = now_ms();
        let mut n = 0;
        let everything = *filter == FlowFilter::ALL;
        for t in range {
            let t = t as usize;
            if self.tables[t].is_empty() {
                continue;
            }
            if everything {
                // The whole table goes: swap in an empty one instead of removing entries
                // one by one (seconds for millions); the old one is freed off this thread.
                self.timed_tables = None;
                // Every megaflow may be affected: the next publish asks for a full flush.
                self.pending.full();
                self.touch_all(t as u8);
                let empty = Arc::new(FlowTable::new(self.config.prefix_tracking));
                let old = std::mem::replace(&mut self.tables[t], empty);
                n += old.len();
                if old.notify > 0 {
                    let noticed = old.classifier.iter().filter(|e| e.flags.send_flow_rem);
                    self.removed.extend(noticed.map(|e| Removal {
                        entry: e.clone(),
                        reason,
                        at_ms: now,
                    }));
                }
                self.emptied.push(old);
                continue;
            }
            let selected = self.tables[t].select(filter);
            if selected.is_empty() {
                continue;
            }
            self.timed_tables = None;
            for e in &selected {
                self.pending.entry(e.table_id, e.priority, &e.matcher);
                self.touch(e.table_id, &e.matcher, e.priority);
            }
            let tbl = Arc::make_mut(&mut self.tables[t]);
            for e in selected {
                tbl.remove(&e);
                n += 1;
                if e.flags.send_flow_rem {
                    self.removed.push_back(Removal {
                        entry: e,
                        reason,
                        at_ms: now,
                    });
                }
            }
        }
        n
    }

    /// Flows removed by deletes (flow-mod, group or meter delete) that asked for a
    /// FLOW_REMOVED notice, since the last call.
    pub fn take_removed(&mut self) -> Vec<RemovedFlow> {
        self.take_removed_at_most(usize::MAX)
    }

    /// As [`Control::take_removed`], the oldest `max` at most (a delete of millions is
    /// reported a part at a time, as the controllers take them).
    pub fn take_removed_at_most(&mut self, max: usize) -> Vec<RemovedFlow> {
        let n = max.min(self.removed.len());
        self.removed.drain(..n).map(|r| r.view()).collect()
    }

    /// How many removed flows wait for [`Control::take_removed`].
    pub fn removed_waiting(&self) -> usize {
        self.removed.len()
    }

    /// Applies a group-mod (not published). Deleting a group also deletes the flows that
    /// apply it.
    pub fn group_mod(&mut self, m: &GroupMod) -> Result<(), GroupModError> {
        let doomed = self.groups.check(m)?;
        self.pending.full();
        if m.command == GroupModCommand::Delete {
            for &g in &doomed {
                let f = FlowFilter {
                    out_group: g,
                    ..FlowFilter::ALL
                };
                self.delete(ALL_TABLES, &f, RemovedReason::GroupDelete);
            }
        }
        Arc::make_mut(&mut self.groups).apply(m, &doomed);
        Ok(())
    }

    /// Applies a meter-mod (not published). Deleting a meter also deletes the flows that use
    /// it.
    pub fn meter_mod(&mut self, m: &MeterMod) -> Result<(), MeterModError> {
        let meters = &self.meters;
        check_meter_mod(m, &|id| meters.contains_key(&id))?;
        self.pending.full();
        let id = m.meter.id;
        match m.command {
            MeterModCommand::Add | MeterModCommand::Modify => {
                Arc::make_mut(&mut self.meters)
                    .insert(id, Arc::new(MeterState::new(m.meter.clone())));
            }
            MeterModCommand::Delete => {
                let doomed: Vec<u32> = if id == METER_ALL {
                    self.meters.keys().copied().collect()
                } else {
                    self.meters
                        .contains_key(&id)
                        .then_some(id)
                        .into_iter()
                        .collect()
                };
                for d in doomed {
                    self.delete_using_meter(d);
                    Arc::make_mut(&mut self.meters).remove(&d);
                }
            }
        }
        Ok(())
    }

    fn delete_using_meter(&mut self, meter: u32) {
        let now = now_ms();
        for t in 0..self.tables.len() {
            let hits: Vec<Arc<FlowEntry>> = self.tables[t]
                .classifier
                .iter()
                .filter(|e| e.uses_meter(meter))
                .cloned()
                .collect();
            if hits.is_empty() {
                continue;
            }
            self.timed_tables = None;
            for e in &hits {
                self.touch(e.table_id, &e.matcher, e.priority);
            }
            let tbl = Arc::make_mut(&mut self.tables[t]);
            for e in hits {
                tbl.remove(&e);
                if e.flags.send_flow_rem {
                    self.removed.push_back(Removal {
                        entry: e,
                        reason: RemovedReason::MeterDelete,
                        at_ms: now,
                    });
                }
            }
        }
    }

    /// Replaces the port table (not published). MACs learned on ports that disappeared are
    /// forgotten.
    pub fn set_ports(&mut self, mut ports: Vec<PortInfo>) {
        self.pending.full();
        ports.sort_by_key(|p| p.no);
        ports.dedup_by_key(|p| p.no);
        let mut flushed = 0;
        for old in self.ports.iter() {
            if ports.binary_search_by_key(&old.no, |p| p.no).is_err() {
                flushed += self.shared.mac.flush_port(old.no);
            }
        }
        if flushed > 0 {
            self.shared.bump();
        }
        self.ports = Arc::new(ports);
    }

    /// Records a port's link liveness and publishes at once (fast-failover groups depend on
    /// it). Returns false if the port is unknown.
    pub fn set_port_live(&mut self, no: u32, live: bool) -> bool {
        let Ok(i) = self.ports.binary_search_by_key(&no, |p| p.no) else {
            return false;
        };
        if self.ports[i].live != live {
            Arc::make_mut(&mut self.ports)[i].live = live;
            self.pending.full();
            self.publish();
        }
        true
    }

    /// The ports.
    pub fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    /// The groups of the working copy (for dump-groups).
    pub fn groups(&self) -> &GroupTable {
        &self.groups
    }

    /// The groups of the working copy, shared: a snapshot to walk without the control side
    /// (copy-on-write keeps it as it is while group-mods go on).
    pub fn groups_snapshot(&self) -> Arc<GroupTable> {
        self.groups.clone()
    }

    /// The meters of the working copy, shared (as [`Control::groups_snapshot`]).
    pub fn meters_snapshot(&self) -> Arc<HashMap<u32, Arc<MeterState>>> {
        self.meters.clone()
    }

    /// The meters of the working copy with their live state and counters (for
    /// dump-meters), in no particular order.
    pub fn meters(&self) -> impl Iterator<Item = &Arc<MeterState>> + '_ {
        self.meters.values()
    }

    /// The NORMAL MAC learning table (for fdb/show).
    pub fn mac_table(&self) -> &crate::normal::MacTable {
        &self.shared.mac
    }

    /// Dump-flows: entries of `table` (or [`ALL_TABLES`]) that `filter` selects, in the
    /// working copy, all at once ([`Control::dump`] walks a big table in pieces).
    pub fn flows(&self, table: u8, filter: &FlowFilter) -> Vec<FlowView> {
        let now = now_ms();
        let range = if table == ALL_TABLES {
            0..=MAX_TABLE
        } else {
            table..=table.min(MAX_TABLE)
        };
        let mut out = Vec::new();
        for t in range {
            let mut rows: Vec<FlowView> = self.tables[t as usize]
                .select(filter)
                .iter()
                .map(|e| FlowView::of(e, now))
                .collect();
            rows.sort_by_key(|f| std::cmp::Reverse(f.priority));
            out.extend(rows);
        }
        out
    }

    /// Whether any flow has an idle or hard timeout (whether [`Control::tick`] can ever
    /// remove anything).
    pub fn has_timed_flows(&self) -> bool {
        match &self.timed_tables {
            Some(list) => !list.is_empty(),
            None => self.tables.iter().any(|t| t.timed != 0),
        }
    }

    /// Expires flows whose idle or hard timeout passed at `now_ms` (on the clock of
    /// [`crate::dpaction::now_ms`]) and ages the MAC table. Publishes when a flow was removed
    /// (which also publishes any staged change). Returns every removed flow (the agent sends
    /// FLOW_REMOVED for those with `send_flow_rem`).
    pub fn tick(&mut self, now_ms: u64) -> Vec<RemovedFlow> {
        if self.trim_at.is_some_and(|t| now_ms >= t) {
            self.trim_at = None;
            // On a thread of its own: a trim walks the whole heap (a second for a few GiB),
            // which must not hold up the control side. (When no thread can start, no trim.)
            let _ = std::thread::Builder::new()
                .name("hayate-trim".into())
                .spawn(give_back_memory);
        }
        let mut out = Vec::new();
        let timed = match self.timed_tables.take() {
            Some(list) => list,
            None => (0..self.tables.len())
                .filter(|&t| self.tables[t].timed != 0)
                .map(|t| t as u8)
                .collect(),
        };
        for &t in &timed {
            let t = usize::from(t);
            let expired: Vec<(Arc<FlowEntry>, RemovedReason)> = self.tables[t]
                .classifier
                .iter()
                .filter(|e| e.has_timeout())
                .filter_map(|e| e.expired(now_ms).map(|r| (e.clone(), r)))
                .collect();
            if expired.is_empty() {
                continue;
            }
            for (e, _) in &expired {
                self.pending.entry(e.table_id, e.priority, &e.matcher);
                self.touch(e.table_id, &e.matcher, e.priority);
            }
            let tbl = self.table_mut(t);
            for (e, reason) in expired {
                tbl.remove(&e);
                out.push(RemovedFlow {
                    reason,
                    flow: FlowView::of(&e, now_ms),
                });
            }
        }
        if out.is_empty() {
            // Nothing expired: no table changed, the list still holds.
            self.timed_tables = Some(timed);
        }
        if self.shared.mac.expire(now_ms) > 0 {
            self.shared.bump();
        }
        if !out.is_empty() {
            self.publish();
        }
        out
    }

    /// Statistics of every table (OpenFlow `ofp_table_stats`), from the working copy.
    pub fn table_stats(&self) -> Vec<TableStatsView> {
        self.tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (lookups, matched) = self.shared.stats[i].get();
                TableStatsView {
                    table_id: i as u8,
                    active: t.len() as u64,
                    lookups,
                    matched,
                }
            })
            .collect()
    }

    /// The settings.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }
}

/// Returns the allocator's free memory to the system (glibc keeps freed pages of a
/// million-entry table otherwise, and the process stays at its peak).
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `e` with the instructions (and counters, unless kept) a modify flow-mod `m` gives it.
fn modified(e: &FlowEntry, m: &FlowMod, instructions: Vec<crate::model::Instruction>) -> FlowEntry {
    let counters = if m.flags.reset_counts {
        Arc::new(FlowCounters::default())
    } else {
        e.counters.clone()
    };
    FlowEntry {
        seq: e.seq,
        table_id: e.table_id,
        priority: e.priority,
        matcher: e.matcher,
        instructions,
        given_order: given_order(&m.instructions),
        matcher_as_sent: e.matcher_as_sent.clone(),
        instructions_as_sent: m.instructions_as_sent.clone(),
        cookie: e.cookie,
        flags: e.flags,
        idle_timeout: e.idle_timeout,
        hard_timeout: e.hard_timeout,
        install_ms: e.install_ms,
        counters,
    }
}

#[path = "control_bulk.rs"]
pub mod bulk;

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;

//! Revalidation instead of flushing: after a published flow change a poll thread keeps the
//! megaflows the change cannot affect, and drops the others the first time they are hit.
//!
//! Size and owner: one [`Revalidator`] per poll-mode thread, touched only by it: the records
//! of the last [`RING`] epochs (shared, immutable, from [`pipeline::changes`]), per table a
//! short staircase of the highest priority changed since each epoch, and the changed values
//! by (table, mask) class.
//!
//! Which megaflows a change may affect is the pipeline's rule ([`pipeline::changes`], held
//! against full translation by its property test): a change of priority `q` in table `T` with
//! match `M` reaches a megaflow only when its trail looked `T` up and the entry that decided
//! there has priority `<= q`, and then only when the megaflow's box meets `M` (or the key had
//! been rewritten before `T`). Groups, meters, ports, MAC learning and a log the thread fell
//! behind on still empty every cache ([`pipeline::Since::Full`]).
//!
//! The work is lazy, so that no change stalls the thread for a scan of its megaflows:
//! - On a generation change (once per batch at most, before any lookup) the thread takes the
//!   new records: it appends them to its ring and raises the staircases. Cost: the number of
//!   changed entries, not of megaflows.
//! - Each megaflow carries a stamp (the low 16 bits of the publish it was last known good at,
//!   in its hot entry beside the slot generation). A hit compares the stamp with the
//!   thread's: equal — the common case, one compare on a line the hit reads anyway — and the
//!   megaflow is used. Otherwise [`Revalidator::holds`] decides before the packet uses it:
//!   first from the trail and the staircases alone (for each table on the trail, the highest
//!   priority changed there since the stamp: one binary search over a few entries), which
//!   clears the megaflow without reading its key when every change was below the entries
//!   that decided it. Only when a table was reached is its key read: the ring's changes are
//!   grouped by (table, match mask), and for a class whose mask the megaflow's mask covers the
//!   box test becomes "is the key under the class's mask one of the values changed since the
//!   stamp?", one hash lookup for every change of the class (a hash collision only makes
//!   the answer cautious); classes the megaflow's mask does not cover get the box test change
//!   by change. A megaflow that holds gets the new stamp; one that does not is removed and
//!   its packet takes an upcall, so a packet sent after a barrier meets the new tables exactly
//!   as with a flush.
//! - Epochs: a publish opens a new epoch (and so a check on the next hit of every megaflow)
//!   only when one of its changes may reach some live megaflow of the thread: per table, the
//!   lowest priority that decided a megaflow there ([`Revalidator::note_install`]). Changes
//!   below every megaflow's rule (a controller adding rules under established traffic's)
//!   cost one comparison per change and nothing per hit. The bound is kept tight as
//!   megaflows die: the maintenance sweep notes every live megaflow it passes
//!   ([`Revalidator::note_live`]) and, each time it has passed them all, the bound becomes
//!   what it saw plus what was installed meanwhile ([`Revalidator::end_sweep`]). Without
//!   that, megaflows a catch-all decided before the controller's rules arrived kept every
//!   later change reaching every megaflow until the next flush.
//! - A megaflow older than the ring (not hit during the last [`RING`] epochs) is dropped when
//!   next hit. Stamps are 16 bits: every 2^14 epochs the thread walks its megaflows once and
//!   drops those older than the ring, so a stamp never aliases (between two walks no live
//!   megaflow falls more than [`RING`] + 2^14 + [`pipeline::changes::LOG_LEN`] < 2^16 epochs
//!   behind).
//!
//! Held by property tests: the pipeline's rule against full translation
//! (`pipeline::changes` tests), and this file's bookkeeping (reach filter, epochs,
//! staircases, classes, ring) against that rule.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrayvec::ArrayVec;
use packet::{FlowKey, KEY_WORDS};
use pipeline::{Cursor, Published, Since, Trail};

use crate::megaflow::Megaflow;
use crate::upcall::Upcall;

/// Relevant publishes a thread remembers: a megaflow not hit during more is dropped when
/// next hit. At 10,000 relevant publishes a second that is 0.2 s: shorter (0.1 s at 1,024)
/// let a hiccup of the thread age out megaflows whose upcalls then slowed it further. Half
/// the pipeline's log ([`pipeline::changes::LOG_LEN`]), so that a megaflow can age out of
/// the ring before its thread falls behind the log (which empties every cache).
pub const RING: usize = 2048;

/// Epochs between two walks that drop megaflows older than the ring (see the module docs:
/// keeps 16-bit stamps from aliasing).
const WALK_EVERY_LOG2: u32 = 14;

/// No megaflow decided in this table (see [`Revalidator::note_install`]).
const UNREACHED: u32 = u32::MAX;

/// The changes of the ring in one table with one match mask: for each value (by hash), the
/// newest epoch and the highest priority it changed at. A megaflow whose mask covers the
/// class's mask meets a change's match exactly when its key under that mask equals the
/// change's value, so one lookup answers for every change of the class (a hash collision
/// only makes the answer more cautious).
#[derive(Debug)]
struct Class {
    table: u8,
    mask: FlowKey,
    words: ArrayVec<u8, KEY_WORDS>,
    /// Newest epoch with a change in the class.
    newest: u64,
    values: HashMap<u32, (u64, u16)>,
}

/// Value entries a class keeps before it forgets those older than the ring.
const CLASS_PRUNE: usize = 4 * RING;

/// What a thread knows about recent flow changes (see the module docs).
#[derive(Debug)]
pub struct Revalidator {
    cursor: Cursor,
    /// Relevant publishes taken so far: megaflows installed now are good as of it.
    epoch: u64,
    /// The records of epochs `epoch - ring.len() + 1 ..= epoch`, oldest first.
    ring: VecDeque<Arc<Published>>,
    /// Per table: `(epoch, priority)` with `epoch` rising and `priority` falling, the highest
    /// priority changed in the table in that epoch or later (entries older than the ring
    /// are pruned).
    stairs: Vec<Vec<(u64, u16)>>,
    /// Per table, the lowest priority that decided a lookup there for any megaflow installed
    /// since the last flush ([`UNREACHED`]: none): a change below it reaches no megaflow.
    reach: Vec<u32>,
    /// Some megaflow's trail overflowed: every change may reach it.
    reach_all: bool,
    /// `reach` and `reach_all` of the live megaflows the current sweep passed and of those
    /// installed since it began (see [`Revalidator::end_sweep`]).
    next_reach: Vec<u32>,
    next_reach_all: bool,
    /// The ring's changes by table and mask.
    classes: Vec<Class>,
    /// Records taken by the last [`Revalidator::take`], reused.
    fresh: Vec<Arc<Published>>,
}

/// What [`Revalidator::take`] asks of the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing more: megaflows are checked as they are hit (when the epoch moved).
    Lazy,
    /// Empty every cache (something untracked changed, or the thread fell behind).
    Flush,
    /// Drop the megaflows older than the ring now (stamps are about to wrap).
    Walk,
}

impl Default for Revalidator {
    fn default() -> Self {
        Revalidator::new()
    }
}

impl Revalidator {
    /// A revalidator that knows nothing yet (its first [`Revalidator::take`] flushes unless
    /// [`Revalidator::sync`] ran).
    pub fn new() -> Revalidator {
        Revalidator {
            cursor: Cursor::default(),
            epoch: 0,
            ring: VecDeque::with_capacity(RING),
            stairs: (0..=u8::MAX).map(|_| Vec::new()).collect(),
            reach: vec![UNREACHED; 256],
            reach_all: false,
            next_reach: vec![UNREACHED; 256],
            next_reach_all: false,
            classes: Vec::new(),
            fresh: Vec::with_capacity(64),
        }
    }

    /// Starts from the pipeline as it is now (with empty caches).
    pub fn sync(&mut self, upcall: &dyn Upcall) {
        self.fresh.clear();
        let _ = upcall.changes_since(&mut self.cursor, &mut self.fresh);
        self.fresh.clear();
        self.reset();
    }

    /// The stamp of megaflows good as of now (low 16 bits of the epoch).
    #[inline(always)]
    pub fn stamp(&self) -> u16 {
        self.epoch as u16
    }

    /// Forgets every megaflow (after the caches were emptied).
    pub fn reset(&mut self) {
        self.ring.clear();
        for s in &mut self.stairs {
            s.clear();
        }
        self.reach.fill(UNREACHED);
        self.reach_all = false;
        self.next_reach.fill(UNREACHED);
        self.next_reach_all = false;
        self.classes.clear();
    }

    /// Records what a newly installed megaflow's translation looked up, so that later changes
    /// that reach none of the thread's megaflows cost nothing (see [`Revalidator::take`]).
    #[inline]
    pub fn note_install(&mut self, trail: &Trail) {
        fold(&mut self.reach, &mut self.reach_all, trail);
        fold(&mut self.next_reach, &mut self.next_reach_all, trail);
    }

    /// Notes a live megaflow the maintenance sweep passed (see [`Revalidator::end_sweep`]).
    #[inline]
    pub fn note_live(&mut self, trail: &Trail) {
        fold(&mut self.next_reach, &mut self.next_reach_all, trail);
    }

    /// The sweep has passed every slot since it last began: every live megaflow was either
    /// passed or installed since, so what was noted bounds them all and becomes the bound.
    pub fn end_sweep(&mut self) {
        std::mem::swap(&mut self.reach, &mut self.next_reach);
        self.reach_all = self.next_reach_all;
        self.next_reach.fill(UNREACHED);
        self.next_reach_all = false;
    }

    /// Takes the records published since the last call (after a generation change). A record
    /// whose changes reach no megaflow of this thread (each below the lowest priority that
    /// decided a megaflow in its table) is dropped at once; the others open a new epoch, so
    /// that megaflows are checked when next hit.
    pub fn take(&mut self, upcall: &dyn Upcall) -> Verdict {
        self.fresh.clear();
        if upcall.changes_since(&mut self.cursor, &mut self.fresh) == Since::Full {
            self.fresh.clear();
            self.reset();
            return Verdict::Flush;
        }
        let before = self.epoch;
        let fresh = std::mem::take(&mut self.fresh);
        for p in &fresh {
            if self.reaches(p) {
                self.push(p.clone());
            }
        }
        self.fresh = fresh;
        self.fresh.clear();
        if before >> WALK_EVERY_LOG2 != self.epoch >> WALK_EVERY_LOG2 {
            Verdict::Walk
        } else {
            Verdict::Lazy
        }
    }

    /// Whether some change of `p` may reach a megaflow installed so far.
    fn reaches(&self, p: &Published) -> bool {
        p.changes
            .iter()
            .any(|ch| self.reach_all || self.reach[ch.table as usize] <= u32::from(ch.priority))
    }

    fn push(&mut self, p: Arc<Published>) {
        self.epoch += 1;
        let epoch = self.epoch;
        for ch in &p.changes {
            let stair = &mut self.stairs[ch.table as usize];
            while stair.last().is_some_and(|&(_, q)| q <= ch.priority) {
                stair.pop();
            }
            stair.push((epoch, ch.priority));
            // Entries no megaflow in the ring can ask about.
            let old = stair
                .iter()
                .take_while(|&&(e, _)| e + RING as u64 <= epoch)
                .count();
            if old > 0 {
                stair.drain(..old);
            }
        }
        for ch in &p.changes {
            self.classify(ch, epoch);
        }
        self.classes.retain(|c| c.newest + RING as u64 > epoch);
        if self.ring.len() == RING {
            self.ring.pop_front();
        }
        self.ring.push_back(p);
    }

    fn classify(&mut self, ch: &pipeline::Change, epoch: u64) {
        let m = &ch.matcher;
        let i = match self
            .classes
            .iter()
            .position(|c| c.table == ch.table && c.mask == m.mask)
        {
            Some(i) => i,
            None => {
                self.classes.push(Class {
                    table: ch.table,
                    mask: m.mask,
                    words: m.mask.nonzero_words(),
                    newest: epoch,
                    values: HashMap::new(),
                });
                self.classes.len() - 1
            }
        };
        let c = &mut self.classes[i];
        c.newest = epoch;
        if c.values.len() >= CLASS_PRUNE {
            c.values.retain(|_, &mut (e, _)| e + RING as u64 > epoch);
        }
        let h = m.value.masked_hash(&c.mask, &c.words);
        let v = c.values.entry(h).or_insert((epoch, ch.priority));
        v.0 = epoch;
        v.1 = v.1.max(ch.priority);
    }

    /// Whether some change of the ring in `table`, after epoch `since`, of priority `>= p`,
    /// meets the box of `mf` (the rule's test for a lookup made with the packet's own key).
    fn met(&self, mf: &Megaflow, table: u8, p: u16, since: u64, behind: usize) -> bool {
        for c in &self.classes {
            if c.table != table || c.newest <= since {
                continue;
            }
            let covered = c.words.iter().all(|&i| {
                let i = i as usize;
                c.mask.w[i] & !mf.mask.w[i] == 0
            });
            let hit = if covered {
                let h = mf.key.masked_hash(&c.mask, &c.words);
                c.values.get(&h).is_some_and(|&(e, q)| e > since && q >= p)
            } else {
                // The megaflow's mask leaves some of the class's bits free: each change of
                // the class since its stamp gets the box test.
                self.ring
                    .iter()
                    .skip(self.ring.len() - behind)
                    .flat_map(|r| &r.changes)
                    .filter(|ch| ch.table == table && ch.priority >= p && ch.matcher.mask == c.mask)
                    .any(|ch| pipeline::changes::boxes_meet(&mf.key, &mf.mask, &ch.matcher))
            };
            if hit {
                return true;
            }
        }
        false
    }

    /// The highest priority changed in `table` in epochs after `since`.
    #[inline]
    fn max_since(&self, table: u8, since: u64) -> Option<u16> {
        let stair = &self.stairs[table as usize];
        let i = stair.partition_point(|&(e, _)| e <= since);
        stair.get(i).map(|&(_, q)| q)
    }

    /// How many epochs behind a megaflow with stamp `stamp` is (16-bit distance).
    #[inline]
    pub fn behind(&self, stamp: u16) -> usize {
        usize::from(self.stamp().wrapping_sub(stamp))
    }

    /// Epochs the thread remembers now (at most [`RING`]).
    pub fn ring_len(&self) -> usize {
        self.ring.len()
    }

    /// Whether a megaflow stamped `stamp` is older than the ring (drop it).
    #[inline]
    pub fn too_old(&self, stamp: u16) -> bool {
        self.behind(stamp) > self.ring.len()
    }

    /// Whether megaflow `mf`, last known good at stamp `stamp`, still translates every packet
    /// it covers as the current tables do (see the module docs). Never reads the megaflow's
    /// key unless a change reached a table on its trail.
    pub fn holds(&self, stamp: u16, mf: &Megaflow) -> bool {
        let behind = self.behind(stamp);
        if behind == 0 {
            return true;
        }
        if behind > self.ring.len() {
            return false;
        }
        let since = self.epoch - behind as u64;
        let records = || self.ring.iter().skip(self.ring.len() - behind);
        let trail = &mf.trail;
        if trail.is_overflow() {
            return records().all(|p| p.changes.is_empty());
        }
        for (t, p, rewritten) in trail.lookups() {
            if self.max_since(t, since).is_none_or(|q| q < p) {
                continue;
            }
            if rewritten || self.met(mf, t, p, since, behind) {
                return false;
            }
        }
        true
    }
}

/// Lowers the per-table bounds `reach` (and sets `all` on overflow) to cover `trail`.
#[inline]
fn fold(reach: &mut [u32], all: &mut bool, trail: &Trail) {
    if trail.is_overflow() {
        *all = true;
    }
    for (t, p, _) in trail.lookups() {
        let r = &mut reach[t as usize];
        *r = (*r).min(u32::from(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::{Field, FlowKey};
    use pipeline::{
        Action, Control, FlowMod, FlowModCommand, Instruction, Match, PipelineCell, PipelineConfig,
        Translation,
    };

    fn udp_src(src: u128) -> Match {
        let mut m = Match::ANY;
        m.set_exact(Field::EthType, 0x0800);
        m.set_exact(Field::IpProto, 17);
        m.set_exact(Field::Ipv4Src, src);
        m
    }

    fn out(port: u32) -> Vec<Instruction> {
        vec![Instruction::ApplyActions(vec![Action::Output {
            port,
            max_len: 0,
        }])]
    }

    fn megaflow(cell: &PipelineCell, src: u128) -> Megaflow {
        let mut k = FlowKey::ZERO;
        k.set(Field::EthType, 0x0800);
        k.set(Field::IpProto, 17);
        k.set(Field::Ipv4Src, src);
        let mut tr = Translation::default();
        cell.translate(&k, &mut tr);
        Megaflow::new(&k, &tr, Default::default(), 0)
    }

    #[test]
    fn staircase_answers_the_highest_priority_since() {
        let (mut c, cell) = Control::new(PipelineConfig::default());
        let mut r = Revalidator::new();
        let up: Arc<PipelineCell> = cell.clone();
        r.sync(&up);
        let base = r.epoch;
        let mut trail = Trail::EMPTY;
        trail.push(0, 0, false);
        r.note_install(&trail);
        for (prio, src) in [(10u16, 1u128), (50, 2), (20, 3)] {
            c.flow_mod(&FlowMod::add(0, prio, udp_src(src), out(2)))
                .unwrap();
            c.publish();
        }
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert_eq!(r.epoch, base + 3);
        assert_eq!(r.max_since(0, base), Some(50));
        assert_eq!(r.max_since(0, base + 1), Some(50));
        assert_eq!(r.max_since(0, base + 2), Some(20));
        assert_eq!(r.max_since(0, base + 3), None);
        assert_eq!(r.max_since(1, base), None);
    }

    #[test]
    fn holds_keeps_what_no_change_reaches_and_drops_the_rest() {
        let (mut c, cell) = Control::new(PipelineConfig::default());
        for src in 0..4 {
            c.flow_mod(&FlowMod::add(0, 100, udp_src(src), out(2)))
                .unwrap();
        }
        c.publish();
        let up: Arc<PipelineCell> = cell.clone();
        let mut r = Revalidator::new();
        r.sync(&up);
        let a = megaflow(&cell, 1);
        let b = megaflow(&cell, 2);
        r.note_install(&a.trail);
        r.note_install(&b.trail);
        let stamp = r.stamp();
        // Below the deciding priority: reaches no megaflow, the epoch does not even move.
        c.flow_mod(&FlowMod::add(0, 50, udp_src(1), out(3)))
            .unwrap();
        c.publish();
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert_eq!(r.stamp(), stamp);
        // Same priority, disjoint.
        c.flow_mod(&FlowMod::add(0, 100, udp_src(7), out(3)))
            .unwrap();
        c.publish();
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert!(r.holds(stamp, &a));
        assert!(r.holds(stamp, &b));
        // Modify the entry that decided `a`.
        let mut m = FlowMod::add(0, 100, udp_src(1), out(3));
        m.command = FlowModCommand::ModifyStrict;
        c.flow_mod(&m).unwrap();
        c.publish();
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert!(!r.holds(stamp, &a));
        assert!(r.holds(stamp, &b));
        // A group change: everything goes.
        c.group_mod(&pipeline::model::GroupMod {
            command: pipeline::model::GroupModCommand::Add,
            group: pipeline::model::Group {
                id: 1,
                kind: pipeline::model::GroupType::All,
                buckets: vec![],
            },
        })
        .unwrap();
        c.publish();
        assert_eq!(r.take(&up), Verdict::Flush);
    }

    #[test]
    fn once_the_sweep_has_passed_every_megaflow_the_bound_rises_to_what_still_lives() {
        let (mut c, cell) = Control::new(PipelineConfig::default());
        let up: Arc<PipelineCell> = cell.clone();
        let mut r = Revalidator::new();
        r.sync(&up);
        // Before the rules came, a catch-all at priority 0 decided a megaflow; then a rule
        // at 100 decided another.
        let mut low = Trail::EMPTY;
        low.push(0, 0, false);
        let mut high = Trail::EMPTY;
        high.push(0, 100, false);
        r.note_install(&low);
        r.note_install(&high);
        let change = |c: &mut Control, src: u128| {
            c.flow_mod(&FlowMod::add(0, 50, udp_src(src), out(3)))
                .unwrap();
            c.publish();
        };
        change(&mut c, 1);
        let e = r.epoch;
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert_eq!(
            r.epoch,
            e + 1,
            "a change at 50 may reach the megaflow decided at 0"
        );
        // The sweep under way when they were installed ends: both still count.
        r.end_sweep();
        change(&mut c, 9);
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert_eq!(r.epoch, e + 2);
        // The low one died; the next sweep passes the other, and one is installed meanwhile.
        r.note_live(&high);
        let mut other = Trail::EMPTY;
        other.push(1, 7, false);
        r.note_install(&other);
        // Mid-sweep nothing changes yet.
        change(&mut c, 2);
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert_eq!(r.epoch, e + 3);
        r.end_sweep();
        change(&mut c, 3);
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert_eq!(r.epoch, e + 3, "below every live megaflow's rule: no epoch");
        // What was installed during the sweep is still covered.
        c.flow_mod(&FlowMod::add(1, 7, udp_src(4), out(3))).unwrap();
        c.publish();
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert_eq!(r.epoch, e + 4);
        // A sweep that saw nothing live and no install leaves nothing to reach.
        r.end_sweep();
        r.end_sweep();
        c.flow_mod(&FlowMod::add(0, 200, udp_src(5), out(3)))
            .unwrap();
        c.publish();
        assert_eq!(r.take(&up), Verdict::Lazy);
        assert_eq!(r.epoch, e + 4);
    }

    #[test]
    fn a_megaflow_older_than_the_ring_is_dropped() {
        let (mut c, cell) = Control::new(PipelineConfig::default());
        c.flow_mod(&FlowMod::add(0, 10, udp_src(1), out(2)))
            .unwrap();
        c.publish();
        let up: Arc<PipelineCell> = cell.clone();
        let mut r = Revalidator::new();
        r.sync(&up);
        let a = megaflow(&cell, 1);
        r.note_install(&a.trail);
        let stamp = r.stamp();
        let mut more = 0u128;
        // Each change reaches `a`'s table and priority, and misses its box.
        let mut change = |c: &mut Control| {
            more += 1;
            c.flow_mod(&FlowMod::add(0, 10, udp_src(1000 + more), out(2)))
                .unwrap();
            c.publish();
        };
        for _ in 0..RING {
            change(&mut c);
            r.take(&up);
        }
        assert!(
            r.holds(stamp, &a),
            "exactly the ring's length behind: still known"
        );
        change(&mut c);
        r.take(&up);
        assert!(r.too_old(stamp));
        assert!(!r.holds(stamp, &a));
    }

    /// The thread's bookkeeping (reach filter, epochs, staircases, ring) against the rule it
    /// implements: whenever [`Revalidator::holds`] keeps a megaflow, no change published
    /// since it was installed or last kept may affect it by [`Trail::affected_by`] (which
    /// the pipeline's property test holds against full translation).
    mod bookkeeping {
        use super::*;
        use pipeline::Change;
        use proptest::prelude::*;
        use std::sync::Mutex;

        /// A pipeline stand-in that hands out crafted records.
        struct Log(Mutex<Vec<Arc<Published>>>);

        impl Upcall for Log {
            fn generation(&self) -> u64 {
                0
            }
            fn translate(&mut self, _: &FlowKey, _: &mut Translation) {}
            fn changes_since(&self, cursor: &mut Cursor, out: &mut Vec<Arc<Published>>) -> Since {
                let log = self.0.lock().unwrap();
                out.extend(log.iter().skip(cursor.seq as usize).cloned());
                cursor.seq = log.len() as u64;
                Since::Changes
            }
        }

        fn field_match(table: u8, priority: u16, v: u8, m: u8) -> Change {
            let mut matcher = Match::ANY;
            matcher.set_masked(Field::TpDst, u128::from(v & m), u128::from(m));
            Change {
                table,
                priority,
                matcher,
            }
        }

        #[derive(Debug, Clone)]
        enum Step {
            Install(usize),
            Publish(Vec<(u8, u16, u8, u8)>),
            Hit(usize),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                1 => (0usize..6).prop_map(Step::Install),
                2 => prop::collection::vec((0u8..3, 0u16..4, 0u8..4, small_mask()), 0..3)
                    .prop_map(Step::Publish),
                3 => (0usize..6).prop_map(Step::Hit),
            ]
        }

        /// Masks from a few shapes, so that classes repeat and masks nest or not.
        fn small_mask() -> impl Strategy<Value = u8> {
            prop_oneof![Just(0u8), Just(1), Just(3), Just(0xff), any::<u8>()]
        }

        fn megaflow_strategy() -> impl Strategy<Value = Megaflow> {
            (
                prop::collection::vec((0u8..3, 0u16..4, any::<bool>()), 1..4),
                prop::bool::weighted(0.1),
                0u8..4,
                small_mask(),
            )
                .prop_map(|(lookups, overflow, v, m)| {
                    let mut tr = Translation::default();
                    for (t, p, rw) in lookups {
                        tr.trail.push(t, p, rw);
                    }
                    if overflow {
                        for _ in 0..pipeline::changes::TRAIL_LEN {
                            tr.trail.push(0, 0, false);
                        }
                    }
                    tr.mask.set(Field::TpDst, u128::from(m));
                    let mut k = FlowKey::ZERO;
                    k.set(Field::TpDst, u128::from(v));
                    Megaflow::new(&k, &tr, Default::default(), 0)
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]
            #[test]
            fn holds_never_keeps_what_the_rule_would_drop(
                flows in prop::collection::vec(megaflow_strategy(), 6),
                steps in prop::collection::vec(step(), 1..60),
            ) {
                let log = Log(Mutex::new(Vec::new()));
                let mut r = Revalidator::new();
                r.sync(&log);
                // Per megaflow: (stamp, records seen when installed or last kept).
                let mut live: Vec<Option<(u16, usize)>> = vec![None; flows.len()];
                for st in steps {
                    match st {
                        Step::Install(i) => {
                            r.note_install(&flows[i].trail);
                            let seen = log.0.lock().unwrap().len();
                            live[i] = Some((r.stamp(), seen));
                        }
                        Step::Publish(changes) => {
                            let mut l = log.0.lock().unwrap();
                            let seq = l.len() as u64 + 1;
                            l.push(Arc::new(Published {
                                seq,
                                full: false,
                                changes: changes
                                    .into_iter()
                                    .map(|(t, p, v, m)| field_match(t, p, v, m))
                                    .collect(),
                            }));
                            drop(l);
                            prop_assert_eq!(r.take(&log), Verdict::Lazy);
                        }
                        Step::Hit(i) => {
                            let Some((stamp, seen)) = live[i] else { continue };
                            let mf = &flows[i];
                            if r.holds(stamp, mf) {
                                let l = log.0.lock().unwrap();
                                for p in &l[seen..] {
                                    for ch in &p.changes {
                                        prop_assert!(
                                            !mf.trail.affected_by(&mf.key, &mf.mask, ch),
                                            "kept {:?} past {:?}", mf.trail, ch
                                        );
                                    }
                                }
                                live[i] = Some((r.stamp(), l.len()));
                            } else {
                                live[i] = None;
                            }
                        }
                    }
                }
            }
        }
    }
}

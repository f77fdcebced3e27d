//! One classifier subtable: every rule sharing one mask, with a staged lookup.
//!
//! Rules live in [`Paged`] hash buckets keyed by the hash of their (masked) value, each
//! bucket sorted best first. Staged lookup (as in Open vSwitch): the mask is cut into
//! cumulative stages — port/metadata, then L2, then L3, then everything — and for each stage
//! but the last the subtable keeps a counted set of the hashes of its rules' values under
//! that stage's mask. A lookup whose stage hash is absent cannot match any rule here, and
//! only that stage's bits (not the whole mask) go into the megaflow mask: a packet equal on
//! those bits has the same stage hash, so it misses here too. Stages that add no bits are
//! skipped, so single-layer masks cost one probe as before.
//!
//! Prefix tracking (`prefix.rs`): when the mask is a prefix mask on an IPv4 or IPv6 address
//! field, the subtable also keeps its rules' prefixes of that field. When a lookup misses at
//! the first stage that holds L3 bits or later (or in the final probe), it asks them whether
//! any rule's prefix equals the packet's. When none does, only the leading bits of the field
//! that tell it (the longest prefix the packet shares with a rule, plus one, rounded up to an
//! octet or a 16-bit group) go into the megaflow mask instead of the stage's or the whole mask; when several tracked fields rule
//! the subtable out, the one needing the fewest bits is used. Misses at earlier stages (port,
//! L2) keep their stage mask, and a hit never walks the prefixes.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use arrayvec::ArrayVec;
use packet::{Field, FlowKey, KEY_WORDS};

use crate::classifier::{better, Rule};
use crate::paged::Paged;
use crate::prefix::{self, PrefixSet, TRACKED};

/// The cumulative stage masks: port/metadata, +L2 (with the MPLS top entry), +L3 (the last
/// stage is the full mask).
fn stage_masks() -> &'static [FlowKey; 3] {
    static MASKS: OnceLock<[FlowKey; 3]> = OnceLock::new();
    MASKS.get_or_init(|| {
        use Field::*;
        let stages: [&[Field]; 3] = [
            &[InPort, Parsed, Metadata, TunnelId],
            &[EthType, EthDst, VlanTci, EthSrc, CvlanTci, MplsLse],
            &[
                Ipv4Src, Ipv4Dst, IpProto, IpDscp, IpEcn, IpTtl, IpFrag, Ipv6Src, Ipv6Dst,
                Ipv6Label, Ipv6Exthdr,
            ],
        ];
        let mut out = [FlowKey::ZERO; 3];
        let mut acc = FlowKey::ZERO;
        for (i, fields) in stages.iter().enumerate() {
            for &f in *fields {
                acc.set_all(f);
            }
            out[i] = acc;
        }
        out
    })
}

/// A counted set of stage hashes.
#[derive(Debug, Clone)]
struct Stage {
    mask: FlowKey,
    words: ArrayVec<u8, KEY_WORDS>,
    /// `(hash, number of rules with that hash)`.
    index: Paged<(u32, u32)>,
    distinct: usize,
}

impl Stage {
    #[inline]
    fn contains(&self, h: u32) -> bool {
        self.index
            .bucket(self.index.slot(h))
            .iter()
            .any(|&(x, _)| x == h)
    }

    fn add(&mut self, h: u32) {
        let slot = self.index.slot(h);
        if let Some(e) = self.index.bucket_mut(slot).iter_mut().find(|e| e.0 == h) {
            e.1 += 1;
            return;
        }
        if self.distinct + 1 > self.index.n_buckets() * 2 {
            self.index.grow(|e| e.0);
        }
        let slot = self.index.slot(h);
        let at = self.index.bucket(slot).len();
        self.index.insert(slot, at, (h, 1));
        self.distinct += 1;
    }

    fn del(&mut self, h: u32) {
        let slot = self.index.slot(h);
        let Some(at) = self.index.bucket(slot).iter().position(|e| e.0 == h) else {
            return;
        };
        let bucket = self.index.bucket_mut(slot);
        if bucket[at].1 > 1 {
            bucket[at].1 -= 1;
        } else {
            self.index.remove(slot, at);
            self.distinct -= 1;
        }
    }
}

/// The prefixes of one tracked field among a subtable's rules.
#[derive(Debug, Clone)]
struct Tracked {
    field: Field,
    /// The subtable mask's prefix length on `field`.
    plen: u32,
    /// Each rule's value on `field`, left-aligned.
    set: PrefixSet,
}

impl Tracked {
    #[inline]
    fn key(&self, value: &FlowKey) -> u128 {
        prefix::left_aligned(value, self.field) & prefix::prefix_mask(self.plen)
    }
}

/// All rules sharing one mask.
#[derive(Debug)]
pub(crate) struct Subtable<R> {
    pub(crate) mask: FlowKey,
    words: ArrayVec<u8, KEY_WORDS>,
    pub(crate) max_priority: u16,
    pub(crate) len: usize,
    /// How many rules have each priority (to keep `max_priority` on removal).
    priorities: BTreeMap<u16, u32>,
    rules: Paged<Arc<R>>,
    stages: ArrayVec<Stage, 3>,
    tracked: ArrayVec<Tracked, 4>,
    /// Index of the first stage whose miss consults `tracked` (`stages.len()`: only a miss
    /// in the final probe).
    tracked_at: usize,
}

impl<R> Clone for Subtable<R> {
    fn clone(&self) -> Self {
        Subtable {
            mask: self.mask,
            words: self.words.clone(),
            max_priority: self.max_priority,
            len: self.len,
            priorities: self.priorities.clone(),
            rules: self.rules.clone(),
            stages: self.stages.clone(),
            tracked: self.tracked.clone(),
            tracked_at: self.tracked_at,
        }
    }
}

impl<R: Rule> Subtable<R> {
    /// An empty subtable for `mask`; `prefixes`: track address prefixes (see the module docs).
    pub(crate) fn new(mask: FlowKey, prefixes: bool) -> Self {
        let mut stages = ArrayVec::new();
        let mut prev = FlowKey::ZERO;
        for cum in stage_masks() {
            let m = mask.masked(cum);
            if m != prev && m != mask {
                stages.push(Stage {
                    mask: m,
                    words: m.nonzero_words(),
                    index: Paged::default(),
                    distinct: 0,
                });
            }
            prev = m;
        }
        let mut tracked = ArrayVec::new();
        let mut tracked_bits = FlowKey::ZERO;
        if prefixes {
            for f in TRACKED {
                if let Some(plen) = prefix::prefix_len(&mask, f) {
                    tracked.push(Tracked {
                        field: f,
                        plen,
                        set: PrefixSet::default(),
                    });
                    tracked_bits.set_all(f);
                }
            }
        }
        let tracked_at = stages
            .iter()
            .position(|s: &Stage| s.mask.masked(&tracked_bits) != FlowKey::ZERO)
            .unwrap_or(stages.len());
        Subtable {
            mask,
            words: mask.nonzero_words(),
            max_priority: 0,
            len: 0,
            priorities: BTreeMap::new(),
            rules: Paged::default(),
            stages,
            tracked,
            tracked_at,
        }
    }

    #[inline(always)]
    fn slot(&self, key: &FlowKey) -> usize {
        self.rules.slot(key.masked_hash(&self.mask, &self.words))
    }

    /// The best rule matching `key`, OR-ing into `wc` the bits the search depended on.
    #[inline]
    pub(crate) fn find(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<R>> {
        for (i, st) in self.stages.iter().enumerate() {
            if !st.contains(key.masked_hash(&st.mask, &st.words)) {
                if i < self.tracked_at || !self.ruled_out(key, wc) {
                    wc.or_assign(&st.mask);
                }
                return None;
            }
        }
        let hit = self
            .rules
            .bucket(self.slot(key))
            .iter()
            .find(|r| key.matches(&r.matcher().value, &self.mask));
        if hit.is_some() || !self.ruled_out(key, wc) {
            wc.or_assign(&self.mask);
        }
        hit
    }

    /// Whether a tracked prefix field shows that no rule here can match `key`; if so, ORs
    /// into `wc` the leading bits of that field it took (the fewest among the fields that
    /// show it).
    #[inline]
    fn ruled_out(&self, key: &FlowKey, wc: &mut FlowKey) -> bool {
        let mut best: Option<(Field, u32)> = None;
        for t in &self.tracked {
            let Some(common) = t.set.longest_common_prefix(t.key(key)) else {
                continue;
            };
            if common >= t.plen {
                continue;
            }
            let need = prefix::quantize(t.field, common + 1);
            if best.is_none_or(|(_, n)| need < n) {
                best = Some((t.field, need));
            }
        }
        let Some((field, need)) = best else {
            return false;
        };
        prefix::unwildcard_prefix(wc, field, need);
        true
    }

    pub(crate) fn find_exact(&self, value: &FlowKey, priority: u16) -> Option<&Arc<R>> {
        self.rules
            .bucket(self.slot(value))
            .iter()
            .find(|r| r.priority() == priority && r.matcher().value == *value)
    }

    /// Inserts, replacing a rule with the same value and priority (returned).
    pub(crate) fn insert(&mut self, rule: Arc<R>) -> Option<Arc<R>> {
        let value = rule.matcher().value;
        let priority = rule.priority();
        let slot = self.slot(&value);
        if let Some(j) = self
            .rules
            .bucket(slot)
            .iter()
            .position(|r| r.priority() == priority && r.matcher().value == value)
        {
            let bucket = self.rules.bucket_mut(slot);
            let old = std::mem::replace(&mut bucket[j], rule);
            // Keep the bucket sorted: the replacement may have another seq.
            bucket.sort_by(|a, b| b.priority().cmp(&a.priority()).then(a.seq().cmp(&b.seq())));
            return Some(old);
        }
        if self.len + 1 > self.rules.n_buckets() * 2 {
            let (mask, words) = (self.mask, self.words.clone());
            self.rules
                .grow(|r| r.matcher().value.masked_hash(&mask, &words));
        }
        let slot = self.slot(&value);
        let bucket = self.rules.bucket(slot);
        let at = bucket
            .iter()
            .position(|r| better(&*rule, &**r))
            .unwrap_or(bucket.len());
        self.rules.insert(slot, at, rule);
        for st in &mut self.stages {
            st.add(value.masked_hash(&st.mask, &st.words));
        }
        for t in &mut self.tracked {
            let k = t.key(&value);
            t.set.insert(k);
        }
        self.len += 1;
        *self.priorities.entry(priority).or_insert(0) += 1;
        self.max_priority = self.max_priority.max(priority);
        None
    }

    pub(crate) fn remove(&mut self, value: &FlowKey, priority: u16) -> Option<Arc<R>> {
        let slot = self.slot(value);
        let at = self
            .rules
            .bucket(slot)
            .iter()
            .position(|r| r.priority() == priority && r.matcher().value == *value)?;
        let old = self.rules.remove(slot, at);
        for st in &mut self.stages {
            st.del(value.masked_hash(&st.mask, &st.words));
        }
        for t in &mut self.tracked {
            let k = t.key(value);
            t.set.remove(k);
        }
        self.len -= 1;
        if let Some(n) = self.priorities.get_mut(&priority) {
            *n -= 1;
            if *n == 0 {
                self.priorities.remove(&priority);
            }
        }
        self.max_priority = self.priorities.keys().next_back().copied().unwrap_or(0);
        Some(old)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<R>> + '_ {
        self.rules.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Match;

    #[derive(Debug)]
    struct R(Match, u64);
    impl Rule for R {
        fn priority(&self) -> u16 {
            1
        }
        fn matcher(&self) -> &Match {
            &self.0
        }
        fn seq(&self) -> u64 {
            self.1
        }
    }

    #[test]
    fn a_stage_miss_unwildcards_only_that_stage() {
        let mut m = Match::ANY;
        m.set_exact(Field::InPort, 1);
        m.set_exact(Field::EthType, 0x0800);
        m.set_exact(Field::Ipv4Dst, 5);
        let mut st = Subtable::new(m.mask, true);
        assert_eq!(
            st.stages.len(),
            2,
            "port stage and L2 stage; L3 is the full mask"
        );
        st.insert(Arc::new(R(m, 1)));
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 2);
        k.set(Field::EthType, 0x0800);
        k.set(Field::Ipv4Dst, 5);
        let mut wc = FlowKey::ZERO;
        assert!(st.find(&k, &mut wc).is_none());
        assert_eq!(wc.get(Field::InPort), 0xffff_ffff);
        assert_eq!((wc.get(Field::EthType), wc.get(Field::Ipv4Dst)), (0, 0));
        k.set(Field::InPort, 1);
        k.set(Field::EthType, 0x86dd);
        let mut wc = FlowKey::ZERO;
        assert!(st.find(&k, &mut wc).is_none());
        assert_eq!(
            (wc.get(Field::EthType), wc.get(Field::Ipv4Dst)),
            (0xffff, 0)
        );
        k.set(Field::EthType, 0x0800);
        let mut wc = FlowKey::ZERO;
        assert_eq!(st.find(&k, &mut wc).unwrap().1, 1);
        assert_eq!(wc, m.mask);
        // Removing the rule empties the stage sets.
        assert!(st.remove(&m.value, 1).is_some());
        assert!(st.stages.iter().all(|s| s.distinct == 0));
    }
}

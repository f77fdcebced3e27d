//! One OpenFlow table's lookup structure: tuple-space search.
//!
//! Rules are grouped into *subtables*, one per distinct match mask (see `subtable.rs`). A
//! subtable is a hash table from the masked key to the rules with that exact masked value,
//! so probing it costs a masked hash or two (staged lookup) and a short bucket scan. Lookup
//! visits subtables in decreasing order of the highest priority they hold and stops as soon
//! as a subtable's maximum priority is below the best match found so far. The mask it
//! reports is the union of what every visited subtable depended on, hit or not (its whole
//! mask, or only the stages up to the one that ruled it out): a packet that agrees with the
//! looked-up key on those bits visits the same subtables with the same outcome (extra 1-bits
//! are safe; missing ones would forward wrongly). A subtable ruled out by prefix tracking
//! (`prefix.rs`: no rule's IPv4/IPv6 address prefix equals the packet's) reports only the
//! leading address bits that tell it, so rules that cannot match do not make the megaflow
//! exact on the address.
//!
//! Ties: among rules of equal priority the one with the lowest [`Rule::seq`] (installed
//! first) wins, so the result never depends on hash order.
//!
//! Cost: lookup is `O(S)` subtable probes in the worst case (`S` = distinct masks), each
//! `O(1)` expected (one masked hash, one bucket of about two rules); insert/remove are `O(1)`
//! expected plus `O(S log S)` when a subtable's maximum priority changes. Memory per rule:
//! one `Arc`, plus about half a bucket `Vec` header.
//!
//! Copy-on-write: a classifier is cheap to clone (one `Arc` per subtable). A subtable's
//! buckets live in pages of 16 buckets behind `Arc`s, grouped in chunks of 64 pages behind
//! `Arc`s (`paged.rs`), so changing a clone copies the changed subtable's chunk pointers
//! (about `rules / 2048`) once, plus each chunk (64 page pointers) and page (about 32 rule
//! pointers) it touches. The control side keeps a working classifier and publishes clones; a
//! batch of `b` changes to a subtable of `n` rules costs about `n / 2048 + 96 b` pointer
//! copies, so publishing after every change (a controller setting up one flow per
//! packet-in) stays cheap at a million rules.

use std::collections::HashMap;
use std::sync::Arc;

use packet::FlowKey;

use crate::model::Match;
use crate::subtable::Subtable;

/// What the classifier needs to know about a rule.
pub trait Rule {
    /// The rule's priority (higher wins).
    fn priority(&self) -> u16;
    /// The rule's match.
    fn matcher(&self) -> &Match;
    /// Installation order, unique per rule: breaks ties between equal priorities.
    fn seq(&self) -> u64;
}

/// Whether `a` beats `b`.
#[inline(always)]
pub(crate) fn better<R: Rule>(a: &R, b: &R) -> bool {
    a.priority() > b.priority() || (a.priority() == b.priority() && a.seq() < b.seq())
}

/// A tuple-space-search classifier over rules of type `R` (see the module docs).
#[derive(Debug)]
pub struct Classifier<R> {
    /// Subtables in no particular order (slots are stable until a subtable is removed).
    subtables: Vec<Arc<Subtable<R>>>,
    /// Indices into `subtables`, by decreasing maximum priority.
    order: Vec<u32>,
    /// Mask → index into `subtables`.
    by_mask: HashMap<FlowKey, u32>,
    len: usize,
    /// Whether new subtables track address prefixes.
    prefixes: bool,
}

impl<R> Clone for Classifier<R> {
    fn clone(&self) -> Self {
        Classifier {
            subtables: self.subtables.clone(),
            order: self.order.clone(),
            by_mask: self.by_mask.clone(),
            len: self.len,
            prefixes: self.prefixes,
        }
    }
}

impl<R> Default for Classifier<R> {
    fn default() -> Self {
        Classifier {
            subtables: Vec::new(),
            order: Vec::new(),
            by_mask: HashMap::new(),
            len: 0,
            prefixes: true,
        }
    }
}

impl<R: Rule> Classifier<R> {
    /// An empty classifier (with prefix tracking).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty classifier; `prefixes`: whether subtables track IPv4/IPv6 address prefixes
    /// (see the module docs). Without it, ruling a subtable out costs its whole mask.
    pub fn with_prefix_tracking(prefixes: bool) -> Self {
        Classifier {
            prefixes,
            ..Self::default()
        }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of subtables (distinct masks).
    pub fn subtable_count(&self) -> usize {
        self.subtables.len()
    }

    /// The best rule matching `key`, OR-ing into `wc` every mask bit the search consulted.
    /// Does not allocate.
    #[inline]
    pub fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<R>> {
        let mut best: Option<&Arc<R>> = None;
        for &i in &self.order {
            let st = &self.subtables[i as usize];
            if let Some(b) = best {
                if st.max_priority < b.priority() {
                    break;
                }
            }
            if let Some(r) = st.find(key, wc) {
                let wins = match best {
                    None => true,
                    Some(b) => better(&**r, &**b),
                };
                if wins {
                    best = Some(r);
                }
            }
        }
        best
    }

    /// The rule with exactly this match and priority.
    pub fn find_exact(&self, m: &Match, priority: u16) -> Option<&Arc<R>> {
        let &i = self.by_mask.get(&m.mask)?;
        self.subtables[i as usize].find_exact(&m.value, priority)
    }

    /// Inserts `rule`; a rule with the same match and priority is replaced and returned.
    pub fn insert(&mut self, rule: Arc<R>) -> Option<Arc<R>> {
        let mask = rule.matcher().mask;
        let i = match self.by_mask.get(&mask) {
            Some(&i) => i as usize,
            None => {
                self.subtables
                    .push(Arc::new(Subtable::new(mask, self.prefixes)));
                let i = self.subtables.len() - 1;
                self.by_mask.insert(mask, i as u32);
                self.order.push(i as u32);
                i
            }
        };
        let st = Arc::make_mut(&mut self.subtables[i]);
        let before = (st.max_priority, st.len);
        let old = st.insert(rule);
        if old.is_none() {
            self.len += 1;
        }
        if before.0 != st.max_priority || before.1 == 0 {
            self.sort();
        }
        old
    }

    /// Removes and returns the rule with exactly this match and priority.
    pub fn remove(&mut self, m: &Match, priority: u16) -> Option<Arc<R>> {
        let i = *self.by_mask.get(&m.mask)? as usize;
        let st = Arc::make_mut(&mut self.subtables[i]);
        let before = st.max_priority;
        let old = st.remove(&m.value, priority)?;
        self.len -= 1;
        if st.len == 0 {
            self.subtables.swap_remove(i);
            self.by_mask.remove(&m.mask);
            if i < self.subtables.len() {
                let moved = self.subtables[i].mask;
                self.by_mask.insert(moved, i as u32);
            }
            self.order = (0..self.subtables.len() as u32).collect();
            self.sort();
        } else if st.max_priority != before {
            self.sort();
        }
        Some(old)
    }

    /// Every rule, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<R>> + '_ {
        self.subtables.iter().flat_map(|st| st.iter())
    }

    /// Rules of subtables whose mask covers `mask` (the only ones a non-strict filter with
    /// that mask can select), in no particular order.
    pub fn iter_covering<'a>(&'a self, mask: &'a FlowKey) -> impl Iterator<Item = &'a Arc<R>> + 'a {
        self.subtables
            .iter()
            .filter(move |st| mask.is_subset_of(&st.mask))
            .flat_map(|st| st.iter())
    }

    fn sort(&mut self) {
        let subtables = &self.subtables;
        self.order.sort_by(|&a, &b| {
            subtables[b as usize]
                .max_priority
                .cmp(&subtables[a as usize].max_priority)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::{Field, KEY_WORDS};
    use proptest::prelude::*;

    #[derive(Debug)]
    struct R {
        p: u16,
        m: Match,
        id: u64,
    }
    impl Rule for R {
        fn priority(&self) -> u16 {
            self.p
        }
        fn matcher(&self) -> &Match {
            &self.m
        }
        fn seq(&self) -> u64 {
            self.id
        }
    }

    /// The naive reference: scan every rule.
    fn reference<'a>(rules: &'a [Arc<R>], key: &FlowKey) -> Option<&'a Arc<R>> {
        let mut best: Option<&Arc<R>> = None;
        for r in rules {
            let wins = match best {
                None => true,
                Some(b) => better(&**r, &**b),
            };
            if r.m.matches(key) && wins {
                best = Some(r);
            }
        }
        best
    }

    fn rule(p: u16, id: u64, fields: &[(Field, u128, u128)]) -> Arc<R> {
        let mut m = Match::ANY;
        for &(f, v, mk) in fields {
            m.set_masked(f, v, mk);
        }
        Arc::new(R { p, m, id })
    }

    #[test]
    fn higher_priority_wins_and_mask_covers_visited_subtables() {
        let mut c = Classifier::new();
        c.insert(rule(10, 1, &[(Field::Ipv4Dst, 0x0a00_0000, 0xff00_0000)]));
        c.insert(rule(20, 2, &[(Field::TpDst, 80, 0xffff)]));
        c.insert(rule(5, 3, &[(Field::EthType, 0x0800, 0xffff)]));
        let mut k = FlowKey::ZERO;
        k.set(Field::Ipv4Dst, 0x0a01_0203);
        k.set(Field::TpDst, 22);
        k.set(Field::EthType, 0x0800);
        let mut wc = FlowKey::ZERO;
        assert_eq!(c.lookup(&k, &mut wc).unwrap().id, 1);
        assert_eq!(wc.get(Field::TpDst), 0xffff);
        assert_eq!(wc.get(Field::Ipv4Dst), 0xff00_0000);
        // The priority-5 subtable was never visited.
        assert_eq!(wc.get(Field::EthType), 0);
        assert_eq!(c.subtable_count(), 3);
    }

    #[test]
    fn replace_and_remove() {
        let mut c = Classifier::new();
        let a = rule(7, 1, &[(Field::InPort, 1, 0xffff_ffff)]);
        assert!(c.insert(a.clone()).is_none());
        let b = rule(7, 2, &[(Field::InPort, 1, 0xffff_ffff)]);
        assert_eq!(c.insert(b).unwrap().id, 1);
        assert_eq!(c.len(), 1);
        assert_eq!(c.find_exact(&a.m, 7).unwrap().id, 2);
        assert!(c.find_exact(&a.m, 8).is_none());
        assert_eq!(c.remove(&a.m, 7).unwrap().id, 2);
        assert!(c.is_empty());
        assert_eq!(c.subtable_count(), 0);
        let mut wc = FlowKey::ZERO;
        assert!(c.lookup(&FlowKey::ZERO, &mut wc).is_none());
    }

    #[test]
    fn clones_are_independent() {
        let mut c = Classifier::new();
        for i in 0..100u64 {
            c.insert(rule(1, i, &[(Field::InPort, i as u128, 0xffff_ffff)]));
        }
        let snapshot = c.clone();
        c.remove(&rule(1, 0, &[(Field::InPort, 5, 0xffff_ffff)]).m, 1);
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 5);
        let mut wc = FlowKey::ZERO;
        assert!(c.lookup(&k, &mut wc).is_none());
        assert_eq!(snapshot.lookup(&k, &mut wc).unwrap().id, 5);
        assert_eq!(snapshot.len(), 100);
        assert_eq!(c.iter().count(), 99);
    }

    /// Small value domains so that random rules and packets collide often.
    fn field_strategy() -> impl Strategy<Value = (Field, u128, u128)> {
        prop_oneof![
            (0u128..4, prop_oneof![Just(0xffff_ffffu128), Just(1u128)]).prop_map(|(v, m)| (
                Field::InPort,
                v,
                m
            )),
            (0u128..3, Just(0xffffu128)).prop_map(|(v, m)| (Field::EthType, v, m)),
            (
                0u128..8,
                prop_oneof![Just(0xffff_ffffu128), Just(0xffff_fff0u128), Just(0x6u128)]
            )
                .prop_map(|(v, m)| (Field::Ipv4Dst, v, m)),
            (0u128..4, prop_oneof![Just(0xffffu128), Just(0x2u128)]).prop_map(|(v, m)| (
                Field::TpDst,
                v,
                m
            )),
            (0u128..4, Just(0xffu128)).prop_map(|(v, m)| (Field::IpProto, v, m)),
            (0u128..3, Just(u128::MAX)).prop_map(|(v, m)| (Field::Ipv6Src, v, m)),
        ]
    }

    fn key_strategy() -> impl Strategy<Value = FlowKey> {
        (0u128..4, 0u128..3, 0u128..8, 0u128..4, 0u128..4, 0u128..3).prop_map(
            |(a, b, c, d, e, f)| {
                let mut k = FlowKey::ZERO;
                k.set(Field::InPort, a);
                k.set(Field::EthType, b);
                k.set(Field::Ipv4Dst, c);
                k.set(Field::TpDst, d);
                k.set(Field::IpProto, e);
                k.set(Field::Ipv6Src, f);
                k
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn matches_linear_scan_and_mask_is_sound(
            specs in prop::collection::vec((0u16..6, prop::collection::vec(field_strategy(), 0..3)), 0..40),
            removals in prop::collection::vec(0usize..40, 0..5),
            keys in prop::collection::vec((key_strategy(), any::<[u64; KEY_WORDS]>()), 1..20),
        ) {
            let mut c = Classifier::new();
            let mut rules: Vec<Arc<R>> = Vec::new();
            for (id, (p, fields)) in specs.iter().enumerate() {
                let r = rule(*p, id as u64, fields);
                if let Some(old) = c.insert(r.clone()) {
                    rules.retain(|x| x.id != old.id);
                }
                rules.push(r);
            }
            for &i in &removals {
                if i < rules.len() {
                    let r = rules.remove(i);
                    prop_assert!(c.remove(&r.m, r.p).is_some());
                }
            }
            prop_assert_eq!(c.len(), rules.len());
            for (key, noise) in &keys {
                let mut wc = FlowKey::ZERO;
                let got = c.lookup(key, &mut wc).map(|r| r.id);
                let want = reference(&rules, key).map(|r| r.id);
                prop_assert_eq!(got, want);
                // Any key equal under the mask gets the same winner.
                let mut key2 = *key;
                for (i, n) in noise.iter().enumerate() {
                    key2.w[i] = (key.w[i] & wc.w[i]) | (n & !wc.w[i]);
                }
                let mut wc2 = FlowKey::ZERO;
                prop_assert_eq!(c.lookup(&key2, &mut wc2).map(|r| r.id), got);
                prop_assert_eq!(reference(&rules, &key2).map(|r| r.id), got);
            }
        }
    }

    #[test]
    fn a_rule_that_cannot_match_costs_only_the_address_bits_that_tell_it() {
        // The table: a drop rule on one source, a catch-all on the port.
        let mut c = Classifier::new();
        c.insert(rule(
            100,
            1,
            &[
                (Field::EthType, 0x0800, 0xffff),
                (Field::IpProto, 17, 0xff),
                (Field::Ipv4Src, 0x0b01_0101, 0xffff_ffff),
            ],
        ));
        c.insert(rule(10, 2, &[(Field::InPort, 1, 0xffff_ffff)]));
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 1);
        k.set(Field::EthType, 0x0800);
        k.set(Field::IpProto, 17);
        k.set(Field::Ipv4Src, 0x0a00_0007);
        let mut wc = FlowKey::ZERO;
        assert_eq!(c.lookup(&k, &mut wc).unwrap().id, 2);
        // 10.x and 11.x differ in the 8th bit: /8 tells the drop rule apart.
        let mut want = FlowKey::ZERO;
        want.set(Field::InPort, 0xffff_ffff);
        want.set(Field::Ipv4Src, 0xff00_0000);
        assert_eq!(wc, want);
        // Near the rule it takes more bits; on it, the whole subtable mask.
        k.set(Field::Ipv4Src, 0x0b01_0100);
        let mut wc = FlowKey::ZERO;
        assert_eq!(c.lookup(&k, &mut wc).unwrap().id, 2);
        assert_eq!(wc.get(Field::Ipv4Src), 0xffff_ffff);
        k.set(Field::Ipv4Src, 0x0b01_0101);
        let mut wc = FlowKey::ZERO;
        assert_eq!(c.lookup(&k, &mut wc).unwrap().id, 1);
        assert_eq!(wc.get(Field::Ipv4Src), 0xffff_ffff);
        assert_eq!(wc.get(Field::IpProto), 0xff);
        // Without prefix tracking the whole subtable mask goes in, as before.
        let mut off = Classifier::with_prefix_tracking(false);
        for r in c.iter() {
            off.insert(r.clone());
        }
        k.set(Field::Ipv4Src, 0x0a00_0007);
        let mut wc = FlowKey::ZERO;
        assert_eq!(off.lookup(&k, &mut wc).unwrap().id, 2);
        assert_eq!(wc.get(Field::Ipv4Src), 0xffff_ffff);
    }

    /// An address near one of a few bases, so rules and packets share long prefixes.
    fn v4_addr() -> impl Strategy<Value = u128> {
        let bases = [
            0x0a00_0000u32,
            0x0b01_0101,
            0x0a00_0100,
            0xc0a8_0000,
            0x8000_0000,
        ];
        (0..bases.len(), 0u32..24, prop_oneof![Just(0u32), 0u32..32])
            .prop_map(move |(b, lo, flip)| u128::from((bases[b] + lo) ^ (1u32 << flip >> 1)))
    }

    fn v6_addr() -> impl Strategy<Value = u128> {
        let bases = [
            0x2001_0db8u128 << 96,
            (0x2001_0db8u128 << 96) | (1 << 64),
            0xfe80 << 112,
        ];
        (0..bases.len(), 0u128..8, 0u32..128)
            .prop_map(move |(b, lo, flip)| (bases[b] + lo) ^ (1u128 << flip))
    }

    /// A prefix match (any length, 0 = wildcard) or, now and then, a non-CIDR mask.
    fn prefix_field() -> impl Strategy<Value = (Field, u128, u128)> {
        let v4 = |f: Field| {
            (v4_addr(), 0u32..=32, 0u8..8).prop_map(move |(a, plen, odd)| {
                let mask = if odd == 0 {
                    0xff00_ff00
                } else {
                    u128::from(u32::MAX) & !(u128::from(u32::MAX) >> plen)
                };
                (f, a, mask)
            })
        };
        let v6 = |f: Field| {
            (v6_addr(), 0u32..=128)
                .prop_map(move |(a, plen)| (f, a, crate::prefix::prefix_mask(plen)))
        };
        prop_oneof![
            v4(Field::Ipv4Src),
            v4(Field::Ipv4Dst),
            v6(Field::Ipv6Src),
            v6(Field::Ipv6Dst),
            (0u128..3, Just(0xffff_ffffu128)).prop_map(|(v, m)| (Field::InPort, v, m)),
            (prop_oneof![Just(6u128), Just(17)], Just(0xffu128)).prop_map(|(v, m)| (
                Field::IpProto,
                v,
                m
            )),
        ]
    }

    fn prefix_key() -> impl Strategy<Value = FlowKey> {
        (
            0u128..3,
            prop_oneof![Just(6u128), Just(17)],
            v4_addr(),
            v4_addr(),
            v6_addr(),
            v6_addr(),
        )
            .prop_map(|(port, proto, s4, d4, s6, d6)| {
                let mut k = FlowKey::ZERO;
                k.set(Field::InPort, port);
                k.set(Field::IpProto, proto);
                k.set(Field::Ipv4Src, s4);
                k.set(Field::Ipv4Dst, d4);
                k.set(Field::Ipv6Src, s6);
                k.set(Field::Ipv6Dst, d6);
                k
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Prefix tracking's narrower masks stay sound: random noise outside the mask, and
        /// flipping the first wildcarded bit of each address (the bit right after the prefix
        /// a ruled-out subtable cost), never change the winner.
        #[test]
        fn prefix_rules_match_linear_scan_and_mask_is_sound(
            specs in prop::collection::vec((0u16..6, prop::collection::vec(prefix_field(), 1..3)), 1..30),
            keys in prop::collection::vec((prefix_key(), any::<[u64; KEY_WORDS]>()), 1..12),
        ) {
            let mut c = Classifier::new();
            let mut rules: Vec<Arc<R>> = Vec::new();
            for (id, (p, fields)) in specs.iter().enumerate() {
                let r = rule(*p, id as u64, fields);
                if let Some(old) = c.insert(r.clone()) {
                    rules.retain(|x| x.id != old.id);
                }
                rules.push(r);
            }
            for (key, noise) in &keys {
                let mut wc = FlowKey::ZERO;
                let got = c.lookup(key, &mut wc).map(|r| r.id);
                prop_assert_eq!(got, reference(&rules, key).map(|r| r.id));
                let mut others = Vec::new();
                let mut key2 = *key;
                for (i, n) in noise.iter().enumerate() {
                    key2.w[i] = (key.w[i] & wc.w[i]) | (n & !wc.w[i]);
                }
                others.push(key2);
                for f in crate::prefix::TRACKED {
                    let bits = u32::from(f.spec().bits);
                    let m = crate::prefix::left_aligned(&wc, f);
                    let first_free = m.leading_ones();
                    if first_free < bits {
                        let mut k2 = *key;
                        let flip = 1u128 << (bits - 1 - first_free);
                        k2.set(f, key.get(f) ^ flip);
                        others.push(k2);
                    }
                }
                for k2 in others {
                    prop_assert_eq!(reference(&rules, &k2).map(|r| r.id), got, "mask {:?}", wc);
                }
            }
        }
    }
}

//! Prefix tracking: a persistent set of address prefixes that answers "how many leading bits
//! of this address does it take to tell that no member matches".
//!
//! Why: a subtable whose rules match, say, `nw_src=11.1.1.1/32` cannot match a packet from
//! 10.0.0.7, and it takes only the source's first 8 bits to know it (`00001010` vs
//! `00001011`). Without this, a lookup that rules such a subtable out ORs its whole mask into
//! the megaflow mask, so every source address gets a megaflow of its own; with it, the
//! megaflow mask gets `nw_src/8` and one megaflow serves every source in 10.0.0.0/8.
//!
//! What: every subtable whose mask is a prefix (CIDR) mask of length `plen` on one of the
//! [`TRACKED`] fields keeps, per such field, a [`PrefixSet`] of its rules' `plen`-bit values
//! on that field (counted: rules differing only in other fields share an entry). The lookup
//! asks the set for the longest common prefix `c` between the packet's value and any member
//! (capped at `plen`). If `c == plen` some rule may match and the lookup goes on as usual;
//! otherwise no rule of the subtable can match, and `c + 1` leading bits of the field are
//! enough to know it: any packet equal to this one on those bits shares at most `c` bits with
//! every member, so it misses the subtable too. That is the fewest bits that rule out every
//! rule of the subtable by this field alone (one fewer and some member agrees with the
//! packet on all of them). Open vSwitch's classifier (`lib/classifier.c`, "prefix tracking")
//! keeps one trie per table and field holding every rule's prefix, and a subtable is ruled
//! out when no prefix of *its* length matches, unwildcarding the bits needed to walk that
//! trie; a set per subtable is tighter (other subtables' and other lengths' rules never cost
//! bits) and simpler (one length per set).
//!
//! Rounding: the lookup rounds `c + 1` up to whole octets of an IPv4 address and whole 16-bit
//! groups of an IPv6 one ([`quantize`]; more bits are always sound). Every distinct length is
//! a distinct megaflow mask, and the datapath's megaflow classifier pays per mask: with
//! exact lengths, the `acl-1` benchmark (one `/32` rule, 10,000 sources) made 15 megaflows
//! with 15 different masks — 2.4 subtable probes per hit — where rounded lengths make 295
//! megaflows with 3 masks and 1.03 probes. Rounded, a field yields at most 4 (IPv4) or 8
//! (IPv6) lengths, and the issue's case keeps its single megaflow (`10.0.0.0/8` rules out
//! `11.1.1.1`).
//!
//! How: a crit-bit tree (a binary PATRICIA trie) over left-aligned `u128` keys (an IPv4
//! address `a` is `(a as u128) << 96`). A branch holds the index (from the most significant
//! bit) of the first bit in which its two subtrees differ; a leaf holds a key and its count.
//! Walking from the root by the packet's bits at each branch reaches the member with the
//! longest common prefix with the packet (if a member shared more, it would differ from the
//! reached leaf at the first bit the packet and the leaf differ, and the walk would have
//! followed the packet into its subtree at that branch), so a query is one walk, at most
//! 128 branches (about `log2 n` on random keys) and no allocation.
//!
//! Copy-on-write: nodes are behind `Arc`s and changes copy the path they touch
//! (`Arc::make_mut`), so cloning a set is one pointer copy and a change to a clone shared
//! with a published snapshot copies at most its depth of branches. Memory: one branch (80 bytes
//! plus the `Arc`'s 16) per distinct key beyond the first.

use std::sync::Arc;

use packet::{Field, FlowKey};

/// Fields whose prefixes subtables track.
pub(crate) const TRACKED: [Field; 4] = [
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
];

/// The field's value in `key`, left-aligned in a `u128` (its first bit is bit 127).
#[inline]
pub(crate) fn left_aligned(key: &FlowKey, f: Field) -> u128 {
    key.get(f) << (128 - u32::from(f.spec().bits))
}

/// A left-aligned mask of the first `n` bits (`n` ≤ 128).
#[inline]
pub(crate) fn prefix_mask(n: u32) -> u128 {
    if n == 0 {
        0
    } else {
        u128::MAX << (128 - n)
    }
}

/// `n` bits rounded up to whole octets of an IPv4 address or 16-bit groups of an IPv6 one
/// (see "Rounding" in the module docs).
#[inline]
pub(crate) fn quantize(f: Field, n: u32) -> u32 {
    let unit = if f.spec().bits == 128 { 16 } else { 8 };
    n.div_ceil(unit) * unit
}

/// The length of `f`'s mask in `mask` when it is a non-empty prefix (CIDR) mask, else `None`.
pub(crate) fn prefix_len(mask: &FlowKey, f: Field) -> Option<u32> {
    let m = left_aligned(mask, f);
    let n = m.leading_ones();
    (n > 0 && m == prefix_mask(n)).then_some(n)
}

/// ORs the first `n` bits of `f` into `wc`.
#[inline]
pub(crate) fn unwildcard_prefix(wc: &mut FlowKey, f: Field, n: u32) {
    let bits = u32::from(f.spec().bits);
    let m = prefix_mask(n.min(bits)) >> (128 - bits);
    let cur = wc.get(f);
    wc.set(f, cur | m);
}

/// A node: a leaf (a key and how many rules have it) or a branch.
#[derive(Debug, Clone)]
enum Slot {
    Leaf { key: u128, count: u32 },
    Branch(Arc<Branch>),
}

/// Two subtrees whose keys agree on every bit before `bit` and differ at `bit`.
#[derive(Debug, Clone)]
struct Branch {
    /// Bit index from the most significant bit (0..=127).
    bit: u32,
    /// The subtree whose keys have a 0 at `bit`, then the one with a 1.
    kids: [Slot; 2],
}

#[inline(always)]
fn bit_of(key: u128, i: u32) -> usize {
    ((key >> (127 - i)) & 1) as usize
}

/// A counted set of left-aligned keys (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct PrefixSet {
    root: Option<Slot>,
    /// Distinct keys.
    distinct: usize,
}

impl PrefixSet {
    /// Number of distinct keys.
    #[cfg(test)]
    pub(crate) fn distinct(&self) -> usize {
        self.distinct
    }

    /// The member sharing the longest prefix with `v` (`None` when empty).
    #[inline]
    fn nearest(&self, v: u128) -> Option<(u128, u32)> {
        let mut s = self.root.as_ref()?;
        loop {
            match s {
                Slot::Leaf { key, count } => return Some((*key, *count)),
                Slot::Branch(b) => s = &b.kids[bit_of(v, b.bit)],
            }
        }
    }

    /// The longest common prefix, in bits, between `v` and any member (128 when `v` is one);
    /// `None` when the set is empty.
    #[inline]
    pub(crate) fn longest_common_prefix(&self, v: u128) -> Option<u32> {
        self.nearest(v).map(|(k, _)| (k ^ v).leading_zeros())
    }

    /// Adds one occurrence of `key`.
    pub(crate) fn insert(&mut self, key: u128) {
        let Some((near, _)) = self.nearest(key) else {
            self.root = Some(Slot::Leaf { key, count: 1 });
            self.distinct = 1;
            return;
        };
        let root = self.root.as_mut().expect("non-empty");
        let c = (near ^ key).leading_zeros();
        if c == 128 {
            adjust(root, key, 1);
        } else {
            split(root, key, c);
            self.distinct += 1;
        }
    }

    /// Removes one occurrence of `key`; returns whether it was there.
    pub(crate) fn remove(&mut self, key: u128) -> bool {
        match self.nearest(key) {
            Some((k, _)) if k == key => {}
            _ => return false,
        }
        let root = self.root.as_mut().expect("non-empty");
        if !take(root, key) {
            return true;
        }
        // The last occurrence went: unlink the leaf.
        self.distinct -= 1;
        if matches!(root, Slot::Leaf { .. }) {
            self.root = None;
        } else {
            unlink(root, key);
        }
        true
    }

    /// Every `(key, count)`, in key order.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(u128, u32)> {
        fn walk(s: &Slot, out: &mut Vec<(u128, u32)>) {
            match s {
                Slot::Leaf { key, count } => out.push((*key, *count)),
                Slot::Branch(b) => {
                    walk(&b.kids[0], out);
                    walk(&b.kids[1], out);
                }
            }
        }
        let mut out = Vec::new();
        if let Some(r) = &self.root {
            walk(r, &mut out);
        }
        out
    }
}

/// Adds `delta` to the count of `key`, which is a member, copying the path if shared.
fn adjust(s: &mut Slot, key: u128, delta: u32) {
    match s {
        Slot::Leaf { count, .. } => *count += delta,
        Slot::Branch(b) => {
            let b = Arc::make_mut(b);
            adjust(&mut b.kids[bit_of(key, b.bit)], key, delta);
        }
    }
}

/// Inserts `key`, a non-member whose longest common prefix with the set is `c` bits: it
/// branches off at the first node on its path whose keys differ at or after bit `c` (they
/// all agree with `key` before `c` and differ from it at `c`).
fn split(s: &mut Slot, key: u128, c: u32) {
    if let Slot::Branch(b) = s {
        if b.bit < c {
            let b = Arc::make_mut(b);
            return split(&mut b.kids[bit_of(key, b.bit)], key, c);
        }
    }
    let old = std::mem::replace(s, Slot::Leaf { key: 0, count: 0 });
    let leaf = Slot::Leaf { key, count: 1 };
    let kids = if bit_of(key, c) == 1 {
        [old, leaf]
    } else {
        [leaf, old]
    };
    *s = Slot::Branch(Arc::new(Branch { bit: c, kids }));
}

/// Takes one occurrence of `key`, a member; returns whether its count fell to zero (the
/// leaf is then left in place with count 0 for [`unlink`]).
fn take(s: &mut Slot, key: u128) -> bool {
    match s {
        Slot::Leaf { count, .. } => {
            *count -= 1;
            *count == 0
        }
        Slot::Branch(b) => {
            let b = Arc::make_mut(b);
            take(&mut b.kids[bit_of(key, b.bit)], key)
        }
    }
}

/// Replaces the branch above `key`'s leaf by the leaf's sibling. `s` is a branch.
fn unlink(s: &mut Slot, key: u128) {
    let Slot::Branch(b) = s else { return };
    let dir = bit_of(key, b.bit);
    if matches!(b.kids[dir], Slot::Leaf { .. }) {
        let sibling = b.kids[1 - dir].clone();
        *s = sibling;
        return;
    }
    let b = Arc::make_mut(b);
    unlink(&mut b.kids[dir], key);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn v4(a: [u8; 4]) -> u128 {
        (u32::from_be_bytes(a) as u128) << 96
    }

    #[test]
    fn the_issue_example_needs_eight_bits() {
        let mut s = PrefixSet::default();
        s.insert(v4([11, 1, 1, 1]));
        assert_eq!(s.longest_common_prefix(v4([10, 0, 0, 7])), Some(7));
        assert_eq!(s.longest_common_prefix(v4([10, 200, 3, 4])), Some(7));
        assert_eq!(s.longest_common_prefix(v4([11, 1, 1, 1])), Some(128));
        assert_eq!(s.longest_common_prefix(v4([11, 1, 1, 0])), Some(31));
        assert_eq!(PrefixSet::default().longest_common_prefix(0), None);
    }

    #[test]
    fn field_helpers() {
        let mut m = FlowKey::ZERO;
        m.set(Field::Ipv4Src, 0xffff_ff00);
        m.set(Field::Ipv4Dst, 0xff00_ff00);
        m.set(Field::Ipv6Src, u128::MAX);
        assert_eq!(prefix_len(&m, Field::Ipv4Src), Some(24));
        assert_eq!(prefix_len(&m, Field::Ipv4Dst), None, "not a CIDR mask");
        assert_eq!(prefix_len(&m, Field::Ipv6Src), Some(128));
        assert_eq!(prefix_len(&m, Field::Ipv6Dst), None, "wildcarded");
        let mut wc = FlowKey::ZERO;
        wc.set(Field::Ipv4Dst, 1);
        unwildcard_prefix(&mut wc, Field::Ipv4Dst, 8);
        unwildcard_prefix(&mut wc, Field::Ipv6Dst, 65);
        assert_eq!(wc.get(Field::Ipv4Dst), 0xff00_0001);
        assert_eq!(wc.get(Field::Ipv4Src), 0);
        assert_eq!(wc.get(Field::Ipv6Dst), prefix_mask(65));
        let mut k = FlowKey::ZERO;
        k.set(Field::Ipv4Src, 0x0b01_0101);
        assert_eq!(left_aligned(&k, Field::Ipv4Src), v4([11, 1, 1, 1]));
        let q: Vec<u32> = [1, 8, 9, 31, 32]
            .iter()
            .map(|&n| quantize(Field::Ipv4Dst, n))
            .collect();
        assert_eq!(q, [8, 8, 16, 32, 32]);
        assert_eq!(quantize(Field::Ipv6Src, 17), 32);
        assert_eq!(quantize(Field::Ipv6Src, 128), 128);
    }

    #[test]
    fn clones_do_not_see_later_changes() {
        let mut a = PrefixSet::default();
        for i in 0..100u128 {
            a.insert(i << 100);
        }
        let snapshot = a.clone();
        for i in 0..50u128 {
            assert!(a.remove(i << 100));
        }
        a.insert(7);
        assert_eq!(snapshot.distinct(), 100);
        assert_eq!(snapshot.longest_common_prefix(3 << 100), Some(128));
        assert_eq!(a.distinct(), 51);
        assert_ne!(a.longest_common_prefix(3 << 100), Some(128));
    }

    /// Keys from a small space (a few high bits and a few low bits) so they share prefixes.
    fn key() -> impl Strategy<Value = u128> {
        (0u128..8, 0u128..8, any::<bool>())
            .prop_map(|(hi, lo, mid)| (hi << 125) | (lo << 90) | if mid { 1 << 100 } else { 0 })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn matches_a_counted_map(
            ops in prop::collection::vec((any::<bool>(), key()), 0..80),
            probes in prop::collection::vec(key(), 1..20),
        ) {
            let mut s = PrefixSet::default();
            let mut reference: BTreeMap<u128, u32> = BTreeMap::new();
            let mut snapshots = Vec::new();
            for (i, (add, k)) in ops.into_iter().enumerate() {
                if add {
                    s.insert(k);
                    *reference.entry(k).or_insert(0) += 1;
                } else {
                    let had = reference.get(&k).copied().unwrap_or(0);
                    prop_assert_eq!(s.remove(k), had > 0);
                    if had == 1 {
                        reference.remove(&k);
                    } else if had > 1 {
                        reference.insert(k, had - 1);
                    }
                }
                if i % 7 == 0 {
                    snapshots.push((s.clone(), reference.clone()));
                }
                prop_assert_eq!(s.distinct(), reference.len());
            }
            snapshots.push((s, reference));
            for (s, reference) in &snapshots {
                let want: Vec<(u128, u32)> = reference.iter().map(|(&k, &c)| (k, c)).collect();
                prop_assert_eq!(&s.entries(), &want);
                for &p in &probes {
                    let lcp = reference.keys().map(|k| (k ^ p).leading_zeros()).max();
                    prop_assert_eq!(s.longest_common_prefix(p), lcp);
                }
            }
        }
    }
}

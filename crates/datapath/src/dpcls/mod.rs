//! The megaflow classifier (tuple-space search): the second cache tier.
//!
//! Size and owner: one per poll-mode thread, never shared; at most `max_megaflows` entries
//! (default 200k) over all subtables. A megaflow takes 8 bytes for its id plus 8 bytes per key
//! word its mask uses (only those are stored), side by side in one record, plus the slot
//! arrays (8 bytes per slot: the entry's hash beside its index; load at most 1/2). Memory stays at its high-water mark: removed
//! entries are reused in place by later inserts, and emptied subtables keep their storage for
//! the next new masks, so a churning classifier (a flood of new flows evicting old ones, or
//! refilling after every flow table change) does not reallocate.
//!
//! There is one subtable per distinct mask. A subtable is an open-addressing hash table of its
//! own (flat arrays, linear probing, backward-shift deletion, no tombstones) from the masked key
//! to a [`MegaflowId`]. Each subtable precomputes the list of key words its mask uses, so
//! hashing and comparing a packet's key touch only those words. A slot holds the entry's hash
//! beside its index, so a probe rejects other keys without touching their entries, and an
//! entry keeps its id beside its key words: a hit costs two cache lines (slot, entry), the
//! slot prefetched a pass ahead.
//!
//! A lookup tries the subtables in rank order and stops as soon as every packet of the batch
//! has found its megaflow. Megaflows never overlap in what they decide (each was built from a
//! mask covering every bit its translation consulted), so the first match is a right one and
//! order only matters for speed: subtables count their hits and [`Dpcls::rerank`] sorts them by
//! hits, most first, periodically (the owning thread calls it about every 100 ms).
//!
//! Within a subtable a batch is looked up in two passes (hash every key and prefetch its
//! home slot; then compare), so that the cache misses of the batch's packets overlap;
//! subtables small enough to stay in the L1 cache skip the prefetch. Masks of 1 to 8 key
//! words take a lookup specialised for their word count (`fixed.rs`): the mask's word
//! indices and values held in registers, loops unrolled.

use arrayvec::ArrayVec;
use packet::{FlowKey, BATCH_SIZE, KEY_WORDS};

use crate::bits::{bit_iter, prefetch};
use crate::megaflow::MegaflowId;

mod fixed;

/// Subtables with fewer slots than this are looked up without prefetching (at a load of at
/// most one half, their entries fit the L1 cache).
const PREFETCH_MIN_SLOTS: usize = 256;

/// Result of [`Dpcls::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// The megaflow is in.
    Installed,
    /// A megaflow with the same mask and masked key is already in (its id).
    Duplicate(MegaflowId),
    /// The classifier holds its maximum number of megaflows; nothing changed.
    Full,
}

struct Subtable {
    mask: FlowKey,
    words: ArrayVec<u8, KEY_WORDS>,
    /// `hash << 32 | (entry index + 1)`, 0 = empty. Length is a power of two.
    slots: Vec<u64>,
    /// One record per entry, `1 + words.len()` words: the [`MegaflowId`] (packed), then the
    /// masked key's words the mask uses, in `words` order (an ACL subtable's 10,000 entries
    /// take about 320 KB, not 1.3 MB).
    entries: Vec<u64>,
    /// Entries freed by removals, reused by inserts: entries never move, so a removal
    /// touches only the removed entry's slots, and a churning subtable does not reallocate.
    free: Vec<u32>,
    /// Entries in use.
    live: usize,
    hits: u64,
}

impl Subtable {
    fn new(mask: &FlowKey) -> Subtable {
        Subtable {
            mask: *mask,
            words: mask.nonzero_words(),
            slots: vec![0; 16],
            entries: Vec::new(),
            free: Vec::new(),
            live: 0,
            hits: 0,
        }
    }

    /// Makes an emptied subtable the one for `mask`, keeping its storage.
    fn reset(&mut self, mask: &FlowKey) {
        self.mask = *mask;
        self.words = mask.nonzero_words();
        self.slots.fill(0);
        self.entries.clear();
        self.free.clear();
        self.live = 0;
        self.hits = 0;
    }

    #[inline(always)]
    fn slot_mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline(always)]
    fn hash(&self, key: &FlowKey) -> u32 {
        key.masked_fold_hash(&self.mask, &self.words)
    }

    /// Words per entry record.
    #[inline(always)]
    fn stride(&self) -> usize {
        1 + self.words.len()
    }

    /// Entry `e`'s megaflow id.
    #[inline(always)]
    fn id(&self, e: usize) -> MegaflowId {
        MegaflowId::from_bits(self.entries[e * self.stride()])
    }

    /// Number of entry records (live or free).
    #[inline(always)]
    fn records(&self) -> usize {
        self.entries.len() / self.stride()
    }

    /// Compares `key & mask` with the stored masked key over the mask's words only.
    #[inline(always)]
    fn equal(&self, entry: usize, key: &FlowKey) -> bool {
        let n = self.words.len();
        let at = entry * (n + 1) + 1;
        let stored = &self.entries[at..at + n];
        let mut diff = 0u64;
        for (&w, &v) in self.words.iter().zip(stored) {
            let w = w as usize;
            diff |= (key.w[w] & self.mask.w[w]) ^ v;
        }
        diff == 0
    }

    /// Where entry `e`'s record starts (for prefetching).
    #[inline(always)]
    fn entry_ptr(&self, e: usize) -> *const u64 {
        self.entries.as_ptr().wrapping_add(e * self.stride())
    }

    /// The entry index and slot holding `key` (any key; masked here).
    #[inline(always)]
    fn find(&self, key: &FlowKey, hash: u32) -> Option<(usize, usize)> {
        let m = self.slot_mask();
        let mut i = hash as usize & m;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if (s >> 32) as u32 == hash {
                let e = (s as u32) as usize - 1;
                if self.equal(e, key) {
                    return Some((e, i));
                }
            }
            i = (i + 1) & m;
        }
    }

    /// Puts slot word `s` (`hash << 32 | entry + 1`) into the first free slot of its run.
    fn place(&mut self, s: u64) {
        let m = self.slot_mask();
        let mut i = (s >> 32) as usize & m;
        while self.slots[i] != 0 {
            i = (i + 1) & m;
        }
        self.slots[i] = s;
    }

    fn grow_if_needed(&mut self) {
        if (self.live + 1) * 2 <= self.slots.len() {
            return;
        }
        let n = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![0; n]);
        for s in old {
            if s != 0 {
                self.place(s);
            }
        }
    }

    fn insert(&mut self, masked: &FlowKey, id: MegaflowId) -> Result<(), MegaflowId> {
        let hash = self.hash(masked);
        if let Some((e, _)) = self.find(masked, hash) {
            return Err(self.id(e));
        }
        self.grow_if_needed();
        let masked = masked.masked(&self.mask);
        let stride = self.stride();
        let e = match self.free.pop() {
            Some(e) => {
                let e = e as usize;
                let rec = &mut self.entries[e * stride..(e + 1) * stride];
                rec[0] = id.to_bits();
                for (slot, &w) in rec[1..].iter_mut().zip(&self.words) {
                    *slot = masked.w[w as usize];
                }
                e
            }
            None => {
                let e = self.records();
                self.entries.push(id.to_bits());
                self.entries
                    .extend(self.words.iter().map(|&w| masked.w[w as usize]));
                e
            }
        };
        self.place(u64::from(hash) << 32 | (e as u64 + 1));
        self.live += 1;
        Ok(())
    }

    /// Clears slot `hole` and shifts later members of its probe run back (no tombstones).
    fn unslot(&mut self, mut hole: usize) {
        let m = self.slot_mask();
        let mut j = hole;
        loop {
            j = (j + 1) & m;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = (s >> 32) as usize & m;
            // Slot j may move into the hole when its home is not cyclically in (hole, j].
            if (j.wrapping_sub(home) & m) >= (j.wrapping_sub(hole) & m) {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = 0;
    }

    /// The batch lookup for any number of mask words (see [`Dpcls::lookup_batch`]; masks of
    /// 1 to 8 words take the specialised `fixed::lookup`).
    fn lookup_general(
        &mut self,
        keys: &[FlowKey],
        mut miss: u32,
        out: &mut [Option<MegaflowId>; BATCH_SIZE],
    ) -> u32 {
        // Two passes so that memory loads of different packets overlap: hash every key and
        // (for a table larger than L1) start loading its home slot; then compare (see
        // `fixed::lookup`, which does the same with the mask in registers).
        let m = self.slot_mask();
        let far = self.slots.len() >= PREFETCH_MIN_SLOTS;
        let mut hashes = [0u32; BATCH_SIZE];
        for i in bit_iter(miss) {
            let h = self.hash(&keys[i]);
            hashes[i] = h;
            if far {
                prefetch(self.slots.as_ptr().wrapping_add(h as usize & m).cast());
            }
        }
        let mut hits = 0u64;
        for i in bit_iter(miss) {
            if let Some((e, _)) = self.find(&keys[i], hashes[i]) {
                out[i] = Some(self.id(e));
                miss &= !(1 << i);
                hits += 1;
            }
        }
        self.hits += hits;
        miss
    }

    fn remove(&mut self, key: &FlowKey) -> Option<MegaflowId> {
        self.remove_hashed(key, self.hash(key))
    }

    /// Removes `key`, whose hash under this subtable's mask is `hash`.
    fn remove_hashed(&mut self, key: &FlowKey, hash: u32) -> Option<MegaflowId> {
        let (e, slot) = self.find(key, hash)?;
        self.unslot(slot);
        self.free.push(e as u32);
        self.live -= 1;
        Some(self.id(e))
    }
}

/// Where a megaflow sits in the classifier, from [`Dpcls::prefetch_remove`]: lets the later
/// steps of a removal skip finding the subtable and hashing the key again. A hint that no
/// longer fits (the subtables changed) is detected and ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoveHint {
    subtable: u32,
    hash: u32,
}

/// The megaflow classifier of one thread.
pub struct Dpcls {
    subtables: Vec<Subtable>,
    len: usize,
    max: usize,
    /// Emptied subtables (at most [`MAX_SPARE`]) whose storage the next new masks reuse, so
    /// that refilling after [`Dpcls::clear`] (every flow table change) neither reallocates
    /// nor faults pages in again.
    spare: Vec<Subtable>,
}

/// Most emptied subtables kept for reuse.
const MAX_SPARE: usize = 8;

impl std::fmt::Debug for Dpcls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dpcls")
            .field("megaflows", &self.len)
            .field("subtables", &self.subtables.len())
            .finish()
    }
}

impl Dpcls {
    /// An empty classifier that holds at most `max_megaflows` megaflows.
    pub fn new(max_megaflows: usize) -> Dpcls {
        Dpcls {
            subtables: Vec::new(),
            len: 0,
            max: max_megaflows,
            spare: Vec::new(),
        }
    }

    /// Megaflows held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no megaflow is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of subtables (distinct masks).
    pub fn subtables(&self) -> usize {
        self.subtables.len()
    }

    /// The masks in rank order (for tests and `dump` tools).
    pub fn masks(&self) -> impl Iterator<Item = &FlowKey> + '_ {
        self.subtables.iter().map(|s| &s.mask)
    }

    /// Looks up `keys[i]` for every bit `i` set in `miss`; writes hits to `out[i]` and returns
    /// the bits of the keys still unmatched. Adds the subtables probed, summed over the keys,
    /// to `probes`.
    #[inline]
    pub fn lookup_batch(
        &mut self,
        keys: &[FlowKey],
        miss: u32,
        out: &mut [Option<MegaflowId>; BATCH_SIZE],
        probes: &mut u64,
    ) -> u32 {
        self.lookup_batch_with(keys, miss, out, probes, false)
    }

    /// [`Dpcls::lookup_batch`], with every subtable looked up by the general loop when
    /// `general` (tests compare the two).
    #[inline(always)]
    fn lookup_batch_with(
        &mut self,
        keys: &[FlowKey],
        mut miss: u32,
        out: &mut [Option<MegaflowId>; BATCH_SIZE],
        probes: &mut u64,
        general: bool,
    ) -> u32 {
        let n = keys.len().min(BATCH_SIZE);
        if n < 32 {
            miss &= (1u32 << n) - 1;
        }
        for st in self.subtables.iter_mut() {
            if miss == 0 {
                break;
            }
            *probes += u64::from(miss.count_ones());
            miss = match if general { 0 } else { st.words.len() } {
                1 => fixed::lookup::<1>(st, keys, miss, out),
                2 => fixed::lookup::<2>(st, keys, miss, out),
                3 => fixed::lookup::<3>(st, keys, miss, out),
                4 => fixed::lookup::<4>(st, keys, miss, out),
                5 => fixed::lookup::<5>(st, keys, miss, out),
                6 => fixed::lookup::<6>(st, keys, miss, out),
                7 => fixed::lookup::<7>(st, keys, miss, out),
                8 => fixed::lookup::<8>(st, keys, miss, out),
                _ => st.lookup_general(keys, miss, out),
            };
        }
        miss
    }

    /// Looks up one key.
    pub fn lookup(&self, key: &FlowKey) -> Option<MegaflowId> {
        self.subtables.iter().find_map(|st| {
            let h = st.hash(key);
            st.find(key, h).map(|(e, _)| st.id(e))
        })
    }

    /// Installs megaflow `id` for packets equal to `key` under `mask`.
    pub fn insert(&mut self, key: &FlowKey, mask: &FlowKey, id: MegaflowId) -> Insert {
        if self.len >= self.max {
            return Insert::Full;
        }
        let st = match self.subtables.iter().position(|s| s.mask == *mask) {
            Some(i) => &mut self.subtables[i],
            None => {
                let st = match self.spare.pop() {
                    Some(mut st) => {
                        st.reset(mask);
                        st
                    }
                    None => Subtable::new(mask),
                };
                self.subtables.push(st);
                self.subtables.last_mut().expect("just pushed")
            }
        };
        match st.insert(key, id) {
            Ok(()) => {
                self.len += 1;
                Insert::Installed
            }
            Err(existing) => Insert::Duplicate(existing),
        }
    }

    /// Removes the megaflow for `key` under `mask`; returns its id.
    pub fn remove(&mut self, key: &FlowKey, mask: &FlowKey) -> Option<MegaflowId> {
        let i = self.subtables.iter().position(|s| s.mask == *mask)?;
        let id = self.subtables[i].remove(key)?;
        self.len -= 1;
        if self.subtables[i].live == 0 {
            let st = self.subtables.remove(i);
            self.retire(st);
        }
        Some(id)
    }

    /// [`Dpcls::remove`] with a hint from [`Dpcls::prefetch_remove`] for the same key and
    /// mask (checked: a hint that no longer fits falls back to the plain removal).
    pub fn remove_hinted(
        &mut self,
        hint: RemoveHint,
        key: &FlowKey,
        mask: &FlowKey,
    ) -> Option<MegaflowId> {
        let i = hint.subtable as usize;
        if self.subtables.get(i).is_none_or(|st| st.mask != *mask) {
            return self.remove(key, mask);
        }
        let id = self.subtables[i].remove_hashed(key, hint.hash)?;
        self.len -= 1;
        if self.subtables[i].live == 0 {
            let st = self.subtables.remove(i);
            self.retire(st);
        }
        Some(id)
    }

    /// Starts loading what a later removal of `key` under `mask` reads first (the key's
    /// home slot), so that work done in between hides the cache miss, and returns the hint
    /// for [`Dpcls::prefetch_remove_entry`] and [`Dpcls::remove_hinted`] (`None`: no such
    /// subtable). Reads nothing but the subtable list and the key.
    pub fn prefetch_remove(&self, key: &FlowKey, mask: &FlowKey) -> Option<RemoveHint> {
        let i = self.subtables.iter().position(|s| s.mask == *mask)?;
        let st = &self.subtables[i];
        let hash = st.hash(key);
        prefetch(
            st.slots
                .as_ptr()
                .wrapping_add(hash as usize & st.slot_mask())
                .cast(),
        );
        Some(RemoveHint {
            subtable: i as u32,
            hash,
        })
    }

    /// The second step after [`Dpcls::prefetch_remove`], once the home slot has arrived:
    /// starts loading the entry it names (the slots after it, which removal may shift back,
    /// carry their hashes and share its cache line or the next).
    pub fn prefetch_remove_entry(&self, hint: RemoveHint) {
        let Some(st) = self.subtables.get(hint.subtable as usize) else {
            return;
        };
        let m = st.slot_mask();
        let home = hint.hash as usize & m;
        // The entry is most likely in the home slot or one of the next few: start loading
        // the first whose hash is the key's.
        for k in 0..4 {
            let slot = st.slots[(home + k) & m];
            if slot == 0 {
                break;
            }
            if (slot >> 32) as u32 == hint.hash {
                prefetch(st.entry_ptr((slot as u32) as usize - 1).cast());
                break;
            }
        }
    }

    /// Sorts subtables by hits since the last rerank, most first, and restarts the count.
    pub fn rerank(&mut self) {
        self.subtables
            .sort_unstable_by_key(|s| std::cmp::Reverse(s.hits));
        for s in &mut self.subtables {
            s.hits = 0;
        }
    }

    /// Removes every megaflow and subtable.
    pub fn clear(&mut self) {
        while let Some(st) = self.subtables.pop() {
            self.retire(st);
        }
        self.len = 0;
    }

    /// Keeps an emptied subtable's storage for reuse (it is reset when reused).
    fn retire(&mut self, st: Subtable) {
        if self.spare.len() < MAX_SPARE {
            self.spare.push(st);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::Field;
    use proptest::prelude::*;

    fn id(i: u32) -> MegaflowId {
        MegaflowId::new(i, 1)
    }

    #[test]
    fn finds_by_mask_and_ranks_by_hits() {
        let mut cls = Dpcls::new(100);
        let mut m_port = FlowKey::ZERO;
        m_port.set_all(Field::InPort);
        let mut m_ip = FlowKey::ZERO;
        m_ip.set_all(Field::Ipv4Dst);
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 1);
        k.set(Field::Ipv4Dst, 0x0a000001);
        assert_eq!(cls.insert(&k, &m_port, id(1)), Insert::Installed);
        let mut k2 = FlowKey::ZERO;
        k2.set(Field::InPort, 2);
        k2.set(Field::Ipv4Dst, 0x0a000002);
        assert_eq!(cls.insert(&k2, &m_ip, id(2)), Insert::Installed);
        assert_eq!(cls.insert(&k, &m_port, id(3)), Insert::Duplicate(id(1)));
        assert_eq!(cls.subtables(), 2);

        let mut probe = k2;
        probe.set(Field::TpDst, 99);
        let keys = [probe, probe, FlowKey::ZERO];
        let mut out = [None; BATCH_SIZE];
        assert_eq!(cls.lookup_batch(&keys, 0b111, &mut out, &mut 0), 0b100);
        assert_eq!(out[0], Some(id(2)));
        cls.rerank();
        assert_eq!(
            *cls.masks().next().unwrap(),
            m_ip,
            "the busy subtable goes first"
        );
        assert_eq!(cls.remove(&k2, &m_ip), Some(id(2)));
        assert_eq!(cls.subtables(), 1);
        assert_eq!(cls.lookup(&probe), None);
    }

    #[test]
    fn storage_is_reused_after_clear_and_churn() {
        let mut cls = Dpcls::new(10_000);
        let mut m = FlowKey::ZERO;
        m.set_all(Field::TpSrc);
        let key = |p: u32| {
            let mut k = FlowKey::ZERO;
            k.set(Field::TpSrc, p as u128);
            k
        };
        for p in 0..1000 {
            assert_eq!(cls.insert(&key(p), &m, id(p)), Insert::Installed);
        }
        let (slots, keys) = (
            cls.subtables[0].slots.len(),
            cls.subtables[0].entries.capacity(),
        );
        // Churn at a steady size: removals free entries that inserts reuse.
        for p in 1000..5000 {
            assert_eq!(cls.remove(&key(p - 1000), &m), Some(id(p - 1000)));
            assert_eq!(cls.insert(&key(p), &m, id(p)), Insert::Installed);
        }
        assert_eq!(cls.subtables[0].slots.len(), slots);
        assert_eq!(cls.subtables[0].entries.capacity(), keys);
        assert_eq!(cls.lookup(&key(4999)), Some(id(4999)));
        assert_eq!(cls.lookup(&key(3999)), None);
        cls.clear();
        assert_eq!(cls.lookup(&key(4999)), None);
        let mut m2 = FlowKey::ZERO;
        m2.set_all(Field::TpDst);
        assert_eq!(cls.insert(&key(1), &m2, id(1)), Insert::Installed);
        assert_eq!(
            cls.subtables[0].slots.len(),
            slots,
            "storage kept across clear"
        );
        assert_eq!(cls.subtables[0].entries.capacity(), keys);
        assert_eq!(cls.len(), 1);
        assert_eq!(
            cls.lookup(&key(1)),
            Some(id(1)),
            "tp_dst 0 under the new mask"
        );
    }

    #[test]
    fn hinted_removal_matches_plain_removal_and_survives_stale_hints() {
        let mut cls = Dpcls::new(100);
        let mut m1 = FlowKey::ZERO;
        m1.set_all(Field::TpSrc);
        let mut m2 = FlowKey::ZERO;
        m2.set_all(Field::TpDst);
        let mut k = FlowKey::ZERO;
        k.set(Field::TpSrc, 5);
        let k2 = FlowKey::ZERO;
        assert_eq!(cls.insert(&k2, &m2, id(2)), Insert::Installed);
        assert_eq!(cls.insert(&k, &m1, id(1)), Insert::Installed);
        let hint = cls.prefetch_remove(&k, &m1).unwrap();
        cls.prefetch_remove_entry(hint);
        assert_eq!(cls.remove_hinted(hint, &k, &m1), Some(id(1)));
        assert_eq!(cls.lookup(&k), Some(id(2)), "only the m2 megaflow is left");
        assert_eq!(cls.prefetch_remove(&k, &m1), None, "its subtable is gone");
        // A hint taken before the subtables changed still removes the right megaflow.
        assert_eq!(cls.insert(&k, &m1, id(3)), Insert::Installed);
        let stale = cls.prefetch_remove(&k, &m1).unwrap();
        cls.rerank();
        assert_eq!(cls.remove(&k2, &m2), Some(id(2)));
        assert_eq!(cls.remove_hinted(stale, &k, &m1), Some(id(3)));
        assert!(cls.is_empty());
    }

    #[test]
    fn stops_at_the_bound() {
        let mut cls = Dpcls::new(2);
        let mut m = FlowKey::ZERO;
        m.set_all(Field::TpDst);
        for p in 0..2u32 {
            let mut k = FlowKey::ZERO;
            k.set(Field::TpDst, p as u128);
            assert_eq!(cls.insert(&k, &m, id(p)), Insert::Installed);
        }
        let mut k = FlowKey::ZERO;
        k.set(Field::TpDst, 9);
        assert_eq!(cls.insert(&k, &m, id(9)), Insert::Full);
        assert_eq!(cls.len(), 2);
    }

    /// Masks built from a few fields so that random keys collide under them often.
    fn mask_from(bits: u8) -> FlowKey {
        let fields = [
            Field::InPort,
            Field::EthType,
            Field::Ipv4Src,
            Field::Ipv4Dst,
            Field::TpDst,
            Field::IpProto,
        ];
        let mut m = FlowKey::ZERO;
        for (i, f) in fields.iter().enumerate() {
            if bits & (1 << i) != 0 {
                m.set_all(*f);
            }
        }
        m
    }

    fn key_from(v: [u8; 6]) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, (v[0] % 4) as u128);
        k.set(Field::EthType, 0x0800 + (v[1] % 2) as u128);
        k.set(Field::Ipv4Src, (v[2] % 4) as u128);
        k.set(Field::Ipv4Dst, (v[3] % 4) as u128);
        k.set(Field::TpDst, (v[4] % 4) as u128);
        k.set(Field::IpProto, (v[5] % 2) as u128);
        k
    }

    #[derive(Debug, Clone)]
    enum Step {
        Insert(u8, [u8; 6]),
        Remove(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (any::<u8>(), any::<[u8; 6]>()).prop_map(|(m, k)| Step::Insert(m, k)),
            1 => any::<usize>().prop_map(Step::Remove),
        ]
    }

    proptest! {
        /// The classifier agrees with a linear scan over the installed megaflows: a key is found
        /// exactly when some megaflow matches it, and what is found does match it.
        #[test]
        fn agrees_with_linear_scan(
            steps in proptest::collection::vec(step(), 1..200),
            probes in proptest::collection::vec(any::<[u8; 6]>(), 1..64),
        ) {
            let mut cls = Dpcls::new(150);
            let mut reference: Vec<(FlowKey, FlowKey, MegaflowId)> = Vec::new();
            let mut next = 0u32;
            for s in steps {
                match s {
                    Step::Insert(mb, kv) => {
                        let mask = mask_from(mb);
                        let key = key_from(kv).masked(&mask);
                        next += 1;
                        let r = cls.insert(&key, &mask, id(next));
                        let dup = reference.iter().find(|(k, m, _)| *m == mask && *k == key);
                        match (r, dup) {
                            (Insert::Installed, None) => reference.push((key, mask, id(next))),
                            (Insert::Duplicate(d), Some(&(_, _, want))) => prop_assert_eq!(d, want),
                            (Insert::Full, _) => prop_assert_eq!(reference.len(), 150),
                            (r, d) => prop_assert!(false, "insert {:?} vs reference {:?}", r, d),
                        }
                    }
                    Step::Remove(i) if !reference.is_empty() => {
                        let (k, m, want) = reference.swap_remove(i % reference.len());
                        prop_assert_eq!(cls.remove(&k, &m), Some(want));
                    }
                    Step::Remove(_) => {}
                }
                prop_assert_eq!(cls.len(), reference.len());
            }
            cls.rerank();
            let keys: Vec<FlowKey> = probes.iter().map(|p| key_from(*p)).collect();
            for chunk in keys.chunks(BATCH_SIZE) {
                let mut out = [None; BATCH_SIZE];
                let all = if chunk.len() == 32 { u32::MAX } else { (1u32 << chunk.len()) - 1 };
                let miss = cls.lookup_batch(chunk, all, &mut out, &mut 0);
                let mut general = [None; BATCH_SIZE];
                let general_miss = cls.lookup_batch_with(chunk, all, &mut general, &mut 0, true);
                prop_assert_eq!((miss, out), (general_miss, general), "specialised vs general loop");
                for (i, k) in chunk.iter().enumerate() {
                    let matching: Vec<MegaflowId> = reference
                        .iter()
                        .filter(|(v, m, _)| k.matches(v, m))
                        .map(|e| e.2)
                        .collect();
                    if matching.is_empty() {
                        prop_assert!(miss & (1 << i) != 0);
                        prop_assert_eq!(out[i], None);
                    } else {
                        prop_assert!(miss & (1 << i) == 0);
                        prop_assert!(matching.contains(&out[i].unwrap()));
                        prop_assert!(matching.contains(&cls.lookup(k).unwrap()));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use packet::Field;

    /// Nanoseconds per batched lookup hit with `n` megaflows under one 5-tuple mask. A
    /// measurement, not a check: `cargo test --release -p datapath dpcls::speed -- --ignored
    /// --nocapture`.
    fn ns_per_hit(n: u32) -> f64 {
        let mut mask = FlowKey::ZERO;
        for f in [
            Field::InPort,
            Field::Ipv4Src,
            Field::Ipv4Dst,
            Field::TpDst,
            Field::IpProto,
        ] {
            mask.set_all(f);
        }
        let key = |i: u32| {
            let mut k = FlowKey::ZERO;
            k.set(Field::InPort, 1);
            k.set(Field::Ipv4Src, 0x0a00_0000 | u128::from(i));
            k.set(Field::Ipv4Dst, 0x0b00_0001);
            k.set(Field::TpDst, 1024);
            k.set(Field::IpProto, 17);
            k
        };
        let mut cls = Dpcls::new(n as usize + 1);
        for i in 0..n {
            cls.insert(&key(i), &mask, MegaflowId::new(i, 1));
        }
        let keys: Vec<FlowKey> = (0..n)
            .map(|i| key(i.wrapping_mul(2_654_435_761) % n))
            .collect();
        let mut out = [None; BATCH_SIZE];
        let t = std::time::Instant::now();
        let mut hits = 0u64;
        for _ in 0..(20_000_000 / n).max(1) {
            for chunk in keys.chunks_exact(BATCH_SIZE) {
                let miss = cls.lookup_batch(chunk, u32::MAX, &mut out, &mut 0);
                hits += u64::from((!miss).count_ones());
            }
        }
        t.elapsed().as_nanos() as f64 / hits as f64
    }

    #[test]
    #[ignore = "measurement: run with --release -- --ignored --nocapture"]
    fn lookup_speed() {
        for n in [1_000, 10_000, 100_000, 1_000_000] {
            println!("{n:>9} megaflows: {:.1} ns per hit", ns_per_hit(n));
        }
    }
}

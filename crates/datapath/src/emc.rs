//! The exact-match cache (EMC): the first cache tier a packet meets.
//!
//! Size and owner: one per poll-mode thread, never shared; `entries` slots (default 8192, a
//! power of two), each holding a key hash, the full [`FlowKey`] and the [`MegaflowId`] it
//! resolved to. About 200 bytes per slot (1.6 MiB at the default size).
//!
//! A key can live in one of two slots (`hash` and a rotation of it), so two hot flows whose
//! hashes collide in the low bits do not evict each other. An entry names its megaflow with a
//! generation-tagged id: when the megaflow dies the id goes stale and the caller treats the
//! hit as a miss, so the cache never needs to be walked to remove entries.
//!
//! Insertion is probabilistic while the cache thrashes (as Open vSwitch's
//! `emc-insert-inv-prob`): the hit rate is measured over windows of lookups, and while it is
//! below one half only one insert in `insert_inv_prob` is done. A workload of a million flows
//! then does not pay a wasted 128-byte key copy per packet, while a few hot flows still make it
//! in after a few dozen packets. While it thrashes the cache is also probed in only one batch
//! in [`THRASH_PROBE_EVERY`] ([`Emc::probe_this_batch`]): the other batches skip it (and the
//! key hash) and go straight to the megaflow classifier; the sampled batches keep measuring the
//! hit rate, so the cache comes back when the traffic turns hot again.
//!
//! A batch lookup ([`Emc::lookup_masked`]) prefetches every probed slot's key before comparing
//! any, so the cache misses of one batch overlap.

use packet::{FlowKey, BATCH_SIZE};

use crate::bits::prefetch;
use crate::megaflow::MegaflowId;

/// Lookups per hit-rate measurement window.
const WINDOW: u32 = 4096;
/// While thrashing, one batch in this many probes the cache.
pub const THRASH_PROBE_EVERY: u32 = 8;

/// The exact-match cache of one thread.
pub struct Emc {
    hashes: Vec<u32>,
    ids: Vec<Option<MegaflowId>>,
    keys: Vec<FlowKey>,
    mask: u32,
    insert_inv_prob: u32,
    thrashing: bool,
    window_lookups: u32,
    window_hits: u32,
    rng: u32,
    /// Batches since the last probe while thrashing.
    skipped: u32,
}

impl std::fmt::Debug for Emc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emc")
            .field("entries", &self.keys.len())
            .field("thrashing", &self.thrashing)
            .finish()
    }
}

impl Emc {
    /// A cache of `entries` slots (rounded up to a power of two, at least 2). While the hit
    /// rate is low, one insert in `insert_inv_prob` is done (1 = always insert).
    pub fn new(entries: usize, insert_inv_prob: u32) -> Emc {
        let n = entries.max(2).next_power_of_two();
        Emc {
            hashes: vec![0; n],
            ids: vec![None; n],
            keys: vec![FlowKey::ZERO; n],
            mask: (n - 1) as u32,
            insert_inv_prob: insert_inv_prob.max(1),
            thrashing: false,
            window_lookups: 0,
            window_hits: 0,
            rng: 0x2545_f491,
            skipped: 0,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.keys.len()
    }

    /// Whether inserts are currently thinned out because the hit rate is low.
    pub fn thrashing(&self) -> bool {
        self.thrashing
    }

    #[inline(always)]
    fn slots(&self, hash: u32) -> [usize; 2] {
        [
            (hash & self.mask) as usize,
            (hash.rotate_right(16) & self.mask) as usize,
        ]
    }

    /// Looks up `keys[i]` (with `hashes[i] == keys[i].hash()`) for every `i`; writes the hits
    /// to `out[i]` and returns a mask with bit `i` set for every miss.
    #[inline]
    pub fn lookup_batch(
        &mut self,
        keys: &[FlowKey],
        hashes: &[u32],
        out: &mut [Option<MegaflowId>; BATCH_SIZE],
    ) -> u32 {
        self.lookup_masked(keys, hashes, u32::MAX, out)
    }

    /// [`Emc::lookup_batch`] for the keys whose bit is set in `probe` only (the others are
    /// neither looked up nor counted, and never reported as misses).
    #[inline]
    pub fn lookup_masked(
        &mut self,
        keys: &[FlowKey],
        hashes: &[u32],
        probe: u32,
        out: &mut [Option<MegaflowId>; BATCH_SIZE],
    ) -> u32 {
        let n = keys.len().min(hashes.len()).min(BATCH_SIZE);
        let probe = if n >= 32 {
            probe
        } else {
            probe & ((1u32 << n) - 1)
        };
        // Prefetch every probed key's first slot before comparing any (the hash arrays are
        // small; the key array is not).
        let mut bits = probe;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            prefetch(
                self.keys
                    .as_ptr()
                    .wrapping_add(self.slots(hashes[i])[0])
                    .cast(),
            );
        }
        let mut miss = 0u32;
        let mut bits = probe;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            out[i] = self.lookup_one(&keys[i], hashes[i]);
            if out[i].is_none() {
                miss |= 1 << i;
            }
        }
        let probed = probe.count_ones();
        self.window_lookups += probed;
        self.window_hits += probed - miss.count_ones();
        if self.window_lookups >= WINDOW {
            self.thrashing = self.window_hits * 2 < self.window_lookups;
            self.window_lookups = 0;
            self.window_hits = 0;
        }
        miss
    }

    #[inline(always)]
    fn lookup_one(&self, key: &FlowKey, hash: u32) -> Option<MegaflowId> {
        for s in self.slots(hash) {
            if self.hashes[s] == hash {
                if let Some(id) = self.ids[s] {
                    if self.keys[s] == *key {
                        return Some(id);
                    }
                }
            }
        }
        None
    }

    /// Offers `key → id` to the cache; it is stored unless the cache is thrashing and the
    /// dice say no. Returns whether it was stored.
    #[inline]
    pub fn insert(&mut self, key: &FlowKey, hash: u32, id: MegaflowId) -> bool {
        self.insert_with(key, id, || hash)
    }

    /// [`Emc::insert`] with the hash computed only when the insert is admitted (while the
    /// cache thrashes most inserts are not, and their keys need no hash).
    #[inline(always)]
    pub fn insert_with(
        &mut self,
        key: &FlowKey,
        id: MegaflowId,
        hash: impl FnOnce() -> u32,
    ) -> bool {
        if self.thrashing && self.insert_inv_prob > 1 && !self.roll_dice() {
            return false;
        }
        self.store(key, hash(), id);
        true
    }

    /// Whether to look anything up in this batch. Always while the cache is useful; while it
    /// thrashes, one batch in [`THRASH_PROBE_EVERY`] (which keeps measuring the hit rate, so
    /// the cache comes back when the traffic changes) and the others skip it: a probe that
    /// almost always misses costs a hash per packet and a load per probe for nothing.
    #[inline(always)]
    pub fn probe_this_batch(&mut self) -> bool {
        if !self.thrashing {
            return true;
        }
        self.skipped += 1;
        if self.skipped >= THRASH_PROBE_EVERY {
            self.skipped = 0;
            return true;
        }
        false
    }

    /// One in `insert_inv_prob` chance of `true` (xorshift32: cheap, per thread).
    #[inline(always)]
    fn roll_dice(&mut self) -> bool {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x <= u32::MAX / self.insert_inv_prob
    }

    #[inline(never)]
    fn store(&mut self, key: &FlowKey, hash: u32, id: MegaflowId) {
        let [a, b] = self.slots(hash);
        // Same key already cached: refresh in place. Otherwise an empty slot, otherwise
        // alternate victims by a hash bit.
        let slot = if self.hashes[a] == hash && self.ids[a].is_some() && self.keys[a] == *key {
            a
        } else if self.hashes[b] == hash && self.ids[b].is_some() && self.keys[b] == *key {
            b
        } else if self.ids[a].is_none() {
            a
        } else if self.ids[b].is_none() {
            b
        } else if hash & (1 << 31) == 0 {
            a
        } else {
            b
        };
        self.hashes[slot] = hash;
        self.keys[slot] = *key;
        self.ids[slot] = Some(id);
    }

    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.ids.iter_mut().for_each(|e| *e = None);
        self.hashes.iter_mut().for_each(|h| *h = 0);
        self.thrashing = false;
        self.window_lookups = 0;
        self.window_hits = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::Field;

    fn key(i: u32) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 1);
        k.set(Field::Ipv4Src, i as u128);
        k
    }

    fn id(i: u32) -> MegaflowId {
        MegaflowId::new(i, 1)
    }

    #[test]
    fn hit_after_insert_miss_before() {
        let mut emc = Emc::new(64, 1);
        let keys = [key(1), key(2), key(3)];
        let hashes = keys.map(|k| k.hash());
        let mut out = [None; BATCH_SIZE];
        assert_eq!(emc.lookup_batch(&keys, &hashes, &mut out), 0b111);
        assert!(emc.insert(&keys[1], hashes[1], id(7)));
        assert_eq!(emc.lookup_batch(&keys, &hashes, &mut out), 0b101);
        assert_eq!(out[1], Some(id(7)));
        emc.clear();
        assert_eq!(emc.lookup_batch(&keys, &hashes, &mut out), 0b111);
    }

    #[test]
    fn masked_lookup_probes_only_the_asked_keys() {
        let mut emc = Emc::new(64, 1);
        let keys = [key(1), key(2), key(3)];
        let hashes = keys.map(|k| k.hash());
        emc.insert(&keys[0], hashes[0], id(4));
        let mut out = [None; BATCH_SIZE];
        // Key 1 is cached, key 2 is not; key 3 is not asked for.
        assert_eq!(emc.lookup_masked(&keys, &hashes, 0b011, &mut out), 0b010);
        assert_eq!(out[0], Some(id(4)));
        assert_eq!(out[2], None);
        assert_eq!(emc.lookup_masked(&keys, &hashes, 0, &mut out), 0);
    }

    #[test]
    fn colliding_hashes_use_the_second_slot() {
        let mut emc = Emc::new(16, 1);
        // Two different keys given the same hash must both be found.
        let (a, b) = (key(1), key(2));
        emc.insert(&a, 5, id(1));
        emc.insert(&b, 5, id(2));
        let mut out = [None; BATCH_SIZE];
        assert_eq!(emc.lookup_batch(&[a, b], &[5, 5], &mut out), 0);
        assert_eq!(out[0], Some(id(1)));
        assert_eq!(out[1], Some(id(2)));
    }

    #[test]
    fn thrashing_thins_out_inserts() {
        let mut emc = Emc::new(1024, 100);
        let mut out = [None; BATCH_SIZE];
        let mut stored = 0;
        for round in 0..1000u32 {
            let keys: Vec<FlowKey> = (0..32).map(|i| key(round * 32 + i)).collect();
            let hashes: Vec<u32> = keys.iter().map(|k| k.hash()).collect();
            let miss = emc.lookup_batch(&keys, &hashes, &mut out);
            for i in 0..32 {
                if miss & (1 << i) != 0 && emc.insert(&keys[i], hashes[i], id(i as u32)) {
                    stored += 1;
                }
            }
        }
        assert!(emc.thrashing());
        // 32k misses: the first window inserts everything (4096), then about 1%.
        assert!(stored < 4096 + 1000, "stored {stored}");
        // A thrashing cache is probed one batch in THRASH_PROBE_EVERY.
        let probes = (0..8 * THRASH_PROBE_EVERY)
            .filter(|_| emc.probe_this_batch())
            .count();
        assert_eq!(probes, 8);
    }

    #[test]
    fn a_thrashing_cache_recovers_when_traffic_turns_hot() {
        let mut emc = Emc::new(1024, 100);
        let mut out = [None; BATCH_SIZE];
        for round in 0..200u32 {
            let keys: Vec<FlowKey> = (0..32).map(|i| key(round * 32 + i)).collect();
            let hashes: Vec<u32> = keys.iter().map(|k| k.hash()).collect();
            emc.lookup_batch(&keys, &hashes, &mut out);
        }
        assert!(emc.thrashing());
        // Now one hot flow, offered to the cache after every miss (as the thread does).
        let hot = [key(7); 32];
        let hashes = hot.map(|k| k.hash());
        for _ in 0..10_000 {
            if !emc.probe_this_batch() {
                emc.insert_with(&hot[0], id(7), || hashes[0]);
                continue;
            }
            let miss = emc.lookup_batch(&hot, &hashes, &mut out);
            if miss != 0 {
                emc.insert(&hot[0], hashes[0], id(7));
            }
        }
        assert!(!emc.thrashing());
    }
}

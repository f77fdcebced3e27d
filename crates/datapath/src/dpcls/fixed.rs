//! A subtable's batch lookup specialised for a mask of `N` key words.
//!
//! The general lookup reads, for every word of every key, the word's index from the
//! subtable's word list and the mask word from the mask, and loops a data-dependent number
//! of times. Here the word indices and mask words are loaded once per batch into fixed-size
//! arrays (registers), the hash and compare loops are unrolled, and an entry record has a
//! stride known at compile time. Same passes, same results: a key hashes to the same value
//! as [`packet::FlowKey::masked_fold_hash`] (through [`packet::key::fold_hash`]) and is found
//! exactly when the general lookup finds it (the classifier's proptest runs both: its masks
//! use 0 to 5 words).

use packet::key::fold_hash;
use packet::{FlowKey, BATCH_SIZE, KEY_WORDS};

use super::{Subtable, PREFETCH_MIN_SLOTS};
use crate::bits::{bit_iter, prefetch};
use crate::megaflow::MegaflowId;

/// A subtable's mask in registers: the key words it uses and their mask values.
struct Fixed<const N: usize> {
    idx: [usize; N],
    mask: [u64; N],
}

impl<const N: usize> Fixed<N> {
    #[inline(always)]
    fn of(st: &Subtable) -> Self {
        debug_assert_eq!(st.words.len(), N);
        let idx: [usize; N] = std::array::from_fn(|j| st.words[j] as usize);
        // Checked once per batch, so that `values` reads without a bounds check per key.
        assert!(idx.iter().all(|&i| i < KEY_WORDS));
        let mask = std::array::from_fn(|j| st.mask.w[idx[j]]);
        Fixed { idx, mask }
    }

    /// `key & mask` over the mask's words, in word-list order (what an entry stores).
    #[inline(always)]
    fn values(&self, key: &FlowKey) -> [u64; N] {
        // SAFETY: `of` checked every index against KEY_WORDS, the length of `key.w`.
        std::array::from_fn(|j| unsafe { *key.w.get_unchecked(self.idx[j]) } & self.mask[j])
    }
}

/// Looks up `keys[i]` in `st` for every bit `i` of `miss`; writes hits to `out[i]`, adds
/// them to the subtable's hit count and returns the bits still unmatched. `st` must use
/// exactly `N` key words.
#[inline(always)]
pub(super) fn lookup<const N: usize>(
    st: &mut Subtable,
    keys: &[FlowKey],
    mut miss: u32,
    out: &mut [Option<MegaflowId>; BATCH_SIZE],
) -> u32 {
    let f = Fixed::<N>::of(st);
    let slots = &st.slots[..];
    let entries = &st.entries[..];
    let m = slots.len() - 1;
    let stride = N + 1;
    let mut hashes = [0u32; BATCH_SIZE];
    // Pass 1: hash every key and (for a table larger than L1) start loading its home slot.
    // Pass 2: compare. A middle pass that read the slots to prefetch the entries (both
    // loops had one) measured slower at 1k and 100k megaflows and no faster at 10k and 1M
    // (`dpcls::speed`), and cost acl-64 ~12 cycles per packet: the out-of-order core
    // already overlaps those loads across the keys of pass 2.
    let far = slots.len() >= PREFETCH_MIN_SLOTS;
    for i in bit_iter(miss) {
        let h = fold_hash(&f.values(&keys[i]));
        hashes[i] = h;
        if far {
            prefetch(slots.as_ptr().wrapping_add(h as usize & m).cast());
        }
    }
    let mut hits = 0u64;
    for i in bit_iter(miss) {
        let v = f.values(&keys[i]);
        let h = hashes[i];
        let mut s = h as usize & m;
        loop {
            let slot = slots[s];
            if slot == 0 {
                break;
            }
            if (slot >> 32) as u32 == h {
                let at = ((slot as u32) as usize - 1) * stride;
                let rec = &entries[at..at + stride];
                let mut diff = 0u64;
                for j in 0..N {
                    diff |= rec[1 + j] ^ v[j];
                }
                if diff == 0 {
                    out[i] = Some(MegaflowId::from_bits(rec[0]));
                    miss &= !(1 << i);
                    hits += 1;
                    break;
                }
            }
            s = (s + 1) & m;
        }
    }
    st.hits += hits;
    miss
}

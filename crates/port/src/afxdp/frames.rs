//! [`FrameSet`]: which pool frames one side of a socket has handed to the kernel.
//!
//! The receive side marks each frame it puts on the fill ring and unmarks it when the frame
//! comes back on the rx ring; the transmit side does the same for the tx and completion rings.
//! That makes two things possible: a descriptor naming a frame the kernel was never given is
//! refused instead of becoming a second owner of that frame, and when a socket closes, the
//! frames the kernel still held can be given back to the pool (see `xsk::Xsk`'s `Drop`).
//!
//! One bit per pool frame; owned by one thread (no atomics). Per packet: one bit set and one
//! bit test-and-clear.

/// A set of frame indices below a fixed bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrameSet {
    words: Vec<u64>,
}

impl FrameSet {
    /// An empty set for frames `0..frames`.
    pub(crate) fn new(frames: u32) -> FrameSet {
        FrameSet {
            words: vec![0; (frames as usize).div_ceil(64)],
        }
    }

    /// Adds `frame` (which must be below the bound).
    #[inline(always)]
    pub(crate) fn insert(&mut self, frame: u32) {
        self.words[frame as usize / 64] |= 1 << (frame % 64);
    }

    /// Removes `frame`; returns whether it was in the set (false also when out of bounds).
    #[inline(always)]
    pub(crate) fn remove(&mut self, frame: u32) -> bool {
        let Some(w) = self.words.get_mut(frame as usize / 64) else {
            return false;
        };
        let bit = 1 << (frame % 64);
        let had = *w & bit != 0;
        *w &= !bit;
        had
    }

    /// Every frame in the set, ascending; the set is left empty.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter_mut().enumerate().flat_map(|(i, w)| {
            let mut bits = std::mem::take(w);
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some(i as u32 * 64 + b)
            })
        })
    }

    /// Number of frames in the set.
    pub(crate) fn len(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_remove_drain() {
        let mut s = FrameSet::new(130);
        for f in [0, 63, 64, 129] {
            s.insert(f);
        }
        assert_eq!(s.len(), 4);
        assert!(s.remove(63));
        assert!(!s.remove(63), "removed twice");
        assert!(!s.remove(10_000), "out of bounds is not a member");
        assert_eq!(s.drain().collect::<Vec<_>>(), vec![0, 64, 129]);
        assert_eq!(s.len(), 0);
    }

    proptest! {
        #[test]
        fn behaves_like_a_btreeset(ops in proptest::collection::vec((any::<bool>(), 0u32..300), 0..200)) {
            let mut s = FrameSet::new(300);
            let mut model = std::collections::BTreeSet::new();
            for (add, f) in ops {
                if add {
                    s.insert(f);
                    model.insert(f);
                } else {
                    prop_assert_eq!(s.remove(f), model.remove(&f));
                }
            }
            prop_assert_eq!(s.len() as usize, model.len());
            prop_assert_eq!(s.drain().collect::<Vec<_>>(), model.into_iter().collect::<Vec<_>>());
        }
    }
}

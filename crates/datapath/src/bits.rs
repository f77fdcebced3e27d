//! Small helpers every stage of the fast path uses: walking a 32-bit packet mask and
//! prefetching a cache line.

/// The indices of the set bits of `bits`, lowest first.
#[inline(always)]
pub(crate) fn bit_iter(mut bits: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        Some(i)
    })
}

/// Asks the CPU to bring the cache line at `p` into L1 (a hint: never faults).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_iter_lists_set_bits_in_order() {
        assert_eq!(bit_iter(0).count(), 0);
        assert_eq!(bit_iter(0b1010_0001).collect::<Vec<_>>(), vec![0, 5, 7]);
        assert_eq!(bit_iter(u32::MAX).count(), 32);
    }
}

//! A per-thread nanosecond clock read from the cycle counter.
//!
//! Size and owner: one [`TscClock`] per poll-mode thread (a few words). Reading the operating
//! system's clock costs a `clock_gettime` (tens of cycles through the vDSO) — too much once per
//! batch. This clock reads the cycle counter instead and converts with a rate it measures
//! itself: every [`RESYNC_CYCLES`] cycles (about 0.4 ms at 2.6 GHz) it reads the system clock
//! ([`crate::now_ns`]) again, re-anchors, and updates the rate from the span since the
//! previous anchor. Until a first rate is known every read goes to the system clock.
//!
//! Readings never go backwards (a re-anchor that would step back is clamped), and they are on
//! the same time base as [`crate::now_ns`], so meters shared between threads see consistent
//! times within the extrapolation error (well below a microsecond).

use crate::stats::cycles;

/// Cycles between two reads of the system clock.
pub const RESYNC_CYCLES: u64 = 1 << 20;

/// Fixed-point shift of the nanoseconds-per-cycle rate.
const RATE_SHIFT: u32 = 32;
/// Largest accepted rate (16 ns per cycle: a 62.5 MHz counter).
const MAX_RATE: u64 = 16 << RATE_SHIFT;

/// A monotonic nanosecond clock extrapolated from the cycle counter.
#[derive(Debug, Clone, Default)]
pub struct TscClock {
    anchor_ns: u64,
    anchor_tsc: u64,
    /// Nanoseconds per cycle, fixed point with [`RATE_SHIFT`] fraction bits; 0 = unknown.
    rate: u64,
    last: u64,
}

impl TscClock {
    /// A clock that anchors at its first read.
    pub fn new() -> TscClock {
        TscClock::default()
    }

    /// Nanoseconds on the [`crate::now_ns`] time base.
    #[inline]
    pub fn now_ns(&mut self) -> u64 {
        self.at(cycles())
    }

    /// Nanoseconds at cycle count `tsc`, a [`cycles`] reading the caller just took (saves
    /// reading the counter twice).
    #[inline]
    pub fn at(&mut self, tsc: u64) -> u64 {
        let d = tsc.wrapping_sub(self.anchor_tsc);
        if self.rate == 0 || d >= RESYNC_CYCLES {
            return self.resync(tsc);
        }
        let t = self.anchor_ns + ((d * self.rate) >> RATE_SHIFT);
        if t > self.last {
            self.last = t;
        }
        self.last
    }

    #[cold]
    fn resync(&mut self, tsc: u64) -> u64 {
        let ns = crate::now_ns();
        let dt = tsc.wrapping_sub(self.anchor_tsc);
        if self.anchor_tsc != 0 && dt > 0 && dt < (1 << 40) && ns > self.anchor_ns {
            let rate = (((ns - self.anchor_ns) as u128) << RATE_SHIFT) / dt as u128;
            self.rate = (rate as u64).clamp(1, MAX_RATE);
        }
        self.anchor_ns = ns;
        self.anchor_tsc = tsc;
        if ns > self.last {
            self.last = ns;
        }
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_system_clock_and_never_goes_back() {
        let mut c = TscClock::new();
        let start = crate::now_ns();
        let mut prev = c.now_ns();
        assert!(prev >= start);
        let mut reads = 0u64;
        // Long enough for several re-anchors.
        while crate::now_ns() - start < 5_000_000 {
            let t = c.now_ns();
            assert!(t >= prev, "went back from {prev} to {t}");
            prev = t;
            reads += 1;
        }
        let sys = crate::now_ns();
        let t = c.now_ns();
        // Within 100 µs of the system clock (the extrapolation error is far smaller; the
        // margin is for a preempted test thread).
        assert!(t.abs_diff(sys) < 100_000, "clock {t} vs system {sys}");
        assert!(reads > 0);
    }
}

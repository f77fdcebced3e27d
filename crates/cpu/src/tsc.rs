//! The CPU's time-stamp counter: the poll threads' busy and idle cycles, the generator's
//! clock, the benchmarks' cycles per packet.
//!
//! The generator's probe packets carry the counter value at send time; the analyzer subtracts
//! it from the counter at receive time. Sender and receiver read the same counter when they
//! run in one process (or on one host with an invariant, synchronised TSC, which every x86-64
//! CPU of the last decade has), so the difference is a one-way latency. [`Tsc`] converts
//! cycles to nanoseconds with a rate measured once against the system clock.
//!
//! On targets without a cycle counter the system's monotonic clock in nanoseconds stands in
//! (one `clock_gettime` through the vDSO per batch; still no system call per packet).

use std::time::{Duration, Instant};

/// Reads the time-stamp counter (nanoseconds of a monotonic clock where there is none).
#[inline(always)]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no preconditions.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// A calibrated counter: cycles ↔ nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tsc {
    /// Counter rate in Hz.
    pub hz: f64,
}

impl Tsc {
    /// Measures the counter's rate over `span` (20 ms is enough for 0.1 %).
    pub fn calibrate(span: Duration) -> Tsc {
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = span;
            Tsc { hz: 1e9 }
        }
        #[cfg(target_arch = "x86_64")]
        {
            let t0 = Instant::now();
            let c0 = cycles();
            while t0.elapsed() < span {
                std::hint::spin_loop();
            }
            let c1 = cycles();
            let secs = t0.elapsed().as_secs_f64();
            let hz = c1.wrapping_sub(c0) as f64 / secs;
            Tsc {
                hz: if hz.is_finite() && hz > 1e6 { hz } else { 1e9 },
            }
        }
    }

    /// Cycles in `secs` seconds.
    pub fn cycles_in(&self, secs: f64) -> u64 {
        (secs * self.hz).max(0.0) as u64
    }

    /// Seconds in `cycles` cycles.
    pub fn secs(&self, cycles: u64) -> f64 {
        cycles as f64 / self.hz
    }

    /// Nanoseconds per cycle as a 32.32 fixed-point factor (see [`Tsc::ns_fixed`]).
    pub fn ns_factor(&self) -> u64 {
        ((1e9 / self.hz) * (1u64 << 32) as f64) as u64
    }

    /// Nanoseconds in `cycles` cycles, with a factor from [`Tsc::ns_factor`] (no float on the
    /// per-packet path). Exact for spans below about 4 s at 4 GHz; longer spans saturate.
    #[inline(always)]
    pub fn ns_fixed(cycles: u64, factor: u64) -> u64 {
        ((u128::from(cycles) * u128::from(factor)) >> 32).min(u128::from(u64::MAX)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_rate_converts_both_ways() {
        let tsc = Tsc::calibrate(Duration::from_millis(20));
        assert!(tsc.hz > 1e8 && tsc.hz < 1e10, "rate {}", tsc.hz);
        let c = tsc.cycles_in(0.001);
        assert!((tsc.secs(c) - 0.001).abs() < 1e-6);
        let ns = Tsc::ns_fixed(c, tsc.ns_factor());
        assert!(ns.abs_diff(1_000_000) < 1_000, "{ns}");
    }

    #[test]
    fn counter_moves_forward() {
        let a = cycles();
        std::thread::sleep(Duration::from_millis(1));
        assert!(cycles() > a);
    }
}

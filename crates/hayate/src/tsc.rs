//! The CPU's cycle counter, for cycles-per-packet figures.

use std::time::{Duration, Instant};

/// Reads the time-stamp counter (0 on targets without one).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no preconditions.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Measures the counter's rate in Hz over `span` (0.0 when there is no counter).
pub fn tsc_hz(span: Duration) -> f64 {
    let t0 = Instant::now();
    let c0 = rdtsc();
    while t0.elapsed() < span {
        std::hint::spin_loop();
    }
    let c1 = rdtsc();
    let secs = t0.elapsed().as_secs_f64();
    (c1.wrapping_sub(c0)) as f64 / secs
}

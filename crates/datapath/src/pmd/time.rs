//! The poll threads' two time bases: [`now_ns`], the monotonic clock every thread uses for
//! meters and budgets (read per batch through the thread's [`crate::clock::TscClock`]), and
//! the pipeline's millisecond clock for flow entries' `last used` and timeouts, derived from
//! it without a clock read ([`pipeline_ms`]).

/// Nanoseconds on the monotonic clock every thread uses for meters and budgets.
pub fn now_ns() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// [`pipeline::dpaction::now_ms`] at `t_ns` on the [`now_ns`] time base, without reading a
/// clock: the two clocks differ by a constant offset, measured once (to within 1 ms).
pub(crate) fn pipeline_ms(t_ns: u64) -> u64 {
    use std::sync::OnceLock;
    static OFFSET_MS: OnceLock<i64> = OnceLock::new();
    let offset = *OFFSET_MS
        .get_or_init(|| pipeline::dpaction::now_ms() as i64 - (now_ns() / 1_000_000) as i64);
    ((t_ns / 1_000_000) as i64 + offset).max(1) as u64
}

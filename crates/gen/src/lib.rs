//! Hayate's traffic generator and analyzer: it drives any port backend (whatever
//! [`port::open`] opens from a spec), so every claim about the switch's speed is a command
//! anyone can run.
//!
//! | module | job | per packet? |
//! |---|---|---|
//! | [`template`] | traffic description → frame templates; in-place rewrite with incremental checksums | yes (`Frame::write`) |
//! | [`probe`] | the 18-byte probe at the end of every frame: stream, flow, sequence, send time | yes |
//! | [`tsc`] | the time-stamp counter as clock | yes |
//! | [`rate`] | pacing: credits from the counter, busy-wait or sleep | per batch |
//! | [`source`] | fills batches from the templates (flows, sizes, probes) | yes |
//! | [`analyzer`] | counts, loss, reordering, duplicates, per-flow counters, latency, jitter | yes |
//! | [`engine`] | threads that send and receive for a bounded time, progress samples | per batch |
//! | [`reflect`] | sends received frames back (round-trip latency) | yes |
//! | [`rfc2544`] | throughput search, latency, frame-loss curve, back-to-back | no |
//! | [`report`] | result types (JSON), terminal tables | no |
//! | [`plot`] | SVG plots | no |

#![deny(missing_docs)]

pub mod analyzer;
pub mod engine;
pub mod plot;
pub mod probe;
pub mod rate;
pub mod reflect;
pub mod report;
pub mod rfc2544;
pub mod source;
pub mod template;

/// Timing-sensitive tests run one at a time (the machine has few cores).
#[cfg(test)]
mod test_serial {
    use std::sync::{Mutex, MutexGuard};

    static SERIAL: Mutex<()> = Mutex::new(());

    /// Holds the lock for the caller's test.
    pub(crate) fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }
}

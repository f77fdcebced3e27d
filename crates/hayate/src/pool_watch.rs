//! Tells the operator when the packet pool runs dry: every port queue keeps frames ready for
//! what it will receive (an AF_PACKET queue one per message of its batch, every queue a cache
//! of a few dozen), so a host with more ports than `--pool-frames` was sized for has queues
//! that find no frame — their packets wait, then drop, in the kernel, and nothing in the
//! datapath sees them. The pool counts each time a queue found it empty
//! ([`packet::Pool::exhaustions`]); this watch, a thread of `hayate run` that looks once a
//! second, turns a rise of that count into a warning that names the fix, at most once per
//! [`QUIET`]. The same for the pool's super-packet sibling.
//!
//! Size and owner: one thread per process (on the housekeeping cores, where it is started);
//! an atomic load per pool per second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use packet::Pool;

/// Least time between two warnings about one pool.
pub const QUIET: Duration = Duration::from_secs(10);

/// Starts the watch of `pool` on a thread of its own, until `stop` is set.
pub fn spawn(pool: Pool, stop: &'static AtomicBool) {
    let mut w = PoolWatch::new(pool);
    let started = std::thread::Builder::new()
        .name("pool-watch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1));
                w.check(Instant::now());
            }
        });
    if let Err(e) = started {
        tracing::warn!("no pool watch (cannot start its thread: {e}): a dry pool goes unreported");
    }
}

/// Watches one pool (and its super-packet sibling, once mapped).
pub struct PoolWatch {
    pool: Pool,
    seen: [u64; 2],
    warned: [Option<Instant>; 2],
}

impl PoolWatch {
    /// Watches `pool` from now on.
    pub fn new(pool: Pool) -> PoolWatch {
        let seen = [pool.exhaustions(), 0];
        PoolWatch {
            pool,
            seen,
            warned: [None; 2],
        }
    }

    /// Warns (once per [`QUIET`]) about each pool whose exhaustion count rose since the last
    /// warning; returns the warnings given (for tests).
    pub fn check(&mut self, now: Instant) -> Vec<String> {
        let mut out = Vec::new();
        let sibling = self.pool.gso_mapped();
        let pools = [Some(&self.pool), sibling.as_ref()];
        for (i, p) in pools.into_iter().enumerate() {
            let Some(p) = p else { continue };
            let n = p.exhaustions();
            if n == self.seen[i] || self.warned[i].is_some_and(|t| now < t + QUIET) {
                continue;
            }
            let text = message(i == 1, n - self.seen[i], p.frames());
            tracing::warn!("{text}");
            out.push(text);
            self.seen[i] = n;
            self.warned[i] = Some(now);
        }
        out
    }
}

/// The warning for `times` more exhaustions of a pool of `frames` frames.
fn message(sibling: bool, times: u64, frames: u32) -> String {
    if sibling {
        format!(
            "the super-packet pool ({frames} frames of 64 KiB) ran out {times} time(s): TCP \
             super-packets are cut on receive or, on AF_PACKET ports, cut short and counted as \
             receive errors; fewer ports with virtio-net headers per process would help"
        )
    } else {
        format!(
            "the packet pool ran out of frames {times} time(s): port queues found no frame to \
             receive into, so their packets wait and then drop in the kernel. Each queue keeps \
             up to 128 frames cached and an AF_PACKET receive queue 32 more for its batch, so \
             a port holds a few hundred: raise --pool-frames (now {frames})"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dry_pool_is_reported_once_per_quiet_period_with_the_fix() {
        let pool = Pool::with_frames(4);
        let mut w = PoolWatch::new(pool.clone());
        let t0 = Instant::now();
        assert!(w.check(t0).is_empty(), "nothing to say yet");
        let mut c = pool.cache();
        let held: Vec<_> = (0..4).filter_map(|_| c.alloc()).collect();
        assert!(c.alloc().is_none());
        let said = w.check(t0);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("--pool-frames (now 4)"), "{}", said[0]);
        assert!(c.alloc().is_none());
        assert!(w.check(t0 + QUIET / 2).is_empty(), "quiet period");
        let later = w.check(t0 + QUIET);
        assert_eq!(later.len(), 1);
        assert!(later[0].contains("1 time(s)"), "{}", later[0]);
        assert!(
            w.check(t0 + QUIET * 3).is_empty(),
            "no new exhaustion, no warning"
        );
        for p in held {
            c.free(p);
        }
    }
}

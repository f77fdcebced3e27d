//! Idle back-off: a poll-mode thread busy-polls while traffic flows and sleeps when it stops.
//!
//! Size and owner: one [`Idle`] per poll-mode thread (a `pollfd` per rx queue, a few words).
//!
//! Open vSwitch users' most common complaint is a poll-mode thread at 100 % of a core on an
//! idle host. The policy here, applied between polls by [`crate::Pmd::run`]:
//!
//! 1. While polls find packets, nothing happens (no clock read, no system call).
//! 2. After the first empty poll the thread keeps busy-polling for [`IdleConfig::spin_us`]
//!    (traffic that pauses for a few microseconds costs no wake-up latency) — yielding the
//!    core after each empty poll when [`IdleConfig::yield_when_empty`] says the core is shared.
//! 3. Then it sleeps. When every rx queue has a readiness file descriptor (kernel-backed
//!    ports: AF_XDP, AF_PACKET, TAP), it sleeps in one `poll(2)` on all of them, woken by the
//!    first packet, by a packet-out or by the datapath's stop (eventfds among the descriptors),
//!    at most [`IdleConfig::max_sleep_ms`] (1 s: megaflow aging still runs; counters are
//!    flushed before each sleep) — or without a time limit when the thread holds no megaflow
//!    (nothing to age) and the stop eventfd is among the descriptors (so stopping still wakes
//!    it): a thousand idle bridges then wake nobody. When a queue has none (in-memory rings, pcap), it sleeps in steps that
//!    double from [`MIN_NAP_US`] up to [`IdleConfig::max_nap_us`], polling between steps: the
//!    wake-up cost is bounded by the step. A thread with no rx queue at all (a bridge whose
//!    ports only send, such as `null:sink`) sleeps in `poll(2)` too, on its wake descriptors
//!    (packet-outs) or on nothing: it has nothing to poll for, so idle bridges cost next to
//!    nothing.
//! 4. The first packet returns it to step 1.

use std::os::fd::RawFd;
use std::time::Duration;

/// First sleep step for queues without a readiness descriptor, in microseconds.
pub const MIN_NAP_US: u64 = 10;

/// How a poll-mode thread idles (part of [`crate::DpConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleConfig {
    /// Sleep at all when idle (false: busy-poll forever, the lowest latency and a full core).
    pub sleep: bool,
    /// Busy-poll this long after the last packet before sleeping.
    pub spin_us: u64,
    /// Longest sleep in `poll(2)` when every rx queue has a readiness descriptor.
    pub max_sleep_ms: u64,
    /// Longest sleep step when some rx queue has no readiness descriptor.
    pub max_nap_us: u64,
    /// Yield the core (`sched_yield(2)`) after each poll that finds nothing, while spinning:
    /// for threads that share their core with other busy threads (another switch, a VM's
    /// vCPU), which then run at once instead of at the scheduler's next tick. One system call
    /// per empty poll, none per packet; off by default (a poll thread should own its core).
    pub yield_when_empty: bool,
}

impl Default for IdleConfig {
    fn default() -> Self {
        IdleConfig {
            sleep: true,
            spin_us: 200,
            max_sleep_ms: 1000,
            max_nap_us: 1000,
            yield_when_empty: false,
        }
    }
}

impl IdleConfig {
    /// Checks the values; the error names the field and the fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_sleep_ms == 0 || self.max_sleep_ms > 1000 {
            return Err(format!(
                "idle max_sleep_ms is {}; use 1 ..= 1000 (default 1000)",
                self.max_sleep_ms
            ));
        }
        if self.max_nap_us < MIN_NAP_US || self.max_nap_us > 100_000 {
            return Err(format!(
                "idle max_nap_us is {}; use {MIN_NAP_US} ..= 100000 (default 1000)",
                self.max_nap_us
            ));
        }
        Ok(())
    }
}

/// What the thread should do after an empty poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Keep busy-polling.
    Spin,
    /// Keep polling, but let the core's other threads run first (`sched_yield(2)`).
    Yield,
    /// Sleep now (call [`Idle::sleep`]).
    Sleep,
}

/// One thread's idle state.
#[derive(Debug)]
pub struct Idle {
    cfg: IdleConfig,
    fds: Vec<libc::pollfd>,
    /// Every rx queue has a readiness descriptor.
    all_fds: bool,
    /// When the current idle period began (0 = busy).
    idle_since_ns: u64,
    /// The next nap, for queues without descriptors.
    nap_us: u64,
}

impl Idle {
    /// Idle state for a thread whose rx queues have these readiness descriptors (an empty
    /// list: a thread with no rx queue, which sleeps in `poll(2)` on nothing).
    pub fn new(cfg: IdleConfig, fds: impl IntoIterator<Item = Option<RawFd>>) -> Idle {
        let mut all_fds = true;
        let mut pollfds = Vec::new();
        for fd in fds {
            match fd {
                Some(fd) => pollfds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                }),
                None => all_fds = false,
            }
        }
        Idle {
            cfg,
            all_fds,
            fds: pollfds,
            idle_since_ns: 0,
            nap_us: MIN_NAP_US,
        }
    }

    /// A poll found packets.
    #[inline]
    pub fn busy(&mut self) {
        if self.idle_since_ns != 0 {
            self.idle_since_ns = 0;
            self.nap_us = MIN_NAP_US;
        }
    }

    /// A poll found nothing at `now_ns` (never 0); says whether to sleep.
    pub fn empty(&mut self, now_ns: u64) -> Step {
        let spin = if self.cfg.yield_when_empty {
            Step::Yield
        } else {
            Step::Spin
        };
        if !self.cfg.sleep {
            return spin;
        }
        if self.idle_since_ns == 0 {
            self.idle_since_ns = now_ns.max(1);
            return spin;
        }
        if now_ns.saturating_sub(self.idle_since_ns) < self.cfg.spin_us * 1000 {
            spin
        } else {
            Step::Sleep
        }
    }

    /// Yields the core to its other runnable threads, if any ([`Step::Yield`]).
    pub fn yield_core() {
        // SAFETY: sched_yield has no preconditions; it cannot fail on Linux.
        unsafe {
            libc::sched_yield();
        }
    }

    /// Whether sleeps wait on descriptors (true) or nap in growing steps (false).
    pub fn waits_on_fds(&self) -> bool {
        self.all_fds
    }

    /// Sleeps once: in `poll(2)` on the rx descriptors, or for the next nap step. With
    /// `unbounded` (the caller has nothing periodic to do and a descriptor wakes it to stop),
    /// a `poll(2)` sleep has no time limit. Returns how long it meant to sleep at most
    /// (`Duration::MAX` for no limit).
    pub fn sleep(&mut self, unbounded: bool) -> Duration {
        if self.all_fds {
            let ms = if unbounded {
                -1
            } else {
                self.cfg.max_sleep_ms.min(i32::MAX as u64) as i32
            };
            for p in &mut self.fds {
                p.revents = 0;
            }
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs owned by self.
            // EINTR or an error only ends the sleep early; the next poll finds out.
            unsafe {
                libc::poll(self.fds.as_mut_ptr(), self.fds.len() as libc::nfds_t, ms);
            }
            if ms < 0 {
                Duration::MAX
            } else {
                Duration::from_millis(ms as u64)
            }
        } else {
            let d = Duration::from_micros(self.nap_us);
            std::thread::sleep(d);
            self.nap_us = (self.nap_us * 2).min(self.cfg.max_nap_us);
            d
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_shared_core_yields_where_it_would_spin_and_still_sleeps() {
        let cfg = IdleConfig {
            spin_us: 50,
            yield_when_empty: true,
            ..IdleConfig::default()
        };
        let mut idle = Idle::new(cfg, [None]);
        assert_eq!(idle.empty(1_000), Step::Yield);
        assert_eq!(idle.empty(40_000), Step::Yield);
        assert_eq!(idle.empty(51_001), Step::Sleep);
        let mut busy = Idle::new(
            IdleConfig {
                sleep: false,
                ..cfg
            },
            [None],
        );
        assert_eq!(busy.empty(1_000_000_000), Step::Yield);
        Idle::yield_core();
    }

    #[test]
    fn spins_then_sleeps_then_resets_on_traffic() {
        let cfg = IdleConfig {
            spin_us: 50,
            ..IdleConfig::default()
        };
        let mut idle = Idle::new(cfg, [None]);
        assert_eq!(idle.empty(1_000), Step::Spin);
        assert_eq!(idle.empty(40_000), Step::Spin);
        assert_eq!(idle.empty(51_001), Step::Sleep);
        idle.busy();
        assert_eq!(
            idle.empty(60_000),
            Step::Spin,
            "traffic restarts the spin period"
        );
    }

    #[test]
    fn never_sleeps_when_disabled() {
        let cfg = IdleConfig {
            sleep: false,
            ..IdleConfig::default()
        };
        let mut idle = Idle::new(cfg, [None]);
        assert_eq!(idle.empty(1), Step::Spin);
        assert_eq!(idle.empty(u64::MAX / 2), Step::Spin);
    }

    #[test]
    fn a_thread_without_queues_sleeps_the_longest_step() {
        let cfg = IdleConfig {
            max_sleep_ms: 30,
            ..IdleConfig::default()
        };
        let mut idle = Idle::new(cfg, []);
        assert!(idle.waits_on_fds(), "nothing to nap for");
        let t = Instant::now();
        assert_eq!(idle.sleep(false), Duration::from_millis(30));
        assert!(
            t.elapsed() >= Duration::from_millis(25),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn naps_double_up_to_the_bound() {
        let cfg = IdleConfig {
            max_nap_us: 40,
            ..IdleConfig::default()
        };
        let mut idle = Idle::new(cfg, [Some(0), None]);
        assert!(
            !idle.waits_on_fds(),
            "one queue without a descriptor means naps"
        );
        let steps: Vec<u64> = (0..4)
            .map(|_| idle.sleep(false).as_micros() as u64)
            .collect();
        assert_eq!(steps, vec![10, 20, 40, 40]);
        idle.empty(1);
        idle.busy();
        assert_eq!(idle.sleep(false).as_micros(), 10, "traffic resets the nap");
    }

    #[test]
    fn poll_wakes_on_a_readable_descriptor() {
        let mut fds = [0; 2];
        // SAFETY: a pipe's two descriptors are written into `fds`.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let cfg = IdleConfig {
            max_sleep_ms: 1000,
            ..IdleConfig::default()
        };
        let mut idle = Idle::new(cfg, [Some(fds[0])]);
        assert!(idle.waits_on_fds());
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: writes one byte from a valid buffer to the pipe's write end.
            unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) };
        });
        let t = Instant::now();
        idle.sleep(false);
        let waited = t.elapsed();
        writer.join().unwrap();
        assert!(
            waited < Duration::from_millis(900),
            "poll should return when the descriptor turns readable, waited {waited:?}"
        );
        // SAFETY: closing the pipe's descriptors, used by nobody else.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }

    #[test]
    fn an_unbounded_sleep_ends_when_a_descriptor_turns_readable() {
        let mut fds = [0; 2];
        // SAFETY: a pipe's two descriptors are written into `fds`.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let cfg = IdleConfig {
            max_sleep_ms: 1,
            ..IdleConfig::default()
        };
        let mut idle = Idle::new(cfg, [Some(fds[0])]);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(60));
            // SAFETY: writes one byte from a valid buffer to the pipe's write end.
            unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) };
        });
        let t = Instant::now();
        assert_eq!(idle.sleep(true), Duration::MAX);
        let waited = t.elapsed();
        writer.join().unwrap();
        assert!(
            waited >= Duration::from_millis(50),
            "no time limit (max_sleep_ms is 1), woken by the descriptor: {waited:?}"
        );
        // SAFETY: closing the pipe's descriptors, used by nobody else.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }

    #[test]
    fn bad_values_are_named() {
        assert_eq!(IdleConfig::default().validate(), Ok(()));
        let bad = IdleConfig {
            max_sleep_ms: 0,
            ..IdleConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("max_sleep_ms"));
    }
}

//! Token bucket for packet-ins to one controller, without I/O.
//!
//! Credit accrues as time passes at `rate` tokens per second, up to `burst` tokens; each
//! message takes one token or is refused (the caller counts and drops it, never queues it).
//! Credit is kept in nanoseconds of accrual so the arithmetic is exact integers.

use tokio::time::Instant;

/// Rate and burst of a [`TokenBucket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Messages per second in the long run (at least 1).
    pub rate: u32,
    /// Messages that may go at once after an idle period (at least 1).
    pub burst: u32,
}

impl Default for RateLimit {
    /// 1000 per second with a burst of 100, like Open vSwitch's controller_rate_limit.
    fn default() -> RateLimit {
        RateLimit {
            rate: 1000,
            burst: 100,
        }
    }
}

/// A token bucket; starts full.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Nanoseconds of accrual one token costs.
    cost_ns: u64,
    /// Most credit the bucket holds.
    cap_ns: u64,
    /// Credit now, in nanoseconds of accrual.
    credit_ns: u64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket for `limit` (zero rate or burst are taken as 1).
    pub fn new(limit: RateLimit, now: Instant) -> TokenBucket {
        let cost_ns = 1_000_000_000 / u64::from(limit.rate.max(1));
        let cap_ns = cost_ns * u64::from(limit.burst.max(1));
        TokenBucket {
            cost_ns,
            cap_ns,
            credit_ns: cap_ns,
            last: now,
        }
    }

    /// Takes one token if there is one.
    pub fn try_take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = self.last.max(now);
        let elapsed_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.credit_ns = self.credit_ns.saturating_add(elapsed_ns).min(self.cap_ns);
        if self.credit_ns >= self.cost_ns {
            self.credit_ns -= self.cost_ns;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn burst_then_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(
            RateLimit {
                rate: 1000,
                burst: 100,
            },
            t0,
        );
        let first = (0..1000).filter(|_| b.try_take(t0)).count();
        assert_eq!(first, 100, "a full bucket gives exactly the burst");
        // Over one further second, 1000 more go through, however the calls are spread.
        let mut passed = 0;
        for i in 1..=10_000u64 {
            if b.try_take(t0 + Duration::from_micros(i * 100)) {
                passed += 1;
            }
        }
        assert_eq!(passed, 1000);
    }

    #[test]
    fn idle_refills_only_up_to_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(RateLimit { rate: 10, burst: 3 }, t0);
        assert_eq!((0..10).filter(|_| b.try_take(t0)).count(), 3);
        let later = t0 + Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| b.try_take(later)).count(), 3);
        // A clock that goes backwards gives nothing.
        assert!(!b.try_take(t0));
    }

    #[test]
    fn zero_is_taken_as_one() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(RateLimit { rate: 0, burst: 0 }, t0);
        assert!(b.try_take(t0));
        assert!(!b.try_take(t0));
        assert!(b.try_take(t0 + Duration::from_secs(1)));
    }
}

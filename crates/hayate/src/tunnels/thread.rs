//! The housekeeping thread of a bridge's tunnels and when it works ([`Schedule`]): a periodic
//! pass every interval (one second by default) that resolves every tunnel again, forgets idle
//! per-flow destinations and logs drops; between passes, as soon as the datapath asks for
//! per-flow destinations (it raises its [`RequestSignal`]), a resolution of those only; and
//! while one of them cannot be reached yet (the kernel is resolving its next hop's MAC), a few
//! early tries at doubling delays ([`FIRST_RETRY`], at most
//! [`crate::tunnel_flows::EARLY_TRIES`] per destination) rather than a wait for the next pass.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use datapath::tunnel_flows::RequestSignal;

use super::BridgeTunnels;

/// The delay before the first early try of a destination that could not be reached; each
/// further try waits twice as long.
pub const FIRST_RETRY: Duration = Duration::from_millis(10);

/// The longest interval between periodic passes: a year (the deadline stays within the
/// clock's range).
const INTERVAL_MAX: Duration = Duration::from_secs(365 * 86_400);

/// What the thread does when it wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Resolve every tunnel and destination again, forget idle ones, log drops.
    Periodic,
    /// Resolve the destinations asked for, and those waiting for an early try.
    Requests,
}

/// When the housekeeping thread works next. Pure time arithmetic: the thread gives it the
/// clock's readings.
#[derive(Debug, Clone)]
pub struct Schedule {
    interval: Duration,
    /// The next periodic pass.
    next: Instant,
    /// The next early try and the delay that led to it.
    retry: Option<(Instant, Duration)>,
}

impl Schedule {
    /// Periodic passes every `interval` (at most a year) from `now`.
    pub fn new(now: Instant, interval: Duration) -> Schedule {
        let interval = interval.min(INTERVAL_MAX);
        Schedule {
            interval,
            next: now + interval,
            retry: None,
        }
    }

    /// Until when the thread sleeps unless it is woken.
    pub fn deadline(&self) -> Instant {
        self.retry.map_or(self.next, |(at, _)| at.min(self.next))
    }

    /// What to do at `now`, `asked` saying whether the datapath woke the thread: `None`
    /// when nothing is due (a spurious wake).
    pub fn due(&mut self, now: Instant, asked: bool) -> Option<Pass> {
        if now >= self.next {
            self.next = now + self.interval;
            return Some(Pass::Periodic);
        }
        let early = self.retry.is_some_and(|(at, _)| now >= at);
        (asked || early).then_some(Pass::Requests)
    }

    /// After a pass at `now` (`asked`: the datapath had woken the thread): when a
    /// destination is still `waiting` for an early try, the next try after twice the last
    /// delay ([`FIRST_RETRY`] after a new request); else none.
    pub fn after(&mut self, now: Instant, asked: bool, waiting: bool) {
        self.retry = waiting.then(|| {
            let delay = match self.retry {
                Some((_, d)) if !asked => d * 2,
                _ => FIRST_RETRY,
            };
            (now + delay, delay)
        });
    }
}

/// Runs the housekeeping of `tunnels` while it lives, periodic passes every `interval`, the
/// destinations the datapath asks for (it raises `signal`) at once.
pub fn spawn(tunnels: Weak<BridgeTunnels>, signal: Arc<RequestSignal>, interval: Duration) {
    let run = move || {
        let mut schedule = Schedule::new(Instant::now(), interval);
        loop {
            let asked = signal.wait_until(schedule.deadline());
            let Some(t) = tunnels.upgrade() else {
                return;
            };
            let Some(dp) = t.dp.upgrade() else {
                return;
            };
            let now = Instant::now();
            let Some(pass) = schedule.due(now, asked) else {
                continue;
            };
            let mut st = t.lock();
            let Some(hk) = st.hk.as_mut() else {
                continue;
            };
            // A periodic pass takes the requests too.
            let changed = match pass {
                Pass::Periodic => hk.refresh(&dp),
                Pass::Requests => hk.resolve_requests(&dp),
            };
            if changed {
                t.cell.invalidate_megaflows();
            }
            if pass == Pass::Periodic {
                hk.report_drops(&dp);
            }
            schedule.after(now, asked, hk.waiting());
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("hayate-tunnels".into())
        .spawn(run)
    {
        eprintln!("warning: tunnel housekeeping did not start: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    /// A request is served at once; a destination still waiting is tried again at 10, 20,
    /// 40 ms ...; a new request starts the delays again; the periodic pass comes on time
    /// whatever happens between.
    #[test]
    fn requests_are_served_at_once_and_waiting_ones_retried_early() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, SEC);
        assert_eq!(s.deadline(), t0 + SEC);
        assert_eq!(s.due(t0 + MS, false), None, "spurious wake");
        assert_eq!(s.due(t0 + MS, true), Some(Pass::Requests));
        s.after(t0 + MS, true, true);
        assert_eq!(s.deadline(), t0 + 11 * MS);
        assert_eq!(
            s.due(t0 + 11 * MS, false),
            Some(Pass::Requests),
            "early try"
        );
        s.after(t0 + 11 * MS, false, true);
        assert_eq!(s.deadline(), t0 + 31 * MS, "twice the delay");
        s.due(t0 + 31 * MS, false);
        s.after(t0 + 31 * MS, false, true);
        assert_eq!(s.deadline(), t0 + 71 * MS);
        assert_eq!(s.due(t0 + 50 * MS, true), Some(Pass::Requests));
        s.after(t0 + 50 * MS, true, true);
        assert_eq!(
            s.deadline(),
            t0 + 60 * MS,
            "a new request: the first delay again"
        );
        s.due(t0 + 60 * MS, false);
        s.after(t0 + 60 * MS, false, false);
        assert_eq!(s.deadline(), t0 + SEC, "nothing waiting: the periodic pass");
        assert_eq!(s.due(t0 + SEC, true), Some(Pass::Periodic));
        assert_eq!(s.deadline(), t0 + 2 * SEC);
        let far = Schedule::new(t0, Duration::MAX);
        assert_eq!(far.deadline(), t0 + INTERVAL_MAX, "a year at most");
    }
}

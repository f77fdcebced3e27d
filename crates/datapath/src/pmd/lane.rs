//! The priority lane's share of its core: the lane thread reads the ports' priority receive
//! queues and runs ahead of the poll threads on their core, so it sleeps as soon as its
//! queues are empty and works at most [`LANE_BUSY_NS`] of each [`LANE_WINDOW_NS`].

use super::Pmd;
use crate::stats::Counter;

/// The window over which the priority lane's share of its core is kept.
pub(super) const LANE_WINDOW_NS: u64 = 1_000_000;
/// Most of each window the priority lane may be busy; past it, it sleeps to the window's
/// end, so a flood of control frames (pings, SYNs, ARP) takes at most a quarter of the core
/// from bulk traffic. A ping takes a few microseconds of it.
pub(super) const LANE_BUSY_NS: u64 = 250_000;
/// The priority lane's use of its core over a window of [`LANE_WINDOW_NS`].
#[derive(Debug, Default)]
pub(super) struct LaneWindow {
    start_ns: u64,
    busy_ns: u64,
}

impl Pmd {
    /// Makes this thread the priority lane (see [`crate::datapath`]): it sleeps as soon as
    /// its queues are empty, and works at most [`LANE_BUSY_NS`] of each [`LANE_WINDOW_NS`].
    pub(crate) fn make_lane(&mut self) {
        self.lane = true;
        // Even when the poll threads busy-poll: a real-time thread that spins would take
        // their core.
        self.cfg.idle.sleep = true;
        self.cfg.idle.spin_us = 0;
        self.rebuild_idle();
    }

    /// Adds a busy poll that began at `t0` to the lane's window; past its share the lane
    /// sleeps to the window's end (it runs ahead of the poll threads on its core).
    pub(super) fn lane_budget(&mut self, t0: u64) {
        let now = self.clock.now_ns();
        let w = &mut self.lane_window;
        if now.saturating_sub(w.start_ns) >= LANE_WINDOW_NS {
            *w = LaneWindow {
                start_ns: t0,
                busy_ns: 0,
            };
        }
        w.busy_ns += now.saturating_sub(t0);
        if w.busy_ns > LANE_BUSY_NS {
            let rest = (w.start_ns + LANE_WINDOW_NS).saturating_sub(now);
            std::thread::sleep(std::time::Duration::from_nanos(rest.max(1000)));
            self.lane_window = LaneWindow {
                start_ns: self.clock.now_ns(),
                busy_ns: 0,
            };
            self.local.add(Counter::LaneYields, 1);
            self.stats.absorb(&mut self.local);
        }
    }
}

//! Whether a thread's exact-match cache is worth using, from what the megaflow classifier
//! costs: the EMC saves a classifier lookup per hit but adds a probe per packet (and inserts),
//! so it pays only when classifier lookups probe many subtables.
//!
//! Size and owner: a few counters in each poll-mode thread. Every [`WINDOW`] classifier hits
//! the gate compares the subtables probed for them with [`PROBES_PER_HIT_ON`] per hit and
//! opens or closes for the next window. Counted, not timed, so a thread decides the same way
//! at any speed. Measured (`hayate bench acl-1 acl-64`, prefix tracking making 3 and 13
//! megaflow masks at 1.03 and 1.93 probes per hit): with the EMC in use 85–106 and 95–132
//! cycles a packet, without it 60–75 and 71–80.

/// Classifier hits per decision.
pub const WINDOW: u32 = 4096;
/// Subtables probed per classifier hit above which the EMC is used.
pub const PROBES_PER_HIT_ON: u32 = 3;

/// The gate of one thread (closed at first).
#[derive(Debug, Default)]
pub struct EmcGate {
    hits: u32,
    probes: u32,
    open: bool,
}

impl EmcGate {
    /// Whether the EMC is in use in this window.
    #[inline(always)]
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Counts one batch's classifier lookups: `hits` packets found, `probes` subtables probed.
    #[inline]
    pub fn record(&mut self, hits: u32, probes: u64) {
        self.hits += hits;
        self.probes = self
            .probes
            .saturating_add(probes.min(u64::from(u32::MAX)) as u32);
        if self.hits >= WINDOW {
            self.open = self.probes > self.hits.saturating_mul(PROBES_PER_HIT_ON);
            self.hits = 0;
            self.probes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_when_lookups_probe_many_subtables_and_closes_again() {
        let mut g = EmcGate::default();
        assert!(!g.is_open());
        for _ in 0..WINDOW / 32 {
            g.record(32, 32 * 5);
        }
        assert!(g.is_open(), "5 probes a hit");
        for _ in 0..WINDOW / 32 - 1 {
            g.record(32, 32 * 2);
        }
        assert!(g.is_open(), "decided only at the end of a window");
        g.record(32, 32 * 2);
        assert!(!g.is_open(), "2 probes a hit");
        // Misses (no hits) alone never decide.
        g.record(0, 1000);
        assert!(!g.is_open());
    }
}

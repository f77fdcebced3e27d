//! A policed port's excess dropped right after receive, before anything is extracted
//! ([`crate::police`] has the buckets).

use crate::stats::{cycles, Counter};

use super::{low_bits, Pmd};

impl Pmd {
    /// Drops the frames of the scratch batch (from rx queue `q`) that its port's policer
    /// refuses ([`crate::police`]): freed, counted as received and as `drop_policed`, before
    /// any extraction. Returns the frames left.
    pub(super) fn police(&mut self, q: usize, t0: u64) -> usize {
        let now = self.clock.at(t0);
        let s = &mut *self.s;
        let pass = self.rx[q].police.police(now, s.batch.as_slice());
        let n = s.batch.len();
        if pass == low_bits(n) {
            return n;
        }
        let (mut i, mut dropped, mut bytes) = (0, 0u64, 0u64);
        let cache = self.exec.cache();
        s.batch.retain_or(
            |_| {
                let keep = pass & (1 << i) != 0;
                i += 1;
                keep
            },
            |p| {
                dropped += 1;
                bytes += p.len() as u64;
                cache.free(p);
            },
        );
        self.local.add(Counter::RxPackets, dropped);
        self.local.add(Counter::RxBytes, bytes);
        self.local.add(Counter::DropPoliced, dropped);
        let left = s.batch.len();
        if left == 0 {
            let busy = cycles().wrapping_sub(t0);
            self.local.add(Counter::BusyCycles, busy);
            self.budget.busy += busy;
        }
        left
    }
}

//! Meters: validation of meter-mods and [`MeterState`], the token buckets every datapath
//! thread polices through.
//!
//! Each band has its own token bucket (atomics only: no lock, no allocation). A packet
//! *exceeds* a band when that band's bucket lacks the packet's cost; the band applied is the
//! exceeded band with the highest rate (OpenFlow 1.3), and buckets of the bands the packet
//! conforms to are debited. Tokens are kept in thousandths of a bit (kbit/s meters) or of a
//! packet (pkt/s meters). Bucket capacity is the band's burst size when the meter has the
//! burst flag, else 100 ms worth of rate (at least one 1500-byte packet or one packet).
//!
//! [`TokenBucket`] is the one token bucket of the datapath side: the meters' bands and the
//! datapath's ingress policing per port (`datapath::police`) both use it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::MeterModError;
use crate::model::{Meter, MeterBand, MeterMod, MeterModCommand, METER_MAX};

/// What a meter decides for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeterVerdict {
    /// Under every band's rate: forward unchanged.
    Pass,
    /// A drop band applies: drop the packet.
    Drop {
        /// Index of the band.
        band: usize,
    },
    /// A DSCP-remark band applies: raise the drop precedence by `prec` levels.
    Remark {
        /// Precedence levels to add.
        prec: u8,
    },
}

/// Counters of one band.
#[derive(Debug, Default)]
pub struct BandCounters {
    /// Packets the band applied to.
    pub packets: AtomicU64,
    /// Bytes the band applied to.
    pub bytes: AtomicU64,
}

/// A lock-free token bucket shared by any number of threads: atomics only, no lock, no
/// allocation, no system call.
///
/// Tokens are counted in thousandths ("milli-tokens": millibits for a bit rate, millipackets
/// for a packet rate) so that rates and costs stay exact integers. The rate and capacity can
/// be changed while other threads take tokens ([`TokenBucket::set`]). Time is any monotonic
/// nanosecond clock, the same for every caller. Elapsed time turns into tokens exactly: the
/// part of an interval too short to make a whole milli-token is carried to the next refill,
/// so frequent refills lose nothing.
#[derive(Debug)]
pub struct TokenBucket {
    /// Milli-tokens added per second.
    rate: AtomicU64,
    /// Most milli-tokens held.
    capacity: AtomicU64,
    tokens: AtomicU64,
    /// Time up to which elapsed time has been turned into tokens.
    last_ns: AtomicU64,
}

impl TokenBucket {
    /// A full bucket: `rate` milli-tokens per second, at most `capacity` milli-tokens.
    pub fn new(rate: u64, capacity: u64) -> TokenBucket {
        TokenBucket {
            rate: AtomicU64::new(rate),
            capacity: AtomicU64::new(capacity),
            tokens: AtomicU64::new(capacity),
            last_ns: AtomicU64::new(0),
        }
    }

    /// Changes rate and capacity (milli-tokens per second, milli-tokens) and fills the
    /// bucket to its new capacity.
    pub fn set(&self, rate: u64, capacity: u64) {
        self.rate.store(rate, Ordering::Relaxed);
        self.capacity.store(capacity, Ordering::Relaxed);
        self.tokens.store(capacity, Ordering::Release);
    }

    /// Milli-tokens per second.
    pub fn rate(&self) -> u64 {
        self.rate.load(Ordering::Relaxed)
    }

    /// Most milli-tokens held.
    pub fn capacity(&self) -> u64 {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Adds the tokens that time `now_ns` earned since the last refill. Only the caller that
    /// moves the refill time forward adds them, so concurrent refills count time once.
    #[inline]
    pub fn refill(&self, now_ns: u64) {
        let last = self.last_ns.load(Ordering::Acquire);
        if now_ns <= last {
            return;
        }
        let rate = u128::from(self.rate.load(Ordering::Relaxed));
        let cap = self.capacity.load(Ordering::Relaxed);
        if rate == 0 {
            return;
        }
        let elapsed = u128::from(now_ns - last);
        let add = elapsed * rate / 1_000_000_000;
        if add == 0 {
            // Too soon for one milli-token: keep the time for a later refill.
            return;
        }
        // A full bucket forgets the time it was full; otherwise the time that made `add`
        // is used and the rest carried over.
        let (add, until) = if add >= u128::from(cap) {
            (cap, now_ns)
        } else {
            (add as u64, last + (add * 1_000_000_000 / rate) as u64)
        };
        if self
            .last_ns
            .compare_exchange(last, until, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let _ = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(add).min(cap))
            });
    }

    /// Takes `cost` milli-tokens if the bucket holds them (call [`TokenBucket::refill`]
    /// first).
    #[inline]
    pub fn take(&self, cost: u64) -> bool {
        self.tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(cost))
            .is_ok()
    }

    /// Takes `cost` milli-tokens whether or not the bucket holds them, down to empty, and
    /// returns what it lacked: for traffic that passes anyway (an egress queue's guaranteed
    /// rate) but must still use up room that other traffic then lacks (the caller keeps the
    /// shortfall as a debt to charge later). Call [`TokenBucket::refill`] first.
    #[inline]
    pub fn charge(&self, cost: u64) -> u64 {
        if cost == 0 {
            return 0;
        }
        match self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_sub(cost))
            }) {
            Ok(t) | Err(t) => cost.saturating_sub(t),
        }
    }

    /// Takes tokens for up to 32 items in order, `cost(i)` milli-tokens each, with one
    /// atomic update for all of them: an item passes when the tokens left after the items
    /// before it cover its cost. Returns the mask of items that passed (bit `i`: item `i`).
    /// Call [`TokenBucket::refill`] first.
    #[inline]
    pub fn take_each(&self, n: usize, mut cost: impl FnMut(usize) -> u64) -> u32 {
        let n = n.min(32);
        let mut t = self.tokens.load(Ordering::Acquire);
        loop {
            let (mut left, mut passed) = (t, 0u32);
            for i in 0..n {
                let c = cost(i);
                if c <= left {
                    left -= c;
                    passed |= 1 << i;
                }
            }
            if left == t {
                return passed;
            }
            match self
                .tokens
                .compare_exchange_weak(t, left, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return passed,
                Err(now) => t = now,
            }
        }
    }

    /// Milli-tokens held now (without a refill).
    pub fn tokens(&self) -> u64 {
        self.tokens.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
struct BandState {
    band: MeterBand,
    rate: u64,
    bucket: TokenBucket,
    counters: BandCounters,
}

/// A meter's live state, shared by every datapath thread and snapshot.
#[derive(Debug)]
pub struct MeterState {
    /// The definition.
    pub meter: Meter,
    bands: Vec<BandState>,
    /// Packets that went through the meter.
    pub packets: AtomicU64,
    /// Bytes that went through the meter.
    pub bytes: AtomicU64,
}

fn band_rate_burst(b: &MeterBand) -> (u32, u32) {
    match *b {
        MeterBand::Drop { rate, burst } | MeterBand::DscpRemark { rate, burst, .. } => {
            (rate, burst)
        }
    }
}

impl MeterState {
    /// Builds the state of a validated meter; buckets start full.
    pub fn new(meter: Meter) -> Self {
        let bands = meter
            .bands
            .iter()
            .map(|b| {
                let (rate, burst) = band_rate_burst(b);
                let (rate, burst) = (u64::from(rate), u64::from(burst));
                let capacity = if meter.burst && burst > 0 {
                    // kbit → millibits (×1e6); packets → millipackets (×1e3).
                    if meter.pktps {
                        burst * 1000
                    } else {
                        burst * 1_000_000
                    }
                } else if meter.pktps {
                    (rate * 100).max(1000)
                } else {
                    // 100 ms of rate: rate kbit/s × 0.1 s = rate × 100 bits = rate × 1e5 mbit.
                    (rate * 100_000).max(1500 * 8 * 1000)
                };
                // Milli-tokens per second: kbit/s → millibits (×1e6), pkt/s → ×1e3.
                let per_s = if meter.pktps {
                    rate * 1000
                } else {
                    rate * 1_000_000
                };
                BandState {
                    band: *b,
                    rate,
                    bucket: TokenBucket::new(per_s, capacity),
                    counters: BandCounters::default(),
                }
            })
            .collect();
        MeterState {
            meter,
            bands,
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// Counters of band `i`.
    pub fn band_counters(&self, i: usize) -> Option<&BandCounters> {
        self.bands.get(i).map(|b| &b.counters)
    }

    /// Polices one packet of `bytes` bytes at time `now_ns` (any monotonic nanosecond clock,
    /// the same for every caller). Lock-free; safe from many threads at once.
    pub fn police(&self, now_ns: u64, bytes: u32) -> MeterVerdict {
        self.packets.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(u64::from(bytes), Ordering::Relaxed);
        let cost = if self.meter.pktps {
            1000
        } else {
            u64::from(bytes) * 8000
        };
        let mut worst: Option<usize> = None;
        for (i, b) in self.bands.iter().enumerate() {
            b.bucket.refill(now_ns);
            let took = b.bucket.take(cost);
            if !took && worst.map(|w| self.bands[w].rate < b.rate).unwrap_or(true) {
                worst = Some(i);
            }
        }
        let Some(i) = worst else {
            return MeterVerdict::Pass;
        };
        let b = &self.bands[i];
        b.counters.packets.fetch_add(1, Ordering::Relaxed);
        b.counters
            .bytes
            .fetch_add(u64::from(bytes), Ordering::Relaxed);
        match b.band {
            MeterBand::Drop { .. } => MeterVerdict::Drop { band: i },
            MeterBand::DscpRemark { prec_level, .. } => MeterVerdict::Remark { prec: prec_level },
        }
    }
}

/// Checks a meter-mod. `exists` answers whether an id is defined.
pub fn check_meter_mod(m: &MeterMod, exists: &dyn Fn(u32) -> bool) -> Result<(), MeterModError> {
    let id = m.meter.id;
    match m.command {
        MeterModCommand::Delete => Ok(()),
        MeterModCommand::Add | MeterModCommand::Modify => {
            if id == 0 || id > METER_MAX {
                return Err(MeterModError::InvalidMeterId(id));
            }
            if m.command == MeterModCommand::Add && exists(id) {
                return Err(MeterModError::MeterExists(id));
            }
            if m.command == MeterModCommand::Modify && !exists(id) {
                return Err(MeterModError::UnknownMeter(id));
            }
            if m.meter.bands.is_empty() || m.meter.bands.iter().any(|b| band_rate_burst(b).0 == 0) {
                return Err(MeterModError::BadRate(id));
            }
            if m.meter.bands.iter().any(|b| matches!(b, MeterBand::DscpRemark { prec_level, .. } if *prec_level == 0 || *prec_level > 63)) {
                return Err(MeterModError::BadBand(id));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(pktps: bool, bands: Vec<MeterBand>) -> MeterState {
        MeterState::new(Meter {
            stats: false,
            id: 1,
            pktps,
            burst: true,
            bands,
            kbps: !pktps,
        })
    }

    #[test]
    fn packet_rate_drops_over_burst_then_refills() {
        let m = meter(true, vec![MeterBand::Drop { rate: 10, burst: 5 }]);
        let t0 = 1_000_000_000;
        let passed = (0..10)
            .filter(|_| m.police(t0, 64) == MeterVerdict::Pass)
            .count();
        assert_eq!(passed, 5, "burst of 5 packets");
        assert_eq!(m.police(t0, 64), MeterVerdict::Drop { band: 0 });
        // 10 pkt/s: after 100 ms one more packet fits.
        assert_eq!(m.police(t0 + 100_000_000, 64), MeterVerdict::Pass);
        assert_eq!(
            m.police(t0 + 100_000_000, 64),
            MeterVerdict::Drop { band: 0 }
        );
        assert_eq!(
            m.band_counters(0).unwrap().packets.load(Ordering::Relaxed),
            7
        );
        assert_eq!(m.packets.load(Ordering::Relaxed), 13);
    }

    #[test]
    fn kbps_and_highest_exceeded_band_wins() {
        // 8 kbit/s remark with 8 kbit burst (1000 bytes), 80 kbit/s drop with 80 kbit burst.
        let m = meter(
            false,
            vec![
                MeterBand::DscpRemark {
                    rate: 8,
                    burst: 8,
                    prec_level: 1,
                },
                MeterBand::Drop {
                    rate: 80,
                    burst: 80,
                },
            ],
        );
        let t = 5;
        assert_eq!(m.police(t, 1000), MeterVerdict::Pass);
        // Remark bucket is empty, drop bucket still has 9000 bytes.
        assert_eq!(m.police(t, 1000), MeterVerdict::Remark { prec: 1 });
        for _ in 0..8 {
            m.police(t, 1000);
        }
        assert_eq!(m.police(t, 1000), MeterVerdict::Drop { band: 1 });
    }

    #[test]
    fn threads_share_the_bucket_exactly() {
        let m = std::sync::Arc::new(meter(
            true,
            vec![MeterBand::Drop {
                rate: 1,
                burst: 1000,
            }],
        ));
        let passed = std::sync::Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (m, passed) = (m.clone(), passed.clone());
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        if m.police(1, 64) == MeterVerdict::Pass {
                            passed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            passed.load(Ordering::Relaxed),
            1000,
            "exactly the burst passes"
        );
        assert_eq!(m.packets.load(Ordering::Relaxed), 2000);
    }

    #[test]
    fn bucket_carries_time_too_short_for_a_token() {
        // 1 pkt/s = 1000 milli-tokens a second: one milli-token per millisecond.
        let b = TokenBucket::new(1000, 1000);
        assert!(b.take(1000));
        // Refills every 0.1 ms earn nothing each, but ten of them make a milli-token.
        for i in 1..=10_000u64 {
            b.refill(i * 100_000);
        }
        assert_eq!(
            b.tokens(),
            1000,
            "one second of refills in small steps: one packet"
        );
    }

    #[test]
    fn bucket_take_each_passes_in_order_with_one_update() {
        let b = TokenBucket::new(1_000_000, 5_000);
        // Costs 2000, 4000, 2000, 1000: the first fits, the second not, the third and
        // fourth fit what is left.
        let costs = [2000, 4000, 2000, 1000];
        assert_eq!(b.take_each(4, |i| costs[i]), 0b1101);
        assert_eq!(b.tokens(), 0);
        assert_eq!(b.take_each(4, |i| costs[i]), 0);
        b.set(1_000_000, 3_000);
        assert_eq!(b.tokens(), 3_000, "set fills to the new capacity");
    }

    #[test]
    fn validation() {
        let none = |_| false;
        let mk = |id, bands| MeterMod {
            command: MeterModCommand::Add,
            meter: Meter {
                stats: false,
                id,
                pktps: false,
                burst: false,
                bands,
                kbps: true,
            },
        };
        assert_eq!(
            check_meter_mod(&mk(0, vec![]), &none),
            Err(MeterModError::InvalidMeterId(0))
        );
        assert_eq!(
            check_meter_mod(&mk(1, vec![]), &none),
            Err(MeterModError::BadRate(1))
        );
        let ok = vec![MeterBand::Drop { rate: 1, burst: 0 }];
        check_meter_mod(&mk(1, ok.clone()), &none).unwrap();
        assert_eq!(
            check_meter_mod(&mk(1, ok), &|_| true),
            Err(MeterModError::MeterExists(1))
        );
    }
}

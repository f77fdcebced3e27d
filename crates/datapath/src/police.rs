//! Ingress policing per port: a port's frames beyond its rate are dropped right after
//! receive, before extraction and lookup, so a flooding port pays for its excess with its
//! own frames and not with its neighbours' cycles (counted as `drop_policed` against the
//! port, [`crate::IN_PORT_DROPS`]).
//!
//! Size and owner: one [`PortPolicer`] per port, made by the datapath ([`Policers`]) and
//! shared by every thread that reads one of the port's rx queues; the control side changes
//! its rates at any time ([`crate::Running::set_policing`]). Its buckets are the pipeline's
//! one token bucket ([`pipeline::meter::TokenBucket`], as the meters use): one atomic bucket
//! per port rather than the rate split between threads, so a port's rate is what it was
//! given however its queues are spread and however unevenly they fill. The cost per batch:
//! one relaxed load when the port is not policed; when it is, one refill and one atomic
//! update per bucket for the whole batch (uncontended unless the port's queues are read by
//! several threads at the same moment). No allocation, lock or system call.
//!
//! **Before receive, where the port can.** A port that can police itself before the switch
//! reads its frames ([`port::Port::police_early`]: an AF_XDP port's XDP program drops the
//! excess before it is copied to the switch) is given the same rates whenever they change;
//! what it drops is counted as `drop_policed` too ([`PortPolicer::early_drops`]). This
//! policer stays on behind it; what passed there is within the rate, so it rarely drops more.
//!
//! A frame passes when every configured bucket holds its cost (8 × its length in bits for
//! the bit rate; one packet for the packet rate). With both rates, the packet bucket is
//! charged first, and a frame the bit bucket then refuses has still used a packet token.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use packet::Packet;
use pipeline::meter::TokenBucket;
use port::{Policing, Port};

/// One port's ingress policer (see the module docs).
#[derive(Debug)]
pub struct PortPolicer {
    on: AtomicBool,
    /// Millibits; rate 0 when the port has no bit rate.
    bits: TokenBucket,
    /// Millipackets; rate 0 when the port has no packet rate.
    packets: TokenBucket,
    /// What it was given (control side only).
    config: Mutex<Policing>,
    /// The port, told the same rates to police before receive where it can; weak, so an
    /// unplugged port closes while its policer lives on.
    early: Mutex<Option<Weak<dyn Port>>>,
}

impl PortPolicer {
    /// A policer for `p` (off when `p` sets no rate), buckets full.
    pub fn new(p: Policing) -> PortPolicer {
        let pp = PortPolicer {
            on: AtomicBool::new(false),
            bits: TokenBucket::new(0, 0),
            packets: TokenBucket::new(0, 0),
            config: Mutex::new(Policing::default()),
            early: Mutex::new(None),
        };
        pp.set(p);
        pp
    }

    /// Makes `port` (the one this policer polices) police before receive too, where it can,
    /// with the rates given now and later.
    pub fn attach(&self, port: &Arc<dyn Port>) {
        *self.early.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(port));
        port.police_early(&self.policing());
    }

    fn early_port(&self) -> Option<Arc<dyn Port>> {
        self.early
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(Weak::upgrade)
    }

    /// Frames the port dropped before receive ([`port::Port::early_policed`]).
    pub fn early_drops(&self) -> u64 {
        self.early_port().map_or(0, |p| p.early_policed())
    }

    /// Changes the rates (buckets refilled to their new size); no rate turns it off.
    pub fn set(&self, p: Policing) {
        let kbps = u64::from(p.rate_kbps);
        let kpps = u64::from(p.rate_kpps);
        // kbit/s → millibits/s: ×1e6; kbit → millibits: ×1e6. kpkts → millipackets: ×1e6.
        self.bits
            .set(kbps * 1_000_000, u64::from(p.burst_kbit) * 1_000_000);
        self.packets
            .set(kpps * 1_000_000, u64::from(p.burst_kpkts) * 1_000_000);
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = p;
        self.on.store(p.is_on(), Ordering::Release);
        if let Some(port) = self.early_port() {
            port.police_early(&p);
        }
    }

    /// What it was given.
    pub fn policing(&self) -> Policing {
        *self.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the port is policed (one relaxed load, per batch).
    #[inline(always)]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Charges the frames of one batch (≤ 32) at time `now_ns`; returns the mask of those
    /// that pass (bit `i`: `pkts[i]`).
    #[inline]
    pub fn police(&self, now_ns: u64, pkts: &[Packet]) -> u32 {
        let n = pkts.len().min(32);
        let mut pass = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        if self.packets.rate() != 0 {
            self.packets.refill(now_ns);
            pass &= self.packets.take_each(n, |_| 1000);
        }
        if self.bits.rate() != 0 && pass != 0 {
            self.bits.refill(now_ns);
            let p = pass;
            pass &= self.bits.take_each(n, |i| {
                if p & (1 << i) != 0 {
                    pkts[i].len() as u64 * 8000
                } else {
                    0
                }
            });
        }
        pass
    }
}

/// Every port's policer, by OpenFlow port number (control side; a mutex is fine here).
#[derive(Debug, Default)]
pub struct Policers {
    by_port: Mutex<BTreeMap<u32, Arc<PortPolicer>>>,
}

impl Policers {
    /// The policer of port `ofport`, made (off) if it has none yet.
    pub fn port(&self, ofport: u32) -> Arc<PortPolicer> {
        self.by_port
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(ofport)
            .or_insert_with(|| Arc::new(PortPolicer::new(Policing::default())))
            .clone()
    }

    /// Sets port `ofport`'s policing.
    pub fn set(&self, ofport: u32, p: Policing) {
        self.port(ofport).set(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::{Batch, Pool};

    const SEC: u64 = 1_000_000_000;

    fn frames(pool: &Pool, n: usize, len: usize) -> Batch {
        let mut cache = pool.cache();
        let mut b = Batch::new();
        for _ in 0..n {
            b.push(cache.alloc_from(&vec![0u8; len]).unwrap()).unwrap();
        }
        b
    }

    /// Sends batches of `n` frames of `len` bytes every `step_ns` for `secs` seconds (from
    /// t = 1 s); returns the frames that passed.
    fn offer(p: &PortPolicer, pool: &Pool, n: usize, len: usize, step_ns: u64, secs: u64) -> u64 {
        let mut b = frames(pool, n, len);
        let mut passed = 0u64;
        let mut t = SEC;
        while t < SEC + secs * SEC {
            passed += u64::from(p.police(t, b.as_slice()).count_ones());
            t += step_ns;
        }
        let mut cache = pool.cache();
        b.free_into(&mut cache);
        passed
    }

    fn kbps(rate: u32, burst: u32) -> Policing {
        Policing {
            rate_kbps: rate,
            burst_kbit: burst,
            ..Policing::default()
        }
    }

    fn kpps(rate: u32, burst: u32) -> Policing {
        Policing {
            rate_kpps: rate,
            burst_kpkts: burst,
            ..Policing::default()
        }
    }

    #[test]
    fn off_passes_everything() {
        let pool = Pool::with_frames(64);
        let p = PortPolicer::new(Policing::default());
        assert!(!p.is_on());
        let mut b = frames(&pool, 32, 64);
        assert_eq!(p.police(SEC, b.as_slice()), u32::MAX);
        b.free_into(&mut pool.cache());
    }

    #[test]
    fn bit_rate_passes_burst_then_rate_and_no_more() {
        let pool = Pool::with_frames(64);
        // 1000 kbit/s, burst 100 kbit; 1250-byte frames are 10 kbit each.
        let p = PortPolicer::new(kbps(1000, 100));
        let mut b = frames(&pool, 32, 1250);
        assert_eq!(p.police(SEC, b.as_slice()).count_ones(), 10, "the burst");
        assert_eq!(p.police(SEC, b.as_slice()), 0, "nothing left");
        b.free_into(&mut pool.cache());
        // A flood of batches every 10 µs for 2 s (6.4 million frames offered): exactly
        // 2 s of rate (200 frames) pass — the bucket starts empty after the burst above.
        let passed = offer(&p, &pool, 32, 1250, 10_000, 2);
        assert!(
            (199..=200).contains(&passed),
            "2 s at 1000 kbit/s of 10-kbit frames: {passed}"
        );
    }

    #[test]
    fn packet_rate_refills_and_caps_at_burst() {
        let pool = Pool::with_frames(64);
        // 10 kpps, burst 1 kpkt.
        let p = PortPolicer::new(kpps(10, 1));
        let mut b = frames(&pool, 32, 64);
        let mut t = SEC;
        let burst: u32 = (0..40)
            .map(|_| p.police(t, b.as_slice()).count_ones())
            .sum();
        assert_eq!(burst, 1000, "a full bucket passes exactly its burst");
        // 1 ms later: 10 packets.
        t += 1_000_000;
        assert_eq!(p.police(t, b.as_slice()).count_ones(), 10);
        // An hour idle refills to the burst only.
        t += 3600 * SEC;
        let again: u32 = (0..40)
            .map(|_| p.police(t, b.as_slice()).count_ones())
            .sum();
        assert_eq!(again, 1000);
        b.free_into(&mut pool.cache());
        // Sustained: batches every 100 µs for 1 s pass 10,000 (+ a bucket's worth at most).
        let p = PortPolicer::new(kpps(10, 1));
        let passed = offer(&p, &pool, 32, 64, 100_000, 1);
        assert!((10_000..=11_000).contains(&passed), "{passed}");
    }

    #[test]
    fn both_rates_the_tighter_wins_and_set_changes_them() {
        let pool = Pool::with_frames(64);
        // 100 kpps but only 1000 kbit/s of 125-byte (1 kbit) frames: ~1000 pps.
        let p = PortPolicer::new(Policing {
            rate_kbps: 1000,
            burst_kbit: 13,
            rate_kpps: 100,
            burst_kpkts: 1,
        });
        let passed = offer(&p, &pool, 32, 125, 100_000, 1);
        assert!((1000..=1013).contains(&passed), "{passed}");
        p.set(Policing::default());
        assert!(!p.is_on());
        p.set(kpps(1, 1));
        assert_eq!(p.policing(), kpps(1, 1));
        assert!(p.is_on());
    }

    #[test]
    fn one_bucket_per_port_whatever_the_threads() {
        let pool = Pool::with_frames(256);
        let ps = Arc::new(Policers::default());
        ps.set(7, kpps(1, 1));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let p = ps.port(7);
                let pool = pool.clone();
                std::thread::spawn(move || {
                    let mut b = frames(&pool, 32, 64);
                    let n: u32 = (0..100)
                        .map(|_| p.police(SEC, b.as_slice()).count_ones())
                        .sum();
                    b.free_into(&mut pool.cache());
                    n
                })
            })
            .collect();
        let total: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total, 1000, "exactly the port's burst over four threads");
        assert!(!ps.port(8).is_on(), "other ports are not policed");
    }

    /// A port that polices before receive: records what it was told, drops 7.
    struct Early(Mutex<Vec<Policing>>);

    impl Port for Early {
        fn name(&self) -> &str {
            "early"
        }
        fn capabilities(&self) -> port::Capabilities {
            port::Capabilities::default()
        }
        fn open_rx(&self, _: u16) -> Result<Box<dyn port::RxQueue>, port::PortError> {
            Err(port::PortError::new("early", "no queues"))
        }
        fn open_tx(&self, _: u16) -> Result<Box<dyn port::TxQueue>, port::PortError> {
            Err(port::PortError::new("early", "no queues"))
        }
        fn stats(&self) -> port::PortStats {
            port::PortStats::default()
        }
        fn police_early(&self, p: &Policing) -> bool {
            self.0.lock().unwrap().push(*p);
            true
        }
        fn early_policed(&self) -> u64 {
            7
        }
    }

    #[test]
    fn a_port_that_polices_before_receive_gets_every_rate_and_its_drops_count() {
        let p = PortPolicer::new(kbps(1000, 100));
        let early = Arc::new(Early(Mutex::new(Vec::new())));
        let port: Arc<dyn Port> = early.clone();
        p.attach(&port);
        p.set(kpps(5, 1));
        assert_eq!(*early.0.lock().unwrap(), [kbps(1000, 100), kpps(5, 1)]);
        assert_eq!(p.early_drops(), 7);
        // An unplugged port is let go: no more rates, no more drops.
        drop(port);
        drop(early);
        p.set(Policing::default());
        assert_eq!(p.early_drops(), 0);
    }
}

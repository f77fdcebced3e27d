//! `null`: an endless packet source and a counting sink, the benchmark port.
//!
//! Receive builds packets from a template frame: allocate from the queue's own
//! [`PoolCache`], copy the template in whole 64-byte chunks ([`packet::vary::Template`]:
//! inline vector moves, no call to `memcpy`; the frame's tailroom takes the overhang), write
//! the configured [`Vary`] fields (which keep the IPv4 and L4 checksums right, see [`vary`]). It fills
//! up to `batch.room()` packets per call and stops for good after `limit` packets. When the
//! pool runs dry it returns fewer (nothing is lost: the next call continues the sequence).
//!
//! Transmit counts packets and bytes and frees them; it never refuses a packet.
//!
//! Each open of the rx queue starts the sequence (and the limit) again from packet 0.

pub mod vary;

use std::sync::Arc;

use packet::vary::{Template, CHUNK};
use packet::{Batch, Pool, PoolCache, FRAME_SIZE, HEADROOM};

use crate::claim::{QueueClaim, QueueSlot};
use crate::template::UdpFrame;
use crate::{
    check_single_queue, Capabilities, Port, PortError, PortStats, QueueCounters, RxQueue, TxQueue,
};

pub use vary::Vary;

/// What a [`NullPort`] produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NullConfig {
    /// The frame every packet starts as (14 bytes up to the pool's [`Pool::max_data`]).
    pub template: Vec<u8>,
    /// Fields that change per packet.
    pub vary: Vec<Vary>,
    /// Stop producing after this many packets (`Some(0)`: a pure sink). `None`: endless.
    pub limit: Option<u64>,
}

impl Default for NullConfig {
    /// The default 64-byte UDP template ([`UdpFrame::default`]), no vary, endless.
    fn default() -> Self {
        NullConfig {
            template: UdpFrame::default().build(),
            vary: Vec::new(),
            limit: None,
        }
    }
}

/// A source/sink port; see the [module docs](self).
pub struct NullPort {
    name: String,
    pool: Pool,
    template: Template,
    plan: vary::Plan,
    limit: Option<u64>,
    rx_slot: QueueSlot,
    tx_slot: QueueSlot,
    rx_counters: Arc<QueueCounters>,
    tx_counters: Arc<QueueCounters>,
}

impl std::fmt::Debug for NullPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NullPort")
            .field("name", &self.name)
            .field("template_len", &self.template.len())
            .field("limit", &self.limit)
            .finish()
    }
}

impl NullPort {
    /// A null port named `name` producing `cfg`'s packets from `pool`. Errors when the
    /// template does not fit a pool frame or a vary does not fit the template.
    pub fn new(name: &str, cfg: NullConfig, pool: &Pool) -> Result<NullPort, PortError> {
        let max = pool.max_data();
        if cfg.template.len() < 14 || cfg.template.len() > max {
            return Err(PortError::new(
                name,
                format!(
                    "template of {} bytes: give 14 (an Ethernet header) to {max} bytes",
                    cfg.template.len()
                ),
            ));
        }
        let plan =
            vary::Plan::new(&cfg.template, &cfg.vary).map_err(|e| PortError::new(name, e))?;
        Ok(NullPort {
            name: name.to_string(),
            pool: pool.clone(),
            template: Template::new(&cfg.template),
            plan,
            limit: cfg.limit,
            rx_slot: QueueSlot::default(),
            tx_slot: QueueSlot::default(),
            rx_counters: Arc::default(),
            tx_counters: Arc::default(),
        })
    }
}

impl Port for NullPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // A pure sink (`null:sink`) never receives: no rx queue, so no thread polls it.
            rx_queues: u16::from(self.limit != Some(0)),
            tx_queues: 1,
            vnet_hdr: false,
            max_frame: self.pool.max_data() as u32,
        }
    }

    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        check_single_queue(&self.name, "null", "rx", queue)?;
        let claim = self.rx_slot.claim(&self.name, "rx queue 0")?;
        Ok(Box::new(NullRx {
            cache: self.pool.cache(),
            template: self.template.clone(),
            plan: self.plan.clone(),
            left: self.limit.unwrap_or(u64::MAX),
            counters: self.rx_counters.clone(),
            _claim: claim,
        }))
    }

    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        check_single_queue(&self.name, "null", "tx", queue)?;
        let claim = self.tx_slot.claim(&self.name, "tx queue 0")?;
        Ok(Box::new(NullTx {
            cache: self.pool.cache(),
            counters: self.tx_counters.clone(),
            _claim: claim,
        }))
    }

    fn stats(&self) -> PortStats {
        PortStats::from_queues(&self.rx_counters, &self.tx_counters)
    }
}

// A template fills a new packet whole: templates are at most the pool's frame size - HEADROOM
// bytes, and that is a multiple of a chunk for every frame size.
const _: () =
    assert!((FRAME_SIZE - HEADROOM).is_multiple_of(CHUNK) && FRAME_SIZE.is_multiple_of(CHUNK));

/// The source.
struct NullRx {
    cache: PoolCache,
    template: Template,
    plan: vary::Plan,
    /// Packets still to produce (`u64::MAX` when endless).
    left: u64,
    counters: Arc<QueueCounters>,
    _claim: QueueClaim,
}

impl RxQueue for NullRx {
    #[inline]
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let want = (batch.room() as u64).min(self.left) as usize;
        let mut made = 0;
        while made < want {
            let Some(mut pkt) = self.cache.alloc() else {
                break;
            };
            if !self.template.fill(&mut pkt, 0) {
                self.cache.free(pkt);
                break;
            }
            self.plan.apply(pkt.data_mut());
            let pushed = batch.push(pkt);
            // Cannot fail: made < room.
            debug_assert!(pushed.is_ok());
            made += 1;
        }
        if made > 0 {
            if self.left != u64::MAX {
                self.left -= made as u64;
            }
            self.counters
                .add(made as u64, (made * self.template.len()) as u64);
        }
        made
    }
}

/// The sink.
struct NullTx {
    cache: PoolCache,
    counters: Arc<QueueCounters>,
    _claim: QueueClaim,
}

impl TxQueue for NullTx {
    #[inline]
    fn send(&mut self, batch: &mut Batch) -> usize {
        let n = batch.len();
        let mut bytes = 0;
        for pkt in batch.drain() {
            bytes += pkt.len();
            self.cache.free(pkt);
        }
        self.counters.add_batch(n, bytes as u64, 0);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_fills_batches_until_the_limit() {
        let pool = Pool::with_frames(256);
        let cfg = NullConfig {
            vary: vec![Vary {
                offset: 34,
                width: 2,
                base: 5000,
                count: 1000,
                random: false,
            }],
            limit: Some(40),
            ..NullConfig::default()
        };
        let port = NullPort::new("null0", cfg, &pool).unwrap();
        let mut rx = port.open_rx(0).unwrap();
        let mut tx = port.open_tx(0).unwrap();
        let mut batch = Batch::new();
        assert_eq!(rx.recv(&mut batch), 32);
        assert_eq!(&batch[31].data()[34..36], &5031u16.to_be_bytes());
        assert_eq!(tx.send(&mut batch), 32);
        assert_eq!(rx.recv(&mut batch), 8);
        assert_eq!(rx.recv(&mut batch), 0);
        assert_eq!(tx.send(&mut batch), 8);
        let s = port.stats();
        assert_eq!((s.rx_packets, s.rx_bytes), (40, 40 * 64));
        assert_eq!((s.tx_packets, s.tx_bytes), (40, 40 * 64));
        drop((rx, tx, port));
        assert_eq!(pool.shared_free(), 256);
    }

    #[test]
    fn endless_source_stops_at_pool_exhaustion_and_resumes() {
        let pool = Pool::with_frames(40);
        let port = NullPort::new("null0", NullConfig::default(), &pool).unwrap();
        let mut rx = port.open_rx(0).unwrap();
        let mut cache = pool.cache();
        let mut a = Batch::new();
        let mut b = Batch::new();
        assert_eq!(rx.recv(&mut a), 32);
        assert_eq!(rx.recv(&mut b), 8);
        assert_eq!(rx.recv(&mut b), 0);
        a.free_into(&mut cache);
        drop(cache);
        assert_eq!(rx.recv(&mut b), 24);
        assert_eq!(b[0].data(), &UdpFrame::default().build()[..]);
        assert_eq!(port.stats().rx_dropped, 0);
    }

    #[test]
    fn bad_templates_are_refused() {
        let pool = Pool::with_frames(4);
        let cfg = NullConfig {
            template: vec![0; 10],
            ..NullConfig::default()
        };
        let err = NullPort::new("n", cfg, &pool).unwrap_err();
        assert!(err.to_string().contains("template of 10 bytes"), "{err}");
        let cfg = NullConfig {
            template: vec![0; FRAME_SIZE],
            ..NullConfig::default()
        };
        assert!(NullPort::new("n", cfg, &pool).is_err());
        let cfg = NullConfig {
            vary: vec![Vary {
                offset: 100,
                width: 2,
                base: 0,
                count: 1,
                random: false,
            }],
            ..NullConfig::default()
        };
        let err = NullPort::new("n", cfg, &pool).unwrap_err();
        assert!(err.to_string().starts_with("port n: vary #0"), "{err}");
    }

    /// Not a check: how fast the source makes packets with an IPv4 source and a UDP port
    /// varied (checksums kept), the best of 5 rounds of 10 million.
    /// `cargo test --release -p port --lib null::tests::source_speed -- --ignored --nocapture`
    #[test]
    #[ignore = "benchmark: run with --release -- --ignored --nocapture"]
    fn source_speed() {
        let pool = Pool::with_frames(4096);
        let vary = |offset, width, base, count| Vary {
            offset,
            width,
            base,
            count,
            random: false,
        };
        let cfg = NullConfig {
            vary: vec![vary(26, 4, 0x0a00_0000, 100_000), vary(34, 2, 1024, 4096)],
            ..NullConfig::default()
        };
        let port = NullPort::new("speed", cfg, &pool).unwrap();
        let mut rx = port.open_rx(0).unwrap();
        let mut cache = pool.cache();
        let mut batch = Batch::new();
        let n = 10_000_000;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let mut made = 0;
            while made < n {
                made += rx.recv(&mut batch);
                batch.free_into(&mut cache);
            }
            best = best.min(t.elapsed().as_secs_f64() * 1e9 / made as f64);
        }
        println!("null source, two varied fields: {best:.2} ns per packet");
    }

    #[test]
    fn sink_mode_produces_nothing() {
        let pool = Pool::with_frames(4);
        let cfg = NullConfig {
            limit: Some(0),
            ..NullConfig::default()
        };
        let port = NullPort::new("sink", cfg, &pool).unwrap();
        let mut rx = port.open_rx(0).unwrap();
        let mut batch = Batch::new();
        assert_eq!(rx.recv(&mut batch), 0);
        assert!(port.open_rx(0).is_err());
    }
}

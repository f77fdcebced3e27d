//! A sending thread's packet source: fills batches from the templates, one flow, one size
//! and one probe per packet. Allocation-free: frames come from the thread's own pool cache.

use packet::vary::Picker;
use packet::{Batch, PoolCache};

use crate::probe::Probe;
use crate::template::{Frame, Templates, Traffic};

/// Per-flow counters are kept for at most this many flows (the rest are counted together).
pub const PER_FLOW_MAX: u32 = 65_536;

/// Distinct 64-byte offsets at which frames start in their buffers.
const SPREAD: usize = 16;

/// Fills batches for one stream.
#[derive(Debug)]
pub struct Source {
    frames: Vec<Frame>,
    pattern: Vec<u8>,
    pat_i: usize,
    /// The next flow.
    flows: Picker,
    single_flow: bool,
    stream: u8,
    seq: u32,
    /// Packets sent per flow (the first [`PER_FLOW_MAX`] flows).
    pub flow_tx: Vec<u64>,
    /// Packets of flows beyond [`PER_FLOW_MAX`].
    pub flow_tx_other: u64,
    /// Packets too short to carry a probe (sent, counted, not sequenced).
    pub unprobed: u64,
}

impl Source {
    /// A source of `traffic` (already compiled into `templates`) for stream `stream`.
    pub fn new(traffic: &Traffic, templates: &Templates, stream: u8) -> Source {
        let tracked = traffic.flows.min(PER_FLOW_MAX) as usize;
        Source {
            frames: templates.frames.clone(),
            pattern: templates.pattern.clone(),
            pat_i: 0,
            flows: Picker::new(
                traffic.flows,
                traffic.random,
                0x9e37_79b9 ^ (u32::from(stream) << 16 | 1),
            ),
            single_flow: traffic.flows == 1,
            stream,
            seq: 0,
            flow_tx: vec![0; tracked],
            flow_tx_other: 0,
            unprobed: 0,
        }
    }

    /// Packets made so far (the next sequence number, before it wraps).
    pub fn seq(&self) -> u32 {
        self.seq
    }

    #[inline(always)]
    fn flow(&mut self) -> u32 {
        if self.single_flow {
            return 0;
        }
        self.flows.pick()
    }

    /// Appends up to `n` new packets to `batch` (fewer when the batch or the pool runs out),
    /// stamped with send time `now`. Returns (packets, bytes with FCS).
    #[inline]
    pub fn fill(
        &mut self,
        cache: &mut PoolCache,
        batch: &mut Batch,
        n: usize,
        now: u64,
    ) -> (usize, u64) {
        let n = n.min(batch.room());
        let mut bytes = 0u64;
        let mut made = 0;
        let mut seq = self.seq;
        let mut unprobed = 0;
        let single = self.pattern.len() == 1;
        while made < n {
            let Some(mut pkt) = cache.alloc() else { break };
            let fi = if single {
                0
            } else {
                let i = self.pattern[self.pat_i];
                self.pat_i = if self.pat_i + 1 == self.pattern.len() {
                    0
                } else {
                    self.pat_i + 1
                };
                usize::from(i)
            };
            let frame = &self.frames[fi];
            // Frames sit 2 KiB apart, so their first bytes would share two L1 cache sets;
            // starting each a multiple of 64 bytes further in spreads them over 32.
            let shift = (pkt.frame() as usize % SPREAD) * 64;
            let shift = if shift <= frame.max_shift { shift } else { 0 };
            if !frame.fill(&mut pkt, shift) {
                cache.free(pkt);
                break;
            }
            let flow = self.flow();
            let probe = Probe {
                stream: self.stream,
                flow,
                seq,
                time: now,
            };
            let frame = &self.frames[fi];
            frame.rewrite(pkt.data_mut(), flow, &probe);
            bytes += frame.size() as u64;
            unprobed += u64::from(!frame.probe);
            seq = seq.wrapping_add(1);
            match self.flow_tx.get_mut(flow as usize) {
                Some(c) => *c += 1,
                None => self.flow_tx_other += 1,
            }
            if let Err(p) = batch.push(pkt) {
                cache.free(p);
                break;
            }
            made += 1;
        }
        self.seq = seq;
        self.unprobed += unprobed;
        (made, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::Sizes;
    use packet::Pool;

    #[test]
    fn fills_flows_sizes_and_sequence() {
        let traffic = Traffic {
            flows: 3,
            sizes: Sizes::Imix,
            ..Traffic::default()
        };
        let t = traffic.compile().unwrap();
        let mut src = Source::new(&traffic, &t, 4);
        let pool = Pool::with_frames(128);
        let mut cache = pool.cache();
        let mut batch = Batch::new();
        let (n, bytes) = src.fill(&mut cache, &mut batch, 12, 77);
        assert_eq!(n, 12);
        assert_eq!(bytes, 7 * 64 + 4 * 570 + 1518);
        for (i, p) in batch.as_slice().iter().enumerate() {
            let probe = Probe::read(p.data()).unwrap();
            assert_eq!(
                (probe.stream, probe.seq, probe.flow, probe.time),
                (4, i as u32, i as u32 % 3, 77)
            );
            assert_eq!(
                p.data()[29],
                1 + (i % 3) as u8,
                "source address of packet {i}"
            );
        }
        assert_eq!(src.flow_tx, vec![4, 4, 4]);
        batch.free_into(&mut cache);
    }

    #[test]
    fn jumbo_frames_fill_pool_frames_of_the_size_they_need() {
        use packet::{PoolConfig, HEADROOM};
        for proto in [
            crate::template::Proto::Udp4,
            crate::template::Proto::Tcp4,
            crate::template::Proto::Udp6,
        ] {
            let traffic = Traffic {
                proto,
                flows: 5,
                sizes: Sizes::Fixed(9000),
                ..Traffic::default()
            };
            assert!(
                traffic.compile().is_err(),
                "9000 bytes do not fit 2 KiB frames"
            );
            let frame_size = traffic.pool_frame_size().unwrap();
            assert_eq!(frame_size, 16384);
            let pool = Pool::new(&PoolConfig {
                frames: 256,
                frame_size,
                ..PoolConfig::default()
            })
            .unwrap();
            let t = traffic.compile_for(frame_size - HEADROOM).unwrap();
            let mut src = Source::new(&traffic, &t, 1);
            let mut cache = pool.cache();
            let mut batch = Batch::new();
            let (n, bytes) = src.fill(&mut cache, &mut batch, 32, 5);
            assert_eq!((n, bytes), (32, 32 * 9000));
            for (i, p) in batch.as_slice().iter().enumerate() {
                assert_eq!(p.len(), 8996);
                let probe = Probe::read(p.data()).unwrap();
                assert_eq!((probe.seq, probe.flow), (i as u32, i as u32 % 5));
                assert_eq!(&p.data()[..6], &traffic.dst_mac);
            }
            batch.free_into(&mut cache);
        }
    }

    #[test]
    fn random_flows_stay_in_range() {
        let traffic = Traffic {
            flows: 10,
            random: true,
            ..Traffic::default()
        };
        let t = traffic.compile().unwrap();
        let mut src = Source::new(&traffic, &t, 0);
        for _ in 0..1000 {
            assert!(src.flow() < 10);
        }
    }

    /// Not a check: how fast a source makes 64-byte frames (one flow, and 1,000 flows in
    /// turn), the best of 5 rounds of 10 million.
    /// `cargo test --release -p hayate-gen --lib source::tests::fill_speed -- --ignored --nocapture`
    #[test]
    #[ignore = "benchmark: run with --release -- --ignored --nocapture"]
    fn fill_speed() {
        for flows in [1, 1000] {
            let traffic = Traffic {
                flows,
                ..Traffic::default()
            };
            let t = traffic.compile().unwrap();
            let mut src = Source::new(&traffic, &t, 0);
            let pool = Pool::with_frames(4096);
            let mut cache = pool.cache();
            let mut batch = Batch::new();
            let n = 10_000_000;
            let mut best = f64::MAX;
            for _ in 0..5 {
                let start = std::time::Instant::now();
                let mut made = 0;
                while made < n {
                    made += src.fill(&mut cache, &mut batch, 32, made as u64).0;
                    batch.free_into(&mut cache);
                }
                best = best.min(start.elapsed().as_secs_f64() * 1e9 / made as f64);
            }
            println!("generator source, {flows} flow(s): {best:.2} ns per packet");
        }
    }
}

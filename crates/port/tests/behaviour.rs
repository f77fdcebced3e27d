//! One behaviour suite run against every port backend where each check applies:
//! - what is sent comes back with the same bytes, in the same order (ring, pcap);
//! - `send` on a full queue keeps the unsent packets in the batch, in order (ring); backends
//!   that never fill take everything (null, pcap);
//! - stats count packets and bytes on both sides;
//! - every pool frame is back in the pool once everything is dropped;
//! - each queue has one owner at a time.

use std::path::PathBuf;
use std::sync::Arc;

use packet::{Batch, Pool, PoolConfig, BATCH_SIZE, FRAME_SIZE, MAX_FRAME_SIZE};
use port::null::{NullConfig, NullPort, Vary};
use port::pcap::{PcapConfig, PcapPort};
use port::{ring, Port, PortStats};

const POOL_FRAMES: u32 = 1024;

/// A backend whose sent frames can be received back, maybe from a second port.
trait Loopback {
    fn name(&self) -> &'static str;
    /// The port to send on.
    fn sender(&mut self, pool: &Pool) -> Arc<dyn Port>;
    /// The port that receives what was sent (asked for after the tx queue is dropped).
    fn receiver(&mut self, pool: &Pool) -> Arc<dyn Port>;
}

struct RingLoop {
    far_end: Option<Arc<ring::RingPort>>,
}

impl Loopback for RingLoop {
    fn name(&self) -> &'static str {
        "ring"
    }
    fn sender(&mut self, pool: &Pool) -> Arc<dyn Port> {
        let (a, b) = ring::pair("a", "b", 512, pool);
        self.far_end = Some(b);
        a
    }
    fn receiver(&mut self, _pool: &Pool) -> Arc<dyn Port> {
        self.far_end.take().expect("sender first")
    }
}

struct PcapLoop {
    file: PathBuf,
}

impl PcapLoop {
    fn new(tag: &str) -> PcapLoop {
        let dir = std::env::temp_dir().join(format!("hayate-behaviour-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        PcapLoop {
            file: dir.join(format!("{tag}.pcap")),
        }
    }
}

impl Drop for PcapLoop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

impl Loopback for PcapLoop {
    fn name(&self) -> &'static str {
        "pcap"
    }
    fn sender(&mut self, pool: &Pool) -> Arc<dyn Port> {
        let cfg = PcapConfig {
            output: Some(self.file.clone()),
            ..PcapConfig::default()
        };
        Arc::new(PcapPort::new("pcap-out", cfg, pool).unwrap())
    }
    fn receiver(&mut self, pool: &Pool) -> Arc<dyn Port> {
        let cfg = PcapConfig {
            input: Some(self.file.clone()),
            loops: 1,
            ..PcapConfig::default()
        };
        Arc::new(PcapPort::new("pcap-in", cfg, pool).unwrap())
    }
}

fn loopbacks(tag: &str) -> Vec<Box<dyn Loopback>> {
    vec![
        Box::new(RingLoop { far_end: None }),
        Box::new(PcapLoop::new(tag)),
    ]
}

/// 300 frames of every size class up to the largest a frame of `pool` holds, each numbered.
fn frames(pool: &Pool) -> Vec<Vec<u8>> {
    let max = pool.max_data();
    (0..300usize)
        .map(|i| {
            let len = match i % 4 {
                0 => 60,
                1 => 1 + (i * 37) % max,
                2 => max,
                _ => 14 + i % 100,
            };
            let mut f: Vec<u8> = (0..len).map(|b| (b * 31 + i) as u8).collect();
            f[0] = (i >> 8) as u8;
            if len > 1 {
                f[1] = i as u8;
            }
            f
        })
        .collect()
}

fn total_bytes(frames: &[Vec<u8>]) -> u64 {
    frames.iter().map(|f| f.len() as u64).sum()
}

/// Sends `frames` on `port`'s tx queue 0 in batches; every send must take the whole batch.
fn send_all(port: &dyn Port, pool: &Pool, frames: &[Vec<u8>]) {
    let mut tx = port.open_tx(0).unwrap();
    let mut cache = pool.cache();
    for chunk in frames.chunks(BATCH_SIZE - 3) {
        let mut batch = Batch::new();
        for f in chunk {
            batch.push(cache.alloc_from(f).unwrap()).unwrap();
        }
        assert_eq!(
            tx.send(&mut batch),
            chunk.len(),
            "{}: send took less",
            port.name()
        );
        assert!(batch.is_empty());
    }
    tx.flush();
}

/// Receives on `port`'s rx queue 0 until it stops giving packets.
fn recv_all(port: &dyn Port, pool: &Pool) -> Vec<Vec<u8>> {
    let mut rx = port.open_rx(0).unwrap();
    let mut cache = pool.cache();
    let mut got = Vec::new();
    let mut batch = Batch::new();
    while rx.recv(&mut batch) > 0 {
        got.extend(batch.as_slice().iter().map(|p| p.data().to_vec()));
        batch.free_into(&mut cache);
    }
    got
}

#[test]
fn send_then_receive_preserves_bytes_order_and_counts() {
    // Default 2 KiB frames, and 16 KiB frames carrying jumbo frames.
    for (frame_size, mut lb) in loopbacks("roundtrip")
        .into_iter()
        .map(|lb| (FRAME_SIZE, lb))
        .chain(
            loopbacks("roundtrip-jumbo")
                .into_iter()
                .map(|lb| (MAX_FRAME_SIZE, lb)),
        )
    {
        let pool = Pool::new(&PoolConfig {
            frames: POOL_FRAMES,
            frame_size,
            ..PoolConfig::default()
        })
        .unwrap();
        let sent = frames(&pool);
        let sender = lb.sender(&pool);
        assert_eq!(
            sender.capabilities().max_frame as usize,
            pool.max_data(),
            "{}: max_frame",
            lb.name()
        );
        send_all(&*sender, &pool, &sent);
        let receiver = lb.receiver(&pool);
        let got = recv_all(&*receiver, &pool);
        assert_eq!(got.len(), sent.len(), "{}: packet count", lb.name());
        assert!(got == sent, "{}: bytes or order changed", lb.name());

        let tx = sender.stats();
        let rx = receiver.stats();
        let n = sent.len() as u64;
        assert_eq!(
            (tx.tx_packets, tx.tx_bytes),
            (n, total_bytes(&sent)),
            "{}",
            lb.name()
        );
        assert_eq!(
            (rx.rx_packets, rx.rx_bytes),
            (n, total_bytes(&sent)),
            "{}",
            lb.name()
        );
        assert_eq!(
            (tx.tx_errors, rx.rx_errors, rx.rx_dropped),
            (0, 0, 0),
            "{}",
            lb.name()
        );

        drop((sender, receiver, lb));
        assert_eq!(pool.shared_free(), POOL_FRAMES as usize, "frames leaked");
    }
}

#[test]
fn full_ring_keeps_unsent_packets_in_the_batch() {
    let pool = Pool::with_frames(POOL_FRAMES);
    let (a, b) = ring::pair("a", "b", 8, &pool);
    let mut tx = a.open_tx(0).unwrap();
    let mut cache = pool.cache();
    let mut batch = Batch::new();
    for i in 0..BATCH_SIZE {
        batch
            .push(cache.alloc_from(&[i as u8; 10]).unwrap())
            .unwrap();
    }
    assert_eq!(tx.send(&mut batch), 8);
    assert_eq!(batch.len(), BATCH_SIZE - 8);
    let left: Vec<u8> = batch.as_slice().iter().map(|p| p.data()[0]).collect();
    assert_eq!(left, (8..BATCH_SIZE as u8).collect::<Vec<_>>());
    assert_eq!(tx.send(&mut batch), 0, "still full");
    assert_eq!(a.stats().tx_packets, 8);
    assert_eq!(a.stats().tx_bytes, 80);

    // The caller frees what was not sent; the 8 in the ring come back when the ring goes.
    batch.free_into(&mut cache);
    drop((tx, cache, a, b));
    assert_eq!(pool.shared_free(), POOL_FRAMES as usize);
}

#[test]
fn sinks_never_fill() {
    let pcap = PcapLoop::new("sink");
    let out = pcap.file.clone();
    type Make = Box<dyn Fn(&Pool) -> Arc<dyn Port>>;
    let backends: [(&str, Make); 2] = [
        (
            "null",
            Box::new(|pool| Arc::new(NullPort::new("null", NullConfig::default(), pool).unwrap())),
        ),
        (
            "pcap",
            Box::new(move |pool| {
                let cfg = PcapConfig {
                    output: Some(out.clone()),
                    ..PcapConfig::default()
                };
                Arc::new(PcapPort::new("pcap", cfg, pool).unwrap())
            }),
        ),
    ];
    for (name, make) in backends {
        let pool = Pool::with_frames(POOL_FRAMES);
        let port = make(&pool);
        // 40 full batches: more than any buffer of the port holds.
        let sent: Vec<Vec<u8>> = (0..40 * BATCH_SIZE).map(|i| vec![i as u8; 64]).collect();
        let mut tx = port.open_tx(0).unwrap();
        let mut cache = pool.cache();
        for chunk in sent.chunks(BATCH_SIZE) {
            let mut batch = Batch::new();
            for f in chunk {
                batch.push(cache.alloc_from(f).unwrap()).unwrap();
            }
            assert_eq!(tx.send(&mut batch), BATCH_SIZE, "{name}");
            assert!(batch.is_empty(), "{name}");
        }
        let s = port.stats();
        assert_eq!(
            (s.tx_packets, s.tx_bytes),
            (sent.len() as u64, 64 * sent.len() as u64),
            "{name}"
        );
        drop((tx, cache, port));
        assert_eq!(
            pool.shared_free(),
            POOL_FRAMES as usize,
            "{name}: frames leaked"
        );
    }
}

#[test]
fn null_source_produces_the_template_in_sequence_and_counts() {
    let pool = Pool::with_frames(POOL_FRAMES);
    let template = port::template::UdpFrame {
        size: 100,
        ..Default::default()
    }
    .build();
    let cfg = NullConfig {
        template: template.clone(),
        vary: vec![Vary {
            offset: 36,
            width: 2,
            base: 100,
            count: 1000,
            random: false,
        }],
        limit: Some(500),
    };
    let port = NullPort::new("null", cfg, &pool).unwrap();
    let got = recv_all(&port, &pool);
    assert_eq!(got.len(), 500);
    for (i, f) in got.iter().enumerate() {
        assert_eq!(&f[..36], &template[..36]);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]) as usize, 100 + i);
        assert_eq!(&f[38..], &template[38..]);
    }
    let s: PortStats = port.stats();
    assert_eq!((s.rx_packets, s.rx_bytes), (500, 500 * 100));
    drop(port);
    assert_eq!(pool.shared_free(), POOL_FRAMES as usize);
}

#[test]
fn every_queue_has_one_owner_at_a_time() {
    let pool = Pool::with_frames(64);
    let mut ports: Vec<Arc<dyn Port>> = Vec::new();
    let (a, _b) = ring::pair("a", "b", 8, &pool);
    ports.push(a);
    ports.push(Arc::new(
        NullPort::new("null", NullConfig::default(), &pool).unwrap(),
    ));
    let mut pcap = PcapLoop::new("owner");
    let writer = pcap.sender(&pool);
    drop(writer);
    let cfg = PcapConfig {
        input: Some(pcap.file.clone()),
        output: Some(pcap.file.with_extension("out.pcap")),
        loops: 1,
    };
    ports.push(Arc::new(PcapPort::new("pcap", cfg, &pool).unwrap()));
    for port in &ports {
        let rx = port.open_rx(0).unwrap();
        assert!(port.open_rx(0).is_err(), "{}: second rx open", port.name());
        let tx = port.open_tx(0).unwrap();
        assert!(port.open_tx(0).is_err(), "{}: second tx open", port.name());
        drop((rx, tx));
        assert!(
            port.open_rx(0).is_ok(),
            "{}: reopen after drop",
            port.name()
        );
        assert!(
            port.open_tx(0).is_ok(),
            "{}: reopen after drop",
            port.name()
        );
        assert!(port.open_rx(1).is_err(), "{}: queue 1", port.name());
    }
    let _ = std::fs::remove_file(pcap.file.with_extension("out.pcap"));
}

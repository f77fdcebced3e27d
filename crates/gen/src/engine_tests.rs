//! Runs on in-memory ports: ring loopback, null sink pacing, pcap replay with injected
//! loss, reordering and duplicates, a rate-limited device for RFC 2544, and the JSON schema.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use packet::{Batch, Pool};
use port::Port;

use super::*;
use crate::probe::{Probe, PROBE_LEN};
use crate::rfc2544::{self, PortDut, Rfc2544Config};

fn tsc() -> Tsc {
    Tsc::calibrate(Duration::from_millis(20))
}

use crate::test_serial::serial;

fn keys(v: serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

fn sorted(k: &[&str]) -> Vec<String> {
    let mut k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
    k.sort();
    k
}

fn open(spec: &str, pool: &Pool) -> (Arc<dyn Port>, String) {
    (port::open(spec, pool).unwrap(), spec.to_string())
}

fn unique(name: &str) -> String {
    format!(
        "{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    )
}

#[test]
fn ring_loopback_delivers_every_packet_in_order() {
    let _serial = serial();
    let pool = Pool::with_frames(8192);
    let ring = format!("ring:{}", unique("loop"));
    let ports = Ports {
        tx: Some(open(&ring, &pool)),
        rx: Some(open(&ring, &pool)),
    };
    let cfg = RunConfig {
        count: Some(100_000),
        traffic: Traffic {
            flows: 10,
            sizes: crate::template::Sizes::Imix,
            ..Traffic::default()
        },
        ..RunConfig::default()
    };
    let r = run(&cfg, &ports, &pool, tsc(), &mut |_| {}).unwrap();
    assert_eq!(
        (r.tx_packets, r.rx_packets, r.rx_unique),
        (100_000, 100_000, 100_000)
    );
    assert_eq!(
        (r.lost, r.reordered, r.duplicates, r.rx_foreign),
        (0, 0, 0, 0)
    );
    assert_eq!(r.tx_bytes, r.rx_bytes);
    assert_eq!(r.flows.len(), 10);
    assert!(r.flows.iter().all(|f| f.tx == 10_000 && f.rx == 10_000));
    let l = r.latency.unwrap();
    assert_eq!(l.samples, 100_000);
    assert!(l.min_ns > 0 && l.min_ns <= l.p50_ns && l.p50_ns <= l.max_ns);
    drop(ports);
    assert_eq!(pool.shared_free(), 8192, "every frame back in the pool");
}

/// A port with two queues: queue *i* sends into ring *i* and receives from it.
struct TwoQueues {
    rings: Vec<(Arc<port::ring::RingPort>, Arc<port::ring::RingPort>)>,
}

impl Port for TwoQueues {
    fn name(&self) -> &str {
        "two-queues"
    }
    fn capabilities(&self) -> port::Capabilities {
        port::Capabilities {
            rx_queues: 2,
            tx_queues: 2,
            vnet_hdr: false,
            max_frame: 1920,
        }
    }
    fn open_rx(&self, q: u16) -> Result<Box<dyn port::RxQueue>, port::PortError> {
        self.rings[usize::from(q)].1.open_rx(0)
    }
    fn open_tx(&self, q: u16) -> Result<Box<dyn port::TxQueue>, port::PortError> {
        self.rings[usize::from(q)].0.open_tx(0)
    }
    fn stats(&self) -> port::PortStats {
        port::PortStats::default()
    }
}

#[test]
fn two_threads_send_and_receive_on_two_queues() {
    let _serial = serial();
    let pool = Pool::with_frames(16384);
    let port: Arc<dyn Port> = Arc::new(TwoQueues {
        rings: (0..2)
            .map(|i| port::ring::pair(&format!("q{i}.a"), &format!("q{i}.b"), 1024, &pool))
            .collect(),
    });
    let ports = Ports {
        tx: Some((port.clone(), "two-queues".into())),
        rx: Some((port, "two-queues".into())),
    };
    let cfg = RunConfig {
        threads: 2,
        count: Some(100_001),
        pps: Some(2e6),
        traffic: Traffic {
            flows: 4,
            ..Traffic::default()
        },
        ..RunConfig::default()
    };
    let r = run(&cfg, &ports, &pool, tsc(), &mut |_| {}).unwrap();
    assert_eq!((r.tx_packets, r.rx_unique, r.lost), (100_001, 100_001, 0));
    let per_stream: Vec<(u8, u64)> = r.streams.iter().map(|s| (s.stream, s.unique)).collect();
    assert_eq!(per_stream, vec![(0, 50_001), (1, 50_000)]);
    assert!(r.flows.iter().all(|f| f.tx == f.rx));
}

#[test]
fn frames_without_probes_are_counted_by_number() {
    let _serial = serial();
    let pool = Pool::with_frames(8192);
    let ring = format!("ring:{}", unique("noprobe"));
    let ports = Ports {
        tx: Some(open(&ring, &pool)),
        rx: Some(open(&ring, &pool)),
    };
    // IMIX with a VLAN tag: the 64-byte frames are too short for a probe, the rest carry one.
    let cfg = RunConfig {
        count: Some(12_000),
        traffic: Traffic {
            sizes: crate::template::Sizes::Imix,
            vlan: Some(100),
            ..Traffic::default()
        },
        ..RunConfig::default()
    };
    let r = run(&cfg, &ports, &pool, tsc(), &mut |_| {}).unwrap();
    assert_eq!((r.tx_packets, r.tx_without_probe), (12_000, 7_000));
    assert_eq!(
        (r.rx_packets, r.rx_unique, r.rx_foreign),
        (12_000, 5_000, 7_000)
    );
    assert_eq!((r.lost, r.loss_pct), (0, 0.0));
    assert_eq!(r.latency.unwrap().samples, 5_000);
}

#[test]
fn pacer_holds_the_rate_on_a_null_sink() {
    let _serial = serial();
    let pool = Pool::with_frames(4096);
    let ports = Ports {
        tx: Some(open("null:sink", &pool)),
        rx: None,
    };
    let cfg = RunConfig {
        pps: Some(200_000.0),
        duration: 1.0,
        ..RunConfig::default()
    };
    let mut samples = 0;
    let r = run(&cfg, &ports, &pool, tsc(), &mut |_| samples += 1).unwrap();
    // A loose band: the machine is shared and noisy (a starved sender falls short; it must
    // never overshoot).
    assert!(
        (170_000..=205_000).contains(&r.tx_packets),
        "sent {} in {:.3} s",
        r.tx_packets,
        r.seconds
    );
    assert!((0.17..=0.205).contains(&r.tx_mpps), "{} Mpps", r.tx_mpps);
    assert!(samples >= 5, "{samples} samples");
    assert_eq!(
        ports.tx.as_ref().unwrap().0.stats().tx_packets,
        r.tx_packets
    );
}

/// A frame with a probe for stream 0.
fn probe_frame(seq: u32) -> Vec<u8> {
    let t = Traffic::default().compile().unwrap();
    let mut buf = vec![0u8; 64];
    t.frames[0].write(
        &mut buf,
        0,
        &Probe {
            stream: 0,
            flow: 0,
            seq,
            time: 0,
        },
    );
    buf.truncate(60);
    buf
}

#[test]
fn analyzer_counts_a_known_capture_exactly() {
    use pcap_file::pcap::{PcapPacket, PcapWriter};
    let dir = std::env::temp_dir().join(unique("hayate-gen-pcap"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("probes.pcap");
    // 0..1000 sent; 100 lost (every 10th), 50 pairs swapped, 20 duplicated, 5 foreign.
    let mut seqs: Vec<u32> = (0..1000).filter(|s| s % 10 != 3).collect();
    for i in 0..50 {
        seqs.swap(i * 17, i * 17 + 1);
    }
    let mut order = Vec::new();
    for (i, s) in seqs.iter().enumerate() {
        order.push(Some(*s));
        if i % 40 == 5 {
            order.push(Some(*s));
        }
        if i % 180 == 7 {
            order.push(None);
        }
    }
    let dups = seqs.iter().enumerate().filter(|(i, _)| i % 40 == 5).count() as u64;
    let foreign = seqs
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 180 == 7)
        .count() as u64;
    assert_eq!((dups, foreign), (23, 5));
    {
        let mut w = PcapWriter::new(std::fs::File::create(&file).unwrap()).unwrap();
        for s in &order {
            let data = match s {
                Some(s) => probe_frame(*s),
                None => vec![0x11; 60],
            };
            w.write_packet(&PcapPacket::new(Duration::ZERO, data.len() as u32, &data))
                .unwrap();
        }
    }
    let pool = Pool::with_frames(4096);
    let spec = format!("pcap:in={}", file.display());
    let ports = Ports {
        tx: None,
        rx: Some(open(&spec, &pool)),
    };
    let cfg = RunConfig {
        duration: 5.0,
        drain: 0.2,
        ..RunConfig::default()
    };
    let r = run(&cfg, &ports, &pool, tsc(), &mut |_| {}).unwrap();
    assert_eq!(r.rx_packets, 900 + dups + foreign);
    assert_eq!(r.rx_foreign, foreign);
    assert_eq!(r.rx_unique, 900);
    assert_eq!(r.duplicates, dups);
    assert_eq!(r.reordered, 50);
    assert_eq!(r.lost, 100);
    assert!((r.loss_pct - 10.0).abs() < 1e-9);
    assert_eq!(r.streams.len(), 1);
    assert_eq!(r.streams[0].highest, 1000);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Forwards from `input` to `output` at most `pps` packets per second (a device with a
/// fixed capacity); its input ring is its queue, and a full queue pushes back on the sender.
fn rate_limited_device(
    input: Arc<dyn Port>,
    output: Arc<dyn Port>,
    pool: Pool,
    pps: f64,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut rx = input.open_rx(0).unwrap();
        let mut tx = output.open_tx(0).unwrap();
        let mut cache = pool.cache();
        let start = Instant::now();
        let mut done = 0u64;
        let mut pending = Batch::new();
        let mut out = Batch::new();
        while !stop.load(Ordering::Relaxed) {
            let allowed = (start.elapsed().as_secs_f64() * pps) as u64;
            if pending.is_empty() && rx.recv(&mut pending) == 0 {
                // An idle device earns no credit (between trials, for instance).
                done = done.max(allowed);
                std::hint::spin_loop();
                continue;
            }
            let k = (allowed.saturating_sub(done) as usize).min(pending.len());
            for p in pending.drain_front(k) {
                let _ = out.push(p);
            }
            done += k as u64;
            // A full output waits (the receiver may be descheduled on a busy machine).
            while !out.is_empty() && !stop.load(Ordering::Relaxed) {
                tx.send(&mut out);
            }
            out.free_into(&mut cache);
        }
        pending.free_into(&mut cache);
    })
}

#[test]
fn rfc2544_finds_the_capacity_of_a_rate_limited_device() {
    let _serial = serial();
    let pool = Pool::with_frames(32768);
    let (a, b) = (
        format!("ring:{}", unique("dut-in")),
        format!("ring:{}", unique("dut-out")),
    );
    let tx = open(&format!("{a},capacity=4096"), &pool);
    let dut_in = port::open(&format!("{a},capacity=4096"), &pool).unwrap();
    let dut_out = port::open(&format!("{b},capacity=4096"), &pool).unwrap();
    let rx = open(&format!("{b},capacity=4096"), &pool);
    let stop = Arc::new(AtomicBool::new(false));
    let cap = 200_000.0;
    let dev = rate_limited_device(dut_in, dut_out, pool.clone(), cap, stop.clone());
    let mut dut = PortDut::new(
        tx,
        rx,
        pool.clone(),
        tsc(),
        RunConfig {
            drain: 0.05,
            ..RunConfig::default()
        },
    );
    // A 1 Gbit/s line: 1.488 Mpps of 64-byte frames, well above the device.
    let cfg = Rfc2544Config {
        sizes: vec![64],
        trial_secs: 0.2,
        line_bps: 1e9,
        resolution_pct: 2.0,
        max_trials: 8,
        frame_loss: false,
        back_to_back: false,
        ..Rfc2544Config::default()
    };
    let res = rfc2544::run(&cfg, &mut dut, &mut |l| eprintln!("{l}"));
    stop.store(true, Ordering::Relaxed);
    dev.join().unwrap();
    let r = &res.unwrap()[0];
    // Never above the device's capacity. Below it, loosely: the device paces by the wall
    // clock, so on a machine loaded past its cores (load 14 on 2 cores) it forwards less
    // and the search settles lower (0.35 of the capacity was seen there); a search that
    // found nothing, or only the first step, still fails.
    assert!(r.throughput_pps <= cap * 1.05, "{} pps", r.throughput_pps);
    assert!(r.throughput_pps >= cap * 0.2, "{} pps", r.throughput_pps);
    assert!(r.latency.is_some());
}

#[test]
fn json_schema_is_stable() {
    let r = RunReport::default();
    assert_eq!(
        keys(serde_json::to_value(&r).unwrap()),
        sorted(&[
            "tx_port",
            "rx_port",
            "traffic",
            "target_pps",
            "seconds",
            "tx_packets",
            "tx_bytes",
            "tx_pushback",
            "tx_without_probe",
            "rx_packets",
            "rx_bytes",
            "rx_foreign",
            "rx_unique",
            "duplicates",
            "reordered",
            "lost",
            "loss_pct",
            "tx_mpps",
            "tx_gbps",
            "rx_mpps",
            "rx_gbps",
            "latency_kind",
            "latency",
            "latency_histogram",
            "streams",
            "flows",
            "samples",
            "tsc_ghz",
            "worker_cpu_secs"
        ])
    );
    assert_eq!(
        keys(serde_json::to_value(crate::report::Latency::default()).unwrap()),
        sorted(&[
            "samples",
            "min_ns",
            "mean_ns",
            "p50_ns",
            "p99_ns",
            "p999_ns",
            "p9999_ns",
            "max_ns",
            "jitter_ns"
        ])
    );
    assert_eq!(
        keys(serde_json::to_value(rfc2544::SizeResult::default()).unwrap()),
        sorted(&[
            "frame_size",
            "line_pps",
            "throughput_pps",
            "throughput_mpps",
            "throughput_gbps",
            "throughput_pct",
            "generator_limited",
            "trials",
            "latency",
            "frame_loss",
            "back_to_back_frames",
            "back_to_back_trials"
        ])
    );
    assert_eq!(
        keys(serde_json::to_value(rfc2544::Rfc2544Report::default()).unwrap()),
        sorted(&[
            "tx_port",
            "rx_port",
            "line_bps",
            "trial_secs",
            "loss_tolerance_pct",
            "results",
            "tsc_ghz"
        ])
    );
}

#[test]
fn bad_runs_name_the_fix() {
    let pool = Pool::with_frames(64);
    let ports = Ports {
        tx: Some(open("null:sink", &pool)),
        rx: None,
    };
    let e = |cfg: RunConfig| run(&cfg, &ports, &pool, Tsc { hz: 1e9 }, &mut |_| {}).unwrap_err();
    assert!(e(RunConfig {
        threads: 2,
        ..RunConfig::default()
    })
    .contains("use --threads 1 or fewer"));
    assert!(e(RunConfig {
        duration: 0.0,
        ..RunConfig::default()
    })
    .contains("--duration"));
    let rx_only = Ports {
        tx: None,
        rx: Some(open("null:sink", &pool)),
    };
    let err = run(
        &RunConfig {
            threads: 2,
            ..RunConfig::default()
        },
        &rx_only,
        &pool,
        Tsc { hz: 1e9 },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(err.contains("1 receive queue(s); use --threads 1"), "{err}");
    assert!(e(RunConfig {
        cores: vec![100_000],
        ..RunConfig::default()
    })
    .contains("see `nproc`"));
    assert!(e(RunConfig {
        burst: 33,
        ..RunConfig::default()
    })
    .contains("--burst"));
    let _ = PROBE_LEN;
}

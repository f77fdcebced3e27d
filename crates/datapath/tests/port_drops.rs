//! Drops by reason per port (`Running::port_drops`) and each thread's counters
//! (`Running::threads`) on a running datapath of ring ports: malformed frames and frames the
//! pipeline drops are counted against the port they came in on, on whichever thread reads
//! it, also for a port plugged in while running. Also what the control side reads of the
//! running threads besides counters: their megaflows (`Running::megaflows`,
//! `Running::megaflow_counts`) and captured frames (`Running::taps`).

mod common;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{mask_of, udp, Fake};
use datapath::{Counter, Datapath, DpConfig, Running};
use packet::{Batch, Field, Pool, PoolCache};
use port::ring;
use port::{Port, TxQueue};

/// Port 1's packets go to port 2; everything else has no actions (dropped).
fn start(pool: &Pool, ports: Vec<(u32, Arc<dyn Port>)>) -> Running {
    let logic: common::Logic = Box::new(move |k, out| {
        out.mask = mask_of(&[Field::InPort]);
        if k.get(Field::InPort) == 1 {
            out.actions.push(pipeline::DpAction::Output(2));
        }
    });
    let logic = Arc::new(Mutex::new(logic));
    let gen = Arc::new(AtomicU64::new(0));
    let mut b = Datapath::builder().pool(pool.clone());
    for (no, p) in ports {
        b = b.port(no, p);
    }
    b.upcall_factory(move |_| {
        Box::new(Fake {
            gen: gen.clone(),
            logic: logic.clone(),
            meter: None,
        })
    })
    .threads(vec![None, None])
    .config(DpConfig::default())
    .start()
    .unwrap()
}

/// A UDP frame whose IPv4 header claims a length of 8 bytes (IHL 2): malformed.
fn malformed() -> Vec<u8> {
    let mut f = udp(9, [10, 0, 0, 2]);
    f[14] = 0x42;
    f
}

fn send(tx: &mut dyn TxQueue, cache: &mut PoolCache, frames: &[Vec<u8>]) {
    let mut b = Batch::new();
    for f in frames {
        b.push(cache.alloc_from(f).unwrap()).unwrap();
    }
    assert_eq!(tx.send(&mut b), frames.len());
}

/// Waits (at most 20 s) until the threads have received `n` packets in all (malformed ones
/// included: `rx_packets` counts every frame a queue delivered).
fn wait_rx(running: &Running, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while running.stats()[Counter::RxPackets] < n {
        assert!(Instant::now() < deadline, "{}", running.stats());
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn drops_are_counted_against_the_port_they_came_in_on() {
    let pool = Pool::with_frames(4096);
    let (sw1, out1) = ring::pair("pd-s1", "pd-o1", 256, &pool);
    let (sw2, _out2) = ring::pair("pd-s2", "pd-o2", 256, &pool);
    let (sw3, out3) = ring::pair("pd-s3", "pd-o3", 256, &pool);
    // Two threads: port 1's rx queue on thread 0, port 2's on thread 1, port 3's on 0.
    let running = start(&pool, vec![(1, sw1), (2, sw2), (3, sw3)]);
    let mut cache = pool.cache();
    let (mut in1, mut in3) = (out1.open_tx(0).unwrap(), out3.open_tx(0).unwrap());

    let mut mixed = vec![udp(1, [10, 0, 0, 2]); 10];
    mixed.extend(vec![malformed(); 5]);
    send(&mut *in1, &mut cache, &mixed);
    send(&mut *in3, &mut cache, &vec![udp(3, [10, 0, 0, 3]); 4]);
    send(&mut *in3, &mut cache, &[malformed()]);
    wait_rx(&running, 20);

    let p1 = running.port_drops(1);
    assert_eq!(p1.drop_malformed, 5, "{p1}");
    assert_eq!(p1.drop_no_action, 0, "port 1's packets go to port 2");
    let p3 = running.port_drops(3);
    assert_eq!((p3.drop_malformed, p3.drop_no_action), (1, 4), "{p3}");
    assert_eq!(running.port_drops(2).drops(), 0);
    // Each rx queue also counts its packets (malformed ones included) and its busy cycles
    // (`rxq-show`); nothing else is kept per port.
    assert_eq!((p1.rx_packets, p3.rx_packets), (15, 5), "{p1}");
    assert!(p1.busy_cycles > 0, "{p1}");
    assert_eq!(p1.tx_packets, 0, "{p1}");
    let queues = running.rx_queues();
    let q1: Vec<_> = queues.iter().filter(|q| q.ofport == 1).collect();
    assert_eq!(q1.len(), 1, "{queues:?}");
    assert_eq!((q1[0].queue, q1[0].stats.rx_packets), (0, 15), "{queues:?}");

    // A port plugged in while running has its own counters.
    let (sw4, out4) = ring::pair("pd-s4", "pd-o4", 256, &pool);
    running.add_port(4, sw4).unwrap();
    let mut in4 = out4.open_tx(0).unwrap();
    send(&mut *in4, &mut cache, &vec![malformed(); 3]);
    wait_rx(&running, 23);
    assert_eq!(running.port_drops(4).drop_malformed, 3);
    assert_eq!(running.port_drops(1).drop_malformed, 5);

    // Every thread reports, and the per-thread counters add up to the total.
    let threads = running.threads();
    assert_eq!(
        threads.iter().map(|t| t.index).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert!(threads.iter().all(|t| !t.lane && t.core.is_none()));
    let sum: datapath::Snapshot = threads.iter().map(|t| t.stats).sum();
    assert_eq!(sum[Counter::DropMalformed], 9);
    assert_eq!(sum[Counter::DropNoAction], 4);

    running.remove_port(4).unwrap();
    assert_eq!(running.port_drops(4).drops(), 0, "a removed port has none");
}

/// `tcpdump -ddd 'dst host 10.0.0.7'`.
const DST_HOST_7: &str = "10\n40 0 0 12\n21 0 2 2048\n32 0 0 30\n21 4 5 167772167\n21 1 0 2054\n21 0 3 32821\n32 0 0 38\n21 0 1 167772167\n6 0 0 262144\n6 0 0 0\n";

#[test]
fn megaflows_and_captured_frames_come_from_the_running_threads() {
    use datapath::capture::Direction;
    use packet::cbpf::Program;
    let pool = Pool::with_frames(4096);
    let (sw1, out1) = ring::pair("pl-s1", "pl-o1", 256, &pool);
    let (sw2, _out2) = ring::pair("pl-s2", "pl-o2", 256, &pool);
    let (sw3, out3) = ring::pair("pl-s3", "pl-o3", 256, &pool);
    let running = start(&pool, vec![(1, sw1), (2, sw2), (3, sw3)]);
    let mut cache = pool.cache();
    let (mut in1, mut in3) = (out1.open_tx(0).unwrap(), out3.open_tx(0).unwrap());
    // Port 2's sent frames to 10.0.0.7 only; every frame port 3 receives.
    let taps = running.taps().clone();
    let to7 = taps.start(
        2,
        Direction {
            rx: false,
            tx: true,
        },
        Some(Program::parse(DST_HOST_7).unwrap()),
    );
    let rx3 = taps.start(
        3,
        Direction {
            rx: true,
            tx: false,
        },
        None,
    );
    assert_eq!(taps.running(), 2);

    let mut frames = vec![udp(1, [10, 0, 0, 7]); 6];
    frames.extend(vec![udp(1, [10, 0, 0, 8]); 4]);
    send(&mut *in1, &mut cache, &frames);
    send(&mut *in3, &mut cache, &vec![udp(3, [10, 0, 0, 3]); 3]);
    wait_rx(&running, 13);

    // One megaflow per port (the mask is in_port only), counted since install.
    let (mut mfs, silent) = running.megaflows(Duration::from_secs(20));
    assert!(silent.is_empty(), "{silent:?}");
    mfs.sort_by_key(|m| m.key.get(Field::InPort));
    assert_eq!(mfs.len(), 2, "{mfs:?}");
    assert_eq!(
        (mfs[0].actions.as_str(), mfs[0].packets),
        ("2", 10),
        "{mfs:?}"
    );
    assert_eq!(
        (mfs[1].actions.as_str(), mfs[1].packets),
        ("drop", 3),
        "{mfs:?}"
    );
    assert_eq!(mfs[0].mask, mask_of(&[Field::InPort]));
    // The maintenance pass leaves the live count where metrics read it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while running.megaflow_counts().iter().sum::<u64>() != 2 {
        assert!(Instant::now() < deadline, "{:?}", running.megaflow_counts());
        std::thread::sleep(Duration::from_millis(5));
    }

    // Captured: what the filter took, and nothing of port 1's own receive side.
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < 6 {
        assert!(Instant::now() < deadline, "{} frames", got.len());
        to7.drain(&mut got);
    }
    std::thread::sleep(Duration::from_millis(50));
    to7.drain(&mut got);
    assert_eq!(got.len(), 6, "only the frames to 10.0.0.7");
    assert!(got.iter().all(|f| f.data == udp(1, [10, 0, 0, 7])));
    let mut got3 = Vec::new();
    while got3.len() < 3 {
        assert!(Instant::now() < deadline, "{} frames", got3.len());
        rx3.drain(&mut got3);
    }
    assert_eq!(got3[0].wire_len, 64);
    assert_eq!((to7.lost(), rx3.lost()), (0, 0));
    taps.stop(&to7);
    taps.stop(&rx3);
    assert_eq!(taps.running(), 0);
}

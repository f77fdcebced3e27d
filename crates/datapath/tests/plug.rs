//! Ports plugged in and out of a running datapath (`Running::add_port` / `remove_port`): a
//! stream between two ports loses nothing while 100 ports come and go, a removed port's
//! queues are let go of, an added port's rx queue goes to the thread with the fewest, and no
//! megaflow sends to a port that took a removed port's place in the tx table.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{mask_of, udp, Fake};
use datapath::{Counter, Datapath, DpConfig, Running};
use packet::{Batch, Field, Pool, PoolCache};
use port::ring;
use port::{Port, RxQueue, TxQueue};

/// Where the sequence number sits in a test frame (inside the UDP payload).
const SEQ_AT: usize = 46;

/// A datapath over `ports` with `threads` threads whose translator sends port 1's packets to
/// port `to_of_1`, port 4's to port 1, and drops everything else; counts translations.
fn start(
    pool: &Pool,
    ports: Vec<(u32, Arc<dyn Port>)>,
    threads: usize,
    to_of_1: u32,
) -> (Running, Arc<AtomicUsize>) {
    let translations = Arc::new(AtomicUsize::new(0));
    let t = translations.clone();
    let logic: common::Logic = Box::new(move |k, out| {
        t.fetch_add(1, Ordering::Relaxed);
        out.mask = mask_of(&[Field::InPort]);
        match k.get(Field::InPort) {
            1 => out.actions.push(pipeline::DpAction::Output(to_of_1)),
            4 => out.actions.push(pipeline::DpAction::Output(1)),
            _ => {}
        }
    });
    let logic = Arc::new(Mutex::new(logic));
    let gen = Arc::new(AtomicU64::new(0));
    let mut b = Datapath::builder().pool(pool.clone());
    for (no, p) in ports {
        b = b.port(no, p);
    }
    let running = b
        .upcall_factory(move |_| {
            Box::new(Fake {
                gen: gen.clone(),
                logic: logic.clone(),
                meter: None,
            })
        })
        .threads(vec![None; threads])
        .config(DpConfig::default())
        .start()
        .unwrap();
    (running, translations)
}

fn frame(seq: u32) -> Vec<u8> {
    let mut f = udp(7, [10, 0, 0, 2]);
    f[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seq.to_be_bytes());
    f
}

fn seq_of(data: &[u8]) -> u32 {
    u32::from_be_bytes(data[SEQ_AT..SEQ_AT + 4].try_into().unwrap())
}

/// Receives what waits on `rx`, returning the sequence numbers.
fn drain(rx: &mut dyn RxQueue, cache: &mut PoolCache) -> Vec<u32> {
    let mut out = Vec::new();
    let mut b = Batch::new();
    while rx.recv(&mut b) > 0 {
        for p in b.drain() {
            out.push(seq_of(p.data()));
            cache.free(p);
        }
    }
    out
}

/// Sends frames `from..to` into `tx` (the ring has room: callers keep a window).
fn send(tx: &mut dyn TxQueue, cache: &mut PoolCache, from: u32, to: u32) {
    let mut b = Batch::new();
    for s in from..to {
        b.push(cache.alloc_from(&frame(s)).unwrap()).unwrap();
    }
    assert_eq!(
        tx.send(&mut b),
        (to - from) as usize,
        "the window fits the ring"
    );
}

/// Waits (at most 20 s, so a bug fails instead of hanging) until `n` frames came out of `rx`.
fn expect(rx: &mut dyn RxQueue, cache: &mut PoolCache, n: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} frames came out",
            got.len()
        );
        got.extend(drain(rx, cache));
        std::thread::yield_now();
    }
    got
}

#[test]
fn a_stream_keeps_every_packet_while_100_ports_come_and_go() {
    let pool = Pool::with_frames(8192);
    let (sw1, out1) = ring::pair("plug-s1", "plug-o1", 1024, &pool);
    let (sw2, out2) = ring::pair("plug-s2", "plug-o2", 1024, &pool);
    let (running, _) = start(&pool, vec![(1, sw1), (2, sw2)], 2, 2);
    let running = Arc::new(running);

    let churn = {
        let running = running.clone();
        let pool = pool.clone();
        std::thread::spawn(move || {
            let mut live: Vec<(u32, Arc<dyn Port>)> = Vec::new();
            for i in 0..100u32 {
                let ofport = 10 + i;
                let port: Arc<dyn Port> = match i % 3 {
                    0 => port::open("null:sink", &pool).unwrap(),
                    // A source: its packets are translated (and dropped) while ports change.
                    1 => port::open("null:limit=200", &pool).unwrap(),
                    _ => {
                        let (a, _b) =
                            ring::pair(&format!("plug-c{i}"), &format!("plug-d{i}"), 64, &pool);
                        a
                    }
                };
                running.add_port(ofport, port.clone()).unwrap();
                live.push((ofport, port));
                if live.len() > 4 {
                    let (no, p) = live.remove(0);
                    running.remove_port(no).unwrap();
                    assert_eq!(
                        Arc::strong_count(&p),
                        1,
                        "the datapath let go of port {no} and all its queues"
                    );
                }
            }
            for (no, p) in live.drain(..) {
                running.remove_port(no).unwrap();
                assert_eq!(Arc::strong_count(&p), 1, "port {no} let go");
            }
        })
    };

    let (mut tx, mut rx) = (out1.open_tx(0).unwrap(), out2.open_rx(0).unwrap());
    let mut cache = pool.cache();
    let (mut sent, mut got) = (0u32, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    const WINDOW: u32 = 256;
    while !(churn.is_finished() && sent >= 20_000 && got.len() == sent as usize) {
        assert!(
            Instant::now() < deadline,
            "stuck: sent {sent}, got {}",
            got.len()
        );
        let in_flight = sent - got.len() as u32;
        if in_flight < WINDOW && !(churn.is_finished() && sent >= 20_000) {
            let n = (WINDOW - in_flight).min(32);
            send(&mut *tx, &mut cache, sent, sent + n);
            sent += n;
        }
        got.extend(drain(&mut *rx, &mut cache));
    }
    churn.join().expect("churn thread");
    assert_eq!(got, (0..sent).collect::<Vec<_>>(), "every packet, in order");
    assert_eq!(running.ports(), vec![1, 2]);
    let s = running.stats();
    assert_eq!(s[Counter::DropTxFull], 0);
    assert!(
        s[Counter::CacheFlushes] >= 200,
        "each change empties every cache"
    );
}

#[test]
fn no_megaflow_sends_to_a_port_that_took_a_removed_ones_place() {
    let pool = Pool::with_frames(4096);
    let (sw1, out1) = ring::pair("mf-s1", "mf-o1", 256, &pool);
    let (sw2, out2) = ring::pair("mf-s2", "mf-o2", 256, &pool);
    let (sw3, out3) = ring::pair("mf-s3", "mf-o3", 256, &pool);
    let (sw4, out4) = ring::pair("mf-s4", "mf-o4", 256, &pool);
    let watch2: Arc<dyn Port> = sw2.clone();
    drop(sw2);
    // Two threads: rx queues dealt 1 → thread 0, 2 → thread 1, 3 → thread 0.
    let (running, translations) = start(&pool, vec![(1, sw1), (2, watch2.clone()), (3, sw3)], 2, 3);
    let mut cache = pool.cache();
    let mut in1 = out1.open_tx(0).unwrap();
    let (mut rx1, mut rx2, mut rx3, mut rx4) = (
        out1.open_rx(0).unwrap(),
        out2.open_rx(0).unwrap(),
        out3.open_rx(0).unwrap(),
        out4.open_rx(0).unwrap(),
    );
    send(&mut *in1, &mut cache, 0, 10);
    assert_eq!(
        expect(&mut *rx3, &mut cache, 10),
        (0..10).collect::<Vec<_>>()
    );
    let before = translations.load(Ordering::Relaxed);
    assert!(before >= 1);

    // Port 3's megaflow sends to tx index 2. Take port 2 out (port 3 moves to index 1) and
    // put port 4 in (index 2): a stale megaflow would now send to port 4.
    running.remove_port(2).unwrap();
    assert_eq!(Arc::strong_count(&watch2), 1, "port 2's queues are dropped");
    let err = running.remove_port(2).unwrap_err().to_string();
    assert!(err.contains("no port 2") && err.contains("1, 3"), "{err}");
    running.add_port(4, sw4).unwrap();
    let (sw5, _out5) = ring::pair("mf-s5", "mf-o5", 16, &pool);
    let err = running.add_port(4, sw5).unwrap_err().to_string();
    assert!(err.contains("OpenFlow port 4 is in use by mf-s4"), "{err}");

    send(&mut *in1, &mut cache, 10, 20);
    assert_eq!(
        expect(&mut *rx3, &mut cache, 10),
        (10..20).collect::<Vec<_>>()
    );
    assert!(
        drain(&mut *rx4, &mut cache).is_empty(),
        "nothing went to port 4"
    );
    assert!(
        drain(&mut *rx2, &mut cache).is_empty(),
        "nothing went to port 2"
    );
    assert!(
        translations.load(Ordering::Relaxed) > before,
        "the flow was translated again after the change"
    );

    // Port 4's rx queue went to thread 1, which had none left: its packets reach port 1.
    let rx_before = running.thread_stats()[1][Counter::RxPackets];
    let mut in4 = out4.open_tx(0).unwrap();
    send(&mut *in4, &mut cache, 100, 105);
    assert_eq!(
        expect(&mut *rx1, &mut cache, 5),
        (100..105).collect::<Vec<_>>()
    );
    assert_eq!(running.thread_stats()[1][Counter::RxPackets] - rx_before, 5);
    assert_eq!(running.ports(), vec![1, 3, 4]);
}

#[test]
fn a_thread_asleep_in_poll_wakes_for_a_new_port() {
    let pool = Pool::with_frames(1024);
    // A sink has no rx queue: the thread sleeps in poll(2) on its eventfds alone, with no
    // time limit (it holds no megaflow).
    let sink = port::open("null:sink", &pool).unwrap();
    let (running, _) = start(&pool, vec![(1, sink.clone())], 1, 2);
    // It spins 200 µs after its last poll that found work, then sleeps (the sleep is counted
    // only when it ends, so give it time: a thread still spinning passes this test too).
    std::thread::sleep(Duration::from_millis(100));
    let deadline = Instant::now() + Duration::from_secs(20);
    let (sw4, out4) = ring::pair("wake-s4", "wake-o4", 64, &pool);
    running.add_port(4, sw4).unwrap();
    let mut cache = pool.cache();
    send(&mut *out4.open_tx(0).unwrap(), &mut cache, 0, 5);
    // Port 4's packets go to port 1: the thread woke and polls the new queue (a thread that
    // slept on would never take it).
    while sink.stats().tx_packets < 5 {
        assert!(
            Instant::now() < deadline,
            "the new port's packets were not forwarded"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(sink.stats().tx_packets, 5);
}

//! Running poll-mode threads: start, forward, stop (frees everything, flushes counters).

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{mask_of, udp, Fake};
use datapath::{Counter, Datapath, DpConfig};
use packet::{Batch, Field, Pool};
use pipeline::{DpAction, FlowCounters};
use port::ring;
use port::Port;

#[test]
fn two_threads_forward_and_stop_cleanly() {
    let pool = Pool::with_frames(4096);
    let (sw1, out1) = ring::pair("t-sw1", "t-out1", 512, &pool);
    let (sw2, out2) = ring::pair("t-sw2", "t-out2", 512, &pool);
    let fc = Arc::new(FlowCounters::default());
    let fc2 = fc.clone();
    let logic: common::Logic = Box::new(move |k, out| {
        out.mask = mask_of(&[Field::InPort]);
        out.actions
            .push(DpAction::Output(if k.get(Field::InPort) == 1 {
                2
            } else {
                1
            }));
        out.flows.push(fc2.clone());
    });
    let logic = Arc::new(Mutex::new(logic));
    let gen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let dp = Datapath::builder()
        .pool(pool.clone())
        .port(1, sw1)
        .port(2, sw2)
        .upcall_factory(move |_| {
            Box::new(Fake {
                gen: gen.clone(),
                logic: logic.clone(),
                meter: None,
            })
        })
        // Two threads, one tx queue per ring: the threads share it.
        .threads(vec![None, Some(0)])
        .config(DpConfig::default())
        .build()
        .unwrap();
    let mut running = dp.start().unwrap();

    let mut cache = pool.cache();
    let (mut in1, mut in2) = (out1.open_tx(0).unwrap(), out2.open_tx(0).unwrap());
    let (mut rx1, mut rx2) = (out1.open_rx(0).unwrap(), out2.open_rx(0).unwrap());
    let mut b = Batch::new();
    for _ in 0..10 {
        b.push(cache.alloc_from(&udp(1, [1, 2, 3, 4])).unwrap())
            .unwrap();
    }
    assert_eq!(in1.send(&mut b), 10);
    for _ in 0..7 {
        b.push(cache.alloc_from(&udp(2, [1, 2, 3, 4])).unwrap())
            .unwrap();
    }
    assert_eq!(in2.send(&mut b), 7);

    let (mut got1, mut got2) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while (got1 < 7 || got2 < 10) && Instant::now() < deadline {
        got1 += rx1.recv(&mut b);
        b.free_into(&mut cache);
        got2 += rx2.recv(&mut b);
        b.free_into(&mut cache);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!((got1, got2), (7, 10));
    let s = running.stats();
    assert_eq!(s[Counter::RxPackets], 17);
    assert_eq!(running.thread_stats().len(), 2);
    running.stop();
    assert_eq!(
        fc.packets.load(Ordering::Relaxed),
        17,
        "counters flushed at stop"
    );
}

#[test]
fn build_errors_name_the_fix() {
    let err = Datapath::builder().build().unwrap_err();
    assert!(err.to_string().contains(".pool("), "{err}");
    let pool = Pool::with_frames(16);
    let err = Datapath::builder().pool(pool.clone()).build().unwrap_err();
    assert!(err.to_string().contains("upcall_factory"), "{err}");
    let (a, b) = ring::pair("dup-a", "dup-b", 8, &pool);
    let err = Datapath::builder()
        .pool(pool)
        .port(1, a)
        .port(1, b)
        .upcall_factory(|_| unreachable!())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("OpenFlow port 1"), "{err}");
}

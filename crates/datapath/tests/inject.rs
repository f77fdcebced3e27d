//! Packet-out through the datapath: injected packets run their actions in poll thread 0
//! (rewrite, then output) and leave through the named ports; a full queue is reported, not
//! waited on.

mod common;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{udp, Fake, Logic};
use datapath::Datapath;
use packet::{Batch, Field, Pool};
use pipeline::DpAction;
use port::ring;
use port::Port;

fn nothing() -> Logic {
    Box::new(|_k, _out| {})
}

#[test]
fn injected_packets_leave_through_their_ports() {
    let pool = Pool::with_frames(1024);
    let mut b = Datapath::builder().pool(pool.clone());
    let mut outside = Vec::new();
    for p in 1..=2u32 {
        let (sw, out) = ring::pair(&format!("isw{p}"), &format!("iout{p}"), 64, &pool);
        outside.push(out.open_rx(0).unwrap());
        b = b.port(p, sw);
    }
    let gen = Arc::new(AtomicU64::new(1));
    let logic = Arc::new(Mutex::new(nothing()));
    let running = b
        .upcall_factory(move |_| {
            Box::new(Fake {
                gen: gen.clone(),
                logic: logic.clone(),
                meter: None,
            })
        })
        .threads(vec![None, None])
        .start()
        .unwrap();
    let inj = running.injector();
    let frame = udp(7, [10, 0, 0, 9]);
    inj.inject(
        &frame,
        0xffff_fffd,
        vec![
            DpAction::Output(1),
            DpAction::SetField {
                field: Field::TpDst,
                value: 99,
            },
            DpAction::Output(2),
        ],
    )
    .unwrap();
    let mut cache = pool.cache();
    let mut got = [None, None];
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.iter().any(Option::is_none) && Instant::now() < deadline {
        for (i, rx) in outside.iter_mut().enumerate() {
            let mut batch = Batch::new();
            if rx.recv(&mut batch) > 0 {
                got[i] = Some(batch.as_mut_slice()[0].data().to_vec());
                batch.free_into(&mut cache);
            }
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    assert_eq!(
        got[0].as_deref(),
        Some(&frame[..]),
        "port 1 gets the packet as given"
    );
    let rewritten = got[1].clone().expect("port 2 gets the rewritten copy");
    assert_ne!(rewritten, frame);
    assert_eq!(rewritten.len(), frame.len());
}

#[test]
fn a_full_queue_is_reported_and_has_room_again_once_the_thread_drains_it() {
    use datapath::inject::{InjectError, INJECT_QUEUE};
    let pool = Pool::with_frames(4096);
    let (sw, out) = ring::pair("fsw1", "fout1", 4096, &pool);
    let mut rx = out.open_rx(0).unwrap();
    let gen = Arc::new(AtomicU64::new(1));
    let logic = Arc::new(Mutex::new(nothing()));
    let dp = Datapath::builder()
        .pool(pool.clone())
        .port(1, sw)
        .upcall_factory(move |_| {
            Box::new(Fake {
                gen: gen.clone(),
                logic: logic.clone(),
                meter: None,
            })
        })
        .threads(vec![None])
        .build()
        .unwrap();
    let inj = dp.injector();
    let frame = udp(7, [10, 0, 0, 9]);
    // Not started: nothing drains, so the queue fills.
    for i in 0..INJECT_QUEUE {
        assert!(inj.has_room(), "room before packet {i}");
        inj.inject(&frame, 0xffff_fffd, vec![DpAction::Output(1)])
            .unwrap();
    }
    assert!(!inj.has_room());
    assert_eq!(
        inj.inject(&frame, 0xffff_fffd, vec![DpAction::Output(1)]),
        Err(InjectError::QueueFull)
    );
    let _running = dp.start().unwrap();
    let mut cache = pool.cache();
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while got < INJECT_QUEUE && Instant::now() < deadline {
        let mut batch = Batch::new();
        got += rx.recv(&mut batch);
        batch.free_into(&mut cache);
        std::thread::sleep(Duration::from_micros(50));
    }
    assert_eq!(got, INJECT_QUEUE, "every queued packet leaves");
    assert!(inj.has_room(), "the thread's drains are counted");
    inj.inject(&frame, 0xffff_fffd, vec![DpAction::Output(1)])
        .unwrap();
}

//! Rx queues pinned to the poll thread of a core (`Builder::rxq_affinity`): the pinned queue
//! goes to that thread, which then reads no other queue (dedicated); bad pins are refused
//! with the queue or core named.

mod common;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use common::Fake;
use datapath::{Builder, Datapath};
use packet::Pool;

fn builder(pool: &Pool, ports: u32) -> Builder {
    let logic: common::Logic = Box::new(|_, _| {});
    let logic = Arc::new(Mutex::new(logic));
    let gen = Arc::new(AtomicU64::new(0));
    let mut b = Datapath::builder().pool(pool.clone());
    for p in 1..=ports {
        b = b.port(p, port::spec::open("null:", pool).unwrap());
    }
    b.upcall_factory(move |_| {
        Box::new(Fake {
            gen: gen.clone(),
            logic: logic.clone(),
            meter: None,
        })
    })
    // Cores are only recorded by build_pmds (nothing is pinned), so any numbers do.
    .threads(vec![Some(10), Some(11), Some(12)])
}

#[test]
fn a_pinned_queue_goes_to_its_cores_thread_and_that_thread_is_dedicated() {
    let pool = Pool::with_frames(256);
    let pmds = builder(&pool, 5)
        .rxq_affinity(1, vec![(0, 12)])
        .build_pmds()
        .unwrap();
    let ports: Vec<Vec<u32>> = pmds.iter().map(|p| p.rx_ports().collect()).collect();
    assert_eq!(
        ports[2],
        vec![1],
        "core 12's thread reads port 1 only: {ports:?}"
    );
    assert_eq!(ports[0], vec![2, 4], "{ports:?}");
    assert_eq!(ports[1], vec![3, 5], "{ports:?}");
    // Without pins, round-robin over every thread.
    let pmds = builder(&pool, 3).build_pmds().unwrap();
    let ports: Vec<Vec<u32>> = pmds.iter().map(|p| p.rx_ports().collect()).collect();
    assert_eq!(ports, vec![vec![1], vec![2], vec![3]]);
}

#[test]
fn bad_pins_name_the_queue_or_core() {
    let pool = Pool::with_frames(256);
    let e = builder(&pool, 1)
        .rxq_affinity(1, vec![(1, 10)])
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("rx queues 0 ..= 0"), "{e}");
    let e = builder(&pool, 1)
        .rxq_affinity(1, vec![(0, 7)])
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no poll thread runs on core 7"), "{e}");
    assert!(e.contains("10, 11, 12"), "{e}");
}

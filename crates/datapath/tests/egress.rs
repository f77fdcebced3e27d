//! Egress queues through the packet path: `set_queue` puts a packet in a queue of the port
//! it is output to, the queue's rate holds and its excess is counted against it, a queue the
//! port lacks is a counted drop, and a packet no `set_queue` touched is in queue 0 — also
//! in a frame that carried another queue before the pool gave it out again.

mod common;

use std::time::Instant;

use common::{fixture, mask_of, udp};
use datapath::DpConfig;
use packet::Field;
use pipeline::DpAction;

/// Source port 1: queue 1 of port 3; 2: queue 6 (port 3 lacks it); 3: port 3, no queue.
fn logic() -> common::Logic {
    Box::new(|k, out| {
        out.mask = mask_of(&[Field::TpSrc]);
        match k.get(Field::TpSrc) {
            1 => out.actions.push(DpAction::SetQueue(1)),
            2 => out.actions.push(DpAction::SetQueue(6)),
            _ => {}
        }
        out.actions.push(DpAction::Output(3));
    })
}

#[test]
fn set_queue_sends_to_the_ports_queue_which_holds_its_rate_and_counts() {
    let mut f = fixture(3, DpConfig::default(), logic());
    // 1 kbit/s with a 13-kbit bucket: 25 of 64-byte (512-bit) frames, then 2 a second.
    let (_, o) = port::dp_options::split_spec("null:queue=1:max_rate=1:burst=13").unwrap();
    f.dp.set_egress(3, o.egress);
    let start = Instant::now();
    for _ in 0..4 {
        f.inject(1, &vec![udp(1, [10, 0, 0, 2]); 32]);
        f.poll();
    }
    let passed = f.collect(3).len() as u64;
    let grace = 2 * start.elapsed().as_secs() + 1;
    assert!(
        (25..=25 + grace).contains(&passed),
        "queue 1 passed {passed} of 128"
    );
    let (queues, unknown) = f.dp.egress_queues(3);
    assert_eq!(queues.len(), 1);
    let q = queues[0];
    assert_eq!((q.queue, q.rates.max_kbps), (1, 1));
    assert_eq!(q.counts.tx_packets, passed);
    assert_eq!(q.counts.tx_bytes, passed * 64);
    assert_eq!(
        q.counts.dropped,
        128 - passed,
        "every refused frame counted"
    );
    assert_eq!(unknown, 0);

    // A queue the port lacks: every frame dropped and counted.
    f.inject(1, &vec![udp(2, [10, 0, 0, 2]); 32]);
    f.poll();
    assert!(f.collect(3).is_empty());
    assert_eq!(f.dp.egress_queues(3).1, 32);

    // No set_queue: queue 0, which has no row, so all pass — in frames the pool handed
    // out before with queue 6 in them.
    for _ in 0..4 {
        f.inject(1, &vec![udp(3, [10, 0, 0, 2]); 32]);
        f.poll();
    }
    assert_eq!(f.collect(3).len(), 128);
    assert_eq!(f.dp.egress_queues(3).1, 32, "no more unknown-queue drops");
}

#[test]
fn a_port_without_queues_ignores_set_queue() {
    let mut f = fixture(3, DpConfig::default(), logic());
    f.inject(1, &vec![udp(2, [10, 0, 0, 2]); 32]);
    f.poll();
    assert_eq!(f.collect(3).len(), 32);
    assert_eq!(f.dp.egress_queues(3), (Vec::new(), 0));
}

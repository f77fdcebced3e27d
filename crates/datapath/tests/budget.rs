//! The upcall budget: a flood of new flows slows only new flows, never established ones.

mod common;

use std::time::{Duration, Instant};

use common::{fixture, mask_of, udp};
use datapath::{Counter, DpConfig};
use packet::Field;
use pipeline::DpAction;

/// A slow pipeline: every translation spins for 300 µs. One megaflow per UDP source port.
fn slow_logic() -> common::Logic {
    Box::new(|_, out| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(300) {
            std::hint::spin_loop();
        }
        out.mask = mask_of(&[Field::InPort, Field::TpSrc]);
        out.actions.push(DpAction::Output(2));
    })
}

#[test]
fn sheds_only_misses_when_hits_exist() {
    let mut f = fixture(2, DpConfig::default(), slow_logic());
    // Establish one flow.
    f.inject(1, &[udp(1, [10, 0, 0, 2])]);
    f.poll();
    assert_eq!(f.collect(2).len(), 1);

    // Each batch: 16 packets of the established flow, 16 new flows.
    let mut sport = 100;
    for _ in 0..10 {
        let mut frames = Vec::new();
        for i in 0..32 {
            if i % 2 == 0 {
                frames.push(udp(1, [10, 0, 0, 2]));
            } else {
                frames.push(udp(sport, [10, 0, 0, 2]));
                sport += 1;
            }
        }
        f.inject(1, &frames);
        assert_eq!(f.poll(), 32);
    }
    let out = f.collect(2);
    let established = out.iter().filter(|p| *p == &udp(1, [10, 0, 0, 2])).count();
    assert_eq!(established, 160, "an established packet was lost");
    let s = f.stats();
    assert!(s[Counter::UpcallShed] > 0, "nothing shed: {s}");
    assert!(
        s[Counter::Upcalls] > 10,
        "min_upcalls_per_batch must still let new flows in: {s}"
    );
    assert_eq!(s[Counter::UpcallShed] + s[Counter::Upcalls] - 1, 160);
    assert_eq!(out.len() as u64, 160 + s[Counter::Upcalls] - 1);
}

#[test]
fn without_hits_every_miss_is_translated() {
    let mut f = fixture(2, DpConfig::default(), slow_logic());
    let frames: Vec<_> = (0..64).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    f.inject(1, &frames);
    f.poll();
    assert_eq!(f.collect(2).len(), 64);
    let s = f.stats();
    assert_eq!(s[Counter::UpcallShed], 0);
    assert_eq!(s[Counter::Upcalls], 64);
}

#[test]
fn at_most_max_upcalls_per_batch() {
    let cfg = DpConfig {
        max_upcalls_per_batch: 4,
        min_upcalls_per_batch: 1,
        ..DpConfig::default()
    };
    let mut f = fixture(
        2,
        cfg,
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort, Field::TpSrc]);
            out.actions.push(DpAction::Output(2));
        }),
    );
    let frames: Vec<_> = (0..32).map(|i| udp(i, [10, 0, 0, 2])).collect();
    f.inject(1, &frames);
    f.poll();
    let s = f.stats();
    assert_eq!(s[Counter::Upcalls], 4);
    assert_eq!(s[Counter::UpcallShed], 28);
    assert_eq!(f.collect(2).len(), 4);
}

//! Black-box tests of a full megaflow table: new flows evict the least recently used
//! megaflow instead of going uncached, counters stay honest, memory stays put.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{fixture, mask_of, udp};
use datapath::{Counter, DpConfig};
use packet::Field;
use pipeline::{DpAction, FlowCounters};

fn config(max_megaflows: usize) -> DpConfig {
    DpConfig {
        max_megaflows,
        // Counters reach the flow entries only at eviction and shutdown in these tests.
        maintenance_ms: 1_000_000,
        ..DpConfig::default()
    }
}

/// One megaflow per UDP source port, all forwarding to port 2 and crediting `fc`.
fn per_source_port(fc: &Arc<FlowCounters>) -> common::Logic {
    let fc = fc.clone();
    Box::new(move |_, out| {
        out.mask = mask_of(&[Field::InPort, Field::TpSrc]);
        out.actions.push(DpAction::Output(2));
        out.flows.push(fc.clone());
    })
}

#[test]
fn a_full_table_installs_new_flows_by_evicting() {
    let fc = Arc::new(FlowCounters::default());
    let mut f = fixture(2, config(4), per_source_port(&fc));
    // 40 new flows, one batch each.
    for sport in 0..40u16 {
        f.inject(1, &[udp(1000 + sport, [10, 0, 0, 2])]);
        f.poll();
    }
    assert_eq!(f.collect(2).len(), 40);
    assert_eq!(f.pmds[0].megaflows(), 4);
    let s = f.stats();
    assert_eq!(
        s[Counter::MegaflowInstalls],
        40,
        "every new flow is installed"
    );
    assert_eq!(s[Counter::MegaflowEvictions], 36);
    assert_eq!(s[Counter::MegaflowFull], 0);
    // The 36 evicted megaflows flushed their packet on the way out, the first batch's
    // maintenance flushed one more; the 4 live ones flush at shutdown.
    let before = fc.packets.load(Ordering::Relaxed);
    assert!((36..=37).contains(&before), "flushed {before}");
    f.pmds[0].shutdown();
    assert_eq!(fc.packets.load(Ordering::Relaxed), 40);
}

#[test]
fn a_flow_in_use_survives_a_flood() {
    let fc = Arc::new(FlowCounters::default());
    let mut f = fixture(2, config(4), per_source_port(&fc));
    let hot = udp(7, [10, 0, 0, 2]);
    for sport in 0..50u16 {
        f.inject(1, std::slice::from_ref(&hot));
        f.poll();
        f.inject(1, &[udp(2000 + sport, [10, 0, 0, 2])]);
        f.poll();
    }
    assert_eq!(f.collect(2).len(), 100);
    let s = f.stats();
    assert_eq!(s[Counter::Upcalls], 51, "the hot flow was translated once");
    assert_eq!(s[Counter::MegaflowEvictions], 51 - 4);
}

#[test]
fn megaflows_of_the_current_batch_are_not_evicted() {
    let fc = Arc::new(FlowCounters::default());
    let mut f = fixture(2, config(2), per_source_port(&fc));
    // Five new flows in one batch with room for two: the first two are installed and used
    // by the batch, so the other three run uncached.
    let frames: Vec<_> = (0..5).map(|i| udp(i, [1, 1, 1, 1])).collect();
    f.inject(1, &frames);
    f.poll();
    assert_eq!(f.collect(2).len(), 5);
    assert_eq!(f.pmds[0].megaflows(), 2);
    let s = f.stats();
    assert_eq!(s[Counter::MegaflowFull], 3);
    assert_eq!(s[Counter::MegaflowEvictions], 0);
    // Next batch: the same three flows now evict.
    f.inject(1, &frames[2..4]);
    f.poll();
    assert_eq!(f.collect(2).len(), 2);
    let s = f.stats();
    assert_eq!(s[Counter::MegaflowEvictions], 2);
    assert_eq!(s[Counter::MegaflowInstalls], 4);
}

//! Black-box tests of the fast path: packets in on ring ports, packets out per port.

mod common;

use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{fixture, fixture_with, mask_of, udp};
use datapath::{Counter, DpConfig, Police, Policer};
use packet::builder::{Ipv4Spec, L3Spec, PacketSpec};
use packet::Field;
use pipeline::{DpAction, FlowCounters, PacketInReason};

/// in_port 1 → port 2, in_port 2 → port 1, deciding on in_port only.
fn patch_logic() -> common::Logic {
    Box::new(|k, out| {
        out.mask = mask_of(&[Field::InPort]);
        let other = if k.get(Field::InPort) == 1 { 2 } else { 1 };
        out.actions.push(DpAction::Output(other));
    })
}

#[test]
fn with_few_masks_the_classifier_answers_without_the_emc() {
    let mut f = fixture(2, DpConfig::default(), patch_logic());
    let frames: Vec<_> = (0..10).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    f.inject(1, &frames);
    f.poll();
    f.inject(1, &frames);
    f.poll();
    assert_eq!(f.collect(2), [frames.clone(), frames].concat());
    let s = f.stats();
    assert_eq!(s[Counter::Upcalls], 1);
    assert_eq!(s[Counter::EmcHits], 0, "one mask: the EMC is skipped");
    // The first batch's other nine keys are matched while its misses are handled (not
    // counted as hits); the second batch is ten classifier hits.
    assert_eq!(s[Counter::MegaflowHits], 10);
}

#[test]
fn forwards_to_the_right_port_and_counts_cache_hits() {
    // The EMC in use even with one mask (by default it is skipped then), so both tiers show.
    let cfg = DpConfig {
        emc_min_subtables: 0,
        ..DpConfig::default()
    };
    let mut f = fixture(2, cfg, patch_logic());
    let frames: Vec<_> = (0..10).map(|_| udp(1000, [10, 0, 0, 2])).collect();
    f.inject(1, &frames);
    assert_eq!(f.poll(), 10);
    assert_eq!(f.collect(2), frames);
    assert!(f.collect(1).is_empty());
    let s = f.stats();
    assert_eq!(
        s[Counter::Upcalls],
        1,
        "one upcall per new flow, not per packet"
    );
    assert_eq!(s[Counter::MegaflowInstalls], 1);

    // Same flow again: exact-match cache hits.
    f.inject(1, &frames);
    f.poll();
    assert_eq!(f.collect(2).len(), 10);
    assert_eq!(f.stats()[Counter::EmcHits], 10);
    assert_eq!(f.stats()[Counter::MegaflowHits], 0);

    // New exact keys, same megaflow: classifier hits, no upcall.
    let other: Vec<_> = (0..8).map(|i| udp(2000 + i, [10, 0, 0, 9])).collect();
    f.inject(1, &other);
    f.poll();
    assert_eq!(f.collect(2), other);
    let s = f.stats();
    assert_eq!(s[Counter::MegaflowHits], 8);
    assert_eq!(s[Counter::Upcalls], 1);
    assert_eq!(s[Counter::RxPackets], 28);
    assert_eq!(s[Counter::TxPackets], 28);
    assert_eq!(s.drops(), 0);

    // And the other direction.
    f.inject(2, &frames[..3]);
    f.poll();
    assert_eq!(f.collect(1).len(), 3);
    assert_eq!(f.pmds[0].megaflows(), 2);
}

#[test]
fn generation_bump_clears_caches_and_new_actions_apply_at_once() {
    let mut f = fixture(3, DpConfig::default(), patch_logic());
    let frames = vec![udp(1, [1, 1, 1, 1]); 4];
    f.inject(1, &frames);
    f.poll();
    assert_eq!(f.collect(2).len(), 4);

    f.set_logic(Box::new(|_, out| {
        out.mask = mask_of(&[Field::InPort]);
        out.actions.push(DpAction::Output(3));
    }));
    f.bump();
    f.inject(1, &frames);
    f.poll();
    assert!(
        f.collect(2).is_empty(),
        "stale megaflow used after a generation bump"
    );
    assert_eq!(f.collect(3).len(), 4);
    let s = f.stats();
    assert_eq!(s[Counter::CacheFlushes], 1);
    assert_eq!(s[Counter::Upcalls], 2);
}

#[test]
fn multi_output_copies_bytes_and_rewrites_do_not_leak_into_earlier_copies() {
    let mut f = fixture(
        3,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Output(2));
            out.actions.push(DpAction::SetField {
                field: Field::Ipv4Dst,
                value: 0xc0a8_0001,
            });
            out.actions.push(DpAction::DecTtl);
            out.actions.push(DpAction::Output(3));
        }),
    );
    let frame = udp(5, [10, 0, 0, 2]);
    f.inject(1, &[frame.clone(), frame.clone()]);
    f.poll();
    assert_eq!(f.collect(2), vec![frame.clone(), frame.clone()]);
    // The rewritten copy: exactly what the builder makes for the new header (checksums too).
    let mut want = PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(192, 168, 0, 1),
        5,
        80,
        64,
    );
    if let L3Spec::Ipv4(ip) = &mut want.l3 {
        *ip = Ipv4Spec {
            ttl: 63,
            ..ip.clone()
        };
    }
    assert_eq!(f.collect(3), vec![want.build(), want.build()]);
    assert_eq!(f.stats()[Counter::TxPackets], 4);
}

#[test]
fn rewrite_errors_drop_and_count() {
    let mut f = fixture(
        2,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::PopVlan);
            out.actions.push(DpAction::Output(2));
        }),
    );
    f.inject(1, &[udp(1, [1, 2, 3, 4])]);
    f.poll();
    assert!(f.collect(2).is_empty());
    assert_eq!(f.stats()[Counter::DropRewrite], 1);
}

#[test]
fn megaflow_counters_reach_the_flow_entries() {
    let fc = Arc::new(FlowCounters::default());
    let fc2 = fc.clone();
    let mut f = fixture(
        2,
        DpConfig::default(),
        Box::new(move |_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Output(2));
            out.flows.push(fc2.clone());
        }),
    );
    let frames: Vec<_> = (0..50).map(|i| udp(i, [10, 0, 0, 2])).collect();
    f.inject(1, &frames);
    f.poll();
    // Counters are flushed periodically and when the thread stops.
    f.pmds[0].shutdown();
    assert_eq!(fc.packets.load(Ordering::Relaxed), 50);
    assert_eq!(fc.bytes.load(Ordering::Relaxed), 50 * 64);
    assert!(fc.last_used_ms.load(Ordering::Relaxed) > 0);
}

#[test]
fn uncacheable_translations_run_but_are_not_installed() {
    let mut f = fixture(
        2,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Output(2));
            out.cacheable = false;
        }),
    );
    f.inject(1, &[udp(1, [1, 1, 1, 1]), udp(1, [1, 1, 1, 1])]);
    f.poll();
    f.inject(1, &[udp(1, [1, 1, 1, 1])]);
    f.poll();
    assert_eq!(f.collect(2).len(), 3);
    assert_eq!(f.pmds[0].megaflows(), 0);
    assert_eq!(
        f.stats()[Counter::Upcalls],
        2,
        "same key in one batch shares a translation"
    );
}

#[test]
fn megaflow_bound_handles_new_flows_uncached() {
    let cfg = DpConfig {
        max_megaflows: 2,
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
    let frames: Vec<_> = (0..5).map(|i| udp(i, [1, 1, 1, 1])).collect();
    f.inject(1, &frames);
    f.poll();
    assert_eq!(f.collect(2).len(), 5);
    assert_eq!(f.pmds[0].megaflows(), 2);
    assert_eq!(f.stats()[Counter::MegaflowFull], 3);
}

#[test]
fn packet_ins_are_truncated_and_queued() {
    let mut f = fixture(
        2,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Controller {
                reason: PacketInReason::NoMatch,
                max_len: 20,
                table_id: 3,
                cookie: 0xabc,
            });
        }),
    );
    let frame = udp(9, [10, 0, 0, 7]);
    f.inject(1, &[frame.clone(), frame.clone()]);
    f.poll();
    let mut got = Vec::new();
    let n = f.dp.packet_ins(10, |pi| {
        got.push((
            pi.packet.data().to_vec(),
            pi.total_len,
            pi.in_port,
            pi.table_id,
            pi.cookie,
        ))
    });
    assert_eq!(n, 2);
    assert_eq!(got[0], (frame[..20].to_vec(), 64, 1, 3, 0xabc));
    assert!(f.collect(2).is_empty());
    assert_eq!(f.stats()[Counter::PacketIns], 2);
}

#[test]
fn packet_in_queue_full_is_counted() {
    let cfg = DpConfig {
        packet_in_queue: 1,
        ..DpConfig::default()
    };
    let mut f = fixture(
        1,
        cfg,
        Box::new(|_, out| {
            out.actions.push(DpAction::Controller {
                reason: PacketInReason::Action,
                max_len: u16::MAX,
                table_id: 0,
                cookie: 0,
            });
        }),
    );
    f.inject(1, &vec![udp(1, [1, 1, 1, 1]); 3]);
    f.poll();
    assert_eq!(f.stats()[Counter::PacketIns], 1);
    assert_eq!(f.stats()[Counter::DropPacketInFull], 2);
    assert_eq!(f.dp.packet_ins(10, |pi| assert_eq!(pi.packet.len(), 64)), 1);
}

struct EveryOther(std::sync::atomic::AtomicU64);

impl Policer for EveryOther {
    fn police(&self, _now_ns: u64, _bytes: u32) -> Police {
        if self.0.fetch_add(1, Ordering::Relaxed) & 1 == 0 {
            Police::Pass
        } else {
            Police::Drop
        }
    }
}

#[test]
fn meters_drop_what_they_police() {
    let mut f = fixture_with(
        2,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Meter(1));
            out.actions.push(DpAction::SetQueue(4));
            out.actions.push(DpAction::Output(2));
        }),
        Some(Arc::new(EveryOther(Default::default()))),
        1,
        256,
    );
    f.inject(1, &vec![udp(1, [1, 1, 1, 1]); 10]);
    f.poll();
    assert_eq!(f.collect(2).len(), 5);
    assert_eq!(f.stats()[Counter::DropMeter], 5);
}

#[test]
fn no_actions_drop_and_full_tx_rings_count_drops() {
    let mut f = fixture_with(
        2,
        DpConfig::default(),
        Box::new(|k, out| {
            out.mask = mask_of(&[Field::InPort, Field::TpSrc]);
            if k.get(Field::TpSrc) == 1 {
                out.actions.push(DpAction::Output(2));
            }
        }),
        None,
        1,
        8,
    );
    let mut frames = vec![udp(1, [1, 1, 1, 1]); 5];
    frames.extend(vec![udp(2, [1, 1, 1, 1]); 3]);
    f.inject(1, &frames);
    f.poll();
    // The flow with no action drops its 3 packets.
    assert_eq!(f.collect(2).len(), 5);
    assert_eq!(f.stats()[Counter::DropNoAction], 3);
    f.inject(1, &vec![udp(1, [1, 1, 1, 1]); 8]);
    f.poll();
    // The out ring (8 slots) is full now: the next 4 have nowhere to go.
    f.inject(1, &vec![udp(1, [1, 1, 1, 1]); 4]);
    f.poll();
    assert_eq!(f.stats()[Counter::DropTxFull], 4);
    assert_eq!(f.collect(2).len(), 8);
}

#[test]
fn idle_megaflows_are_evicted_with_counters_flushed() {
    let fc = Arc::new(FlowCounters::default());
    let fc2 = fc.clone();
    let cfg = DpConfig {
        megaflow_idle_ms: 0,
        maintenance_ms: 0,
        ..DpConfig::default()
    };
    let mut f = fixture(
        2,
        cfg,
        Box::new(move |_, out| {
            out.mask = mask_of(&[Field::InPort, Field::TpSrc]);
            out.actions.push(DpAction::Output(2));
            out.flows.push(fc2.clone());
        }),
    );
    f.inject(1, &[udp(1, [1, 1, 1, 1])]);
    f.poll();
    std::thread::sleep(std::time::Duration::from_millis(5));
    f.inject(1, &[udp(2, [1, 1, 1, 1])]);
    f.poll();
    assert_eq!(f.stats()[Counter::MegaflowEvictions], 1);
    assert_eq!(f.pmds[0].megaflows(), 1);
    assert_eq!(fc.packets.load(Ordering::Relaxed), 2);
    // The evicted flow comes back through an upcall.
    f.inject(1, &[udp(1, [1, 1, 1, 1])]);
    f.poll();
    assert_eq!(f.collect(2).len(), 3);
    assert_eq!(f.stats()[Counter::Upcalls], 3);
}

#[test]
fn truncated_and_malformed_frames_are_dropped_and_counted() {
    let mut f = fixture(2, DpConfig::default(), patch_logic());
    let good = udp(1000, [10, 0, 0, 2]);
    // A runt shorter than an Ethernet header.
    let runt = good[..10].to_vec();
    // An IPv4 header length of 3 words (less than the minimum 5).
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x43;
    // An IPv4 frame cut inside its header.
    let cut = good[..20].to_vec();
    let frames = vec![good.clone(), runt, good.clone(), bad_ihl, cut, good.clone()];
    f.inject(1, &frames);
    f.poll();
    assert_eq!(f.collect(2), vec![good.clone(), good.clone(), good]);
    let s = f.stats();
    assert_eq!(s[Counter::DropMalformed], 3);
    assert_eq!(
        s[Counter::RxPackets],
        6,
        "every frame is counted as received once"
    );
    assert_eq!(s[Counter::TxPackets], 3);

    // A batch of only bad frames forwards nothing.
    f.inject(1, &[vec![0u8; 4], vec![0xffu8; 13]]);
    f.poll();
    assert!(f.collect(2).is_empty());
    assert_eq!(f.stats()[Counter::DropMalformed], 5);
}

/// Even UDP source ports leave by port 2, odd ones by port 3.
fn by_source_port() -> common::Logic {
    Box::new(|k, out| {
        out.mask = mask_of(&[Field::InPort, Field::TpSrc]);
        out.actions
            .push(DpAction::Output(2 + (k.get(Field::TpSrc) as u32 & 1)));
    })
}

#[test]
fn packets_after_a_dropped_malformed_frame_keep_their_own_keys() {
    // A survivor that took a neighbour's key or hash after the malformed frames went would
    // leave by the wrong port.
    for emc in [0, usize::MAX] {
        let cfg = DpConfig {
            emc_min_subtables: emc,
            ..DpConfig::default()
        };
        let mut f = fixture(3, cfg, by_source_port());
        let runt = vec![0u8; 10];
        let mut frames = Vec::new();
        for i in 0..12u16 {
            frames.push(udp(1000 + i, [10, 0, 0, 2]));
            if i % 3 == 1 {
                frames.push(runt.clone());
            }
        }
        let flows = |parity: u16| -> Vec<_> {
            (0..12u16)
                .filter(|i| i % 2 == parity)
                .map(|i| udp(1000 + i, [10, 0, 0, 2]))
                .collect()
        };
        // Twice: the second batch hits the caches the first filled.
        for _ in 0..2 {
            f.inject(1, &frames);
            f.poll();
            assert_eq!(f.collect(2), flows(0), "emc_min_subtables {emc}");
            assert_eq!(f.collect(3), flows(1), "emc_min_subtables {emc}");
        }
        let s = f.stats();
        assert_eq!(s[Counter::DropMalformed], 8);
        assert_eq!(s[Counter::RxPackets], 32);
        assert_eq!(s[Counter::Upcalls], 12, "one translation per flow");
    }
}

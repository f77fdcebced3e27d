//! Revalidation in the datapath, on the real pipeline: a published flow change that no
//! packet's megaflow can meet keeps every megaflow (no flush, no upcall); one that meets some
//! removes exactly those, whose packets then meet the new tables; an untracked change (a
//! group) still empties the caches.

mod common;

use std::sync::Arc;

use common::udp;
use datapath::{revalidate, Datapath, DpConfig, Pmd, Snapshot};
use packet::{Batch, Field, Pool, PoolCache, BATCH_SIZE};
use pipeline::model::{Group, GroupMod, GroupModCommand, GroupType};
use pipeline::{
    Action, Control, FlowMod, FlowModCommand, Instruction, Match, PipelineCell, PipelineConfig,
};
use port::ring;
use port::{Port, RxQueue, TxQueue};

const FLOWS: u8 = 8;

fn udp_dst(dst: [u8; 4]) -> Match {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    m.set_exact(Field::IpProto, 17);
    m.set_exact(Field::Ipv4Dst, u128::from(u32::from_be_bytes(dst)));
    m
}

fn to(port: u32) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![Action::Output {
        port,
        max_len: 0,
    }])]
}

struct Rig {
    pmd: Pmd,
    _dp: Datapath,
    tx: Box<dyn TxQueue>,
    outs: Vec<Box<dyn RxQueue>>,
    cache: PoolCache,
}

impl Rig {
    fn new(cell: Arc<PipelineCell>) -> Rig {
        Rig::with_maintenance_ms(cell, DpConfig::default().maintenance_ms)
    }

    /// A rig whose thread runs its maintenance pass at most every `maintenance_ms` (0: after
    /// every batch).
    fn with_maintenance_ms(cell: Arc<PipelineCell>, maintenance_ms: u64) -> Rig {
        let pool = Pool::with_frames(2048);
        // Every miss translated and every megaflow kept while the test looks: no upcall
        // shedding (a slow, loaded machine would otherwise shed the refills after a flush)
        // and no idle eviction.
        let cfg = DpConfig {
            min_upcalls_per_batch: BATCH_SIZE as u32,
            megaflow_idle_ms: u64::MAX / 4,
            maintenance_ms,
            ..DpConfig::default()
        };
        let mut builder = Datapath::builder()
            .pool(pool.clone())
            .pipeline(cell)
            .config(cfg);
        let (mut ins, mut outs) = (Vec::new(), Vec::new());
        for p in 1..=3u32 {
            let (sw, out) = ring::pair(&format!("rv-sw{p}"), &format!("rv-out{p}"), 256, &pool);
            ins.push(out.open_tx(0).unwrap());
            outs.push(out.open_rx(0).unwrap());
            builder = builder.port(p, sw);
        }
        let dp = builder.build().unwrap();
        let pmd = dp.build_pmds().unwrap().pop().unwrap();
        Rig {
            pmd,
            _dp: dp,
            tx: ins.swap_remove(0),
            outs,
            cache: pool.cache(),
        }
    }

    /// Sends two packets of every flow (dst 10.0.0.1..=8) into port 1; returns how many
    /// left through ports 2 and 3.
    fn round(&mut self) -> (usize, usize) {
        let mut b = Batch::new();
        for _ in 0..2 {
            for d in 1..=FLOWS {
                b.push(self.cache.alloc_from(&udp(7, [10, 0, 0, d])).unwrap())
                    .unwrap();
            }
        }
        assert_eq!(self.tx.send(&mut b), 2 * FLOWS as usize);
        while self.pmd.poll_once() > 0 {}
        let mut got = [0; 2];
        for (i, n) in got.iter_mut().enumerate() {
            let mut b = Batch::new();
            *n = self.outs[i + 1].recv(&mut b);
            b.free_into(&mut self.cache);
        }
        (got[0], got[1])
    }

    fn stats(&self) -> Snapshot {
        self.pmd.stats()
    }
}

#[test]
fn a_change_keeps_the_megaflows_it_cannot_affect_and_removes_the_others() {
    let (mut c, cell) = Control::new(PipelineConfig::default());
    for d in 1..=FLOWS {
        c.flow_mod(&FlowMod::add(0, 100, udp_dst([10, 0, 0, d]), to(2)))
            .unwrap();
    }
    c.flow_mod(&FlowMod::add(0, 0, Match::ANY, to(3))).unwrap();
    c.publish();
    let mut r = Rig::new(cell);
    let all = 2 * FLOWS as usize;
    assert_eq!(r.round(), (all, 0));
    let base = r.stats();
    assert_eq!(base.upcalls, FLOWS as u64, "one megaflow per destination");

    // Below every deciding priority (and to no destination in use): everything kept.
    c.flow_mod(&FlowMod::add(0, 50, udp_dst([192, 168, 0, 1]), vec![]))
        .unwrap();
    c.publish();
    // Same priority, a destination no megaflow covers: kept too.
    c.flow_mod(&FlowMod::add(0, 100, udp_dst([10, 0, 0, 99]), vec![]))
        .unwrap();
    c.publish();
    assert_eq!(r.round(), (all, 0));
    let s = r.stats();
    assert_eq!(s.cache_flushes, 0);
    assert_eq!(s.upcalls, base.upcalls, "no megaflow was lost");
    assert_eq!(s.megaflow_invalidated, 0);

    // Above one flow's rule: that megaflow goes, exactly; its packets meet the new rule.
    c.flow_mod(&FlowMod::add(0, 200, udp_dst([10, 0, 0, 3]), to(3)))
        .unwrap();
    c.publish();
    assert_eq!(r.round(), (all - 2, 2));
    let s2 = r.stats();
    assert_eq!(s2.megaflow_invalidated, 1);
    assert_eq!(s2.upcalls, s.upcalls + 1);
    assert_eq!(s2.cache_flushes, 0);

    // Deleting one flow's rule: its packets fall to the catch-all.
    let mut del = FlowMod::add(0, 100, udp_dst([10, 0, 0, 5]), vec![]);
    del.command = FlowModCommand::DeleteStrict;
    c.flow_mod(&del).unwrap();
    c.publish();
    assert_eq!(r.round(), (all - 4, 4));
    let s3 = r.stats();
    assert_eq!(s3.megaflow_invalidated, 2);
    assert_eq!(s3.upcalls, s2.upcalls + 1);

    // A change the log does not track per entry: every cache is emptied, as before.
    c.group_mod(&GroupMod {
        command: GroupModCommand::Add,
        group: Group {
            id: 1,
            kind: GroupType::All,
            buckets: vec![],
        },
    })
    .unwrap();
    c.publish();
    assert_eq!(r.round(), (all - 4, 4));
    let s4 = r.stats();
    assert_eq!(s4.cache_flushes, 1);
    assert_eq!(s4.upcalls, s3.upcalls + FLOWS as u64);
}

/// Traffic that met only the catch-all before the controller's rules came: once those
/// megaflows are gone and the maintenance sweep has passed the live ones, a change below the
/// rules' priority (but above the catch-all's) costs the megaflows nothing — no check on
/// their next hit. Before, the catch-all's megaflows kept every such change reaching every
/// megaflow until the next flush.
#[test]
fn megaflows_decided_by_a_catch_all_stop_counting_once_gone() {
    let (mut c, cell) = Control::new(PipelineConfig::default());
    c.flow_mod(&FlowMod::add(0, 0, Match::ANY, to(3))).unwrap();
    c.publish();
    let mut r = Rig::with_maintenance_ms(cell, 0);
    let all = 2 * FLOWS as usize;
    assert_eq!(r.round(), (0, all));
    // The controller's rules arrive: the catch-all's megaflows go, new ones are decided at 100.
    for d in 1..=FLOWS {
        c.flow_mod(&FlowMod::add(0, 100, udp_dst([10, 0, 0, d]), to(2)))
            .unwrap();
    }
    c.publish();
    assert_eq!(r.round(), (all, 0));
    // A few passes of the sweep (one after each batch here).
    for _ in 0..3 {
        assert_eq!(r.round(), (all, 0));
    }
    let before = r.stats();
    // Below every live megaflow's rule, above the catch-all's.
    for i in 0..4u8 {
        c.flow_mod(&FlowMod::add(0, 50, udp_dst([192, 168, 0, i]), vec![]))
            .unwrap();
        c.publish();
        assert_eq!(r.round(), (all, 0));
    }
    let after = r.stats();
    assert_eq!(after.upcalls, before.upcalls, "no megaflow lost");
    assert_eq!(
        after.megaflow_revalidated, before.megaflow_revalidated,
        "no megaflow even checked"
    );
}

#[test]
fn megaflows_survive_many_publishes_and_stay_right() {
    let (mut c, cell) = Control::new(PipelineConfig::default());
    for d in 1..=FLOWS {
        c.flow_mod(&FlowMod::add(0, 100, udp_dst([10, 0, 0, d]), to(2)))
            .unwrap();
    }
    c.flow_mod(&FlowMod::add(0, 0, Match::ANY, to(3))).unwrap();
    c.publish();
    let mut r = Rig::new(cell);
    let all = 2 * FLOWS as usize;
    r.round();
    let base = r.stats();
    // Many publishes of changes no flow meets, some between rounds, some while the thread
    // does not look (more than the thread's ring holds: those megaflows are re-translated).
    for i in 0..3000u32 {
        let b = i.to_be_bytes();
        c.flow_mod(&FlowMod::add(
            0,
            50,
            udp_dst([192, 168, b[2], b[3]]),
            vec![],
        ))
        .unwrap();
        c.publish();
        if i % 100 == 0 {
            assert_eq!(r.round(), (all, 0));
        }
    }
    let s = r.stats();
    assert_eq!(s.cache_flushes, 0);
    assert_eq!(s.upcalls, base.upcalls, "{s:?}");
    // A change that meets every flow at last.
    c.flow_mod(&FlowMod::add(0, 300, Match::ANY, to(3)))
        .unwrap();
    c.publish();
    assert_eq!(r.round(), (0, all));
    assert_eq!(r.stats().megaflow_invalidated, FLOWS as u64);
}

/// Changes that reach the megaflows' table and priority but miss their boxes, past the point
/// where the thread's 16-bit stamps are walked (every 2^14 epochs): megaflows hit within the
/// ring stay; left alone for longer than the ring, they are dropped when hit again.
#[test]
fn stamps_survive_the_walk_and_old_megaflows_go() {
    let (mut c, cell) = Control::new(PipelineConfig::default());
    for d in 1..=FLOWS {
        c.flow_mod(&FlowMod::add(0, 100, udp_dst([10, 0, 0, d]), to(2)))
            .unwrap();
    }
    c.publish();
    let mut r = Rig::new(cell);
    let all = 2 * FLOWS as usize;
    r.round();
    let base = r.stats();
    let mut n = 0u32;
    let mut change = |c: &mut Control| {
        n += 1;
        let b = n.to_be_bytes();
        c.flow_mod(&FlowMod::add(
            0,
            100,
            udp_dst([172, b[1], b[2], b[3]]),
            vec![],
        ))
        .unwrap();
        c.publish();
    };
    for i in 0..17_000u32 {
        change(&mut c);
        if i % 1000 == 999 {
            assert_eq!(r.round(), (all, 0), "after {} changes", i + 1);
        }
    }
    let s = r.stats();
    assert_eq!((s.upcalls, s.cache_flushes), (base.upcalls, 0), "{s:?}");
    assert!(s.megaflow_revalidated >= 17 * FLOWS as u64, "{s:?}");
    assert_eq!(s.megaflow_invalidated, 0);
    // Longer than the ring without a hit: each megaflow goes when next hit.
    for _ in 0..revalidate::RING + 10 {
        change(&mut c);
    }
    assert_eq!(r.round(), (all, 0));
    let s2 = r.stats();
    assert_eq!(s2.upcalls, s.upcalls + FLOWS as u64);
    assert_eq!(s2.megaflow_invalidated, FLOWS as u64);
    assert_eq!(s2.cache_flushes, 0);
}

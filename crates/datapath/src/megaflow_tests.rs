//! Tests of megaflows, the arena and its eviction clock.
use super::*;

fn no_meter(_: u32) -> Option<Arc<dyn Policer>> {
    None
}

fn compile(actions: &[DpAction]) -> Actions {
    let ports = PortMap::new(vec![(1, 0), (2, 1), (7, 2)]);
    let mut a = Actions::default();
    a.compile(actions, &ports, &no_meter);
    a
}

#[test]
fn plans_pick_the_cheap_cases() {
    assert_eq!(compile(&[]).plan, Plan::Drop);
    assert_eq!(compile(&[DpAction::Output(7)]).plan, Plan::Forward(2));
    // Unknown ports vanish; what is left may be a single forward.
    assert_eq!(
        compile(&[DpAction::Output(99), DpAction::Output(2)]).plan,
        Plan::Forward(1)
    );
    assert_eq!(
        compile(&[DpAction::Output(1), DpAction::PopVlan, DpAction::Output(2)]).plan,
        Plan::General { move_at: Some(2) }
    );
    let pi = DpAction::Controller {
        reason: PacketInReason::Action,
        max_len: 128,
        table_id: 0,
        cookie: 0,
    };
    assert_eq!(
        compile(&[DpAction::Output(1), pi.clone()]).plan,
        Plan::General { move_at: None }
    );
    assert_eq!(compile(&[pi]).plan, Plan::General { move_at: None });
    // A meter that cannot be resolved is left out.
    assert_eq!(compile(&[DpAction::Meter(3)]).plan, Plan::Drop);
}

#[test]
fn port_map_finds_ports() {
    let m = PortMap::new(vec![(9, 3), (1, 0), (5, 2)]);
    assert_eq!(m.get(5), Some(2));
    assert_eq!(m.get(9), Some(3));
    assert_eq!(m.get(4), None);
}

#[test]
fn arena_ids_go_stale_and_counters_flush() {
    let fc = Arc::new(FlowCounters::default());
    let mut tr = Translation::default();
    tr.clear();
    tr.flows.push(fc.clone());
    tr.mask.set_all(Field::InPort);
    let mut key = FlowKey::ZERO;
    key.set(Field::InPort, 3);
    key.set(Field::TpDst, 80);
    let mut arena = Arena::new(16);
    let id = arena
        .insert(Megaflow::new(&key, &tr, Actions::default(), 1))
        .unwrap();
    assert_eq!(
        arena.get(id).unwrap().key.get(Field::TpDst),
        0,
        "key is masked"
    );
    arena.count(id, 2, 120);
    arena.count(id, 1, 60);
    arena.flush_dirty(5);
    assert_eq!(fc.packets.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert_eq!(fc.bytes.load(std::sync::atomic::Ordering::Relaxed), 180);
    arena.count(id, 1, 60);
    assert_eq!(arena.remove(id, 6).unwrap().unflushed(), (0, 0));
    assert_eq!(fc.packets.load(std::sync::atomic::Ordering::Relaxed), 4);
    assert!(arena.get(id).is_none());
    let id2 = arena
        .insert(Megaflow::new(&key, &tr, Actions::default(), 7))
        .unwrap();
    assert_eq!(id2.index(), id.index());
    assert_ne!(id2, id);
    assert!(arena.get(id).is_none());
    arena.clear(8);
    assert!(arena.get(id2).is_none());
    assert!(arena.is_empty());
}

#[test]
fn a_partial_flush_takes_the_megaflows_hit_longest_ago_and_leaves_the_rest_listed() {
    use std::sync::atomic::Ordering::Relaxed;
    let fcs: Vec<Arc<FlowCounters>> = (0..4).map(|_| Arc::new(FlowCounters::default())).collect();
    let mut arena = Arena::new(16);
    let ids: Vec<MegaflowId> = fcs
        .iter()
        .enumerate()
        .map(|(i, fc)| {
            arena
                .insert(Megaflow::new(
                    &key_for(i as u16),
                    &tr_for(fc),
                    Actions::default(),
                    1,
                ))
                .unwrap()
        })
        .collect();
    // Hit in the order 2, 0, 3, 1.
    for &i in &[2usize, 0, 3, 1] {
        arena.count(ids[i], 1 + i as u64, 100);
    }
    assert_eq!(arena.dirty_len(), 4);
    arena.flush_oldest(2, 5);
    let packets = |i: usize| fcs[i].packets.load(Relaxed);
    assert_eq!(
        (packets(2), packets(0)),
        (3, 1),
        "the two hit first are flushed"
    );
    assert_eq!((packets(3), packets(1)), (0, 0), "the others wait");
    assert_eq!(arena.dirty_len(), 2);
    // A flushed megaflow hit again goes to the end of the list, behind those still waiting.
    arena.count(ids[2], 10, 100);
    arena.flush_oldest(2, 6);
    assert_eq!((packets(3), packets(1), packets(2)), (4, 2, 3));
    arena.flush_dirty(7);
    assert_eq!(packets(2), 13);
    assert_eq!(arena.dirty_len(), 0);
    // More than the list holds flushes what there is.
    arena.count(ids[0], 1, 100);
    arena.flush_oldest(100, 8);
    assert_eq!((packets(0), arena.dirty_len()), (2, 0));
}

/// A translation that consults in_port and tp_src and credits `fc`.
fn tr_for(fc: &Arc<FlowCounters>) -> Translation {
    let mut tr = Translation::default();
    tr.clear();
    tr.flows.push(fc.clone());
    tr.mask.set_all(Field::InPort);
    tr.mask.set_all(Field::TpSrc);
    tr
}

fn key_for(sport: u16) -> FlowKey {
    let mut key = FlowKey::ZERO;
    key.set(Field::InPort, 1);
    key.set(Field::TpSrc, sport as u128);
    key
}

fn packets(fc: &FlowCounters) -> u64 {
    fc.packets.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn full_arena_evicts_the_least_recently_used_and_flushes_it() {
    let fc = Arc::new(FlowCounters::default());
    let tr = tr_for(&fc);
    let mut arena = Arena::new(4);
    // Megaflow #2 credits its own flow entry.
    let fc2 = Arc::new(FlowCounters::default());
    let tr2 = tr_for(&fc2);
    let ids: Vec<MegaflowId> = (0..4)
        .map(|p| {
            let tr = if p == 2 { &tr2 } else { &tr };
            arena.insert_from(&key_for(p), tr, 1).unwrap().0
        })
        .collect();
    assert!(arena.is_full());
    // The batches that installed them use each once (#2 with three packets).
    for (n, &id) in ids.iter().enumerate() {
        arena.count(id, if n == 2 { 3 } else { 1 }, 60);
    }
    // Nothing was used after its install: the oldest goes first.
    assert_eq!(arena.victim(|_| false), Some(ids[0]));
    // Later batches use 0, 1 and 3; #2 was not used since it was installed.
    for n in [0, 1, 3] {
        arena.count(ids[n], 1, 60);
    }
    let v = arena.victim(|_| false).unwrap();
    assert_eq!(v, ids[2]);
    assert_eq!(packets(&fc2), 0, "nothing flushed yet");
    let mf = arena.remove(v, 3).unwrap();
    assert_eq!(mf.unflushed(), (0, 0), "counters flushed on eviction");
    assert_eq!(
        packets(&fc2),
        3,
        "the evicted megaflow's packets reached its flow"
    );
    let (fresh, _) = arena.insert_from(&key_for(7), &tr, 3).unwrap();
    assert_eq!(
        fresh.index(),
        v.index(),
        "the evicted slot is reused in place"
    );
    assert!(arena.get(v).is_none());
    assert_eq!(arena.len(), 4);
    // The hand goes on: 3 is used by the current batch, 0 was used (second chance), 1 was
    // used again after the hand passed it, so the new megaflow (never used) goes.
    arena.count(ids[1], 1, 60);
    assert_eq!(arena.victim(|id| id == ids[3]), Some(fresh));
    // The batch that used 3 counts it; next, 3 gets its second chance and 0 had its own.
    arena.count(ids[3], 1, 60);
    assert_eq!(arena.victim(|_| false), Some(ids[0]));
}

#[test]
fn a_full_arena_has_one_spare_slot() {
    let fc = Arc::new(FlowCounters::default());
    let tr = tr_for(&fc);
    let mut arena = Arena::new(2);
    for p in 0..2 {
        arena.insert_from(&key_for(p), &tr, 1).unwrap();
    }
    assert!(arena.is_full());
    let (spare, _) = arena.insert_from(&key_for(2), &tr, 1).unwrap();
    assert!(arena.insert_from(&key_for(3), &tr, 1).is_none(), "no room");
    assert!(arena.remove(spare, 1).is_some());
    assert_eq!(arena.len(), 2);
}

#[test]
fn victim_is_none_when_everything_is_busy() {
    let fc = Arc::new(FlowCounters::default());
    let tr = tr_for(&fc);
    let mut arena = Arena::new(2);
    assert_eq!(arena.victim(|_| false), None, "empty");
    for p in 0..2 {
        arena.insert_from(&key_for(p), &tr, 1).unwrap();
    }
    assert_eq!(arena.victim(|_| true), None);
    assert!(arena.victim(|_| false).is_some());
}

#[test]
fn a_flood_through_a_full_arena_does_not_grow_it() {
    let fc = Arc::new(FlowCounters::default());
    let tr = tr_for(&fc);
    let mut arena = Arena::new(64);
    let reserved = arena.reserved_bytes();
    let dirty_cap = arena.dirty.capacity();
    let mut evicted = 0u64;
    let mut first_storage = Vec::new();
    for p in 0..10_000u16 {
        if arena.is_full() {
            let v = arena.victim(|_| false).expect("a full arena has a victim");
            assert!(arena.remove(v, 5).is_some());
            evicted += 1;
        }
        let (id, mf) = arena.insert_from(&key_for(p), &tr, 5).unwrap();
        let storage = mf.flows.as_ptr();
        match first_storage.get(id.index()) {
            Some(&first) => assert_eq!(storage, first, "slot storage is reused"),
            None => first_storage.push(storage),
        }
        arena.count(id, 1, 64);
        if p % 1000 == 999 {
            arena.flush_dirty(6);
        }
    }
    assert_eq!(arena.len(), 64);
    assert_eq!(evicted, 10_000 - 64);
    assert_eq!(arena.slots.len(), 64);
    assert_eq!(arena.reserved_bytes(), reserved, "slots never reallocated");
    assert_eq!(
        arena.dirty.capacity(),
        dirty_cap,
        "dirty list never reallocated"
    );
    arena.flush_dirty(7);
    assert_eq!(
        packets(&fc),
        10_000,
        "every packet reached the flow counters"
    );
}

#[test]
fn pool_refills_in_place() {
    let fc = Arc::new(FlowCounters::default());
    let tr = tr_for(&fc);
    let mut pool = MegaflowPool::with_capacity(2);
    let (i, mf) = pool.push_from(&key_for(1), &tr, 1);
    mf.actions.compile(
        &[DpAction::Output(2)],
        &PortMap::new(vec![(2, 0)]),
        &no_meter,
    );
    assert_eq!(i, 0);
    assert_eq!(pool.get(0).unwrap().actions.plan, Plan::Forward(0));
    assert!(pool.get(1).is_none());
    pool.clear();
    assert!(pool.is_empty());
    assert!(pool.get(0).is_none());
    assert_eq!(
        Arc::strong_count(&fc),
        2,
        "cleared megaflows release the flow counters"
    );
}

#[test]
fn flush_sums_runs_of_megaflows_of_one_flow_entry() {
    let a = Arc::new(FlowCounters::default());
    let b = Arc::new(FlowCounters::default());
    let (tr_a, tr_b) = (tr_for(&a), tr_for(&b));
    let mut both = tr_for(&a);
    both.flows.push(b.clone());
    let mut arena = Arena::new(8);
    let ids: Vec<MegaflowId> = [&tr_a, &tr_a, &tr_b, &tr_a, &both, &tr_a]
        .iter()
        .enumerate()
        .map(|(p, tr)| arena.insert_from(&key_for(p as u16), tr, 1).unwrap().0)
        .collect();
    for (n, &id) in ids.iter().enumerate() {
        arena.count(id, n as u64 + 1, 100 * (n as u64 + 1));
    }
    // A megaflow counted again and one that died keep the totals exact.
    arena.count(ids[0], 10, 1000);
    arena.remove(ids[3], 2).unwrap();
    assert_eq!(packets(&a), 4, "the dead one flushed on removal");
    arena.flush_dirty(3);
    assert_eq!(packets(&a), 1 + 10 + 2 + 4 + 5 + 6);
    assert_eq!(a.bytes.load(std::sync::atomic::Ordering::Relaxed), 2800);
    assert_eq!(packets(&b), 3 + 5);
    assert_eq!(a.last_used_ms.load(std::sync::atomic::Ordering::Relaxed), 3);
    for &id in &ids {
        if let Some(mf) = arena.get(id) {
            assert_eq!(mf.unflushed(), (0, 0));
            assert!(!mf.dirty);
        }
    }
    arena.flush_dirty(4);
    assert_eq!(packets(&a), 28, "nothing counted twice");
}

#[test]
fn a_megaflow_s_life_counts_outlast_its_flushes_and_restart_with_the_next_tenant() {
    let fc = Arc::new(FlowCounters::default());
    let tr = tr_for(&fc);
    let mut arena = Arena::new(4);
    let (id, _) = arena.insert_from(&key_for(1), &tr, 5).unwrap();
    arena.count(id, 2, 120);
    assert_eq!(
        arena.life(id).map(|l| l.packets),
        Some(2),
        "unflushed counts show"
    );
    arena.flush_dirty(6);
    arena.count(id, 1, 60);
    let life = arena.life(id).unwrap();
    assert_eq!((life.packets, life.bytes, life.installed_ms), (3, 180, 5));
    assert_eq!(packets(&fc), 2, "the flow entry got the flushed ones");
    arena.remove(id, 7);
    assert_eq!(arena.life(id), None, "a stale id has no life");
    let (next, _) = arena.insert_from(&key_for(2), &tr, 9).unwrap();
    assert_eq!(next.index(), id.index(), "the slot is reused");
    let life = arena.life(next).unwrap();
    assert_eq!((life.packets, life.installed_ms), (0, 9));
}

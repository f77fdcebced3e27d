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

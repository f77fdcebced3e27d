//! Tests of bulk flow-mods: each is held to the same flow-mod applied in place
//! ([`Control::flow_mod`]) at the moment of the swap, with other changes made between the
//! plan and the swap.

use packet::Field;

use super::*;
use crate::model::{Action, Instruction};
use crate::stats::FlowView;
use crate::PipelineConfig;

fn out(p: u32) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![Action::Output {
        port: p,
        max_len: 0,
    }])]
}

/// Flow `i`: IPv4 when `i` is even (what `ip` selects), send_flow_rem when `i % 3 == 0`,
/// across two tables.
fn flow(i: u32) -> FlowMod {
    let mut m = Match::ANY;
    m.set_exact(Field::InPort, u128::from(i % 50 + 1));
    if i.is_multiple_of(2) {
        m.set_exact(Field::EthType, 0x0800);
        m.set_exact(Field::Ipv4Src, u128::from(0x0a00_0000 + i));
    } else {
        m.set_exact(Field::EthType, 0x0806);
    }
    let mut fm = FlowMod::add((i % 4 / 2) as u8, (i % 7) as u16, m, out(2));
    fm.flags.send_flow_rem = i.is_multiple_of(3);
    fm
}

fn filled(n: u32) -> Control {
    let (mut c, _cell) = Control::new(PipelineConfig::default());
    for i in 0..n {
        c.flow_mod(&flow(i)).unwrap();
    }
    c
}

fn ip_match() -> Match {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    m
}

fn del_ip(table: u8) -> FlowMod {
    FlowMod {
        command: FlowModCommand::Delete,
        ..FlowMod::add(table, 0, ip_match(), Vec::new())
    }
}

fn mod_ip(table: u8) -> FlowMod {
    FlowMod {
        command: FlowModCommand::Modify,
        ..FlowMod::add(table, 0, ip_match(), out(9))
    }
}

/// What a test compares: every flow (without durations) and the removed flows' keys.
fn state(c: &mut Control) -> (Vec<FlowView>, Vec<(u8, u16, Match)>) {
    let mut flows = c.flows(ALL_TABLES, &FlowFilter::ALL);
    for f in &mut flows {
        f.duration_ms = 0;
    }
    flows.sort_by_key(|f| (f.table_id, f.priority, format!("{:?}", f.matcher)));
    let mut removed: Vec<(u8, u16, Match)> = c
        .take_removed()
        .iter()
        .map(|r| (r.flow.table_id, r.flow.priority, r.flow.matcher))
        .collect();
    removed.sort_by_key(|k| format!("{k:?}"));
    (flows, removed)
}

fn run_bulk(c: &mut Control, m: &FlowMod, between: impl Fn(&mut Control)) -> BulkDone {
    let plan = c.plan_bulk(m).unwrap();
    between(c);
    let ready = plan.prepare().unwrap();
    c.finish_bulk(ready).unwrap()
}

/// The other requests' changes made between plan and swap: an add the filter selects, one it
/// does not, a delete of a selected flow, a modify of another, a re-add of a third.
fn others(c: &mut Control) {
    let mut sel = Match::ANY;
    sel.set_exact(Field::EthType, 0x0800);
    sel.set_exact(Field::Ipv4Src, 0x0b00_0001);
    let mut a = FlowMod::add(0, 3, sel, out(4));
    a.flags.send_flow_rem = true;
    c.flow_mod(&a).unwrap();
    let mut other = Match::ANY;
    other.set_exact(Field::EthType, 0x86dd);
    c.flow_mod(&FlowMod::add(0, 3, other, out(4))).unwrap();
    let strict = |i: u32, command| FlowMod { command, ..flow(i) };
    c.flow_mod(&strict(0, FlowModCommand::DeleteStrict))
        .unwrap();
    c.flow_mod(&FlowMod {
        instructions: out(5),
        ..strict(6, FlowModCommand::ModifyStrict)
    })
    .unwrap();
    let mut readd = flow(12);
    readd.instructions = out(6);
    readd.flags.send_flow_rem = false;
    c.flow_mod(&readd).unwrap();
}

#[test]
fn a_bulk_delete_is_the_delete_in_place() {
    for table in [0, ALL_TABLES] {
        let mut bulk = filled(400);
        let mut reference = filled(400);
        let done = run_bulk(&mut bulk, &del_ip(table), |_| {});
        reference.flow_mod(&del_ip(table)).unwrap();
        let want = state(&mut reference);
        assert!(!want.1.is_empty());
        assert_eq!(state(&mut bulk), want, "table {table}");
        assert!(matches!(done, BulkDone::Applied(n) if n > 0));
    }
}

#[test]
fn a_bulk_delete_takes_changes_made_meanwhile_as_they_are_at_the_swap() {
    let mut bulk = filled(400);
    let mut reference = filled(400);
    let done = run_bulk(&mut bulk, &del_ip(ALL_TABLES), others);
    assert!(matches!(done, BulkDone::Applied(_)), "{done:?}");
    others(&mut reference);
    reference.flow_mod(&del_ip(ALL_TABLES)).unwrap();
    assert_eq!(state(&mut bulk), state(&mut reference));
}

#[test]
fn a_bulk_modify_is_the_modify_in_place_with_changes_made_meanwhile() {
    let mut bulk = filled(400);
    let mut reference = filled(400);
    assert!(matches!(
        run_bulk(&mut bulk, &mod_ip(0), others),
        BulkDone::Applied(_)
    ));
    others(&mut reference);
    reference.flow_mod(&mod_ip(0)).unwrap();
    let want = state(&mut reference);
    assert!(want.0.iter().any(|f| f.instructions == out(9)));
    assert_eq!(state(&mut bulk), want);
}

#[test]
fn a_table_replaced_meanwhile_makes_the_plan_stale_and_nothing_changes() {
    let mut c = filled(100);
    let before = state(&mut c);
    let everything = FlowMod {
        command: FlowModCommand::Delete,
        ..FlowMod::add(0, 0, Match::ANY, Vec::new())
    };
    let done = run_bulk(&mut c, &del_ip(ALL_TABLES), |c| {
        c.flow_mod(&everything).unwrap();
        c.take_removed();
    });
    assert_eq!(done, BulkDone::Stale);
    let (flows, removed) = state(&mut c);
    assert!(removed.is_empty());
    assert_eq!(
        flows,
        before
            .0
            .into_iter()
            .filter(|f| f.table_id != 0)
            .collect::<Vec<_>>()
    );
    // Planned again, it applies.
    assert!(matches!(
        run_bulk(&mut c, &del_ip(ALL_TABLES), |_| {}),
        BulkDone::Applied(_)
    ));
    assert!(c
        .flows(ALL_TABLES, &FlowFilter::ALL)
        .iter()
        .all(|f| f.matcher.get(Field::EthType).0 != 0x0800));
}

#[test]
fn a_bulk_modify_refuses_what_in_place_refuses() {
    let mut c = filled(50);
    let bad = FlowMod {
        instructions: vec![Instruction::Meter(7)],
        ..mod_ip(0)
    };
    assert!(c.flow_mod(&bad).is_err());
    let plan = c.plan_bulk(&bad).unwrap();
    assert!(plan.prepare().is_err());
}

#[test]
fn only_big_non_strict_modifies_and_filtered_deletes_are_bulk() {
    let small = filled(100);
    assert!(!small.is_bulk(&del_ip(ALL_TABLES)));
    // Table 0 just past the threshold.
    let mut big = filled(0);
    for i in 0..=BULK_MIN as u32 {
        let mut m = ip_match();
        m.set_exact(Field::Ipv4Src, u128::from(i));
        big.flow_mod(&FlowMod::add(0, 1, m, out(2))).unwrap();
    }
    assert!(big.is_bulk(&del_ip(ALL_TABLES)));
    assert!(big.is_bulk(&del_ip(0)));
    assert!(!big.is_bulk(&del_ip(1)), "table 1 is empty");
    assert!(big.is_bulk(&mod_ip(0)));
    let everything = FlowMod {
        command: FlowModCommand::Delete,
        ..FlowMod::add(ALL_TABLES, 0, Match::ANY, Vec::new())
    };
    assert!(
        !big.is_bulk(&everything),
        "a delete of everything swaps at once"
    );
    let strict = FlowMod {
        command: FlowModCommand::DeleteStrict,
        ..del_ip(0)
    };
    assert!(!big.is_bulk(&strict));
}

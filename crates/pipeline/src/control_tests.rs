//! Tests of [`Control`]: flow-mod semantics, batches, publishing, groups and meters
//! deleting their flows, timeouts and stats.

use std::sync::Arc;

use packet::{Field, FlowKey};

use super::*;
use crate::dpaction::Translation;
use crate::model::{
    ports, Action, Bucket, FlowFlags, Group, GroupType, Instruction, Match, Meter, MeterBand,
    GROUP_ANY,
};

fn port_match(p: u128) -> Match {
    let mut m = Match::ANY;
    m.set_exact(Field::InPort, p);
    m
}

fn out(p: u32) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![Action::Output {
        port: p,
        max_len: 0,
    }])]
}

fn add(table: u8, prio: u16, m: Match, p: u32) -> FlowMod {
    FlowMod::add(table, prio, m, out(p))
}

fn key(in_port: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, u128::from(in_port));
    k
}

fn actions(c: &Control, k: &FlowKey) -> Vec<crate::DpAction> {
    let mut t = Translation::default();
    c.published().translate(k, &mut t);
    t.actions
}

fn new() -> (Control, Arc<PipelineCell>) {
    Control::new(PipelineConfig::default())
}

#[test]
fn changes_are_visible_only_after_publish() {
    let (mut c, cell) = new();
    let g0 = cell.generation();
    c.flow_mod(&add(0, 1, Match::ANY, 2)).unwrap();
    assert!(actions(&c, &key(1)).is_empty());
    assert_eq!(cell.generation(), g0);
    c.publish();
    assert!(cell.generation() > g0);
    assert_eq!(actions(&c, &key(1)), vec![crate::DpAction::Output(2)]);
    assert_eq!(cell.load().table(0).unwrap().len(), 1);
}

#[test]
fn add_replaces_identical_keeping_counters_unless_reset() {
    let (mut c, _) = new();
    c.flow_mod(&add(0, 5, port_match(1), 2)).unwrap();
    let first = c.flows(0, &FlowFilter::ALL);
    assert_eq!(first.len(), 1);
    c.tables[0]
        .classifier
        .iter()
        .next()
        .unwrap()
        .counters
        .add(4, 400, 1);
    c.flow_mod(&add(0, 5, port_match(1), 3)).unwrap();
    let v = c.flows(0, &FlowFilter::ALL);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].packets, 4, "counters copied from the replaced entry");
    assert_eq!(v[0].instructions, out(3));
    let mut reset = add(0, 5, port_match(1), 4);
    reset.flags.reset_counts = true;
    c.flow_mod(&reset).unwrap();
    assert_eq!(c.flows(0, &FlowFilter::ALL)[0].packets, 0);
}

#[test]
fn check_overlap_refuses_same_priority_overlaps() {
    let (mut c, _) = new();
    c.flow_mod(&add(0, 5, port_match(1), 2)).unwrap();
    let mut m = add(0, 5, Match::ANY, 3);
    m.flags.check_overlap = true;
    assert_eq!(
        c.flow_mod(&m),
        Err(FlowModError::Overlap {
            table: 0,
            priority: 5
        })
    );
    m.priority = 6;
    c.flow_mod(&m).unwrap();
    let mut disjoint = add(0, 5, port_match(2), 3);
    disjoint.flags.check_overlap = true;
    c.flow_mod(&disjoint).unwrap();
}

#[test]
fn modify_and_modify_strict() {
    let (mut c, _) = new();
    let mut a = add(0, 5, port_match(1), 2);
    a.cookie = 0x11;
    c.flow_mod(&a).unwrap();
    c.flow_mod(&add(0, 6, port_match(1), 2)).unwrap();
    c.flow_mod(&add(0, 7, port_match(2), 2)).unwrap();
    let mut strict = FlowMod {
        command: FlowModCommand::ModifyStrict,
        ..add(0, 5, port_match(1), 9)
    };
    strict.cookie = 0x99;
    c.flow_mod(&strict).unwrap();
    let v = c.flows(0, &FlowFilter::ALL);
    let by_prio = |p: u16| v.iter().find(|f| f.priority == p).unwrap().clone();
    assert_eq!(by_prio(5).instructions, out(9));
    assert_eq!(by_prio(5).cookie, 0x11, "modify does not change the cookie");
    assert_eq!(by_prio(6).instructions, out(2));
    // out_port filters deletes only: a modify with out_port still selects.
    let mut with_port = FlowMod {
        command: FlowModCommand::ModifyStrict,
        ..add(0, 7, port_match(2), 6)
    };
    with_port.out_port = 99;
    c.flow_mod(&with_port).unwrap();
    assert_eq!(
        c.flows(0, &FlowFilter::ALL)
            .iter()
            .find(|f| f.priority == 7)
            .unwrap()
            .instructions,
        out(6)
    );
    let loose = FlowMod {
        command: FlowModCommand::Modify,
        ..add(0, 0, port_match(1), 8)
    };
    c.flow_mod(&loose).unwrap();
    let v = c.flows(0, &FlowFilter::ALL);
    assert_eq!(v.iter().filter(|f| f.instructions == out(8)).count(), 2);
    // A modify whose new instructions are invalid for a selected entry changes nothing.
    let bad = FlowMod {
        command: FlowModCommand::Modify,
        ..FlowMod::add(0, 0, Match::ANY, vec![Instruction::GotoTable(0)])
    };
    assert!(matches!(
        c.flow_mod(&bad),
        Err(FlowModError::GotoBackwards { from: 0, to: 0 })
    ));
    assert_eq!(
        c.flows(0, &FlowFilter::ALL)
            .iter()
            .filter(|f| f.instructions == out(8))
            .count(),
        2
    );
}

#[test]
fn delete_with_cookie_and_out_port_filters() {
    let (mut c, _) = new();
    for (i, cookie) in [(1u128, 0x100u64), (2, 0x200), (3, 0x101)] {
        let mut m = add(1, 5, port_match(i), i as u32 + 10);
        m.cookie = cookie;
        m.flags.send_flow_rem = i == 1;
        c.flow_mod(&m).unwrap();
    }
    c.flow_mod(&add(2, 5, port_match(1), 12)).unwrap();
    let del = |table, cookie, cookie_mask, out_port| FlowMod {
        command: FlowModCommand::Delete,
        cookie,
        cookie_mask,
        out_port,
        ..add(table, 0, Match::ANY, 1)
    };
    c.flow_mod(&del(1, 0x100, 0xf00, ports::ANY)).unwrap();
    let left: Vec<u64> = c
        .flows(1, &FlowFilter::ALL)
        .iter()
        .map(|f| f.cookie)
        .collect();
    assert_eq!(left, vec![0x200]);
    let removed = c.take_removed();
    assert_eq!(
        removed.len(),
        1,
        "only the entry with send_flow_rem is reported"
    );
    assert_eq!(removed[0].reason, RemovedReason::Delete);
    c.flow_mod(&del(ALL_TABLES, 0, 0, 12)).unwrap();
    assert_eq!(c.flows(ALL_TABLES, &FlowFilter::ALL).len(), 0);
    // Strict delete needs the exact priority.
    c.flow_mod(&add(0, 5, port_match(1), 2)).unwrap();
    let mut strict = FlowMod {
        command: FlowModCommand::DeleteStrict,
        ..add(0, 4, port_match(1), 2)
    };
    c.flow_mod(&strict).unwrap();
    assert_eq!(c.flows(0, &FlowFilter::ALL).len(), 1);
    strict.priority = 5;
    c.flow_mod(&strict).unwrap();
    assert_eq!(c.flows(0, &FlowFilter::ALL).len(), 0);
}

/// A delete that selects every flow swaps in empty tables: every entry is reported as one
/// removed one by one would be, and a snapshot a reader still holds keeps its entries.
#[test]
fn deleting_everything_empties_the_tables_at_once() {
    let (mut c, cell) = new();
    for i in 0..20u16 {
        let mut m = add((i % 2) as u8 * 3, 5, port_match(u128::from(i)), 2);
        m.flags.send_flow_rem = i < 10;
        m.idle_timeout = if i % 4 == 0 { 30 } else { 0 };
        c.flow_mod(&m).unwrap();
    }
    c.publish();
    let held = cell.load();
    assert!(c.has_timed_flows());
    let all = FlowMod {
        command: FlowModCommand::Delete,
        ..add(ALL_TABLES, 0, Match::ANY, 1)
    };
    c.flow_mod(&all).unwrap();
    let removed = c.take_removed();
    assert_eq!(removed.len(), 10, "every entry with send_flow_rem");
    assert!(removed.iter().all(|r| r.reason == RemovedReason::Delete));
    assert!(c.flows(ALL_TABLES, &FlowFilter::ALL).is_empty());
    assert!(!c.has_timed_flows());
    assert!(c.table_stats().iter().all(|t| t.active == 0));
    // Not published yet: the datapath's snapshot is unchanged.
    assert_eq!(cell.load().table(0).unwrap().len(), 10);
    c.publish();
    assert_eq!(cell.load().table(0).unwrap().len(), 0);
    assert_eq!(cell.load().table(3).unwrap().len(), 0);
    assert_eq!(
        held.table(0).unwrap().len(),
        10,
        "a reader's snapshot keeps its entries"
    );
    // The tables take flows again.
    c.flow_mod(&add(0, 1, port_match(1), 2)).unwrap();
    c.publish();
    assert_eq!(actions(&c, &key(1)), vec![crate::DpAction::Output(2)]);
}

#[test]
fn apply_is_all_or_nothing_and_names_the_failing_mod() {
    let (mut c, _) = new();
    c.flow_mod(&add(0, 1, port_match(9), 2)).unwrap();
    let mods = vec![
        add(0, 1, port_match(1), 2),
        FlowMod {
            command: FlowModCommand::Delete,
            ..add(0, 0, Match::ANY, 1)
        },
        add(0, 1, port_match(2), 2),
        FlowMod::add(3, 1, Match::ANY, vec![Instruction::GotoTable(2)]),
    ];
    assert_eq!(
        c.apply(&mods),
        Err((3, FlowModError::GotoBackwards { from: 3, to: 2 }))
    );
    let v = c.flows(ALL_TABLES, &FlowFilter::ALL);
    assert_eq!(v.len(), 1, "the delete was rolled back too");
    assert_eq!(v[0].matcher, port_match(9));
    c.apply(&mods[..3]).unwrap();
    assert_eq!(c.flows(ALL_TABLES, &FlowFilter::ALL).len(), 1);
}

#[test]
fn validation_errors_reach_the_caller() {
    let (mut c, _) = new();
    assert_eq!(
        c.flow_mod(&add(255, 1, Match::ANY, 1)),
        Err(FlowModError::BadTableId(255))
    );
    let mut tp = Match::ANY;
    tp.set_exact(Field::TpDst, 80);
    assert!(matches!(
        c.flow_mod(&add(0, 1, tp, 1)),
        Err(FlowModError::BadPrerequisite { .. })
    ));
    let g = FlowMod::add(
        0,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![Action::Group(3)])],
    );
    assert_eq!(c.flow_mod(&g), Err(FlowModError::UnknownGroup(3)));
    let me = FlowMod::add(0, 1, Match::ANY, vec![Instruction::Meter(3)]);
    assert_eq!(c.flow_mod(&me), Err(FlowModError::UnknownMeter(3)));
    let cfg = PipelineConfig {
        table_capacity: 1,
        ..PipelineConfig::default()
    };
    let (mut small, _) = Control::new(cfg);
    small.flow_mod(&add(0, 1, port_match(1), 1)).unwrap();
    small.flow_mod(&add(0, 1, port_match(1), 2)).unwrap();
    assert_eq!(
        small.flow_mod(&add(0, 1, port_match(2), 1)),
        Err(FlowModError::TableFull {
            table: 0,
            capacity: 1
        })
    );
}

#[test]
fn all_tables_together_have_a_limit_and_a_mass_delete_schedules_the_trim() {
    let cfg = PipelineConfig {
        total_capacity: 3,
        ..PipelineConfig::default()
    };
    let (mut c, _) = Control::new(cfg);
    c.flow_mod(&add(0, 1, port_match(1), 1)).unwrap();
    c.flow_mod(&add(1, 1, port_match(1), 1)).unwrap();
    c.flow_mod(&add(2, 1, port_match(1), 1)).unwrap();
    assert_eq!(c.flow_count(), 3);
    // Replacing an entry adds nothing; a new one in any table is refused.
    c.flow_mod(&add(2, 1, port_match(1), 2)).unwrap();
    let full = c.flow_mod(&add(3, 1, port_match(1), 1));
    assert_eq!(full, Err(FlowModError::AllTablesFull { capacity: 3 }));
    assert_eq!(full.unwrap_err().ofp_error(), (5, 1), "OFPFMFC_TABLE_FULL");
    let del_all = FlowMod {
        command: FlowModCommand::Delete,
        ..add(ALL_TABLES, 0, Match::ANY, 1)
    };
    c.flow_mod(&del_all).unwrap();
    assert_eq!(c.flow_count(), 0);
    c.flow_mod(&add(3, 1, port_match(1), 1)).unwrap();

    // Deleting 10,000 entries at once gives the memory back a second later, on a tick.
    let (mut big, _) = Control::new(PipelineConfig::default());
    let mods: Vec<FlowMod> = (0..10_000u128)
        .map(|i| add(0, 1, port_match(i + 1), 1))
        .collect();
    big.apply(&mods).unwrap();
    big.flow_mod(&del_all).unwrap();
    let at = big.trim_at.expect("a mass delete schedules the trim");
    big.tick(at - 1);
    assert!(big.trim_at.is_some(), "not before its time");
    big.tick(at);
    assert!(big.trim_at.is_none());
}

#[test]
fn deleting_a_group_or_meter_deletes_its_flows() {
    let (mut c, _) = new();
    let group = Group {
        id: 7,
        kind: GroupType::All,
        buckets: vec![Bucket {
            weight: 1,
            watch_port: ports::ANY,
            watch_group: GROUP_ANY,
            actions: vec![],
            actions_as_sent: None,
        }],
    };
    c.group_mod(&GroupMod {
        command: GroupModCommand::Add,
        group: group.clone(),
    })
    .unwrap();
    let meter = Meter {
        stats: false,
        id: 3,
        pktps: true,
        burst: false,
        bands: vec![MeterBand::Drop { rate: 10, burst: 0 }],
        kbps: false,
    };
    c.meter_mod(&MeterMod {
        command: MeterModCommand::Add,
        meter: meter.clone(),
    })
    .unwrap();
    c.flow_mod(&FlowMod::add(
        0,
        1,
        port_match(1),
        vec![Instruction::ApplyActions(vec![Action::Group(7)])],
    ))
    .unwrap();
    c.flow_mod(&FlowMod::add(
        0,
        1,
        port_match(2),
        vec![Instruction::Meter(3)],
    ))
    .unwrap();
    c.flow_mod(&add(0, 1, port_match(3), 1)).unwrap();
    c.publish();
    assert!(c.published().meter(3).is_some());
    // The meter instruction runs first whatever the order it was given in.
    let metered = FlowMod::add(
        0,
        2,
        port_match(4),
        vec![
            Instruction::ApplyActions(vec![Action::Output {
                port: 5,
                max_len: 0,
            }]),
            Instruction::Meter(3),
        ],
    );
    c.flow_mod(&metered).unwrap();
    c.publish();
    assert_eq!(
        actions(&c, &key(4)),
        vec![crate::DpAction::Meter(3), crate::DpAction::Output(5)]
    );
    c.group_mod(&GroupMod {
        command: GroupModCommand::Delete,
        group,
    })
    .unwrap();
    c.meter_mod(&MeterMod {
        command: MeterModCommand::Delete,
        meter,
    })
    .unwrap();
    let v = c.flows(0, &FlowFilter::ALL);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].matcher, port_match(3));
    c.publish();
    assert!(c.published().meter(3).is_none());
}

#[test]
fn hard_and_idle_timeouts_expire_and_publish() {
    let (mut c, cell) = new();
    let mut hard = add(0, 1, port_match(1), 2);
    hard.hard_timeout = 10;
    let mut idle = add(0, 1, port_match(2), 2);
    idle.idle_timeout = 5;
    idle.flags = FlowFlags {
        send_flow_rem: true,
        ..FlowFlags::default()
    };
    c.apply(&[hard, idle, add(0, 1, port_match(3), 2)]).unwrap();
    c.publish();
    let t0 = now_ms();
    assert!(c.tick(t0 + 4_000).is_empty());
    // The idle flow is used at +4 s: it lives until +9 s.
    c.tables[0]
        .classifier
        .find_exact(&port_match(2), 1)
        .unwrap()
        .counters
        .add(1, 60, t0 + 4_000);
    assert!(c.tick(t0 + 8_000).is_empty());
    let g = cell.generation();
    let r = c.tick(t0 + 9_500);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].reason, RemovedReason::IdleTimeout);
    assert_eq!(r[0].flow.packets, 1);
    assert!(cell.generation() > g, "tick publishes removals");
    let r = c.tick(t0 + 10_500);
    assert_eq!((r.len(), r[0].reason), (1, RemovedReason::HardTimeout));
    assert_eq!(cell.load().table(0).unwrap().len(), 1);
    assert_eq!(c.table_stats()[0].active, 1);
}

#[test]
fn flows_added_after_a_tick_still_time_out() {
    // A tick remembers which tables hold timed flows; every change must make it look again.
    let (mut c, _cell) = new();
    c.apply(&[add(0, 1, port_match(1), 2)]).unwrap();
    let t0 = now_ms();
    assert!(c.tick(t0).is_empty(), "no timed flow yet");
    for (table, port) in [(0u8, 2u128), (7, 3)] {
        let mut m = add(table, 1, port_match(port), 2);
        m.hard_timeout = 1;
        c.apply(&[m]).unwrap();
        assert!(c.tick(t0 + 500).is_empty());
        let r = c.tick(t0 + 1_500 + u64::from(table) * 1_000);
        assert_eq!(r.len(), 1, "table {table}: the new flow expires");
        assert_eq!(r[0].reason, RemovedReason::HardTimeout);
    }
    // A failed batch restores the tables: the list is rebuilt from them, not kept.
    let mut ok = add(3, 1, port_match(4), 2);
    ok.hard_timeout = 1;
    let mut bad = add(3, 1, port_match(5), 2);
    bad.table_id = 255;
    assert!(c.apply(&[ok, bad]).is_err());
    assert!(
        c.tick(t0 + 60_000).is_empty(),
        "nothing of the failed batch stayed"
    );
    assert_eq!(c.flows(0, &FlowFilter::ALL).len(), 1);
}

#[test]
fn ports_changes_flush_learned_macs() {
    let (mut c, cell) = new();
    let port = |no| PortInfo {
        no,
        name: format!("p{no}"),
        live: true,
        ..PortInfo::default()
    };
    c.set_ports(vec![port(2), port(1)]);
    assert_eq!(c.ports()[0].no, 1);
    c.publish();
    cell.load()
        .mac_table()
        .learn(0x0200_0000_0001, 0, 2, now_ms());
    let g = cell.generation();
    c.set_ports(vec![port(1)]);
    assert!(cell.load().mac_table().is_empty());
    assert!(cell.generation() > g);
    assert!(!c.set_port_live(9, false));
}

#[test]
fn batches_share_structure_with_published_snapshots() {
    let (mut c, cell) = new();
    let mut n = 0u128;
    for _batch in 0..20 {
        let mods: Vec<FlowMod> = (0..500)
            .map(|_| {
                n += 1;
                add(0, 1, port_match(n), 1)
            })
            .collect();
        c.apply(&mods).unwrap();
        let before = cell.load();
        c.publish();
        // Old snapshots stay valid and unchanged.
        assert_eq!(
            before.table(0).unwrap().len() + 500,
            cell.load().table(0).unwrap().len()
        );
    }
    assert_eq!(actions(&c, &key(7777)), vec![crate::DpAction::Output(1)]);
}

/// Bulk install rate: `cargo test -p pipeline --release -- --ignored bulk --nocapture`.
#[test]
#[ignore]
fn bulk_install_rate() {
    let (mut c, _) = new();
    let start = std::time::Instant::now();
    let mut n = 0u128;
    for _ in 0..1000 {
        let mods: Vec<FlowMod> = (0..1000)
            .map(|_| {
                n += 1;
                let mut m = Match::ANY;
                m.set_exact(Field::EthType, 0x0800);
                m.set_exact(Field::Ipv4Dst, n);
                add(0, 1, m, 1)
            })
            .collect();
        c.apply(&mods).unwrap();
        c.publish();
    }
    let s = start.elapsed().as_secs_f64();
    eprintln!("1,000,000 flows in {s:.2} s = {:.0} flow-mods/s", 1e6 / s);
    let mut t = Translation::default();
    let p = c.published();
    let mut k = FlowKey::ZERO;
    k.set(Field::EthType, 0x0800);
    let start = std::time::Instant::now();
    for i in 0..1_000_000u128 {
        k.set(Field::Ipv4Dst, i);
        p.translate(&k, &mut t);
    }
    let s = start.elapsed().as_secs_f64();
    eprintln!(
        "{:.0} translations/s (1,000,000 flows, one subtable)",
        1e6 / s
    );

    // A simple pipeline: an ACL table, then an L3 table, then output.
    let (mut c, _) = new();
    let mut ip = Match::ANY;
    ip.set_exact(Field::EthType, 0x0800);
    c.flow_mod(&FlowMod::add(0, 1, ip, vec![Instruction::GotoTable(1)]))
        .unwrap();
    c.flow_mod(&add(0, 0, Match::ANY, 1)).unwrap();
    for i in 0..10u128 {
        let mut m = ip;
        m.set_masked(Field::Ipv4Dst, i << 8, 0xffff_ff00);
        c.flow_mod(&add(1, 10, m, i as u32 + 1)).unwrap();
    }
    c.publish();
    let p = c.published();
    let start = std::time::Instant::now();
    for i in 0..1_000_000u128 {
        k.set(Field::Ipv4Dst, i % 4096);
        p.translate(&k, &mut t);
    }
    let s = start.elapsed().as_secs_f64();
    eprintln!("{:.0} translations/s (simple two-table pipeline)", 1e6 / s);
}

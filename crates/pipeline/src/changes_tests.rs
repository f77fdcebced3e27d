//! The revalidation rule against full translation: on random multi-table pipelines and
//! random flow changes, every megaflow the rule keeps translates every packet it covers as
//! the new tables do; and the log hands readers what each publish changed.

use std::sync::Arc;

use packet::{Field, FlowKey, KEY_WORDS};
use proptest::prelude::*;

use super::*;
use crate::dpaction::Translation;
use crate::model::{
    ports, Action, Bucket, FlowMod, FlowModCommand, GroupType, Instruction, Match, GROUP_ANY,
};
use crate::pipeline::PipelineConfig;
use crate::translate::mask_tests::{instruction_strategy, key_strategy, match_strategy};
use crate::translate::tests::{bucket, group, ip_key, out, port};
use crate::Control;

fn control(n_ports: u32) -> (Control, Arc<crate::PipelineCell>) {
    control_with(n_ports, PipelineConfig::default())
}

fn control_with(n_ports: u32, cfg: PipelineConfig) -> (Control, Arc<crate::PipelineCell>) {
    let (mut c, cell) = Control::new(cfg);
    c.set_ports((1..=n_ports).map(port).collect());
    (c, cell)
}

fn command_strategy() -> impl Strategy<Value = FlowModCommand> {
    prop_oneof![
        3 => Just(FlowModCommand::Add),
        1 => Just(FlowModCommand::Modify),
        1 => Just(FlowModCommand::ModifyStrict),
        1 => Just(FlowModCommand::Delete),
        1 => Just(FlowModCommand::DeleteStrict),
    ]
}

type Rule = (u8, u16, Match, Vec<Instruction>);

fn rule_strategy(later_tables: u32) -> impl Strategy<Value = Rule> {
    (
        prop_oneof![2 => Just(0u8), later_tables => 1u8..4],
        0u16..4,
        match_strategy(),
        instruction_strategy(),
    )
}

fn flow_mod(command: FlowModCommand, (table, prio, matcher, ins): Rule) -> FlowMod {
    FlowMod {
        command,
        ..FlowMod::add(table, prio, matcher, ins)
    }
}

/// A cached translation, as the datapath keeps it.
struct Cached {
    key: FlowKey,
    mask: FlowKey,
    trail: Trail,
    tr: Translation,
}

fn cache(p: &crate::Pipeline, keys: &[FlowKey]) -> Vec<Cached> {
    keys.iter()
        .map(|k| {
            let mut tr = Translation::default();
            p.translate(k, &mut tr);
            Cached {
                key: k.masked(&tr.mask),
                mask: tr.mask,
                trail: tr.trail,
                tr,
            }
        })
        .collect()
}

fn kept(c: &Cached, log: &[Arc<Published>]) -> bool {
    log.iter()
        .flat_map(|p| &p.changes)
        .all(|ch| !c.trail.affected_by(&c.key, &c.mask, ch))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]
    #[test]
    fn a_kept_megaflow_translates_every_packet_it_covers_as_the_new_tables_do(
        rules in prop::collection::vec(rule_strategy(1), 0..25),
        keys in prop::collection::vec(key_strategy(), 1..12),
        mods in prop::collection::vec(
            prop::collection::vec((command_strategy(), rule_strategy(4)), 1..4), 1..4),
        noise in prop::collection::vec(any::<[u64; KEY_WORDS]>(), 6),
        prefix_tracking in any::<bool>(),
    ) {
        let (mut c, cell) = control_with(5, PipelineConfig {
            prefix_tracking,
            ..PipelineConfig::default()
        });
        group(&mut c, 1, GroupType::Select, vec![
            bucket(vec![out(1)]),
            bucket(vec![Action::SetField { field: Field::Ipv4Src, value: 5 }, out(2)]),
            bucket(vec![out(3)]),
        ]);
        group(&mut c, 2, GroupType::All, vec![
            bucket(vec![Action::SetField { field: Field::TpDst, value: 9 }, Action::DecNwTtl, out(4)]),
            bucket(vec![Action::PopVlan, out(5)]),
        ]);
        let ff = |p: u32| Bucket { weight: 1, watch_port: p, watch_group: GROUP_ANY, actions: vec![out(p)], actions_as_sent: None,  };
        group(&mut c, 3, GroupType::FastFailover, vec![ff(1), ff(2)]);
        for r in rules {
            let _ = c.flow_mod(&flow_mod(FlowModCommand::Add, r));
        }
        c.publish();
        let mut cursor = Cursor::default();
        let mut log = Vec::new();
        let _ = cell.changes_since(&mut cursor, &mut log);
        log.clear();
        let cached = cache(&c.published(), &keys);

        // Several publishes, each with a few flow-mods (refused ones change nothing).
        for batch in mods {
            for (cmd, r) in batch {
                let _ = c.flow_mod(&flow_mod(cmd, r));
            }
            c.publish();
        }
        prop_assert_eq!(cell.changes_since(&mut cursor, &mut log), Since::Changes);
        let p = c.published();
        let mut tr = Translation::default();
        for mf in cached.iter().filter(|mf| kept(mf, &log)) {
            for n in &noise {
                let mut k = mf.key;
                for ((w, &m), &x) in k.w.iter_mut().zip(&mf.mask.w).zip(n) {
                    *w = (*w & m) | (x & !m);
                }
                p.translate(&k, &mut tr);
                prop_assert_eq!(&tr.actions, &mf.tr.actions,
                    "kept megaflow {:?}/{:?} trail {:?} changes {:?}", mf.key, mf.mask, mf.trail, log);
                prop_assert_eq!(tr.flows.len(), mf.tr.flows.len());
                for (a, b) in tr.flows.iter().zip(&mf.tr.flows) {
                    prop_assert!(Arc::ptr_eq(a, b), "a kept megaflow counts into another entry");
                }
            }
        }
    }
}

fn udp_src(src: u128) -> Match {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    m.set_exact(Field::IpProto, 17);
    m.set_exact(Field::Ipv4Src, src);
    m
}

fn udp_dst(dst: u128) -> Match {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    m.set_exact(Field::IpProto, 17);
    m.set_exact(Field::Ipv4Dst, dst);
    m
}

fn udp_key(src: u128) -> FlowKey {
    let mut k = ip_key(1);
    k.set(Field::IpProto, 17);
    k.set(Field::Ipv4Src, src);
    k
}

/// A change below the deciding priority, or one whose match no packet of the megaflow
/// meets, keeps it; one that meets it does not.
#[test]
fn priority_and_disjoint_matches_keep_megaflows() {
    let (mut c, cell) = control(3);
    for src in 0..4 {
        c.flow_mod(&FlowMod::add(
            0,
            100,
            udp_src(src),
            vec![Instruction::ApplyActions(vec![out(2)])],
        ))
        .unwrap();
    }
    c.flow_mod(&FlowMod::add(
        0,
        0,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![out(3)])],
    ))
    .unwrap();
    c.publish();
    let mut cursor = Cursor::default();
    let mut log = Vec::new();
    cell.changes_since(&mut cursor, &mut log);
    let cached = cache(&c.published(), &[udp_key(1), udp_key(9)]);

    // Lower priority than the entry that decided megaflow 0: kept; megaflow 1 (the
    // catch-all decided) is reached, and its mask does not rule the new match out.
    log.clear();
    c.flow_mod(&FlowMod::add(0, 50, udp_dst(7), vec![]))
        .unwrap();
    c.publish();
    assert_eq!(cell.changes_since(&mut cursor, &mut log), Since::Changes);
    assert!(kept(&cached[0], &log));
    assert!(!kept(&cached[1], &log));

    // Same priority, another source: disjoint from megaflow 0's box.
    log.clear();
    c.flow_mod(&FlowMod::add(0, 100, udp_src(5), vec![]))
        .unwrap();
    c.publish();
    cell.changes_since(&mut cursor, &mut log);
    assert!(kept(&cached[0], &log));

    // Deleting the entry that decided it: gone.
    log.clear();
    let mut del = FlowMod::add(0, 100, udp_src(1), vec![]);
    del.command = FlowModCommand::DeleteStrict;
    c.flow_mod(&del).unwrap();
    c.publish();
    cell.changes_since(&mut cursor, &mut log);
    assert!(!kept(&cached[0], &log));
}

#[test]
fn a_rewritten_key_makes_later_tables_reached_by_any_change() {
    let (mut c, _cell) = control(3);
    let set = Action::SetField {
        field: Field::Ipv4Dst,
        value: 9,
    };
    let mut ip = Match::ANY;
    ip.set_exact(Field::EthType, 0x0800);
    c.flow_mod(&FlowMod::add(
        0,
        1,
        ip,
        vec![
            Instruction::ApplyActions(vec![set]),
            Instruction::GotoTable(1),
        ],
    ))
    .unwrap();
    c.publish();
    let mut tr = Translation::default();
    c.published().translate(&udp_key(1), &mut tr);
    let lookups: Vec<_> = tr.trail.lookups().collect();
    assert_eq!(lookups, vec![(0, 1, false), (1, 0, true)]);
    // A change in table 1 whose match the original key does not meet still reaches it.
    let ch = Change {
        table: 1,
        priority: 0,
        matcher: udp_dst(1234),
    };
    assert!(tr
        .trail
        .affected_by(&udp_key(1).masked(&tr.mask), &tr.mask, &ch));
    let ch0 = Change {
        table: 0,
        priority: 0,
        ..ch
    };
    assert!(!tr
        .trail
        .affected_by(&udp_key(1).masked(&tr.mask), &tr.mask, &ch0));
}

#[test]
fn untracked_changes_and_a_long_lag_ask_for_a_full_flush() {
    let (mut c, cell) = control(3);
    let mut cursor = Cursor::default();
    let mut log = Vec::new();
    cell.changes_since(&mut cursor, &mut log);
    group(&mut c, 1, GroupType::All, vec![bucket(vec![out(1)])]);
    c.publish();
    assert_eq!(cell.changes_since(&mut cursor, &mut log), Since::Full);
    assert_eq!(cell.changes_since(&mut cursor, &mut log), Since::Changes);
    c.set_port_live(2, false);
    assert_eq!(cell.changes_since(&mut cursor, &mut log), Since::Full);
    for _ in 0..=LOG_LEN {
        c.publish();
    }
    assert_eq!(cell.changes_since(&mut cursor, &mut log), Since::Full);
    c.publish();
    log.clear();
    assert_eq!(cell.changes_since(&mut cursor, &mut log), Since::Changes);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].seq, cursor.seq);
    let _ = ports::ANY;
}

//! Translation of the MPLS actions: push (the new entry and the mask bits it read), pop,
//! set-field and TTL of the top entry, dec_mpls_ttl at TTL 1, the action-set order, group
//! buckets undoing their pushes and pops, and the flow checks that go with them.

use packet::mpls::lse;
use packet::{Field, FlowKey};

use super::tests::{bucket, control, group, ip_key, out, port};
use crate::control::Control;
use crate::dpaction::{DpAction, PacketInReason, Translation};
use crate::error::FlowModError;
use crate::model::{Action, FlowMod, GroupType, Instruction, Match};
use crate::pipeline::PipelineConfig;

fn eth(t: u128) -> Match {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, t);
    m
}

/// The key of an IPv4 packet under one label stack entry `entry` (bottom of the stack):
/// extraction reads the IP and L4 headers under it.
fn mpls_over_ip_key(in_port: u32, entry: u32) -> FlowKey {
    let mut k = ip_key(in_port);
    k.set(Field::EthType, 0x8847);
    k.set(Field::MplsLse, u128::from(entry));
    k
}

fn mpls_key(in_port: u32, entry: u32) -> FlowKey {
    let mut k = ip_key(in_port);
    // A key whose top entry is not the bottom of the stack has no L3 fields (nothing under
    // it is parsed).
    for f in [Field::Ipv4Src, Field::Ipv4Dst, Field::IpProto, Field::IpTtl] {
        k.set(f, 0);
    }
    k.set(Field::TpSrc, 0);
    k.set(Field::TpDst, 0);
    k.set(Field::EthType, 0x8847);
    k.set(Field::MplsLse, u128::from(entry));
    k
}

fn add(c: &mut Control, table: u8, matcher: Match, ins: Vec<Instruction>) {
    c.flow_mod(&FlowMod::add(table, 1, matcher, ins)).unwrap();
}

fn run(c: &mut Control, k: &FlowKey) -> Translation {
    c.publish();
    let mut t = Translation::default();
    c.published().translate(k, &mut t);
    t
}

fn set(field: Field, value: u128) -> Action {
    Action::SetField { field, value }
}

#[test]
fn push_makes_the_entry_from_the_ip_header_and_the_next_table_sees_it() {
    let mut c = control(3);
    add(
        &mut c,
        0,
        eth(0x0800),
        vec![
            Instruction::ApplyActions(vec![Action::PushMpls(0x8847)]),
            Instruction::GotoTable(1),
        ],
    );
    let mut label0 = eth(0x8847);
    label0.set_exact(Field::MplsLabel, 0);
    label0.set_exact(Field::MplsBos, 1);
    add(
        &mut c,
        1,
        label0,
        vec![Instruction::ApplyActions(vec![
            set(Field::MplsLabel, 16),
            Action::SetMplsTtl(9),
            out(2),
        ])],
    );
    let mut k = ip_key(1);
    k.set(Field::IpDscp, 46);
    let t = run(&mut c, &k);
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushMpls {
                ethertype: 0x8847,
                lse: lse(0, 46 & 7, true, 64)
            },
            DpAction::SetField {
                field: Field::MplsLabel,
                value: 16
            },
            DpAction::SetField {
                field: Field::MplsTtl,
                value: 9
            },
            DpAction::Output(2),
        ]
    );
    // The entry came from the DSCP and the TTL: both are in the mask.
    assert_eq!(t.mask.get(Field::IpDscp), 0x3f);
    assert_eq!(t.mask.get(Field::IpTtl), 0xff);
    // IPv6 gets label 2 (explicit null), a packet that is not IP TTL 64.
    let mut k6 = k;
    k6.set(Field::EthType, 0x86dd);
    let mut c6 = control(3);
    add(
        &mut c6,
        0,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![
            Action::PushMpls(0x8848),
            out(2),
        ])],
    );
    assert_eq!(
        run(&mut c6, &k6).actions[0],
        DpAction::PushMpls {
            ethertype: 0x8848,
            lse: lse(2, 46 & 7, true, 64)
        }
    );
    let mut arp = ip_key(1);
    arp.set(Field::EthType, 0x0806);
    arp.set(Field::IpTtl, 0);
    assert_eq!(
        run(&mut c6, &arp).actions[0],
        DpAction::PushMpls {
            ethertype: 0x8848,
            lse: lse(0, 0, true, 64)
        }
    );
    // On an MPLS packet the new entry copies the top one with bos 0.
    let on_mpls = run(&mut c6, &mpls_key(1, lse(100, 3, true, 7)));
    assert_eq!(
        on_mpls.actions[0],
        DpAction::PushMpls {
            ethertype: 0x8848,
            lse: lse(100, 3, false, 7)
        }
    );
    assert_eq!(on_mpls.mask.get(Field::MplsLse), 0xffff_ffff);
}

#[test]
fn pop_and_the_match_on_the_label() {
    let mut c = control(3);
    let mut m = eth(0x8847);
    m.set_exact(Field::MplsLabel, 100);
    add(
        &mut c,
        0,
        m,
        vec![Instruction::ApplyActions(vec![
            Action::PopMpls(0x0800),
            set(Field::Ipv4Dst, 0x0a00_0009),
            out(2),
        ])],
    );
    let t = run(&mut c, &mpls_key(1, lse(100, 0, true, 5)));
    assert_eq!(
        t.actions,
        vec![
            DpAction::PopMpls(0x0800),
            DpAction::SetField {
                field: Field::Ipv4Dst,
                value: 0x0a00_0009
            },
            DpAction::Output(2)
        ]
    );
    assert_eq!(t.mask.get(Field::MplsLabel), 0xf_ffff);
    assert!(run(&mut c, &mpls_key(1, lse(101, 0, true, 5)))
        .actions
        .is_empty());
}

#[test]
fn dec_mpls_ttl_at_one_stops_and_may_go_to_the_controller() {
    for to_controller in [false, true] {
        let cfg = PipelineConfig {
            invalid_ttl_to_controller: to_controller,
            ..PipelineConfig::default()
        };
        let (mut c, _) = Control::new(cfg);
        c.set_ports((1..=3).map(port).collect());
        add(
            &mut c,
            0,
            eth(0x8847),
            vec![Instruction::ApplyActions(vec![Action::DecMplsTtl, out(2)])],
        );
        let t = run(&mut c, &mpls_key(1, lse(5, 0, true, 1)));
        assert_eq!(t.mask.get(Field::MplsTtl), 0xff);
        if to_controller {
            assert!(matches!(
                t.actions[..],
                [DpAction::Controller {
                    reason: PacketInReason::InvalidTtl,
                    ..
                }]
            ));
        } else {
            assert!(t.actions.is_empty());
        }
        assert_eq!(
            run(&mut c, &mpls_key(1, lse(5, 0, true, 2))).actions,
            vec![DpAction::DecMplsTtl, DpAction::Output(2)]
        );
    }
}

#[test]
fn dec_mpls_ttl_after_a_pop_to_mpls_is_left_to_the_datapath() {
    let mut c = control(3);
    add(
        &mut c,
        0,
        eth(0x8847),
        vec![Instruction::ApplyActions(vec![
            Action::PopMpls(0x8847),
            Action::DecMplsTtl,
            out(2),
        ])],
    );
    // The entry below the top is not in the key: no TTL check here, whatever the top's.
    assert_eq!(
        run(&mut c, &mpls_key(1, lse(5, 0, false, 1))).actions,
        vec![
            DpAction::PopMpls(0x8847),
            DpAction::DecMplsTtl,
            DpAction::Output(2)
        ]
    );
}

#[test]
fn the_action_set_runs_in_the_specification_order() {
    let mut c = control(3);
    add(
        &mut c,
        0,
        eth(0x8847),
        vec![Instruction::WriteActions(vec![
            out(2),
            Action::CopyTtlOut,
            Action::PushVlan(0x8100),
            Action::PushMpls(0x8847),
            Action::PopMpls(0x8847),
            Action::CopyTtlIn,
            Action::SetMplsTtl(3),
            Action::DecMplsTtl,
        ])],
    );
    let t = run(&mut c, &mpls_key(1, lse(5, 0, false, 9)));
    let kinds: Vec<&str> = t
        .actions
        .iter()
        .map(|a| match a {
            DpAction::CopyTtlIn => "copy_ttl_in",
            DpAction::PopMpls(_) => "pop_mpls",
            DpAction::PushMpls { .. } => "push_mpls",
            DpAction::PushVlan { .. } => "push_vlan",
            DpAction::CopyTtlOut => "copy_ttl_out",
            DpAction::DecMplsTtl => "dec_mpls_ttl",
            DpAction::SetField { .. } => "set",
            DpAction::Output(_) => "output",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "copy_ttl_in",
            "pop_mpls",
            "push_mpls",
            "push_vlan",
            "copy_ttl_out",
            "dec_mpls_ttl",
            "set",
            "output"
        ]
    );
}

#[test]
fn a_bucket_undoes_its_push_and_its_pop() {
    let mut c = control(4);
    group(
        &mut c,
        1,
        GroupType::All,
        vec![
            bucket(vec![Action::PushMpls(0x8847), out(2)]),
            bucket(vec![out(3)]),
        ],
    );
    add(
        &mut c,
        0,
        eth(0x0800),
        vec![Instruction::ApplyActions(vec![Action::Group(1)])],
    );
    let entry = lse(0, 0, true, 64);
    assert_eq!(
        run(&mut c, &ip_key(1)).actions,
        vec![
            DpAction::PushMpls {
                ethertype: 0x8847,
                lse: entry
            },
            DpAction::Output(2),
            DpAction::PopMpls(0x0800),
            DpAction::Output(3),
        ]
    );
    let mut c = control(4);
    group(
        &mut c,
        1,
        GroupType::All,
        vec![
            bucket(vec![Action::PopMpls(0x0800), out(2)]),
            bucket(vec![out(3)]),
        ],
    );
    add(
        &mut c,
        0,
        eth(0x8847),
        vec![Instruction::ApplyActions(vec![Action::Group(1)])],
    );
    let top = lse(77, 1, true, 4);
    let t = run(&mut c, &mpls_key(1, top));
    assert_eq!(
        t.actions,
        vec![
            DpAction::PopMpls(0x0800),
            DpAction::Output(2),
            DpAction::PushMpls {
                ethertype: 0x8847,
                lse: top
            },
            DpAction::Output(3),
        ]
    );
    assert_eq!(t.mask.get(Field::MplsLse), 0xffff_ffff);
}

#[test]
fn flow_checks_follow_the_ethertype_through_push_and_pop() {
    let mut c = control(3);
    let try_add = |c: &mut Control, m: Match, a: Vec<Action>| {
        c.flow_mod(&FlowMod::add(0, 1, m, vec![Instruction::ApplyActions(a)]))
    };
    // MPLS actions need MPLS.
    for a in [
        Action::PopMpls(0x0800),
        Action::DecMplsTtl,
        Action::SetMplsTtl(1),
        Action::CopyTtlOut,
        Action::CopyTtlIn,
    ] {
        let e = try_add(&mut c, eth(0x0800), vec![a.clone()]).unwrap_err();
        assert_eq!(e.ofp_error(), (2, 10), "{a:?}: {e}");
    }
    let e = try_add(&mut c, eth(0x0800), vec![set(Field::MplsLabel, 1)]).unwrap_err();
    assert!(
        matches!(e, FlowModError::SetFieldInconsistent { .. }),
        "{e}"
    );
    // After a push they are fine; after a pop to IPv4, IPv4 fields may be set.
    try_add(
        &mut c,
        eth(0x0800),
        vec![
            Action::PushMpls(0x8847),
            set(Field::MplsLabel, 1),
            Action::DecMplsTtl,
        ],
    )
    .unwrap();
    try_add(
        &mut c,
        eth(0x8847),
        vec![Action::PopMpls(0x0800), set(Field::Ipv4Dst, 1)],
    )
    .unwrap();
    let e = try_add(
        &mut c,
        eth(0x8847),
        vec![Action::PopMpls(0x0800), Action::DecMplsTtl],
    )
    .unwrap_err();
    assert_eq!(e.ofp_error(), (2, 10));
    // push_mpls takes only the MPLS ethertypes; mpls_bos is read-only (as in Open vSwitch).
    let e = try_add(&mut c, Match::ANY, vec![Action::PushMpls(0x0800)]).unwrap_err();
    assert_eq!(e.ofp_error(), (2, 5));
    let e = try_add(&mut c, eth(0x8847), vec![set(Field::MplsBos, 1)]).unwrap_err();
    assert_eq!(e.ofp_error(), (2, 13));
    // A match on the label needs the MPLS ethertype.
    let mut m = Match::ANY;
    m.set_exact(Field::MplsLabel, 3);
    assert_eq!(try_add(&mut c, m, vec![]).unwrap_err().ofp_error(), (4, 9));
}

/// After a pop to IPv4, a later table matches the IPv4 and UDP header that was under the
/// label (extraction read it into the key), on a key extracted from a real frame; the mask
/// holds what decided in both tables.
#[test]
fn after_a_pop_to_ip_a_later_table_matches_the_ip_header() {
    use packet::builder::PacketSpec;
    use std::net::Ipv4Addr;
    let mut c = control(3);
    let mut label = eth(0x8847);
    label.set_exact(Field::MplsLabel, 200);
    add(
        &mut c,
        0,
        label,
        vec![
            Instruction::ApplyActions(vec![Action::PopMpls(0x0800)]),
            Instruction::GotoTable(1),
        ],
    );
    let mut web = eth(0x0800);
    web.set_exact(Field::IpProto, 17);
    web.set_exact(Field::Ipv4Dst, 0x0a00_0002);
    web.set_exact(Field::TpDst, 80);
    c.flow_mod(&FlowMod::add(
        1,
        10,
        web,
        vec![Instruction::ApplyActions(vec![Action::DecNwTtl, out(2)])],
    ))
    .unwrap();
    add(
        &mut c,
        1,
        eth(0x0800),
        vec![Instruction::ApplyActions(vec![out(3)])],
    );
    let frame = |dst: u8| {
        let spec = PacketSpec::udp4(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, dst),
            1234,
            80,
            60,
        );
        let mut k = FlowKey::ZERO;
        packet::extract(&spec.build_mpls(0x8847, &[lse(200, 0, true, 9)]), 1, &mut k);
        k
    };
    let to_web = run(&mut c, &frame(2));
    assert_eq!(
        to_web.actions,
        vec![
            DpAction::PopMpls(0x0800),
            DpAction::DecTtl,
            DpAction::Output(2)
        ],
        "the IP TTL under the label is known: 64, not 0"
    );
    assert_eq!(to_web.mask.get(Field::MplsLabel), 0xf_ffff);
    assert_eq!(to_web.mask.get(Field::Ipv4Dst), 0xffff_ffff);
    assert_eq!(to_web.mask.get(Field::TpDst), 0xffff);
    assert_eq!(
        run(&mut c, &frame(3)).actions,
        vec![DpAction::PopMpls(0x0800), DpAction::Output(3)]
    );
}

mod soundness {
    use super::*;
    use packet::KEY_WORDS;
    use proptest::prelude::*;

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            (1u32..5).prop_map(out),
            Just(Action::PushMpls(0x8847)),
            Just(Action::PopMpls(0x0800)),
            Just(Action::PopMpls(0x8847)),
            (0u128..3).prop_map(|v| set(Field::MplsLabel, v)),
            (0u8..3).prop_map(Action::SetMplsTtl),
            Just(Action::DecMplsTtl),
            Just(Action::DecNwTtl),
            Just(Action::CopyTtlOut),
            (1u32..3).prop_map(Action::Group),
        ]
    }

    fn instructions() -> impl Strategy<Value = Vec<Instruction>> {
        (
            prop::collection::vec(action(), 0..4),
            prop::option::of(prop::collection::vec(action(), 0..3)),
            prop::option::of(1u8..3),
        )
            .prop_map(|(apply, write, goto)| {
                let mut v = vec![Instruction::ApplyActions(apply)];
                v.extend(write.map(Instruction::WriteActions));
                v.extend(goto.map(Instruction::GotoTable));
                v
            })
    }

    fn matcher() -> impl Strategy<Value = Match> {
        (
            prop_oneof![Just(None), Just(Some(0x0800u128)), Just(Some(0x8847))],
            prop::option::weighted(0.4, 0u128..3),
            prop::option::weighted(0.3, 0u128..3),
            prop::option::weighted(0.3, 0u128..2),
            prop::option::weighted(0.3, 1u128..4),
            prop::option::weighted(0.4, 1u128..3),
        )
            .prop_map(|(eth, label, ttl, bos, inp, dst)| {
                let mut m = Match::ANY;
                if let Some(e) = eth {
                    m.set_exact(Field::EthType, e);
                    if let (0x0800, Some(d)) = (e, dst) {
                        m.set_exact(Field::Ipv4Dst, 0x0a00_0000 | d);
                    }
                    if e == 0x8847 {
                        let fields = [
                            (Field::MplsLabel, label),
                            (Field::MplsTtl, ttl),
                            (Field::MplsBos, bos),
                        ];
                        for (f, v) in fields {
                            if let Some(v) = v {
                                m.set_exact(f, v);
                            }
                        }
                    }
                }
                if let Some(v) = inp {
                    m.set_exact(Field::InPort, v);
                }
                m
            })
    }

    fn key() -> impl Strategy<Value = FlowKey> {
        (
            any::<bool>(),
            (0u32..3, 0u8..3, any::<bool>(), 0u8..4),
            (1u128..5, 0u128..4, 0u128..3, 1u128..3),
        )
            .prop_map(
                |(labelled, (label, tc, bos, ttl), (inp, ip_ttl, dscp, dst))| {
                    let mut k = match (labelled, bos) {
                        (true, true) => mpls_over_ip_key(1, lse(label, tc, bos, ttl)),
                        (true, false) => mpls_key(1, lse(label, tc, bos, ttl)),
                        (false, _) => ip_key(1),
                    };
                    k.set(Field::InPort, inp);
                    if k.get(Field::Ipv4Dst) != 0 {
                        k.set(Field::Ipv4Dst, 0x0a00_0000 | dst);
                    }
                    if !labelled || bos {
                        k.set(Field::IpTtl, ip_ttl);
                        k.set(Field::IpDscp, dscp);
                    }
                    k
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Any key equal to a translated one under the mask gets the same actions, on random
        /// pipelines of MPLS matches, pushes, pops, TTL actions and groups whose buckets push
        /// and pop.
        #[test]
        fn mpls_translations_keep_the_mask_sound(
            rules in prop::collection::vec((0u8..3, 0u16..4, matcher(), instructions()), 0..20),
            keys in prop::collection::vec((key(), any::<[u64; KEY_WORDS]>()), 1..10),
        ) {
            let mut c = control(4);
            group(&mut c, 1, GroupType::All, vec![
                bucket(vec![Action::PushMpls(0x8847), out(2)]),
                bucket(vec![out(3)]),
            ]);
            group(&mut c, 2, GroupType::All, vec![
                bucket(vec![Action::PopMpls(0x0800), out(2)]),
                bucket(vec![set(Field::MplsLabel, 7), out(3)]),
                bucket(vec![out(4)]),
            ]);
            for (table, prio, m, ins) in rules {
                let _ = c.flow_mod(&FlowMod::add(table, prio, m, ins));
            }
            c.publish();
            let p = c.published();
            let (mut t1, mut t2) = (Translation::default(), Translation::default());
            for (k, noise) in keys {
                p.translate(&k, &mut t1);
                let mut k2 = k;
                for (i, n) in noise.iter().enumerate() {
                    k2.w[i] = (k.w[i] & t1.mask.w[i]) | (n & !t1.mask.w[i]);
                }
                p.translate(&k2, &mut t2);
                prop_assert_eq!(&t1.actions, &t2.actions, "key {:?} key2 {:?} mask {:?}", k, k2, t1.mask);
            }
        }
    }
}

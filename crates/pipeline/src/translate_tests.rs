//! Tests of [`Pipeline::translate`](crate::Pipeline::translate): instruction semantics,
//! groups, FLOOD/ALL/NORMAL, TTL, table-miss, counters, and a whole-pipeline mask-soundness
//! property test.

use std::sync::Arc;

use packet::{Field, FlowKey};

use crate::control::Control;
use crate::dpaction::{DpAction, PacketInReason, Translation};
use crate::model::{
    ports, Action, Bucket, FlowMod, Group, GroupMod, GroupModCommand, GroupType, Instruction,
    Match, GROUP_ANY,
};
use crate::pipeline::{PipelineConfig, PortInfo};

pub(crate) fn port(no: u32) -> PortInfo {
    PortInfo {
        no,
        name: format!("p{no}"),
        live: true,
        ..PortInfo::default()
    }
}

pub(crate) fn control(n_ports: u32) -> Control {
    let (mut c, _cell) = Control::new(PipelineConfig::default());
    c.set_ports((1..=n_ports).map(port).collect());
    c
}

pub(crate) fn ip_key(in_port: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, u128::from(in_port));
    k.set(Field::EthType, 0x0800);
    k.set(Field::EthSrc, 0x0200_0000_0001);
    k.set(Field::EthDst, 0x0200_0000_0002);
    k.set(Field::Ipv4Src, 0x0a00_0001);
    k.set(Field::Ipv4Dst, 0x0a00_0002);
    k.set(Field::IpProto, 6);
    k.set(Field::IpTtl, 64);
    k.set(Field::TpSrc, 1234);
    k.set(Field::TpDst, 80);
    k
}

fn m(fields: &[(Field, u128)]) -> Match {
    let mut m = Match::ANY;
    for &(f, v) in fields {
        m.set_exact(f, v);
    }
    m
}

fn ip() -> Match {
    m(&[(Field::EthType, 0x0800)])
}

pub(crate) fn out(p: u32) -> Action {
    Action::Output {
        port: p,
        max_len: 0,
    }
}

fn add(c: &mut Control, table: u8, prio: u16, matcher: Match, ins: Vec<Instruction>) {
    c.flow_mod(&FlowMod::add(table, prio, matcher, ins))
        .unwrap();
}

fn run(c: &mut Control, k: &FlowKey) -> Translation {
    c.publish();
    let mut t = Translation::default();
    c.published().translate(k, &mut t);
    t
}

fn outputs(ps: &[u32]) -> Vec<DpAction> {
    ps.iter().map(|&p| DpAction::Output(p)).collect()
}

pub(crate) fn group(c: &mut Control, id: u32, kind: GroupType, buckets: Vec<Bucket>) {
    c.group_mod(&GroupMod {
        command: GroupModCommand::Add,
        group: Group { id, kind, buckets },
    })
    .unwrap();
}

pub(crate) fn bucket(actions: Vec<Action>) -> Bucket {
    Bucket {
        weight: 1,
        watch_port: ports::ANY,
        watch_group: GROUP_ANY,
        actions,
        actions_as_sent: None,
    }
}

#[test]
fn goto_and_set_field_are_seen_by_the_next_table() {
    let mut c = control(4);
    let set = Action::SetField {
        field: Field::Ipv4Dst,
        value: 0x0a00_0009,
    };
    add(
        &mut c,
        0,
        1,
        ip(),
        vec![
            Instruction::ApplyActions(vec![set.clone()]),
            Instruction::GotoTable(1),
        ],
    );
    add(
        &mut c,
        1,
        1,
        m(&[(Field::EthType, 0x0800), (Field::Ipv4Dst, 0x0a00_0009)]),
        vec![Instruction::ApplyActions(vec![out(2)])],
    );
    let t = run(&mut c, &ip_key(1));
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetField {
                field: Field::Ipv4Dst,
                value: 0x0a00_0009
            },
            DpAction::Output(2)
        ]
    );
    assert_eq!(t.mask.get(Field::Ipv4Dst), 0xffff_ffff);
    assert_eq!(t.mask.get(Field::EthType), 0xffff);
    assert_eq!(t.mask.get(Field::TpDst), 0, "nothing consulted tp_dst");
    assert_eq!(t.flows.len(), 2);
    assert!(t.cacheable);
}

#[test]
fn write_actions_run_in_openflow_order_at_the_end() {
    let mut c = control(4);
    let w = vec![
        out(3),
        Action::SetField {
            field: Field::Ipv4Src,
            value: 7,
        },
        Action::DecNwTtl,
    ];
    add(
        &mut c,
        0,
        1,
        ip(),
        vec![Instruction::WriteActions(w), Instruction::GotoTable(2)],
    );
    add(
        &mut c,
        2,
        1,
        Match::ANY,
        vec![
            Instruction::WriteActions(vec![Action::SetQueue(5), out(4)]),
            Instruction::ApplyActions(vec![out(1)]),
        ],
    );
    let t = run(&mut c, &ip_key(2));
    assert_eq!(
        t.actions,
        vec![
            DpAction::Output(1),
            DpAction::DecTtl,
            DpAction::SetField {
                field: Field::Ipv4Src,
                value: 7
            },
            DpAction::SetQueue(5),
            DpAction::Output(4),
        ]
    );
}

#[test]
fn clear_actions_empties_the_set() {
    let mut c = control(4);
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![
            Instruction::WriteActions(vec![out(3)]),
            Instruction::GotoTable(1),
        ],
    );
    add(
        &mut c,
        1,
        1,
        Match::ANY,
        vec![
            Instruction::ClearActions,
            Instruction::ApplyActions(vec![out(4)]),
        ],
    );
    assert_eq!(run(&mut c, &ip_key(1)).actions, outputs(&[4]));
}

#[test]
fn write_metadata_keeps_unmasked_bits() {
    let mut c = control(4);
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![
            Instruction::WriteMetadata {
                value: 0xabcd,
                mask: 0xff,
            },
            Instruction::GotoTable(1),
        ],
    );
    add(
        &mut c,
        1,
        1,
        m(&[(Field::Metadata, 0x1200_0000_0000_00cd)]),
        vec![Instruction::ApplyActions(vec![out(2)])],
    );
    let mut k = ip_key(1);
    k.set(Field::Metadata, 0x1200_0000_0000_0011);
    assert_eq!(run(&mut c, &k).actions, outputs(&[2]));
    k.set(Field::Metadata, 0x1300_0000_0000_0011);
    assert!(run(&mut c, &k).actions.is_empty());
}

#[test]
fn all_group_buckets_do_not_leak_into_each_other() {
    let mut c = control(4);
    let set = Action::SetField {
        field: Field::Ipv4Dst,
        value: 9,
    };
    group(
        &mut c,
        1,
        GroupType::All,
        vec![
            bucket(vec![set, Action::DecNwTtl, out(2)]),
            bucket(vec![out(3)]),
        ],
    );
    add(
        &mut c,
        0,
        1,
        ip(),
        vec![Instruction::ApplyActions(vec![Action::Group(1), out(4)])],
    );
    let t = run(&mut c, &ip_key(1));
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetField {
                field: Field::Ipv4Dst,
                value: 9
            },
            DpAction::DecTtl,
            DpAction::Output(2),
            DpAction::SetField {
                field: Field::Ipv4Dst,
                value: 0x0a00_0002
            },
            DpAction::SetField {
                field: Field::IpTtl,
                value: 64
            },
            DpAction::Output(3),
            DpAction::Output(4),
        ]
    );
    // The restored values came from the key, so they are in the mask.
    assert_eq!(t.mask.get(Field::Ipv4Dst), 0xffff_ffff);
    assert_eq!(t.mask.get(Field::IpTtl), 0xff);
}

#[test]
fn vlan_push_in_a_bucket_is_popped_after_it() {
    let mut c = control(4);
    let push = vec![
        Action::PushVlan(0x8100),
        Action::SetField {
            field: Field::VlanVid,
            value: 10,
        },
        out(2),
    ];
    group(
        &mut c,
        1,
        GroupType::All,
        vec![bucket(push), bucket(vec![out(3)])],
    );
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![Action::Group(1)])],
    );
    let t = run(&mut c, &ip_key(1));
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 0
            },
            DpAction::SetField {
                field: Field::VlanVid,
                value: 0x1000 | 10
            },
            DpAction::Output(2),
            DpAction::PopVlan,
            DpAction::Output(3),
        ]
    );
}

#[test]
fn indirect_and_chained_groups() {
    let mut c = control(4);
    group(&mut c, 1, GroupType::Indirect, vec![bucket(vec![out(2)])]);
    group(
        &mut c,
        2,
        GroupType::Indirect,
        vec![bucket(vec![Action::Group(1), out(3)])],
    );
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![Instruction::WriteActions(vec![Action::Group(2), out(4)])],
    );
    // The action set's group wins over its output.
    assert_eq!(run(&mut c, &ip_key(1)).actions, outputs(&[2, 3]));
}

#[test]
fn select_group_is_stable_weighted_and_masks_its_hash_fields() {
    let mut c = control(4);
    let mut b1 = bucket(vec![out(2)]);
    b1.weight = 1;
    let mut b2 = bucket(vec![out(3)]);
    b2.weight = 3;
    group(&mut c, 1, GroupType::Select, vec![b1, b2]);
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![Action::Group(1)])],
    );
    c.publish();
    let p = c.published();
    let mut counts = [0u32; 2];
    let mut t = Translation::default();
    for sport in 0..400u128 {
        let mut k = ip_key(1);
        k.set(Field::TpSrc, sport);
        p.translate(&k, &mut t);
        let first = t.actions.clone();
        p.translate(&k, &mut t);
        assert_eq!(t.actions, first, "stable");
        match t.actions[..] {
            [DpAction::Output(2)] => counts[0] += 1,
            [DpAction::Output(3)] => counts[1] += 1,
            _ => panic!("unexpected {:?}", t.actions),
        }
        assert_eq!(t.mask.get(Field::TpSrc), 0xffff);
        assert_eq!(t.mask.get(Field::Ipv4Src), 0xffff_ffff);
    }
    assert!(
        counts[0] > 50 && counts[1] > 200,
        "weights 1:3 gave {counts:?}"
    );
}

#[test]
fn fast_failover_uses_the_first_live_bucket() {
    let mut c = control(4);
    let watch = |p: u32, o: u32| Bucket {
        weight: 0,
        watch_port: p,
        watch_group: GROUP_ANY,
        actions: vec![out(o)],
        actions_as_sent: None,
    };
    group(
        &mut c,
        1,
        GroupType::FastFailover,
        vec![watch(2, 2), watch(3, 3)],
    );
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![Action::Group(1)])],
    );
    assert_eq!(run(&mut c, &ip_key(1)).actions, outputs(&[2]));
    let cell_gen = c
        .published()
        .shared
        .generation
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(c.set_port_live(2, false));
    assert!(
        c.published()
            .shared
            .generation
            .load(std::sync::atomic::Ordering::Relaxed)
            > cell_gen
    );
    assert_eq!(run(&mut c, &ip_key(1)).actions, outputs(&[3]));
    c.set_port_live(3, false);
    assert!(run(&mut c, &ip_key(1)).actions.is_empty());
}

#[test]
fn flood_skips_in_port_no_flood_and_down_ports_all_does_not() {
    let (mut c, _) = Control::new(PipelineConfig::default());
    let mut ps: Vec<PortInfo> = (1..=5).map(port).collect();
    ps[2].no_flood = true;
    ps[3].down = true;
    ps[4].no_fwd = true;
    c.set_ports(ps);
    add(
        &mut c,
        0,
        2,
        m(&[(Field::TpDst, 0)]).tap_prereq(),
        vec![Instruction::ApplyActions(vec![out(ports::ALL)])],
    );
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![out(ports::FLOOD)])],
    );
    let t = run(&mut c, &ip_key(1));
    assert_eq!(t.actions, outputs(&[2]));
    assert_eq!(t.mask.get(Field::InPort), 0xffff_ffff);
    let mut k = ip_key(2);
    k.set(Field::TpDst, 0);
    assert_eq!(run(&mut c, &k).actions, outputs(&[1, 3, 4]));
}

trait TapPrereq {
    fn tap_prereq(self) -> Self;
}
impl TapPrereq for Match {
    /// Adds eth_type=IPv4 and ip_proto=TCP so an L4 match is valid.
    fn tap_prereq(mut self) -> Self {
        self.set_exact(Field::EthType, 0x0800);
        self.set_exact(Field::IpProto, 6);
        self
    }
}

#[test]
fn in_port_output_needs_the_in_port_action() {
    let mut c = control(4);
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![
            out(1),
            out(ports::IN_PORT),
            out(ports::LOCAL),
        ])],
    );
    assert_eq!(run(&mut c, &ip_key(1)).actions, outputs(&[1, ports::LOCAL]));
}

#[test]
fn normal_floods_unknown_then_unicasts_learned_and_masks_l2() {
    let mut c = control(3);
    add(
        &mut c,
        0,
        0,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![out(ports::NORMAL)])],
    );
    c.publish();
    let p = c.published();
    let mut t = Translation::default();
    // A (on port 1) sends to B: B unknown, flood.
    let gen0 = p
        .shared
        .generation
        .load(std::sync::atomic::Ordering::Relaxed);
    let a_to_b = ip_key(1);
    p.translate(&a_to_b, &mut t);
    assert_eq!(t.actions, outputs(&[2, 3]));
    for f in [Field::InPort, Field::EthSrc, Field::EthDst, Field::VlanTci] {
        assert_eq!(t.mask.get(f), f.max_value(), "{f:?} in the mask");
    }
    assert!(
        p.shared
            .generation
            .load(std::sync::atomic::Ordering::Relaxed)
            > gen0,
        "learning A bumps the generation"
    );
    // B (on port 3) answers A: A is known on port 1.
    let mut b_to_a = ip_key(3);
    b_to_a.set(Field::EthSrc, 0x0200_0000_0002);
    b_to_a.set(Field::EthDst, 0x0200_0000_0001);
    p.translate(&b_to_a, &mut t);
    assert_eq!(t.actions, outputs(&[1]));
    p.translate(&a_to_b, &mut t);
    assert_eq!(t.actions, outputs(&[3]));
    // Broadcast floods; other VLAN does not know B.
    let mut bcast = a_to_b;
    bcast.set(Field::EthDst, 0xffff_ffff_ffff);
    p.translate(&bcast, &mut t);
    assert_eq!(t.actions, outputs(&[2, 3]));
    let mut vlan = a_to_b;
    vlan.set(Field::VlanTci, 0x1000 | 7);
    p.translate(&vlan, &mut t);
    assert_eq!(t.actions, outputs(&[2, 3]));
    assert_eq!(p.mac_table().len(), 3);
}

#[test]
fn dec_ttl_expiry_drops_or_goes_to_the_controller() {
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
            1,
            Match::ANY,
            vec![
                Instruction::ApplyActions(vec![Action::DecNwTtl, out(2)]),
                Instruction::WriteActions(vec![out(3)]),
            ],
        );
        let mut k = ip_key(1);
        k.set(Field::IpTtl, 1);
        let t = run(&mut c, &k);
        assert_eq!(t.mask.get(Field::IpTtl), 0xff);
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
        k.set(Field::IpTtl, 2);
        assert_eq!(
            run(&mut c, &k).actions,
            vec![DpAction::DecTtl, DpAction::Output(2), DpAction::Output(3)]
        );
    }
}

#[test]
fn table_miss_entry_versus_no_entry() {
    let mut c = control(3);
    let t = run(&mut c, &ip_key(1));
    assert!(
        t.actions.is_empty() && t.flows.is_empty(),
        "no entry: drop, no packet-in"
    );
    add(
        &mut c,
        0,
        0,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![Action::Output {
            port: ports::CONTROLLER,
            max_len: 128,
        }])],
    );
    add(
        &mut c,
        0,
        5,
        m(&[(Field::InPort, 2)]),
        vec![Instruction::ApplyActions(vec![Action::Output {
            port: ports::CONTROLLER,
            max_len: 64,
        }])],
    );
    let t = run(&mut c, &ip_key(1));
    assert_eq!(
        t.actions,
        vec![DpAction::Controller {
            reason: PacketInReason::NoMatch,
            max_len: 128,
            table_id: 0,
            cookie: 0
        }]
    );
    let t = run(&mut c, &ip_key(2));
    assert_eq!(
        t.actions,
        vec![DpAction::Controller {
            reason: PacketInReason::Action,
            max_len: 64,
            table_id: 0,
            cookie: 0
        }]
    );
    // no_packet_in on the ingress port suppresses it.
    let mut ps: Vec<PortInfo> = (1..=3).map(port).collect();
    ps[1].no_packet_in = true;
    c.set_ports(ps);
    assert!(run(&mut c, &ip_key(2)).actions.is_empty());
}

#[test]
fn counters_of_every_matched_entry_are_reported() {
    let mut c = control(3);
    add(&mut c, 0, 1, Match::ANY, vec![Instruction::GotoTable(3)]);
    add(
        &mut c,
        3,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![out(2)])],
    );
    let t = run(&mut c, &ip_key(1));
    assert_eq!(t.flows.len(), 2);
    t.flows[1].add(3, 300, 10);
    let views = c.flows(3, &crate::table::FlowFilter::ALL);
    assert_eq!((views[0].packets, views[0].bytes), (3, 300));
    let stats = c.table_stats();
    assert_eq!(
        (stats[3].active, stats[3].lookups, stats[3].matched),
        (1, 1, 1)
    );
    assert!(Arc::ptr_eq(
        &t.flows[0],
        &c.published()
            .table(0)
            .unwrap()
            .classifier
            .iter()
            .next()
            .unwrap()
            .counters
    ));
}

#[test]
fn action_explosion_is_bounded() {
    let cfg = PipelineConfig {
        max_actions: 8,
        ..PipelineConfig::default()
    };
    let (mut c, _) = Control::new(cfg);
    c.set_ports((1..=20).map(port).collect());
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![out(ports::ALL)])],
    );
    let t = run(&mut c, &ip_key(1));
    assert!(t.actions.is_empty());
    assert!(!t.cacheable);
}

/// Bad input (issue 20): a packet that an action would make malformed is counted and dropped,
/// never forwarded half-written. A pop_vlan on an untagged packet is emitted for the datapath
/// to refuse: it drops the packet whole and counts it (`drop_rewrite`; Open vSwitch skips the
/// pop instead), the mask holding the tag's present bit that decided it. A VLAN set-field on
/// an untagged packet does nothing (as in Open vSwitch). An action the key cannot rule out
/// but the bytes refuse (a port rewrite on a later fragment, a push beyond the headroom) is
/// emitted and refused the same way (`packet::rewrite` tests: a refused rewrite leaves the
/// packet as it was).
#[test]
fn actions_on_a_header_the_packet_lacks() {
    let mut c = control(3);
    add(
        &mut c,
        0,
        1,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![
            Action::PopVlan,
            Action::SetField {
                field: Field::VlanVid,
                value: 5,
            },
            out(2),
        ])],
    );
    let t = run(&mut c, &ip_key(1));
    assert_eq!(t.actions, vec![DpAction::PopVlan, DpAction::Output(2)]);
    assert_eq!(t.mask.get(Field::VlanTci) & 0x1000, 0x1000);

    let mut c = control(3);
    let mut udp = ip();
    udp.set_exact(Field::IpProto, 17);
    add(
        &mut c,
        0,
        1,
        udp,
        vec![Instruction::ApplyActions(vec![
            Action::SetField {
                field: Field::TpDst,
                value: 99,
            },
            out(2),
        ])],
    );
    let mut later = ip_key(1);
    later.set(Field::IpProto, 17);
    later.set(
        Field::IpFrag,
        u128::from(packet::key::frag::ANY | packet::key::frag::LATER),
    );
    later.set(Field::TpSrc, 0);
    later.set(Field::TpDst, 0);
    assert_eq!(
        run(&mut c, &later).actions,
        vec![
            DpAction::SetField {
                field: Field::TpDst,
                value: 99
            },
            DpAction::Output(2)
        ]
    );
}

/// `tun_src=X` implies an IPv4 underlay: a packet from an IPv6 underlay address ending in X
/// misses the flow, one from X hits it; the flow's megaflow mask carries the family bit.
#[test]
fn tun_src_matches_an_ipv4_underlay_only() {
    use packet::key::parsed;
    let mut c = control(2);
    add(
        &mut c,
        0,
        1,
        m(&[(Field::TunSrc, 0xc0a8_0001)]),
        vec![Instruction::ApplyActions(vec![out(2)])],
    );
    let from = |family: u16, addr: u128| {
        let mut k = ip_key(1);
        k.set(Field::TunIpv6Src, addr);
        k.set(Field::Parsed, u128::from(family));
        k
    };
    let v4 = run(&mut c, &from(parsed::TUN_IPV4, 0xc0a8_0001));
    assert_eq!(v4.actions, outputs(&[2]), "an IPv4 underlay from X");
    assert_ne!(v4.mask.get(Field::Parsed) as u16 & parsed::TUN_IPV4, 0);
    let v6 = run(
        &mut c,
        &from(parsed::TUN_IPV6, 0x2001_0db8 << 96 | 0xc0a8_0001),
    );
    assert!(
        v6.actions.is_empty(),
        "an IPv6 underlay ending in X: {:?}",
        v6.actions
    );
    // The flow as stored says the bit; as the controller wrote it, it does not.
    let stored = m(&[(Field::TunSrc, 0xc0a8_0001)]).with_implied();
    assert_eq!(stored.get(Field::Parsed).0 as u16, parsed::TUN_IPV4);
    assert_eq!(stored.without_implied(), m(&[(Field::TunSrc, 0xc0a8_0001)]));
    assert_eq!(
        crate::ofctl::format_match(&stored),
        "tun_src=192.168.0.1",
        "printed as sent"
    );
}

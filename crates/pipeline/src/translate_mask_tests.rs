//! Whole-pipeline mask soundness: on random multi-table pipelines (set-field, goto,
//! write-actions, write-metadata, VLAN push/pop, dec-TTL, FLOOD, IN_PORT, select/all/
//! fast-failover groups), any key equal to a translated key under the returned mask gets the
//! same actions — also with IPv4/IPv6 address prefixes of every length, whose masks prefix
//! tracking narrows. And the width: the issue's one-drop-rule table makes a handful of
//! megaflows for many sources.

use packet::{Field, FlowKey, KEY_WORDS};
use proptest::prelude::*;

use std::collections::HashSet;

use super::tests::{bucket, control, group, ip_key, out, port};
use crate::control::Control;
use crate::dpaction::{DpAction, Translation};
use crate::model::{ports, Action, Bucket, FlowMod, GroupType, Instruction, Match, GROUP_ANY};
use crate::ofctl::parse_flow;
use crate::pipeline::PipelineConfig;
use crate::prefix::{left_aligned, prefix_mask, TRACKED};

pub(crate) fn action_strategy() -> impl Strategy<Value = Action> {
    prop_oneof![
        (1u32..6).prop_map(out),
        Just(out(ports::FLOOD)),
        Just(out(ports::IN_PORT)),
        Just(out(ports::CONTROLLER)),
        (0u128..4).prop_map(|v| Action::SetField {
            field: Field::Ipv4Dst,
            value: v
        }),
        (0u128..3).prop_map(|v| Action::SetField {
            field: Field::TpDst,
            value: v
        }),
        Just(Action::DecNwTtl),
        Just(Action::PushVlan(0x8100)),
        Just(Action::PopVlan),
        (1u32..4).prop_map(Action::Group),
    ]
}

pub(crate) fn instruction_strategy() -> impl Strategy<Value = Vec<Instruction>> {
    (
        prop::collection::vec(action_strategy(), 0..4),
        prop::option::of(prop::collection::vec(action_strategy(), 0..3)),
        any::<bool>(),
        prop::option::of((0u64..4, 0u64..4)),
        prop::option::of(1u8..4),
    )
        .prop_map(|(apply, write, clear, meta, goto)| {
            let mut v = vec![Instruction::ApplyActions(apply)];
            if clear {
                v.push(Instruction::ClearActions);
            }
            if let Some(w) = write {
                v.push(Instruction::WriteActions(w));
            }
            if let Some((value, mask)) = meta {
                v.push(Instruction::WriteMetadata { value, mask });
            }
            if let Some(g) = goto {
                v.push(Instruction::GotoTable(g));
            }
            v
        })
}

pub(crate) fn match_strategy() -> impl Strategy<Value = Match> {
    (
        prop::option::weighted(0.3, 0u128..4),
        prop::option::weighted(
            0.3,
            (0u128..4, prop_oneof![Just(0xffff_ffffu128), Just(1u128)]),
        ),
        prop::option::weighted(0.3, 0u128..3),
        prop::option::weighted(0.3, (0u128..4, 0u128..4)),
        prop::option::weighted(0.2, 0u128..2),
    )
        .prop_map(|(inp, dst, tp, meta, vlan)| {
            let mut m = Match::ANY;
            m.set_exact(Field::EthType, 0x0800);
            m.set_exact(Field::IpProto, 6);
            if let Some(v) = inp {
                m.set_exact(Field::InPort, v);
            }
            if let Some((v, mk)) = dst {
                m.set_masked(Field::Ipv4Dst, v, mk);
            }
            if let Some(v) = tp {
                m.set_exact(Field::TpDst, v);
            }
            if let Some((v, mk)) = meta {
                m.set_masked(Field::Metadata, v, mk);
            }
            if let Some(v) = vlan {
                m.set_masked(Field::VlanTci, v << 12, 0x1000);
            }
            m
        })
}

pub(crate) fn key_strategy() -> impl Strategy<Value = FlowKey> {
    (
        0u128..5,
        0u128..4,
        0u128..3,
        0u128..4,
        0u128..3,
        prop_oneof![Just(0u128), Just(0x1005u128)],
        any::<u32>(),
    )
        .prop_map(|(inp, dst, tp, meta, ttl, vlan, src)| {
            let mut k = ip_key(0);
            k.set(Field::InPort, inp);
            k.set(Field::Ipv4Dst, dst);
            k.set(Field::TpDst, tp);
            k.set(Field::Metadata, meta);
            k.set(Field::IpTtl, ttl);
            k.set(Field::VlanTci, vlan);
            k.set(Field::Ipv4Src, u128::from(src));
            k
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn any_key_equal_under_the_mask_gets_the_same_actions(
        rules in prop::collection::vec((prop_oneof![2 => Just(0u8), 1 => 1u8..4], 0u16..4, match_strategy(), instruction_strategy()), 0..25),
        keys in prop::collection::vec((key_strategy(), any::<[u64; KEY_WORDS]>()), 1..10),
        down in 1u32..6,
    ) {
        let mut c = control(5);
        let ff = |p: u32| Bucket { weight: 1, watch_port: p, watch_group: GROUP_ANY, actions: vec![out(p)], actions_as_sent: None,  };
        group(&mut c, 1, GroupType::Select, vec![
            bucket(vec![out(1)]),
            bucket(vec![Action::SetField { field: Field::Ipv4Src, value: 5 }, out(2)]),
            bucket(vec![out(3)]),
        ]);
        group(&mut c, 2, GroupType::All, vec![
            bucket(vec![Action::SetField { field: Field::TpDst, value: 9 }, Action::DecNwTtl, out(4)]),
            bucket(vec![Action::PopVlan, out(5)]),
        ]);
        group(&mut c, 3, GroupType::FastFailover, vec![ff(down), ff(2)]);
        c.set_port_live(down, false);
        for (table, prio, matcher, ins) in rules {
            // Invalid combinations (goto backwards...) are refused; skip them.
            let _ = c.flow_mod(&FlowMod::add(table, prio, matcher, ins));
        }
        c.publish();
        let p = c.published();
        let (mut t1, mut t2) = (Translation::default(), Translation::default());
        for (key, noise) in keys {
            p.translate(&key, &mut t1);
            let mut key2 = key;
            for (i, n) in noise.iter().enumerate() {
                key2.w[i] = (key.w[i] & t1.mask.w[i]) | (n & !t1.mask.w[i]);
            }
            p.translate(&key2, &mut t2);
            prop_assert_eq!(&t1.actions, &t2.actions, "key {:?} key2 {:?} mask {:?}", key, key2, t1.mask);
            prop_assert_eq!(t1.flows.len(), t2.flows.len());
        }
    }
}

/// Keys a megaflow `(key, mask)` covers that are likeliest to expose a missing mask bit:
/// random bits outside the mask, and for each address field the key with its first
/// wildcarded bit flipped (the bit right after a prefix the lookup unwildcarded).
fn covered(key: &FlowKey, mask: &FlowKey, noise: &[u64; KEY_WORDS]) -> Vec<FlowKey> {
    let mut out = Vec::new();
    let mut k2 = *key;
    for (i, n) in noise.iter().enumerate() {
        k2.w[i] = (key.w[i] & mask.w[i]) | (n & !mask.w[i]);
    }
    out.push(k2);
    for f in TRACKED {
        let bits = u32::from(f.spec().bits);
        let first_free = left_aligned(mask, f).leading_ones();
        if first_free < bits {
            let mut k2 = *key;
            k2.set(f, key.get(f) ^ (1u128 << (bits - 1 - first_free)));
            out.push(k2);
        }
    }
    out
}

/// An address near one of a few bases (so rules and packets share long prefixes), with now
/// and then one bit flipped anywhere.
fn addr(v6: bool) -> impl Strategy<Value = u128> {
    let v4 = [0x0a00_0000u128, 0x0b01_0101, 0x0a00_0100, 0xc0a8_0000];
    let v6b = [
        0x2001_0db8u128 << 96,
        (0x2001_0db8u128 << 96) | (1 << 64),
        0xfe80 << 112,
    ];
    let bits = if v6 { 128 } else { 32 };
    (
        0usize..4,
        0u128..16,
        prop::option::weighted(0.3, 0u32..bits),
    )
        .prop_map(move |(b, lo, flip)| {
            let base = if v6 { v6b[b % 3] } else { v4[b] };
            (base + lo) ^ flip.map_or(0, |i| 1u128 << i)
        })
}

/// `eth_type` for the family and prefixes of every length on the source and destination.
fn prefix_match_strategy() -> impl Strategy<Value = Match> {
    any::<bool>().prop_flat_map(|v6| {
        let bits = if v6 { 128u32 } else { 32 };
        (
            prop::option::weighted(0.7, (addr(v6), 0..=bits)),
            prop::option::weighted(0.4, (addr(v6), 0..=bits)),
            prop::option::weighted(0.3, 1u128..4),
            prop::option::weighted(0.2, 0u128..3),
        )
            .prop_map(move |(src, dst, inp, tp)| {
                let (eth, fs, fd) = if v6 {
                    (0x86dd, Field::Ipv6Src, Field::Ipv6Dst)
                } else {
                    (0x0800, Field::Ipv4Src, Field::Ipv4Dst)
                };
                let mut m = Match::ANY;
                m.set_exact(Field::EthType, eth);
                m.set_exact(Field::IpProto, 6);
                for (f, a) in [(fs, src), (fd, dst)] {
                    if let Some((a, plen)) = a {
                        m.set_masked(f, a, prefix_mask(plen) >> (128 - bits));
                    }
                }
                if let Some(v) = inp {
                    m.set_exact(Field::InPort, v);
                }
                if let Some(v) = tp {
                    m.set_exact(Field::TpDst, v);
                }
                m
            })
    })
}

fn prefix_key_strategy() -> impl Strategy<Value = FlowKey> {
    any::<bool>().prop_flat_map(|v6| {
        (1u128..5, addr(v6), addr(v6), 0u128..3, 0u128..3).prop_map(
            move |(inp, src, dst, tp, ttl)| {
                let mut k = ip_key(0);
                k.set(Field::InPort, inp);
                k.set(Field::TpDst, tp);
                k.set(Field::IpTtl, ttl);
                if v6 {
                    k.set(Field::EthType, 0x86dd);
                    k.set(Field::Ipv4Src, 0);
                    k.set(Field::Ipv4Dst, 0);
                    k.set(Field::Ipv6Src, src);
                    k.set(Field::Ipv6Dst, dst);
                } else {
                    k.set(Field::Ipv4Src, src);
                    k.set(Field::Ipv4Dst, dst);
                }
                k
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn address_prefixes_keep_the_mask_sound(
        rules in prop::collection::vec((prop_oneof![2 => Just(0u8), 1 => 1u8..3], 0u16..4, prefix_match_strategy(), instruction_strategy()), 1..30),
        keys in prop::collection::vec((prefix_key_strategy(), any::<[u64; KEY_WORDS]>()), 1..10),
    ) {
        let mut c = control(5);
        group(&mut c, 1, GroupType::Select, vec![bucket(vec![out(1)]), bucket(vec![out(3)])]);
        group(&mut c, 2, GroupType::All, vec![
            bucket(vec![Action::SetField { field: Field::TpDst, value: 9 }, out(4)]),
            bucket(vec![Action::PopVlan, out(5)]),
        ]);
        group(&mut c, 3, GroupType::Indirect, vec![bucket(vec![out(2)])]);
        for (table, prio, matcher, ins) in rules {
            let _ = c.flow_mod(&FlowMod::add(table, prio, matcher, ins));
        }
        c.publish();
        let p = c.published();
        let (mut t1, mut t2) = (Translation::default(), Translation::default());
        for (key, noise) in keys {
            p.translate(&key, &mut t1);
            for key2 in covered(&key, &t1.mask, &noise) {
                p.translate(&key2, &mut t2);
                prop_assert_eq!(&t1.actions, &t2.actions, "key {:?} key2 {:?} mask {:?}", key, key2, t1.mask);
                prop_assert_eq!(t1.flows.len(), t2.flows.len());
            }
        }
    }
}

/// The megaflows (masked key, mask) `sources` make through the issue's table: a drop rule
/// on one UDP source and a catch-all from port 1 to port 2. Checks that each translation is
/// what full translation gives and that every packet is forwarded or dropped as it should.
fn issue_table_megaflows(prefix_tracking: bool, sources: impl Iterator<Item = u32>) -> usize {
    let (mut c, _) = Control::new(PipelineConfig {
        prefix_tracking,
        ..PipelineConfig::default()
    });
    c.set_ports((1..=2).map(port).collect());
    for f in [
        "priority=100,udp,nw_src=11.1.1.1,actions=drop",
        "priority=10,in_port=1,actions=output:2",
    ] {
        c.flow_mod(&parse_flow(f).unwrap()).unwrap();
    }
    c.publish();
    let p = c.published();
    let mut t = Translation::default();
    let mut megaflows = HashSet::new();
    for src in sources {
        let mut k = ip_key(1);
        k.set(Field::IpProto, 17);
        k.set(Field::Ipv4Src, u128::from(src));
        p.translate(&k, &mut t);
        let want: &[DpAction] = if src == 0x0b01_0101 {
            &[]
        } else {
            &[DpAction::Output(2)]
        };
        assert_eq!(t.actions, want, "source {src:#x}");
        megaflows.insert((k.masked(&t.mask), t.mask));
    }
    megaflows.len()
}

#[test]
fn one_drop_rule_makes_a_handful_of_megaflows_for_many_sources() {
    // The bench's `flows` traffic: 10.0.0.0 + i.
    let n = 20_000u32;
    let sources = || (0..n).map(|i| 0x0a00_0000 + i);
    assert_eq!(
        issue_table_megaflows(true, sources()),
        1,
        "all of 10/8 in one"
    );
    assert_eq!(
        issue_table_megaflows(false, sources()),
        n as usize,
        "as before"
    );
    // Sources spread over the whole space: mostly one megaflow per /8 (lengths are rounded
    // to octets), a few longer ones in 11/8.
    let spread = (0..n).map(|i| i.wrapping_mul(2_654_435_761));
    assert!(issue_table_megaflows(true, spread) <= 4 * 256);
    // The /24 beside the dropped source's: 22 common bits, one /24 megaflow.
    let beside = (0..256u32).map(|i| 0x0b01_0200 + i);
    assert_eq!(issue_table_megaflows(true, beside), 1);
    // Inside its /24 every source is told apart from it only by all 32 bits.
    let inside = (0..256u32).map(|i| 0x0b01_0100 + i);
    assert_eq!(issue_table_megaflows(true, inside), 256);
}

/// What prefix tracking costs a translation (the upcall path; prints, asserts nothing):
/// `cargo test --release -p pipeline --lib prefix_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn prefix_speed() {
    for rules in [1u32, 100_000] {
        for prefix_tracking in [false, true] {
            let (mut c, _) = Control::new(PipelineConfig {
                prefix_tracking,
                ..PipelineConfig::default()
            });
            c.set_ports((1..=2).map(port).collect());
            for i in 0..rules {
                let a = 0x0b01_0101 + i * 7;
                let f = format!(
                    "priority=100,udp,nw_src={}.{}.{}.{},actions=drop",
                    a >> 24,
                    (a >> 16) & 255,
                    (a >> 8) & 255,
                    a & 255
                );
                c.flow_mod(&parse_flow(&f).unwrap()).unwrap();
            }
            c.flow_mod(&parse_flow("priority=10,in_port=1,actions=output:2").unwrap())
                .unwrap();
            c.publish();
            let p = c.published();
            let mut t = Translation::default();
            let n = 1_000_000u32;
            let start = std::time::Instant::now();
            for i in 0..n {
                let mut k = ip_key(1);
                k.set(Field::IpProto, 17);
                // Every other source matches a drop rule when there are many.
                let src = 0x0b01_0101 + (i % rules.max(2)) * 7 + (i & 1);
                k.set(Field::Ipv4Src, u128::from(src));
                p.translate(&k, &mut t);
            }
            let ns = start.elapsed().as_nanos() as f64 / f64::from(n);
            println!("{rules:>7} drop rules, prefix tracking {prefix_tracking:>5}: {ns:.0} ns per translation");
        }
    }
}

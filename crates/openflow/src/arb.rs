//! Test support: proptest strategies for every value a message can carry (matches built from
//! the OXM table so prerequisites hold, actions, instructions, flow/group/meter mods, every
//! message and multipart body). Used by the round-trip property tests and as seeds of the
//! fuzz body's mutation test.

use packet::Field;
use pipeline::model::{
    Action, Bucket, FlowFlags, FlowMod, FlowModCommand, Group, GroupMod, GroupModCommand,
    GroupType, Instruction, Match, Meter, MeterBand, MeterMod, MeterModCommand, GROUP_MAX,
};
use pipeline::PacketInReason;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::Union;

use crate::arb_multipart::{arb_mp_reply, arb_mp_request, arb_port_desc};
use crate::messages::controller::{AsyncConfig, ControllerRole, Experimenter, RoleRequest};
use crate::messages::error_msg::ErrorMsg;
use crate::messages::hello::Hello;
use crate::messages::mods::{FlowModMsg, MeterModMsg};
use crate::messages::packet::{
    FlowRemoved, FlowRemovedReason, PacketIn, PacketOut, PortReason, PortStatus,
};
use crate::messages::queue::{PacketQueue, QueueGetConfigReply, QueueProp};
use crate::messages::switch::{FeaturesReply, PortMod, SwitchConfig, TableMod};
use crate::oxm::{oxm_class, OXM_FIELDS};
use crate::{ErrorCode, Message};

/// A match whose fields' prerequisites hold, one OXM name per key slot.
pub fn arb_match() -> impl Strategy<Value = Match> {
    let n = OXM_FIELDS.len();
    (
        prop_oneof![
            Just(None),
            Just(Some(0x0800u128)),
            Just(Some(0x86dd)),
            Just(Some(0x0806)),
            Just(Some(0x88cc)),
            Just(Some(0x8847)),
            Just(Some(0x8848))
        ],
        prop_oneof![
            Just(None),
            Just(Some(6u128)),
            Just(Some(17)),
            Just(Some(132)),
            Just(Some(1)),
            Just(Some(58)),
            Just(Some(47))
        ],
        prop_oneof![
            Just(None),
            Just(Some(135u128)),
            Just(Some(136)),
            Just(Some(128))
        ],
        vec((any::<bool>(), any::<u128>(), 0u8..3, any::<u128>()), n..=n),
        any::<bool>(),
    )
        .prop_map(|(eth, proto, icmp6, picks, vlan_by_tci)| {
            let mut m = Match::ANY;
            if let Some(e) = eth {
                m.set_exact(Field::EthType, e);
                if matches!(e, 0x0800 | 0x86dd) {
                    if let Some(p) = proto {
                        m.set_exact(Field::IpProto, p);
                        if e == 0x86dd && p == 58 {
                            if let Some(t) = icmp6 {
                                m.set_exact(Field::IcmpType, t);
                            }
                        }
                    }
                }
            }
            for (def, (take, v, how, mrand)) in OXM_FIELDS.iter().zip(picks) {
                let skip_vlan = if vlan_by_tci {
                    matches!(def.key, Field::VlanVid | Field::VlanPcp)
                } else {
                    def.key == Field::VlanTci
                };
                if !take
                    || skip_vlan
                    || (def.class == oxm_class::NXM_1 && def.key == Field::TcpFlags)
                    || m.get(def.key).1 != 0
                    || !def.prereq.holds(&m)
                {
                    continue;
                }
                let full = def.full_mask();
                let mask = if !def.maskable || how == 0 {
                    full
                } else {
                    mrand & full
                };
                // Values a controller can mean: TCP has 12 flag bits, and a match on "later
                // fragment" has no L4 header to match (Open vSwitch refuses both otherwise).
                let v = match def.key {
                    Field::TcpFlags => v & 0x0fff,
                    Field::IpFrag => v & 1,
                    _ => v,
                };
                if mask != 0 {
                    m.set_masked(def.key, v & mask, mask);
                }
            }
            m
        })
}

fn arb_port() -> impl Strategy<Value = u32> {
    prop_oneof![
        1u32..=0xffff_ff00,
        Just(0xffff_fff8),
        Just(0xffff_fff9),
        Just(0xffff_fffa),
        Just(0xffff_fffb),
        Just(0xffff_fffc),
        Just(0xffff_fffd),
        Just(0xffff_fffe)
    ]
}

/// Any action the codec can carry.
pub fn arb_action() -> impl Strategy<Value = Action> {
    let settable: Vec<Field> = Field::ALL
        .iter()
        .copied()
        .filter(|f| !matches!(f, Field::Parsed | Field::CvlanTci | Field::MplsLse))
        .collect();
    prop_oneof![
        (arb_port(), any::<u16>()).prop_map(|(port, max_len)| Action::Output { port, max_len }),
        (0..=GROUP_MAX).prop_map(Action::Group),
        any::<u32>().prop_map(Action::SetQueue),
        (proptest::sample::select(settable), any::<u128>()).prop_map(|(field, v)| {
            let full = if field == Field::IpFrag {
                3
            } else {
                field.max_value()
            };
            Action::SetField {
                field,
                value: v & full,
            }
        }),
        prop_oneof![Just(0x8100u16), Just(0x88a8)].prop_map(Action::PushVlan),
        Just(Action::PopVlan),
        Just(Action::DecNwTtl),
        any::<u8>().prop_map(Action::SetNwTtl),
        prop_oneof![Just(0x8847u16), Just(0x8848)].prop_map(Action::PushMpls),
        any::<u16>().prop_map(Action::PopMpls),
        any::<u8>().prop_map(Action::SetMplsTtl),
        Just(Action::DecMplsTtl),
        Just(Action::CopyTtlOut),
        Just(Action::CopyTtlIn),
    ]
}

pub(crate) fn arb_actions() -> impl Strategy<Value = Vec<Action>> {
    vec(arb_action(), 0..4)
}

/// Any instruction.
pub fn arb_instruction() -> impl Strategy<Value = Instruction> {
    prop_oneof![
        any::<u32>().prop_map(Instruction::Meter),
        arb_actions().prop_map(Instruction::ApplyActions),
        Just(Instruction::ClearActions),
        arb_actions().prop_map(Instruction::WriteActions),
        (any::<u64>(), any::<u64>())
            .prop_map(|(value, mask)| Instruction::WriteMetadata { value, mask }),
        (0u8..=254).prop_map(Instruction::GotoTable),
    ]
}

pub(crate) fn arb_flags() -> impl Strategy<Value = FlowFlags> {
    any::<[bool; 5]>().prop_map(|b| FlowFlags {
        send_flow_rem: b[0],
        check_overlap: b[1],
        reset_counts: b[2],
        no_pkt_counts: b[3],
        no_byte_counts: b[4],
    })
}

/// Any flow-mod.
pub fn arb_flow_mod() -> impl Strategy<Value = FlowMod> {
    (
        prop_oneof![
            Just(FlowModCommand::Add),
            Just(FlowModCommand::Modify),
            Just(FlowModCommand::ModifyStrict),
            Just(FlowModCommand::Delete),
            Just(FlowModCommand::DeleteStrict)
        ],
        any::<(u8, u16, u64, u64, u16, u16, u32, u32)>(),
        arb_match(),
        vec(arb_instruction(), 0..4),
        arb_flags(),
    )
        .prop_map(
            |(
                command,
                (
                    table_id,
                    priority,
                    cookie,
                    cookie_mask,
                    idle_timeout,
                    hard_timeout,
                    out_port,
                    out_group,
                ),
                matcher,
                instructions,
                flags,
            )| FlowMod {
                command,
                table_id,
                priority,
                matcher,
                instructions,
                cookie,
                cookie_mask,
                idle_timeout,
                hard_timeout,
                out_port,
                out_group,
                flags,
                matcher_as_sent: None,
                instructions_as_sent: None,
            },
        )
}

pub(crate) fn arb_group() -> impl Strategy<Value = Group> {
    (
        any::<u32>(),
        prop_oneof![
            Just(GroupType::All),
            Just(GroupType::Select),
            Just(GroupType::Indirect),
            Just(GroupType::FastFailover)
        ],
        vec(
            (any::<u16>(), any::<u32>(), any::<u32>(), arb_actions()),
            0..3,
        ),
    )
        .prop_map(|(id, kind, b)| Group {
            id,
            kind,
            buckets: b
                .into_iter()
                .map(|(weight, watch_port, watch_group, actions)| Bucket {
                    weight,
                    watch_port,
                    watch_group,
                    actions,
                    actions_as_sent: None,
                })
                .collect(),
        })
}

pub(crate) fn arb_meter() -> impl Strategy<Value = Meter> {
    (
        any::<(u32, bool, bool, bool)>(),
        vec(
            prop_oneof![
                any::<(u32, u32)>().prop_map(|(rate, burst)| MeterBand::Drop { rate, burst }),
                any::<(u32, u32, u8)>().prop_map(|(rate, burst, prec_level)| {
                    MeterBand::DscpRemark {
                        rate,
                        burst,
                        prec_level,
                    }
                }),
            ],
            0..3,
        ),
    )
        .prop_map(|((id, pktps, burst, stats), bands)| Meter {
            id,
            pktps,
            burst,
            stats,
            bands,
            kbps: !pktps,
        })
}

pub(crate) fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-zA-Z0-9 ._-]{{0,{max}}}")).expect("regex")
}

pub(crate) fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..80)
}

fn arb_role() -> impl Strategy<Value = RoleRequest> {
    (0u32..4, any::<u64>()).prop_map(|(r, generation_id)| RoleRequest {
        role: ControllerRole::from_wire(r).unwrap_or(ControllerRole::Equal),
        generation_id,
    })
}

fn arb_async() -> impl Strategy<Value = AsyncConfig> {
    any::<[u32; 6]>().prop_map(|w| AsyncConfig {
        packet_in_mask: [w[0], w[1]],
        port_status_mask: [w[2], w[3]],
        flow_removed_mask: [w[4], w[5]],
    })
}

fn arb_queue_reply() -> impl Strategy<Value = QueueGetConfigReply> {
    let prop = prop_oneof![
        any::<u16>().prop_map(QueueProp::MinRate),
        any::<u16>().prop_map(QueueProp::MaxRate),
        // Whole 8-byte words: the encoder pads the data to 8 bytes.
        (any::<u32>(), vec(any::<[u8; 8]>(), 0..4)).prop_map(|(experimenter, words)| {
            QueueProp::Experimenter {
                experimenter,
                data: words.concat(),
            }
        }),
    ];
    (
        any::<u32>(),
        vec(
            (any::<(u32, u32)>(), vec(prop, 0..3)).prop_map(|((queue_id, port), properties)| {
                PacketQueue {
                    queue_id,
                    port,
                    properties,
                }
            }),
            0..3,
        ),
    )
        .prop_map(|(port, queues)| QueueGetConfigReply { port, queues })
}

/// Any message.
pub fn arb_message() -> impl Strategy<Value = Message> {
    use Message as M;
    Union::new(vec![
        (any::<u8>(), proptest::option::of(vec(any::<u32>(), 0..3)))
            .prop_map(|(version, versions)| M::Hello(Hello { version, versions }))
            .boxed(),
        (any::<(u16, u16, u32)>(), bytes())
            .prop_map(|((kind, code, e), data)| {
                M::Error(ErrorMsg {
                    code: ErrorCode { kind, code },
                    experimenter: if kind == 0xffff { e } else { 0 },
                    data,
                })
            })
            .boxed(),
        bytes().prop_map(M::EchoRequest).boxed(),
        bytes().prop_map(M::EchoReply).boxed(),
        (any::<(u32, u32)>(), bytes())
            .prop_map(|((experimenter, exp_type), data)| {
                M::Experimenter(Experimenter {
                    experimenter,
                    exp_type,
                    data,
                })
            })
            .boxed(),
        Just(M::FeaturesRequest).boxed(),
        any::<(u64, u32, u8, u8, u32, u32)>()
            .prop_map(
                |(datapath_id, n_buffers, n_tables, auxiliary_id, capabilities, reserved)| {
                    M::FeaturesReply(FeaturesReply {
                        datapath_id,
                        n_buffers,
                        n_tables,
                        auxiliary_id,
                        capabilities,
                        reserved,
                    })
                },
            )
            .boxed(),
        Just(M::GetConfigRequest).boxed(),
        any::<(u16, u16)>()
            .prop_map(|(flags, miss_send_len)| {
                M::GetConfigReply(SwitchConfig {
                    flags,
                    miss_send_len,
                })
            })
            .boxed(),
        any::<(u16, u16)>()
            .prop_map(|(flags, miss_send_len)| {
                M::SetConfig(SwitchConfig {
                    flags,
                    miss_send_len,
                })
            })
            .boxed(),
        (
            any::<(u32, u16, u8, u64)>(),
            prop_oneof![
                Just(PacketInReason::NoMatch),
                Just(PacketInReason::Action),
                Just(PacketInReason::InvalidTtl)
            ],
            arb_match(),
            bytes(),
        )
            .prop_map(
                |((buffer_id, total_len, table_id, cookie), reason, matcher, data)| {
                    M::PacketIn(PacketIn {
                        buffer_id,
                        total_len,
                        reason,
                        table_id,
                        cookie,
                        matcher,
                        data,
                    })
                },
            )
            .boxed(),
        (
            any::<(u64, u16, u8, u32, u32, u16, u16, u64, u64)>(),
            prop_oneof![
                Just(FlowRemovedReason::IdleTimeout),
                Just(FlowRemovedReason::HardTimeout),
                Just(FlowRemovedReason::Delete),
                Just(FlowRemovedReason::GroupDelete)
            ],
            arb_match(),
        )
            .prop_map(
                |(
                    (
                        cookie,
                        priority,
                        table_id,
                        duration_sec,
                        duration_nsec,
                        idle_timeout,
                        hard_timeout,
                        packet_count,
                        byte_count,
                    ),
                    reason,
                    matcher,
                )| {
                    M::FlowRemoved(FlowRemoved {
                        cookie,
                        priority,
                        reason,
                        table_id,
                        duration_sec,
                        duration_nsec,
                        idle_timeout,
                        hard_timeout,
                        packet_count,
                        byte_count,
                        matcher,
                        matcher_as_sent: None,
                    })
                },
            )
            .boxed(),
        (
            prop_oneof![
                Just(PortReason::Add),
                Just(PortReason::Delete),
                Just(PortReason::Modify)
            ],
            arb_port_desc(),
        )
            .prop_map(|(reason, desc)| M::PortStatus(PortStatus { reason, desc }))
            .boxed(),
        (any::<(u32, u32)>(), arb_actions(), bytes())
            .prop_map(|((buffer_id, in_port), actions, data)| {
                M::PacketOut(PacketOut {
                    buffer_id,
                    in_port,
                    actions,
                    data,
                })
            })
            .boxed(),
        (arb_flow_mod(), any::<u32>())
            .prop_map(|(flow_mod, buffer_id)| {
                M::FlowMod(FlowModMsg {
                    flow_mod,
                    buffer_id,
                })
            })
            .boxed(),
        (
            prop_oneof![
                Just(GroupModCommand::Add),
                Just(GroupModCommand::Modify),
                Just(GroupModCommand::Delete)
            ],
            arb_group(),
        )
            .prop_map(|(command, group)| M::GroupMod(GroupMod { command, group }))
            .boxed(),
        (any::<(u32, [u8; 6], u32, u32, u32)>())
            .prop_map(|(port_no, hw_addr, config, mask, advertise)| {
                M::PortMod(PortMod {
                    port_no,
                    hw_addr,
                    config,
                    mask,
                    advertise,
                })
            })
            .boxed(),
        any::<(u8, u32)>()
            .prop_map(|(table_id, config)| M::TableMod(TableMod { table_id, config }))
            .boxed(),
        arb_mp_request().prop_map(M::MultipartRequest).boxed(),
        arb_mp_reply().prop_map(M::MultipartReply).boxed(),
        Just(M::BarrierRequest).boxed(),
        Just(M::BarrierReply).boxed(),
        any::<u32>()
            .prop_map(|port| M::QueueGetConfigRequest { port })
            .boxed(),
        arb_queue_reply().prop_map(M::QueueGetConfigReply).boxed(),
        arb_role().prop_map(M::RoleRequest).boxed(),
        arb_role().prop_map(M::RoleReply).boxed(),
        Just(M::GetAsyncRequest).boxed(),
        arb_async().prop_map(M::GetAsyncReply).boxed(),
        arb_async().prop_map(M::SetAsync).boxed(),
        (
            prop_oneof![
                Just(MeterModCommand::Add),
                Just(MeterModCommand::Modify),
                Just(MeterModCommand::Delete)
            ],
            arb_meter(),
            any::<bool>(),
        )
            .prop_map(|(command, mut meter, _)| {
                if command == MeterModCommand::Delete {
                    (meter.pktps, meter.burst, meter.stats, meter.kbps) =
                        (false, false, false, false);
                }
                M::MeterMod(MeterModMsg {
                    meter_mod: MeterMod { command, meter },
                })
            })
            .boxed(),
    ])
}

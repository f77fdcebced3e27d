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

use crate::messages::controller::{AsyncConfig, ControllerRole, Experimenter, RoleRequest};
use crate::messages::error_msg::ErrorMsg;
use crate::messages::hello::Hello;
use crate::messages::mods::{FlowModMsg, MeterModMsg};
use crate::messages::packet::{
    FlowRemoved, FlowRemovedReason, PacketIn, PacketOut, PortReason, PortStatus,
};
use crate::messages::queue::{PacketQueue, QueueGetConfigReply, QueueProp};
use crate::messages::switch::{FeaturesReply, PortMod, SwitchConfig, TableMod};
use crate::multipart::table_features::prop_type;
use crate::multipart::*;
use crate::oxm::{oxm_class, OXM_FIELDS};
use crate::port::PortDesc;
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
            Just(Some(0x88cc))
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
        .filter(|f| !matches!(f, Field::Parsed | Field::CvlanTci))
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
    ]
}

fn arb_actions() -> impl Strategy<Value = Vec<Action>> {
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

fn arb_flags() -> impl Strategy<Value = FlowFlags> {
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
            },
        )
}

fn arb_group() -> impl Strategy<Value = Group> {
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
                })
                .collect(),
        })
}

fn arb_meter() -> impl Strategy<Value = Meter> {
    (
        any::<(u32, bool, bool)>(),
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
        .prop_map(|((id, pktps, burst), bands)| Meter {
            id,
            pktps,
            burst,
            bands,
        })
}

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-zA-Z0-9 ._-]{{0,{max}}}")).expect("regex")
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..80)
}

fn arb_port_desc() -> impl Strategy<Value = PortDesc> {
    (any::<u32>(), any::<[u8; 6]>(), text(15), any::<[u32; 8]>()).prop_map(
        |(port_no, hw_addr, name, w)| PortDesc {
            port_no,
            hw_addr,
            name,
            config: w[0],
            state: w[1],
            curr: w[2],
            advertised: w[3],
            supported: w[4],
            peer: w[5],
            curr_speed: w[6],
            max_speed: w[7],
        },
    )
}

fn arb_flow_stats_request() -> impl Strategy<Value = FlowStatsRequest> {
    (any::<(u8, u32, u32, u64, u64)>(), arb_match()).prop_map(
        |((table_id, out_port, out_group, cookie, cookie_mask), matcher)| FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie,
            cookie_mask,
            matcher,
        },
    )
}

fn arb_table_features() -> impl Strategy<Value = TableFeatures> {
    let prop = prop_oneof![
        (
            prop_oneof![
                Just(prop_type::INSTRUCTIONS),
                Just(prop_type::INSTRUCTIONS_MISS)
            ],
            vec(0u16..0xffff, 0..5)
        )
            .prop_map(|(t, v)| TableFeatureProp {
                prop_type: t,
                value: PropValue::Instructions(v)
            }),
        (
            prop_oneof![
                Just(prop_type::NEXT_TABLES),
                Just(prop_type::NEXT_TABLES_MISS)
            ],
            vec(any::<u8>(), 0..9)
        )
            .prop_map(|(t, v)| TableFeatureProp {
                prop_type: t,
                value: PropValue::Tables(v)
            }),
        (
            prop_oneof![
                Just(prop_type::WRITE_ACTIONS),
                Just(prop_type::APPLY_ACTIONS_MISS)
            ],
            vec(0u16..0xffff, 0..5)
        )
            .prop_map(|(t, v)| TableFeatureProp {
                prop_type: t,
                value: PropValue::Actions(v)
            }),
        (
            prop_oneof![
                Just(prop_type::MATCH),
                Just(prop_type::WILDCARDS),
                Just(prop_type::APPLY_SETFIELD)
            ],
            vec(0u32..0xffff_0000, 0..5)
        )
            .prop_map(|(t, v)| TableFeatureProp {
                prop_type: t,
                value: PropValue::Oxms(v)
            }),
        (
            prop_oneof![
                Just(prop_type::EXPERIMENTER),
                Just(prop_type::EXPERIMENTER_MISS)
            ],
            any::<(u32, u32)>(),
            vec(any::<u32>(), 0..3)
        )
            .prop_map(|(t, (experimenter, exp_type), data)| TableFeatureProp {
                prop_type: t,
                value: PropValue::Experimenter {
                    experimenter,
                    exp_type,
                    data
                }
            }),
    ];
    (any::<(u8, u64, u64, u32, u32)>(), text(31), vec(prop, 0..4)).prop_map(
        |((table_id, metadata_match, metadata_write, config, max_entries), name, properties)| {
            TableFeatures {
                table_id,
                name,
                metadata_match,
                metadata_write,
                config,
                max_entries,
                properties,
            }
        },
    )
}

fn arb_counters() -> impl Strategy<Value = Vec<Counter>> {
    vec(
        any::<(u64, u64)>().prop_map(|(packet_count, byte_count)| Counter {
            packet_count,
            byte_count,
        }),
        0..3,
    )
}

fn arb_mp_request() -> impl Strategy<Value = MultipartRequest> {
    use MultipartRequestBody as B;
    let body = Union::new(vec![
        Just(B::Desc).boxed(),
        arb_flow_stats_request().prop_map(B::Flow).boxed(),
        arb_flow_stats_request().prop_map(B::Aggregate).boxed(),
        Just(B::Table).boxed(),
        any::<u32>()
            .prop_map(|port_no| B::PortStats { port_no })
            .boxed(),
        any::<(u32, u32)>()
            .prop_map(|(port_no, queue_id)| B::Queue { port_no, queue_id })
            .boxed(),
        any::<u32>()
            .prop_map(|group_id| B::Group { group_id })
            .boxed(),
        Just(B::GroupDesc).boxed(),
        Just(B::GroupFeatures).boxed(),
        any::<u32>()
            .prop_map(|meter_id| B::Meter { meter_id })
            .boxed(),
        any::<u32>()
            .prop_map(|meter_id| B::MeterConfig { meter_id })
            .boxed(),
        Just(B::MeterFeatures).boxed(),
        vec(arb_table_features(), 0..3)
            .prop_map(B::TableFeatures)
            .boxed(),
        Just(B::PortDesc).boxed(),
    ]);
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartRequest { flags, body })
}

fn arb_flow_stats() -> impl Strategy<Value = FlowStats> {
    (
        any::<(u8, u32, u32, u16, u16, u16)>(),
        arb_flags(),
        any::<(u64, u64, u64)>(),
        arb_match(),
        vec(arb_instruction(), 0..3),
    )
        .prop_map(
            |(
                (table_id, duration_sec, duration_nsec, priority, idle_timeout, hard_timeout),
                flags,
                (cookie, packet_count, byte_count),
                matcher,
                instructions,
            )| FlowStats {
                table_id,
                duration_sec,
                duration_nsec,
                priority,
                idle_timeout,
                hard_timeout,
                flags,
                cookie,
                packet_count,
                byte_count,
                matcher,
                instructions,
            },
        )
}

fn arb_mp_reply() -> impl Strategy<Value = MultipartReply> {
    use MultipartReplyBody as B;
    let body = Union::new(vec![
        (text(40), text(40), text(40), text(31), text(40))
            .prop_map(|(mfr_desc, hw_desc, sw_desc, serial_num, dp_desc)| {
                B::Desc(Desc {
                    mfr_desc,
                    hw_desc,
                    sw_desc,
                    serial_num,
                    dp_desc,
                })
            })
            .boxed(),
        vec(arb_flow_stats(), 0..3).prop_map(B::Flow).boxed(),
        any::<(u64, u64, u32)>()
            .prop_map(|(packet_count, byte_count, flow_count)| {
                B::Aggregate(AggregateStats {
                    packet_count,
                    byte_count,
                    flow_count,
                })
            })
            .boxed(),
        vec(
            any::<(u8, u32, u64, u64)>().prop_map(
                |(table_id, active_count, lookup_count, matched_count)| TableStats {
                    table_id,
                    active_count,
                    lookup_count,
                    matched_count,
                },
            ),
            0..3,
        )
        .prop_map(B::Table)
        .boxed(),
        vec(
            (any::<u32>(), any::<[u64; 12]>(), any::<(u32, u32)>()).prop_map(
                |(port_no, c, (duration_sec, duration_nsec))| PortStats {
                    port_no,
                    rx_packets: c[0],
                    tx_packets: c[1],
                    rx_bytes: c[2],
                    tx_bytes: c[3],
                    rx_dropped: c[4],
                    tx_dropped: c[5],
                    rx_errors: c[6],
                    tx_errors: c[7],
                    rx_frame_err: c[8],
                    rx_over_err: c[9],
                    rx_crc_err: c[10],
                    collisions: c[11],
                    duration_sec,
                    duration_nsec,
                },
            ),
            0..3,
        )
        .prop_map(B::PortStats)
        .boxed(),
        vec(
            any::<(u32, u32, u64, u64, u64, u32, u32)>().prop_map(
                |(
                    port_no,
                    queue_id,
                    tx_bytes,
                    tx_packets,
                    tx_errors,
                    duration_sec,
                    duration_nsec,
                )| QueueStats {
                    port_no,
                    queue_id,
                    tx_bytes,
                    tx_packets,
                    tx_errors,
                    duration_sec,
                    duration_nsec,
                },
            ),
            0..3,
        )
        .prop_map(B::Queue)
        .boxed(),
        vec(
            (any::<(u32, u32, u64, u64, u32, u32)>(), arb_counters()).prop_map(
                |(
                    (group_id, ref_count, packet_count, byte_count, duration_sec, duration_nsec),
                    bucket_stats,
                )| GroupStats {
                    group_id,
                    ref_count,
                    packet_count,
                    byte_count,
                    duration_sec,
                    duration_nsec,
                    bucket_stats,
                },
            ),
            0..3,
        )
        .prop_map(B::Group)
        .boxed(),
        vec(arb_group(), 0..3).prop_map(B::GroupDesc).boxed(),
        any::<(u32, u32, [u32; 4], [u32; 4])>()
            .prop_map(|(types, capabilities, max_groups, actions)| {
                B::GroupFeatures(GroupFeatures {
                    types,
                    capabilities,
                    max_groups,
                    actions,
                })
            })
            .boxed(),
        vec(
            (any::<(u32, u32, u64, u64, u32, u32)>(), arb_counters()).prop_map(
                |(
                    (
                        meter_id,
                        flow_count,
                        packet_in_count,
                        byte_in_count,
                        duration_sec,
                        duration_nsec,
                    ),
                    band_stats,
                )| MeterStats {
                    meter_id,
                    flow_count,
                    packet_in_count,
                    byte_in_count,
                    duration_sec,
                    duration_nsec,
                    band_stats,
                },
            ),
            0..3,
        )
        .prop_map(B::Meter)
        .boxed(),
        vec(
            (arb_meter(), any::<bool>()).prop_map(|(meter, stats)| MeterConfig { meter, stats }),
            0..3,
        )
        .prop_map(B::MeterConfig)
        .boxed(),
        any::<(u32, u32, u32, u8, u8)>()
            .prop_map(
                |(max_meter, band_types, capabilities, max_bands, max_color)| {
                    B::MeterFeatures(MeterFeatures {
                        max_meter,
                        band_types,
                        capabilities,
                        max_bands,
                        max_color,
                    })
                },
            )
            .boxed(),
        vec(arb_table_features(), 0..3)
            .prop_map(B::TableFeatures)
            .boxed(),
        vec(arb_port_desc(), 0..3).prop_map(B::PortDesc).boxed(),
    ]);
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartReply { flags, body })
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
        (any::<u32>(), bytes())
            .prop_map(|(experimenter, data)| QueueProp::Experimenter { experimenter, data }),
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
            .prop_map(|(command, mut meter, mut stats)| {
                if command == MeterModCommand::Delete {
                    (meter.pktps, meter.burst, stats) = (false, false, false);
                }
                M::MeterMod(MeterModMsg {
                    meter_mod: MeterMod { command, meter },
                    stats,
                })
            })
            .boxed(),
    ])
}

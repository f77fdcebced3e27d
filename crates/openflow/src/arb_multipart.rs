//! Test support: proptest strategies for multipart bodies and port descriptions (the rest is
//! in `arb.rs`).

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::Union;

use crate::arb::{arb_flags, arb_group, arb_instruction, arb_match, arb_meter, text};
use crate::multipart::table_features::prop_type;
use crate::multipart::*;
use crate::port::PortDesc;

pub(crate) fn arb_port_desc() -> impl Strategy<Value = PortDesc> {
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

/// Properties of one of `types`, each with a value from `value` wrapped by `wrap`.
fn arb_props<V>(
    types: &'static [u16],
    value: V,
    wrap: fn(V::Value) -> PropValue,
) -> BoxedStrategy<TableFeatureProp>
where
    V: Strategy + 'static,
{
    (proptest::sample::select(types), value)
        .prop_map(move |(prop_type, v)| TableFeatureProp {
            prop_type,
            value: wrap(v),
        })
        .boxed()
}

fn arb_table_features() -> impl Strategy<Value = TableFeatures> {
    use prop_type::*;
    let prop = Union::new(vec![
        arb_props(
            &[INSTRUCTIONS, INSTRUCTIONS_MISS],
            vec(0u16..0xffff, 0..5),
            PropValue::Instructions,
        ),
        arb_props(
            &[NEXT_TABLES, NEXT_TABLES_MISS],
            vec(any::<u8>(), 0..9),
            PropValue::Tables,
        ),
        arb_props(
            &[WRITE_ACTIONS, APPLY_ACTIONS_MISS],
            vec(0u16..0xffff, 0..5),
            PropValue::Actions,
        ),
        arb_props(
            &[MATCH, WILDCARDS, APPLY_SETFIELD],
            vec(0u32..0xffff_0000, 0..5),
            PropValue::Oxms,
        ),
        arb_props(
            &[EXPERIMENTER, EXPERIMENTER_MISS],
            (any::<(u32, u32)>(), vec(any::<u32>(), 0..3)),
            |((experimenter, exp_type), data)| PropValue::Experimenter {
                experimenter,
                exp_type,
                data,
            },
        ),
    ]);
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

pub(crate) fn arb_mp_request() -> impl Strategy<Value = MultipartRequest> {
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
                matcher_as_sent: None,
                instructions_as_sent: None,
            },
        )
}

pub(crate) fn arb_mp_reply() -> impl Strategy<Value = MultipartReply> {
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
        vec(arb_meter().prop_map(|meter| MeterConfig { meter }), 0..3)
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

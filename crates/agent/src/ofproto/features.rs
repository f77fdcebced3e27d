//! What the switch says about itself: its description, its ports, and what its tables,
//! groups and meters support.

use openflow::messages::mods::meter_flags;
use openflow::multipart::table_features::prop_type as pt;
use openflow::multipart::{
    Desc, GroupFeatures, MeterFeatures, PortStats, PropValue, TableFeatureProp, TableFeatures,
};
use openflow::oxm::{oxm_class, OXM_FIELDS};
use openflow::port::{port_config, port_features, port_state};
use openflow::{ErrorCode, PortDesc};
use pipeline::model::{GROUP_MAX, MAX_TABLE, METER_MAX};

use super::PortState;

/// The switch description (`ofp_desc`).
pub(super) fn desc(bridge: &str, datapath_id: u64) -> Desc {
    Desc {
        mfr_desc: "Hayate project".into(),
        hw_desc: "Hayate userspace switch".into(),
        sw_desc: concat!("hayate ", env!("CARGO_PKG_VERSION")).into(),
        serial_num: format!("{datapath_id:016x}"),
        dp_desc: bridge.into(),
    }
}

/// One port's `ofp_port`. Backends report no speed; 10 Gb/s copper is what is claimed.
pub(super) fn port_desc(p: &PortState) -> PortDesc {
    let down = p.config & port_config::PORT_DOWN != 0;
    PortDesc {
        port_no: p.port.no,
        hw_addr: p.port.hw_addr,
        name: p.port.name.chars().take(15).collect(),
        config: p.config,
        state: if down || !p.link {
            port_state::LINK_DOWN
        } else {
            port_state::LIVE
        },
        curr: port_features::RATE_10GB_FD | port_features::COPPER,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 10_000_000,
        max_speed: 10_000_000,
    }
}

/// One port's `ofp_port_stats`: its own counters with `drops`, the switch's drops of its
/// packets, folded in ([`super::counters`]).
pub(super) fn port_stats(p: &PortState, drops: &datapath::Snapshot) -> PortStats {
    let s = super::counters::merged(p.port.port.stats(), drops);
    let up = p.since.elapsed();
    PortStats {
        port_no: p.port.no,
        rx_packets: s.rx_packets,
        tx_packets: s.tx_packets,
        rx_bytes: s.rx_bytes,
        tx_bytes: s.tx_bytes,
        rx_dropped: s.rx_dropped,
        tx_dropped: s.tx_dropped,
        rx_errors: s.rx_errors,
        tx_errors: s.tx_errors,
        rx_frame_err: 0,
        rx_over_err: 0,
        rx_crc_err: 0,
        collisions: 0,
        duration_sec: up.as_secs() as u32,
        duration_nsec: up.subsec_nanos(),
    }
}

/// Action types (`ofp_action_type`) the pipeline executes.
const ACTIONS: &[u16] = &[
    0,  // OUTPUT
    17, // PUSH_VLAN
    18, // POP_VLAN
    21, // SET_QUEUE
    22, // GROUP
    23, // SET_NW_TTL
    24, // DEC_NW_TTL
    25, // SET_FIELD
];

/// Instruction types: GOTO_TABLE 1, WRITE_METADATA 2, WRITE_ACTIONS 3, APPLY_ACTIONS 4,
/// CLEAR_ACTIONS 5, METER 6.
const INSTRUCTIONS: &[u16] = &[1, 2, 3, 4, 5, 6];

fn prop(t: u16, v: PropValue) -> Option<TableFeatureProp> {
    TableFeatureProp::new(t, v)
}

/// What table `id` supports: every instruction (no goto from the last table), goto to any
/// later table, every action, every OXM field the codec knows for match and wildcard, and
/// set-field of every field.
pub(super) fn table_features(id: u8, capacity: usize) -> TableFeatures {
    let oxms: Vec<u32> = OXM_FIELDS
        .iter()
        .filter(|d| d.class != oxm_class::EXPERIMENTER)
        .map(|d| d.header())
        .collect();
    let instructions: Vec<u16> = INSTRUCTIONS
        .iter()
        .copied()
        .filter(|&i| i != 1 || id < MAX_TABLE)
        .collect();
    let next: Vec<u8> = (id.saturating_add(1)..=MAX_TABLE)
        .filter(|&t| t > id)
        .collect();
    let actions = ACTIONS.to_vec();
    let props = [
        prop(
            pt::INSTRUCTIONS,
            PropValue::Instructions(instructions.clone()),
        ),
        prop(pt::INSTRUCTIONS_MISS, PropValue::Instructions(instructions)),
        prop(pt::NEXT_TABLES, PropValue::Tables(next.clone())),
        prop(pt::NEXT_TABLES_MISS, PropValue::Tables(next)),
        prop(pt::WRITE_ACTIONS, PropValue::Actions(actions.clone())),
        prop(pt::WRITE_ACTIONS_MISS, PropValue::Actions(actions.clone())),
        prop(pt::APPLY_ACTIONS, PropValue::Actions(actions.clone())),
        prop(pt::APPLY_ACTIONS_MISS, PropValue::Actions(actions)),
        prop(pt::MATCH, PropValue::Oxms(oxms.clone())),
        prop(pt::WILDCARDS, PropValue::Oxms(oxms.clone())),
        prop(pt::WRITE_SETFIELD, PropValue::Oxms(oxms.clone())),
        prop(pt::WRITE_SETFIELD_MISS, PropValue::Oxms(oxms.clone())),
        prop(pt::APPLY_SETFIELD, PropValue::Oxms(oxms.clone())),
        prop(pt::APPLY_SETFIELD_MISS, PropValue::Oxms(oxms)),
    ];
    TableFeatures {
        table_id: id,
        name: format!("table{id}"),
        metadata_match: u64::MAX,
        metadata_write: u64::MAX,
        config: 0,
        max_entries: capacity.min(u32::MAX as usize) as u32,
        properties: props.into_iter().flatten().collect(),
    }
}

/// Group features: all four types, weights, liveness, chaining with loop checks.
pub(super) fn group_features() -> GroupFeatures {
    let actions = ACTIONS.iter().fold(0u32, |a, t| a | (1 << t));
    GroupFeatures {
        types: 0b1111,
        capabilities: 1 | 2 | 4 | 8,
        max_groups: [GROUP_MAX; 4],
        actions: [actions; 4],
    }
}

/// Meter features: drop and DSCP-remark bands, kbps/pktps/burst/stats.
pub(super) fn meter_features() -> MeterFeatures {
    MeterFeatures {
        max_meter: METER_MAX,
        band_types: (1 << 1) | (1 << 2),
        capabilities: u32::from(
            meter_flags::KBPS | meter_flags::PKTPS | meter_flags::BURST | meter_flags::STATS,
        ),
        max_bands: 8,
        max_color: 0,
    }
}

/// An OXM header without its mask bit and length: the field a table-features property names
/// (a request may set `oxm_hasmask` to say the field is matched with a mask).
fn oxm_field(header: u32) -> u32 {
    header & 0xffff_fe00
}

/// Whether every item of `want` is in `have`.
fn subset<T: PartialEq>(want: &[T], have: &[T]) -> bool {
    want.iter().all(|w| have.contains(w))
}

/// Checks a table-features set request (a pipeline a controller asks for, e.g. Faucet's
/// `GenericTFM` hardware) against what Hayate's tables support. Every table is general (all
/// instructions, actions and fields; goto any later table), so a request is accepted when it
/// asks each table for a subset of that and no more entries than `capacity`; the tables keep
/// their full abilities (a superset of what was asked), and tables absent from the request
/// stay available. Errors: a table id above [`MAX_TABLE`] or listed twice
/// (`OFPTFFC_BAD_TABLE`), an experimenter property (`OFPTFFC_BAD_TYPE`), anything the table
/// cannot do (`OFPTFFC_BAD_ARGUMENT`).
pub(super) fn check_table_config(
    set: &[TableFeatures],
    capacity: usize,
) -> Result<(), (ErrorCode, String)> {
    let mut seen = [false; 256];
    for t in set {
        let id = t.table_id;
        if id > MAX_TABLE || std::mem::replace(&mut seen[usize::from(id)], true) {
            return Err((
                ErrorCode::TFFC_BAD_TABLE,
                format!("table {id} is above {MAX_TABLE} or listed twice"),
            ));
        }
        if t.max_entries as usize > capacity {
            return Err((
                ErrorCode::TFFC_BAD_ARGUMENT,
                format!(
                    "table {id}: {} entries asked, {capacity} is the capacity",
                    t.max_entries
                ),
            ));
        }
        let ours = table_features(id, capacity);
        for p in &t.properties {
            let have = ours.properties.iter().find(|o| o.prop_type == p.prop_type);
            let ok = match (&p.value, have.map(|o| &o.value)) {
                (PropValue::Instructions(w), Some(PropValue::Instructions(h))) => subset(w, h),
                (PropValue::Tables(w), Some(PropValue::Tables(h))) => subset(w, h),
                (PropValue::Actions(w), Some(PropValue::Actions(h))) => subset(w, h),
                (PropValue::Oxms(w), Some(PropValue::Oxms(h))) => {
                    let h: Vec<u32> = h.iter().map(|&x| oxm_field(x)).collect();
                    w.iter().all(|&x| h.contains(&oxm_field(x)))
                }
                (PropValue::Experimenter { .. }, _) => {
                    return Err((
                        ErrorCode::TFFC_BAD_TYPE,
                        format!("table {id}: experimenter property {}", p.prop_type),
                    ));
                }
                _ => false,
            };
            if !ok {
                return Err((
                    ErrorCode::TFFC_BAD_ARGUMENT,
                    format!(
                        "table {id}: property {} asks for more than the table supports: {:?}",
                        p.prop_type, p.value
                    ),
                ));
            }
        }
    }
    Ok(())
}

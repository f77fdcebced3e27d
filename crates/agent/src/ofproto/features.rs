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
use std::collections::HashMap;

use packet::Field;
use pipeline::model::{
    Action, FlowMod, FlowModCommand, Instruction, Match, GROUP_MAX, MAX_TABLE, METER_MAX,
};

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

/// Action types (`ofp_action_type`) the pipeline executes: every one the codec decodes.
const ACTIONS: &[u16] = openflow::action::SUPPORTED_ACTIONS;

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

/// The key field an OXM header (of any class) stands for, with the VLAN fields as one (a
/// match on `vlan_vid` and `vlan_pcp` may be written as `NXM_OF_VLAN_TCI`).
fn oxm_key(header: u32) -> Option<Field> {
    let (class, field) = ((header >> 16) as u16, ((header >> 9) & 0x7f) as u8);
    OXM_FIELDS
        .iter()
        .find(|d| d.class == class && d.field == field)
        .map(|d| family(d.key))
}

fn family(f: Field) -> Field {
    match f {
        Field::VlanVid | Field::VlanPcp => Field::VlanTci,
        f => f,
    }
}

/// A property of a configured table; the table-miss variant for a table-miss flow when the
/// request gave one.
fn layout_prop(t: &TableFeatures, kind: u16, miss: bool) -> Option<&PropValue> {
    let find = |k: u16| {
        t.properties
            .iter()
            .find(|p| p.prop_type == k)
            .map(|p| &p.value)
    };
    let has_miss = !matches!(kind, pt::MATCH | pt::WILDCARDS);
    miss.then(|| find(kind + 1))
        .flatten()
        .filter(|_| has_miss)
        .or_else(|| find(kind))
}

/// Checks an add or modify of a flow into a table a table-features set request configured
/// (`layout`) against what the request declared for it, so a configured layout is enforced,
/// not only reported: every matched field in its MATCH property (OFPBMC_BAD_FIELD), every
/// instruction in INSTRUCTIONS (OFPBIC_UNSUP_INST), a goto to one of NEXT_TABLES
/// (OFPBIC_BAD_TABLE_ID), every action in APPLY_ACTIONS / WRITE_ACTIONS (OFPBAC_BAD_TYPE) and
/// every set-field in APPLY_SETFIELD / WRITE_SETFIELD (OFPBAC_BAD_SET_TYPE). A table-miss
/// flow (priority 0, empty match) is held to the `_MISS` properties where given. A property
/// the request left out does not restrict; `max_entries` is checked against the capacity when
/// the request is made (the table's own bound stays what it is).
pub(super) fn check_layout(
    layout: &HashMap<u8, TableFeatures>,
    fm: &FlowMod,
) -> Result<(), (ErrorCode, String)> {
    use FlowModCommand::*;
    let Some(t) = layout.get(&fm.table_id) else {
        return Ok(());
    };
    if !matches!(fm.command, Add | Modify | ModifyStrict) {
        return Ok(());
    }
    let id = t.table_id;
    let miss = fm.priority == 0 && fm.matcher == Match::ANY;
    let prop = |kind| layout_prop(t, kind, miss);
    if let Some(PropValue::Oxms(list)) = prop(pt::MATCH) {
        let allowed: Vec<Field> = list.iter().filter_map(|&h| oxm_key(h)).collect();
        let mut wire = Vec::new();
        // A match that cannot be written in OXM was refused by the codec already.
        let _ = openflow::oxm::encode_oxm_fields(&fm.matcher, &mut wire);
        let mut i = 0;
        while i + 4 <= wire.len() {
            let h = u32::from_be_bytes([wire[i], wire[i + 1], wire[i + 2], wire[i + 3]]);
            if let Some(k) = oxm_key(h).filter(|k| !allowed.contains(k)) {
                return Err((
                    ErrorCode::BMC_BAD_FIELD,
                    format!("table {id} was configured without a match on {}", k.name()),
                ));
            }
            i += 4 + (h & 0xff) as usize;
        }
    }
    for ins in &fm.instructions {
        let (kind, actions, setfield) = match ins {
            Instruction::GotoTable(to) => {
                if let Some(PropValue::Tables(next)) = prop(pt::NEXT_TABLES) {
                    if !next.contains(to) {
                        return Err((
                            ErrorCode::BIC_BAD_TABLE_ID,
                            format!("table {id} was configured without goto_table:{to}"),
                        ));
                    }
                }
                (1, None, None)
            }
            Instruction::WriteMetadata { .. } => (2, None, None),
            Instruction::WriteActions(a) => {
                (3, Some((a, pt::WRITE_ACTIONS)), Some(pt::WRITE_SETFIELD))
            }
            Instruction::ApplyActions(a) => {
                (4, Some((a, pt::APPLY_ACTIONS)), Some(pt::APPLY_SETFIELD))
            }
            Instruction::ClearActions => (5, None, None),
            Instruction::Meter(_) => (6, None, None),
        };
        if let Some(PropValue::Instructions(list)) = prop(pt::INSTRUCTIONS) {
            if !list.contains(&kind) {
                return Err((
                    ErrorCode::BIC_UNSUP_INST,
                    format!("table {id} was configured without instruction type {kind}"),
                ));
            }
        }
        if let (Some((actions, kinds)), Some(fields)) = (actions, setfield) {
            check_actions(id, actions, prop(kinds), prop(fields))?;
        }
    }
    Ok(())
}

fn check_actions(
    id: u8,
    actions: &[Action],
    kinds: Option<&PropValue>,
    fields: Option<&PropValue>,
) -> Result<(), (ErrorCode, String)> {
    for a in actions {
        let kind = openflow::action::action_type(a);
        if let Some(PropValue::Actions(list)) = kinds {
            if !list.contains(&kind) {
                return Err((
                    ErrorCode::BAC_BAD_TYPE,
                    format!("table {id} was configured without action type {kind}"),
                ));
            }
        }
        if let (Action::SetField { field, .. }, Some(PropValue::Oxms(list))) = (a, fields) {
            if !list.iter().any(|&h| oxm_key(h) == Some(family(*field))) {
                return Err((
                    ErrorCode::BAC_BAD_SET_TYPE,
                    format!(
                        "table {id} was configured without set_field of {}",
                        field.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    fn table(props: Vec<TableFeatureProp>) -> HashMap<u8, TableFeatures> {
        let mut t = table_features(1, 100);
        t.properties = props;
        HashMap::from([(1, t)])
    }

    fn p(kind: u16, v: PropValue) -> TableFeatureProp {
        TableFeatureProp::new(kind, v).unwrap()
    }

    fn fm(m: Match, ins: Vec<Instruction>) -> FlowMod {
        FlowMod::add(1, 10, m, ins)
    }

    fn out(port: u32) -> Action {
        Action::Output { port, max_len: 0 }
    }

    #[test]
    fn a_configured_table_takes_only_what_it_declared() {
        let eth_dst_masked = 0x8000_0700 | 0x100 | 12;
        let vlan_vid = 0x8000_0c02;
        let layout = table(vec![
            p(pt::MATCH, PropValue::Oxms(vec![eth_dst_masked, vlan_vid])),
            p(pt::INSTRUCTIONS, PropValue::Instructions(vec![1, 4])),
            p(pt::NEXT_TABLES, PropValue::Tables(vec![2])),
            p(pt::APPLY_ACTIONS, PropValue::Actions(vec![0, 25])),
            p(pt::APPLY_SETFIELD, PropValue::Oxms(vec![vlan_vid])),
        ]);
        let code = |f: FlowMod| check_layout(&layout, &f).err().map(|e| e.0);
        let mut m = Match::ANY;
        m.set_masked(Field::EthDst, 0x0100_0000_0000, 0x0100_0000_0000);
        m.set_exact(Field::VlanVid, 0x1005);
        let ok = vec![
            Instruction::ApplyActions(vec![
                Action::SetField {
                    field: Field::VlanVid,
                    value: 0x1007,
                },
                out(1),
            ]),
            Instruction::GotoTable(2),
        ];
        assert_eq!(code(fm(m, ok.clone())), None);
        // Other tables, and deletes, are not held to it.
        let mut other = fm(m, vec![Instruction::WriteActions(vec![])]);
        other.table_id = 3;
        assert_eq!(check_layout(&layout, &other), Ok(()));
        let mut del = fm(m, vec![Instruction::ClearActions]);
        del.command = FlowModCommand::Delete;
        assert_eq!(check_layout(&layout, &del), Ok(()));
        // A field it did not declare.
        let mut m2 = m;
        m2.set_exact(Field::EthType, 0x0800);
        assert_eq!(code(fm(m2, ok.clone())), Some(ErrorCode::BMC_BAD_FIELD));
        // An instruction, a goto, an action, a set-field it did not declare.
        assert_eq!(
            code(fm(m, vec![Instruction::ClearActions])),
            Some(ErrorCode::BIC_UNSUP_INST)
        );
        assert_eq!(
            code(fm(m, vec![Instruction::GotoTable(3)])),
            Some(ErrorCode::BIC_BAD_TABLE_ID)
        );
        assert_eq!(
            code(fm(
                m,
                vec![Instruction::ApplyActions(vec![Action::PopVlan])]
            )),
            Some(ErrorCode::BAC_BAD_TYPE)
        );
        let set_src = Action::SetField {
            field: Field::EthSrc,
            value: 1,
        };
        assert_eq!(
            code(fm(m, vec![Instruction::ApplyActions(vec![set_src])])),
            Some(ErrorCode::BAC_BAD_SET_TYPE)
        );
    }

    #[test]
    fn a_table_miss_flow_is_held_to_the_miss_properties() {
        let layout = table(vec![
            p(pt::INSTRUCTIONS, PropValue::Instructions(vec![4])),
            p(pt::INSTRUCTIONS_MISS, PropValue::Instructions(vec![1])),
            p(pt::NEXT_TABLES_MISS, PropValue::Tables(vec![5])),
        ]);
        let mut miss = fm(Match::ANY, vec![Instruction::GotoTable(5)]);
        miss.priority = 0;
        assert_eq!(check_layout(&layout, &miss), Ok(()));
        let apply = fm(Match::ANY, vec![Instruction::ApplyActions(vec![out(1)])]);
        assert_eq!(check_layout(&layout, &apply), Ok(()));
        miss.instructions = apply.instructions.clone();
        assert_eq!(
            check_layout(&layout, &miss).unwrap_err().0,
            ErrorCode::BIC_UNSUP_INST
        );
    }
}

//! Tracing a packet through the tables, as Open vSwitch's `ofproto/trace`
//! (`hayate ctl BRIDGE trace FLOW`): the tables it visits, the flow entry that decides in
//! each, the datapath actions that result and the megaflow mask.
//!
//! The walk is translation's own ([`Pipeline::translate_observed`]), not a copy: translation
//! tells an [`Observer`] each lookup. The fast path passes [`NoObserver`], whose methods are
//! empty and whose [`Observer::TRACE`] is false, so the calls compile away; a [`Recorder`]
//! keeps what it is told and turns translation's side effects off (table lookup counters,
//! MAC learning), so a trace changes nothing in the switch.
//!
//! The packet is given as ovs-ofctl match text ([`key_from_flow`], e.g.
//! `in_port=1,udp,nw_src=10.0.0.1,tp_dst=53`: the fields not named are 0) or as the frame's
//! bytes ([`key_from_frame`], extracted as the datapath extracts them).

use std::fmt::Write as _;
use std::sync::Arc;

use packet::key::parsed;
use packet::{Field, FlowKey};

use crate::dpaction::{DpAction, PacketInReason, Translation};
use crate::flow::FlowEntry;
use crate::model::{Action, FlowModCommand, Match};
use crate::ofctl;
use crate::pipeline::Pipeline;

/// What translation tells about its walk. Every method has an empty default.
pub trait Observer {
    /// Whether this is a trace: translation then leaves table counters and the MAC table
    /// alone.
    const TRACE: bool = false;

    /// Table `table` was looked up with `key` (as rewritten by earlier actions); `entry` is
    /// the flow entry that decided (`None`: no match, or no such table), `actions` the number
    /// of datapath actions emitted before it.
    #[inline(always)]
    fn lookup(
        &mut self,
        _table: u8,
        _key: &FlowKey,
        _entry: Option<&Arc<FlowEntry>>,
        _actions: usize,
    ) {
    }

    /// The walk is over; `key` is the packet as its actions left it.
    #[inline(always)]
    fn finish(&mut self, _key: &FlowKey) {}
}

/// The fast path's observer: sees nothing, costs nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// One table a traced packet visited.
#[derive(Debug, Clone)]
pub struct Step {
    /// The table.
    pub table: u8,
    /// The key the table was looked up with.
    pub key: FlowKey,
    /// The flow entry that decided (`None`: no entry matched).
    pub entry: Option<Arc<FlowEntry>>,
    /// Index of the first datapath action this table's entry emitted (its actions run to
    /// the next step's `first_action`, the last step's to the end).
    pub first_action: usize,
}

/// An observer that records the walk.
#[derive(Debug, Default)]
pub struct Recorder {
    /// The tables visited, in order.
    pub steps: Vec<Step>,
    /// The packet as its actions left it.
    pub last: FlowKey,
}

impl Observer for Recorder {
    const TRACE: bool = true;

    fn lookup(&mut self, table: u8, key: &FlowKey, entry: Option<&Arc<FlowEntry>>, actions: usize) {
        self.steps.push(Step {
            table,
            key: *key,
            entry: entry.cloned(),
            first_action: actions,
        });
    }

    fn finish(&mut self, key: &FlowKey) {
        self.last = *key;
    }
}

/// A finished trace: the packet, each table's step, the translation.
#[derive(Debug)]
pub struct Trace {
    /// The packet's key as given.
    pub key: FlowKey,
    /// The tables visited.
    pub steps: Vec<Step>,
    /// The packet as its actions left it (action-set and group changes a bucket undid
    /// aside).
    pub last: FlowKey,
    /// The translation (datapath actions, megaflow mask, cacheable).
    pub translation: Translation,
}

impl Pipeline {
    /// Traces `key` through the tables without changing anything (module docs).
    pub fn trace(&self, key: &FlowKey) -> Trace {
        let mut rec = Recorder::default();
        let mut translation = Translation::default();
        self.translate_observed(key, &mut translation, &mut rec);
        Trace {
            key: *key,
            steps: rec.steps,
            last: rec.last,
            translation,
        }
    }
}

/// The key of a packet described in ovs-ofctl match syntax (`in_port=1,udp,nw_src=10.0.0.1`):
/// the named fields' values (masked values as given), every other field 0, and the
/// `parsed` bits extraction would set for such a packet.
pub fn key_from_flow(text: &str) -> Result<FlowKey, String> {
    let fm = ofctl::parse_flow_match(text, FlowModCommand::Delete).map_err(|e| e.to_string())?;
    let mut key = fm.matcher.value;
    let mut bits = parsed::ETH;
    if key.get(Field::VlanTci) & 0x1000 != 0 {
        bits |= parsed::VLAN;
    }
    let eth = key.get(Field::EthType);
    if matches!(eth, 0x0800 | 0x86dd | 0x0806) {
        bits |= parsed::L3;
        if matches!(key.get(Field::IpProto), 1 | 6 | 17 | 58 | 132) && eth != 0x0806 {
            bits |= parsed::L4;
        }
    }
    if fm.matcher.mask.get(Field::Parsed) == 0 {
        key.set(Field::Parsed, u128::from(bits));
    }
    Ok(key)
}

/// The key of a frame given as hex digits (spaces, colons and a `0x` prefix allowed),
/// received on `in_port`.
pub fn key_from_frame(hex: &str, in_port: u32) -> Result<FlowKey, String> {
    let digits: String = hex
        .trim()
        .trim_start_matches("0x")
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ':')
        .collect();
    if !digits.len().is_multiple_of(2) || digits.is_empty() {
        return Err(format!(
            "{} hex digits do not make whole bytes of a frame",
            digits.len()
        ));
    }
    let bytes = (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| format!("{hex:?} is not hex"))?;
    let mut key = FlowKey::ZERO;
    packet::extract::extract(&bytes, in_port, &mut key);
    Ok(key)
}

/// The datapath actions as text, in Open vSwitch's `Datapath actions:` style: ports by number,
/// `drop` when there are none.
pub fn format_dp_actions(actions: &[DpAction]) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    let v: Vec<String> = actions.iter().map(format_dp_action).collect();
    v.join(",")
}

/// One datapath action as text.
pub fn format_dp_action(a: &DpAction) -> String {
    match *a {
        DpAction::Output(p) => p.to_string(),
        DpAction::SetField { field, value } => {
            ofctl::format_action(&Action::SetField { field, value })
        }
        DpAction::PushVlan { tpid, tci } => format!("push_vlan(tpid=0x{tpid:04x},tci=0x{tci:04x})"),
        DpAction::PopVlan => "pop_vlan".into(),
        DpAction::DecTtl => "dec_ttl".into(),
        DpAction::PushMpls { ethertype, lse } => {
            format!("push_mpls(eth_type=0x{ethertype:04x},lse=0x{lse:08x})")
        }
        DpAction::PopMpls(t) => format!("pop_mpls(eth_type=0x{t:04x})"),
        DpAction::DecMplsTtl => "dec_mpls_ttl".into(),
        DpAction::CopyTtlOut => "copy_ttl_out".into(),
        DpAction::CopyTtlIn => "copy_ttl_in".into(),
        DpAction::SetQueue(q) => format!("set_queue({q})"),
        DpAction::Meter(m) => format!("meter({m})"),
        DpAction::Controller {
            reason,
            max_len,
            table_id,
            cookie,
        } => {
            let r = match reason {
                PacketInReason::NoMatch => "no_match",
                PacketInReason::Action => "action",
                PacketInReason::InvalidTtl => "invalid_ttl",
            };
            format!("controller(reason={r},max_len={max_len},table={table_id},cookie=0x{cookie:x})")
        }
    }
}

/// A key or mask pair as ovs-ofctl match text (`in_port=1,dl_type=0x0800,nw_src=10.0.0.0/8`);
/// `*` for the match of everything.
pub fn format_key(value: &FlowKey, mask: &FlowKey) -> String {
    let text = ofctl::format_match(&Match {
        value: value.masked(mask),
        mask: *mask,
    });
    if text.is_empty() {
        "*".into()
    } else {
        text
    }
}

/// Every field the key sets, as match text (the packet a trace follows; the `parsed` bits
/// extraction keeps left out).
pub fn format_packet(key: &FlowKey) -> String {
    let mut mask = FlowKey::ZERO;
    for f in Field::ALL {
        if *f != Field::Parsed && key.get(*f) != 0 {
            mask.set(*f, f.max_value());
        }
    }
    format_key(key, &mask)
}

impl Trace {
    /// The trace as an operator reads it, in the shape of `ovs-appctl ofproto/trace`.
    pub fn to_text(&self, bridge: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Flow: {}\n", format_packet(&self.key));
        let _ = writeln!(s, "bridge(\"{bridge}\")");
        let _ = writeln!(s, "{}", "-".repeat(bridge.len() + 10));
        let acts = &self.translation.actions;
        for (i, st) in self.steps.iter().enumerate() {
            let end = self.steps.get(i + 1).map_or(acts.len(), |n| n.first_action);
            match &st.entry {
                Some(e) => {
                    let m = format_key(&e.matcher.value, &e.matcher.mask);
                    let _ = writeln!(
                        s,
                        " {}. priority={},{} cookie=0x{:x}",
                        st.table, e.priority, m, e.cookie
                    );
                    let _ = writeln!(s, "    actions: {}", ofctl::format_actions(&e.instructions));
                    let mine = acts.get(st.first_action..end).unwrap_or(&[]);
                    let _ = writeln!(
                        s,
                        "    datapath actions from it: {}",
                        if mine.is_empty() {
                            "none".to_string()
                        } else {
                            format_dp_actions(mine)
                        }
                    );
                }
                None => {
                    let _ = writeln!(s, " {}. No match.", st.table);
                    let _ = writeln!(s, "    drop");
                }
            }
        }
        let _ = writeln!(s);
        if self.last == self.key {
            let _ = writeln!(s, "Final flow: unchanged");
        } else {
            let _ = writeln!(s, "Final flow: {}", format_packet(&self.last));
        }
        let t = &self.translation;
        let _ = writeln!(s, "Megaflow: {}", format_key(&self.key, &t.mask));
        let _ = writeln!(s, "Datapath actions: {}", format_dp_actions(&t.actions));
        if !t.cacheable {
            let _ = writeln!(s, "(not cacheable: each such packet is translated)");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Control;
    use crate::PipelineConfig;

    fn control(flows: &[&str]) -> Control {
        let (mut c, _cell) = Control::new(PipelineConfig::default());
        for f in flows {
            c.apply(&[ofctl::parse_flow(f).unwrap()]).unwrap();
        }
        c.publish();
        c
    }

    #[test]
    fn a_trace_names_each_table_and_the_entry_that_decided() {
        let c = control(&[
            "table=0,priority=100,udp,nw_src=10.0.0.1,actions=goto_table:1",
            "table=0,priority=1,actions=drop",
            "table=1,priority=50,cookie=0x7,in_port=1,actions=output:2",
        ]);
        let p = c.published();
        let key = key_from_flow("in_port=1,udp,nw_src=10.0.0.1,tp_dst=53").unwrap();
        let t = p.trace(&key);
        assert_eq!(t.steps.len(), 2);
        assert_eq!(t.steps[0].entry.as_ref().unwrap().priority, 100);
        assert_eq!(t.steps[1].entry.as_ref().unwrap().cookie, 7);
        assert_eq!(t.translation.actions, vec![DpAction::Output(2)]);
        let text = t.to_text("br0");
        assert!(
            text.contains(" 0. priority=100,udp,nw_src=10.0.0.1 cookie=0x0"),
            "{text}"
        );
        assert!(
            text.contains(" 1. priority=50,in_port=1 cookie=0x7"),
            "{text}"
        );
        assert!(text.contains("Datapath actions: 2"), "{text}");
        assert!(text.contains("Megaflow: "), "{text}");
        // A trace counts no lookups (the fast path's translation does).
        let stats = c.table_stats();
        assert!(stats.iter().all(|s| s.lookups == 0), "{stats:?}");
    }

    #[test]
    fn a_trace_through_normal_learns_no_address() {
        let c = control(&["priority=0,actions=normal"]);
        let p = c.published();
        let key =
            key_from_flow("in_port=1,dl_src=00:00:00:00:00:0a,dl_dst=00:00:00:00:00:0b").unwrap();
        let t = p.trace(&key);
        assert_eq!(t.steps.len(), 1);
        assert!(p.mac_table().is_empty(), "a trace learns nothing");
        // The fast path's translation of the same packet does learn.
        p.translate(&key, &mut Translation::default());
        assert_eq!(p.mac_table().len(), 1);
    }

    #[test]
    fn a_packet_no_table_matches_says_so() {
        let c = control(&["priority=10,in_port=2,actions=output:1"]);
        let key = key_from_flow("in_port=1,tcp").unwrap();
        let t = c.published().trace(&key);
        let text = t.to_text("br0");
        assert!(text.contains(" 0. No match."), "{text}");
        assert!(text.contains("Datapath actions: drop"), "{text}");
    }

    #[test]
    fn hex_frames_are_extracted_like_received_ones() {
        let spec = packet::builder::PacketSpec::udp4(
            [0, 0, 0, 0, 0, 2],
            [0, 0, 0, 0, 0, 1],
            std::net::Ipv4Addr::new(10, 0, 0, 1),
            std::net::Ipv4Addr::new(10, 0, 0, 2),
            1000,
            53,
            64,
        );
        let hex: String = spec.build().iter().map(|b| format!("{b:02x}")).collect();
        let key = key_from_frame(&hex, 3).unwrap();
        assert_eq!(key.get(Field::InPort), 3);
        assert_eq!(key.get(Field::TpDst), 53);
        assert_eq!(key.get(Field::IpProto), 17);
        assert!(key_from_frame("abc", 1).is_err());
    }
}

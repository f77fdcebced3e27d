//! What a controller installed, given back as it wrote it.
//!
//! Decoding turns a match into the model's [`Match`] (a value and a mask per field), which
//! forgets the order of the OXM fields; encoding writes them in one order (Open vSwitch's,
//! see [`encode_oxm_fields`]). A controller that wrote another order (os-ken writes fields
//! by number; a hand-made flow-mod any order) reads back a different match in its flow
//! statistics. So decoding also records the match's [`WireForm`] when the bytes differ from
//! the canonical encoding, and encoding with a form writes the controller's bytes again:
//!
//! - a *shape* (tag 0): for each field in wire order, its index in [`OXM_FIELDS`] and
//!   whether it carried a mask — a pure function of how the match was written, not of its
//!   values, so the flows a controller writes alike share one form (the pipeline interns
//!   them: a pointer per flow);
//! - the raw field bytes (tag 1) when a shape cannot say it (a mask wider than the field's
//!   wire bits, which decoding trims): rare, and kept per flow.
//!
//! Group buckets name set-field actions without a match to tell `udp_src` from `tcp_src`
//! (one key field, `tp_src`); a bucket whose actions encode back differently keeps its
//! action bytes ([`actions_form`]). Instructions keep their order in the pipeline itself
//! (`pipeline::as_sent`); a flow's instruction bytes are kept only when even in the given
//! order they would encode otherwise (a set-field whose name the match does not decide as the
//! controller did: `tcp_dst` after an `ip_proto` rewrite under a UDP match), [`instructions_form`].
//! Meters lose nothing in decoding.

use std::sync::Arc;

use pipeline::model::{Action, Instruction, Match, WireForm};

use crate::action::encode_actions;
use crate::error::{EncodeError, ErrorCode};
use crate::instruction::encode_instructions;
use crate::oxm::{encode_oxm_fields, read_tlv, write_tlv, MATCH_CODES, OXM_FIELDS};
use crate::wire::Reader;

const SHAPE: u8 = 0;
const RAW: u8 = 1;
const MASKED: u8 = 0x80;

/// The form of a decoded match's OXM `fields` (bytes after `ofp_match`'s type and length),
/// `None` when [`encode_oxm_fields`] writes `m` back to the same bytes.
pub(crate) fn match_form(fields: &[u8], m: &Match) -> Option<WireForm> {
    let mut canonical = Vec::with_capacity(fields.len());
    if encode_oxm_fields(m, &mut canonical).is_ok() && canonical == fields {
        return None;
    }
    let mut shape = vec![SHAPE];
    let mut r = Reader::new(fields, ErrorCode::BMC_BAD_LEN, "match");
    while !r.is_empty() {
        let Ok(tlv) = read_tlv(&mut r, MATCH_CODES) else {
            return Some(raw(fields));
        };
        let Some(idx) = OXM_FIELDS.iter().position(|d| d == tlv.def) else {
            return Some(raw(fields));
        };
        shape.push(idx as u8 | if tlv.mask.is_some() { MASKED } else { 0 });
    }
    let mut again = Vec::with_capacity(fields.len());
    match write_fields(m, Some(&Arc::from(&shape[..])), &mut again) {
        Ok(()) if again == fields => Some(Arc::from(shape)),
        _ => Some(raw(fields)),
    }
}

fn raw(fields: &[u8]) -> WireForm {
    let mut v = Vec::with_capacity(fields.len() + 1);
    v.push(RAW);
    v.extend_from_slice(fields);
    Arc::from(v)
}

/// Appends the OXM fields of `m` as `form` says (`None`: [`encode_oxm_fields`]). A form
/// that does not fit `m` (it names a field `m` does not match) is an encode error.
pub(crate) fn write_fields(
    m: &Match,
    form: Option<&WireForm>,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let Some(form) = form else {
        return encode_oxm_fields(m, buf);
    };
    match form.split_first() {
        Some((&RAW, bytes)) => {
            buf.extend_from_slice(bytes);
            Ok(())
        }
        Some((&SHAPE, shape)) => {
            for &s in shape {
                let def = OXM_FIELDS
                    .get(usize::from(s & !MASKED))
                    .ok_or_else(|| bad_form("names no OXM field"))?;
                let full = def.full_mask();
                let (v, mask) = m.get(def.key);
                if mask == 0 {
                    return Err(bad_form(def.name));
                }
                write_tlv(buf, def, v & full, (s & MASKED != 0).then_some(mask & full));
            }
            Ok(())
        }
        _ => Err(bad_form("is empty or of an unknown kind")),
    }
}

fn bad_form(what: &str) -> EncodeError {
    EncodeError::Unencodable(format!("a match's wire form does not fit it: {what}"))
}

/// The form of a flow's decoded instruction `bytes` (`ctx`: its match): `None` when
/// [`encode_instructions`] writes `instructions` (in the order given) back to the same bytes,
/// else the bytes.
pub(crate) fn instructions_form(
    bytes: &[u8],
    instructions: &[Instruction],
    ctx: &Match,
) -> Option<WireForm> {
    let mut canonical = Vec::with_capacity(bytes.len());
    match encode_instructions(instructions, ctx, &mut canonical) {
        Ok(()) if canonical == bytes => None,
        _ => Some(Arc::from(bytes)),
    }
}

/// Appends `instructions` (`ctx`: the flow's match) as `form` says: its bytes, or
/// [`encode_instructions`].
pub(crate) fn write_instructions(
    instructions: &[Instruction],
    ctx: &Match,
    form: Option<&WireForm>,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    match form {
        Some(bytes) => {
            buf.extend_from_slice(bytes);
            Ok(())
        }
        None => encode_instructions(instructions, ctx, buf),
    }
}

/// The form of a bucket's decoded action `bytes`: `None` when [`encode_actions`] writes
/// `actions` back to the same bytes, else the bytes.
pub(crate) fn actions_form(bytes: &[u8], actions: &[Action]) -> Option<WireForm> {
    let mut canonical = Vec::with_capacity(bytes.len());
    match encode_actions(actions, &Match::ANY, &mut canonical) {
        Ok(()) if canonical == bytes => None,
        _ => Some(Arc::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oxm::decode_oxm_fields;

    /// eth_type, then ipv4_dst masked, then in_port: not the canonical order.
    fn reordered() -> Vec<u8> {
        let mut b = Vec::new();
        let d = |n| OXM_FIELDS.iter().find(|d| d.name == n).unwrap();
        write_tlv(&mut b, d("OXM_OF_ETH_TYPE"), 0x0800, None);
        write_tlv(&mut b, d("OXM_OF_IPV4_DST"), 0x0a00_0000, Some(0xff00_0000));
        write_tlv(&mut b, d("OXM_OF_IN_PORT"), 3, None);
        b
    }

    #[test]
    fn a_reordered_match_keeps_its_shape_and_writes_back_as_sent() {
        let sent = reordered();
        let m = decode_oxm_fields(&sent).unwrap();
        let form = match_form(&sent, &m).expect("not the canonical order");
        assert_eq!(form[0], SHAPE, "values are not in a shape");
        assert_eq!(form.len(), 4);
        let mut back = Vec::new();
        write_fields(&m, Some(&form), &mut back).unwrap();
        assert_eq!(back, sent);
        // The same shape with other values: the same form (shared by the pipeline).
        let mut other = m;
        other.set_exact(packet::Field::InPort, 9);
        let mut sent2 = Vec::new();
        write_fields(&other, Some(&form), &mut sent2).unwrap();
        assert_eq!(match_form(&sent2, &other), Some(form));
    }

    #[test]
    fn the_canonical_order_has_no_form() {
        let m = decode_oxm_fields(&reordered()).unwrap();
        let mut canonical = Vec::new();
        encode_oxm_fields(&m, &mut canonical).unwrap();
        assert_eq!(match_form(&canonical, &m), None);
    }

    #[test]
    fn a_mask_wider_than_the_wire_field_is_kept_raw() {
        // NXM_NX_IP_FRAG carries 2 bits; a mask of 0xff is trimmed to 0x3 by decoding.
        let d = |n| OXM_FIELDS.iter().find(|d| d.name == n).unwrap();
        let mut sent = Vec::new();
        write_tlv(&mut sent, d("OXM_OF_ETH_TYPE"), 0x0800, None);
        sent.extend_from_slice(&[0x00, 0x01, 0x35, 0x02, 0x01, 0xff]);
        let m = decode_oxm_fields(&sent).unwrap();
        let form = match_form(&sent, &m).unwrap();
        assert_eq!(form[0], RAW);
        let mut back = Vec::new();
        write_fields(&m, Some(&form), &mut back).unwrap();
        assert_eq!(back, sent);
    }

    #[test]
    fn a_form_that_does_not_fit_is_an_error() {
        let sent = reordered();
        let m = decode_oxm_fields(&sent).unwrap();
        let form = match_form(&sent, &m).unwrap();
        let mut out = Vec::new();
        assert!(write_fields(&Match::ANY, Some(&form), &mut out).is_err());
    }

    /// FLOW_REMOVED carries the match as the controller wrote it, through the pipeline: a
    /// flow-mod decoded, installed, deleted, its removal encoded.
    #[test]
    fn flow_removed_gives_back_the_match_as_sent() {
        use crate::messages::mods::FlowModMsg;
        use crate::messages::packet::FlowRemoved;
        use crate::{decode, encode, Message};
        use pipeline::model::{FlowMod, FlowModCommand};
        use pipeline::{Control, PipelineConfig};

        let m = decode_oxm_fields(&reordered()).unwrap();
        let mut fm = FlowMod::add(0, 5, m, Vec::new());
        fm.flags.send_flow_rem = true;
        let mut wire = Vec::new();
        let msg = Message::FlowMod(FlowModMsg {
            flow_mod: fm,
            buffer_id: crate::NO_BUFFER,
        });
        encode(1, &msg, &mut wire).unwrap();
        // The codec wrote its own order; put the controller's in its place.
        let sent = reordered();
        wire[52..52 + sent.len()].copy_from_slice(&sent);
        let Message::FlowMod(decoded) = decode(&wire).unwrap().1 else {
            panic!("not a flow-mod")
        };
        assert!(decoded.flow_mod.matcher_as_sent.is_some());
        let (mut c, _cell) = Control::new(PipelineConfig::default());
        c.flow_mod(&decoded.flow_mod).unwrap();
        let mut del = decoded.flow_mod.clone();
        del.command = FlowModCommand::Delete;
        c.flow_mod(&del).unwrap();
        let removed = c.take_removed();
        assert_eq!(removed.len(), 1);
        let mut out = Vec::new();
        encode(
            2,
            &Message::FlowRemoved(FlowRemoved::from(&removed[0])),
            &mut out,
        )
        .unwrap();
        // ofp_flow_removed: header 8, 40 bytes, then the match (type, length, fields).
        assert_eq!(&out[48 + 4..48 + 4 + sent.len()], &sent[..]);
    }
}

//! Actions (`ofp_action_*`): decode into the model's [`Action`], encode back. Action types the
//! model has no variant for (PBB) and experimenter actions decode to the error a switch
//! answers with (`OFPBAC_BAD_TYPE`, `OFPBAC_BAD_EXPERIMENTER`).

use pipeline::model::{ports, Action, Match, GROUP_MAX};

use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::oxm::{self, SET_FIELD_CODES};
use crate::wire::{patch_len, Put, Reader};

/// `ofp_action_type` values.
pub mod action_type {
    /// `OFPAT_OUTPUT`.
    pub const OUTPUT: u16 = 0;
    /// `OFPAT_COPY_TTL_OUT`.
    pub const COPY_TTL_OUT: u16 = 11;
    /// `OFPAT_COPY_TTL_IN`.
    pub const COPY_TTL_IN: u16 = 12;
    /// `OFPAT_SET_MPLS_TTL`.
    pub const SET_MPLS_TTL: u16 = 15;
    /// `OFPAT_DEC_MPLS_TTL`.
    pub const DEC_MPLS_TTL: u16 = 16;
    /// `OFPAT_PUSH_VLAN`.
    pub const PUSH_VLAN: u16 = 17;
    /// `OFPAT_POP_VLAN`.
    pub const POP_VLAN: u16 = 18;
    /// `OFPAT_PUSH_MPLS`.
    pub const PUSH_MPLS: u16 = 19;
    /// `OFPAT_POP_MPLS`.
    pub const POP_MPLS: u16 = 20;
    /// `OFPAT_SET_QUEUE`.
    pub const SET_QUEUE: u16 = 21;
    /// `OFPAT_GROUP`.
    pub const GROUP: u16 = 22;
    /// `OFPAT_SET_NW_TTL`.
    pub const SET_NW_TTL: u16 = 23;
    /// `OFPAT_DEC_NW_TTL`.
    pub const DEC_NW_TTL: u16 = 24;
    /// `OFPAT_SET_FIELD`.
    pub const SET_FIELD: u16 = 25;
    /// `OFPAT_PUSH_PBB`.
    pub const PUSH_PBB: u16 = 26;
    /// `OFPAT_POP_PBB`.
    pub const POP_PBB: u16 = 27;
    /// `OFPAT_EXPERIMENTER`.
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Nicira's experimenter id.
const NX_VENDOR: u32 = 0x0000_2320;
/// Nicira's `NXAST_POP_QUEUE` subtype.
const NXAST_POP_QUEUE: u16 = 5;

use action_type as at;

/// The action types this codec decodes (for table-features replies).
pub const SUPPORTED_ACTIONS: &[u16] = &[
    at::OUTPUT,
    at::PUSH_VLAN,
    at::POP_VLAN,
    at::SET_QUEUE,
    at::GROUP,
    at::SET_NW_TTL,
    at::DEC_NW_TTL,
    at::SET_FIELD,
    at::COPY_TTL_OUT,
    at::COPY_TTL_IN,
    at::SET_MPLS_TTL,
    at::DEC_MPLS_TTL,
    at::PUSH_MPLS,
    at::POP_MPLS,
];

/// The `ofp_action_type` an action is written with.
pub fn action_type(a: &Action) -> u16 {
    match a {
        Action::Output { .. } => at::OUTPUT,
        Action::Group(_) => at::GROUP,
        Action::SetQueue(_) => at::SET_QUEUE,
        Action::SetField { .. } => at::SET_FIELD,
        Action::PushVlan(_) => at::PUSH_VLAN,
        Action::PopVlan => at::POP_VLAN,
        Action::DecNwTtl => at::DEC_NW_TTL,
        Action::SetNwTtl(_) => at::SET_NW_TTL,
        Action::PushMpls(_) => at::PUSH_MPLS,
        Action::PopMpls(_) => at::POP_MPLS,
        Action::SetMplsTtl(_) => at::SET_MPLS_TTL,
        Action::DecMplsTtl => at::DEC_MPLS_TTL,
        Action::CopyTtlOut => at::COPY_TTL_OUT,
        Action::CopyTtlIn => at::COPY_TTL_IN,
    }
}

/// Whether `port` may be the port of an output action (a real port or a reserved port other
/// than ANY).
pub fn valid_output_port(port: u32) -> bool {
    (port != 0 && port <= ports::MAX)
        || matches!(
            port,
            ports::IN_PORT
                | ports::TABLE
                | ports::NORMAL
                | ports::FLOOD
                | ports::ALL
                | ports::CONTROLLER
                | ports::LOCAL
        )
}

fn unsupported(name: &str) -> DecodeError {
    DecodeError::new(
        ErrorCode::BAC_BAD_TYPE,
        format!("action {name} is not supported by this switch"),
    )
}

/// Decodes one action from `r`.
fn read_action(r: &mut Reader<'_>) -> Result<Action, DecodeError> {
    let mut hr = Reader::new(
        r.bytes(r.remaining().min(4))?,
        ErrorCode::BAC_BAD_LEN,
        "action header",
    );
    let kind = hr.u16()?;
    let len = hr.u16()? as usize;
    if len < 8 || len & 7 != 0 {
        return Err(DecodeError::new(
            ErrorCode::BAC_BAD_LEN,
            format!("action type {kind} has length {len}; actions are at least 8 bytes, in multiples of 8"),
        ));
    }
    let mut b = r.sub(len - 4, ErrorCode::BAC_BAD_LEN, "action")?;
    let fixed = |want: usize| -> Result<(), DecodeError> {
        if len != want {
            return Err(DecodeError::new(
                ErrorCode::BAC_BAD_LEN,
                format!("action type {kind} has length {len}; it must be {want}"),
            ));
        }
        Ok(())
    };
    let action = match kind {
        at::OUTPUT => {
            fixed(16)?;
            let port = b.u32()?;
            let max_len = b.u16()?;
            if !valid_output_port(port) {
                return Err(DecodeError::new(
                    ErrorCode::BAC_BAD_OUT_PORT,
                    format!("output to port {port:#x} is invalid; use 1..=0xffffff00 or a reserved port other than ANY"),
                ));
            }
            Action::Output { port, max_len }
        }
        at::PUSH_VLAN => {
            fixed(8)?;
            let tpid = b.u16()?;
            if tpid != 0x8100 && tpid != 0x88a8 {
                return Err(DecodeError::new(
                    ErrorCode::BAC_BAD_ARGUMENT,
                    format!("push_vlan ethertype {tpid:#06x} is not 0x8100 or 0x88a8"),
                ));
            }
            Action::PushVlan(tpid)
        }
        at::POP_VLAN => {
            fixed(8)?;
            Action::PopVlan
        }
        at::SET_QUEUE => {
            fixed(8)?;
            Action::SetQueue(b.u32()?)
        }
        at::GROUP => {
            fixed(8)?;
            let g = b.u32()?;
            if g > GROUP_MAX {
                return Err(DecodeError::new(
                    ErrorCode::BAC_BAD_OUT_GROUP,
                    format!(
                        "group action names reserved group {g:#x}; use a group id up to 0xffffff00"
                    ),
                ));
            }
            Action::Group(g)
        }
        at::SET_NW_TTL => {
            fixed(8)?;
            Action::SetNwTtl(b.u8()?)
        }
        at::DEC_NW_TTL => {
            fixed(8)?;
            Action::DecNwTtl
        }
        at::SET_FIELD => {
            let tlv = oxm::read_tlv(&mut b, SET_FIELD_CODES)?;
            if b.remaining() >= 8 {
                return Err(DecodeError::new(
                    ErrorCode::BAC_BAD_SET_LEN,
                    format!(
                        "set_field of {} is {len} bytes, more than its field and padding",
                        tlv.def.name
                    ),
                ));
            }
            if tlv.mask.is_some() {
                return Err(DecodeError::new(
                    ErrorCode::BAC_BAD_SET_ARGUMENT,
                    format!("set_field of {} carries a mask; OpenFlow 1.3 set_field writes whole fields", tlv.def.name),
                ));
            }
            Action::SetField {
                field: tlv.def.key,
                value: tlv.value,
            }
        }
        at::COPY_TTL_OUT => {
            fixed(8)?;
            Action::CopyTtlOut
        }
        at::COPY_TTL_IN => {
            fixed(8)?;
            Action::CopyTtlIn
        }
        at::SET_MPLS_TTL => {
            fixed(8)?;
            Action::SetMplsTtl(b.u8()?)
        }
        at::DEC_MPLS_TTL => {
            fixed(8)?;
            Action::DecMplsTtl
        }
        at::PUSH_MPLS => {
            fixed(8)?;
            let t = b.u16()?;
            if t != 0x8847 && t != 0x8848 {
                return Err(DecodeError::new(
                    ErrorCode::BAC_BAD_ARGUMENT,
                    format!("push_mpls ethertype {t:#06x} is not 0x8847 or 0x8848"),
                ));
            }
            Action::PushMpls(t)
        }
        at::POP_MPLS => {
            fixed(8)?;
            Action::PopMpls(b.u16()?)
        }
        at::PUSH_PBB => return Err(unsupported("push_pbb")),
        at::POP_PBB => return Err(unsupported("pop_pbb")),
        at::EXPERIMENTER => {
            let e = b.u32().unwrap_or(0);
            // Nicira's pop_queue (subtype 5), which ovs-ofctl sends after `enqueue:P:Q`'s
            // set_queue and output: back to the queue the packet came with, which in Hayate
            // is always queue 0.
            if e == NX_VENDOR && len == 16 && b.u16().ok() == Some(NXAST_POP_QUEUE) {
                return Ok(Action::SetQueue(0));
            }
            return Err(DecodeError::new(
                ErrorCode::BAC_BAD_EXPERIMENTER,
                format!("experimenter action {e:#010x} is not supported by this switch"),
            ));
        }
        _ => {
            return Err(DecodeError::new(
                ErrorCode::BAC_BAD_TYPE,
                format!("action type {kind} is unknown"),
            ))
        }
    };
    Ok(action)
}

/// Decodes a list of actions filling `bytes` exactly.
pub fn decode_actions(bytes: &[u8]) -> Result<Vec<Action>, DecodeError> {
    let mut r = Reader::new(bytes, ErrorCode::BAC_BAD_LEN, "action list");
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(read_action(&mut r)?);
    }
    Ok(out)
}

/// Appends one action. `ctx`: the match of the flow it belongs to, which decides the name
/// of a set-field whose key slot several OXM fields share (`Match::ANY` when unknown).
pub fn encode_action(a: &Action, ctx: &Match, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    match *a {
        Action::Output { port, max_len } => {
            buf.put_u16(at::OUTPUT);
            buf.put_u16(16);
            buf.put_u32(port);
            buf.put_u16(max_len);
            buf.put_zeros(6);
        }
        Action::Group(g) => simple_u32(buf, at::GROUP, g),
        Action::SetQueue(q) => simple_u32(buf, at::SET_QUEUE, q),
        Action::PushVlan(tpid) => ethertype_action(buf, at::PUSH_VLAN, tpid),
        Action::PopVlan => simple_u32(buf, at::POP_VLAN, 0),
        Action::DecNwTtl => simple_u32(buf, at::DEC_NW_TTL, 0),
        Action::SetNwTtl(t) => {
            buf.put_u16(at::SET_NW_TTL);
            buf.put_u16(8);
            buf.put_u8(t);
            buf.put_zeros(3);
        }
        Action::PushMpls(t) => ethertype_action(buf, at::PUSH_MPLS, t),
        Action::PopMpls(t) => ethertype_action(buf, at::POP_MPLS, t),
        Action::SetMplsTtl(t) => {
            buf.put_u16(at::SET_MPLS_TTL);
            buf.put_u16(8);
            buf.put_u8(t);
            buf.put_zeros(3);
        }
        Action::DecMplsTtl => simple_u32(buf, at::DEC_MPLS_TTL, 0),
        Action::CopyTtlOut => simple_u32(buf, at::COPY_TTL_OUT, 0),
        Action::CopyTtlIn => simple_u32(buf, at::COPY_TTL_IN, 0),
        Action::SetField { field, value } => {
            let def = oxm::def_for(field, ctx).ok_or_else(|| {
                EncodeError::Unencodable(format!("set_field of {}", field.name()))
            })?;
            if value > field.max_value() {
                return Err(EncodeError::Unencodable(format!(
                    "set_field value {value:#x} is wider than {}",
                    field.name()
                )));
            }
            let start = buf.len();
            buf.put_u16(at::SET_FIELD);
            buf.put_u16(0);
            oxm::write_tlv(buf, def, value, None);
            buf.pad_to_8(start);
            patch_len(buf, start + 2, start, "set_field action")?;
        }
    }
    Ok(())
}

/// push_vlan, push_mpls, pop_mpls: an ethertype and 2 bytes of padding.
fn ethertype_action(buf: &mut Vec<u8>, kind: u16, ethertype: u16) {
    buf.put_u16(kind);
    buf.put_u16(8);
    buf.put_u16(ethertype);
    buf.put_zeros(2);
}

fn simple_u32(buf: &mut Vec<u8>, kind: u16, v: u32) {
    buf.put_u16(kind);
    buf.put_u16(8);
    buf.put_u32(v);
}

/// Appends a list of actions (see [`encode_action`] for `ctx`).
pub fn encode_actions(
    actions: &[Action],
    ctx: &Match,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    actions.iter().try_for_each(|a| encode_action(a, ctx, buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::Field;

    fn enc(a: &Action, ctx: &Match) -> Vec<u8> {
        let mut v = Vec::new();
        encode_action(a, ctx, &mut v).unwrap();
        v
    }

    #[test]
    fn output_golden_bytes() {
        let b = enc(
            &Action::Output {
                port: ports::CONTROLLER,
                max_len: 0xffff,
            },
            &Match::ANY,
        );
        assert_eq!(
            b,
            [0, 0, 0, 16, 0xff, 0xff, 0xff, 0xfd, 0xff, 0xff, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            decode_actions(&b).unwrap(),
            [Action::Output {
                port: ports::CONTROLLER,
                max_len: 0xffff
            }]
        );
    }

    #[test]
    fn set_field_name_follows_the_match() {
        let mut arp = Match::ANY;
        arp.set_exact(Field::EthType, 0x0806);
        let a = Action::SetField {
            field: Field::Ipv4Src,
            value: 0x0a00_0001,
        };
        // OXM_OF_ARP_SPA = 0x8000 << 16 | 22 << 9 | 4.
        assert_eq!(&enc(&a, &arp)[4..8], &[0x80, 0x00, 0x2c, 0x04]);
        assert_eq!(&enc(&a, &Match::ANY)[4..8], &[0x80, 0x00, 0x16, 0x04]);
        let b = enc(&a, &arp);
        assert_eq!(b.len(), 16);
        assert_eq!(decode_actions(&b).unwrap(), [a]);
    }

    /// The MPLS and TTL-copy actions as Open vSwitch 3.1's `ovs-ofctl -O OpenFlow13` writes
    /// them (`push_mpls:0x8847,pop_mpls:0x0800,set_mpls_ttl:9,dec_mpls_ttl`; copy_ttl_out
    /// and copy_ttl_in, which it has no syntax for, by the specification's layout).
    #[test]
    fn mpls_actions_golden_bytes() {
        let cases: [(&[u8], Action); 6] = [
            (&[0, 19, 0, 8, 0x88, 0x47, 0, 0], Action::PushMpls(0x8847)),
            (&[0, 20, 0, 8, 0x08, 0x00, 0, 0], Action::PopMpls(0x0800)),
            (&[0, 15, 0, 8, 9, 0, 0, 0], Action::SetMplsTtl(9)),
            (&[0, 16, 0, 8, 0, 0, 0, 0], Action::DecMplsTtl),
            (&[0, 11, 0, 8, 0, 0, 0, 0], Action::CopyTtlOut),
            (&[0, 12, 0, 8, 0, 0, 0, 0], Action::CopyTtlIn),
        ];
        for (bytes, a) in cases {
            assert_eq!(
                decode_actions(bytes).unwrap(),
                std::slice::from_ref(&a),
                "{bytes:?}"
            );
            assert_eq!(enc(&a, &Match::ANY), bytes, "{a:?}");
        }
        // set_mpls_label:16 is a set-field of OXM_OF_MPLS_LABEL (0x8000 << 16 | 34 << 9 | 4).
        let label = Action::SetField {
            field: Field::MplsLabel,
            value: 16,
        };
        let b = enc(&label, &Match::ANY);
        assert_eq!(b, [0, 25, 0, 16, 0x80, 0, 0x44, 4, 0, 0, 0, 16, 0, 0, 0, 0]);
        assert_eq!(decode_actions(&b).unwrap(), [label]);
    }

    #[test]
    fn nicira_pop_queue_is_back_to_queue_zero() {
        // What ovs-ofctl sends for enqueue:2:1 in OpenFlow 1.3.
        let bytes = [
            0, 21, 0, 8, 0, 0, 0, 1, // set_queue:1
            0, 0, 0, 16, 0, 0, 0, 2, 0xff, 0xff, 0, 0, 0, 0, 0, 0, // output:2
            0xff, 0xff, 0, 16, 0, 0, 0x23, 0x20, 0, 5, 0, 0, 0, 0, 0, 0, // pop_queue
        ];
        assert_eq!(
            decode_actions(&bytes).unwrap(),
            vec![
                Action::SetQueue(1),
                Action::Output {
                    port: 2,
                    max_len: 0xffff
                },
                Action::SetQueue(0)
            ]
        );
    }

    #[test]
    fn errors_name_the_ofp_code() {
        let code = |b: &[u8]| decode_actions(b).unwrap_err().code;
        // Output to port 0.
        assert_eq!(
            code(&[0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAC_BAD_OUT_PORT
        );
        // Output with length 8.
        assert_eq!(code(&[0, 0, 0, 8, 0, 0, 0, 1]), ErrorCode::BAC_BAD_LEN);
        // Length 12: not a multiple of 8.
        assert_eq!(
            code(&[0, 24, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAC_BAD_LEN
        );
        // Longer than the list.
        assert_eq!(code(&[0, 24, 0, 16, 0, 0, 0, 0]), ErrorCode::BAC_BAD_LEN);
        // Push MPLS with a non-MPLS ethertype, push PBB, unknown, experimenter.
        assert_eq!(
            code(&[0, 19, 0, 8, 0x08, 0x00, 0, 0]),
            ErrorCode::BAC_BAD_ARGUMENT
        );
        assert_eq!(
            code(&[0, 26, 0, 8, 0x88, 0xe7, 0, 0]),
            ErrorCode::BAC_BAD_TYPE
        );
        assert_eq!(code(&[0, 27, 0, 8, 0, 0, 0, 0]), ErrorCode::BAC_BAD_TYPE);
        assert_eq!(code(&[0, 99, 0, 8, 0, 0, 0, 0]), ErrorCode::BAC_BAD_TYPE);
        assert_eq!(
            code(&[0xff, 0xff, 0, 8, 0, 0, 0x23, 0x20]),
            ErrorCode::BAC_BAD_EXPERIMENTER
        );
        // Nicira's other actions (here reg_move, subtype 6) stay refused.
        assert_eq!(
            code(&[0xff, 0xff, 0, 16, 0, 0, 0x23, 0x20, 0, 6, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAC_BAD_EXPERIMENTER
        );
        // Set-field of an unknown OXM field (basic 37, pbb_isid), and with a mask.
        assert_eq!(
            code(&[0, 25, 0, 16, 0x80, 0, 37 << 1, 3, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAC_BAD_SET_TYPE
        );
        assert_eq!(
            code(&[0, 25, 0, 16, 0x80, 0, 0x17, 8, 10, 0, 0, 1, 255, 255, 255, 0]),
            ErrorCode::BAC_BAD_SET_ARGUMENT
        );
        // Set-field whose OXM length disagrees with the field.
        assert_eq!(
            code(&[0, 25, 0, 8, 0x80, 0, 0x16, 3, 1, 2, 3, 0]),
            ErrorCode::BAC_BAD_SET_LEN
        );
        // push_vlan with a non-VLAN ethertype.
        assert_eq!(
            code(&[0, 17, 0, 8, 0x08, 0, 0, 0]),
            ErrorCode::BAC_BAD_ARGUMENT
        );
        // Group action on OFPG_ALL.
        assert_eq!(
            code(&[0, 22, 0, 8, 0xff, 0xff, 0xff, 0xfc]),
            ErrorCode::BAC_BAD_OUT_GROUP
        );
    }
}

//! Message-level decode errors: each malformed message maps to the `OFPT_ERROR` a switch
//! must answer with.

use pipeline::model::{Action, FlowMod, Instruction, Match};

use crate::error::ErrorCode;
use crate::header::msg_type as t;
use crate::messages::mods::FlowModMsg;
use crate::{decode, encode, ErrorMsg, Message, NO_BUFFER};

fn msg(version: u8, kind: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![version, kind, 0, 0, 0, 0, 0, 1];
    v.extend_from_slice(body);
    let len = v.len() as u16;
    v[2..4].copy_from_slice(&len.to_be_bytes());
    v
}

fn code(b: &[u8]) -> ErrorCode {
    decode(b).expect_err("must be refused").code
}

fn flow_mod_bytes() -> Vec<u8> {
    let fm = FlowMod::add(
        0,
        10,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![Action::Output {
            port: 1,
            max_len: 0,
        }])],
    );
    let mut b = Vec::new();
    encode(
        1,
        &Message::FlowMod(FlowModMsg {
            flow_mod: fm,
            buffer_id: NO_BUFFER,
        }),
        &mut b,
    )
    .expect("encodes");
    b
}

#[test]
fn header_errors() {
    assert_eq!(
        code(&msg(1, t::ECHO_REQUEST, &[])),
        ErrorCode::BRC_BAD_VERSION
    );
    assert_eq!(code(&msg(4, 99, &[])), ErrorCode::BRC_BAD_TYPE);
    assert_eq!(code(&[4, 2, 0]), ErrorCode::BRC_BAD_LEN);
    let mut b = msg(4, t::ECHO_REQUEST, &[1, 2]);
    b[3] = 9; // length says 9, 10 bytes given
    assert_eq!(code(&b), ErrorCode::BRC_BAD_LEN);
    // Trailing bytes after a fixed body; a body cut short.
    assert_eq!(
        code(&msg(4, t::BARRIER_REQUEST, &[0])),
        ErrorCode::BRC_BAD_LEN
    );
    assert_eq!(
        code(&msg(4, t::SET_CONFIG, &[0, 0, 0])),
        ErrorCode::BRC_BAD_LEN
    );
    // A hello of another version still decodes (negotiation needs it).
    let (h, m) = decode(&msg(1, t::HELLO, &[])).expect("old hello decodes");
    assert_eq!(h.version, 1);
    assert!(matches!(m, Message::Hello(h) if h.versions.is_none()));
}

#[test]
fn flow_mod_errors() {
    let good = flow_mod_bytes();
    assert!(decode(&good).is_ok());
    let mut b = good.clone();
    b[25] = 5; // command
    assert_eq!(code(&b), ErrorCode::FMFC_BAD_COMMAND);
    let mut b = good.clone();
    b[44] = 0x80; // flags high byte
    assert_eq!(code(&b), ErrorCode::FMFC_BAD_FLAGS);
    let mut b = good.clone();
    b[48..50].copy_from_slice(&[0, 0]); // match type OFPMT_STANDARD
    assert_eq!(code(&b), ErrorCode::BMC_BAD_TYPE);
    let mut b = good.clone();
    let n = b.len();
    b[n - 16 + 4..n - 16 + 8].copy_from_slice(&[0, 0, 0, 0]); // output to port 0
    assert_eq!(code(&b), ErrorCode::BAC_BAD_OUT_PORT);
    let mut b = good;
    b.truncate(b.len() - 8); // instruction longer than what is left
    let len = b.len() as u16;
    b[2..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(code(&b), ErrorCode::BIC_BAD_LEN);
}

#[test]
fn group_meter_role_multipart_errors() {
    // group-mod: command 3; type 4; bucket of length 8.
    assert_eq!(
        code(&msg(4, t::GROUP_MOD, &[0, 3, 0, 0, 0, 0, 0, 1])),
        ErrorCode::GMFC_BAD_COMMAND
    );
    assert_eq!(
        code(&msg(4, t::GROUP_MOD, &[0, 0, 4, 0, 0, 0, 0, 1])),
        ErrorCode::GMFC_BAD_TYPE
    );
    assert_eq!(
        code(&msg(
            4,
            t::GROUP_MOD,
            &[0, 0, 0, 0, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0]
        )),
        ErrorCode::GMFC_BAD_BUCKET
    );
    // meter-mod: command 3; kbps and pktps together; band type 3.
    assert_eq!(
        code(&msg(4, t::METER_MOD, &[0, 3, 0, 1, 0, 0, 0, 1])),
        ErrorCode::MMFC_BAD_COMMAND
    );
    assert_eq!(
        code(&msg(4, t::METER_MOD, &[0, 0, 0, 3, 0, 0, 0, 1])),
        ErrorCode::MMFC_BAD_FLAGS
    );
    let band = [0, 3, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        code(&msg(
            4,
            t::METER_MOD,
            &[&[0, 0, 0, 1, 0, 0, 0, 1][..], &band].concat()
        )),
        ErrorCode::MMFC_BAD_BAND
    );
    // role 4.
    assert_eq!(
        code(&msg(
            4,
            t::ROLE_REQUEST,
            &[0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        )),
        ErrorCode::RRFC_BAD_ROLE
    );
    // multipart type 14 and experimenter.
    assert_eq!(
        code(&msg(4, t::MULTIPART_REQUEST, &[0, 14, 0, 0, 0, 0, 0, 0])),
        ErrorCode::BRC_BAD_MULTIPART
    );
    assert_eq!(
        code(&msg(
            4,
            t::MULTIPART_REQUEST,
            &[0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x23, 0x20, 0, 0, 0, 0]
        )),
        ErrorCode::BRC_BAD_EXPERIMENTER
    );
    // table-features request with a property of unknown type.
    let mut tf = vec![0u8; 64];
    tf[0..2].copy_from_slice(&72u16.to_be_bytes());
    tf.extend_from_slice(&[0, 99, 0, 4, 0, 0, 0, 0]);
    assert_eq!(
        code(&msg(
            4,
            t::MULTIPART_REQUEST,
            &[&[0, 12, 0, 0, 0, 0, 0, 0][..], &tf].concat()
        )),
        ErrorCode::TFFC_BAD_TYPE
    );
}

#[test]
fn experimenter_message_decodes_so_the_switch_can_refuse_it() {
    let (_, m) =
        decode(&msg(4, t::EXPERIMENTER, &[0, 0, 0x23, 0x20, 0, 0, 0, 1, 9])).expect("decodes");
    let Message::Experimenter(e) = m else {
        panic!("{m:?}")
    };
    assert_eq!(
        (e.experimenter, e.exp_type, e.data.as_slice()),
        (0x2320, 1, &[9u8][..])
    );
}

#[test]
fn error_reply_for_a_refused_request() {
    let req = flow_mod_bytes();
    let e = ErrorMsg::for_request(ErrorCode::FMFC_BAD_COMMAND, &req);
    assert_eq!(e.data, &req[..64]);
    let mut b = Vec::new();
    encode(1, &Message::Error(e.clone()), &mut b).expect("encodes");
    assert_eq!(&b[..12], &[4, 1, 0, 76, 0, 0, 0, 1, 0, 5, 0, 6]);
    assert_eq!(decode(&b).expect("decodes").1, Message::Error(e));
}

#[test]
fn encode_refuses_what_does_not_fit() {
    let huge = Message::EchoReply(vec![0; 70_000]);
    let mut b = vec![1, 2, 3];
    assert!(matches!(
        encode(1, &huge, &mut b),
        Err(crate::EncodeError::TooLong { .. })
    ));
    assert_eq!(b, [1, 2, 3], "buffer left as it was");
}

//! Flow, group and meter statistics give back what the controller installed, byte for byte:
//! messages built by hand (OXM fields, instructions, actions and bands in an order the codec
//! would not write them), the replies read as bytes.

use openflow::action::encode_action;
use openflow::instruction::encode_instruction;
use openflow::msg_type;
use packet::Field;
use pipeline::model::{Action, Instruction, Match};

use super::*;

const OFPMP_FLOW: u16 = 1;
const OFPMP_GROUP_DESC: u16 = 7;
const OFPMP_METER_CONFIG: u16 = 10;

/// A message of `kind` with `body` under xid 1.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![4, kind];
    m.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
    m.extend_from_slice(&1u32.to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// An `OPENFLOW_BASIC` OXM TLV.
fn oxm(field: u8, value: &[u8], mask: Option<&[u8]>) -> Vec<u8> {
    let len = value.len() * if mask.is_some() { 2 } else { 1 };
    let mut t = vec![0x80, 0x00, field << 1 | u8::from(mask.is_some()), len as u8];
    t.extend_from_slice(value);
    t.extend_from_slice(mask.unwrap_or(&[]));
    t
}

/// An `ofp_match` around `fields`, padded.
fn ofp_match(fields: &[u8]) -> Vec<u8> {
    let mut m = vec![0, 1];
    m.extend_from_slice(&((4 + fields.len()) as u16).to_be_bytes());
    m.extend_from_slice(fields);
    while m.len() % 8 != 0 {
        m.push(0);
    }
    m
}

/// The replies `bytes` gets, raw, each checked to decode.
fn raw_replies(b: &OfBridge, bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    b.handle(ConnId(1), Role::Equal, bytes, &mut out);
    let mut replies = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let len = openflow::frame_len(&out[at..]).unwrap().unwrap();
        let msg = &out[at..at + len];
        match openflow::decode(msg).unwrap().1 {
            Message::Error(e) => panic!("error {:?}: {}", e.code, String::from_utf8_lossy(&e.data)),
            _ => replies.push(msg.to_vec()),
        }
        at += len;
    }
    replies
}

/// The body of the one multipart reply to a request of `kind` with `body`.
fn multipart_body(b: &OfBridge, kind: u16, body: &[u8]) -> Vec<u8> {
    let mut req = kind.to_be_bytes().to_vec();
    req.extend_from_slice(&[0; 6]);
    req.extend_from_slice(body);
    let replies = raw_replies(b, &message(msg_type::MULTIPART_REQUEST, &req));
    assert_eq!(replies.len(), 1, "one reply");
    let r = &replies[0];
    assert_eq!(r[1], msg_type::MULTIPART_REPLY);
    assert_eq!(u16::from_be_bytes([r[8], r[9]]), kind);
    r[16..].to_vec()
}

fn flow_stats_request() -> Vec<u8> {
    let mut body = vec![0xff, 0, 0, 0];
    body.extend_from_slice(&ports::ANY.to_be_bytes());
    body.extend_from_slice(&pipeline::model::GROUP_ANY.to_be_bytes());
    body.extend_from_slice(&[0; 4 + 16]);
    body.extend_from_slice(&ofp_match(&[]));
    body
}

fn ip_udp() -> Match {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    m.set_exact(Field::IpProto, 17);
    m
}

/// Instructions encoded one by one, in the order given.
fn instructions(list: &[Instruction]) -> Vec<u8> {
    let mut b = Vec::new();
    for i in list {
        encode_instruction(i, &ip_udp(), &mut b).unwrap();
    }
    b
}

/// A flow-mod body: command, timeouts, priority, flags, cookie, then `matcher` and
/// `instructions` as given.
fn flow_mod_body(command: u8, flags: u16, matcher: &[u8], instructions: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0x1234_5678_9abc_def0u64.to_be_bytes());
    b.extend_from_slice(&0u64.to_be_bytes());
    b.extend_from_slice(&[0, command]);
    b.extend_from_slice(&30u16.to_be_bytes());
    b.extend_from_slice(&600u16.to_be_bytes());
    b.extend_from_slice(&7u16.to_be_bytes());
    b.extend_from_slice(&NO_BUFFER.to_be_bytes());
    b.extend_from_slice(&ports::ANY.to_be_bytes());
    b.extend_from_slice(&pipeline::model::GROUP_ANY.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(matcher);
    b.extend_from_slice(instructions);
    b
}

/// The match fields the flow is sent with: eth_type, ip_proto, udp_dst, a masked ipv4_dst,
/// in_port and a masked metadata — Open vSwitch's order (and the codec's) puts in_port first
/// and metadata last but one, so none of this is where the codec would write it.
fn sent_fields() -> Vec<u8> {
    [
        oxm(5, &[0x08, 0x00], None),
        oxm(10, &[17], None),
        oxm(16, &[0, 53], None),
        oxm(12, &[10, 0, 0, 0], Some(&[255, 0, 0, 0])),
        oxm(0, &[0, 0, 0, 1], None),
        oxm(
            2,
            &[0, 0, 0, 0, 0, 0, 0, 9],
            Some(&[0, 0, 0, 0, 0, 0, 0, 0xff]),
        ),
    ]
    .concat()
}

/// The entry of a one-flow FLOW_STATS reply: (fixed part, match, instructions).
fn one_flow(b: &OfBridge) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let body = multipart_body(b, OFPMP_FLOW, &flow_stats_request());
    let len = usize::from(u16::from_be_bytes([body[0], body[1]]));
    assert_eq!(len, body.len(), "one flow");
    let match_len = usize::from(u16::from_be_bytes([body[50], body[51]])).next_multiple_of(8);
    (
        body[..48].to_vec(),
        body[48..48 + match_len].to_vec(),
        body[48 + match_len..].to_vec(),
    )
}

#[test]
fn flow_stats_give_back_the_flow_as_sent() {
    let b = bridge(FailMode::Secure);
    let matcher = ofp_match(&sent_fields());
    // goto before apply, the apply's actions in an order of their own, clear last: not
    // execution order.
    let sent_ins = instructions(&[
        Instruction::GotoTable(3),
        Instruction::WriteMetadata {
            value: 0x100,
            mask: 0xf00,
        },
        Instruction::ApplyActions(vec![
            Action::SetField {
                field: Field::TpSrc,
                value: 1000,
            },
            Action::Output {
                port: 2,
                max_len: 0,
            },
            Action::DecNwTtl,
            Action::Output {
                port: 1,
                max_len: 0,
            },
        ]),
        Instruction::ClearActions,
    ]);
    // send_flow_rem | check_overlap | no_byt_counts
    let flags = 0x1 | 0x2 | 0x10u16;
    let add = message(
        msg_type::FLOW_MOD,
        &flow_mod_body(0, flags, &matcher, &sent_ins),
    );
    assert!(raw_replies(&b, &add).is_empty());
    let (fixed, m, ins) = one_flow(&b);
    assert_eq!(m, matcher, "the match as sent");
    assert_eq!(ins, sent_ins, "the instructions and actions as sent");
    assert_eq!(&fixed[12..14], &7u16.to_be_bytes(), "priority");
    assert_eq!(&fixed[14..16], &30u16.to_be_bytes(), "idle timeout");
    assert_eq!(&fixed[16..18], &600u16.to_be_bytes(), "hard timeout");
    assert_eq!(&fixed[18..20], &flags.to_be_bytes(), "flags");
    assert_eq!(
        &fixed[24..32],
        &0x1234_5678_9abc_def0u64.to_be_bytes(),
        "cookie"
    );

    // A modify gives the flow new instructions, in their own order; the match stays as sent.
    let new_ins = instructions(&[
        Instruction::GotoTable(4),
        Instruction::ApplyActions(vec![Action::Output {
            port: 2,
            max_len: 0,
        }]),
    ]);
    let modify = message(
        msg_type::FLOW_MOD,
        &flow_mod_body(2, flags, &matcher, &new_ins),
    );
    assert!(raw_replies(&b, &modify).is_empty());
    let (_, m, ins) = one_flow(&b);
    assert_eq!(m, matcher);
    assert_eq!(ins, new_ins);
}

/// A set-field whose name the match does not decide as the controller did: under a UDP
/// match, after rewriting `ip_proto` to TCP, the controller sets `tcp_dst` (the codec alone
/// would write `udp_dst`, one key field). The instructions read back as sent.
#[test]
fn a_set_field_named_otherwise_reads_back_as_sent() {
    let b = bridge(FailMode::Secure);
    let matcher = ofp_match(&[oxm(5, &[0x08, 0x00], None), oxm(10, &[17], None)].concat());
    let set_tcp_dst = oxm(14, &[0, 80], None); // OXM_OF_TCP_DST
    let mut apply = Vec::new();
    encode_action(
        &Action::SetField {
            field: Field::IpProto,
            value: 6,
        },
        &ip_udp(),
        &mut apply,
    )
    .unwrap();
    // OFPAT_SET_FIELD: type 25, length 16 (4 + 6 OXM bytes, padded to 8).
    apply.extend_from_slice(&[0, 25, 0, 16]);
    apply.extend_from_slice(&set_tcp_dst);
    apply.extend_from_slice(&[0; 6]);
    encode_action(
        &Action::Output {
            port: 2,
            max_len: 0,
        },
        &ip_udp(),
        &mut apply,
    )
    .unwrap();
    // OFPIT_APPLY_ACTIONS: type 4, length, 4 bytes of padding, the actions.
    let mut ins = vec![0, 4];
    ins.extend_from_slice(&((8 + apply.len()) as u16).to_be_bytes());
    ins.extend_from_slice(&[0; 4]);
    ins.extend_from_slice(&apply);
    let add = message(msg_type::FLOW_MOD, &flow_mod_body(0, 0, &matcher, &ins));
    assert!(raw_replies(&b, &add).is_empty());
    let (_, m, got) = one_flow(&b);
    assert_eq!(m, matcher);
    assert_eq!(got, ins);
}

/// The same flow written as the codec writes it reads back the same way (no form kept).
#[test]
fn canonical_flows_read_back_canonical() {
    let b = bridge(FailMode::Secure);
    let mut fm = pipeline::model::FlowMod::add(0, 7, ip_udp(), output(2));
    fm.matcher.set_exact(Field::InPort, 1);
    let mut sent = Vec::new();
    openflow::encode(1, &flow_mod(fm), &mut sent).unwrap();
    assert!(raw_replies(&b, &sent).is_empty());
    let (_, m, ins) = one_flow(&b);
    let match_len = usize::from(u16::from_be_bytes([sent[50], sent[51]])).next_multiple_of(8);
    assert_eq!(m, sent[48..48 + match_len]);
    assert_eq!(ins, sent[48 + match_len..]);
}

fn bucket(weight: u16, watch_port: u32, watch_group: u32, actions: &[u8]) -> Vec<u8> {
    let mut b = ((16 + actions.len()) as u16).to_be_bytes().to_vec();
    b.extend_from_slice(&weight.to_be_bytes());
    b.extend_from_slice(&watch_port.to_be_bytes());
    b.extend_from_slice(&watch_group.to_be_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(actions);
    b
}

fn actions(list: &[Action]) -> Vec<u8> {
    let mut b = Vec::new();
    for a in list {
        encode_action(a, &ip_udp(), &mut b).unwrap();
    }
    b
}

fn group_mod(kind: u8, id: u32, buckets: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, kind, 0];
    b.extend_from_slice(&id.to_be_bytes());
    b.extend_from_slice(buckets);
    message(msg_type::GROUP_MOD, &b)
}

#[test]
fn group_desc_gives_back_the_buckets_as_sent() {
    let b = bridge(FailMode::Secure);
    // A select group whose first bucket sets udp_src (a bucket has no match to say it is
    // UDP: the codec alone would write tcp_src) and whose actions are in no sorted order.
    let select = [
        bucket(
            3,
            ports::ANY,
            pipeline::model::GROUP_ANY,
            &actions(&[
                Action::SetField {
                    field: Field::TpSrc,
                    value: 1000,
                },
                Action::DecNwTtl,
                Action::Output {
                    port: 2,
                    max_len: 0,
                },
            ]),
        ),
        bucket(
            7,
            ports::ANY,
            pipeline::model::GROUP_ANY,
            &actions(&[
                Action::Output {
                    port: 1,
                    max_len: 0,
                },
                Action::PopVlan,
            ]),
        ),
    ]
    .concat();
    assert!(raw_replies(&b, &group_mod(1, 5, &select)).is_empty());
    // A fast-failover group watching a port, then a group.
    let ff = [
        bucket(
            0,
            2,
            pipeline::model::GROUP_ANY,
            &actions(&[Action::Group(5)]),
        ),
        bucket(
            0,
            ports::ANY,
            5,
            &actions(&[Action::Output {
                port: 1,
                max_len: 0,
            }]),
        ),
    ]
    .concat();
    assert!(raw_replies(&b, &group_mod(3, 6, &ff)).is_empty());
    let body = multipart_body(&b, OFPMP_GROUP_DESC, &[]);
    let mut at = 0;
    let mut seen = Vec::new();
    while at < body.len() {
        let len = usize::from(u16::from_be_bytes([body[at], body[at + 1]]));
        let (kind, id) = (
            body[at + 2],
            u32::from_be_bytes(body[at + 4..at + 8].try_into().unwrap()),
        );
        seen.push((kind, id, body[at + 8..at + len].to_vec()));
        at += len;
    }
    assert_eq!(seen, [(1, 5, select), (3, 6, ff)]);
}

#[test]
fn meter_config_gives_back_flags_and_bands_as_sent() {
    let b = bridge(FailMode::Secure);
    let band = |kind: u16, rate: u32, burst: u32, prec: u8| {
        let mut v = kind.to_be_bytes().to_vec();
        v.extend_from_slice(&16u16.to_be_bytes());
        v.extend_from_slice(&rate.to_be_bytes());
        v.extend_from_slice(&burst.to_be_bytes());
        v.extend_from_slice(&[prec, 0, 0, 0]);
        v
    };
    // A remark band above a drop band, the higher rate first. Flags: kbps | burst, no stats;
    // no unit at all (kbit/s, as Open vSwitch takes it); pktps | stats.
    let bands = [band(2, 5000, 300, 1), band(1, 2000, 100, 0)].concat();
    for (id, flags) in [(3u32, 0x1 | 0x4u16), (4, 0), (5, 0x2 | 0x8)] {
        let mut mm = vec![0, 0];
        mm.extend_from_slice(&flags.to_be_bytes());
        mm.extend_from_slice(&id.to_be_bytes());
        mm.extend_from_slice(&bands);
        assert!(raw_replies(&b, &message(msg_type::METER_MOD, &mm)).is_empty());
        let mut req = id.to_be_bytes().to_vec();
        req.extend_from_slice(&[0; 4]);
        let body = multipart_body(&b, OFPMP_METER_CONFIG, &req);
        assert_eq!(
            usize::from(u16::from_be_bytes([body[0], body[1]])),
            body.len()
        );
        assert_eq!(&body[2..4], &flags.to_be_bytes(), "meter {id}");
        assert_eq!(&body[4..8], &id.to_be_bytes());
        assert_eq!(&body[8..], &bands[..]);
    }
}

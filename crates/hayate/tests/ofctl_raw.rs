//! A raw OpenFlow session with `hayate run` over TCP: a malformed message gets OFPT_ERROR
//! and the session lives on; a barrier comes back after the flow-mods before it, which are
//! then in the tables; the datapath id given on the command line is the one reported; a
//! match whose prerequisites come after the field that needs them is refused.

mod ofctl_common;

use std::time::Duration;

use ofctl_common::{unhex, Hayate, Session};
use openflow::messages::mods::FlowModMsg;
use openflow::{ErrorCode, Message, NO_BUFFER};
use pipeline::model::{Action, FlowMod, Instruction, Match};

/// A session with `h`, reads waiting at most 5 s.
fn session(h: &Hayate) -> Session {
    h.session(Duration::from_secs(5))
}

fn add(priority: u16, port: u32) -> Message {
    Message::FlowMod(FlowModMsg {
        flow_mod: FlowMod::add(
            0,
            priority,
            Match::ANY,
            vec![Instruction::ApplyActions(vec![Action::Output {
                port,
                max_len: 0,
            }])],
        ),
        buffer_id: NO_BUFFER,
    })
}

#[test]
fn malformed_message_gets_an_error_and_the_session_lives_on() {
    let h = Hayate::start(&[
        "--fail-mode",
        "secure",
        "--datapath-id",
        "0xa1",
        "--port",
        "null:sink",
        "--port",
        "null:sink",
    ]);
    let mut c = session(&h);
    // A flow-mod whose header claims 20 bytes: too short for its body.
    let mut bad = Vec::new();
    openflow::encode(0x77, &add(1, 1), &mut bad).unwrap();
    bad.truncate(20);
    bad[2..4].copy_from_slice(&20u16.to_be_bytes());
    c.send_raw(&bad);
    match c.next() {
        (0x77, Message::Error(e)) => {
            assert_eq!(e.code.kind, openflow::error_type::BAD_REQUEST, "{e:?}");
            assert_eq!(&e.data[..], &bad[..], "the error carries the request");
        }
        other => panic!("expected an error for xid 0x77, got {other:?}"),
    }
    // An unknown type.
    c.send_raw(&[4, 99, 0, 8, 0, 0, 0, 0x78]);
    match c.next() {
        (0x78, Message::Error(e)) => assert_eq!(e.code, ErrorCode::BRC_BAD_TYPE),
        other => panic!("{other:?}"),
    }
    // Still alive: echo and features.
    c.send(0x79, &Message::EchoRequest(b"hi".to_vec()));
    assert_eq!(c.next(), (0x79, Message::EchoReply(b"hi".to_vec())));
    c.send(0x7a, &Message::FeaturesRequest);
    match c.next() {
        (0x7a, Message::FeaturesReply(f)) => {
            assert_eq!(f.datapath_id, 0xa1);
            assert_eq!(f.n_tables, 255, "tables 0 to 254");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn barrier_follows_the_flow_mods_before_it() {
    let h = Hayate::secure_sinks();
    let mut c = session(&h);
    for i in 0..100u16 {
        c.send(u32::from(i) + 1, &add(i + 1, 1 + u32::from(i % 2)));
    }
    c.send(1000, &Message::BarrierRequest);
    // Nothing but the barrier reply comes back: every flow-mod succeeded before it.
    assert_eq!(c.next(), (1000, Message::BarrierReply));
    assert_eq!(c.flow_stats(1001).len(), 100);
}

#[test]
fn packet_out_to_packet_in_round_trip() {
    let h = Hayate::secure_sinks();
    let mut c = session(&h);
    let mut m = Match::ANY;
    m.set_exact(packet::Field::InPort, 1);
    let to_controller = Message::FlowMod(FlowModMsg {
        flow_mod: FlowMod::add(
            0,
            5,
            m,
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: pipeline::model::ports::CONTROLLER,
                max_len: 0xffff,
            }])],
        ),
        buffer_id: NO_BUFFER,
    });
    c.send(1, &to_controller);
    c.send(2, &Message::BarrierRequest);
    assert_eq!(c.next(), (2, Message::BarrierReply));
    let frame = packet::builder::PacketSpec::default().build();
    let mut times = Vec::new();
    for i in 0..200u32 {
        // Idle gaps now and then: the sleeping poll thread and pump must be woken.
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(120));
        }
        let t = std::time::Instant::now();
        c.send(
            100 + i,
            &Message::PacketOut(openflow::PacketOut {
                buffer_id: NO_BUFFER,
                in_port: 1,
                actions: vec![Action::Output {
                    port: pipeline::model::ports::TABLE,
                    max_len: 0,
                }],
                data: frame.clone(),
            }),
        );
        match c.next() {
            (_, Message::PacketIn(pi)) => assert_eq!(pi.data, frame),
            other => panic!("{other:?}"),
        }
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "packet-out → table → packet-in round trip: median {:?}, p99 {:?}, max {:?}",
        times[times.len() / 2],
        times[times.len() * 99 / 100],
        times[times.len() - 1]
    );
    assert!(
        times[times.len() - 1] < Duration::from_millis(50),
        "woken, not waiting for a timer: {times:?}"
    );
}

/// FLOW_MOD ADD table 0 priority 100, `tcp_dst=80` written before `eth_type=0x0800` and
/// `ip_proto=6`, actions=output:2 (xid 0x31). Open vSwitch 3.1 answers it with
/// OFPBMC_BAD_PREREQ too.
const LATE_PREREQ: &str =
    "04 0e 0060 00000031  0000000000000000 0000000000000000  00 00 0000 0000 0064
    ffffffff ffffffff ffffffff 0000 0000
    0001 0015  80001c02 0050  80000a02 0800  80001401 06  000000
    0004 0018 00000000  0000 0010 00000002 ffff 000000000000";

/// The same flow with its prerequisites first, as `ovs-ofctl` writes it (xid 0x32).
const PREREQ_FIRST: &str =
    "04 0e 0060 00000032  0000000000000000 0000000000000000  00 00 0000 0000 0064
    ffffffff ffffffff ffffffff 0000 0000
    0001 0015  80000a02 0800  80001401 06  80001c02 0050  000000
    0004 0018 00000000  0000 0010 00000002 ffff 000000000000";

#[test]
fn a_prerequisite_after_the_field_that_needs_it_is_refused() {
    let h = Hayate::secure_sinks();
    let mut c = session(&h);
    let late = unhex(LATE_PREREQ);
    c.send_raw(&late);
    match c.next() {
        (0x31, Message::Error(e)) => {
            assert_eq!(e.code, ErrorCode::BMC_BAD_PREREQ, "{e:?}");
            assert_eq!(&e.data[..], &late[..64], "the error quotes the request");
        }
        other => panic!("expected OFPBMC_BAD_PREREQ for xid 0x31, got {other:?}"),
    }
    c.send_raw(&unhex(PREREQ_FIRST));
    c.send(0x33, &Message::BarrierRequest);
    assert_eq!(
        c.next(),
        (0x33, Message::BarrierReply),
        "no error for xid 0x32"
    );
    let v = c.flow_stats(0x34);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].priority, 100);
    assert_eq!(v[0].matcher.get(packet::Field::TpDst), (80, 0xffff));
}

/// FLOW_MOD ADD priority 1, no match, apply_actions(push_pbb:0x88e7) (xid 0x41).
const PUSH_PBB: &str =
    "04 0e 0048 00000041  0000000000000000 0000000000000000  00 00 0000 0000 0001
    ffffffff ffffffff ffffffff 0000 0000
    0001 0004 00000000
    0004 0010 00000000  001a 0008 88e7 0000";

/// FLOW_MOD ADD priority 1, match pbb_isid=5 (OXM_OF_PBB_ISID, 3 bytes), no instructions
/// (xid 0x42).
const MATCH_PBB_ISID: &str =
    "04 0e 0040 00000042  0000000000000000 0000000000000000  00 00 0000 0000 0001
    ffffffff ffffffff ffffffff 0000 0000
    0001 000b 80004a03 000005 0000000000";

/// FLOW_MOD ADD priority 2, match eth_type=0x8847, apply_actions(copy_ttl_out, output:2)
/// (xid 0x43): OpenFlow 1.3's copy_ttl_out, which `ovs-ofctl` cannot write.
const COPY_TTL_OUT: &str =
    "04 0e 0060 00000043  0000000000000000 0000000000000000  00 00 0000 0000 0002
    ffffffff ffffffff ffffffff 0000 0000
    0001 000a 80000a02 8847 000000000000
    0004 0020 00000000  000b 0008 00000000  0000 0010 00000002 ffff 000000000000";

/// FLOW_MOD ADD priority 3, match eth_type=0x86dd, ipv6_exthdr=0x40/0x1c0 (hop-by-hop, in
/// order, no repeats), no instructions (xid 0x44).
const EXTHDR: &str = "04 0e 0048 00000044  0000000000000000 0000000000000000  00 00 0000 0000 0003
    ffffffff ffffffff ffffffff 0000 0000
    0001 0012 80000a02 86dd 80004f04 0040 01c0 000000000000";

/// PBB is refused as the specification names it (Hayate has no PBB); copy_ttl_out and
/// ipv6_exthdr, which `ovs-ofctl` cannot send, are taken.
#[test]
fn pbb_is_refused_and_copy_ttl_and_ipv6_exthdr_are_taken() {
    let h = Hayate::secure_sinks();
    let mut c = session(&h);
    for (hex, xid, code) in [
        (PUSH_PBB, 0x41, ErrorCode::BAC_BAD_TYPE),
        (MATCH_PBB_ISID, 0x42, ErrorCode::BMC_BAD_FIELD),
    ] {
        c.send_raw(&unhex(hex));
        match c.next() {
            (x, Message::Error(e)) if x == xid => assert_eq!(e.code, code, "{e:?}"),
            other => panic!("expected {code:?} for xid {xid:#x}, got {other:?}"),
        }
    }
    c.send_raw(&unhex(COPY_TTL_OUT));
    c.send_raw(&unhex(EXTHDR));
    c.send(0x45, &Message::BarrierRequest);
    assert_eq!(
        c.next(),
        (0x45, Message::BarrierReply),
        "no error for 0x43, 0x44"
    );
    let mut v = c.flow_stats(0x46);
    v.sort_by_key(|f| f.priority);
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!(
        v[0].instructions,
        [Instruction::ApplyActions(vec![
            Action::CopyTtlOut,
            Action::Output {
                port: 2,
                max_len: 0xffff
            }
        ])]
    );
    assert_eq!(v[1].matcher.get(packet::Field::Ipv6Exthdr), (0x40, 0x1c0));
}

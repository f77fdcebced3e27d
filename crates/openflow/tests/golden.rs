//! Golden bytes of messages the switch sends (features reply, port-desc reply, flow-stats
//! reply, packet-in). The bytes were checked by `ovs-ofctl ofp-print` (see tests/ofp_print.rs
//! for the same messages read back by Open vSwitch); this test pins them so a change to the
//! encoder shows up as a diff of hex.

use openflow::multipart::{FlowStats, MultipartReplyBody as Rep};
use openflow::{
    decode, encode, FeaturesReply, Message, MultipartReply, PacketIn, PortDesc, NO_BUFFER,
};
use packet::Field;
use pipeline::model::{FlowFlags, Match};
use pipeline::ofctl::parse_flow;
use pipeline::PacketInReason;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn check(msg: Message, want: &str) {
    let mut b = Vec::new();
    encode(7, &msg, &mut b).expect("encodes");
    assert_eq!(hex(&b), want.replace([' ', '\n'], ""), "{msg:?}");
    assert_eq!(decode(&b).expect("decodes").1, msg);
}

#[test]
fn features_reply() {
    check(
        Message::FeaturesReply(FeaturesReply {
            datapath_id: 0x0200_0000_0001,
            n_buffers: 0,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: 0x4f,
            reserved: 0,
        }),
        "04060020 00000007 0000020000000001 00000000 fe000000 0000004f 00000000",
    );
}

#[test]
fn port_desc_reply() {
    let p = PortDesc {
        port_no: 1,
        hw_addr: [2, 0, 0, 0, 0, 1],
        name: "veth1".into(),
        config: 0,
        state: 4,
        curr: 0x840,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 10_000_000,
        max_speed: 10_000_000,
    };
    check(
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: Rep::PortDesc(vec![p]),
        }),
        "04130050 00000007 000d0000 00000000
         00000001 00000000 020000000001 0000 7665746831000000 0000000000000000
         00000000 00000004 00000840 00000000 00000000 00000000 00989680 00989680",
    );
}

#[test]
fn flow_stats_reply() {
    let fm = parse_flow("priority=100,cookie=0x7,tcp,tp_dst=80,actions=output:3").unwrap();
    check(
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: Rep::Flow(vec![FlowStats {
                table_id: 0,
                duration_sec: 12,
                duration_nsec: 5,
                priority: 100,
                idle_timeout: 0,
                hard_timeout: 0,
                flags: FlowFlags::default(),
                cookie: 7,
                packet_count: 1000,
                byte_count: 64000,
                matcher: fm.matcher,
                instructions: fm.instructions,
                matcher_as_sent: None,
                instructions_as_sent: None,
            }]),
        }),
        "04130070 00000007 00010000 00000000
         0060 00 00 0000000c 00000005 0064 0000 0000 0000 00000000
         0000000000000007 00000000000003e8 000000000000fa00
         0001 0015 80000a02 0800 80001401 06 80001c02 0050 000000
         0004 0018 00000000 0000 0010 00000003 0000 000000000000",
    );
}

#[test]
fn packet_in() {
    let mut m = Match::ANY;
    m.set_exact(Field::InPort, 3);
    check(
        Message::PacketIn(PacketIn {
            buffer_id: NO_BUFFER,
            total_len: 4,
            reason: PacketInReason::NoMatch,
            table_id: 0,
            cookie: u64::MAX,
            matcher: m,
            data: vec![0xde, 0xad, 0xbe, 0xef],
        }),
        "04 0a 002e 00000007 ffffffff 0004 00 00 ffffffffffffffff
         0001 000c 80000004 00000003 00000000 0000 deadbeef",
    );
}

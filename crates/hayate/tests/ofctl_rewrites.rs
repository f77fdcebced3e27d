//! Through `hayate run`: set-field of `ip_proto` and of an SCTP port (issue 20 §2), installed
//! over a raw OpenFlow session (`ovs-ofctl` refuses to write `ip_proto`) — packets sent
//! through the tables by packet-outs leave with the new values and every checksum right (the
//! IPv4 header's, SCTP's CRC32c over the whole packet).

mod ofctl_common;

use std::net::Ipv4Addr;
use std::time::Duration;

use ofctl_common::{have_ofctl, sent_on_port_2, sink_and_pcap};
use openflow::{Message, PacketOut, NO_BUFFER};
use packet::builder::{L4Spec, PacketSpec};
use packet::checksum::{checksum, crc32c};
use packet::Field;
use pipeline::model::{ports, Action, FlowMod, Instruction, Match};

fn frame(l4: L4Spec) -> Vec<u8> {
    let mut s = PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        1234,
        80,
        80,
    );
    s.l4 = l4;
    s.build()
}

fn flow(proto: u8, set: Field, value: u128) -> FlowMod {
    let mut m = Match::ANY;
    m.set_exact(Field::EthType, 0x0800);
    m.set_exact(Field::IpProto, u128::from(proto));
    FlowMod::add(
        0,
        10,
        m,
        vec![Instruction::ApplyActions(vec![
            Action::SetField { field: set, value },
            Action::Output {
                port: 2,
                max_len: 0,
            },
        ])],
    )
}

#[test]
fn ip_proto_and_sctp_port_rewrites_leave_with_their_checksums_right() {
    if !have_ofctl("ip_proto_and_sctp_port_rewrites_leave_with_their_checksums_right") {
        return;
    }
    let mut h = sink_and_pcap();
    let mut s = h.session(Duration::from_secs(5));
    // The flow: a UDP packet leaves as protocol 6.
    s.flow_mod(1, flow(17, Field::IpProto, 6));
    s.flow_mod(2, flow(132, Field::TpDst, 9999));
    s.barrier(3);
    let udp = frame(L4Spec::Udp { sp: 1234, dp: 80 });
    let sctp = frame(L4Spec::Sctp { sp: 5000, dp: 80 });
    for (xid, data) in [(4, &udp), (5, &sctp)] {
        s.send(
            xid,
            &Message::PacketOut(PacketOut {
                buffer_id: NO_BUFFER,
                in_port: 1,
                actions: vec![Action::Output {
                    port: ports::TABLE,
                    max_len: 0,
                }],
                data: data.clone(),
            }),
        );
    }
    s.barrier(6);
    let pkts = sent_on_port_2(&mut h, 2);
    let (p, q) = (&pkts[0], &pkts[1]);
    // ip_proto: the byte changed, the rest as sent, the header checksum right.
    assert_eq!(p[23], 6);
    assert_eq!(checksum(&p[14..34]), 0, "IPv4 header checksum");
    assert_eq!((&p[..23], &p[34..]), (&udp[..23], &udp[34..]));
    // SCTP: the port changed and the CRC32c over the whole SCTP packet is right again.
    assert_eq!(&q[36..38], &9999u16.to_be_bytes());
    let mut zeroed = q[34..].to_vec();
    let sent_crc = u32::from_le_bytes(zeroed[8..12].try_into().unwrap());
    zeroed[8..12].fill(0);
    assert_eq!(crc32c(&zeroed), sent_crc, "SCTP CRC32c");
    assert_ne!(q[42..46], sctp[42..46], "the CRC changed with the port");
}

//! Through `hayate run` (issue 20 §2): a flow read back as the controller wrote it — match
//! fields in its order, instructions in its order — and an MPLS packet whose label a table
//! pops, after which a later table matches the IP header that was under the label.

mod ofctl_common;

use std::time::Duration;

use ofctl_common::{
    have_ofctl, sent_on_port_2, sink_and_pcap, unhex, Hayate, Session, UDP_FRAME_HEX,
};
use openflow::messages::mods::FlowModMsg;
use openflow::multipart::FlowStatsRequest;
use openflow::{msg_type, Message, MultipartRequest, MultipartRequestBody, NO_BUFFER};
use packet::Field;
use pipeline::model::{Action, FlowFlags, FlowMod, Instruction, Match};

/// The OXM TLVs of an `ofp_match` starting at `at` in `msg`: (where the fields start, each
/// TLV's bytes).
fn tlvs(msg: &[u8], at: usize) -> (usize, Vec<Vec<u8>>) {
    let len = usize::from(u16::from_be_bytes([msg[at + 2], msg[at + 3]]));
    let (start, end) = (at + 4, at + len);
    let mut out = Vec::new();
    let mut i = start;
    while i < end {
        let n = 4 + usize::from(msg[i + 3]);
        out.push(msg[i..i + n].to_vec());
        i += n;
    }
    (start, out)
}

/// The raw reply to a flow statistics request for every flow.
fn flow_stats_raw(s: &mut Session, xid: u32) -> Vec<u8> {
    s.send(
        xid,
        &Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: MultipartRequestBody::Flow(FlowStatsRequest::default()),
        }),
    );
    loop {
        let m = s.read_raw();
        if m[1] == msg_type::MULTIPART_REPLY && m[4..8] == xid.to_be_bytes() {
            return m;
        }
    }
}

#[test]
fn a_flow_reads_back_as_the_controller_wrote_it() {
    let h = Hayate::secure_sinks();
    let mut s = h.session(Duration::from_secs(5));
    let mut m = Match::ANY;
    m.set_exact(Field::InPort, 1);
    m.set_exact(Field::EthType, 0x0800);
    m.set_exact(Field::IpProto, 17);
    m.set_masked(Field::Ipv4Dst, 0x0a00_0000, 0xff00_0000);
    m.set_exact(Field::TpDst, 53);
    let mut fm = FlowMod::add(
        0,
        7,
        m,
        // Not execution order: goto before apply; the actions in an order of their own.
        vec![
            Instruction::GotoTable(1),
            Instruction::ApplyActions(vec![
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
        ],
    );
    fm.cookie = 0xfeed;
    fm.idle_timeout = 100;
    fm.hard_timeout = 200;
    fm.flags = FlowFlags {
        send_flow_rem: true,
        no_pkt_counts: true,
        ..FlowFlags::default()
    };
    let mut sent = Vec::new();
    openflow::encode(
        1,
        &Message::FlowMod(FlowModMsg {
            flow_mod: fm,
            buffer_id: NO_BUFFER,
        }),
        &mut sent,
    )
    .unwrap();
    // The codec writes in_port first; the controller here writes it last.
    let (start, mut fields) = tlvs(&sent, 48);
    let in_port = fields.remove(0);
    fields.push(in_port);
    let reordered = fields.concat();
    sent[start..start + reordered.len()].copy_from_slice(&reordered);
    s.send_raw(&sent);
    s.barrier(2);

    let reply = flow_stats_raw(&mut s, 3);
    let entry = &reply[16..];
    let sent_body = &sent[8..];
    // cookie, timeouts, priority, flags as sent
    assert_eq!(&entry[24..32], &sent_body[0..8], "cookie");
    assert_eq!(&entry[12..14], &sent_body[22..24], "priority");
    assert_eq!(&entry[14..18], &sent_body[18..22], "timeouts");
    assert_eq!(&entry[18..20], &sent_body[36..38], "flags");
    // match and instructions, byte for byte
    assert_eq!(&entry[48..], &sent[48..], "match and instructions as sent");

    // ovs-ofctl reads it as the flow it is.
    if have_ofctl("a_flow_reads_back_as_the_controller_wrote_it") {
        let text = h.ofctl("dump-flows", &[]);
        assert!(
            text.contains("udp,in_port=1,nw_dst=10.0.0.0/8,tp_dst=53")
                && text.contains("actions=output:2,dec_ttl,output:1,goto_table:1"),
            "{text}"
        );
    }
}

/// A frame of `UDP_FRAME_HEX` under one MPLS label (16, bottom of the stack, TTL 64), to
/// IPv4 destination 10.0.0.`dst`.
fn labelled(dst: u8) -> String {
    let mut f = unhex(UDP_FRAME_HEX);
    f[33] = dst;
    let mut out = f[..12].to_vec();
    out.extend_from_slice(&[0x88, 0x47, 0x00, 0x01, 0x01, 0x40]);
    out.extend_from_slice(&f[14..]);
    out.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn after_a_pop_mpls_a_later_table_matches_the_ip_header() {
    if !have_ofctl("after_a_pop_mpls_a_later_table_matches_the_ip_header") {
        return;
    }
    let mut h = sink_and_pcap();
    h.ofctl(
        "add-flow",
        &["table=0,priority=10,mpls,mpls_label=16,actions=pop_mpls:0x0800,goto_table:1"],
    );
    h.ofctl(
        "add-flow",
        &["table=1,priority=10,udp,nw_dst=10.0.0.2,tp_dst=1024,actions=dec_ttl,output:2"],
    );
    for dst in [3, 2] {
        h.ofctl(
            "packet-out",
            &[&format!("in_port=1 packet={} actions=table", labelled(dst))],
        );
    }
    let pkts = sent_on_port_2(&mut h, 1);
    let orig = unhex(UDP_FRAME_HEX);
    // The packet to 10.0.0.3 was sent first and matched nothing in table 1.
    let p = &pkts[0];
    assert_eq!(p.len(), orig.len(), "the label is gone");
    assert_eq!(&p[12..14], &[0x08, 0x00]);
    assert_eq!(
        p[22], 63,
        "dec_ttl on the IP header that was under the label"
    );
    assert_eq!(&p[26..34], &orig[26..34], "addresses");
}

//! Flow lines and the exact [`FlowMod`] each gives; one test per error message.

use packet::Field;

use super::*;
use crate::model::{ports, Action, FlowFlags, FlowMod, FlowModCommand, Instruction, Match};
use crate::ofctl::format_flow_stats;

fn out(port: u32) -> Action {
    Action::Output { port, max_len: 0 }
}

fn apply(a: Vec<Action>) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(a)]
}

fn m(fields: &[(Field, u128, u128)]) -> Match {
    let mut m = Match::ANY;
    for &(f, v, mask) in fields {
        m.set_masked(f, v, mask);
    }
    m
}

const IP: (Field, u128, u128) = (Field::EthType, 0x0800, 0xffff);
const IP6: (Field, u128, u128) = (Field::EthType, 0x86dd, 0xffff);
const ARP: (Field, u128, u128) = (Field::EthType, 0x0806, 0xffff);
const TCP: (Field, u128, u128) = (Field::IpProto, 6, 0xff);

#[test]
fn table_of_flows() {
    let mut with_cookie = FlowMod::add(0, 32768, Match::ANY, vec![]);
    with_cookie.cookie = 0x5;
    with_cookie.idle_timeout = 10;
    with_cookie.hard_timeout = 30;
    with_cookie.flags = FlowFlags {
        send_flow_rem: true,
        check_overlap: true,
        reset_counts: true,
        no_pkt_counts: true,
        no_byte_counts: true,
    };
    let cases: Vec<(&str, FlowMod)> = vec![
        (
            "table=0,priority=10,in_port=1,dl_dst=00:00:00:00:00:02,actions=output:2",
            FlowMod::add(
                0,
                10,
                m(&[(Field::InPort, 1, !0), (Field::EthDst, 2, !0)]),
                apply(vec![out(2)]),
            ),
        ),
        (
            "ip,nw_dst=10.0.0.0/8,actions=drop",
            FlowMod::add(
                0,
                32768,
                m(&[IP, (Field::Ipv4Dst, 0x0a00_0000, 0xff00_0000)]),
                vec![],
            ),
        ),
        (
            "priority=5,tcp,tp_dst=80,actions=mod_vlan_vid:10,goto_table:1",
            FlowMod::add(
                0,
                5,
                m(&[IP, TCP, (Field::TpDst, 80, 0xffff)]),
                vec![
                    Instruction::ApplyActions(vec![Action::SetField {
                        field: Field::VlanVid,
                        value: 0x100a,
                    }]),
                    Instruction::GotoTable(1),
                ],
            ),
        ),
        (
            "cookie=0x5,idle_timeout=10,hard_timeout=30,send_flow_rem,check_overlap,\
             reset_counts,no_packet_counts,no_byte_counts,actions=drop",
            with_cookie,
        ),
        (
            "eth_src=00:11:22:33:44:55/ff:ff:ff:00:00:00,eth_type=0x88cc actions=LOCAL",
            FlowMod::add(
                0,
                32768,
                m(&[
                    (Field::EthSrc, 0x0011_2233_4455, 0xffff_ff00_0000),
                    (Field::EthType, 0x88cc, 0xffff),
                ]),
                apply(vec![out(ports::LOCAL)]),
            ),
        ),
        (
            "dl_vlan=0xffff,actions=push_vlan:0x8100,mod_vlan_vid:7,output:3",
            FlowMod::add(
                0,
                32768,
                m(&[(Field::VlanVid, 0, 0x1fff)]),
                apply(vec![
                    Action::PushVlan(0x8100),
                    Action::SetField {
                        field: Field::VlanVid,
                        value: 0x1007,
                    },
                    out(3),
                ]),
            ),
        ),
        (
            "vlan_tci=0x1000/0x1000,dl_vlan_pcp=5,actions=strip_vlan,normal",
            FlowMod::add(
                0,
                32768,
                m(&[(Field::VlanTci, 0xb000, 0xf000)]),
                apply(vec![Action::PopVlan, out(ports::NORMAL)]),
            ),
        ),
        (
            "udp6,ipv6_src=2001:db8::/32,udp_dst=0x1000/0xf000,ipv6_label=0x12345,\
             actions=set_field:2001:db8::1->ipv6_dst,output:1",
            FlowMod::add(
                0,
                32768,
                m(&[
                    IP6,
                    (Field::IpProto, 17, 0xff),
                    (Field::Ipv6Src, 0x2001_0db8 << 96, u128::MAX << 96),
                    (Field::TpDst, 0x1000, 0xf000),
                    (Field::Ipv6Label, 0x12345, 0xfffff),
                ]),
                apply(vec![
                    Action::SetField {
                        field: Field::Ipv6Dst,
                        value: (0x2001_0db8 << 96) | 1,
                    },
                    out(1),
                ]),
            ),
        ),
        (
            "arp,arp_op=1,arp_spa=10.0.0.1,arp_tha=00:00:00:00:00:09,actions=flood",
            FlowMod::add(
                0,
                32768,
                m(&[
                    ARP,
                    (Field::ArpOp, 1, 0xffff),
                    (Field::Ipv4Src, 0x0a00_0001, !0),
                    (Field::ArpTha, 9, !0),
                ]),
                apply(vec![out(ports::FLOOD)]),
            ),
        ),
        (
            "icmp6,icmp_type=135,nd_target=fe80::1,nd_sll=00:00:00:00:00:01,actions=controller",
            FlowMod::add(
                0,
                32768,
                m(&[
                    IP6,
                    (Field::IpProto, 58, 0xff),
                    (Field::IcmpType, 135, 0xff),
                    (Field::NdTarget, (0xfe80 << 112) | 1, !0),
                    (Field::ArpSha, 1, !0),
                ]),
                apply(vec![Action::Output {
                    port: ports::CONTROLLER,
                    max_len: 0xffff,
                }]),
            ),
        ),
        (
            "icmp,icmp_type=8,icmp_code=0,nw_tos=0xb8,nw_ecn=1,nw_ttl=64,nw_frag=no,\
             actions=dec_ttl,mod_nw_ttl:3,in_port",
            FlowMod::add(
                0,
                32768,
                m(&[
                    IP,
                    (Field::IpProto, 1, 0xff),
                    (Field::IcmpType, 8, 0xff),
                    (Field::IcmpCode, 0, 0xff),
                    (Field::IpDscp, 46, 0x3f),
                    (Field::IpEcn, 1, 3),
                    (Field::IpTtl, 64, 0xff),
                    (Field::IpFrag, 0, 1),
                ]),
                apply(vec![
                    Action::DecNwTtl,
                    Action::SetNwTtl(3),
                    out(ports::IN_PORT),
                ]),
            ),
        ),
        (
            "table=1,metadata=0x5/0xff,tun_id=0x64,tcp6,tcp_flags=0x2/0x12,\
             actions=meter:3,write_actions(group:4),write_metadata:0x1/0x1,goto_table:2",
            FlowMod::add(
                1,
                32768,
                m(&[
                    IP6,
                    TCP,
                    (Field::Metadata, 5, 0xff),
                    (Field::TunnelId, 0x64, !0),
                    (Field::TcpFlags, 2, 0x12),
                ]),
                vec![
                    Instruction::Meter(3),
                    Instruction::WriteActions(vec![Action::Group(4)]),
                    Instruction::WriteMetadata { value: 1, mask: 1 },
                    Instruction::GotoTable(2),
                ],
            ),
        ),
        (
            "tun_id=0x2a,tun_src=192.168.1.1,tun_ipv6_dst=2001:db8::/64,\
             actions=set_field:10.0.0.2->tun_dst,set_tunnel:42,output:2",
            FlowMod::add(
                0,
                32768,
                m(&[
                    (Field::TunnelId, 0x2a, !0),
                    (Field::TunSrc, 0xc0a8_0101, 0xffff_ffff),
                    (Field::TunIpv6Dst, 0x2001_0db8 << 96, u128::MAX << 64),
                ]),
                apply(vec![
                    Action::SetField {
                        field: Field::TunDst,
                        value: 0x0a00_0002,
                    },
                    Action::SetField {
                        field: Field::TunnelId,
                        value: 42,
                    },
                    out(2),
                ]),
            ),
        ),
        (
            "sctp,sctp_src=9,nw_src=192.168.0.0/255.255.0.0 actions=set_queue:2,2",
            FlowMod::add(
                0,
                32768,
                m(&[
                    IP,
                    (Field::IpProto, 132, 0xff),
                    (Field::TpSrc, 9, 0xffff),
                    (Field::Ipv4Src, 0xc0a8_0000, 0xffff_0000),
                ]),
                apply(vec![Action::SetQueue(2), out(2)]),
            ),
        ),
        (
            "cookie=0x0, duration=3.2s, table=0, n_packets=5, n_bytes=300, priority=7,ip \
             actions=drop",
            FlowMod::add(0, 7, m(&[IP]), vec![]),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse_flow(text), Ok(want), "{text}");
    }
}

#[test]
fn mod_and_del_flows() {
    let d = parse_flow_match(
        "cookie=0x5/0xff,out_port=2,out_group=7,in_port=1",
        FlowModCommand::DeleteStrict,
    )
    .unwrap();
    assert_eq!(d.command, FlowModCommand::DeleteStrict);
    assert_eq!(d.table_id, crate::model::ALL_TABLES);
    assert_eq!((d.cookie, d.cookie_mask), (5, 0xff));
    assert_eq!((d.out_port, d.out_group), (2, 7));
    assert!(d.instructions.is_empty());
    let d = parse_flow_match("table=255,cookie=0x5/-1", FlowModCommand::Delete).unwrap();
    assert_eq!((d.table_id, d.cookie_mask), (255, u64::MAX));
    let md = parse_flow_match("cookie=0x9,ip,actions=output:1", FlowModCommand::Modify).unwrap();
    assert_eq!((md.table_id, md.cookie, md.cookie_mask), (0, 9, 0));
    assert_eq!(md.instructions, apply(vec![out(1)]));
}

fn err(text: &str) -> String {
    parse_flow(text).unwrap_err().to_string()
}

fn err_for(text: &str, command: FlowModCommand) -> String {
    parse_flow_match(text, command).unwrap_err().to_string()
}

#[test]
fn error_unknown_action() {
    assert!(err("in_port=1,actions=outptu:2").starts_with(
        "flow \"in_port=1,actions=outptu:2\": unknown action \"outptu\"; \
         expected one of output, drop, normal, "
    ));
    let e = parse_flow("in_port=1,actions=outptu:2").unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownAction);
    assert_eq!(e.word, "outptu");
}

#[test]
fn error_unknown_field() {
    let e = parse_flow("in_prot=1,actions=drop").unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownField);
    assert!(e
        .to_string()
        .starts_with("flow \"in_prot=1,actions=drop\": unknown field \"in_prot\"; expected"));
    assert!(err("tcpp,actions=drop").contains("unknown field \"tcpp\""));
}

#[test]
fn error_duplicate_field() {
    assert!(
        err("dl_dst=00:00:00:00:00:01,eth_dst=00:00:00:00:00:01,actions=drop")
            .contains("duplicate field eth_dst (already given as dl_dst)")
    );
    assert!(err("priority=1,priority=2,actions=drop").contains("duplicate field priority"));
}

#[test]
fn error_out_of_range() {
    assert!(err("dl_vlan=4096,actions=drop").contains(
        "dl_vlan 4096 is out of range 0..=4095; use 0xffff to match frames without a VLAN tag"
    ));
    assert!(err("priority=65536,actions=drop").contains("priority 65536 is out of range 0..=65535"));
    assert!(err("table=255,actions=drop").contains("only del-flows may use table=255"));
    assert!(err("ip,nw_dst=10.0.0.0/33,actions=drop").contains("out of range 0..=32"));
}

#[test]
fn error_missing_actions() {
    assert_eq!(
        err("in_port=1"),
        "flow \"in_port=1\": missing actions=; end the flow with actions=... \
         (actions=drop for a flow that drops)"
    );
    assert!(err_for("in_port=1", FlowModCommand::ModifyStrict).contains("missing actions="));
}

#[test]
fn error_actions_on_delete() {
    assert!(err_for("in_port=1,actions=drop", FlowModCommand::Delete)
        .contains("del-flows takes no actions="));
}

#[test]
fn error_bad_mac() {
    assert!(err("dl_dst=00:00:00:00:02,actions=drop")
        .contains("dl_dst value \"00:00:00:00:02\" is not a MAC address"));
}

#[test]
fn error_bad_ip() {
    assert!(err("ip,nw_src=10.0.0,actions=drop")
        .contains("nw_src value \"10.0.0\" is not an IPv4 address"));
    assert!(err("ipv6,ipv6_src=fe80:::1,actions=drop")
        .contains("ipv6_src value \"fe80:::1\" is not an IPv6 address"));
}

#[test]
fn error_bad_number() {
    assert!(err("in_port=one,actions=drop").contains("in_port value \"one\" is not a port"));
    assert!(err("priority=high,actions=drop").contains("priority value \"high\" is not a number"));
}

#[test]
fn error_prerequisite() {
    assert!(err("tp_dst=80,actions=drop")
        .contains("tp_dst needs a protocol; add tcp, udp or sctp before it"));
    assert!(err("nw_src=10.0.0.1,actions=drop")
        .contains("nw_src needs a protocol; add ip or arp before it"));
    assert!(err("udp,tcp_dst=80,actions=drop").contains("tcp_dst needs TCP; add tcp or tcp6"));
    assert!(err("ip,ipv6_dst=::1,actions=drop").contains("ipv6_dst needs IPv6; add ipv6"));
}

#[test]
fn error_conflict() {
    assert!(err("tcp,udp,actions=drop").contains("udp conflicts with tcp"));
    assert!(err("ip,dl_type=0x86dd,actions=drop").contains("dl_type=0x86dd conflicts with ip"));
}

#[test]
fn error_mask_not_allowed() {
    assert!(err("in_port=1/1,actions=drop").contains("in_port does not take a mask"));
}

#[test]
fn error_field_without_value() {
    assert!(err("in_port,actions=drop").contains("in_port needs a value; write in_port=VALUE"));
}

#[test]
fn error_flag_with_value() {
    assert!(err("send_flow_rem=1,actions=drop").contains("send_flow_rem is a flag"));
}

#[test]
fn error_cookie_mask_on_add() {
    assert!(err("cookie=0x5/0xff,actions=drop")
        .contains("a cookie mask only filters mod-flows and del-flows, not add-flow"));
}

#[test]
fn error_cookie_without_mask_on_delete() {
    assert!(err_for("cookie=0x5", FlowModCommand::Delete)
        .contains("del-flows filters by cookie only with a mask; write cookie=0x5/-1"));
}

#[test]
fn error_out_port_on_add() {
    assert!(err("out_port=1,actions=drop").contains("out_port only filters"));
}

#[test]
fn error_goto_backwards() {
    assert!(err("table=3,actions=goto_table:2")
        .contains("goto_table:2 must name a later table than table=3"));
}

#[test]
fn error_vlan_vid_without_present_bit() {
    assert!(err("vlan_vid=10,actions=drop").contains("lacks the tag-present bit"));
}

#[test]
fn error_nw_tos_with_ecn_bits() {
    assert!(err("ip,nw_tos=1,actions=drop").contains("sets the ECN bits"));
}

#[test]
fn error_unbalanced_parentheses() {
    assert!(err("actions=write_actions(output:1").contains("unbalanced parentheses"));
}

#[test]
fn files_of_flows_skip_comments_and_name_the_line() {
    let text = "# two flows\n\nin_port=1,actions=output:2\n  in_port=2 actions=output:1\n";
    let flows = parse_flows(text, FlowModCommand::Add).unwrap();
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[1].instructions, apply(vec![out(1)]));
    let e = parse_flows("in_port=1,actions=drop\nin_port=2\n", FlowModCommand::Add).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e
        .to_string()
        .starts_with("line 2: flow \"in_port=2\": missing actions="));
}

#[test]
fn error_cvlan_without_outer_tag() {
    assert!(err("cvlan_tci=0x1005,actions=drop").contains("cvlan_tci needs an outer VLAN tag"));
    assert!(parse_flow("dl_vlan=5,cvlan_tci=0x1005,actions=drop").is_ok());
}

/// Flows other crates' docs, configs and benchmarks use: they parse, and the pipeline's own
/// validation accepts their matches.
#[test]
fn flows_used_elsewhere_parse_and_validate() {
    for text in [
        "table=0,priority=10,in_port=1,dl_dst=00:00:00:00:00:02,actions=output:2",
        "table=0,priority=0,actions=normal",
        "table=0,priority=10,in_port=1,actions=write_metadata:0x1/0xff,goto_table:1",
        "table=1,priority=10,ip,metadata=0x1/0xff,\
         actions=set_field:02:00:00:00:00:aa->eth_src,goto_table:2",
        "table=2,priority=10,udp,actions=push_vlan:0x8100,set_field:4196->vlan_vid,goto_table:3",
        "table=0,priority=7,udp,in_port=1,nw_src=10.1.2.0/24,tp_dst=9,actions=output:2",
        "table=1,priority=10,ip,nw_dst=10.0.0.2,actions=output:2",
        "priority=5,tcp,tp_dst=80,actions=mod_vlan_vid:10,goto_table:1",
        "dl_vlan=5,dl_vlan_pcp=3,actions=strip_vlan,output:1",
        "icmp6,icmp_type=135,nd_target=fe80::1,nd_sll=00:00:00:00:00:01,actions=controller",
        "arp,arp_op=1,arp_spa=10.0.0.1,arp_tha=00:00:00:00:00:09,actions=flood",
        "tcp6,tcp_flags=0x2/0x12,ipv6_label=0x5,actions=drop",
    ] {
        let fm = parse_flow(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(crate::flow::check_match(&fm.matcher), Ok(()), "{text}");
    }
}

#[test]
fn dump_flows_with_counters_reads_back() {
    let fm =
        parse_flow("table=2,idle_timeout=10,send_flow_rem,priority=9,ip,actions=output:1").unwrap();
    let view = crate::stats::FlowView {
        table_id: fm.table_id,
        priority: fm.priority,
        matcher: fm.matcher,
        cookie: 0x7,
        instructions: fm.instructions.clone(),
        packets: 3,
        bytes: 180,
        duration_ms: 1500,
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        flags: fm.flags,
        matcher_as_sent: None,
        instructions_as_sent: None,
    };
    let text = format_flow_stats(&view);
    assert_eq!(
        text,
        "cookie=0x7, duration=1.500s, table=2, n_packets=3, n_bytes=180, idle_timeout=10, \
         send_flow_rem, priority=9,ip actions=output:1"
    );
    let mut want = fm;
    want.cookie = 0x7;
    assert_eq!(parse_flow(&text), Ok(want));
}

/// MPLS words in `ovs-ofctl` syntax, and the text `ovs-ofctl dump-flows` prints for them
/// (Open vSwitch 3.1: `set_field:16->mpls_label`, `set_mpls_ttl(9)`), which parses back.
#[test]
fn mpls_words_parse_and_print_as_ovs_ofctl() {
    let text = "priority=5,mpls,in_port=1,mpls_label=16,mpls_tc=2,mpls_ttl=3,mpls_bos=1,\
                actions=pop_mpls:0x0800,output:2";
    let fm = parse_flow(text).unwrap();
    assert_eq!(fm.matcher.get(Field::EthType), (0x8847, 0xffff));
    assert_eq!(fm.matcher.get(Field::MplsLabel), (16, 0xf_ffff));
    assert_eq!(fm.matcher.get(Field::MplsBos), (1, 1));
    assert_eq!(
        crate::ofctl::format_flow_mod(&fm),
        "cookie=0x0, table=0, priority=5,mpls,in_port=1,mpls_label=16,mpls_tc=2,mpls_ttl=3,mpls_bos=1 \
         actions=pop_mpls:0x0800,output:2"
    );
    let push = "priority=5,ip,actions=push_mpls:0x8847,set_mpls_label:16,set_mpls_tc:2,\
                set_mpls_ttl:9,dec_mpls_ttl,copy_ttl_out,copy_ttl_in,output:2";
    let fm = parse_flow(push).unwrap();
    assert_eq!(
        fm.instructions,
        apply(vec![
            Action::PushMpls(0x8847),
            Action::SetField {
                field: Field::MplsLabel,
                value: 16
            },
            Action::SetField {
                field: Field::MplsTc,
                value: 2
            },
            Action::SetMplsTtl(9),
            Action::DecMplsTtl,
            Action::CopyTtlOut,
            Action::CopyTtlIn,
            out(2),
        ])
    );
    let printed = crate::ofctl::format_flow_mod(&fm);
    assert_eq!(
        printed,
        "cookie=0x0, table=0, priority=5,ip actions=push_mpls:0x8847,set_field:16->mpls_label,\
         set_field:2->mpls_tc,set_mpls_ttl(9),dec_mpls_ttl,copy_ttl_out,copy_ttl_in,output:2"
    );
    assert_eq!(parse_flow(&printed).unwrap(), fm);
    let m = parse_flow("mplsm,ipv6_exthdr=0x40,actions=drop");
    assert!(m.is_err(), "ipv6_exthdr needs ipv6");
    let v6 = parse_flow("ipv6,ipv6_exthdr=0x40/0x1c0,actions=drop").unwrap();
    assert_eq!(v6.matcher.get(Field::Ipv6Exthdr), (0x40, 0x1c0));
    assert!(err("actions=push_mpls:0x0800").contains("not an MPLS ethertype"));
    assert!(err("actions=set_mpls_label:0x100000").contains("out of range"));
    assert!(err("mpls,actions=set_field:1->mpls_bos").contains("cannot write mpls_bos"));
}

/// Text lists instructions in execution order, as ovs-ofctl does, whatever order a flow was
/// given them in (its FLOW_STATS on the wire keep that order).
#[test]
fn text_lists_instructions_in_execution_order() {
    let given = [
        Instruction::GotoTable(2),
        Instruction::ApplyActions(vec![Action::Output {
            port: 1,
            max_len: 0,
        }]),
        Instruction::Meter(3),
    ];
    assert_eq!(
        crate::ofctl::format::format_actions(&given),
        "meter:3,output:1,goto_table:2"
    );
}

//! Matches, actions and flows back into text, in `ovs-ofctl dump-flows` style: the protocol
//! shorthand first (`tcp`, `udp`, `ip`, `arp`, ...), then the fields in Open vSwitch's order,
//! with `ovs-ofctl` names (`dl_dst`, `nw_src`, `tp_dst`, ...).
//!
//! Every match and flow the parser produces formats to text that parses back to the same
//! value. Matches built by other means print faithfully too, falling back to raw
//! `field=value/mask` where no friendlier spelling says exactly the same bits.

use std::fmt::Write;

use packet::key::frag;
use packet::Field;

use super::fields::exact;
use super::values::{format_masked, format_port, format_value, Syntax};
use crate::model::{ports, Action, FlowMod, FlowModCommand, Instruction, Match, GROUP_ANY};
use crate::stats::FlowView;

/// The protocol shorthand for an exact eth_type (and ip_proto), and whether it covers the
/// ip_proto.
fn shorthand(m: &Match) -> Option<(&'static str, bool)> {
    let proto = exact(m, Field::IpProto);
    let pick = |names: &[(u128, &'static str)], base: &'static str| match proto
        .and_then(|p| names.iter().find(|(n, _)| *n == p))
    {
        Some((_, name)) => (*name, true),
        None => (base, false),
    };
    match exact(m, Field::EthType)? {
        0x0800 => Some(pick(
            &[(6, "tcp"), (17, "udp"), (132, "sctp"), (1, "icmp")],
            "ip",
        )),
        0x86dd => Some(pick(
            &[(6, "tcp6"), (17, "udp6"), (132, "sctp6"), (58, "icmp6")],
            "ipv6",
        )),
        0x0806 => Some(("arp", false)),
        0x8847 => Some(("mpls", false)),
        0x8848 => Some(("mplsm", false)),
        _ => None,
    }
}

/// Appends `name=value` (with `/mask` when partial) if the field is matched at all.
fn field(out: &mut Vec<String>, m: &Match, name: &str, f: Field, syntax: Syntax, hex: bool) {
    let (v, mask) = m.get(f);
    if mask != 0 {
        out.push(format!(
            "{name}={}",
            format_masked(v, mask, syntax, f.spec().bits, hex)
        ));
    }
}

/// The VLAN words for the outer tag, or a raw `vlan_tci=` when nothing friendlier is exact.
fn vlan(out: &mut Vec<String>, m: &Match) {
    let (v, mask) = m.get(Field::VlanTci);
    if mask == 0 {
        return;
    }
    let present = v & 0x1000 != 0;
    let pcp_mask = mask & 0xe000;
    let mut words = Vec::new();
    let ok = match mask & 0x1fff {
        0x1fff if present && (pcp_mask == 0 || pcp_mask == 0xe000) => {
            words.push(format!("dl_vlan={}", v & 0xfff));
            if pcp_mask != 0 {
                words.push(format!("dl_vlan_pcp={}", v >> 13));
            }
            true
        }
        0x1fff if !present && v & 0xfff == 0 && pcp_mask == 0 => {
            words.push("dl_vlan=0xffff".to_string());
            true
        }
        0x1000 if present && pcp_mask == 0xe000 => {
            words.push(format!("dl_vlan_pcp={}", v >> 13));
            true
        }
        0x1000 if present && pcp_mask == 0 => {
            words.push("vlan_vid=0x1000/0x1000".to_string());
            true
        }
        _ => false,
    };
    if ok {
        out.extend(words);
    } else {
        out.push(format!(
            "vlan_tci={}",
            format_masked(v, mask, Syntax::Num, 16, true)
        ));
    }
}

fn ip_frag(out: &mut Vec<String>, m: &Match) {
    let (v, mask) = m.get(Field::IpFrag);
    if mask == 0 {
        return;
    }
    let (any, later) = (frag::ANY as u128, frag::LATER as u128);
    let word = match (v, mask) {
        (0, m) if m == any => "no",
        (v, m) if v == any && m == any => "yes",
        (v, m) if v == any && m == any | later => "first",
        (v, m) if v == any | later && m == any | later => "later",
        (0, m) if m == later => "not_later",
        _ => {
            out.push(format!(
                "nw_frag={}",
                format_masked(v, mask, Syntax::Num, 8, true)
            ));
            return;
        }
    };
    out.push(format!("nw_frag={word}"));
}

/// The tunnel endpoints: `tun_src`/`tun_dst` when only the low 32 bits of a slot are
/// matched (an IPv4 underlay), else `tun_ipv6_src`/`tun_ipv6_dst` (the same bits).
fn tunnel_endpoints(out: &mut Vec<String>, m: &Match) {
    for (v4, v6) in [
        (Field::TunSrc, Field::TunIpv6Src),
        (Field::TunDst, Field::TunIpv6Dst),
    ] {
        if m.get(v6).1 >> 32 == 0 {
            field(out, m, v4.name(), v4, Syntax::Ipv4, false);
        } else {
            field(out, m, v6.name(), v6, Syntax::Ipv6, false);
        }
    }
}

/// Formats a match: `tcp,in_port=1,nw_dst=10.0.0.0/8,tp_dst=80`; the empty string matches
/// everything.
pub fn format_match(m: &Match) -> String {
    // The bits the tunnel fields imply print as those fields only.
    let m = &m.without_implied();
    let mut out: Vec<String> = Vec::new();
    let short = shorthand(m);
    let eth = exact(m, Field::EthType);
    let proto = exact(m, Field::IpProto);
    let is_arp = eth == Some(0x0806);
    let is_icmp = matches!(
        (eth, proto),
        (Some(0x0800), Some(1)) | (Some(0x86dd), Some(58))
    );
    let is_icmp6 = matches!((eth, proto), (Some(0x86dd), Some(58)));
    if let Some((name, _)) = short {
        out.push(name.to_string());
    }
    field(&mut out, m, "tun_id", Field::TunnelId, Syntax::Num, true);
    tunnel_endpoints(&mut out, m);
    field(&mut out, m, "metadata", Field::Metadata, Syntax::Num, true);
    field(&mut out, m, "in_port", Field::InPort, Syntax::Port, false);
    vlan(&mut out, m);
    field(&mut out, m, "cvlan_tci", Field::CvlanTci, Syntax::Num, true);
    field(&mut out, m, "dl_src", Field::EthSrc, Syntax::Mac, false);
    field(&mut out, m, "dl_dst", Field::EthDst, Syntax::Mac, false);
    if short.is_none() {
        let (v, mask) = m.get(Field::EthType);
        if mask != 0 {
            out.push(format!(
                "dl_type={}",
                format_masked(v, mask, Syntax::Num, 16, true)
            ));
        }
    }
    for (name, f) in [
        ("mpls_label", Field::MplsLabel),
        ("mpls_tc", Field::MplsTc),
        ("mpls_ttl", Field::MplsTtl),
        ("mpls_bos", Field::MplsBos),
    ] {
        field(&mut out, m, name, f, Syntax::Num, false);
    }
    let (src, dst) = if is_arp {
        ("arp_spa", "arp_tpa")
    } else {
        ("nw_src", "nw_dst")
    };
    field(&mut out, m, src, Field::Ipv4Src, Syntax::Ipv4, false);
    field(&mut out, m, dst, Field::Ipv4Dst, Syntax::Ipv4, false);
    field(&mut out, m, "arp_op", Field::ArpOp, Syntax::Num, false);
    if !is_icmp6 {
        field(&mut out, m, "arp_sha", Field::ArpSha, Syntax::Mac, false);
        field(&mut out, m, "arp_tha", Field::ArpTha, Syntax::Mac, false);
    }
    field(&mut out, m, "ipv6_src", Field::Ipv6Src, Syntax::Ipv6, false);
    field(&mut out, m, "ipv6_dst", Field::Ipv6Dst, Syntax::Ipv6, false);
    field(
        &mut out,
        m,
        "ipv6_label",
        Field::Ipv6Label,
        Syntax::Num,
        true,
    );
    field(
        &mut out,
        m,
        "ipv6_exthdr",
        Field::Ipv6Exthdr,
        Syntax::Num,
        true,
    );
    if !short.is_some_and(|(_, covers_proto)| covers_proto) {
        field(&mut out, m, "nw_proto", Field::IpProto, Syntax::Num, false);
    }
    match m.get(Field::IpDscp) {
        (_, 0) => {}
        (v, 0x3f) => out.push(format!("nw_tos={}", v << 2)),
        _ => field(&mut out, m, "ip_dscp", Field::IpDscp, Syntax::Num, true),
    }
    field(&mut out, m, "nw_ecn", Field::IpEcn, Syntax::Num, false);
    field(&mut out, m, "nw_ttl", Field::IpTtl, Syntax::Num, false);
    ip_frag(&mut out, m);
    for (tp, icmp, f, fi) in [
        ("tp_src", "icmp_type", Field::TpSrc, Field::IcmpType),
        ("tp_dst", "icmp_code", Field::TpDst, Field::IcmpCode),
    ] {
        let (_, mask) = m.get(f);
        if is_icmp && mask == 0xff {
            field(&mut out, m, icmp, fi, Syntax::Num, false);
        } else {
            field(&mut out, m, tp, f, Syntax::Num, false);
        }
    }
    field(
        &mut out,
        m,
        "nd_target",
        Field::NdTarget,
        Syntax::Ipv6,
        false,
    );
    if is_icmp6 {
        field(&mut out, m, "nd_sll", Field::ArpSha, Syntax::Mac, false);
        field(&mut out, m, "nd_tll", Field::ArpTha, Syntax::Mac, false);
    }
    field(&mut out, m, "tcp_flags", Field::TcpFlags, Syntax::Num, true);
    field(&mut out, m, "parsed", Field::Parsed, Syntax::Num, true);
    out.join(",")
}

/// The `ovs-ofctl` name a set-field of `f` prints with (`mod_*` where one exists).
fn set_field(f: Field, value: u128) -> String {
    let mac = |n: &str| format!("{n}:{}", format_value(value, Syntax::Mac, false));
    let ip = |n: &str| format!("{n}:{}", format_value(value, Syntax::Ipv4, false));
    match f {
        Field::VlanVid if value & 0x1000 != 0 => format!("mod_vlan_vid:{}", value & 0xfff),
        Field::VlanPcp => format!("mod_vlan_pcp:{value}"),
        Field::EthSrc => mac("mod_dl_src"),
        Field::EthDst => mac("mod_dl_dst"),
        Field::Ipv4Src => ip("mod_nw_src"),
        Field::Ipv4Dst => ip("mod_nw_dst"),
        Field::IpDscp => format!("mod_nw_tos:{}", value << 2),
        Field::IpEcn => format!("mod_nw_ecn:{value}"),
        Field::TpSrc => format!("mod_tp_src:{value}"),
        Field::TpDst => format!("mod_tp_dst:{value}"),
        _ => {
            let (syntax, hex) = match f {
                Field::Ipv6Src | Field::Ipv6Dst | Field::NdTarget => (Syntax::Ipv6, false),
                Field::TunIpv6Src | Field::TunIpv6Dst => (Syntax::Ipv6, false),
                Field::TunSrc | Field::TunDst => (Syntax::Ipv4, false),
                Field::ArpSha | Field::ArpTha => (Syntax::Mac, false),
                Field::TunnelId | Field::Metadata | Field::Ipv6Label | Field::VlanVid => {
                    (Syntax::Num, true)
                }
                _ => (Syntax::Num, false),
            };
            format!(
                "set_field:{}->{}",
                format_value(value, syntax, hex),
                f.name()
            )
        }
    }
}

/// Formats one action (`output:2`, `mod_vlan_vid:10`, `set_field:fe80::1->ipv6_dst`, ...).
pub fn format_action(a: &Action) -> String {
    match a {
        Action::Output { port, max_len } if *port == ports::CONTROLLER => {
            format!("CONTROLLER:{max_len}")
        }
        Action::Output { port, .. } => match *port {
            ports::IN_PORT | ports::NORMAL | ports::FLOOD | ports::ALL | ports::LOCAL => {
                format_port(*port)
            }
            p => format!("output:{}", format_port(p)),
        },
        Action::Group(g) => format!("group:{g}"),
        Action::SetQueue(q) => format!("set_queue:{q}"),
        Action::SetField { field, value } => set_field(*field, *value),
        Action::PushVlan(t) => format!("push_vlan:{t:#06x}"),
        Action::PopVlan => "pop_vlan".to_string(),
        Action::DecNwTtl => "dec_ttl".to_string(),
        Action::SetNwTtl(t) => format!("mod_nw_ttl:{t}"),
        Action::PushMpls(t) => format!("push_mpls:{t:#06x}"),
        Action::PopMpls(t) => format!("pop_mpls:{t:#06x}"),
        Action::SetMplsTtl(t) => format!("set_mpls_ttl({t})"),
        Action::DecMplsTtl => "dec_mpls_ttl".to_string(),
        Action::CopyTtlOut => "copy_ttl_out".to_string(),
        Action::CopyTtlIn => "copy_ttl_in".to_string(),
    }
}

/// Formats a list of plain actions, comma separated (`drop` when empty).
pub fn format_action_list(actions: &[Action]) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    let v: Vec<String> = actions.iter().map(format_action).collect();
    v.join(",")
}

/// Formats instructions as the text after `actions=`: apply-actions inline, the others as
/// `meter:N`, `clear_actions`, `write_actions(...)`, `write_metadata:V/M`, `goto_table:N`;
/// `drop` when there are none.
pub fn format_actions(instructions: &[Instruction]) -> String {
    let mut out: Vec<String> = Vec::new();
    // In execution order, as ovs-ofctl writes and reads them, whatever order a controller
    // gave them in (the wire keeps that: crate::as_sent).
    let mut in_order: Vec<&Instruction> = instructions.iter().collect();
    in_order.sort_by_key(|i| crate::as_sent::rank(i));
    for i in in_order {
        match i {
            Instruction::Meter(m) => out.push(format!("meter:{m}")),
            Instruction::ApplyActions(a) => out.extend(a.iter().map(format_action)),
            Instruction::ClearActions => out.push("clear_actions".to_string()),
            Instruction::WriteActions(a) => {
                let v: Vec<String> = a.iter().map(format_action).collect();
                out.push(format!("write_actions({})", v.join(",")));
            }
            Instruction::WriteMetadata { value, mask } if *mask == u64::MAX => {
                out.push(format!("write_metadata:{value:#x}"))
            }
            Instruction::WriteMetadata { value, mask } => {
                out.push(format!("write_metadata:{value:#x}/{mask:#x}"))
            }
            Instruction::GotoTable(t) => out.push(format!("goto_table:{t}")),
        }
    }
    if out.is_empty() {
        return "drop".to_string();
    }
    out.join(",")
}

/// Formats one flow in `dump-flows` style:
/// `cookie=0x0, table=0, priority=10,in_port=1,dl_dst=00:00:00:00:00:02 actions=output:2`.
pub fn format_flow(
    table_id: u8,
    priority: u16,
    matcher: &Match,
    instructions: &[Instruction],
    cookie: u64,
) -> String {
    let mut fm = FlowMod::add(table_id, priority, *matcher, instructions.to_vec());
    fm.cookie = cookie;
    format_flow_mod(&fm)
}

/// Formats a flow with its counters, as `dump-flows` prints it:
/// `cookie=0x0, duration=1.5s, table=0, n_packets=3, n_bytes=180, idle_timeout=10,
/// priority=10,in_port=1 actions=output:2`. [`parse_flow`](super::parse_flow) reads it back
/// (ignoring the counters).
pub fn format_flow_stats(v: &FlowView) -> String {
    let mut fm = FlowMod::add(v.table_id, v.priority, v.matcher, v.instructions.clone());
    fm.cookie = v.cookie;
    fm.idle_timeout = v.idle_timeout;
    fm.hard_timeout = v.hard_timeout;
    fm.flags = v.flags;
    let stats = format!(
        "duration={}.{:03}s, table={}, n_packets={}, n_bytes={}",
        v.duration_ms / 1000,
        v.duration_ms % 1000,
        v.table_id,
        v.packets,
        v.bytes
    );
    format_flow_mod(&fm).replacen(&format!("table={}", v.table_id), &stats, 1)
}

/// Formats a whole flow-mod (timeouts, flags, cookie mask and `out_port`/`out_group`
/// filters included) so that [`parse_flow_match`](super::parse_flow_match) with the same
/// command gives it back. Deletes print no `actions=`.
pub fn format_flow_mod(fm: &FlowMod) -> String {
    let delete = matches!(
        fm.command,
        FlowModCommand::Delete | FlowModCommand::DeleteStrict
    );
    let mut head = Vec::new();
    if fm.cookie_mask != 0 {
        head.push(format!("cookie={:#x}/{:#x}", fm.cookie, fm.cookie_mask));
    } else if !delete {
        // A delete filters by cookie only with a mask: without one the cookie means nothing.
        head.push(format!("cookie={:#x}", fm.cookie));
    }
    head.push(format!("table={}", fm.table_id));
    if fm.idle_timeout != 0 {
        head.push(format!("idle_timeout={}", fm.idle_timeout));
    }
    if fm.hard_timeout != 0 {
        head.push(format!("hard_timeout={}", fm.hard_timeout));
    }
    let f = &fm.flags;
    for (on, name) in [
        (f.send_flow_rem, "send_flow_rem"),
        (f.check_overlap, "check_overlap"),
        (f.reset_counts, "reset_counts"),
        (f.no_pkt_counts, "no_packet_counts"),
        (f.no_byte_counts, "no_byte_counts"),
    ] {
        if on {
            head.push(name.to_string());
        }
    }
    if fm.out_port != ports::ANY {
        head.push(format!("out_port={}", format_port(fm.out_port)));
    }
    if fm.out_group != GROUP_ANY {
        head.push(format!("out_group={}", fm.out_group));
    }
    let mut s = head.join(", ");
    let _ = write!(s, ", priority={}", fm.priority);
    let m = format_match(&fm.matcher);
    if !m.is_empty() {
        s.push(',');
        s.push_str(&m);
    }
    if !delete {
        s.push_str(" actions=");
        s.push_str(&format_actions(&fm.instructions));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_flows_style() {
        let mut m = Match::ANY;
        m.set_exact(Field::InPort, 1);
        m.set_exact(Field::EthDst, 2);
        let i = vec![Instruction::ApplyActions(vec![Action::Output {
            port: 2,
            max_len: 0,
        }])];
        assert_eq!(
            format_flow(0, 10, &m, &i, 0),
            "cookie=0x0, table=0, priority=10,in_port=1,dl_dst=00:00:00:00:00:02 \
             actions=output:2"
        );
        assert_eq!(
            format_flow(1, 0, &Match::ANY, &[], 0x5),
            "cookie=0x5, table=1, priority=0 actions=drop"
        );
    }

    #[test]
    fn shorthand_first_then_fields() {
        let mut m = Match::ANY;
        m.set_exact(Field::TpDst, 80);
        m.set_exact(Field::IpProto, 6);
        m.set_exact(Field::EthType, 0x0800);
        m.set_masked(Field::Ipv4Dst, 0x0a00_0000, 0xff00_0000);
        m.set_exact(Field::InPort, ports::LOCAL as u128);
        assert_eq!(
            format_match(&m),
            "tcp,in_port=LOCAL,nw_dst=10.0.0.0/8,tp_dst=80"
        );
        let mut m = Match::ANY;
        m.set_exact(Field::EthType, 0x0800);
        m.set_exact(Field::IpProto, 47);
        assert_eq!(format_match(&m), "ip,nw_proto=47");
        let mut m = Match::ANY;
        m.set_exact(Field::EthType, 0x88cc);
        assert_eq!(format_match(&m), "dl_type=0x88cc");
        assert_eq!(format_match(&Match::ANY), "");
    }

    #[test]
    fn vlan_spellings() {
        let tci = |v: u128, mask: u128| {
            let mut m = Match::ANY;
            m.set_masked(Field::VlanTci, v, mask);
            format_match(&m)
        };
        assert_eq!(tci(0x100a, 0x1fff), "dl_vlan=10");
        assert_eq!(tci(0x700a, 0xffff), "dl_vlan=10,dl_vlan_pcp=3");
        assert_eq!(tci(0, 0x1fff), "dl_vlan=0xffff");
        assert_eq!(tci(0x7000, 0xf000), "dl_vlan_pcp=3");
        assert_eq!(tci(0x1000, 0x1000), "vlan_vid=0x1000/0x1000");
        assert_eq!(tci(0x0000, 0x1000), "vlan_tci=0x0/0x1000");
        assert_eq!(tci(0x1234, 0xffff), "dl_vlan=564,dl_vlan_pcp=0");
        assert_eq!(tci(0x0234, 0xffff), "vlan_tci=0x234");
    }

    #[test]
    fn actions_in_ovs_spelling() {
        let i = vec![
            Instruction::Meter(2),
            Instruction::ApplyActions(vec![
                Action::Output {
                    port: ports::CONTROLLER,
                    max_len: 0xffff,
                },
                Action::Output {
                    port: ports::NORMAL,
                    max_len: 0,
                },
                Action::SetField {
                    field: Field::VlanVid,
                    value: 0x100a,
                },
                Action::SetField {
                    field: Field::Ipv6Dst,
                    value: 1,
                },
            ]),
            Instruction::ClearActions,
            Instruction::WriteActions(vec![Action::Group(3)]),
            Instruction::WriteMetadata {
                value: 1,
                mask: 0xff,
            },
            Instruction::GotoTable(4),
        ];
        assert_eq!(
            format_actions(&i),
            "meter:2,CONTROLLER:65535,NORMAL,mod_vlan_vid:10,set_field:::1->ipv6_dst,\
             clear_actions,write_actions(group:3),write_metadata:0x1/0xff,goto_table:4"
        );
        assert_eq!(format_actions(&[]), "drop");
    }
}

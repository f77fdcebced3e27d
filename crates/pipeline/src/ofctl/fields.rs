//! The match fields of the flow syntax: every name `ovs-ofctl` and OpenFlow (OXM) use, what
//! key bits each sets, how its value is written, whether it takes a mask, which protocol it
//! needs and whether `set_field` may write it.

use packet::Field;

use super::error::{ErrorKind, PResult, Problem};
use super::values::{self, Syntax};
use crate::model::Match;

/// What a field name sets in the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// One key field, value as written.
    Field(Field),
    /// `dl_vlan`: a VID (tagged) or 0xffff (no tag), as `vlan_vid` with the present bit.
    DlVlan,
    /// `dl_vlan_pcp` / `vlan_pcp`: the priority of a tagged frame (sets the present bit too).
    DlVlanPcp,
    /// `nw_tos`: the ToS byte, DSCP in its upper six bits.
    NwTos,
    /// `nw_frag`: a fragment keyword.
    NwFrag,
}

/// What a field needs the rest of the match to select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prereq {
    None,
    /// An outer VLAN tag (the present bit matched as 1).
    Vlan,
    Ipv4,
    Ipv6,
    /// IPv4 or IPv6.
    Ip,
    Ipv4OrArp,
    Arp,
    /// TCP, UDP or SCTP over IPv4 or IPv6.
    L4,
    Tcp,
    Udp,
    Sctp,
    /// ICMP or ICMPv6.
    Icmp,
    Icmp6,
    /// ICMPv6 neighbour solicitation or advertisement.
    NdTarget,
    /// ICMPv6 neighbour solicitation.
    NdSll,
    /// ICMPv6 neighbour advertisement.
    NdTll,
    /// MPLS (unicast or multicast).
    Mpls,
}

/// One match field of the syntax.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldDef {
    /// Accepted names (the first is the one `ovs-ofctl` prints).
    pub names: &'static [&'static str],
    pub target: Target,
    pub syntax: Syntax,
    pub maskable: bool,
    pub prereq: Prereq,
    /// `set_field` may write it.
    pub writable: bool,
}

const fn def(
    names: &'static [&'static str],
    target: Target,
    syntax: Syntax,
    maskable: bool,
    prereq: Prereq,
    writable: bool,
) -> FieldDef {
    FieldDef {
        names,
        target,
        syntax,
        maskable,
        prereq,
        writable,
    }
}

use Prereq as P;
use Syntax as S;
use Target as T;

/// Every match field: names, target, value syntax, maskable, prerequisite, writable.
#[rustfmt::skip]
pub(crate) const FIELDS: &[FieldDef] = &[
    def(&["in_port"], T::Field(Field::InPort), S::Port, false, P::None, false),
    def(&["dl_src", "eth_src"], T::Field(Field::EthSrc), S::Mac, true, P::None, true),
    def(&["dl_dst", "eth_dst"], T::Field(Field::EthDst), S::Mac, true, P::None, true),
    def(&["dl_type", "eth_type"], T::Field(Field::EthType), S::Num, false, P::None, true),
    def(&["dl_vlan"], T::DlVlan, S::Num, false, P::None, true),
    def(&["dl_vlan_pcp", "vlan_pcp"], T::DlVlanPcp, S::Num, false, P::None, true),
    def(&["vlan_tci"], T::Field(Field::VlanTci), S::Num, true, P::None, false),
    def(&["vlan_vid"], T::Field(Field::VlanVid), S::Num, true, P::None, true),
    def(&["cvlan_tci"], T::Field(Field::CvlanTci), S::Num, true, P::Vlan, false),
    def(&["nw_src", "ip_src"], T::Field(Field::Ipv4Src), S::Ipv4, true, P::Ipv4OrArp, true),
    def(&["nw_dst", "ip_dst"], T::Field(Field::Ipv4Dst), S::Ipv4, true, P::Ipv4OrArp, true),
    def(&["ipv4_src"], T::Field(Field::Ipv4Src), S::Ipv4, true, P::Ipv4, true),
    def(&["ipv4_dst"], T::Field(Field::Ipv4Dst), S::Ipv4, true, P::Ipv4, true),
    def(&["nw_proto", "ip_proto"], T::Field(Field::IpProto), S::Num, false, P::Ip, true),
    def(&["nw_tos"], T::NwTos, S::Num, false, P::Ip, true),
    def(&["ip_dscp"], T::Field(Field::IpDscp), S::Num, false, P::Ip, true),
    def(&["nw_ecn", "ip_ecn"], T::Field(Field::IpEcn), S::Num, false, P::Ip, true),
    def(&["nw_ttl"], T::Field(Field::IpTtl), S::Num, false, P::Ip, false),
    def(&["nw_frag", "ip_frag"], T::NwFrag, S::Num, false, P::Ip, false),
    def(&["tp_src"], T::Field(Field::TpSrc), S::Num, true, P::L4, true),
    def(&["tp_dst"], T::Field(Field::TpDst), S::Num, true, P::L4, true),
    def(&["tcp_src"], T::Field(Field::TpSrc), S::Num, true, P::Tcp, true),
    def(&["tcp_dst"], T::Field(Field::TpDst), S::Num, true, P::Tcp, true),
    def(&["udp_src"], T::Field(Field::TpSrc), S::Num, true, P::Udp, true),
    def(&["udp_dst"], T::Field(Field::TpDst), S::Num, true, P::Udp, true),
    def(&["sctp_src"], T::Field(Field::TpSrc), S::Num, true, P::Sctp, true),
    def(&["sctp_dst"], T::Field(Field::TpDst), S::Num, true, P::Sctp, true),
    def(&["icmp_type"], T::Field(Field::IcmpType), S::Num, false, P::Icmp, true),
    def(&["icmp_code"], T::Field(Field::IcmpCode), S::Num, false, P::Icmp, true),
    def(&["icmpv6_type"], T::Field(Field::IcmpType), S::Num, false, P::Icmp6, true),
    def(&["icmpv6_code"], T::Field(Field::IcmpCode), S::Num, false, P::Icmp6, true),
    def(&["arp_op"], T::Field(Field::ArpOp), S::Num, false, P::Arp, true),
    def(&["arp_spa"], T::Field(Field::Ipv4Src), S::Ipv4, true, P::Arp, true),
    def(&["arp_tpa"], T::Field(Field::Ipv4Dst), S::Ipv4, true, P::Arp, true),
    def(&["arp_sha"], T::Field(Field::ArpSha), S::Mac, true, P::Arp, true),
    def(&["arp_tha"], T::Field(Field::ArpTha), S::Mac, true, P::Arp, true),
    def(&["ipv6_src"], T::Field(Field::Ipv6Src), S::Ipv6, true, P::Ipv6, true),
    def(&["ipv6_dst"], T::Field(Field::Ipv6Dst), S::Ipv6, true, P::Ipv6, true),
    def(&["ipv6_label"], T::Field(Field::Ipv6Label), S::Num, true, P::Ipv6, true),
    def(&["nd_target"], T::Field(Field::NdTarget), S::Ipv6, true, P::NdTarget, true),
    def(&["nd_sll"], T::Field(Field::ArpSha), S::Mac, true, P::NdSll, true),
    def(&["nd_tll"], T::Field(Field::ArpTha), S::Mac, true, P::NdTll, true),
    def(&["metadata"], T::Field(Field::Metadata), S::Num, true, P::None, false),
    def(&["tun_id", "tunnel_id"], T::Field(Field::TunnelId), S::Num, true, P::None, true),
    def(&["tun_src"], T::Field(Field::TunSrc), S::Ipv4, true, P::None, true),
    def(&["tun_dst"], T::Field(Field::TunDst), S::Ipv4, true, P::None, true),
    def(&["tun_ipv6_src"], T::Field(Field::TunIpv6Src), S::Ipv6, true, P::None, true),
    def(&["tun_ipv6_dst"], T::Field(Field::TunIpv6Dst), S::Ipv6, true, P::None, true),
    def(&["tcp_flags"], T::Field(Field::TcpFlags), S::Num, true, P::Tcp, false),
    def(&["mpls_label"], T::Field(Field::MplsLabel), S::Num, false, P::Mpls, true),
    def(&["mpls_tc"], T::Field(Field::MplsTc), S::Num, false, P::Mpls, true),
    def(&["mpls_ttl"], T::Field(Field::MplsTtl), S::Num, false, P::Mpls, true),
    def(&["mpls_bos"], T::Field(Field::MplsBos), S::Num, false, P::Mpls, false),
    def(&["ipv6_exthdr"], T::Field(Field::Ipv6Exthdr), S::Num, true, P::Ipv6, false),
];

/// Looks a field up by any of its names (case-insensitive); returns its index in [`FIELDS`].
pub(crate) fn lookup(name: &str) -> Option<(usize, &'static FieldDef)> {
    FIELDS
        .iter()
        .enumerate()
        .find(|(_, d)| d.names.iter().any(|n| n.eq_ignore_ascii_case(name)))
}

/// Comma-separated list of the first names of the fields that satisfy `keep`.
pub(crate) fn names(keep: impl Fn(&FieldDef) -> bool) -> String {
    let v: Vec<&str> = FIELDS
        .iter()
        .filter(|d| keep(d))
        .flat_map(|d| d.names.iter().copied())
        .collect();
    v.join(", ")
}

/// `(field, value, mask)` settings a field word turns into.
pub(crate) type Settings = Vec<(Field, u128, u128)>;

/// Turns `name=text` (value with optional `/mask`) into key settings.
pub(crate) fn settings(def: &FieldDef, name: &str, text: &str) -> PResult<Settings> {
    let (value_text, mask_text) = match text.split_once('/') {
        Some((v, m)) => (v.trim(), Some(m.trim())),
        None => (text.trim(), None),
    };
    if mask_text.is_some() && !def.maskable {
        return Err(Problem::new(
            ErrorKind::MaskNotAllowed,
            name,
            format!("{name} does not take a mask"),
            format!("write {name}={value_text}"),
        ));
    }
    match def.target {
        T::Field(Field::TcpFlags) if value_text.starts_with(['+', '-']) => {
            if mask_text.is_some() {
                return Err(Problem::new(
                    ErrorKind::MaskNotAllowed,
                    name,
                    format!("{name}={text} mixes +flag/-flag with a /mask"),
                    "write either tcp_flags=+syn-ack or tcp_flags=0x2/0x12",
                ));
            }
            let (v, m) = tcp_flag_words(name, value_text)?;
            Ok(vec![(Field::TcpFlags, v, m)])
        }
        T::Field(f) => {
            let bits = f.spec().bits;
            let value = values::parse_value(name, value_text, def.syntax, bits)?;
            let mask = match mask_text {
                Some(m) => values::parse_mask(name, m, def.syntax, bits)?,
                None => f.max_value(),
            };
            if f == Field::VlanVid && mask & 0x1000 != 0 && value & 0x1000 == 0 && value & mask != 0
            {
                return Err(Problem::new(
                    ErrorKind::BadValue,
                    text,
                    format!(
                        "{name}={text} lacks the tag-present bit 0x1000, so it would only match \
                         untagged frames with a VID, which never occur"
                    ),
                    format!(
                        "write {name}={:#x} (0x1000 | VID) or dl_vlan={}",
                        value | 0x1000,
                        value & 0xfff
                    ),
                ));
            }
            Ok(vec![(f, value & mask, mask)])
        }
        T::DlVlan => {
            let v = values::parse_num(name, value_text, 0xffff)?;
            if v == 0xffff {
                Ok(vec![(Field::VlanVid, 0, 0x1fff)])
            } else if v > 0xfff {
                let mut p = values::out_of_range(name, value_text, 0xfff);
                p.expected = "use 0xffff to match frames without a VLAN tag".into();
                Err(p)
            } else {
                Ok(vec![(Field::VlanVid, 0x1000 | v, 0x1fff)])
            }
        }
        T::DlVlanPcp => {
            let v = values::parse_num(name, value_text, 7)?;
            Ok(vec![
                (Field::VlanPcp, v, 7),
                (Field::VlanTci, 0x1000, 0x1000),
            ])
        }
        T::NwTos => {
            let v = values::parse_num(name, value_text, 0xff)?;
            if v & 3 != 0 {
                return Err(Problem::new(
                    ErrorKind::BadValue,
                    text,
                    format!("{name} {value_text} sets the ECN bits (the low two bits)"),
                    "nw_tos is the DSCP shifted left by 2 (a multiple of 4); \
                     match ECN with nw_ecn",
                ));
            }
            Ok(vec![(Field::IpDscp, v >> 2, 0x3f)])
        }
        T::NwFrag => {
            use packet::key::frag::{ANY, LATER};
            let (any, later) = (ANY as u128, LATER as u128);
            let (v, m) = match value_text.to_ascii_lowercase().as_str() {
                "no" => (0, any),
                "yes" => (any, any),
                "first" => (any, any | later),
                "later" => (any | later, any | later),
                "not_later" => (0, later),
                _ => {
                    return Err(Problem::new(
                        ErrorKind::BadValue,
                        text,
                        format!("nw_frag value \"{value_text}\" is not a fragment keyword"),
                        "expected one of no, yes, first, later, not_later",
                    ))
                }
            };
            Ok(vec![(Field::IpFrag, v, m)])
        }
    }
}

/// TCP flag names and bits, for `tcp_flags=+syn-ack`.
const TCP_FLAGS: &[(&str, u128)] = &[
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

/// `+syn-ack`: flags after `+` must be set, after `-` must be clear; others are wildcards.
fn tcp_flag_words(name: &str, text: &str) -> PResult<(u128, u128)> {
    let (mut value, mut mask) = (0u128, 0u128);
    let mut rest = text;
    while let Some(sign) = rest.chars().next() {
        let body = &rest[1..];
        let end = body.find(['+', '-']).unwrap_or(body.len());
        let flag = &body[..end];
        rest = &body[end..];
        let bit = TCP_FLAGS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(flag))
            .map(|(_, b)| *b)
            .ok_or_else(|| {
                Problem::new(
                    ErrorKind::BadValue,
                    flag,
                    format!("{name}: unknown TCP flag \"{flag}\""),
                    "expected +FLAG or -FLAG with FLAG one of fin, syn, rst, psh, ack, urg, \
                     ece, cwr, ns",
                )
            })?;
        if mask & bit != 0 {
            return Err(Problem::new(
                ErrorKind::Duplicate,
                flag,
                format!("{name}: TCP flag {flag} given twice"),
                "give each flag once",
            ));
        }
        mask |= bit;
        if sign == '+' {
            value |= bit;
        }
    }
    Ok((value, mask))
}

/// The exact value of `field` in `m`, if it is matched exactly.
pub(crate) fn exact(m: &Match, field: Field) -> Option<u128> {
    let (v, mask) = m.get(field);
    (mask == field.max_value()).then_some(v)
}

const ETH_IPV4: u128 = 0x0800;
const ETH_IPV6: u128 = 0x86dd;
const ETH_ARP: u128 = 0x0806;

impl Prereq {
    /// Whether `m` selects what the field needs.
    pub(crate) fn holds(self, m: &Match) -> bool {
        let eth = exact(m, Field::EthType);
        let proto = exact(m, Field::IpProto);
        let ip = eth == Some(ETH_IPV4) || eth == Some(ETH_IPV6);
        let l4 = |p: u128| ip && proto == Some(p);
        let icmp6_type = |t: &[u128]| {
            eth == Some(ETH_IPV6)
                && proto == Some(58)
                && exact(m, Field::IcmpType).is_some_and(|v| t.contains(&v))
        };
        match self {
            P::None => true,
            P::Vlan => {
                let (v, mask) = m.get(Field::VlanTci);
                v & mask & 0x1000 != 0
            }
            P::Ipv4 => eth == Some(ETH_IPV4),
            P::Ipv6 => eth == Some(ETH_IPV6),
            P::Ip => ip,
            P::Ipv4OrArp => eth == Some(ETH_IPV4) || eth == Some(ETH_ARP),
            P::Arp => eth == Some(ETH_ARP),
            P::L4 => l4(6) || l4(17) || l4(132),
            P::Tcp => l4(6),
            P::Udp => l4(17),
            P::Sctp => l4(132),
            P::Icmp => {
                (eth == Some(ETH_IPV4) && proto == Some(1))
                    || (eth == Some(ETH_IPV6) && proto == Some(58))
            }
            P::Icmp6 => eth == Some(ETH_IPV6) && proto == Some(58),
            P::NdTarget => icmp6_type(&[135, 136]),
            P::NdSll => icmp6_type(&[135]),
            P::NdTll => icmp6_type(&[136]),
            P::Mpls => eth == Some(0x8847) || eth == Some(0x8848),
        }
    }

    /// What the field needs, and how to add it.
    pub(crate) fn explain(self) -> (&'static str, &'static str) {
        match self {
            P::None => ("nothing", ""),
            P::Vlan => (
                "an outer VLAN tag",
                "add dl_vlan=VID or vlan_vid=0x1000/0x1000 before it",
            ),
            P::Ipv4 => ("IPv4", "add ip before it"),
            P::Ipv6 => ("IPv6", "add ipv6 before it"),
            P::Ip => ("a protocol", "add ip or ipv6 before it"),
            P::Ipv4OrArp => ("a protocol", "add ip or arp before it"),
            P::Arp => ("ARP", "add arp before it"),
            P::L4 => ("a protocol", "add tcp, udp or sctp before it"),
            P::Tcp => ("TCP", "add tcp or tcp6 before it"),
            P::Udp => ("UDP", "add udp or udp6 before it"),
            P::Sctp => ("SCTP", "add sctp or sctp6 before it"),
            P::Icmp => ("ICMP", "add icmp or icmp6 before it"),
            P::Icmp6 => ("ICMPv6", "add icmp6 before it"),
            P::NdTarget => (
                "an ICMPv6 neighbour solicitation or advertisement",
                "add icmp6,icmp_type=135 (or 136) before it",
            ),
            P::NdSll => (
                "an ICMPv6 neighbour solicitation",
                "add icmp6,icmp_type=135 before it",
            ),
            P::NdTll => (
                "an ICMPv6 neighbour advertisement",
                "add icmp6,icmp_type=136 before it",
            ),
            P::Mpls => ("MPLS", "add mpls or mplsm before it"),
        }
    }
}

/// Protocol shorthands: name, eth_type, ip_proto.
pub(crate) const SHORTHANDS: &[(&str, u16, Option<u8>)] = &[
    ("ip", 0x0800, None),
    ("ipv6", 0x86dd, None),
    ("arp", 0x0806, None),
    ("tcp", 0x0800, Some(6)),
    ("udp", 0x0800, Some(17)),
    ("sctp", 0x0800, Some(132)),
    ("icmp", 0x0800, Some(1)),
    ("tcp6", 0x86dd, Some(6)),
    ("udp6", 0x86dd, Some(17)),
    ("sctp6", 0x86dd, Some(132)),
    ("icmp6", 0x86dd, Some(58)),
    ("mpls", 0x8847, None),
    ("mplsm", 0x8848, None),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_unique_and_found() {
        let mut seen = std::collections::HashSet::new();
        for d in FIELDS {
            for n in d.names {
                assert!(seen.insert(*n), "{n} twice");
                assert!(lookup(n).is_some());
                assert!(lookup(&n.to_uppercase()).is_some());
            }
        }
        for (s, _, _) in SHORTHANDS {
            assert!(lookup(s).is_none(), "{s} is both a shorthand and a field");
        }
    }

    #[test]
    fn special_targets() {
        let (_, d) = lookup("dl_vlan").unwrap();
        assert_eq!(
            settings(d, "dl_vlan", "10").unwrap(),
            [(Field::VlanVid, 0x100a, 0x1fff)]
        );
        assert_eq!(
            settings(d, "dl_vlan", "0xffff").unwrap(),
            [(Field::VlanVid, 0, 0x1fff)]
        );
        let (_, d) = lookup("nw_tos").unwrap();
        assert_eq!(
            settings(d, "nw_tos", "0xb8").unwrap(),
            [(Field::IpDscp, 46, 0x3f)]
        );
        let (_, d) = lookup("nw_frag").unwrap();
        assert_eq!(
            settings(d, "nw_frag", "later").unwrap(),
            [(Field::IpFrag, 3, 3)]
        );
        let (_, d) = lookup("tcp_flags").unwrap();
        assert_eq!(
            settings(d, "tcp_flags", "+syn-ack").unwrap(),
            [(Field::TcpFlags, 0x2, 0x12)]
        );
        assert!(settings(d, "tcp_flags", "+syn+syn").is_err());
        assert!(settings(d, "tcp_flags", "+bogus").is_err());
        assert!(settings(d, "tcp_flags", "+syn/0x2").is_err());
        assert!(settings(d, "tcp_flags", "+").is_err());
        let (_, d) = lookup("vlan_vid").unwrap();
        assert_eq!(
            settings(d, "vlan_vid", "0x1000/0x1000").unwrap(),
            [(Field::VlanVid, 0x1000, 0x1000)]
        );
    }
}

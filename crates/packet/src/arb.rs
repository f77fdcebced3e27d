//! Test support: proptest strategies for random well-formed [`PacketSpec`]s and the flow key
//! that extracting each must give (a reference model written from the spec, independent of
//! the parser).

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use crate::builder::{ArpSpec, Ipv4Spec, Ipv6Ext, Ipv6Spec, L3Spec, L4Spec, NdSpec, PacketSpec};
use crate::key::{frag, parsed, Field, FlowKey};

fn mac() -> impl Strategy<Value = [u8; 6]> {
    any::<[u8; 6]>()
}

fn ipv4() -> impl Strategy<Value = Ipv4Spec> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        prop_oneof![
            4 => Just(0u16),
            2 => Just(0x4000u16),
            1 => Just(0x2000u16),
            1 => (1u16..0x1fff).prop_map(|o| o | 0x2000),
            1 => 1u16..0x1fff,
        ],
        prop_oneof![3 => Just(Vec::new()), 1 => proptest::collection::vec(any::<u8>(), 1..12)],
    )
        .prop_map(|(s, d, ttl, tos, ident, frag, options)| Ipv4Spec {
            src: Ipv4Addr::from(s),
            dst: Ipv4Addr::from(d),
            ttl,
            tos,
            ident,
            frag,
            options,
        })
}

fn ext() -> impl Strategy<Value = Ipv6Ext> {
    prop_oneof![
        Just(Ipv6Ext::HopByHop),
        Just(Ipv6Ext::Routing),
        Just(Ipv6Ext::DestOpts),
        Just(Ipv6Ext::Ah),
        (
            prop_oneof![Just(0u16), 1u16..0x1fff],
            any::<bool>(),
            any::<u32>()
        )
            .prop_map(|(offset, more, ident)| Ipv6Ext::Fragment {
                offset,
                more,
                ident
            }),
    ]
}

fn ipv6() -> impl Strategy<Value = Ipv6Spec> {
    (
        any::<u128>(),
        any::<u128>(),
        any::<u8>(),
        any::<u8>(),
        0u32..(1 << 20),
        prop_oneof![3 => Just(Vec::new()), 1 => proptest::collection::vec(ext(), 1..4)],
    )
        .prop_map(|(s, d, hlim, tclass, label, ext)| Ipv6Spec {
            src: Ipv6Addr::from(s),
            dst: Ipv6Addr::from(d),
            hlim,
            tclass,
            label,
            ext,
        })
}

fn ports() -> impl Strategy<Value = (u16, u16)> {
    (any::<u16>(), any::<u16>())
}

fn l4_common() -> impl Strategy<Value = L4Spec> {
    prop_oneof![
        1 => Just(L4Spec::None),
        3 => ports().prop_map(|(sp, dp)| L4Spec::Udp { sp, dp }),
        3 => (ports(), 0u16..0x1000).prop_map(|((sp, dp), flags)| L4Spec::Tcp { sp, dp, flags }),
        1 => ports().prop_map(|(sp, dp)| L4Spec::Sctp { sp, dp }),
    ]
}

fn icmpv6() -> impl Strategy<Value = L4Spec> {
    prop_oneof![
        (any::<u8>(), any::<u8>())
            .prop_filter("not ND", |(t, _)| *t != 135 && *t != 136)
            .prop_map(|(ty, code)| L4Spec::Icmpv6 { ty, code, nd: None }),
        (
            prop_oneof![Just(135u8), Just(136u8)],
            any::<u128>(),
            proptest::option::of(mac()),
            proptest::option::of(mac()),
        )
            .prop_map(|(ty, t, sll, tll)| L4Spec::Icmpv6 {
                ty,
                code: 0,
                nd: Some(NdSpec {
                    target: Ipv6Addr::from(t),
                    sll,
                    tll,
                }),
            }),
    ]
}

/// Random well-formed frames: 0–2 VLAN tags; IPv4 (with options and fragments), IPv6 (with
/// extension headers), ARP or another Ethernet type; UDP, TCP, SCTP, ICMP, ICMPv6 (with ND).
pub(crate) fn spec() -> impl Strategy<Value = PacketSpec> {
    let l3l4 = prop_oneof![
        3 => (ipv4(), prop_oneof![4 => l4_common(), 1 => (any::<u8>(), any::<u8>())
            .prop_map(|(ty, code)| L4Spec::Icmp { ty, code })])
            .prop_map(|(ip, l4)| (L3Spec::Ipv4(ip), l4)),
        3 => (ipv6(), prop_oneof![4 => l4_common(), 2 => icmpv6()])
            .prop_map(|(ip, l4)| (L3Spec::Ipv6(ip), l4)),
        1 => (any::<u16>(), mac(), any::<u32>(), mac(), any::<u32>()).prop_map(
            |(op, sha, spa, tha, tpa)| (
                L3Spec::Arp(ArpSpec { op, sha, spa: spa.into(), tha, tpa: tpa.into() }),
                L4Spec::None
            )
        ),
        1 => (0x0600u16..0xffff)
            .prop_filter("not a parsed type", |t| {
                ![0x0800, 0x0806, 0x86dd, 0x8100, 0x88a8, 0x9100, 0x8847, 0x8848].contains(t)
            })
            .prop_map(|ethertype| (L3Spec::Raw { ethertype }, L4Spec::None)),
    ];
    let vlan = (prop_oneof![Just(0x8100u16), Just(0x88a8u16)], any::<u16>());
    (
        mac(),
        mac(),
        proptest::collection::vec(vlan, 0..3),
        l3l4,
        0usize..200,
        any::<u8>(),
    )
        .prop_map(
            |(eth_src, eth_dst, vlans, (l3, l4), frame_len, payload_fill)| {
                // ND options run to the end of the IPv6 payload: no padding there.
                let nd = matches!(l4, L4Spec::Icmpv6 { nd: Some(_), .. });
                PacketSpec {
                    eth_src,
                    eth_dst,
                    vlans,
                    l3,
                    l4,
                    frame_len: if nd { 0 } else { frame_len },
                    payload_fill,
                }
            },
        )
}

/// `ipv6_exthdr` of a chain, from RFC 8200's rules as written there: each header present,
/// repeats (destination options may come twice), out-of-order headers; nothing past a later
/// fragment is seen, and an upper layer of 59 is "no next header".
fn expected_exthdr(ext: &[Ipv6Ext], l4_proto: u8) -> u16 {
    use crate::key::exthdr::*;
    let mut seen = Vec::new();
    let mut later = false;
    for e in ext {
        seen.push(*e);
        if let Ipv6Ext::Fragment { offset, .. } = e {
            if *offset != 0 {
                later = true;
                break;
            }
        }
    }
    let bit = |e: &Ipv6Ext| match e {
        Ipv6Ext::HopByHop => HOP,
        Ipv6Ext::DestOpts => DEST,
        Ipv6Ext::Routing => ROUTER,
        Ipv6Ext::Fragment { .. } => FRAG,
        Ipv6Ext::Ah => AUTH,
    };
    let mut f = seen.iter().fold(0, |f, e| f | bit(e));
    let count = |b: u16| seen.iter().filter(|e| bit(e) == b).count();
    if [HOP, ROUTER, FRAG, AUTH].iter().any(|&b| count(b) > 1) || count(DEST) > 2 {
        f |= UNREP;
    }
    // The recommended order: hop-by-hop, destination options, routing, fragment, AH, then
    // destination options for the final destination.
    let mut rank = Vec::new();
    for e in &seen {
        let r = match e {
            Ipv6Ext::HopByHop => 0,
            Ipv6Ext::DestOpts if rank.iter().all(|&r| r <= 1) => 1,
            Ipv6Ext::DestOpts => 6,
            Ipv6Ext::Routing => 2,
            Ipv6Ext::Fragment { .. } => 3,
            Ipv6Ext::Ah => 4,
        };
        rank.push(r);
    }
    let hop_late = seen.iter().skip(1).any(|e| matches!(e, Ipv6Ext::HopByHop));
    if hop_late || rank.windows(2).any(|w| w[1] < w[0]) && !rank.is_empty() {
        f |= UNSEQ;
    }
    if !later && l4_proto == 59 {
        f |= NONEXT;
    }
    f
}

fn mac_u(m: &[u8; 6]) -> u128 {
    m.iter().fold(0u128, |a, &b| (a << 8) | b as u128)
}

/// The key extraction must produce for `s` received on `in_port`.
pub(crate) fn expected_key(s: &PacketSpec, in_port: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    let mut p = parsed::ETH;
    k.set(Field::InPort, in_port as u128);
    k.set(Field::EthDst, mac_u(&s.eth_dst));
    k.set(Field::EthSrc, mac_u(&s.eth_src));
    if let Some((_, tci)) = s.vlans.first() {
        k.set(Field::VlanTci, (tci | 0x1000) as u128);
        p |= parsed::VLAN;
    }
    if let Some((_, tci)) = s.vlans.get(1) {
        k.set(Field::CvlanTci, (tci | 0x1000) as u128);
        p |= parsed::QINQ;
    }
    let l4_proto = match s.l4 {
        L4Spec::None => 59,
        L4Spec::Udp { .. } => 17,
        L4Spec::Tcp { .. } => 6,
        L4Spec::Sctp { .. } => 132,
        L4Spec::Icmp { .. } => 1,
        L4Spec::Icmpv6 { .. } => 58,
    };
    let mut later = false;
    match &s.l3 {
        L3Spec::Raw { ethertype } => {
            k.set(Field::EthType, *ethertype as u128);
        }
        L3Spec::Arp(a) => {
            k.set(Field::EthType, 0x0806);
            k.set(Field::ArpOp, a.op as u128);
            k.set(Field::ArpSha, mac_u(&a.sha));
            k.set(Field::ArpTha, mac_u(&a.tha));
            k.set(Field::Ipv4Src, u32::from(a.spa) as u128);
            k.set(Field::Ipv4Dst, u32::from(a.tpa) as u128);
            p |= parsed::L3;
        }
        L3Spec::Ipv4(ip) => {
            k.set(Field::EthType, 0x0800);
            k.set(Field::Ipv4Src, u32::from(ip.src) as u128);
            k.set(Field::Ipv4Dst, u32::from(ip.dst) as u128);
            k.set(Field::IpProto, l4_proto as u128);
            k.set(Field::IpDscp, (ip.tos >> 2) as u128);
            k.set(Field::IpEcn, (ip.tos & 3) as u128);
            k.set(Field::IpTtl, ip.ttl as u128);
            let mut f = 0;
            if ip.frag & 0x3fff != 0 {
                f |= frag::ANY;
            }
            if ip.frag & 0x1fff != 0 {
                f |= frag::LATER;
                later = true;
            }
            k.set(Field::IpFrag, f as u128);
            if !ip.options.is_empty() {
                p |= parsed::IP_OPTIONS;
            }
            p |= parsed::L3;
        }
        L3Spec::Ipv6(ip) => {
            k.set(Field::EthType, 0x86dd);
            k.set(Field::Ipv6Src, u128::from(ip.src));
            k.set(Field::Ipv6Dst, u128::from(ip.dst));
            k.set(Field::Ipv6Label, ip.label as u128);
            k.set(Field::IpDscp, (ip.tclass >> 2) as u128);
            k.set(Field::IpEcn, (ip.tclass & 3) as u128);
            k.set(Field::IpTtl, ip.hlim as u128);
            let mut proto = l4_proto;
            let mut f = 0u8;
            for (i, e) in ip.ext.iter().enumerate() {
                if let Ipv6Ext::Fragment { offset, .. } = e {
                    f |= frag::ANY;
                    if *offset != 0 {
                        f |= frag::LATER;
                        later = true;
                        proto = match ip.ext.get(i + 1) {
                            None => l4_proto,
                            Some(Ipv6Ext::HopByHop) => 0,
                            Some(Ipv6Ext::Routing) => 43,
                            Some(Ipv6Ext::Fragment { .. }) => 44,
                            Some(Ipv6Ext::Ah) => 51,
                            Some(Ipv6Ext::DestOpts) => 60,
                        };
                        break;
                    }
                }
            }
            k.set(Field::IpProto, proto as u128);
            k.set(Field::IpFrag, f as u128);
            k.set(
                Field::Ipv6Exthdr,
                expected_exthdr(&ip.ext, l4_proto) as u128,
            );
            if !ip.ext.is_empty() {
                p |= parsed::IPV6_EXT;
            }
            p |= parsed::L3;
        }
    }
    let ip = matches!(s.l3, L3Spec::Ipv4(_) | L3Spec::Ipv6(_));
    if ip && !later {
        match &s.l4 {
            L4Spec::None => {}
            L4Spec::Udp { sp, dp } | L4Spec::Sctp { sp, dp } => {
                k.set(Field::TpSrc, *sp as u128);
                k.set(Field::TpDst, *dp as u128);
                p |= parsed::L4;
            }
            L4Spec::Tcp { sp, dp, flags } => {
                k.set(Field::TpSrc, *sp as u128);
                k.set(Field::TpDst, *dp as u128);
                k.set(Field::TcpFlags, (*flags & 0xfff) as u128);
                p |= parsed::L4;
            }
            L4Spec::Icmp { ty, code } | L4Spec::Icmpv6 { ty, code, .. } => {
                k.set(Field::IcmpType, *ty as u128);
                k.set(Field::IcmpCode, *code as u128);
                p |= parsed::L4;
                if let L4Spec::Icmpv6 { nd: Some(nd), .. } = &s.l4 {
                    k.set(Field::NdTarget, u128::from(nd.target));
                    if let Some(m) = nd.sll {
                        k.set(Field::ArpSha, mac_u(&m));
                    }
                    if let Some(m) = nd.tll {
                        k.set(Field::ArpTha, mac_u(&m));
                    }
                }
            }
        }
    }
    k.set(Field::Parsed, p as u128);
    k
}

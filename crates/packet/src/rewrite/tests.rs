use super::*;
use crate::arb;
use crate::builder::{Ipv4Spec, L3Spec, L4Spec, PacketSpec};
use crate::checksum::{pseudo_v4, pseudo_v6, verify};
use crate::extract::extract_packet;
use crate::key::{frag, parsed, FlowKey};
use crate::pool::{Pool, PoolCache};
use crate::wire::test_util::{hex, UDP4};
use proptest::prelude::*;
use std::net::Ipv4Addr;

fn cache() -> PoolCache {
    Pool::with_frames(16).cache()
}

fn packet(c: &mut PoolCache, bytes: &[u8]) -> Packet {
    let mut p = c.alloc_from(bytes).expect("frame");
    let mut k = FlowKey::ZERO;
    extract_packet(&mut p, &mut k);
    p
}

/// Every checksum in the frame is right (IPv4 header, TCP, UDP, ICMP, ICMPv6, SCTP).
fn checksums_ok(d: &[u8]) -> bool {
    let mut k = FlowKey::ZERO;
    let l = crate::extract(d, 0, &mut k);
    let (l3, l4) = (l.l3_off as usize, l.l4_off as usize);
    let proto = k.get(Field::IpProto) as u8;
    match k.get(Field::EthType) as u16 {
        ethertype::IPV4 if l3 != 0 => {
            let ihl = (d[l3] & 0xf) as usize * 4;
            if !verify(&d[l3..l3 + ihl], 0) {
                return false;
            }
            if l4 == 0 || k.get(Field::IpFrag) as u8 & frag::ANY != 0 {
                return true;
            }
            let end = l3 + u16::from_be_bytes([d[l3 + 2], d[l3 + 3]]) as usize;
            let seg = &d[l4..end];
            let src = k.get(Field::Ipv4Src) as u32;
            let dst = k.get(Field::Ipv4Dst) as u32;
            match proto {
                ipproto::UDP if seg[6..8] == [0, 0] => true,
                ipproto::TCP | ipproto::UDP => {
                    verify(seg, pseudo_v4(src, dst, proto, seg.len() as u16))
                }
                ipproto::ICMP => verify(seg, 0),
                ipproto::SCTP => sctp_ok(seg),
                _ => true,
            }
        }
        ethertype::IPV6 if l3 != 0 && l4 != 0 => {
            let end = l3 + 40 + u16::from_be_bytes([d[l3 + 4], d[l3 + 5]]) as usize;
            let seg = &d[l4..end];
            let src = k.get(Field::Ipv6Src);
            let dst = k.get(Field::Ipv6Dst);
            match proto {
                ipproto::TCP | ipproto::UDP | ipproto::ICMPV6 => {
                    verify(seg, pseudo_v6(src, dst, proto, seg.len() as u32))
                }
                ipproto::SCTP => sctp_ok(seg),
                _ => true,
            }
        }
        _ => true,
    }
}

fn sctp_ok(seg: &[u8]) -> bool {
    let mut s = seg.to_vec();
    let stored = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    s[8..12].fill(0);
    crc32c(&s) == stored
}

#[test]
fn set_ipv4_src_golden() {
    let mut c = cache();
    let mut p = packet(&mut c, &hex(UDP4));
    set_field(&mut p, Field::Ipv4Src, 0xc0a8_0101).unwrap();
    let want = hex("020000000002 020000000001 0800
         4500002e 00000000 4011af14 c0a80101 0a000002
         04d20050 001a2eed 000000000000000000000000000000000000");
    assert_eq!(p.data(), &want[..]);
    c.free(p);
}

#[test]
fn set_tp_dst_and_dscp_golden() {
    let mut c = cache();
    let mut p = packet(&mut c, &hex(UDP4));
    set_field(&mut p, Field::TpDst, 8080).unwrap();
    set_field(&mut p, Field::IpDscp, 46).unwrap();
    let want = hex("020000000002 020000000001 0800
         45b8002e 00000000 40116605 0a000001 0a000002
         04d21f90 001ac755 000000000000000000000000000000000000");
    assert_eq!(p.data(), &want[..]);
    c.free(p);
}

#[test]
fn udp_checksum_zero_stays_zero() {
    let mut c = cache();
    let mut b = hex(UDP4);
    b[40..42].fill(0);
    let mut p = packet(&mut c, &b);
    set_field(&mut p, Field::Ipv4Dst, 0x0101_0101).unwrap();
    set_field(&mut p, Field::TpSrc, 53).unwrap();
    assert_eq!(&p.data()[40..42], &[0, 0]);
    assert!(checksums_ok(p.data()));
    c.free(p);
}

#[test]
fn push_then_pop_vlan_golden() {
    let mut c = cache();
    let orig = hex(UDP4);
    let mut p = packet(&mut c, &orig);
    push_vlan(&mut p, 0x8100, 0x2064).unwrap();
    let mut want = hex("020000000002 020000000001 8100 2064");
    want.extend_from_slice(&orig[12..]);
    assert_eq!(p.data(), &want[..]);
    assert_eq!((p.meta.l3_off, p.meta.l4_off), (18, 38));
    set_field(&mut p, Field::VlanVid, 0x1000 | 7).unwrap();
    set_field(&mut p, Field::VlanPcp, 3).unwrap();
    assert_eq!(&p.data()[14..16], &[0x60, 0x07]);
    // Offsets after the push still find the right headers.
    set_field(&mut p, Field::TpSrc, 1).unwrap();
    assert!(checksums_ok(p.data()));
    pop_vlan(&mut p).unwrap();
    assert_eq!((p.meta.l3_off, p.meta.l4_off), (14, 34));
    assert_eq!(&p.data()[..34], &orig[..34]);
    assert_eq!(pop_vlan(&mut p), Err(RewriteError::NoVlanTag));
    c.free(p);
}

#[test]
fn dec_ttl_golden_and_expiry() {
    let mut c = cache();
    let mut b = hex(UDP4);
    let mut p = packet(&mut c, &b);
    assert_eq!(dec_ttl(&mut p), Ok(63));
    b[22] = 63;
    b[24..26].copy_from_slice(&[0x67, 0xbd]);
    assert_eq!(p.data(), &b[..]);
    set_ttl(&mut p, 1).unwrap();
    assert!(checksums_ok(p.data()));
    let before = p.data().to_vec();
    assert_eq!(dec_ttl(&mut p), Err(RewriteError::TtlExpired));
    assert_eq!(p.data(), &before[..]);
    c.free(p);
}

#[test]
fn refusals_name_the_problem() {
    let mut c = cache();
    let mut p = packet(&mut c, &hex(UDP4));
    assert_eq!(
        set_field(&mut p, Field::VlanVid, 5),
        Err(RewriteError::NoVlanTag)
    );
    assert_eq!(
        set_field(&mut p, Field::IpFrag, 1),
        Err(RewriteError::ReadOnly(Field::IpFrag))
    );
    assert_eq!(
        set_field(&mut p, Field::IpTtl, 256),
        Err(RewriteError::ValueTooWide(Field::IpTtl))
    );
    let e = set_field(&mut p, Field::Ipv6Src, 1).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot set ipv6_src: the packet has no IPv6 header; add a match on the field's \
         prerequisites"
    );
    assert_eq!(set_field(&mut p, Field::Metadata, 9), Ok(()));
    assert_eq!(p.data(), &hex(UDP4)[..]);
    c.free(p);
}

#[test]
fn ip_proto_and_eth_type_are_rewritten_with_the_ip_checksum_kept() {
    let mut c = cache();
    let mut p = packet(&mut c, &hex(UDP4));
    set_field(&mut p, Field::IpProto, 6).unwrap();
    let d = p.data();
    assert_eq!(d[14 + 9], 6);
    assert!(
        verify(&d[14..34], 0),
        "IPv4 header checksum after the protocol changed"
    );
    let mut k = FlowKey::ZERO;
    crate::extract(d, 0, &mut k);
    assert_eq!(k.get(Field::IpProto), 6);
    // Only the number and the header checksum changed.
    let want: Vec<usize> = vec![14 + 9, 14 + 10, 14 + 11];
    let changed: Vec<usize> = (0..d.len()).filter(|&i| d[i] != hex(UDP4)[i]).collect();
    assert!(changed.iter().all(|i| want.contains(i)), "{changed:?}");

    // eth_type: the type after the tags, tagged or not.
    set_field(&mut p, Field::EthType, 0x0806).unwrap();
    assert_eq!(&p.data()[12..14], &[0x08, 0x06]);
    push_vlan(&mut p, 0x8100, 0).unwrap();
    set_field(&mut p, Field::EthType, 0x86dd).unwrap();
    assert_eq!(&p.data()[12..18], &[0x81, 0x00, 0x00, 0x00, 0x86, 0xdd]);
    c.free(p);

    // IPv6 without extension headers: the next header; none: refused, nothing changed.
    let mut v6 = PacketSpec::udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 1u32, 2u32, 1, 2, 80);
    v6.l3 = L3Spec::Ipv6(crate::builder::Ipv6Spec::new(
        "fd00::1".parse().unwrap(),
        "fd00::2".parse().unwrap(),
    ));
    let v6 = v6.build();
    let mut q = packet(&mut c, &v6);
    set_field(&mut q, Field::IpProto, 58).unwrap();
    assert_eq!(q.data()[14 + 6], 58);
    c.free(q);
    let arp = hex("ffffffffffff 020000000001 0806 0001 0800 06 04 0001
        020000000001 0a000001 000000000000 0a000002");
    let mut r = packet(&mut c, &arp);
    assert!(set_field(&mut r, Field::IpProto, 6).is_err());
    assert_eq!(r.data(), &arp[..]);
    c.free(r);
}

#[test]
fn sctp_port_rewrite_keeps_crc32c() {
    let mut s = PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        1,
        2,
        100,
    );
    s.l4 = L4Spec::Sctp { sp: 5000, dp: 6000 };
    let mut c = cache();
    let mut p = packet(&mut c, &s.build());
    assert!(checksums_ok(p.data()));
    set_field(&mut p, Field::TpDst, 7000).unwrap();
    assert!(checksums_ok(p.data()));
    // A wrong CRC stays wrong.
    p.data_mut()[50] ^= 0xff;
    set_field(&mut p, Field::TpSrc, 1).unwrap();
    assert!(!checksums_ok(p.data()));
    c.free(p);
}

/// An action the packet lacks the header for is refused and the packet left as it was, so
/// the datapath drops it whole (counted) instead of sending it half-written: a port rewrite
/// on a later fragment (no L4 header, though the flow matched udp), a pop of a tag that is
/// not there, an IPv4 field on an ARP packet.
#[test]
fn a_header_the_packet_lacks_is_refused_and_the_packet_left_alone() {
    let mut c = cache();
    let mut later = PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        1234,
        80,
        60,
    );
    if let L3Spec::Ipv4(ip) = &mut later.l3 {
        ip.frag = 0x2000 | 10;
    }
    let bytes = later.build();
    for at_zero in [false, true] {
        let mut p = packet(&mut c, &bytes);
        if at_zero {
            p.meta.l3_off = 0;
            p.meta.l4_off = 0;
        }
        assert!(set_field(&mut p, Field::TpDst, 99).is_err());
        assert!(set_field(&mut p, Field::TpSrc, 99).is_err());
        assert!(pop_vlan(&mut p).is_err());
        assert_eq!(p.data(), &bytes[..]);
        c.free(p);
    }
    let arp = PacketSpec {
        l3: L3Spec::Arp(crate::builder::ArpSpec {
            op: 1,
            sha: [2, 0, 0, 0, 0, 1],
            spa: Ipv4Addr::new(10, 0, 0, 1),
            tha: [0; 6],
            tpa: Ipv4Addr::new(10, 0, 0, 2),
        }),
        ..PacketSpec::default()
    }
    .build();
    let mut p = packet(&mut c, &arp);
    assert!(set_field(&mut p, Field::IpTtl, 9).is_err());
    assert!(set_field(&mut p, Field::IpDscp, 9).is_err());
    assert_eq!(p.data(), &arp[..]);
    c.free(p);
}

#[test]
fn offsets_left_at_zero_are_rederived() {
    let mut c = cache();
    let mut p = c.alloc_from(&hex(UDP4)).expect("frame");
    set_field(&mut p, Field::TpDst, 8080).unwrap();
    set_field(&mut p, Field::IpDscp, 46).unwrap();
    assert!(checksums_ok(p.data()));
    assert_eq!(&p.data()[36..38], &[0x1f, 0x90]);
    c.free(p);
}

#[test]
fn arp_addresses_are_rewritten() {
    let s = PacketSpec {
        l3: L3Spec::Arp(crate::builder::ArpSpec {
            op: 1,
            sha: [2, 0, 0, 0, 0, 1],
            spa: Ipv4Addr::new(10, 0, 0, 1),
            tha: [0; 6],
            tpa: Ipv4Addr::new(10, 0, 0, 2),
        }),
        ..PacketSpec::default()
    };
    let mut c = cache();
    let mut p = packet(&mut c, &s.build());
    set_field(&mut p, Field::Ipv4Dst, 0x0a00_0009).unwrap();
    set_field(&mut p, Field::ArpOp, 2).unwrap();
    set_field(&mut p, Field::ArpTha, 0x0200_0000_0009).unwrap();
    let mut k = FlowKey::ZERO;
    extract_packet(&mut p, &mut k);
    assert_eq!(k.get(Field::Ipv4Dst), 0x0a00_0009);
    assert_eq!(k.get(Field::ArpOp), 2);
    assert_eq!(k.get(Field::ArpTha), 0x0200_0000_0009);
    assert!(matches!(
        set_field(&mut p, Field::TpSrc, 1),
        Err(RewriteError::NoHeader { .. })
    ));
    c.free(p);
    let _ = Ipv4Spec::new(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
}

#[test]
fn ipv6_dst_behind_routing_header_leaves_l4_checksum() {
    use crate::builder::{Ipv6Ext, Ipv6Spec};
    let s = PacketSpec {
        l3: L3Spec::Ipv6(Ipv6Spec {
            ext: vec![Ipv6Ext::Routing],
            ..Ipv6Spec::new(
                "2001:db8::1".parse().unwrap(),
                "2001:db8::2".parse().unwrap(),
            )
        }),
        l4: L4Spec::Udp { sp: 1, dp: 2 },
        ..PacketSpec::default()
    };
    let mut b = s.build();
    b[14 + 40 + 3] = 1; // segments left
    let mut c = cache();
    let mut p = packet(&mut c, &b);
    let csum_at = 14 + 40 + 8 + 6;
    let before = p.data()[csum_at..csum_at + 2].to_vec();
    set_field(&mut p, Field::Ipv6Dst, 0x2001_0db8 << 96 | 9).unwrap();
    assert_eq!(&p.data()[csum_at..csum_at + 2], &before[..]);
    set_field(&mut p, Field::Ipv6Src, 0x2001_0db8 << 96 | 7).unwrap();
    assert_ne!(&p.data()[csum_at..csum_at + 2], &before[..]);
    c.free(p);
}

/// Fields set-field may write on some packet.
const WRITABLE: &[Field] = &[
    Field::EthDst,
    Field::EthSrc,
    Field::VlanTci,
    Field::VlanVid,
    Field::VlanPcp,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::IpDscp,
    Field::IpEcn,
    Field::IpTtl,
    Field::TpSrc,
    Field::TpDst,
    Field::IcmpType,
    Field::IcmpCode,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::Ipv6Label,
    Field::ArpOp,
    Field::ArpSha,
    Field::ArpTha,
    Field::NdTarget,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The property: rewrite keeps every checksum right, and re-extraction shows the
    /// new value in that field and nothing else changed.
    #[test]
    fn rewrite_changes_only_its_field(s in arb::spec(), fi in 0..WRITABLE.len(), v in any::<u128>()) {
        let field = WRITABLE[fi];
        let value = v & field.max_value();
        let mut c = cache();
        let mut p = c.alloc_from(&s.build()).expect("frame");
        let mut before = FlowKey::ZERO;
        extract_packet(&mut p, &mut before);
        prop_assert!(checksums_ok(p.data()));
        let icmpv6 = before.get(Field::IpProto) == 58 && before.get(Field::EthType) == 0x86dd;
        let nd_type = |t: u128| t == 135 || t == 136;
        let changes_nd = icmpv6
            && ((field == Field::IcmpType && (nd_type(value) || nd_type(before.get(Field::IcmpType))))
                || (field == Field::IcmpCode && nd_type(before.get(Field::IcmpType))));
        prop_assume!(!changes_nd);
        let bytes = p.data().to_vec();
        match set_field(&mut p, field, value) {
            Ok(()) => {
                prop_assert!(checksums_ok(p.data()), "bad checksum after {:?}", field);
                let mut after = FlowKey::ZERO;
                extract_packet(&mut p, &mut after);
                let mut want = before;
                let shown = match field {
                    Field::VlanTci | Field::VlanVid => value | 0x1000,
                    _ => value,
                };
                want.set(field, shown);
                prop_assert_eq!(after, want, "{:?} = {:#x}", field, value);
            }
            Err(_) => prop_assert_eq!(p.data(), &bytes[..], "refused rewrite changed bytes"),
        }
        // Fields the key says are present must be writable.
        let pb = before.get(Field::Parsed) as u16;
        let l4 = pb & parsed::L4 != 0;
        let proto = before.get(Field::IpProto) as u8;
        let must = match field {
            Field::EthDst | Field::EthSrc => true,
            Field::TpSrc | Field::TpDst => l4 && matches!(proto, 6 | 17 | 132),
            Field::IpTtl | Field::IpDscp | Field::IpEcn => pb & parsed::L3 != 0
                && before.get(Field::EthType) != 0x0806,
            _ => false,
        };
        if must {
            let mut q = c.alloc_from(&bytes).expect("frame");
            let mut scratch = FlowKey::ZERO;
            extract_packet(&mut q, &mut scratch);
            prop_assert_eq!(set_field(&mut q, field, value), Ok(()));
            c.free(q);
        }
        c.free(p);
    }

    /// dec_ttl keeps checksums right and lowers the key's TTL by one.
    #[test]
    fn dec_ttl_then_extract(s in arb::spec()) {
        let mut c = cache();
        let mut p = packet(&mut c, &s.build());
        let mut before = FlowKey::ZERO;
        extract_packet(&mut p, &mut before);
        if let Ok(t) = dec_ttl(&mut p) {
            let mut after = FlowKey::ZERO;
            extract_packet(&mut p, &mut after);
            prop_assert!(checksums_ok(p.data()));
            prop_assert_eq!(t as u128 + 1, before.get(Field::IpTtl));
            before.set(Field::IpTtl, t as u128);
            prop_assert_eq!(after, before);
        }
        c.free(p);
    }

    /// push_vlan then pop_vlan is the identity on the bytes; with the tag the key shows it and
    /// the offsets moved by 4 still match the bytes.
    #[test]
    fn push_pop_vlan_roundtrip(mut s in arb::spec(), tci in any::<u16>()) {
        // A third tag is not parsed (the key has room for two), so L3 would vanish.
        s.vlans.truncate(1);
        let mut c = cache();
        let bytes = s.build();
        let mut p = packet(&mut c, &bytes);
        let mut before = FlowKey::ZERO;
        extract_packet(&mut p, &mut before);
        push_vlan(&mut p, 0x8100, tci).unwrap();
        let mut k = FlowKey::ZERO;
        let (l3, l4) = (p.meta.l3_off, p.meta.l4_off);
        extract_packet(&mut p, &mut k);
        prop_assert_eq!((p.meta.l3_off, p.meta.l4_off), (l3, l4));
        prop_assert_eq!(k.get(Field::VlanTci), (tci | 0x1000) as u128);
        pop_vlan(&mut p).unwrap();
        prop_assert_eq!(p.data(), &bytes[..]);
        c.free(p);
    }
}

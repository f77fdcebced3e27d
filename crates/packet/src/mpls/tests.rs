use super::*;
use crate::builder::{Ipv6Spec, L3Spec, L4Spec, PacketSpec};
use crate::checksum::verify;
use crate::extract::extract_packet;
use crate::key::{parsed, FlowKey};
use crate::pool::{Pool, PoolCache};
use crate::rewrite;
use std::net::Ipv4Addr;

fn cache() -> PoolCache {
    Pool::with_frames(16).cache()
}

fn udp4(ttl: u8) -> PacketSpec {
    let mut s = PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        1234,
        80,
        60,
    );
    if let L3Spec::Ipv4(ip) = &mut s.l3 {
        ip.ttl = ttl;
    }
    s
}

fn key_of(p: &mut Packet) -> FlowKey {
    let mut k = FlowKey::ZERO;
    extract_packet(p, &mut k);
    k
}

#[test]
fn extraction_keeps_the_top_entry_and_reads_nothing_below() {
    let frame = udp4(64).build_mpls(0x8847, &[lse(100, 5, false, 9), lse(200, 1, true, 8)]);
    let mut k = FlowKey::ZERO;
    let l = crate::extract(&frame, 1, &mut k);
    assert_eq!(k.get(Field::EthType), 0x8847);
    assert_eq!(k.get(Field::MplsLabel), 100);
    assert_eq!(k.get(Field::MplsTc), 5);
    assert_eq!(k.get(Field::MplsBos), 0);
    assert_eq!(k.get(Field::MplsTtl), 9);
    assert_eq!(
        k.get(Field::Ipv4Src),
        0,
        "the IPv4 header under the stack is not read"
    );
    assert_eq!((l.l3_off, l.l4_off), (0, 0));
    assert_eq!(k.get(Field::Parsed) as u16 & parsed::TRUNCATED, 0);
    // A frame that ends inside the top entry is truncated.
    let mut k = FlowKey::ZERO;
    crate::extract(&frame[..16], 1, &mut k);
    assert_ne!(k.get(Field::Parsed) as u16 & parsed::TRUNCATED, 0);
}

/// Under a bottom-of-stack entry, an IP header and its L4 header fill the key (what the
/// tables after a pop_mpls match); the layers stay unset and a payload that does not parse
/// is no error of the frame's.
#[test]
fn extraction_reads_ip_under_the_bottom_of_the_stack() {
    let frame = udp4(64).build_mpls(0x8847, &[lse(200, 1, true, 8)]);
    let mut k = FlowKey::ZERO;
    let l = crate::extract(&frame, 1, &mut k);
    assert_eq!(k.get(Field::EthType), 0x8847);
    assert_eq!(k.get(Field::MplsLabel), 200);
    assert_eq!(k.get(Field::MplsBos), 1);
    assert_eq!(k.get(Field::MplsTtl), 8);
    assert_eq!(k.get(Field::Ipv4Src), 0x0a00_0001);
    assert_eq!(k.get(Field::Ipv4Dst), 0x0a00_0002);
    assert_eq!(k.get(Field::IpProto), 17);
    assert_eq!(k.get(Field::IpTtl), 64);
    assert_eq!((k.get(Field::TpSrc), k.get(Field::TpDst)), (1234, 80));
    assert_eq!((l.l3_off, l.l4_off), (0, 0));
    assert_eq!(k.get(Field::Parsed) as u16 & !parsed::ETH, 0);

    let mut v6 = udp4(64);
    v6.l3 = L3Spec::Ipv6(Ipv6Spec::new(
        "2001:db8::1".parse().unwrap(),
        "2001:db8::2".parse().unwrap(),
    ));
    let frame = v6.build_mpls(0x8847, &[lse(2, 0, true, 7)]);
    let mut k = FlowKey::ZERO;
    crate::extract(&frame, 1, &mut k);
    assert_eq!(
        k.get(Field::Ipv6Dst),
        0x2001_0db8_0000_0000_0000_0000_0000_0002
    );
    assert_eq!(k.get(Field::IpProto), 17);
    assert_eq!(k.get(Field::MplsLabel), 2);
    assert_eq!(k.get(Field::MplsTtl), 7);

    // Cut inside the IPv4 header: the entry is read, the rest is not, nothing is reported.
    let frame = udp4(64).build_mpls(0x8847, &[lse(200, 1, true, 8)]);
    let mut k = FlowKey::ZERO;
    crate::extract(&frame[..30], 1, &mut k);
    assert_eq!(k.get(Field::MplsLabel), 200);
    assert_eq!(k.get(Field::Ipv4Src), 0);
    assert_eq!(k.get(Field::Parsed) as u16 & !parsed::ETH, 0);
}

#[test]
fn push_then_pop_gives_back_the_frame() {
    let mut c = cache();
    let orig = udp4(64).build();
    let mut p = c.alloc_from(&orig).unwrap();
    key_of(&mut p);
    push_mpls(&mut p, 0x8847, lse(16, 3, true, 64)).unwrap();
    assert_eq!(p.len(), orig.len() + 4);
    assert_eq!(&p.data()[..12], &orig[..12], "addresses stay in front");
    let k = key_of(&mut p);
    assert_eq!(k.get(Field::EthType), 0x8847);
    assert_eq!(k.get(Field::MplsLabel), 16);
    assert_eq!(k.get(Field::MplsBos), 1);
    assert_eq!(
        &p.data()[18..],
        &orig[14..],
        "the IPv4 packet follows the entry"
    );
    pop_mpls(&mut p, 0x0800).unwrap();
    assert_eq!(p.data(), &orig[..]);
    let k = key_of(&mut p);
    assert_eq!(k.get(Field::Ipv4Dst), 0x0a00_0002);
    c.free(p);
}

#[test]
fn a_push_onto_a_stack_copies_its_top_entry() {
    let mut c = cache();
    let frame = udp4(64).build_mpls(0x8847, &[lse(100, 5, true, 9)]);
    let mut p = c.alloc_from(&frame).unwrap();
    push_mpls(&mut p, 0x8847, lse(1, 1, true, 1)).unwrap();
    assert_eq!(&p.data()[14..18], &lse(100, 5, false, 9).to_be_bytes());
    assert_eq!(&p.data()[18..22], &lse(100, 5, true, 9).to_be_bytes());
    c.free(p);
}

#[test]
fn push_goes_behind_vlan_tags_and_pop_finds_the_entry_there() {
    let mut c = cache();
    let mut s = udp4(64);
    s.vlans = vec![(0x8100, 10)];
    let orig = s.build();
    let mut p = c.alloc_from(&orig).unwrap();
    push_mpls(&mut p, 0x8848, lse(7, 0, true, 1)).unwrap();
    assert_eq!(
        &p.data()[12..22],
        &[0x81, 0, 0, 10, 0x88, 0x48, 0, 0, 0x71, 1]
    );
    let k = key_of(&mut p);
    assert_eq!(k.get(Field::VlanVid), 0x1000 | 10);
    assert_eq!(k.get(Field::MplsLabel), 7);
    pop_mpls(&mut p, 0x0800).unwrap();
    assert_eq!(p.data(), &orig[..]);
    c.free(p);
}

#[test]
fn a_push_beyond_the_headroom_or_a_pop_without_a_stack_leaves_the_packet_alone() {
    let mut c = cache();
    let orig = udp4(64).build();
    let mut p = c.alloc_from(&orig).unwrap();
    assert_eq!(
        pop_mpls(&mut p, 0x0800),
        Err(RewriteError::NoHeader {
            field: Field::MplsLabel,
            needs: "MPLS"
        })
    );
    assert_eq!(p.data(), &orig[..]);
    let room = p.headroom() / LSE_LEN;
    for _ in 0..room {
        push_mpls(&mut p, 0x8847, lse(1, 0, false, 5)).unwrap();
    }
    let full = p.data().to_vec();
    assert_eq!(
        push_mpls(&mut p, 0x8847, lse(1, 0, false, 5)),
        Err(RewriteError::NoHeadroom)
    );
    assert_eq!(p.data(), &full[..]);
    c.free(p);
}

#[test]
fn set_field_writes_each_part_of_the_top_entry() {
    let mut c = cache();
    let frame = udp4(64).build_mpls(0x8847, &[lse(100, 5, false, 9), lse(200, 1, true, 8)]);
    let mut p = c.alloc_from(&frame).unwrap();
    rewrite::set_field(&mut p, Field::MplsLabel, 0xfffff).unwrap();
    rewrite::set_field(&mut p, Field::MplsTc, 2).unwrap();
    rewrite::set_field(&mut p, Field::MplsTtl, 33).unwrap();
    rewrite::set_field(&mut p, Field::MplsBos, 1).unwrap();
    assert_eq!(&p.data()[14..18], &lse(0xfffff, 2, true, 33).to_be_bytes());
    assert_eq!(
        &p.data()[18..],
        &frame[18..],
        "the second entry is untouched"
    );
    // Not MPLS: refused, unchanged.
    let plain = udp4(64).build();
    let mut q = c.alloc_from(&plain).unwrap();
    assert!(rewrite::set_field(&mut q, Field::MplsLabel, 1).is_err());
    assert_eq!(q.data(), &plain[..]);
    c.free(p);
    c.free(q);
}

#[test]
fn dec_mpls_ttl_stops_at_one() {
    let mut c = cache();
    let frame = udp4(64).build_mpls(0x8847, &[lse(100, 0, true, 2)]);
    let mut p = c.alloc_from(&frame).unwrap();
    assert_eq!(dec_mpls_ttl(&mut p), Ok(1));
    let before = p.data().to_vec();
    assert_eq!(dec_mpls_ttl(&mut p), Err(RewriteError::TtlExpired));
    assert_eq!(p.data(), &before[..]);
    c.free(p);
}

#[test]
fn ttl_copies_go_between_the_top_entry_and_what_is_below() {
    let mut c = cache();
    // Over IPv4 (TTL 40): copy out sets the entry's TTL to 40; copy in writes 7 back with a
    // right header checksum.
    let frame = udp4(40).build_mpls(0x8847, &[lse(100, 0, true, 3)]);
    let mut p = c.alloc_from(&frame).unwrap();
    copy_ttl_out(&mut p).unwrap();
    assert_eq!(p.data()[17], 40);
    rewrite::set_field(&mut p, Field::MplsTtl, 7).unwrap();
    copy_ttl_in(&mut p).unwrap();
    assert_eq!(p.data()[18 + 8], 7);
    assert!(verify(&p.data()[18..38], 0), "IPv4 header checksum");
    c.free(p);
    // Over another entry.
    let frame = udp4(40).build_mpls(0x8847, &[lse(1, 0, false, 3), lse(2, 0, true, 50)]);
    let mut p = c.alloc_from(&frame).unwrap();
    copy_ttl_out(&mut p).unwrap();
    assert_eq!(p.data()[17], 50);
    rewrite::set_field(&mut p, Field::MplsTtl, 9).unwrap();
    copy_ttl_in(&mut p).unwrap();
    assert_eq!(p.data()[21], 9);
    c.free(p);
    // Over IPv6: the hop limit.
    let v6 = PacketSpec {
        l3: L3Spec::Ipv6(Ipv6Spec::new(
            "fe80::1".parse().unwrap(),
            "fe80::2".parse().unwrap(),
        )),
        l4: L4Spec::Udp { sp: 1, dp: 2 },
        frame_len: 80,
        ..PacketSpec::default()
    };
    let frame = v6.build_mpls(0x8847, &[lse(2, 0, true, 3)]);
    let mut p = c.alloc_from(&frame).unwrap();
    copy_ttl_out(&mut p).unwrap();
    assert_eq!(p.data()[17], 64);
    c.free(p);
    // Nothing known below: refused.
    let frame = PacketSpec::default().build_mpls(0x8847, &[lse(2, 0, true, 3)]);
    let mut p = c.alloc_from(&frame).unwrap();
    assert!(copy_ttl_out(&mut p).is_err());
    assert_eq!(p.data(), &frame[..]);
    c.free(p);
}

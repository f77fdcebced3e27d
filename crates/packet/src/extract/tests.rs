use super::*;
use crate::arb;
use crate::key::Field;
use crate::wire::test_util::{hex, UDP4};
use proptest::prelude::*;

#[test]
fn eth_ipv4_udp_golden_key() {
    let p = hex(UDP4);
    let mut k = FlowKey::ZERO;
    let l = extract(&p, 5, &mut k);
    assert_eq!(
        l,
        Layers {
            l3_off: 14,
            l4_off: 34,
            parsed: parsed::ETH | parsed::L3 | parsed::L4,
        }
    );
    assert_eq!(k.w[0], 0x0019_0800_0000_0005); // parsed ETH|L3|L4, IPv4, port 5
    assert_eq!(k.w[3], 0x0200_0000_0002_0000);
    assert_eq!(k.w[4], 0x0200_0000_0001_0000);
    assert_eq!(k.w[5], 0x0a00_0001_0a00_0002);
    assert_eq!(k.w[6], 0x1100_4000_04d2_0050); // proto 17, tos 0, ttl 64, frag 0, ports
    for (i, w) in k.w.iter().enumerate() {
        if ![0, 3, 4, 5, 6].contains(&i) {
            assert_eq!(*w, 0, "word {i}");
        }
    }
}

#[test]
fn stale_key_bits_never_leak() {
    let p = hex(UDP4);
    let mut a = FlowKey::ONES;
    let mut b = FlowKey::ZERO;
    extract(&p, 1, &mut a);
    extract(&p, 1, &mut b);
    assert_eq!(a, b);
    extract(&[], 1, &mut a);
    assert_eq!(a.get(Field::Parsed), parsed::TRUNCATED as u128);
    assert_eq!(a.w[1..], [0; KEY_WORDS_MINUS_ONE]);
}

const KEY_WORDS_MINUS_ONE: usize = crate::key::KEY_WORDS - 1;

#[test]
fn qinq_tags_go_to_vlan_and_cvlan() {
    let mut p = hex("ffffffffffff 020000000001 88a8 a064 8100 2005 0806");
    p.extend_from_slice(&hex(
        "0001 0800 06 04 0001 020000000001 0a000001 000000000000 0a000002",
    ));
    let mut k = FlowKey::ZERO;
    let l = extract(&p, 1, &mut k);
    assert_eq!(l.l3_off, 22);
    assert_eq!(k.get(Field::VlanTci), 0xb064);
    assert_eq!(k.get(Field::VlanVid), 0x1064);
    assert_eq!(k.get(Field::VlanPcp), 5);
    assert_eq!(k.get(Field::CvlanTci), 0x3005);
    assert_eq!(k.get(Field::EthType), 0x0806);
    assert_eq!(k.get(Field::ArpOp), 1);
    assert_eq!(k.get(Field::ArpSha), 0x0200_0000_0001);
    assert_eq!(k.get(Field::Ipv4Src), 0x0a00_0001);
    assert_eq!(k.get(Field::Ipv4Dst), 0x0a00_0002);
    assert_eq!(
        k.get(Field::Parsed) as u16,
        parsed::ETH | parsed::VLAN | parsed::QINQ | parsed::L3
    );
}

#[test]
fn neighbour_solicitation_golden() {
    // NS for fe80::1 with a source link-layer option.
    let mut p = hex("3333ff000001 020000000001 86dd");
    p.extend_from_slice(&hex(
        "60000000 0020 3a ff fe800000000000000000000000000002 ff0200000000000000000001ff000001",
    ));
    p.extend_from_slice(&hex(
        "8700 0000 00000000 fe800000000000000000000000000001 0101 020000000001",
    ));
    let mut k = FlowKey::ZERO;
    let l = extract(&p, 1, &mut k);
    assert_eq!(
        l,
        Layers {
            l3_off: 14,
            l4_off: 54,
            parsed: k.get(Field::Parsed) as u16,
        }
    );
    assert_eq!(k.get(Field::IpProto), 58);
    assert_eq!(k.get(Field::IcmpType), 135);
    assert_eq!(k.get(Field::IpTtl), 255);
    assert_eq!(
        k.get(Field::NdTarget),
        0xfe80_0000_0000_0000_0000_0000_0000_0001
    );
    assert_eq!(k.get(Field::ArpSha), 0x0200_0000_0001);
    assert_eq!(k.get(Field::ArpTha), 0);
}

#[test]
fn truncated_and_malformed_headers_are_flagged() {
    let p = hex(UDP4);
    let mut k = FlowKey::ZERO;
    // Cut inside the UDP header: L3 kept, no L4.
    let l = extract(&p[..38], 1, &mut k);
    let f = k.get(Field::Parsed) as u16;
    assert_eq!(
        l,
        Layers {
            l3_off: 14,
            l4_off: 0,
            parsed: f,
        }
    );
    assert!(f & parsed::TRUNCATED != 0 && f & parsed::L3 != 0 && f & parsed::L4 == 0);
    assert_eq!(k.get(Field::Ipv4Src), 0x0a00_0001);
    assert_eq!(k.get(Field::TpSrc), 0);
    // Cut inside the IPv4 header: only L2.
    extract(&p[..20], 1, &mut k);
    assert_eq!(k.get(Field::Parsed) as u16, parsed::ETH | parsed::TRUNCATED);
    assert_eq!(k.get(Field::EthType), 0x0800);
    // IHL 4: malformed.
    let mut bad = p.clone();
    bad[14] = 0x44;
    extract(&bad, 1, &mut k);
    assert_eq!(k.get(Field::Parsed) as u16, parsed::ETH | parsed::MALFORMED);
    // Version 6 in an IPv4 frame: malformed.
    bad[14] = 0x65;
    extract(&bad, 1, &mut k);
    assert_eq!(k.get(Field::Parsed) as u16, parsed::ETH | parsed::MALFORMED);
}

#[test]
fn later_fragment_has_no_l4() {
    let mut p = hex(UDP4);
    p[20] = 0x00;
    p[21] = 0x10; // offset 16 * 8
    let mut k = FlowKey::ZERO;
    let l = extract(&p, 1, &mut k);
    assert_eq!(l.l4_off, 0);
    assert_eq!(k.get(Field::IpFrag), (frag::ANY | frag::LATER) as u128);
    assert_eq!(k.get(Field::TpSrc), 0);
    assert_eq!(k.get(Field::IpProto), 17);
}

#[test]
fn ieee_802_3_frame_gets_type_none() {
    let p = hex("0180c2000000 020000000001 0026 424203000000000000000000000000");
    let mut k = FlowKey::ZERO;
    extract(&p, 1, &mut k);
    assert_eq!(k.get(Field::EthType), ethertype::NONE as u128);
    assert_eq!(k.get(Field::Parsed) as u16, parsed::ETH);
}

#[test]
fn extract_packet_sets_meta_offsets() {
    let pool = crate::Pool::with_frames(2);
    let mut cache = pool.cache();
    let mut pkt = cache.alloc_from(&hex(UDP4)).expect("frame");
    pkt.meta.in_port = 9;
    let mut k = FlowKey::ZERO;
    extract_packet(&mut pkt, &mut k);
    assert_eq!((pkt.meta.l3_off, pkt.meta.l4_off), (14, 34));
    assert_eq!(k.get(Field::InPort), 9);
    cache.free(pkt);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The property: build -> extract gives back every field of the spec.
    #[test]
    fn build_then_extract_gives_the_spec(s in arb::spec(), in_port in any::<u32>()) {
        let bytes = s.build();
        let mut k = FlowKey::ONES;
        let l = extract(&bytes, in_port, &mut k);
        let want = arb::expected_key(&s, in_port);
        prop_assert_eq!(k, want, "spec {:?}", s);
        prop_assert_eq!(l.l3_off != 0, k.get(Field::Parsed) as u16 & parsed::L3 != 0);
        prop_assert_eq!(l.l4_off != 0, k.get(Field::Parsed) as u16 & parsed::L4 != 0);
        prop_assert_eq!(l.parsed, k.get(Field::Parsed) as u16, "the bits returned are the key's");
    }

    /// The fast path gives exactly the general parser's key and layers wherever it applies,
    /// on built frames (whole, cut, or padded) and on random bytes behind an IPv4 header.
    #[test]
    fn fast_path_matches_the_general_parser(
        s in arb::spec(),
        cut in any::<usize>(),
        pad in 0usize..8,
        in_port in any::<u32>(),
    ) {
        let mut bytes = s.build();
        bytes.extend(std::iter::repeat_n(0xa5, pad));
        let cut = cut % (bytes.len() + 1);
        check_fast_path(&bytes[..cut], in_port)?;
        check_fast_path(&bytes, in_port)?;
    }

    /// Random bytes after an Ethernet/IPv4 prefix, so the fast path's checks are all reached.
    #[test]
    fn fast_path_matches_on_random_bytes(
        mut bytes in proptest::collection::vec(any::<u8>(), 0..120),
        proto_tcp in any::<bool>(),
        ihl_ok in any::<bool>(),
        in_port in any::<u32>(),
    ) {
        if bytes.len() >= 24 {
            bytes[12] = 0x08;
            bytes[13] = 0x00;
            if ihl_ok {
                bytes[14] = 0x45;
            }
            bytes[23] = if proto_tcp { ipproto::TCP } else { ipproto::UDP };
            // A plausible total length half of the time.
            if bytes[15] & 1 == 0 {
                let tot = bytes.len().saturating_sub(14) as u16 - (bytes[15] as u16 & 7);
                bytes[16..18].copy_from_slice(&tot.to_be_bytes());
                bytes[20] &= 0x80;
                bytes[21] = 0;
            }
        }
        check_fast_path(&bytes, in_port)?;
    }

    /// Every prefix of a valid frame parses without panicking and keeps the L2 fields.
    #[test]
    fn prefixes_never_panic(s in arb::spec(), cut in any::<usize>()) {
        let bytes = s.build();
        let cut = cut % (bytes.len() + 1);
        let mut k = FlowKey::ZERO;
        let l = extract(&bytes[..cut], 1, &mut k);
        prop_assert!(l.l3_off as usize <= cut && l.l4_off as usize <= cut);
        if cut >= 14 {
            prop_assert_eq!(k.get(Field::EthDst), arb::expected_key(&s, 1).get(Field::EthDst));
        }
    }
}

/// Asserts that the fast path, where it applies, agrees with the general parser.
fn check_fast_path(bytes: &[u8], in_port: u32) -> Result<(), TestCaseError> {
    let mut general = FlowKey::ONES;
    let gl = extract_general(bytes, in_port, &mut general);
    let mut fast = FlowKey::ONES;
    if let Some(fl) = extract_fast(bytes, in_port, &mut fast) {
        prop_assert_eq!(fast, general, "frame {:02x?}", bytes);
        prop_assert_eq!(fl, gl);
    } else {
        prop_assert_eq!(fast, FlowKey::ONES, "a refused frame leaves the key alone");
    }
    let mut full = FlowKey::ONES;
    prop_assert_eq!(extract(bytes, in_port, &mut full), gl);
    prop_assert_eq!(full, general);
    Ok(())
}

#[test]
fn fast_path_takes_udp_and_tcp_and_refuses_the_rest() {
    let udp = hex(UDP4);
    let mut k = FlowKey::ZERO;
    assert!(extract_fast(&udp, 1, &mut k).is_some());
    let mut tcp = udp.clone();
    tcp[23] = ipproto::TCP;
    tcp[46] = 0x50;
    assert!(extract_fast(&tcp, 1, &mut k).is_some());
    let mut frag = udp.clone();
    frag[20] = 0x20; // more fragments
    assert!(extract_fast(&frag, 1, &mut k).is_none());
    let mut opts = udp.clone();
    opts[14] = 0x46;
    assert!(extract_fast(&opts, 1, &mut k).is_none());
    assert!(extract_fast(&udp[..53], 1, &mut k).is_none());
}

/// Rough speed check, not a benchmark: `cargo test -p packet --release extract_speed --
/// --ignored --nocapture` prints nanoseconds per Eth/IPv4/UDP extraction.
#[test]
#[ignore]
fn extract_speed() {
    let frames: Vec<Vec<u8>> = (0..32u8)
        .map(|i| {
            let mut p = hex(UDP4);
            p[33] = i;
            p
        })
        .collect();
    let mut k = FlowKey::ZERO;
    let n = 20_000_000usize;
    let t = std::time::Instant::now();
    let mut acc = 0u64;
    for i in 0..n {
        let f = std::hint::black_box(&frames[i & 31]);
        let l = extract(f, 1, &mut k);
        acc = acc.wrapping_add(k.w[5] ^ l.l4_off as u64);
    }
    let ns = t.elapsed().as_nanos() as f64 / n as f64;
    println!("extract Eth/IPv4/UDP: {ns:.2} ns/packet (checksum {acc:#x})");
}

#[test]
fn ipv6_exthdr_flags_follow_the_chain() {
    use crate::builder::{Ipv6Ext as E, Ipv6Spec, L3Spec, L4Spec, PacketSpec};
    use crate::key::exthdr::*;
    let flags = |ext: Vec<E>, l4: L4Spec| {
        let mut ip = Ipv6Spec::new("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
        ip.ext = ext;
        let s = PacketSpec {
            l3: L3Spec::Ipv6(ip),
            l4,
            frame_len: 0,
            ..PacketSpec::default()
        };
        let mut k = FlowKey::ZERO;
        extract(&s.build(), 1, &mut k);
        k.get(Field::Ipv6Exthdr) as u16
    };
    let udp = || L4Spec::Udp { sp: 1, dp: 2 };
    let frag = E::Fragment {
        offset: 0,
        more: true,
        ident: 1,
    };
    assert_eq!(flags(vec![], udp()), 0);
    assert_eq!(flags(vec![], L4Spec::None), NONEXT);
    assert_eq!(
        flags(
            vec![E::HopByHop, E::DestOpts, E::Routing, frag, E::Ah],
            udp()
        ),
        HOP | DEST | ROUTER | FRAG | AUTH
    );
    // Destination options for the final destination, after the routing header: in order.
    assert_eq!(
        flags(vec![E::Routing, E::DestOpts], L4Spec::None),
        ROUTER | DEST | NONEXT
    );
    assert_eq!(
        flags(vec![E::Routing, E::HopByHop], udp()),
        ROUTER | HOP | UNSEQ
    );
    assert_eq!(flags(vec![E::Ah, E::Routing], udp()), AUTH | ROUTER | UNSEQ);
    assert_eq!(flags(vec![frag, frag], udp()), FRAG | UNREP);
    assert_eq!(
        flags(vec![E::DestOpts, E::Routing, E::DestOpts], udp()),
        DEST | ROUTER
    );
    assert_eq!(
        flags(vec![E::DestOpts, E::DestOpts, E::DestOpts], udp()),
        DEST | UNREP
    );
    // ESP: where the walk stops (its content is encrypted). Next header 59 patched to 50.
    let mut ip = Ipv6Spec::new("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
    ip.ext = vec![E::HopByHop];
    let s = PacketSpec {
        l3: L3Spec::Ipv6(ip),
        l4: L4Spec::None,
        frame_len: 0,
        ..PacketSpec::default()
    };
    let mut b = s.build();
    assert_eq!(b[54], 59, "hop-by-hop's next header");
    b[54] = 50;
    let mut k = FlowKey::ZERO;
    extract(&b, 1, &mut k);
    assert_eq!(k.get(Field::Ipv6Exthdr) as u16, HOP | ESP);
}

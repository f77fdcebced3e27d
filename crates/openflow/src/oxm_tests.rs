use super::*;
use crate::wire::Reader;

fn enc(m: &Match) -> Vec<u8> {
    let mut b = Vec::new();
    write_match(m, &mut b).unwrap();
    b
}

fn dec(b: &[u8]) -> Result<Match, DecodeError> {
    let mut r = Reader::new(b, ErrorCode::BRC_BAD_LEN, "test");
    let m = read_match(&mut r)?;
    assert!(r.is_empty());
    Ok(m)
}

fn tlv(header: u32, value: &[u8]) -> Vec<u8> {
    let mut v = header.to_be_bytes().to_vec();
    v.extend_from_slice(value);
    v
}

fn fields(parts: &[Vec<u8>]) -> Result<Match, DecodeError> {
    decode_oxm_fields(&parts.concat())
}

const ETH_TYPE: u32 = 0x8000_0a02;
const IP_PROTO: u32 = 0x8000_1401;
const TCP_DST: u32 = 0x8000_1c02;
const IPV4_SRC: u32 = 0x8000_1604;
const VLAN_VID: u32 = 0x8000_0c02;
const VLAN_PCP: u32 = 0x8000_0e01;

#[test]
fn names_used_by_the_encoder_exist() {
    for f in Field::ALL {
        for eth in [0u128, 0x0800, 0x0806, 0x86dd] {
            let mut m = Match::ANY;
            m.set_exact(Field::EthType, eth);
            let d = def_for(*f, &m);
            if matches!(f, F::Parsed | F::CvlanTci | F::MplsLse) {
                assert!(d.is_none());
            } else {
                let d = d.unwrap_or_else(|| panic!("{f:?}"));
                assert_eq!(d.key, *f);
                assert_eq!(def_named(d.name).name, d.name);
            }
        }
    }
}

#[test]
fn tcp_dst_golden_bytes() {
    let mut m = Match::ANY;
    m.set_exact(F::EthType, 0x0800);
    m.set_exact(F::IpProto, 6);
    m.set_exact(F::TpDst, 80);
    let b = enc(&m);
    #[rustfmt::skip]
    let want = [
        0, 1, 0, 0x15,
        0x80, 0, 0x0a, 2, 0x08, 0x00,
        0x80, 0, 0x14, 1, 6,
        0x80, 0, 0x1c, 2, 0, 80,
        0, 0, 0,
    ];
    assert_eq!(b, want);
    assert_eq!(dec(&b).unwrap(), m);
}

#[test]
fn masked_and_shared_slots_roundtrip() {
    let mut m = Match::ANY;
    m.set_exact(F::EthType, 0x0806);
    m.set_masked(F::Ipv4Src, 0x0a00_0000, 0xff00_0000);
    m.set_exact(F::ArpSha, 0x0200_0000_0001);
    let b = enc(&m);
    // ARP_SPA with mask: class 0x8000, field 22, has_mask, length 8.
    assert_eq!(&b[10..14], &[0x80, 0x00, 0x2d, 0x08]);
    assert_eq!(dec(&b).unwrap(), m);

    let mut nd = Match::ANY;
    nd.set_exact(F::EthType, 0x86dd);
    nd.set_exact(F::IpProto, 58);
    nd.set_exact(F::IcmpType, 135);
    nd.set_exact(F::ArpSha, 0x0200_0000_0002);
    nd.set_exact(F::NdTarget, 1);
    assert_eq!(dec(&enc(&nd)).unwrap(), nd);

    let mut vlan = Match::ANY;
    vlan.set_masked(F::VlanTci, 0x1000, 0x1000);
    assert_eq!(dec(&enc(&vlan)).unwrap(), vlan);
    vlan.set_masked(F::VlanTci, 0x2000, 0x2000); // partial PCP: NXM_OF_VLAN_TCI
    let b = enc(&vlan);
    assert_eq!(&b[4..8], &[0x00, 0x00, 0x09, 0x04]);
    assert_eq!(dec(&b).unwrap(), vlan);
}

#[test]
fn prerequisites_are_checked() {
    let code = |parts: &[Vec<u8>]| fields(parts).unwrap_err().code;
    assert_eq!(code(&[tlv(TCP_DST, &[0, 80])]), ErrorCode::BMC_BAD_PREREQ);
    assert_eq!(
        code(&[
            tlv(ETH_TYPE, &[8, 0]),
            tlv(IP_PROTO, &[17]),
            tlv(TCP_DST, &[0, 80])
        ]),
        ErrorCode::BMC_BAD_PREREQ
    );
    assert_eq!(
        code(&[tlv(IPV4_SRC, &[10, 0, 0, 1])]),
        ErrorCode::BMC_BAD_PREREQ
    );
    assert_eq!(
        code(&[tlv(ETH_TYPE, &[0x86, 0xdd]), tlv(IPV4_SRC, &[10, 0, 0, 1])]),
        ErrorCode::BMC_BAD_PREREQ
    );
    assert_eq!(code(&[tlv(VLAN_PCP, &[3])]), ErrorCode::BMC_BAD_PREREQ);
    assert!(fields(&[tlv(VLAN_VID, &[0x10, 5]), tlv(VLAN_PCP, &[3])]).is_ok());
    // ARP SPA needs eth_type 0x0806.
    assert_eq!(
        code(&[tlv(ETH_TYPE, &[8, 0]), tlv(0x8000_2c04, &[1, 2, 3, 4])]),
        ErrorCode::BMC_BAD_PREREQ
    );
    // ICMPv6 type needs ip_proto 58 over IPv6; nd_target needs type 135/136.
    let v6 = tlv(ETH_TYPE, &[0x86, 0xdd]);
    assert_eq!(
        code(&[v6.clone(), tlv(0x8000_3a01, &[135])]),
        ErrorCode::BMC_BAD_PREREQ
    );
    assert_eq!(
        code(&[
            v6.clone(),
            tlv(IP_PROTO, &[58]),
            tlv(0x8000_3a01, &[128]),
            tlv(0x8000_3e10, &[0; 16])
        ]),
        ErrorCode::BMC_BAD_PREREQ
    );
    assert!(fields(&[
        v6,
        tlv(IP_PROTO, &[58]),
        tlv(0x8000_3a01, &[136]),
        tlv(0x8000_3e10, &[0; 16])
    ])
    .is_ok());
}

/// OpenFlow 1.3.5 §7.2.3.6: prerequisites come before the field that needs them (Open
/// vSwitch 3.1 answers each of these with OFPBMC_BAD_PREREQ too).
#[test]
fn prerequisites_must_come_first() {
    let code = |parts: &[Vec<u8>]| fields(parts).unwrap_err().code;
    let (eth_ip, proto_tcp, tcp_80) = (
        tlv(ETH_TYPE, &[8, 0]),
        tlv(IP_PROTO, &[6]),
        tlv(TCP_DST, &[0, 80]),
    );
    // In order: accepted.
    let m = fields(&[eth_ip.clone(), proto_tcp.clone(), tcp_80.clone()]).unwrap();
    assert_eq!(m.get(F::TpDst), (80, 0xffff));
    // The same three fields in any other order: refused.
    for parts in [
        [tcp_80.clone(), proto_tcp.clone(), eth_ip.clone()],
        [tcp_80.clone(), eth_ip.clone(), proto_tcp.clone()],
        [eth_ip.clone(), tcp_80.clone(), proto_tcp.clone()],
        [proto_tcp.clone(), eth_ip.clone(), tcp_80.clone()],
        [proto_tcp.clone(), tcp_80.clone(), eth_ip.clone()],
    ] {
        assert_eq!(code(&parts), ErrorCode::BMC_BAD_PREREQ, "{parts:x?}");
    }
    // vlan_pcp before vlan_vid; icmpv6_type before ip_proto; nd_target before icmpv6_type.
    assert_eq!(
        code(&[tlv(VLAN_PCP, &[3]), tlv(VLAN_VID, &[0x10, 5])]),
        ErrorCode::BMC_BAD_PREREQ
    );
    let v6 = tlv(ETH_TYPE, &[0x86, 0xdd]);
    assert_eq!(
        code(&[v6.clone(), tlv(0x8000_3a01, &[135]), tlv(IP_PROTO, &[58])]),
        ErrorCode::BMC_BAD_PREREQ
    );
    assert_eq!(
        code(&[
            v6,
            tlv(IP_PROTO, &[58]),
            tlv(0x8000_3e10, &[0; 16]),
            tlv(0x8000_3a01, &[135])
        ]),
        ErrorCode::BMC_BAD_PREREQ
    );
    // The error says what to do.
    let e = fields(&[tcp_80, eth_ip, proto_tcp]).unwrap_err();
    assert!(e.reason.contains("OXM_OF_TCP_DST needs"), "{}", e.reason);
    assert!(e.reason.contains("before it"), "{}", e.reason);
}

/// The whole `ofp_match` as a controller sends it, in hex: `tcp_dst=80` ahead of its
/// prerequisites is refused; the same fields in the order `ovs-ofctl` writes them decode.
#[test]
fn prerequisite_order_hex_vectors() {
    let hex = |s: &str| -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    };
    // type OXM, length 21: tcp_dst=80, eth_type=0x0800, ip_proto=6, 3 bytes of padding.
    let late = hex("0001 0015  80001c02 0050  80000a02 0800  80001401 06  000000");
    assert_eq!(dec(&late).unwrap_err().code, ErrorCode::BMC_BAD_PREREQ);
    let first = hex("0001 0015  80000a02 0800  80001401 06  80001c02 0050  000000");
    let mut want = Match::ANY;
    want.set_exact(F::EthType, 0x0800);
    want.set_exact(F::IpProto, 6);
    want.set_exact(F::TpDst, 80);
    assert_eq!(dec(&first).unwrap(), want);
    assert_eq!(enc(&want), first, "the encoder writes prerequisites first");
}

#[test]
fn malformed_fields() {
    let code = |parts: &[Vec<u8>]| fields(parts).unwrap_err().code;
    assert_eq!(
        code(&[tlv(ETH_TYPE, &[8, 0]), tlv(ETH_TYPE, &[8, 0])]),
        ErrorCode::BMC_DUP_FIELD
    );
    assert_eq!(
        code(&[
            tlv(ETH_TYPE, &[8, 0]),
            tlv(IP_PROTO, &[6]),
            tlv(IP_PROTO, &[6])
        ]),
        ErrorCode::BMC_DUP_FIELD
    );
    // ipv4_src and arp_spa share a slot, but their prerequisites exclude each other: the
    // second one's is what fails first (Open vSwitch's order).
    assert_eq!(
        code(&[
            tlv(ETH_TYPE, &[8, 0]),
            tlv(IPV4_SRC, &[1, 0, 0, 0]),
            tlv(0x8000_2c04, &[1, 0, 0, 0])
        ]),
        ErrorCode::BMC_BAD_PREREQ
    );
    // Bad length: eth_type with 3 bytes; header cut short; length past the end.
    assert_eq!(
        code(&[tlv(0x8000_0a03, &[8, 0, 0])]),
        ErrorCode::BMC_BAD_LEN
    );
    assert_eq!(code(&[vec![0x80, 0]]), ErrorCode::BMC_BAD_LEN);
    assert_eq!(code(&[tlv(ETH_TYPE, &[8])]), ErrorCode::BMC_BAD_LEN);
    // Value bits outside the mask: ipv4_src 10.0.0.1/255.0.0.0.
    assert_eq!(
        code(&[
            tlv(ETH_TYPE, &[8, 0]),
            tlv(0x8000_1708, &[10, 0, 0, 1, 255, 0, 0, 0])
        ]),
        ErrorCode::BMC_BAD_WILDCARDS
    );
    // Unknown: basic field 37 (pbb_isid), 41 (pbb_uca), another class.
    assert_eq!(
        code(&[tlv(0x8000_4a03, &[0, 0, 0])]),
        ErrorCode::BMC_BAD_FIELD
    );
    assert_eq!(code(&[tlv(0x8000_5201, &[0])]), ErrorCode::BMC_BAD_FIELD);
    assert_eq!(
        code(&[tlv(0x0003_0004, &[0, 0, 0, 0])]),
        ErrorCode::BMC_BAD_FIELD
    );
    // A mask on a field that takes none; a value wider than the field.
    assert_eq!(
        code(&[tlv(0x8000_0b04, &[8, 0, 255, 255])]),
        ErrorCode::BMC_BAD_MASK
    );
    assert_eq!(code(&[tlv(VLAN_VID, &[0x20, 0])]), ErrorCode::BMC_BAD_VALUE);
    // Match header: wrong type, short length.
    assert_eq!(
        dec(&[0, 0, 0, 4, 0, 0, 0, 0]).unwrap_err().code,
        ErrorCode::BMC_BAD_TYPE
    );
    assert_eq!(
        dec(&[0, 1, 0, 2, 0, 0, 0, 0]).unwrap_err().code,
        ErrorCode::BMC_BAD_LEN
    );
    assert_eq!(dec(&[0, 1, 0, 4]).unwrap_err().code, ErrorCode::BMC_BAD_LEN);
}

#[test]
fn unencodable_bits_are_refused() {
    let mut m = Match::ANY;
    m.set_exact(F::CvlanTci, 0x1005);
    assert!(matches!(
        write_match(&m, &mut Vec::new()),
        Err(EncodeError::Unencodable(_))
    ));
    let mut m = Match::ANY;
    m.set_masked(F::EthType, 0x0800, 0xff00);
    assert!(matches!(
        write_match(&m, &mut Vec::new()),
        Err(EncodeError::Unencodable(_))
    ));
}

/// MPLS and `ipv6_exthdr` fields as the specification lays them out (OXM_OF_MPLS_LABEL 34,
/// MPLS_TC 35, MPLS_BOS 36, IPV6_EXTHDR 39 with a mask), Open vSwitch's NXM_NX_MPLS_TTL,
/// and their prerequisites. The MPLS fields come in Open vSwitch's order (`nx_put_raw`: tc,
/// bos, label, ttl), which `ovs-ofctl ofp-print` reads back (`ovs_readback_tests`).
#[test]
fn mpls_and_exthdr_hex_vectors() {
    let mpls = [
        tlv(ETH_TYPE, &[0x88, 0x47]),
        tlv(0x8000_4601, &[2]),
        tlv(0x8000_4801, &[1]),
        tlv(0x8000_4404, &[0, 0, 0, 16]),
        tlv(0x0001_3c01, &[9]),
    ]
    .concat();
    let m = decode_oxm_fields(&mpls).unwrap();
    assert_eq!(m.get(F::MplsLabel), (16, 0xf_ffff));
    assert_eq!(m.get(F::MplsTc), (2, 7));
    assert_eq!(m.get(F::MplsBos), (1, 1));
    assert_eq!(m.get(F::MplsTtl), (9, 0xff));
    let mut back = Vec::new();
    encode_oxm_fields(&m, &mut back).unwrap();
    assert_eq!(back, mpls, "encodes in Open vSwitch's order");
    // Without the MPLS ethertype: a missing prerequisite; a label wider than 20 bits.
    let code = |parts: &[Vec<u8>]| decode_oxm_fields(&parts.concat()).unwrap_err().code;
    assert_eq!(
        code(&[tlv(0x8000_4404, &[0, 0, 0, 16])]),
        ErrorCode::BMC_BAD_PREREQ
    );
    assert_eq!(
        code(&[
            tlv(ETH_TYPE, &[0x88, 0x48]),
            tlv(0x8000_4404, &[0, 0x10, 0, 0])
        ]),
        ErrorCode::BMC_BAD_VALUE
    );
    // ipv6_exthdr=0x40/0x1c0: hop-by-hop present, in order, no repeats.
    let ext = [
        tlv(ETH_TYPE, &[0x86, 0xdd]),
        tlv(0x8000_4f04, &[0, 0x40, 0x01, 0xc0]),
    ]
    .concat();
    let m = decode_oxm_fields(&ext).unwrap();
    assert_eq!(m.get(F::Ipv6Exthdr), (0x40, 0x1c0));
    let mut back = Vec::new();
    encode_oxm_fields(&m, &mut back).unwrap();
    assert_eq!(back, ext);
    assert_eq!(
        code(&[tlv(ETH_TYPE, &[8, 0]), tlv(0x8000_4e02, &[0, 0x40])]),
        ErrorCode::BMC_BAD_PREREQ
    );
    assert_eq!(
        code(&[tlv(ETH_TYPE, &[0x86, 0xdd]), tlv(0x8000_4e02, &[0x02, 0])]),
        ErrorCode::BMC_BAD_VALUE
    );
}

/// The tunnel endpoints as `ovs-ofctl` sends them (NXM class 1, fields 31/32 and 109/110):
/// golden bytes both ways, the IPv4 names for an IPv4 underlay, and an IPv4 and an IPv6
/// name over the same slot refused as duplicates.
#[test]
fn tunnel_endpoint_hex_vectors() {
    const TUN_IPV4_SRC: u32 = 0x0001_3e04;
    const TUN_IPV4_DST_W: u32 = 0x0001_4108;
    const TUN_IPV6_SRC: u32 = 0x0001_da10;
    let v4 = [
        tlv(TUN_IPV4_SRC, &[192, 168, 1, 1]),
        tlv(TUN_IPV4_DST_W, &[192, 168, 1, 0, 255, 255, 255, 0]),
    ];
    let m = fields(&v4).unwrap();
    assert_eq!(m.get(Field::TunSrc), (0xc0a8_0101, 0xffff_ffff));
    assert_eq!(m.get(Field::TunDst), (0xc0a8_0100, 0xffff_ff00));
    let mut b = Vec::new();
    encode_oxm_fields(&m, &mut b).unwrap();
    assert_eq!(b, v4.concat());
    // As the flow table stores it (the IPv4-underlay bit implied): the same bytes.
    let stored = m.with_implied();
    assert_ne!(stored, m);
    let mut b = Vec::new();
    encode_oxm_fields(&stored, &mut b).unwrap();
    assert_eq!(b, v4.concat());

    let addr = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
    let v6 = [tlv(TUN_IPV6_SRC, &addr.to_be_bytes())];
    let m = fields(&v6).unwrap();
    assert_eq!(m.get(Field::TunIpv6Src), (addr, u128::MAX));
    let mut b = Vec::new();
    encode_oxm_fields(&m, &mut b).unwrap();
    assert_eq!(b, v6.concat());

    let both = [tlv(TUN_IPV6_SRC, &addr.to_be_bytes()), v4[0].clone()];
    assert_eq!(fields(&both).unwrap_err().code, ErrorCode::BMC_DUP_FIELD);
}

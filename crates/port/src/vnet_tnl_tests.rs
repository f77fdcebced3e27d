//! Tests of the tunnel virtio-net header: golden bytes for a VXLAN super-packet over IPv4
//! and over IPv6, the plain cases, refusals, software segmentation of tunnelled
//! super-packets against the kernel's, receiving them from the kernel, and a property test
//! that no frame makes it panic.

use super::*;
use crate::vnet::{self, Delivered, VnetHdr, F_NEEDS_CSUM, GSO_TCPV4};
use packet::builder::{Ipv4Spec, L3Spec, L4Spec, PacketSpec};
use packet::{checksum, Gso, Pool};
use proptest::prelude::*;

/// An inner TCP/IPv4 frame of `payload` bytes, 10.0.0.1:5001 → 10.0.0.2:40000.
pub(crate) fn inner(payload: usize) -> Vec<u8> {
    let spec = PacketSpec {
        l3: L3Spec::Ipv4(Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into())),
        l4: L4Spec::Tcp {
            sp: 5001,
            dp: 40000,
            flags: 0x018,
        },
        frame_len: 54 + payload,
        ..PacketSpec::default()
    };
    spec.build()
}

/// Outer Ethernet + IPv4 (192.0.2.1 → 192.0.2.2, DF) + UDP (50000 → 4789, no checksum) +
/// VXLAN (VNI 42) before `inner`: 50 bytes.
pub(crate) fn vxlan_v4(inner: &[u8]) -> Vec<u8> {
    let ip_len = (20 + 8 + 8 + inner.len()) as u16;
    let mut f = vec![
        0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00, // Ethernet
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2, // IPv4
        0xc3, 0x50, 0x12, 0xb5, 0, 0, 0, 0, // UDP
        0x08, 0, 0, 0, 0, 0, 42, 0, // VXLAN
    ];
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f.extend_from_slice(inner);
    f
}

/// The same over IPv6 (2001:db8::1 → 2001:db8::2): 70 bytes of outer headers.
pub(crate) fn vxlan_v6(inner: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x86, 0xdd];
    let pl = (8 + 8 + inner.len()) as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&pl.to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = 1;
    f.extend_from_slice(&a);
    a[15] = 2;
    f.extend_from_slice(&a);
    f.extend_from_slice(&[0xc3, 0x50, 0x12, 0xb5]);
    f.extend_from_slice(&pl.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x08, 0, 0, 0, 0, 0, 42, 0]);
    f.extend_from_slice(inner);
    f
}

/// `frame` in a super-packet frame with request `g`.
fn packet_of(frame: &[u8], g: Option<Gso>) -> (Pool, packet::Packet) {
    let pool = Pool::with_frames(4);
    let mut cache = pool.cache();
    let mut p = cache.alloc_copy(frame).expect("a frame");
    assert!(p.set_gso(g));
    drop(cache);
    (pool, p)
}

fn request(outer: u8) -> Gso {
    Gso {
        v6: false,
        ecn: false,
        mss: 1398,
        outer,
    }
}

#[test]
fn a_vxlan_super_packet_over_ipv4_gets_the_tunnel_request() {
    let f = vxlan_v4(&inner(5000));
    let (_pool, mut p) = packet_of(&f, Some(request(50)));
    let b = tx_header(&mut p).expect("a request");
    let mut want = [0u8; VNET_HDR_TNL_LEN];
    want[0] = F_NEEDS_CSUM;
    want[1] = GSO_TCPV4 | GSO_UDP_TUNNEL_IPV4;
    want[2..4].copy_from_slice(&(50u16 + 54).to_ne_bytes()); // hdr_len: through inner TCP
    want[4..6].copy_from_slice(&1398u16.to_ne_bytes()); // gso_size
    want[6..8].copy_from_slice(&(50u16 + 34).to_ne_bytes()); // csum_start: inner TCP
    want[8..10].copy_from_slice(&16u16.to_ne_bytes()); // csum_offset
    want[20..22].copy_from_slice(&34u16.to_le_bytes()); // outer UDP
    want[22..24].copy_from_slice(&64u16.to_le_bytes()); // inner IPv4
    assert_eq!(b, want);
    // The inner TCP checksum holds the pseudo-header sum; the inner IPv4 header verifies.
    let d = p.data();
    let tcp_len = (d.len() - 84) as u16;
    let pseudo = checksum::pseudo_v4(
        u32::from_be_bytes(d[76..80].try_into().unwrap()),
        u32::from_be_bytes(d[80..84].try_into().unwrap()),
        6,
        tcp_len,
    );
    assert_eq!(d[100..102], checksum::fold(pseudo).to_be_bytes());
    assert_eq!(
        checksum::checksum(&d[64..84]),
        0,
        "inner IPv4 header checksum"
    );
    // The outer headers are left as they were.
    assert_eq!(d[..50], f[..50]);
}

#[test]
fn a_vxlan_super_packet_over_ipv6_names_the_ipv6_tunnel() {
    let f = vxlan_v6(&inner(3000));
    let (_pool, mut p) = packet_of(&f, Some(request(70)));
    let b = tx_header(&mut p).expect("a request");
    assert_eq!(b[1], GSO_TCPV4 | GSO_UDP_TUNNEL_IPV6);
    assert_eq!(u16::from_ne_bytes([b[2], b[3]]), 70 + 54);
    assert_eq!(u16::from_ne_bytes([b[6], b[7]]), 70 + 34);
    assert_eq!(u16::from_le_bytes([b[20], b[21]]), 54);
    assert_eq!(u16::from_le_bytes([b[22], b[23]]), 84);
}

#[test]
fn an_outer_udp_checksum_is_left_for_the_kernel_to_complete() {
    let mut f = vxlan_v6(&inner(3000));
    f[60..62].copy_from_slice(&[0x12, 0x34]); // set: the tunnel sums its datagrams
    let (_pool, mut p) = packet_of(&f, Some(request(70)));
    let b = tx_header(&mut p).expect("a request");
    assert_eq!(b[0], F_NEEDS_CSUM | F_UDP_TUNNEL_CSUM);
    assert_eq!(b[1], GSO_TCPV4 | GSO_UDP_TUNNEL_IPV6);
    let d = p.data();
    let udp_len = d.len() - 54;
    assert_eq!(usize::from(u16::from_be_bytes([d[58], d[59]])), udp_len);
    let a = |i: usize| u128::from_be_bytes(d[i..i + 16].try_into().unwrap());
    let pseudo = checksum::pseudo_v6(a(22), a(38), 17, udp_len as u32);
    assert_eq!(
        d[60..62],
        checksum::fold(pseudo).to_be_bytes(),
        "the pseudo-header's sum"
    );
    // Without one, none is asked for and the field stays 0.
    let (_pool, mut q) = packet_of(&vxlan_v6(&inner(3000)), Some(request(70)));
    let b = tx_header(&mut q).expect("a request");
    assert_eq!(b[0], F_NEEDS_CSUM);
    assert_eq!(q.data()[60..62], [0, 0]);
}

#[test]
fn plain_frames_and_plain_super_packets_keep_the_short_header_s_meaning() {
    let f = inner(4000);
    let (_pool, mut p) = packet_of(&f, None);
    assert_eq!(tx_header(&mut p).unwrap(), [0u8; VNET_HDR_TNL_LEN]);
    let (_pool2, mut q) = packet_of(&f, Some(request(0)));
    let b = tx_header(&mut q).unwrap();
    let (_pool3, mut r) = packet_of(&f, Some(request(0)));
    let short = vnet::tx_header(&mut r).unwrap().to_bytes();
    assert_eq!(b[..10], short);
    assert_eq!(b[1], GSO_TCPV4);
    assert_eq!(b[10..], [0u8; 14]);
}

#[test]
fn tunnelled_super_packets_are_refused_where_they_cannot_be_cut() {
    let f = vxlan_v4(&inner(3000));
    // The short header cannot have them cut (software segmentation can: below).
    let (_pool, mut p) = packet_of(&f, Some(request(50)));
    assert_eq!(vnet::tx_header(&mut p), Err(VnetError::Tunnelled));
    // Outer headers longer than the frame or not UDP: refused.
    let (_p2, mut q) = packet_of(&f[..50], Some(request(50)));
    assert!(tx_header(&mut q).is_err());
    let mut g = f.clone();
    g[23] = 6;
    let (_p3, mut q) = packet_of(&g, Some(request(50)));
    assert!(tx_header(&mut q).is_err());
    let (_p4, mut q) = packet_of(&f, Some(request(30)));
    assert!(
        tx_header(&mut q).is_err(),
        "outer shorter than its UDP header"
    );
}

/// `frame` (a VXLAN-over-IPv4 packet from [`vxlan_v4`]) as Geneve with 8 bytes of options
/// (one option, critical bit clear): 58 bytes of outer headers.
fn geneve_v4(frame: &[u8]) -> Vec<u8> {
    let mut f = frame[..42].to_vec();
    f[36..38].copy_from_slice(&6081u16.to_be_bytes());
    f.extend_from_slice(&[0x02, 0, 0x65, 0x58, 0, 0, 42, 0]); // 2 words of options
    f.extend_from_slice(&[0x01, 0x02, 0x03, 0x01, 0xde, 0xad, 0xbe, 0xef]);
    f.extend_from_slice(&frame[50..]);
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// The frames software segmentation cuts super-packet `frame` (request `g`) into.
fn cut(frame: &[u8], g: Gso) -> Result<Vec<Vec<u8>>, VnetError> {
    let (pool, p) = packet_of(frame, Some(g));
    let mut cache = pool.cache();
    let mut out = packet::Batch::new();
    let (next, total) = vnet::segment_into(&p, 0, &mut cache, &mut out)?;
    assert_eq!(next, total, "one batch holds them");
    let segs = out.as_slice().iter().map(|s| s.data().to_vec()).collect();
    out.free_into(&mut cache);
    Ok(segs)
}

/// Segment `i` of a VXLAN-over-IPv4 super-packet from [`vxlan_v4`] (identification 0, no
/// header checksum) as the kernel cuts it: plain segment `seg` of the inner super-packet
/// behind the outer headers, their lengths its own, the identification `i`, the header
/// checksum right.
fn vxlan_v4_segment(seg: &[u8], i: usize) -> Vec<u8> {
    let mut f = vxlan_v4(seg);
    f[18..20].copy_from_slice(&(i as u16).to_be_bytes());
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

fn mss(outer: u8, mss: u16) -> Gso {
    Gso {
        mss,
        ..request(outer)
    }
}

#[test]
fn software_cuts_a_tunnelled_super_packet_as_the_kernel_does() {
    let plain = cut(&inner(3000), mss(0, 1000)).expect("the inner super-packet cuts");
    assert_eq!(plain.len(), 3);
    let segs = cut(&vxlan_v4(&inner(3000)), mss(50, 1000)).expect("it cuts");
    assert_eq!(segs.len(), 3);
    for (i, (s, p)) in segs.iter().zip(&plain).enumerate() {
        assert_eq!(*s, vxlan_v4_segment(p, i), "segment {i}");
    }
    // Geneve with options: the same inner segments behind 58 bytes.
    let segs = cut(&geneve_v4(&vxlan_v4(&inner(3000))), mss(58, 1000)).expect("it cuts");
    for (s, p) in segs.iter().zip(&plain) {
        assert_eq!(s[58..], p[..]);
        assert_eq!(
            usize::from(u16::from_be_bytes([s[38], s[39]])),
            s.len() - 34
        );
    }
}

#[test]
fn a_set_outer_udp_checksum_is_made_full_in_every_segment() {
    let plain = cut(&inner(2500), mss(0, 1000)).expect("the inner super-packet cuts");
    let mut f = vxlan_v6(&inner(2500));
    f[60..62].copy_from_slice(&[0x12, 0x34]);
    let segs = cut(&f, mss(70, 1000)).expect("it cuts");
    assert_eq!(segs.len(), 3);
    for (s, p) in segs.iter().zip(&plain) {
        assert_eq!(s[70..], p[..]);
        let udp_len = s.len() - 54;
        assert_eq!(
            usize::from(u16::from_be_bytes([s[18], s[19]])),
            udp_len,
            "payload length"
        );
        assert_eq!(
            usize::from(u16::from_be_bytes([s[58], s[59]])),
            udp_len,
            "UDP length"
        );
        let a = |i: usize| u128::from_be_bytes(s[i..i + 16].try_into().unwrap());
        let pseudo = checksum::pseudo_v6(a(22), a(38), 17, udp_len as u32);
        assert_eq!(
            checksum::fold(checksum::sum(&s[54..], pseudo)),
            0xffff,
            "UDP checksum"
        );
    }
    // Left zero, it stays zero.
    let segs = cut(&vxlan_v6(&inner(2500)), mss(70, 1000)).expect("it cuts");
    assert!(segs.iter().all(|s| s[60..62] == [0, 0]));
}

/// The first ten bytes of the tunnel header the kernel writes before VXLAN-over-IPv4
/// super-packet with `outer` bytes of outer headers (inner TCP/IPv4 without options).
fn kernel_request(outer: u16, bit: u8) -> VnetHdr {
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4 | bit,
        hdr_len: outer + 54,
        gso_size: 1000,
        csum_start: outer + 34,
        csum_offset: 16,
    }
}

#[test]
fn a_tunnelled_super_packet_from_the_kernel_is_kept_whole_or_cut() {
    let plain = cut(&inner(3000), mss(0, 1000)).expect("the inner super-packet cuts");
    let pool = Pool::with_frames(16);
    let mut cache = pool.cache();
    for (f, outer) in [
        (vxlan_v4(&inner(3000)), 50u8),
        (geneve_v4(&vxlan_v4(&inner(3000))), 58),
    ] {
        let hdr = kernel_request(u16::from(outer), GSO_UDP_TUNNEL_IPV4);
        let mut b = packet::Batch::new();
        let d = vnet::deliver(&f, None, Some(&hdr), 0, true, &mut cache, &mut b);
        assert_eq!(
            d,
            Delivered::Done {
                packets: 1,
                bytes: f.len()
            }
        );
        assert_eq!(b.as_slice()[0].gso(), Some(mss(outer, 1000)), "kept whole");
        assert_eq!(b.as_slice()[0].data(), &f[..]);
        b.free_into(&mut cache);
        let d = vnet::deliver(&f, None, Some(&hdr), 0, false, &mut cache, &mut b);
        assert!(matches!(d, Delivered::Done { packets: 3, .. }), "{d:?}");
        for (s, p) in b.as_slice().iter().zip(&plain) {
            assert_eq!(s.data()[usize::from(outer)..], p[..], "cut");
        }
        b.free_into(&mut cache);
    }
    // A checksum start that is no inner TCP header, or a tunnel family that is not the
    // outer header's: dropped.
    let f = vxlan_v4(&inner(3000));
    let mut b = packet::Batch::new();
    for hdr in [
        VnetHdr {
            csum_start: 80,
            ..kernel_request(50, GSO_UDP_TUNNEL_IPV4)
        },
        kernel_request(50, GSO_UDP_TUNNEL_IPV6),
        VnetHdr {
            flags: 0,
            ..kernel_request(50, GSO_UDP_TUNNEL_IPV4)
        },
    ] {
        let d = vnet::deliver(&f, None, Some(&hdr), 0, true, &mut cache, &mut b);
        assert_eq!(d, Delivered::Dropped, "{hdr:?}");
    }
    assert!(b.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any bytes with any request: an answer or an error, never a panic; an answer's offsets
    /// stay inside the frame.
    #[test]
    fn any_frame_gets_an_answer_or_an_error(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        outer in any::<u8>(),
        mss in 0u16..2000,
    ) {
        let mut f = vxlan_v4(&inner(200));
        let n = bytes.len().min(f.len());
        f[..n].copy_from_slice(&bytes[..n]);
        let g = Gso { v6: false, ecn: false, mss, outer };
        let (_pool, mut p) = packet_of(&f, Some(g));
        if let Ok(b) = tx_header(&mut p) {
            let len = p.len() as u16;
            prop_assert!(u16::from_ne_bytes([b[2], b[3]]) <= len);
            prop_assert!(u16::from_ne_bytes([b[6], b[7]]) < len);
            prop_assert!(u16::from_le_bytes([b[22], b[23]]) < len);
        }
    }
}

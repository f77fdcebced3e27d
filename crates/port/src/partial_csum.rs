//! Completing TCP/UDP checksums that a host left to "hardware".
//!
//! A host with transmit checksum offload on (the default on veths and TAPs) hands its driver
//! TCP and UDP packets whose checksum field holds only the folded sum of the pseudo-header
//! (Linux's `CHECKSUM_PARTIAL`), expecting the device to finish it. Where the kernel gives
//! such a packet to an AF_XDP socket in copy mode there is no metadata saying so, and a
//! switch that forwards it as it is delivers a segment the receiver drops (its
//! `TcpInCsumErrors` counts it): TCP cannot even connect.
//!
//! The field of a partial checksum equals the pseudo-header's folded sum, which a complete
//! checksum matches only by chance (about 1 in 65,536). [`complete_partial`] compares the two,
//! which costs a few additions per packet, and only on a match sums the segment and writes
//! the complete checksum. A complete checksum that happened to match is recomputed to the
//! same value, so a correct packet is never changed.

use packet::checksum::{add, fold, pseudo_v4, pseudo_v6, sum};
use packet::extract::{ethertype, ipproto};
use packet::wire::{at, ethernet, get_be16, ipv4, ipv6, tcp, udp};

/// Where a TCP or UDP segment sits in a frame and its pseudo-header's partial sum.
struct Segment {
    /// Offset of the L4 header.
    start: usize,
    /// Length of the L4 header and payload (from the IP header, not the frame: frames may
    /// carry Ethernet padding).
    len: usize,
    /// Offset of the checksum field.
    field: usize,
    /// UDP (whose zero checksum over IPv4 means "none").
    udp: bool,
    /// Pseudo-header partial sum.
    pseudo: u64,
}

/// Finds the TCP or UDP segment of an Ethernet frame (up to two VLAN tags; IPv4 that is not
/// a fragment; IPv6 without extension headers), or `None`.
fn segment(f: &[u8]) -> Option<Segment> {
    let mut type_at = ethernet::field::ETHERTYPE.start;
    let mut ty = get_be16(f, type_at)?;
    for _ in 0..2 {
        if ty == ethertype::VLAN || ty == ethertype::QINQ {
            type_at += 4;
            ty = get_be16(f, type_at)?;
        }
    }
    let l3 = type_at + 2;
    let (start, len, proto, pseudo) = match ty {
        ethertype::IPV4 => {
            let vihl = *f.get(l3 + ipv4::field::VER_IHL)?;
            let ihl = usize::from(vihl & 0x0f) * 4;
            let total = usize::from(get_be16(f, l3 + ipv4::field::LENGTH.start)?);
            let frag = get_be16(f, l3 + ipv4::field::FLG_OFF.start)?;
            // A fragment (offset or more-fragments set) never carries a partial checksum.
            if vihl >> 4 != 4 || ihl < 20 || total < ihl || frag & 0x3fff != 0 {
                return None;
            }
            let proto = *f.get(l3 + ipv4::field::PROTOCOL)?;
            let src = u32::from_be_bytes(f.get(at(l3, ipv4::field::SRC))?.try_into().ok()?);
            let dst = u32::from_be_bytes(f.get(at(l3, ipv4::field::DST))?.try_into().ok()?);
            let len = total - ihl;
            let pseudo = pseudo_v4(src, dst, proto, len as u16);
            (l3 + ihl, len, proto, pseudo)
        }
        ethertype::IPV6 => {
            if *f.get(l3)? >> 4 != 6 {
                return None;
            }
            let len = usize::from(get_be16(f, l3 + ipv6::field::LENGTH.start)?);
            let proto = *f.get(l3 + ipv6::field::NXT_HDR)?;
            let src = u128::from_be_bytes(f.get(at(l3, ipv6::field::SRC))?.try_into().ok()?);
            let dst = u128::from_be_bytes(f.get(at(l3, ipv6::field::DST))?.try_into().ok()?);
            let l4 = l3 + ipv6::field::DST.end;
            (l4, len, proto, pseudo_v6(src, dst, proto, len as u32))
        }
        _ => return None,
    };
    let (field, min) = match proto {
        ipproto::TCP => (start + tcp::field::CHECKSUM.start, 20),
        ipproto::UDP => (start + udp::field::CHECKSUM.start, 8),
        _ => return None,
    };
    (len >= min && start + len <= f.len()).then_some(Segment {
        start,
        len,
        field,
        udp: proto == ipproto::UDP,
        pseudo,
    })
}

/// Whether two folded sums are equal in ones'-complement arithmetic (0 and 0xffff are both
/// zero).
fn same(a: u16, b: u16) -> bool {
    a == b || (a | b == 0xffff && (a == 0 || b == 0))
}

/// Completes the TCP or UDP checksum of `frame` if it holds a partial one (the folded
/// pseudo-header sum). Returns whether it wrote one. Frames that are not TCP/UDP over
/// IPv4/IPv6, fragments, truncated or malformed frames are left as they are.
pub fn complete_partial(frame: &mut [u8]) -> bool {
    let Some(s) = segment(frame) else {
        return false;
    };
    let stored = u16::from_be_bytes([frame[s.field], frame[s.field + 1]]);
    if s.udp && stored == 0 {
        // IPv4 UDP without a checksum (IPv6 forbids it; leave that to the receiver).
        return false;
    }
    if !same(stored, fold(s.pseudo)) {
        return false;
    }
    frame[s.field] = 0;
    frame[s.field + 1] = 0;
    let mut c = !fold(add(s.pseudo, sum(&frame[s.start..s.start + s.len], 0)));
    if s.udp && c == 0 {
        c = 0xffff;
    }
    frame[s.field..s.field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::builder::{Ipv4Spec, Ipv6Spec, L3Spec, L4Spec, PacketSpec};
    use proptest::prelude::*;

    fn tcp4(len: usize, vlans: Vec<(u16, u16)>) -> Vec<u8> {
        PacketSpec {
            vlans,
            l3: L3Spec::Ipv4(Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into())),
            l4: L4Spec::Tcp {
                sp: 40000,
                dp: 5201,
                flags: 0x18,
            },
            frame_len: len,
            payload_fill: 0x5a,
            ..PacketSpec::default()
        }
        .build()
    }

    fn udp6(len: usize) -> Vec<u8> {
        PacketSpec {
            l3: L3Spec::Ipv6(Ipv6Spec::new(
                "2001:db8::1".parse().unwrap(),
                "2001:db8::2".parse().unwrap(),
            )),
            l4: L4Spec::Udp { sp: 1000, dp: 2000 },
            frame_len: len,
            payload_fill: 0xa5,
            ..PacketSpec::default()
        }
        .build()
    }

    /// What a host with checksum offload puts on the wire: the pseudo-header sum only.
    fn make_partial(f: &mut [u8]) {
        let s = segment(f).expect("a TCP/UDP frame");
        f[s.field..s.field + 2].copy_from_slice(&fold(s.pseudo).to_be_bytes());
    }

    #[test]
    fn a_partial_tcp_checksum_is_completed_to_the_builders() {
        for vlans in [
            vec![],
            vec![(0x8100, 10)],
            vec![(0x88a8, 100), (0x8100, 10)],
        ] {
            let good = tcp4(1514, vlans);
            let mut f = good.clone();
            make_partial(&mut f);
            assert_ne!(f, good);
            assert!(complete_partial(&mut f));
            assert_eq!(f, good);
        }
    }

    #[test]
    fn a_partial_udp6_checksum_is_completed() {
        let good = udp6(200);
        let mut f = good.clone();
        make_partial(&mut f);
        assert!(complete_partial(&mut f));
        assert_eq!(f, good);
    }

    #[test]
    fn ethernet_padding_is_not_summed() {
        // Headers only (54 bytes), padded to 60 on the wire.
        let good = tcp4(54, vec![]);
        assert_eq!(good.len(), 54);
        let mut f = [good.clone(), vec![0x77; 6]].concat();
        make_partial(&mut f);
        assert!(complete_partial(&mut f));
        assert_eq!(&f[..54], &good[..]);
    }

    #[test]
    fn complete_checksums_and_other_frames_are_left_alone() {
        let mut f = tcp4(128, vec![]);
        let before = f.clone();
        assert!(!complete_partial(&mut f));
        assert_eq!(f, before);
        // UDP over IPv4 without a checksum.
        let mut u = PacketSpec::udp4([2; 6], [4; 6], [1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 64).build();
        u[40..42].copy_from_slice(&[0, 0]);
        let before = u.clone();
        assert!(!complete_partial(&mut u));
        assert_eq!(u, before);
        // A fragment whose first bytes look partial is not touched.
        let mut g = tcp4(128, vec![]);
        make_partial(&mut g);
        g[20] |= 0x20; // more fragments
        let before = g.clone();
        assert!(!complete_partial(&mut g));
        assert_eq!(g, before);
    }

    proptest! {
        #[test]
        fn never_panics_and_never_breaks_a_valid_checksum(
            len in 60usize..400,
            cut in 0usize..400,
            noise in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let good = tcp4(len, vec![]);
            let mut f = good.clone();
            prop_assert!(!complete_partial(&mut f));
            prop_assert_eq!(&f, &good);
            // Truncated and noisy frames: no panic.
            let mut t = good[..cut.min(good.len())].to_vec();
            complete_partial(&mut t);
            let mut n = good.clone();
            for (i, b) in noise.iter().enumerate() {
                let at = (i * 7) % n.len();
                n[at] ^= b;
            }
            complete_partial(&mut n);
        }
    }
}

//! The virtio-net header with UDP tunnel offload (`struct virtio_net_hdr_v1_hash_tunnel`,
//! 24 bytes; TUN/TAP since Linux 6.17): how a TAP port hands its kernel a TCP super-packet
//! that was encapsulated whole in VXLAN or Geneve ([`packet::Gso::outer`]), so that the
//! kernel — or the NIC it routes the packet to — cuts it into wire frames, each with its own
//! outer headers, instead of the switch cutting it before encapsulation.
//!
//! | bytes | field |
//! |---|---|
//! | 0..10 | the legacy header of [`crate::vnet`]: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset (host byte order) |
//! | 10..12 | num_buffers (0) |
//! | 12..20 | hash value, hash report, padding (0) |
//! | 20..22 | `outer_th_offset`: where the outer UDP header starts (little-endian) |
//! | 22..24 | `inner_nh_offset`: where the inner IP header starts (little-endian) |
//!
//! A TAP whose header size is 24 (`TUNSETVNETHDRSZ`) has the kernel read these fields on
//! every write, and fill them on every read: with `TUN_F_UDP_TUNNEL_GSO` and
//! `TUN_F_UDP_TUNNEL_GSO_CSUM` on, the kernel hands over a UDP-tunnelled super-packet it
//! routed to the TAP whole (one read instead of one per segment), with or without an outer
//! UDP checksum (Linux's VXLAN devices sum it over IPv4 by default). Receive keeps it whole
//! ([`packet::Gso::outer`] says where its inner frame starts, found by [`OuterHeaders::find`]
//! from the request's checksum start, which points at the inner TCP header); the tunnel's
//! receive stage decapsulates it whole, or — when no tunnel terminates it — the data path
//! cuts it in software before a port that cannot take it ([`OuterHeaders::fix`] gives each
//! segment its outer lengths).
//!
//! For a tunnelled super-packet the request is TCP segmentation (`gso_type` TCPv4 or TCPv6,
//! with [`GSO_UDP_TUNNEL_IPV4`] or [`GSO_UDP_TUNNEL_IPV6`] for the outer family) and the
//! inner TCP checksum partial (from the inner TCP header, the pseudo-header sum in its field,
//! as for a plain super-packet): the kernel gives each segment its outer IP length (IPv4:
//! identification and header checksum too) and UDP length, and the inner headers as plain
//! TSO does. A tunnel with outer UDP checksums (the default over IPv6) has
//! [`F_UDP_TUNNEL_CSUM`] asked too, the outer pseudo-header's sum left in the field, and the
//! kernel completes each segment's.
//!
//! Per-packet code: nothing here allocates.

use packet::extract::{ethertype, ipproto};
use packet::wire::{at, be128, be16, be32, get_be16, ipv4, ipv6};
use packet::{checksum, Packet};

use crate::vnet::{tcp_request, TcpHeaders, VnetError, VNET_HDR_LEN};

/// Length of the header with the tunnel fields on the wire.
pub const VNET_HDR_TNL_LEN: usize = 24;
/// `gso_type` bit: the TCP super-packet is inside a UDP tunnel over IPv4.
pub const GSO_UDP_TUNNEL_IPV4: u8 = 0x20;
/// `gso_type` bit: the TCP super-packet is inside a UDP tunnel over IPv6.
pub const GSO_UDP_TUNNEL_IPV6: u8 = 0x40;
/// `flags` bit: the outer UDP checksum of each segment is to be completed (the field holds
/// the pseudo-header's sum).
pub const F_UDP_TUNNEL_CSUM: u8 = 8;
/// `TUNSETOFFLOAD` bit: the tap can take UDP-tunnelled super-packets (Linux 6.17); a kernel
/// without it refuses the bit.
pub const TUN_F_UDP_TUNNEL_GSO: u32 = 0x080;
/// `TUNSETOFFLOAD` bit: ... and those whose outer UDP checksum is to be filled in per segment
/// (without it the kernel cuts such super-packets before a read hands them over).
pub const TUN_F_UDP_TUNNEL_GSO_CSUM: u32 = 0x100;

/// Whether the running kernel is Linux 6.17 or later, whose TUN/TAP takes UDP-tunnelled
/// super-packets (from `/proc/sys/kernel/osrelease`). A TAP port probes the kernel itself;
/// this is for tests that must know what to expect, and for messages.
pub fn kernel_has_tunnel_gso() -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = r.trim().split(|c: char| !c.is_ascii_digit());
    let major: u32 = v.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let minor: u32 = v.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 17)
}

/// Ethernet header length (the outer headers carry no VLAN tag).
const ETH: usize = 14;
/// UDP header length.
const UDP: usize = 8;

/// The 24-byte header to write before `pkt` on a TAP with the tunnel header: all zero for a
/// complete frame; a plain super-packet's request ([`crate::vnet::tx_header`]) in its first
/// ten bytes; for a tunnelled super-packet, the request described in the
/// [module docs](self), whose checksums it fills in. An error when the packet's outer or inner
/// headers do not say what its request does (the packet is then dropped as an error).
pub fn tx_header(pkt: &mut Packet) -> Result<[u8; VNET_HDR_TNL_LEN], VnetError> {
    let mut b = [0u8; VNET_HDR_TNL_LEN];
    let Some(g) = pkt.gso() else {
        return Ok(b);
    };
    let outer = usize::from(g.outer);
    let d = pkt.data_mut();
    if outer == 0 {
        let (h, _) = tcp_request(d, g)?;
        b[..VNET_HDR_LEN].copy_from_slice(&h.to_bytes());
        return Ok(b);
    }
    let (th, tunnel_bit) = outer_udp(d, outer)?;
    let csum = get_be16(d, th + 6).ok_or(VnetError::BadHeaders("outer UDP header cut"))?;
    let (mut h, l3) = tcp_request(&mut d[outer..], g)?;
    if csum != 0 {
        // The kernel completes the outer UDP checksum of each segment from the
        // pseudo-header's sum (over the whole datagram's length) left in the field.
        let udp_len = u16::try_from(d.len() - th)
            .map_err(|_| VnetError::BadHeaders("outer UDP datagram longer than 64 KiB"))?;
        d[th + 4..th + 6].copy_from_slice(&udp_len.to_be_bytes());
        let pseudo = udp_pseudo(d, tunnel_bit == GSO_UDP_TUNNEL_IPV4, udp_len);
        d[th + 6..th + 8].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
        h.flags |= F_UDP_TUNNEL_CSUM;
    }
    h.gso_type |= tunnel_bit;
    h.hdr_len += u16::from(g.outer);
    h.csum_start += u16::from(g.outer);
    b[..VNET_HDR_LEN].copy_from_slice(&h.to_bytes());
    b[20..22].copy_from_slice(&(th as u16).to_le_bytes());
    b[22..24].copy_from_slice(&((outer + l3) as u16).to_le_bytes());
    Ok(b)
}

/// Where the outer UDP header of `d` starts and the `gso_type` bit of its IP family, checking
/// that Ethernet, IP and UDP fit in the `outer` bytes of outer headers.
fn outer_udp(d: &[u8], outer: usize) -> Result<(usize, u8), VnetError> {
    let bad = VnetError::BadHeaders;
    if outer < ETH + 20 + UDP {
        return Err(bad("outer headers shorter than Ethernet, IPv4 and UDP"));
    }
    if d.len() <= outer {
        return Err(bad("no inner frame after the outer headers"));
    }
    let (th, bit) = udp_at(d)?;
    if th + UDP > outer {
        return Err(bad("outer headers longer than the request says"));
    }
    Ok((th, bit))
}

/// Where the UDP header of `d` (Ethernet, IPv4 with any options or IPv6 without extension
/// headers, UDP) starts and the `gso_type` bit of its IP family.
fn udp_at(d: &[u8]) -> Result<(usize, u8), VnetError> {
    let bad = VnetError::BadHeaders;
    let (th, bit) = match get_be16(d, 12) {
        Some(ethertype::IPV4) => {
            let ihl = usize::from(d.get(ETH).ok_or(bad("no outer IPv4 header"))? & 0x0f) * 4;
            if ihl < 20 || d.get(ETH + 9) != Some(&ipproto::UDP) {
                return Err(bad("outer IPv4 header is not UDP"));
            }
            (ETH + ihl, GSO_UDP_TUNNEL_IPV4)
        }
        Some(ethertype::IPV6) => {
            if d.get(ETH + 6) != Some(&ipproto::UDP) {
                return Err(bad("outer IPv6 header is not UDP"));
            }
            (ETH + 40, GSO_UDP_TUNNEL_IPV6)
        }
        _ => return Err(bad("outer headers are not IPv4 or IPv6")),
    };
    if th + UDP > d.len() {
        return Err(bad("outer UDP header cut"));
    }
    Ok((th, bit))
}

/// The pseudo-header sum of the outer UDP datagram of `d` (its IP header after Ethernet:
/// IPv4 when `v4`, else IPv6) for a datagram of `udp_len` bytes.
fn udp_pseudo(d: &[u8], v4: bool, udp_len: u16) -> u64 {
    if v4 {
        let f = |r: std::ops::Range<usize>| be32(d, ETH + r.start);
        checksum::pseudo_v4(
            f(ipv4::field::SRC),
            f(ipv4::field::DST),
            ipproto::UDP,
            udp_len,
        )
    } else {
        let f = |r: std::ops::Range<usize>| be128(d, ETH + r.start);
        let (src, dst) = (f(ipv6::field::SRC), f(ipv6::field::DST));
        checksum::pseudo_v6(src, dst, ipproto::UDP, u32::from(udp_len))
    }
}

/// The outer headers (Ethernet, IP, UDP, the tunnel header) of a TCP super-packet
/// encapsulated whole in a UDP tunnel, as software segmentation needs them: where they end,
/// and what each segment's copy of them needs rewritten ([`OuterHeaders::fix`]). The outer
/// Ethernet header carries no VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OuterHeaders {
    /// Their length: where the inner frame (its Ethernet header) starts.
    pub len: usize,
    /// Where the outer UDP header starts (the outer IP header starts after Ethernet).
    udp: usize,
    /// The outer IP is IPv4 (else IPv6).
    v4: bool,
    /// The outer IPv4 identification of the first segment (each next one adds 1).
    ip_id: u16,
    /// The outer UDP checksum is set (each segment gets a full one; else each keeps 0).
    udp_csum: bool,
}

impl OuterHeaders {
    /// The outer headers of `d`, a kept super-packet whose request says they are `len` bytes
    /// long ([`packet::Gso::outer`]): IP and UDP must fit in them, with at least a tunnel
    /// header's 8 bytes after UDP, and an inner frame must follow.
    pub fn at(d: &[u8], len: usize) -> Result<OuterHeaders, VnetError> {
        let (udp, bit) = udp_at(d)?;
        if udp + UDP + 8 > len || len >= d.len() {
            return Err(VnetError::BadHeaders(
                "outer headers shorter than IP, UDP and a tunnel header, or no inner frame",
            ));
        }
        let v4 = bit == GSO_UDP_TUNNEL_IPV4;
        Ok(OuterHeaders {
            len,
            udp,
            v4,
            ip_id: if v4 { be16(d, ETH + 4) } else { 0 },
            udp_csum: be16(d, udp + 6) != 0,
        })
    }

    /// The outer headers of `d`, a received super-packet whose request has the tunnel bit
    /// `bit` ([`GSO_UDP_TUNNEL_IPV4`] or [`GSO_UDP_TUNNEL_IPV6`]) and its checksum start at
    /// `csum_start` (the inner TCP header). The tunnel header after UDP is VXLAN's 8 bytes or
    /// Geneve's 8 and its options; the one after which an inner frame's TCP header starts
    /// exactly at `csum_start` is it.
    pub fn find(d: &[u8], bit: u8, csum_start: usize) -> Result<OuterHeaders, VnetError> {
        let (udp, family) = udp_at(d)?;
        if family != bit {
            return Err(VnetError::BadHeaders(
                "the request's tunnel family differs from the outer IP header",
            ));
        }
        let t = udp + UDP;
        let geneve = t + 8 + usize::from(d.get(t).copied().unwrap_or(0) & 0x3f) * 4;
        for inner in [t + 8, geneve] {
            let (Some(frame), Some(start)) = (d.get(inner..), csum_start.checked_sub(inner)) else {
                continue;
            };
            if TcpHeaders::parse(frame, Some(start)).is_ok_and(|h| h.l4 == start) {
                return OuterHeaders::at(d, inner);
            }
        }
        Err(VnetError::BadHeaders(
            "no inner TCP header where the request's checksum starts",
        ))
    }

    /// Rewrites the outer headers at the start of `seg`, segment `i` of the super-packet
    /// (its inner frame already written, `seg` exactly its length): the UDP length, the IP
    /// length (IPv4: the identification, first + `i`, and the header checksum), and, when
    /// the super-packet had one, a full UDP checksum.
    pub fn fix(&self, seg: &mut [u8], i: usize) {
        let total = seg.len();
        let (l3, udp) = (ETH, self.udp);
        let udp_len = (total - udp) as u16;
        seg[udp + 4..udp + 6].copy_from_slice(&udp_len.to_be_bytes());
        if self.v4 {
            let tot = (total - l3) as u16;
            seg[at(l3, ipv4::field::LENGTH)].copy_from_slice(&tot.to_be_bytes());
            let id = self.ip_id.wrapping_add(i as u16);
            seg[at(l3, ipv4::field::IDENT)].copy_from_slice(&id.to_be_bytes());
            seg[at(l3, ipv4::field::CHECKSUM)].fill(0);
            let c = checksum::checksum(&seg[l3..udp]);
            seg[at(l3, ipv4::field::CHECKSUM)].copy_from_slice(&c.to_be_bytes());
        } else {
            let plen = (total - l3 - ipv6::field::DST.end) as u16;
            seg[at(l3, ipv6::field::LENGTH)].copy_from_slice(&plen.to_be_bytes());
        }
        if !self.udp_csum {
            return;
        }
        let pseudo = udp_pseudo(seg, self.v4, udp_len);
        seg[udp + 6..udp + 8].fill(0);
        let mut c = !checksum::fold(checksum::sum(&seg[udp..], pseudo));
        if c == 0 {
            c = 0xffff;
        }
        seg[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
#[path = "vnet_tnl_tests.rs"]
pub(crate) mod tests;

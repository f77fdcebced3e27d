//! Encapsulation: a tunnel's outer headers built once as a template, then copied into each
//! packet's headroom with the few per-packet fields written.
//!
//! Per packet: one copy of at most [`packet::pool::HEADROOM`] bytes, the IPv4 total length and
//! header checksum (the template's sum plus the length, folded), or the IPv6 payload length
//! and flow label, the UDP source port and length, and — only when the template asks for it —
//! the UDP checksum over the whole datagram. No allocation, no lock.

use std::fmt;
use std::net::IpAddr;

use packet::checksum;
use packet::extract::{ethertype, ipproto};
use packet::pool::{Packet, HEADROOM};
use packet::wire::{ethernet, geneve, ipv4, ipv6, udp, Geneve, Vxlan};

use crate::endpoint::{Encap, OuterAddrs, TunnelKind};

/// Where the kernel picks tunnel UDP source ports from by default
/// (`net.ipv4.ip_local_port_range`), so the underlay sees the same spread as from a Linux
/// tunnel device.
pub const SRC_PORT_RANGE: std::ops::Range<u16> = 32768..61000;

const ETH: usize = ethernet::Ethernet::<&[u8]>::LEN;
const UDP: usize = udp::Udp::<&[u8]>::LEN;

/// Why a template cannot be built or a packet cannot be encapsulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncapError {
    /// The outer source and destination are of different families.
    MixedFamilies,
    /// The outer headers would not fit in a packet's headroom.
    HeaderTooLong {
        /// Bytes the headers need.
        need: usize,
    },
    /// Geneve options that are not whole words, overrun, or exceed 252 bytes; or options
    /// given for VXLAN.
    BadOptions,
    /// The packet's headroom is smaller than the outer headers.
    NoHeadroom,
    /// The encapsulated packet would exceed the outer IP length field.
    TooLong,
}

impl fmt::Display for EncapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncapError::MixedFamilies => {
                write!(f, "local and remote tunnel addresses are of different families")
            }
            EncapError::HeaderTooLong { need } => write!(
                f,
                "outer headers of {need} bytes do not fit the {HEADROOM}-byte headroom (fewer Geneve options)"
            ),
            EncapError::BadOptions => write!(
                f,
                "Geneve options must be whole TLVs of whole 4-byte words, 252 bytes at most (VXLAN has none)"
            ),
            EncapError::NoHeadroom => write!(f, "packet headroom smaller than the outer headers"),
            EncapError::TooLong => write!(f, "encapsulated packet longer than 65,535 bytes"),
        }
    }
}

impl std::error::Error for EncapError {}

/// The outer headers of one tunnel towards one remote with one VNI, ready to be pushed.
#[derive(Clone)]
pub struct EncapTemplate {
    hdr: [u8; HEADROOM],
    len: u8,
    ipv6: bool,
    udp_csum: bool,
    /// IPv4: the header's one's-complement sum with total length, identification and
    /// checksum zero, folded to 16 bits.
    ip_sum16: u32,
    /// The UDP pseudo-header's sum without the length.
    pseudo: u64,
}

impl fmt::Debug for EncapTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncapTemplate")
            .field("hdr", &&self.hdr[..self.len as usize])
            .field("ipv6", &self.ipv6)
            .field("udp_csum", &self.udp_csum)
            .finish()
    }
}

impl EncapTemplate {
    /// Builds the outer headers for `encap` between `addrs`.
    pub fn new(encap: &Encap, addrs: &OuterAddrs) -> Result<EncapTemplate, EncapError> {
        let opts = &encap.options;
        let opts_ok = match encap.kind {
            TunnelKind::Vxlan => opts.is_empty(),
            TunnelKind::Geneve => {
                opts.len().is_multiple_of(4)
                    && opts.len() <= geneve::OPTIONS_MAX
                    && geneve::walk_options(opts)
                        .map(|o| 4 + o.data.len())
                        .sum::<usize>()
                        == opts.len()
            }
        };
        if !opts_ok {
            return Err(EncapError::BadOptions);
        }
        let (l3_len, ethertype) = match (addrs.src, addrs.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => (ipv4::Ipv4::<&[u8]>::MIN_LEN, ethertype::IPV4),
            (IpAddr::V6(_), IpAddr::V6(_)) => (ipv6::Ipv6::<&[u8]>::LEN, ethertype::IPV6),
            _ => return Err(EncapError::MixedFamilies),
        };
        let tun_len = match encap.kind {
            TunnelKind::Vxlan => Vxlan::<&[u8]>::LEN,
            TunnelKind::Geneve => Geneve::<&[u8]>::LEN + opts.len(),
        };
        let len = ETH + l3_len + UDP + tun_len;
        if len > HEADROOM {
            return Err(EncapError::HeaderTooLong { need: len });
        }
        let mut hdr = [0u8; HEADROOM];
        hdr[ethernet::field::DST].copy_from_slice(&addrs.dst_mac);
        hdr[ethernet::field::SRC].copy_from_slice(&addrs.src_mac);
        hdr[ethernet::field::ETHERTYPE].copy_from_slice(&ethertype.to_be_bytes());
        let l3 = &mut hdr[ETH..ETH + l3_len];
        let (ip_sum, pseudo) = match (addrs.src, addrs.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                l3[ipv4::field::VER_IHL] = 0x45;
                l3[ipv4::field::TOS] = encap.tos;
                let flags = if encap.df { ipv4::DONT_FRAGMENT } else { 0 };
                l3[ipv4::field::FLG_OFF].copy_from_slice(&flags.to_be_bytes());
                l3[ipv4::field::TTL] = encap.ttl;
                l3[ipv4::field::PROTOCOL] = ipproto::UDP;
                l3[ipv4::field::SRC].copy_from_slice(&s.octets());
                l3[ipv4::field::DST].copy_from_slice(&d.octets());
                let pseudo = checksum::pseudo_v4(s.into(), d.into(), ipproto::UDP, 0);
                (checksum::sum(l3, 0), pseudo)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let vtf = (6u32 << 28) | (u32::from(encap.tos) << 20);
                l3[ipv6::field::VER_TC_FLOW].copy_from_slice(&vtf.to_be_bytes());
                l3[ipv6::field::NXT_HDR] = ipproto::UDP;
                l3[ipv6::field::HOP_LIMIT] = encap.ttl;
                l3[ipv6::field::SRC].copy_from_slice(&s.octets());
                l3[ipv6::field::DST].copy_from_slice(&d.octets());
                (0, checksum::pseudo_v6(s.into(), d.into(), ipproto::UDP, 0))
            }
            _ => unreachable!("families checked above"),
        };
        let u = ETH + l3_len;
        hdr[u + udp::field::DST_PORT.start..u + udp::field::DST_PORT.end]
            .copy_from_slice(&encap.dst_port.to_be_bytes());
        let t = &mut hdr[u + UDP..len];
        match encap.kind {
            TunnelKind::Vxlan => Vxlan::new_unchecked(t).emit(encap.vni),
            TunnelKind::Geneve => {
                Geneve::new_unchecked(t).emit(encap.vni, opts);
            }
        }
        Ok(EncapTemplate {
            hdr,
            len: len as u8,
            ipv6: l3_len == ipv6::Ipv6::<&[u8]>::LEN,
            udp_csum: encap.udp_csum,
            ip_sum16: u32::from(checksum::fold(ip_sum)),
            pseudo,
        })
    }

    /// Bytes the outer headers add to a frame (for MTU checks: the inner frame's largest IP
    /// packet is the underlay MTU minus this plus the inner Ethernet header).
    pub fn overhead(&self) -> usize {
        self.len as usize
    }

    /// Whether the outer UDP header carries a checksum ([`EncapTemplate::push`] computes it
    /// over the whole datagram, so a super-packet encapsulated whole cannot have one).
    pub fn udp_csum(&self) -> bool {
        self.udp_csum
    }

    /// The outer headers as built (the per-packet fields zero).
    pub fn header(&self) -> &[u8] {
        &self.hdr[..self.len as usize]
    }

    /// Encapsulates `pkt` in place: the outer headers go into its headroom. `hash` is the
    /// inner flow's hash (it picks the UDP source port and the IPv6 flow label, so one flow
    /// keeps one path); `ident` is the outer IPv4 identification.
    #[inline]
    pub fn push(&self, pkt: &mut Packet, hash: u32, ident: u16) -> Result<(), EncapError> {
        self.push_as::<false>(pkt, hash, ident)
    }

    /// [`EncapTemplate::push`] for a TCP super-packet encapsulated whole for a kernel that
    /// cuts it ([`packet::Gso::outer`]): an outer UDP checksum, when the tunnel has one, is
    /// left partial — the pseudo-header's sum, which the kernel completes for each segment —
    /// instead of summed over 64 KiB that will be cut.
    pub fn push_whole(&self, pkt: &mut Packet, hash: u32, ident: u16) -> Result<(), EncapError> {
        self.push_as::<true>(pkt, hash, ident)
    }

    #[inline(always)]
    fn push_as<const PARTIAL: bool>(
        &self,
        pkt: &mut Packet,
        hash: u32,
        ident: u16,
    ) -> Result<(), EncapError> {
        let len = self.len as usize;
        let (ip_len, udp_len) = self.lengths(pkt.len())?;
        let front = pkt.push_front(len).ok_or(EncapError::NoHeadroom)?;
        copy_header(front, &self.hdr[..len]);
        self.fill(front, ip_len, udp_len, hash, ident);
        if self.udp_csum {
            let pseudo = checksum::add(self.pseudo, u64::from(udp_len));
            let data = pkt.data_mut();
            let mut dgram = udp::Udp::new_unchecked(&mut data[self.udp_at()..]);
            if PARTIAL {
                dgram.set_checksum(checksum::fold(pseudo));
            } else {
                dgram.fill_checksum(pseudo);
            }
        }
        Ok(())
    }

    /// Where the outer UDP header starts.
    #[inline(always)]
    fn udp_at(&self) -> usize {
        ETH + if self.ipv6 {
            ipv6::Ipv6::<&[u8]>::LEN
        } else {
            ipv4::Ipv4::<&[u8]>::MIN_LEN
        }
    }

    /// The outer IP length field (IPv4 total length, IPv6 payload length) and UDP length for
    /// an inner frame of `inner` bytes.
    #[inline(always)]
    pub(crate) fn lengths(&self, inner: usize) -> Result<(u16, u16), EncapError> {
        let total = inner + self.len as usize;
        let udp_len = total - self.udp_at();
        let ip_len = if self.ipv6 { udp_len } else { total - ETH };
        let ip_len = u16::try_from(ip_len).map_err(|_| EncapError::TooLong)?;
        // The UDP length is never longer than the IP length.
        Ok((ip_len, udp_len as u16))
    }

    /// Writes the per-packet fields into `hdr`, a copy of the template's headers: the IP
    /// length, the IPv6 flow label or the IPv4 identification and header checksum, the UDP
    /// source port and length. Not the UDP checksum, which covers the payload.
    #[inline(always)]
    pub(crate) fn fill(&self, hdr: &mut [u8], ip_len: u16, udp_len: u16, hash: u32, ident: u16) {
        let u = self.udp_at();
        let l3 = &mut hdr[ETH..u];
        if self.ipv6 {
            let vtf = u32::from_be_bytes(self.hdr[ETH..ETH + 4].try_into().unwrap());
            let vtf = vtf | (hash & 0x000f_ffff);
            l3[ipv6::field::VER_TC_FLOW].copy_from_slice(&vtf.to_be_bytes());
            l3[ipv6::field::LENGTH].copy_from_slice(&ip_len.to_be_bytes());
        } else {
            l3[ipv4::field::LENGTH].copy_from_slice(&ip_len.to_be_bytes());
            l3[ipv4::field::IDENT].copy_from_slice(&ident.to_be_bytes());
            // The template's sum is folded to 16 bits: three 16-bit values fit a u32.
            let sum = self.ip_sum16 + u32::from(ip_len) + u32::from(ident);
            l3[ipv4::field::CHECKSUM].copy_from_slice(&(!checksum::fold32(sum)).to_be_bytes());
        }
        let span = u64::from(SRC_PORT_RANGE.end - SRC_PORT_RANGE.start);
        let sport = SRC_PORT_RANGE.start + ((u64::from(hash) * span) >> 32) as u16;
        let mut dgram = udp::Udp::new_unchecked(&mut hdr[u..]);
        dgram.set_src_port(sport);
        dgram.set_len(udp_len);
    }
}

/// A hash of the inner flow of `pkt` for [`EncapTemplate::push`] when the datapath did not
/// compute one for it: its IP addresses, protocol and L4 ports (where extraction recorded the
/// L3 and L4 offsets), the same for every packet of a flow. 0 when it has no L3 header.
/// Inlined into the per-packet loop; the words are read in native byte order (no swaps: the
/// hash only has to be the same for a flow and spread flows).
#[inline(always)]
pub fn inner_flow_hash(pkt: &Packet) -> u32 {
    let d = pkt.data();
    let (l3, l4) = (usize::from(pkt.meta.l3_off), usize::from(pkt.meta.l4_off));
    if l3 == 0 {
        return 0;
    }
    let Some(ip) = d.get(l3..) else {
        return 0;
    };
    let ports = match d.get(l4..l4 + 4) {
        Some(b) if l4 != 0 => u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        _ => 0,
    };
    match ip.first().map(|v| v >> 4) {
        Some(4) if ip.len() >= 20 => {
            packet::key::fold_hash(&[ne64(ip, 12), u64::from(ip[9]) << 32 | ports])
        }
        Some(6) if ip.len() >= 40 => packet::key::fold_hash(&[
            ne64(ip, 8),
            ne64(ip, 16),
            ne64(ip, 24),
            ne64(ip, 32),
            u64::from(ip[6]) << 32 | ports,
        ]),
        _ => 0,
    }
}

/// Copies the outer headers `src` into `dst` (as long) without a call to `memcpy`: as two
/// overlapping 16-byte words from each end (16 to 32 bytes), or two overlapping 32-byte
/// blocks (32 to 64: VXLAN and Geneve without options over IPv4 are 50, over IPv6 70 falls
/// into the next), or four (64 to 128).
#[inline(always)]
pub(crate) fn copy_header(dst: &mut [u8], src: &[u8]) {
    #[inline(always)]
    fn block<const N: usize>(dst: &mut [u8], src: &[u8], at: usize) {
        let b: [u8; N] = src[at..at + N].try_into().unwrap_or([0; N]);
        dst[at..at + N].copy_from_slice(&b);
    }
    let n = src.len().min(dst.len());
    match n {
        16..=32 => {
            block::<16>(dst, src, 0);
            block::<16>(dst, src, n - 16);
        }
        33..=64 => {
            block::<32>(dst, src, 0);
            block::<32>(dst, src, n - 32);
        }
        65..=128 => {
            block::<64>(dst, src, 0);
            block::<64>(dst, src, n - 64);
        }
        _ => dst[..n].copy_from_slice(&src[..n]),
    }
}

/// The 8 bytes of `b` at `i` read natively (plain indexing: after the caller's length check
/// the bounds checks fold away).
#[inline(always)]
fn ne64(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes([
        b[i],
        b[i + 1],
        b[i + 2],
        b[i + 3],
        b[i + 4],
        b[i + 5],
        b[i + 6],
        b[i + 7],
    ])
}

#[cfg(test)]
#[path = "encap_tests.rs"]
mod tests;

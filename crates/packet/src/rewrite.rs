//! What datapath actions do to a packet's bytes: set-field, push/pop VLAN, decrement and
//! set TTL (MPLS label stacks are [`crate::mpls`]'s; set-field of an MPLS field goes there). Every rewrite keeps every checksum right: the IPv4 header checksum, TCP/UDP
//! checksums (including their pseudo-header when an IP address changes), ICMP and ICMPv6
//! checksums, and SCTP's CRC32c.
//!
//! Checksums are updated incrementally (RFC 1624), so a checksum that was wrong before a
//! rewrite stays wrong by the same amount after it (the switch never "repairs" a corrupt
//! packet). A UDP-over-IPv4 checksum of 0 means "none" and stays 0. SCTP port rewrites
//! recompute CRC32c over the SCTP packet before and after and carry the difference over, to
//! the same effect (that costs a pass over the payload).
//!
//! An IPv6 routing header with segments left makes the upper-layer pseudo-header carry the
//! final destination: rewriting `ipv6_dst` then leaves the L4 checksum alone.
//!
//! Headers are found through `pkt.meta.l3_off` / `l4_off` as set by
//! [`crate::extract_packet`]; when `l3_off` is 0 they are re-derived from the bytes. No
//! function here allocates or panics, whatever the bytes or the offsets hold.

use crate::checksum::{crc32c, update128, update16, update32};
use crate::extract::{ethertype, extract, hdr, ipproto, walk_ipv6_ext};
use crate::key::{Field, FlowKey};
use crate::pool::Packet;
use crate::wire::{be16, ethernet, ipv4, ipv6, tcp, udp};

/// Why a rewrite was refused. The packet is unchanged when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteError {
    /// The field is not something set-field may write (e.g. `eth_type`, `ip_proto`).
    ReadOnly(Field),
    /// The value has bits above the field's width.
    ValueTooWide(Field),
    /// The packet has no header holding the field.
    NoHeader {
        /// The field to write.
        field: Field,
        /// The header it needs, e.g. "IPv4 or ARP".
        needs: &'static str,
    },
    /// There is no VLAN tag to rewrite or pop.
    NoVlanTag,
    /// Not enough headroom in the frame to push a VLAN tag or an MPLS label.
    NoHeadroom,
    /// The frame is shorter than an Ethernet header.
    TooShort,
    /// The TTL (hop limit) is 0 or 1: it cannot be decremented; OpenFlow sends such packets
    /// to the controller (invalid TTL) or drops them.
    TtlExpired,
}

impl std::fmt::Display for RewriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RewriteError::ReadOnly(x) => write!(
                f,
                "field {} cannot be written by set-field; match on it instead",
                x.name()
            ),
            RewriteError::ValueTooWide(x) => write!(
                f,
                "value does not fit field {} (at most {:#x})",
                x.name(),
                x.max_value()
            ),
            RewriteError::NoHeader { field, needs } => write!(
                f,
                "cannot set {}: the packet has no {} header; add a match on the field's \
                 prerequisites",
                field.name(),
                needs
            ),
            RewriteError::NoVlanTag => {
                write!(
                    f,
                    "no VLAN tag to rewrite or pop; push one first with push_vlan"
                )
            }
            RewriteError::NoHeadroom => write!(
                f,
                "no headroom left in the frame to push a VLAN tag or MPLS label; receive into \
                 frames with headroom"
            ),
            RewriteError::TooShort => write!(f, "frame is shorter than an Ethernet header"),
            RewriteError::TtlExpired => {
                write!(f, "TTL is 0 or 1 and cannot be decremented (invalid TTL)")
            }
        }
    }
}

impl std::error::Error for RewriteError {}

/// Where a packet's headers are.
#[derive(Debug, Clone, Copy)]
struct Loc {
    eth_type: u16,
    /// L3 offset (0 = none).
    l3: usize,
    /// L4 offset (0 = none).
    l4: usize,
    /// IP protocol (after IPv6 extension headers).
    proto: u8,
    /// End of the IP packet (within the frame).
    l3_end: usize,
    /// IPv6 with a routing header that has segments left.
    routed: bool,
}

#[inline(always)]
fn get16(d: &[u8], i: usize) -> Option<u16> {
    hdr::<2>(d, i).map(|b| u16::from_be_bytes(*b))
}

#[inline(always)]
fn put16(d: &mut [u8], i: usize, v: u16) {
    if let Some(b) = d.get_mut(i..i + 2) {
        b.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline(always)]
fn get32(d: &[u8], i: usize) -> Option<u32> {
    hdr::<4>(d, i).map(|b| u32::from_be_bytes(*b))
}

#[inline(always)]
fn get128(d: &[u8], i: usize) -> Option<u128> {
    hdr::<16>(d, i).map(|b| u128::from_be_bytes(*b))
}

fn put(d: &mut [u8], i: usize, bytes: &[u8]) -> bool {
    match d.get_mut(i..i + bytes.len()) {
        Some(b) => {
            b.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

fn locate(pkt: &Packet) -> Loc {
    let d = pkt.data();
    let (mut l3, mut l4) = (pkt.meta.l3_off as usize, pkt.meta.l4_off as usize);
    if l3 < 14 || l3 > d.len() {
        let mut k = FlowKey::ZERO;
        let l = extract(d, 0, &mut k);
        l3 = l.l3_off as usize;
        l4 = l.l4_off as usize;
    }
    let mut loc = Loc {
        eth_type: 0,
        l3: 0,
        l4: 0,
        proto: 0,
        l3_end: d.len(),
        routed: false,
    };
    if l3 < 14 {
        return loc;
    }
    loc.eth_type = get16(d, l3 - 2).unwrap_or(0);
    loc.l3 = l3;
    match loc.eth_type {
        ethertype::IPV4 => {
            if let Some(h) = hdr::<20>(d, l3) {
                loc.proto = h[ipv4::field::PROTOCOL];
                let tot = be16(h, ipv4::field::LENGTH.start) as usize;
                loc.l3_end = (l3 + tot).min(d.len());
            }
        }
        ethertype::IPV6 => {
            if let Some(h) = hdr::<40>(d, l3) {
                let plen = be16(h, ipv6::field::LENGTH.start) as usize;
                if plen != 0 {
                    loc.l3_end = (l3 + 40 + plen).min(d.len());
                }
                loc.proto = h[ipv6::field::NXT_HDR];
                if l4 != 0 {
                    let w = walk_ipv6_ext(d, l3 + 40, h[ipv6::field::NXT_HDR], loc.l3_end);
                    loc.proto = w.proto;
                    loc.routed = w.routed;
                }
            }
        }
        _ => l4 = 0,
    }
    if l4 > l3 && l4 < loc.l3_end {
        loc.l4 = l4;
    }
    loc
}

fn need(field: Field, needs: &'static str) -> RewriteError {
    RewriteError::NoHeader { field, needs }
}

/// Writes `value` into `field` of the packet's bytes, fixing up checksums.
///
/// `VlanVid` takes the OpenFlow value (present bit 0x1000 may be set; only the 12-bit VID is
/// written), `VlanTci` the key's TCI (bit 12 is the present bit and is not written: the wire
/// DEI bit is kept). `Ipv4Src`/`Ipv4Dst` write the ARP sender/target protocol address in an
/// ARP packet; `ArpSha`/`ArpTha` write the source/target link-layer option of a neighbour
/// solicitation/advertisement. `InPort`, `Metadata` and the tunnel fields (`TunnelId`,
/// `TunSrc`, …) are not packet bytes: `Ok(())` with nothing done (the datapath keeps them).
pub fn set_field(pkt: &mut Packet, field: Field, value: u128) -> Result<(), RewriteError> {
    if value > field.max_value() {
        return Err(RewriteError::ValueTooWide(field));
    }
    match field {
        Field::InPort
        | Field::Metadata
        | Field::TunnelId
        | Field::TunSrc
        | Field::TunDst
        | Field::TunIpv6Src
        | Field::TunIpv6Dst => return Ok(()),
        Field::Parsed | Field::CvlanTci | Field::IpFrag | Field::TcpFlags | Field::Ipv6Exthdr => {
            return Err(RewriteError::ReadOnly(field))
        }
        _ => {}
    }
    if pkt.len() < 14 {
        return Err(RewriteError::TooShort);
    }
    if field == Field::EthType {
        return set_eth_type(pkt.data_mut(), value as u16);
    }
    if matches!(
        field,
        Field::MplsLse | Field::MplsLabel | Field::MplsTc | Field::MplsBos | Field::MplsTtl
    ) {
        return crate::mpls::set_field(pkt.data_mut(), field, value);
    }
    if matches!(
        field,
        Field::EthDst | Field::EthSrc | Field::VlanTci | Field::VlanVid | Field::VlanPcp
    ) {
        // L2 rewrites need no header walk.
        return set_l2(pkt.data_mut(), field, value);
    }
    let loc = locate(pkt);
    let d = pkt.data_mut();
    let v16 = value as u16;
    match field {
        Field::Ipv4Src | Field::Ipv4Dst => {
            let src = field == Field::Ipv4Src;
            match loc.eth_type {
                ethertype::IPV4 if loc.l3 + 20 <= d.len() => set_ipv4_addr(
                    d,
                    &loc,
                    if src {
                        ipv4::field::SRC.start
                    } else {
                        ipv4::field::DST.start
                    },
                    value as u32,
                ),
                ethertype::ARP if loc.l3 + 28 <= d.len() => {
                    put(
                        d,
                        loc.l3 + if src { 14 } else { 24 },
                        &(value as u32).to_be_bytes(),
                    );
                }
                _ => return Err(need(field, "IPv4 or ARP")),
            }
        }
        Field::IpDscp | Field::IpEcn | Field::IpTtl => set_ip_byte(d, &loc, field, value as u8)?,
        Field::IpProto => set_ip_proto(d, &loc, value as u8)?,
        Field::TpSrc | Field::TpDst => set_port(d, &loc, field, v16)?,
        Field::IcmpType | Field::IcmpCode => {
            let ok = loc.l4 != 0
                && match loc.eth_type {
                    ethertype::IPV4 => loc.proto == ipproto::ICMP,
                    ethertype::IPV6 => loc.proto == ipproto::ICMPV6,
                    _ => false,
                };
            let Some(old) = get16(d, loc.l4).filter(|_| ok) else {
                return Err(need(field, "ICMP or ICMPv6"));
            };
            let new = if field == Field::IcmpType {
                (old & 0x00ff) | (v16 << 8)
            } else {
                (old & 0xff00) | (v16 & 0xff)
            };
            put16(d, loc.l4, new);
            if let Some(c) = get16(d, loc.l4 + 2) {
                put16(d, loc.l4 + 2, update16(c, old, new));
            }
        }
        Field::Ipv6Src | Field::Ipv6Dst => {
            let at = loc.l3
                + if field == Field::Ipv6Src {
                    ipv6::field::SRC.start
                } else {
                    ipv6::field::DST.start
                };
            let Some(old) = get128(d, at).filter(|_| loc.eth_type == ethertype::IPV6) else {
                return Err(need(field, "IPv6"));
            };
            put(d, at, &value.to_be_bytes());
            // Past a routing header with segments left, the pseudo-header holds the final
            // destination, which this field is not.
            let in_pseudo = field == Field::Ipv6Src || !loc.routed;
            if loc.l4 != 0 && in_pseudo {
                let at = match loc.proto {
                    ipproto::TCP => Some(loc.l4 + tcp::field::CHECKSUM.start),
                    ipproto::UDP => Some(loc.l4 + udp::field::CHECKSUM.start),
                    ipproto::ICMPV6 => Some(loc.l4 + 2),
                    _ => None,
                };
                if let Some(at) = at {
                    fix_l4_csum(d, at, loc.proto, |c| update128(c, old, value));
                }
            }
        }
        Field::Ipv6Label => {
            let Some(old) = get32(d, loc.l3).filter(|_| loc.eth_type == ethertype::IPV6) else {
                return Err(need(field, "IPv6"));
            };
            let new = (old & 0xfff0_0000) | (value as u32);
            put(d, loc.l3, &new.to_be_bytes());
        }
        Field::ArpOp => {
            if loc.eth_type != ethertype::ARP || loc.l3 + 28 > d.len() {
                return Err(need(field, "ARP"));
            }
            put16(d, loc.l3 + 6, v16);
        }
        Field::ArpSha | Field::ArpTha => {
            let mac = (value as u64).to_be_bytes();
            let mac = &mac[2..];
            if loc.eth_type == ethertype::ARP && loc.l3 + 28 <= d.len() {
                put(d, loc.l3 + if field == Field::ArpSha { 8 } else { 18 }, mac);
            } else {
                let opt = if field == Field::ArpSha { 1 } else { 2 };
                let Some(at) = nd_option(d, &loc, opt) else {
                    return Err(need(field, "ARP or neighbour discovery link-layer option"));
                };
                let mut old = [0u8; 6];
                old.copy_from_slice(&d[at..at + 6]);
                put(d, at, mac);
                // The 6 bytes sit at an even offset (options are 8-byte aligned, +2).
                let o = |m: &[u8], i: usize| u16::from_be_bytes([m[i], m[i + 1]]);
                let mut c = get16(d, loc.l4 + 2).unwrap_or(0);
                for i in [0, 2, 4] {
                    c = update16(c, o(&old, i), o(mac, i));
                }
                put16(d, loc.l4 + 2, c);
            }
        }
        Field::NdTarget => {
            let ok = loc.eth_type == ethertype::IPV6
                && loc.proto == ipproto::ICMPV6
                && loc.l4 != 0
                && matches!(hdr::<2>(d, loc.l4), Some([135 | 136, 0]));
            let Some(old) = get128(d, loc.l4 + 8).filter(|_| ok) else {
                return Err(need(field, "neighbour solicitation or advertisement"));
            };
            put(d, loc.l4 + 8, &value.to_be_bytes());
            if let Some(c) = get16(d, loc.l4 + 2) {
                put16(d, loc.l4 + 2, update128(c, old, value));
            }
        }
        Field::InPort
        | Field::Metadata
        | Field::TunnelId
        | Field::TunSrc
        | Field::TunDst
        | Field::TunIpv6Src
        | Field::TunIpv6Dst
        | Field::EthDst
        | Field::EthSrc
        | Field::VlanTci
        | Field::VlanVid
        | Field::VlanPcp
        | Field::EthType
        | Field::Parsed
        | Field::CvlanTci
        | Field::IpFrag
        | Field::TcpFlags
        | Field::MplsLse
        | Field::MplsLabel
        | Field::MplsTc
        | Field::MplsBos
        | Field::MplsTtl => {}
        Field::Ipv6Exthdr => return Err(RewriteError::ReadOnly(field)),
    }
    Ok(())
}

/// Ethernet addresses and the outer VLAN tag.
fn set_l2(d: &mut [u8], field: Field, value: u128) -> Result<(), RewriteError> {
    let v16 = value as u16;
    match field {
        Field::EthDst => {
            put(d, 0, &(value as u64).to_be_bytes()[2..]);
        }
        Field::EthSrc => {
            put(d, 6, &(value as u64).to_be_bytes()[2..]);
        }
        _ => {
            let old = match (get16(d, 12), get16(d, 14)) {
                (Some(t), Some(tci)) if ethertype::is_vlan(t) => tci,
                _ => return Err(RewriteError::NoVlanTag),
            };
            let new = match field {
                Field::VlanTci => (v16 & !0x1000) | (old & 0x1000),
                Field::VlanVid => (old & 0xf000) | (v16 & 0x0fff),
                _ => (old & 0x1fff) | (v16 << 13),
            };
            put16(d, 14, new);
        }
    }
    Ok(())
}

/// Updates the TCP/UDP/ICMPv6 checksum at `at` with `f` (a UDP checksum of 0 stays 0; a
/// result of 0 is sent as 0xffff, RFC 768).
fn fix_l4_csum(d: &mut [u8], at: usize, proto: u8, f: impl Fn(u16) -> u16) {
    let Some(c) = get16(d, at) else { return };
    if proto == ipproto::UDP && c == 0 {
        return;
    }
    let mut n = f(c);
    if proto == ipproto::UDP && n == 0 {
        n = 0xffff;
    }
    put16(d, at, n);
}

fn set_ipv4_addr(d: &mut [u8], loc: &Loc, at: usize, new: u32) {
    let Some(old) = get32(d, loc.l3 + at) else {
        return;
    };
    put(d, loc.l3 + at, &new.to_be_bytes());
    let ip_csum = loc.l3 + ipv4::field::CHECKSUM.start;
    if let Some(c) = get16(d, ip_csum) {
        put16(d, ip_csum, update32(c, old, new));
    }
    if loc.l4 != 0 {
        let (tcp_csum, udp_csum) = (tcp::field::CHECKSUM.start, udp::field::CHECKSUM.start);
        match loc.proto {
            ipproto::TCP => fix_l4_csum(d, loc.l4 + tcp_csum, loc.proto, |c| update32(c, old, new)),
            ipproto::UDP => fix_l4_csum(d, loc.l4 + udp_csum, loc.proto, |c| update32(c, old, new)),
            _ => {}
        }
    }
}

/// The type after the Ethernet addresses and any VLAN tags (what `eth_type` matches).
fn set_eth_type(d: &mut [u8], v: u16) -> Result<(), RewriteError> {
    let mut at = ethernet::field::ETHERTYPE.start;
    while get16(d, at).is_some_and(ethertype::is_vlan) {
        at += 4;
    }
    if at + 2 > d.len() {
        return Err(RewriteError::TooShort);
    }
    put16(d, at, v);
    Ok(())
}

/// The IPv4 protocol (the header checksum follows) or the IPv6 next header of a packet
/// without extension headers. Only the number changes: the L4 header stays as it was.
fn set_ip_proto(d: &mut [u8], loc: &Loc, v: u8) -> Result<(), RewriteError> {
    match loc.eth_type {
        ethertype::IPV4 if loc.l3 + 20 <= d.len() => {
            let word = loc.l3 + ipv4::field::TTL;
            let old = get16(d, word).unwrap_or(0);
            d[loc.l3 + ipv4::field::PROTOCOL] = v;
            let new = get16(d, word).unwrap_or(0);
            let ip_csum = loc.l3 + ipv4::field::CHECKSUM.start;
            if let Some(c) = get16(d, ip_csum) {
                put16(d, ip_csum, update16(c, old, new));
            }
            Ok(())
        }
        ethertype::IPV6
            if loc.l3 + 40 <= d.len() && d[loc.l3 + ipv6::field::NXT_HDR] == loc.proto =>
        {
            d[loc.l3 + ipv6::field::NXT_HDR] = v;
            Ok(())
        }
        _ => Err(need(
            Field::IpProto,
            "IPv4, or IPv6 without extension headers",
        )),
    }
}

fn set_ip_byte(d: &mut [u8], loc: &Loc, field: Field, v: u8) -> Result<(), RewriteError> {
    match loc.eth_type {
        ethertype::IPV4 if loc.l3 + 20 <= d.len() => {
            // The byte and the 16-bit word the header checksum sums it in.
            let (at, word) = if field == Field::IpTtl {
                (ipv4::field::TTL, ipv4::field::TTL)
            } else {
                (ipv4::field::TOS, ipv4::field::VER_IHL)
            };
            let old_b = d[loc.l3 + at];
            let new_b = match field {
                Field::IpDscp => (old_b & 0x03) | (v << 2),
                Field::IpEcn => (old_b & 0xfc) | (v & 0x03),
                _ => v,
            };
            let old = get16(d, loc.l3 + word).unwrap_or(0);
            d[loc.l3 + at] = new_b;
            let new = get16(d, loc.l3 + word).unwrap_or(0);
            let ip_csum = loc.l3 + ipv4::field::CHECKSUM.start;
            if let Some(c) = get16(d, ip_csum) {
                put16(d, ip_csum, update16(c, old, new));
            }
            Ok(())
        }
        ethertype::IPV6 if loc.l3 + 40 <= d.len() => {
            if field == Field::IpTtl {
                d[loc.l3 + ipv6::field::HOP_LIMIT] = v;
                return Ok(());
            }
            let old = get32(d, loc.l3).unwrap_or(0);
            let tc = (old >> 20) as u8;
            let tc = if field == Field::IpDscp {
                (tc & 0x03) | (v << 2)
            } else {
                (tc & 0xfc) | (v & 0x03)
            };
            let new = (old & 0xf00f_ffff) | ((tc as u32) << 20);
            put(d, loc.l3, &new.to_be_bytes());
            Ok(())
        }
        _ => Err(need(field, "IPv4 or IPv6")),
    }
}

fn set_port(d: &mut [u8], loc: &Loc, field: Field, new: u16) -> Result<(), RewriteError> {
    let ip = matches!(loc.eth_type, ethertype::IPV4 | ethertype::IPV6);
    let csum_at = match loc.proto {
        ipproto::TCP => tcp::field::CHECKSUM.start,
        ipproto::UDP => udp::field::CHECKSUM.start,
        ipproto::SCTP => 8,
        _ => 0,
    };
    let at = loc.l4
        + if field == Field::TpSrc {
            udp::field::SRC_PORT.start
        } else {
            udp::field::DST_PORT.start
        };
    let Some(old) = get16(d, at).filter(|_| ip && loc.l4 != 0 && csum_at != 0) else {
        return Err(need(field, "TCP, UDP or SCTP"));
    };
    if loc.proto == ipproto::SCTP {
        if loc.l4 + 12 > loc.l3_end {
            return Err(need(field, "complete SCTP"));
        }
        let seg = &mut d[loc.l4..loc.l3_end];
        let stored = u32::from_le_bytes([seg[8], seg[9], seg[10], seg[11]]);
        seg[8..12].fill(0);
        let before = crc32c(seg);
        put16(seg, at - loc.l4, new);
        let after = crc32c(seg);
        seg[8..12].copy_from_slice(&(stored ^ before ^ after).to_le_bytes());
    } else {
        put16(d, at, new);
        fix_l4_csum(d, loc.l4 + csum_at, loc.proto, |c| update16(c, old, new));
    }
    Ok(())
}

/// Offset of the 6 address bytes of ND option `opt` (1 = source, 2 = target link-layer).
fn nd_option(d: &[u8], loc: &Loc, opt: u8) -> Option<usize> {
    if loc.eth_type != ethertype::IPV6 || loc.proto != ipproto::ICMPV6 || loc.l4 == 0 {
        return None;
    }
    if !matches!(hdr::<2>(d, loc.l4), Some([135 | 136, 0])) {
        return None;
    }
    let end = loc.l3_end.min(d.len());
    let mut o = loc.l4 + 24;
    while o + 8 <= end {
        let len = d[o + 1] as usize * 8;
        if len == 0 {
            return None;
        }
        if d[o] == opt && len == 8 {
            return Some(o + 2);
        }
        o += len;
    }
    None
}

/// Pushes a VLAN tag `(tpid, tci)` (wire values) in front of the Ethernet type, using the
/// frame's headroom; `meta.l3_off`/`l4_off` move by 4. OpenFlow's rule that the new tag
/// copies the VID and PCP of an existing outer tag is the caller's to apply through `tci`.
pub fn push_vlan(pkt: &mut Packet, tpid: u16, tci: u16) -> Result<(), RewriteError> {
    if pkt.len() < 14 {
        return Err(RewriteError::TooShort);
    }
    if pkt.headroom() < 4 || pkt.push_front(4).is_none() {
        return Err(RewriteError::NoHeadroom);
    }
    let d = pkt.data_mut();
    d.copy_within(4..16, 0);
    put16(d, 12, tpid);
    put16(d, 14, tci);
    let shift = |o: u16| {
        if o == 0 {
            0
        } else {
            o.checked_add(4).unwrap_or(0)
        }
    };
    pkt.meta.l3_off = shift(pkt.meta.l3_off);
    pkt.meta.l4_off = shift(pkt.meta.l4_off);
    Ok(())
}

/// Removes the outer VLAN tag; `meta.l3_off`/`l4_off` move back by 4.
pub fn pop_vlan(pkt: &mut Packet) -> Result<(), RewriteError> {
    let d = pkt.data_mut();
    match get16(d, 12) {
        Some(t) if ethertype::is_vlan(t) && d.len() >= 18 => {}
        _ => return Err(RewriteError::NoVlanTag),
    }
    d.copy_within(0..12, 4);
    pkt.pull_front(4);
    let shift = |o: u16| if o >= 18 { o - 4 } else { 0 };
    pkt.meta.l3_off = shift(pkt.meta.l3_off);
    pkt.meta.l4_off = shift(pkt.meta.l4_off);
    Ok(())
}

/// Decrements the IPv4 TTL (fixing the header checksum) or the IPv6 hop limit and returns
/// the new value. Refuses with [`RewriteError::TtlExpired`] (packet unchanged) when it is 0
/// or 1.
pub fn dec_ttl(pkt: &mut Packet) -> Result<u8, RewriteError> {
    if pkt.len() < 14 {
        return Err(RewriteError::TooShort);
    }
    let loc = locate(pkt);
    let at = match loc.eth_type {
        ethertype::IPV4 => loc.l3 + 8,
        ethertype::IPV6 => loc.l3 + 7,
        _ => return Err(need(Field::IpTtl, "IPv4 or IPv6")),
    };
    let ttl = match pkt.data().get(at) {
        Some(&t) if loc.l3 != 0 => t,
        _ => return Err(need(Field::IpTtl, "IPv4 or IPv6")),
    };
    if ttl <= 1 {
        return Err(RewriteError::TtlExpired);
    }
    set_ip_byte(pkt.data_mut(), &loc, Field::IpTtl, ttl - 1)?;
    Ok(ttl - 1)
}

/// Sets the IPv4 TTL (fixing the header checksum) or the IPv6 hop limit.
pub fn set_ttl(pkt: &mut Packet, ttl: u8) -> Result<(), RewriteError> {
    set_field(pkt, Field::IpTtl, ttl as u128)
}

#[cfg(test)]
mod tests;

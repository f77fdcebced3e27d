//! Flow-key extraction: the per-packet parse that fills a [`FlowKey`] (layout in
//! [`crate::key`]) and finds the L3 and L4 headers.
//!
//! This is the switch's hottest function. Each header is bounds-checked once (a fixed-size
//! array is cut out of the frame) and then read at constant offsets; nothing allocates and
//! nothing panics on any input. What could not be parsed is reported in the `parsed` bits:
//! [`parsed::TRUNCATED`] when the frame ends inside a header its type fields announced,
//! [`parsed::MALFORMED`] for impossible values; fields read before the problem are kept.
//!
//! Conventions (as Open vSwitch):
//! - VLAN tags (TPID 0x8100, 0x88a8 or 0x9100): the first is stored in `vlan_tci`, the second
//!   in `cvlan_tci`, each with bit 12 set to mean "present" (the wire DEI bit is not kept). A
//!   third tag is not parsed: `eth_type` is then its TPID.
//! - 802.3 frames (a length instead of a type) get `eth_type` 0x05ff and nothing else.
//! - ARP is parsed only for Ethernet/IPv4 ARP (htype 1, ptype 0x0800, hlen 6, plen 4).
//! - IPv4/IPv6 fragments set [`frag::ANY`]; fragments other than the first also set
//!   [`frag::LATER`] and have no L4 fields.
//! - Whole L4 headers are required: TCP 20 bytes (and its data offset), UDP 8, SCTP 12,
//!   ICMP 8, ICMPv6 4 (24 for neighbour discovery); L4 is bounded by the IP length, so
//!   Ethernet padding is never read as a header or an ND option.
//! - ICMP/ICMPv6 type and code go in the low bytes of `tp_src`/`tp_dst`; neighbour
//!   solicitations and advertisements also fill `nd_target`, `arp_sha` (source link-layer
//!   option) and `arp_tha` (target link-layer option).
//! - MPLS (0x8847, 0x8848): the top label stack entry goes in the key's MPLS fields; when it
//!   is the bottom of the stack and what follows reads as IPv4 or IPv6 (its version nibble),
//!   that header and its L4 header fill the key's L3/L4 fields too, for the tables after a
//!   `pop_mpls` (Open vSwitch re-parses the packet after the pop instead). `l3_off` stays 0
//!   and nothing below the stack is reported truncated or malformed: an MPLS header does not
//!   say what it carries. [`crate::mpls`] finds the stack again from the Ethernet header
//!   when an action needs it.
//! - IPv6 extension headers set `ipv6_exthdr` (see [`crate::key::exthdr`]) from the headers
//!   the chain walk passes, and from the header where it stops (ESP, no next header).

use crate::key::{exthdr, frag, parsed, FlowKey, KEY_WORDS};
use crate::wire::{at, be16, be32, ethernet, ipv4, ipv6, tcp};

/// Length of an Ethernet II header.
const ETH_LEN: usize = ethernet::field::ETHERTYPE.end;
use crate::pool::Packet;

/// Where the headers start, as byte offsets from the start of the frame (0 = not present).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layers {
    /// Offset of the IPv4, IPv6 or ARP header (set when that header was read completely).
    pub l3_off: u16,
    /// Offset of the TCP, UDP, SCTP, ICMP or ICMPv6 header (set when it was read completely).
    pub l4_off: u16,
    /// The `parsed` bits the parse set in the key ([`crate::key::parsed`]), for a caller that
    /// tests them at once: from the parse's registers, not loaded back from the key.
    pub parsed: u16,
}

/// Ethernet types.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// 802.1Q VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service tag (QinQ outer tag).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ tag.
    pub const QINQ_OLD: u16 = 0x9100;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MC: u16 = 0x8848;
    /// What `eth_type` is set to for an 802.3 frame (a length field instead of a type).
    pub const NONE: u16 = 0x05ff;

    /// Whether `t` is a VLAN tag protocol identifier.
    #[inline(always)]
    pub fn is_vlan(t: u16) -> bool {
        t == VLAN || t == QINQ || t == QINQ_OLD
    }

    /// Whether `t` is an MPLS ethertype.
    #[inline(always)]
    pub fn is_mpls(t: u16) -> bool {
        t == MPLS || t == MPLS_MC
    }
}

/// IP protocol numbers.
pub mod ipproto {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// IPv6 hop-by-hop options.
    pub const HOPOPTS: u8 = 0;
    /// IPv6 routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header.
    pub const FRAGMENT: u8 = 44;
    /// IPv6 authentication header.
    pub const AH: u8 = 51;
    /// IPv6 destination options.
    pub const DSTOPTS: u8 = 60;
    /// IPv6 encapsulating security payload.
    pub const ESP: u8 = 50;
    /// IPv6 no next header.
    pub const NONXT: u8 = 59;
}

/// Most IPv6 extension headers walked before giving up (the chain is then left unparsed).
pub const MAX_IPV6_EXT: usize = 8;

/// Where the IPv4 header starts in an untagged frame.
const L3: usize = ETH_LEN;
/// Where the L4 header starts after an untagged IPv4 header without options.
const L4: usize = L3 + 20;

/// Cuts a fixed-size header out of `data` at `off`, or `None` when the frame is too short.
#[inline(always)]
pub(crate) fn hdr<const N: usize>(data: &[u8], off: usize) -> Option<&[u8; N]> {
    data.get(off..off.checked_add(N)?)?.try_into().ok()
}

/// Source and destination port of a TCP, UDP or SCTP header (its first four bytes), as
/// `tp_src << 16 | tp_dst`.
#[inline(always)]
fn ports(h: &[u8]) -> u64 {
    u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as u64
}

#[inline(always)]
fn mac48(b: &[u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

/// Result of walking an IPv6 extension-header chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ipv6Walk {
    /// The upper-layer protocol (or the header where the walk stopped).
    pub proto: u8,
    /// Offset of the upper-layer header.
    pub off: usize,
    /// `frag` bits.
    pub frag: u8,
    /// Whether any extension header was present.
    pub ext: bool,
    /// Whether a routing header with segments left was passed (the upper-layer checksum
    /// then covers the final destination, not the IPv6 destination field).
    pub routed: bool,
    /// `parsed::TRUNCATED` / `parsed::MALFORMED` when the walk failed.
    pub error: u16,
    /// The `ipv6_exthdr` bits (see [`exthdr`]) of the headers passed and of the header
    /// where the walk stopped (ESP, whose content is encrypted, or no next header).
    pub exthdr: u16,
}

/// The order RFC 8200 §4.1 recommends, as a rank per extension header: hop-by-hop first,
/// destination options (before a routing header), routing, fragment, authentication,
/// ESP, destination options (for the final destination). A header ranked below one seen
/// before it is out of sequence.
#[inline]
fn exthdr_step(flags: u16, last: &mut u8, dest: &mut u8, nh: u8) -> u16 {
    let (bit, rank) = match nh {
        ipproto::HOPOPTS => (exthdr::HOP, 0),
        ipproto::DSTOPTS => {
            *dest += 1;
            // Before a routing header it is the first kind; after anything ranked later, the
            // final destination's.
            (
                exthdr::DEST,
                if *last <= 1 || *last == u8::MAX { 1 } else { 6 },
            )
        }
        ipproto::ROUTING => (exthdr::ROUTER, 2),
        ipproto::FRAGMENT => (exthdr::FRAG, 3),
        ipproto::AH => (exthdr::AUTH, 4),
        ipproto::ESP => (exthdr::ESP, 5),
        ipproto::NONXT => return flags | exthdr::NONEXT,
        _ => return flags,
    };
    let mut f = flags | bit;
    let repeated = if nh == ipproto::DSTOPTS {
        *dest > 2
    } else {
        flags & bit != 0
    };
    if repeated {
        f |= exthdr::UNREP;
    }
    if *last != u8::MAX && (rank < *last || nh == ipproto::HOPOPTS) {
        f |= exthdr::UNSEQ;
    }
    *last = if *last == u8::MAX {
        rank
    } else {
        rank.max(*last)
    };
    f
}

/// Walks IPv6 extension headers from `off` (just after the fixed header) with first next
/// header `nh`, within `data[..end]`.
#[inline]
pub(crate) fn walk_ipv6_ext(data: &[u8], mut off: usize, mut nh: u8, end: usize) -> Ipv6Walk {
    let data = &data[..end.min(data.len())];
    let mut w = Ipv6Walk {
        proto: nh,
        off,
        frag: 0,
        ext: false,
        routed: false,
        error: 0,
        exthdr: 0,
    };
    // Rank of the last header (u8::MAX: none yet) and destination options seen.
    let (mut last, mut dest) = (u8::MAX, 0u8);
    for _ in 0..MAX_IPV6_EXT {
        let len = match nh {
            ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS => {
                let Some(h) = hdr::<2>(data, off) else {
                    w.error = parsed::TRUNCATED;
                    return w;
                };
                (h[1] as usize + 1) * 8
            }
            ipproto::AH => {
                let Some(h) = hdr::<2>(data, off) else {
                    w.error = parsed::TRUNCATED;
                    return w;
                };
                (h[1] as usize + 2) * 4
            }
            ipproto::FRAGMENT => {
                let Some(h) = hdr::<8>(data, off) else {
                    w.error = parsed::TRUNCATED;
                    return w;
                };
                let offlg = be16(h, 2);
                w.exthdr = exthdr_step(w.exthdr, &mut last, &mut dest, nh);
                w.frag = frag::ANY;
                if offlg & 0xfff8 != 0 {
                    w.frag |= frag::LATER;
                }
                w.ext = true;
                nh = h[0];
                off += 8;
                w.proto = nh;
                w.off = off;
                if w.frag & frag::LATER != 0 {
                    return w;
                }
                continue;
            }
            _ => {
                w.exthdr = exthdr_step(w.exthdr, &mut last, &mut dest, nh);
                return w;
            }
        };
        if off + len > data.len() {
            w.error = parsed::TRUNCATED;
            return w;
        }
        w.ext = true;
        w.exthdr = exthdr_step(w.exthdr, &mut last, &mut dest, nh);
        if nh == ipproto::ROUTING && data[off + 3] != 0 {
            w.routed = true;
        }
        nh = data[off];
        off += len;
        w.proto = nh;
        w.off = off;
    }
    // Too long a chain: stop where we are; the last header stays as `proto`.
    w
}

/// Extracts the flow key of the frame `data` received on `in_port` into `key` (every word
/// is overwritten) and returns where its L3 and L4 headers are.
#[inline]
pub fn extract(data: &[u8], in_port: u32, key: &mut FlowKey) -> Layers {
    if let Some(layers) = extract_fast(data, in_port, key) {
        return layers;
    }
    extract_general(data, in_port, key)
}

/// The fast path of [`extract`] for the common frame: untagged Ethernet, IPv4 without
/// options, not a fragment, UDP or TCP, every header (and the IP length) inside the frame.
/// Recognised with two 8-byte loads; writes every key word exactly once. `None` (and `key`
/// untouched) for any other frame, which the general parser then handles. Gives the same key
/// and layers as the general parser (a property test checks it).
#[inline(always)]
fn extract_fast(data: &[u8], in_port: u32, key: &mut FlowKey) -> Option<Layers> {
    // Eth (14) + IPv4 (20) + TCP (20): UDP frames shorter than this (below the Ethernet
    // minimum of 60 bytes) take the general path.
    let h = hdr::<{ L4 + 20 }>(data, 0)?;
    // Bytes 12..20: eth_type (2), version/IHL, TOS, total length (2), id (2).
    let a = u64::from_be_bytes(h[12..20].try_into().unwrap_or([0; 8]));
    if a >> 40 != 0x08_00_45 {
        return None;
    }
    // Bytes 20..28: flags/fragment offset (2), TTL, protocol, checksum (2), 2 of ipv4_src.
    let b = u64::from_be_bytes(h[20..28].try_into().unwrap_or([0; 8]));
    if (b >> 48) & 0x3fff != 0 {
        return None;
    }
    let tot = ((a >> 16) & 0xffff) as usize;
    let end = L3 + tot;
    let proto = (b >> 32) as u8;
    let w12 = match proto {
        ipproto::UDP if tot >= 28 && end <= data.len() => 0,
        ipproto::TCP => {
            let doff = (h[L4 + tcp::field::FLAGS.start] >> 4) as usize * 4;
            if tot < 40 || doff < 20 || L4 + doff > end || end > data.len() {
                return None;
            }
            (be16(h, L4 + tcp::field::FLAGS.start) & 0x0fff) as u64
        }
        _ => return None,
    };
    let dst = u64::from_be_bytes(h[0..8].try_into().unwrap_or([0; 8])) >> 16;
    let src = u64::from_be_bytes(h[4..12].try_into().unwrap_or([0; 8])) << 16;
    let flags = parsed::ETH | parsed::L3 | parsed::L4;
    let w0 = ((flags as u64) << 48) | ((ethertype::IPV4 as u64) << 32) | in_port as u64;
    let w5 = u64::from_be_bytes(h[at(L3, ipv4::field::ADDRS)].try_into().unwrap_or([0; 8]));
    // proto · tos · ttl (frag is 0) · ports.
    let w6 = ((proto as u64) << 56)
        | ((a >> 32) & 0xff) << 48
        | ((b >> 40) & 0xff) << 40
        | ports(&h[L4..]);
    key.w = [0; KEY_WORDS];
    key.w[0] = w0;
    key.w[3] = dst << 16;
    key.w[4] = src;
    key.w[5] = w5;
    key.w[6] = w6;
    key.w[12] = w12;
    Some(Layers {
        l3_off: L3 as u16,
        l4_off: L4 as u16,
        parsed: flags,
    })
}

/// The general parser behind [`extract`]: every frame, every header type.
#[inline(never)]
fn extract_general(data: &[u8], in_port: u32, key: &mut FlowKey) -> Layers {
    *key = FlowKey::ZERO;
    let mut layers = Layers::default();
    let flags = parse(data, key, &mut layers);
    key.w[0] |= ((flags as u64) << 48) | in_port as u64;
    layers.parsed = flags;
    layers
}

/// [`extract`] on a packet: uses `pkt.meta.in_port` and stores the offsets in `pkt.meta`.
#[inline]
pub fn extract_packet(pkt: &mut Packet, key: &mut FlowKey) {
    extract_packet_on(pkt, pkt.meta.in_port, key);
}

/// [`extract_packet`] for a packet that arrived on `in_port`, which goes into its metadata
/// too; returns the `parsed` bits of the key ([`Layers::parsed`]). For a receive loop: the
/// parse takes the port, and the packet's bytes, from the caller's registers, and the
/// caller tests the bits it returns, not values loaded back from what was just written (a
/// load that waits for the store before it).
#[inline(always)]
pub fn extract_packet_on(pkt: &mut Packet, in_port: u32, key: &mut FlowKey) -> u16 {
    pkt.meta.in_port = in_port;
    let l = extract(pkt.data(), in_port, key);
    pkt.meta.l3_off = l.l3_off;
    pkt.meta.l4_off = l.l4_off;
    l.parsed
}

/// Parses everything; returns the `parsed` bits. Writes key words other than word 0's
/// parsed/in_port part (dl_type is stored here).
#[inline(always)]
fn parse(data: &[u8], key: &mut FlowKey, layers: &mut Layers) -> u16 {
    let Some(eth) = hdr::<14>(data, 0) else {
        return parsed::TRUNCATED;
    };
    let mut flags = parsed::ETH;
    // Two 8-byte loads instead of twelve byte loads: bytes 0..8 hold dst in their top 48
    // bits, bytes 4..12 hold src in their low 48 bits.
    let dst = u64::from_be_bytes(eth[0..8].try_into().unwrap_or([0; 8])) >> 16;
    let src = u64::from_be_bytes(eth[4..12].try_into().unwrap_or([0; 8])) & 0xffff_ffff_ffff;
    let mut tci = 0u64;
    let mut ctci = 0u64;
    let mut ty = be16(eth, ethernet::field::ETHERTYPE.start);
    let mut off = ETH_LEN;
    if ethertype::is_vlan(ty) {
        let Some(t) = hdr::<4>(data, off) else {
            key.w[3] = dst << 16;
            key.w[4] = src << 16;
            key.w[0] = (ty as u64) << 32;
            return flags | parsed::TRUNCATED;
        };
        tci = (be16(t, ethernet::field::TAG_TCI.start) | 0x1000) as u64;
        ty = be16(t, ethernet::field::TAG_ETHERTYPE.start);
        off += 4;
        flags |= parsed::VLAN;
        if ethertype::is_vlan(ty) {
            if let Some(t) = hdr::<4>(data, off) {
                ctci = (be16(t, ethernet::field::TAG_TCI.start) | 0x1000) as u64;
                ty = be16(t, ethernet::field::TAG_ETHERTYPE.start);
                off += 4;
                flags |= parsed::QINQ;
            } else {
                flags |= parsed::TRUNCATED;
            }
        }
    }
    if ty < 0x0600 {
        ty = ethertype::NONE;
    }
    key.w[3] = (dst << 16) | tci;
    key.w[4] = (src << 16) | ctci;
    key.w[0] = (ty as u64) << 32;
    if flags & parsed::TRUNCATED != 0 {
        return flags;
    }
    match ty {
        ethertype::IPV4 => flags | parse_ipv4(data, off, key, layers),
        ethertype::IPV6 => flags | parse_ipv6(data, off, key, layers),
        ethertype::ARP => flags | parse_arp(data, off, key, layers),
        ethertype::MPLS | ethertype::MPLS_MC => flags | parse_mpls(data, off, key),
        _ => flags,
    }
}

/// The top MPLS label stack entry into the key's word 15; when it is the bottom of the
/// stack, what it carries too if that reads as IP ([`parse_below_stack`]).
#[inline(always)]
fn parse_mpls(data: &[u8], off: usize, key: &mut FlowKey) -> u16 {
    let Some(l) = hdr::<4>(data, off) else {
        return parsed::TRUNCATED;
    };
    let lse = u32::from_be_bytes(*l);
    if lse & 0x100 != 0 {
        parse_below_stack(data, off + 4, key);
    }
    key.w[15] |= (lse as u64) << 32;
    0
}

/// The IPv4 or IPv6 header (and its L4 header) under the bottom label stack entry, by its
/// version nibble, into the key's L3/L4 fields, so that the tables after a `pop_mpls` to
/// 0x0800 or 0x86dd match what the packet then is. MPLS does not announce its payload, so
/// this is a guess: the layers stay unset (rewrites find the headers from the bytes after
/// the pop, see [`crate::mpls`]) and what does not parse is no error of the packet's. No
/// table sees these fields while `eth_type` is MPLS (their prerequisites need IP).
#[inline(never)]
fn parse_below_stack(data: &[u8], off: usize, key: &mut FlowKey) {
    let mut layers = Layers::default();
    match data.get(off).map(|b| b >> 4) {
        Some(4) => {
            parse_ipv4(data, off, key, &mut layers);
        }
        Some(6) => {
            parse_ipv6(data, off, key, &mut layers);
        }
        _ => {}
    }
}

#[inline(always)]
fn parse_arp(data: &[u8], off: usize, key: &mut FlowKey, layers: &mut Layers) -> u16 {
    let Some(a) = hdr::<28>(data, off) else {
        return parsed::TRUNCATED;
    };
    if be16(a, 0) != 1 || be16(a, 2) != ethertype::IPV4 || a[4] != 6 || a[5] != 4 {
        return 0;
    }
    let op = be16(a, 6) as u64;
    let sha = mac48(a[8..14].try_into().unwrap_or(&[0; 6]));
    let spa = u32::from_be_bytes([a[14], a[15], a[16], a[17]]) as u64;
    let tha = mac48(a[18..24].try_into().unwrap_or(&[0; 6]));
    let tpa = u32::from_be_bytes([a[24], a[25], a[26], a[27]]) as u64;
    key.w[5] = (spa << 32) | tpa;
    key.w[11] = (sha << 16) | op;
    key.w[12] = tha << 16;
    layers.l3_off = off as u16;
    parsed::L3
}

#[inline(always)]
fn parse_ipv4(data: &[u8], off: usize, key: &mut FlowKey, layers: &mut Layers) -> u16 {
    let Some(h) = hdr::<20>(data, off) else {
        return parsed::TRUNCATED;
    };
    if h[ipv4::field::VER_IHL] >> 4 != 4 {
        return parsed::MALFORMED;
    }
    let ihl = ((h[ipv4::field::VER_IHL] & 0x0f) as usize) * 4;
    if ihl < 20 {
        return parsed::MALFORMED;
    }
    let mut flags = 0;
    if ihl > 20 {
        flags |= parsed::IP_OPTIONS;
        if off + ihl > data.len() {
            return flags | parsed::TRUNCATED;
        }
    }
    let tot = be16(h, ipv4::field::LENGTH.start) as usize;
    let proto = h[ipv4::field::PROTOCOL];
    let fragw = be16(h, ipv4::field::FLG_OFF.start);
    let mut fr = 0u8;
    if fragw & 0x3fff != 0 {
        fr = frag::ANY;
        if fragw & 0x1fff != 0 {
            fr |= frag::LATER;
        }
    }
    // Source and destination addresses are 8 adjacent bytes: one load gives word 5.
    key.w[5] = u64::from_be_bytes(h[ipv4::field::ADDRS].try_into().unwrap_or([0; 8]));
    key.w[6] = ((proto as u64) << 56)
        | ((h[ipv4::field::TOS] as u64) << 48)
        | ((h[ipv4::field::TTL] as u64) << 40)
        | ((fr as u64) << 32);
    layers.l3_off = off as u16;
    flags |= parsed::L3;
    if tot < ihl {
        return flags | parsed::MALFORMED;
    }
    if off + tot > data.len() {
        return flags | parsed::TRUNCATED;
    }
    if fr & frag::LATER != 0 {
        return flags;
    }
    flags | parse_l4(&data[..off + tot], off + ihl, proto, false, key, layers)
}

#[inline(always)]
fn parse_ipv6(data: &[u8], off: usize, key: &mut FlowKey, layers: &mut Layers) -> u16 {
    let Some(h) = hdr::<40>(data, off) else {
        return parsed::TRUNCATED;
    };
    let first = be32(h, ipv6::field::VER_TC_FLOW.start);
    if first >> 28 != 6 {
        return parsed::MALFORMED;
    }
    let tc = (first >> 20) as u8;
    let label = first & 0x000f_ffff;
    let plen = be16(h, ipv6::field::LENGTH.start) as usize;
    let nh = h[ipv6::field::NXT_HDR];
    let hlim = h[ipv6::field::HOP_LIMIT];
    let src: &[u8; 16] = h[ipv6::field::SRC].try_into().unwrap_or(&[0; 16]);
    let dst: &[u8; 16] = h[ipv6::field::DST].try_into().unwrap_or(&[0; 16]);
    key.w[7] = u64::from_be_bytes(src[0..8].try_into().unwrap_or([0; 8]));
    key.w[8] = u64::from_be_bytes(src[8..16].try_into().unwrap_or([0; 8]));
    key.w[9] = u64::from_be_bytes(dst[0..8].try_into().unwrap_or([0; 8]));
    key.w[10] = u64::from_be_bytes(dst[8..16].try_into().unwrap_or([0; 8]));
    key.w[15] = label as u64;
    layers.l3_off = off as u16;
    let mut flags = parsed::L3;
    // A zero payload length is a jumbogram (or a lie): parse up to the end of the frame.
    let end = if plen == 0 {
        data.len()
    } else {
        off + 40 + plen
    };
    let tos_ttl = ((tc as u64) << 48) | ((hlim as u64) << 40);
    if end > data.len() {
        key.w[6] = ((nh as u64) << 56) | tos_ttl;
        return flags | parsed::TRUNCATED;
    }
    let w = if matches!(
        nh,
        ipproto::HOPOPTS | ipproto::ROUTING | ipproto::FRAGMENT | ipproto::AH | ipproto::DSTOPTS
    ) {
        walk_ipv6_ext(data, off + 40, nh, end)
    } else {
        Ipv6Walk {
            proto: nh,
            off: off + 40,
            frag: 0,
            ext: false,
            routed: false,
            error: 0,
            exthdr: match nh {
                ipproto::NONXT => exthdr::NONEXT,
                ipproto::ESP => exthdr::ESP,
                _ => 0,
            },
        }
    };
    key.w[6] = ((w.proto as u64) << 56) | tos_ttl | ((w.frag as u64) << 32);
    key.w[15] |= (w.exthdr as u64) << 20;
    if w.ext {
        flags |= parsed::IPV6_EXT;
    }
    if w.error != 0 {
        return flags | w.error;
    }
    if w.frag & frag::LATER != 0 {
        return flags;
    }
    flags | parse_l4(&data[..end], w.off, w.proto, true, key, layers)
}

/// Parses the L4 header at `off` within `data` (already cut at the end of the IP payload).
#[inline(always)]
fn parse_l4(
    data: &[u8],
    off: usize,
    proto: u8,
    v6: bool,
    key: &mut FlowKey,
    layers: &mut Layers,
) -> u16 {
    match proto {
        ipproto::TCP => {
            let Some(t) = hdr::<20>(data, off) else {
                return parsed::TRUNCATED;
            };
            key.w[6] |= ports(t);
            key.w[12] = (be16(t, tcp::field::FLAGS.start) & 0x0fff) as u64;
            let doff = (t[tcp::field::FLAGS.start] >> 4) as usize * 4;
            if doff < 20 {
                return parsed::MALFORMED;
            }
            if off + doff > data.len() {
                return parsed::TRUNCATED;
            }
        }
        ipproto::UDP => {
            let Some(u) = hdr::<8>(data, off) else {
                return parsed::TRUNCATED;
            };
            key.w[6] |= ports(u);
        }
        ipproto::SCTP => {
            let Some(s) = hdr::<12>(data, off) else {
                return parsed::TRUNCATED;
            };
            key.w[6] |= ports(s);
        }
        ipproto::ICMP if !v6 => {
            let Some(i) = hdr::<8>(data, off) else {
                return parsed::TRUNCATED;
            };
            key.w[6] |= ((i[0] as u64) << 16) | i[1] as u64;
        }
        ipproto::ICMPV6 if v6 => {
            let Some(i) = hdr::<4>(data, off) else {
                return parsed::TRUNCATED;
            };
            key.w[6] |= ((i[0] as u64) << 16) | i[1] as u64;
            if (i[0] == 135 || i[0] == 136) && i[1] == 0 {
                let e = parse_nd(data, off, key);
                if e != 0 {
                    return e;
                }
            }
        }
        _ => return 0,
    }
    layers.l4_off = off as u16;
    parsed::L4
}

/// Neighbour solicitation/advertisement: target and link-layer address options.
#[inline]
fn parse_nd(data: &[u8], off: usize, key: &mut FlowKey) -> u16 {
    let Some(nd) = hdr::<24>(data, off) else {
        return parsed::TRUNCATED;
    };
    let target = u128::from_be_bytes(nd[8..24].try_into().unwrap_or([0; 16]));
    let mut sll = 0u64;
    let mut tll = 0u64;
    let mut o = off + 24;
    while o < data.len() {
        let Some(opt) = hdr::<2>(data, o) else {
            return parsed::TRUNCATED;
        };
        let len = opt[1] as usize * 8;
        if len == 0 {
            return parsed::MALFORMED;
        }
        if o + len > data.len() {
            return parsed::TRUNCATED;
        }
        if len == 8 {
            let mac = mac48(data[o + 2..o + 8].try_into().unwrap_or(&[0; 6]));
            match opt[0] {
                1 if sll == 0 => sll = mac,
                2 if tll == 0 => tll = mac,
                _ => {}
            }
        }
        o += len;
    }
    key.w[13] = (target >> 64) as u64;
    key.w[14] = target as u64;
    key.w[11] = sll << 16;
    key.w[12] = tll << 16;
    0
}

#[cfg(test)]
mod tests;

//! Path-MTU answers for frames too large for a tunnel: ICMP "fragmentation needed" (IPv4
//! with DF) and ICMPv6 "packet too big", built the way the Linux kernel builds them for a
//! bridged tunnel device (`iptunnel_pmtud_build_icmp*`): the reply goes back out of the port
//! the frame came from, with the Ethernet and IP addresses of the original swapped — it
//! appears to come from the destination the sender was trying to reach — and carries as much
//! of the original as the minimum MTU allows (576 bytes in all for IPv4, 1280 for IPv6).
//!
//! No reply is made for what the RFCs say never to answer: ICMP errors, fragments other than
//! the first, multicast and broadcast destinations, unspecified or multicast sources, and
//! IPv4 without DF (the tunnel may fragment the outer packet instead; the caller counts it).

use packet::checksum;
use packet::extract::{ethertype, ipproto};
use packet::wire::{ethernet, ipv4, ipv6, Ethernet, Ipv4, Ipv6};

const ETH: usize = ethernet::Ethernet::<&[u8]>::LEN;
const ICMP_HDR: usize = 8;
/// IPv4 "destination unreachable", code "fragmentation needed and DF set".
const ICMP_UNREACH: u8 = 3;
const ICMP_FRAG_NEEDED: u8 = 4;
/// ICMPv6 "packet too big".
const ICMP6_TOO_BIG: u8 = 2;
/// The largest reply, Ethernet header included: the minimum MTU of each family plus 14.
pub const REPLY_MAX: usize = ETH + 1280;

/// Writes into `out` (at least [`REPLY_MAX`] bytes) the answer to `frame`, too large for a
/// path whose IP MTU is `mtu`, and returns its length; `None` when no answer is due.
pub fn too_big_reply(frame: &[u8], mtu: u16, out: &mut [u8]) -> Option<usize> {
    let eth = Ethernet::new_checked(frame).ok()?;
    match eth.ethertype() {
        ethertype::IPV4 => reply_v4(frame, mtu, out),
        ethertype::IPV6 => reply_v6(frame, mtu, out),
        _ => None,
    }
}

fn eth_swapped(frame: &[u8], ethertype: u16, out: &mut [u8]) {
    out[ethernet::field::DST].copy_from_slice(&frame[ethernet::field::SRC]);
    out[ethernet::field::SRC].copy_from_slice(&frame[ethernet::field::DST]);
    out[ethernet::field::ETHERTYPE].copy_from_slice(&ethertype.to_be_bytes());
}

fn reply_v4(frame: &[u8], mtu: u16, out: &mut [u8]) -> Option<usize> {
    let ip = Ipv4::new_checked(&frame[ETH..]).ok()?;
    let (src, dst) = (ip.src(), ip.dst());
    if !ip.dont_frag()
        || ip.frag_offset() != 0
        || dst.is_multicast()
        || dst.is_broadcast()
        || src.is_unspecified()
        || src.is_multicast()
        || is_icmp_error_v4(&ip)
    {
        return None;
    }
    // Original IP header and as much of its payload as fits in 576 bytes.
    let orig = &frame[ETH..ETH + ip.total_len() as usize];
    let quoted = orig.len().min(576 - 20 - ICMP_HDR);
    let total = 20 + ICMP_HDR + quoted;
    eth_swapped(frame, ethertype::IPV4, out);
    let l3 = &mut out[ETH..ETH + total];
    l3[..20].fill(0);
    l3[ipv4::field::VER_IHL] = 0x45;
    l3[ipv4::field::TOS] = ip.tos() & 0xfc;
    l3[ipv4::field::LENGTH].copy_from_slice(&(total as u16).to_be_bytes());
    l3[ipv4::field::FLG_OFF].copy_from_slice(&ipv4::DONT_FRAGMENT.to_be_bytes());
    l3[ipv4::field::TTL] = 64;
    l3[ipv4::field::PROTOCOL] = ipproto::ICMP;
    l3[ipv4::field::SRC].copy_from_slice(&dst.octets());
    l3[ipv4::field::DST].copy_from_slice(&src.octets());
    let c = checksum::checksum(&l3[..20]);
    l3[ipv4::field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    let icmp = &mut l3[20..];
    icmp[..ICMP_HDR].copy_from_slice(&[ICMP_UNREACH, ICMP_FRAG_NEEDED, 0, 0, 0, 0, 0, 0]);
    icmp[6..8].copy_from_slice(&mtu.to_be_bytes());
    icmp[ICMP_HDR..].copy_from_slice(&orig[..quoted]);
    let c = checksum::checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Some(ETH + total)
}

/// ICMP messages other than echo request/reply, timestamp and information requests are errors.
fn is_icmp_error_v4(ip: &Ipv4<&[u8]>) -> bool {
    ip.protocol() == ipproto::ICMP
        && ip
            .payload()
            .first()
            .is_none_or(|t| !matches!(t, 0 | 8 | 13 | 14 | 15 | 16))
}

fn reply_v6(frame: &[u8], mtu: u16, out: &mut [u8]) -> Option<usize> {
    let ip = Ipv6::new_checked(&frame[ETH..]).ok()?;
    let (src, dst) = (ip.src(), ip.dst());
    if dst.is_multicast() || src.is_unspecified() || src.is_multicast() || is_icmp_error_v6(&ip) {
        return None;
    }
    let orig_len = (ipv6::Ipv6::<&[u8]>::LEN + ip.payload_len() as usize).min(frame.len() - ETH);
    let orig = &frame[ETH..ETH + orig_len];
    let quoted = orig.len().min(1280 - 40 - ICMP_HDR);
    let plen = ICMP_HDR + quoted;
    eth_swapped(frame, ethertype::IPV6, out);
    let l3 = &mut out[ETH..ETH + 40 + plen];
    l3[ipv6::field::VER_TC_FLOW].copy_from_slice(&(6u32 << 28).to_be_bytes());
    l3[ipv6::field::LENGTH].copy_from_slice(&(plen as u16).to_be_bytes());
    l3[ipv6::field::NXT_HDR] = ipproto::ICMPV6;
    l3[ipv6::field::HOP_LIMIT] = 64;
    l3[ipv6::field::SRC].copy_from_slice(&dst.octets());
    l3[ipv6::field::DST].copy_from_slice(&src.octets());
    let icmp = &mut l3[40..];
    icmp[..4].copy_from_slice(&[ICMP6_TOO_BIG, 0, 0, 0]);
    icmp[4..8].copy_from_slice(&u32::from(mtu).to_be_bytes());
    icmp[ICMP_HDR..].copy_from_slice(&orig[..quoted]);
    let pseudo = checksum::pseudo_v6(
        u128::from(dst),
        u128::from(src),
        ipproto::ICMPV6,
        plen as u32,
    );
    let c = !checksum::fold(checksum::sum(icmp, pseudo));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Some(ETH + 40 + plen)
}

/// ICMPv6 types below 128 are errors (RFC 4443 §2.1); only the header's own next header is
/// looked at (an error behind extension headers is still not answered by the kernel's check
/// either, so this matches it).
fn is_icmp_error_v6(ip: &Ipv6<&[u8]>) -> bool {
    ip.next_header() == ipproto::ICMPV6 && ip.payload().first().is_none_or(|t| *t < 128)
}

#[cfg(test)]
#[path = "pmtud_tests.rs"]
mod tests;

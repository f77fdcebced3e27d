//! MPLS label stacks in a frame's bytes: push and pop a label stack entry (LSE), write the
//! top entry's fields, decrement its TTL, and copy a TTL between the top entry and the header
//! below it (OpenFlow's copy_ttl_out / copy_ttl_in).
//!
//! The stack starts right after the Ethernet type (after any VLAN tags) when that type is
//! 0x8847 or 0x8848; it is found from the bytes each time (extraction leaves `l3_off` at 0
//! for MPLS, see [`crate::extract`](mod@crate::extract)). An LSE is `label (20) · tc (3) · bos (1) · ttl (8)`.
//! What sits below the bottom entry is not announced by MPLS: the TTL copies look at its
//! version nibble (4 = IPv4, 6 = IPv6), as a label edge router does.
//!
//! Every function leaves the packet unchanged when it returns an error; push and pop reset
//! `meta.l3_off`/`l4_off` to 0 (the headers behind the stack moved or changed meaning, so
//! later rewrites find them again from the bytes).

use crate::checksum::update16;
use crate::extract::{ethertype, hdr};
use crate::key::{Field, FlowKey};
use crate::pool::Packet;
use crate::rewrite::RewriteError;

/// Length of one label stack entry.
pub const LSE_LEN: usize = 4;

/// An LSE from its parts (each cut to its width).
pub const fn lse(label: u32, tc: u8, bos: bool, ttl: u8) -> u32 {
    (label & 0xf_ffff) << 12 | ((tc as u32) & 7) << 9 | (bos as u32) << 8 | ttl as u32
}

/// The entry push_mpls puts on a packet with flow key `key`, as Open vSwitch makes it: a
/// copy of the top entry with bos 0 when the packet is MPLS already; else label 2 (IPv6
/// explicit null) for IPv6 and 0 otherwise, TC the low 3 bits of the DSCP, TTL the IP TTL (64
/// when it is 0 or the packet is not IP), bos 1. Which key fields it read: `eth_type`, then
/// the top entry, or the DSCP and TTL of an IP packet.
pub fn push_entry(key: &FlowKey) -> u32 {
    let eth = key.get(Field::EthType) as u16;
    if ethertype::is_mpls(eth) {
        return key.get(Field::MplsLse) as u32 & !0x100;
    }
    if eth != ethertype::IPV4 && eth != ethertype::IPV6 {
        return lse(0, 0, true, 64);
    }
    let label = if eth == ethertype::IPV6 { 2 } else { 0 };
    let ttl = match key.get(Field::IpTtl) as u8 {
        0 => 64,
        t => t,
    };
    lse(label, key.get(Field::IpDscp) as u8, true, ttl)
}

fn get16(d: &[u8], i: usize) -> Option<u16> {
    hdr::<2>(d, i).map(|b| u16::from_be_bytes(*b))
}

fn get32(d: &[u8], i: usize) -> Option<u32> {
    hdr::<4>(d, i).map(|b| u32::from_be_bytes(*b))
}

fn no_stack(field: Field) -> RewriteError {
    RewriteError::NoHeader {
        field,
        needs: "MPLS",
    }
}

/// Offset of the Ethernet type after the VLAN tags (at most two, as extraction reads).
fn type_offset(d: &[u8]) -> Option<usize> {
    let mut at = 12;
    for _ in 0..2 {
        if get16(d, at).is_some_and(ethertype::is_vlan) {
            at += 4;
        }
    }
    get16(d, at).map(|_| at)
}

/// Offset of the top label stack entry, when the frame is MPLS and holds a whole entry.
pub fn stack_offset(d: &[u8]) -> Option<usize> {
    let at = type_offset(d)?;
    let top = at + 2;
    (get16(d, at).is_some_and(ethertype::is_mpls) && top + LSE_LEN <= d.len()).then_some(top)
}

/// Pushes a new top entry and sets the Ethernet type to `ethertype` (0x8847 or 0x8848),
/// using 4 bytes of headroom. On a frame that has a stack already the new entry is a copy of
/// its top entry with bos 0 (OpenFlow's rule, from the bytes, so it holds for entries the
/// flow key never saw); on any other frame it is `entry` (see [`push_entry`]).
pub fn push_mpls(pkt: &mut Packet, ethertype: u16, entry: u32) -> Result<(), RewriteError> {
    let Some(at) = type_offset(pkt.data()) else {
        return Err(RewriteError::TooShort);
    };
    let entry = match stack_offset(pkt.data()).and_then(|top| get32(pkt.data(), top)) {
        Some(top) => top & !0x100,
        None => entry,
    };
    if pkt.headroom() < LSE_LEN || pkt.push_front(LSE_LEN).is_none() {
        return Err(RewriteError::NoHeadroom);
    }
    let d = pkt.data_mut();
    d.copy_within(LSE_LEN..at + 2 + LSE_LEN, 0);
    d[at..at + 2].copy_from_slice(&ethertype.to_be_bytes());
    d[at + 2..at + 2 + LSE_LEN].copy_from_slice(&entry.to_be_bytes());
    pkt.meta.l3_off = 0;
    pkt.meta.l4_off = 0;
    Ok(())
}

/// Removes the top entry and sets the Ethernet type to `ethertype` (what the rest is).
pub fn pop_mpls(pkt: &mut Packet, ethertype: u16) -> Result<(), RewriteError> {
    let d = pkt.data_mut();
    let Some(top) = stack_offset(d) else {
        return Err(no_stack(Field::MplsLabel));
    };
    let at = top - 2;
    d.copy_within(0..at, LSE_LEN);
    d[at + LSE_LEN..top + LSE_LEN].copy_from_slice(&ethertype.to_be_bytes());
    pkt.pull_front(LSE_LEN);
    pkt.meta.l3_off = 0;
    pkt.meta.l4_off = 0;
    Ok(())
}

/// Writes `field` (one of the MPLS fields, value already checked against its width) into
/// the top entry.
pub(crate) fn set_field(d: &mut [u8], field: Field, value: u128) -> Result<(), RewriteError> {
    let Some(top) = stack_offset(d) else {
        return Err(no_stack(field));
    };
    let old = get32(d, top).unwrap_or(0);
    let (shift, bits) = match field {
        Field::MplsLse => (0, 32),
        Field::MplsLabel => (12, 20),
        Field::MplsTc => (9, 3),
        Field::MplsBos => (8, 1),
        _ => (0, 8),
    };
    let mask = (u64::MAX >> (64 - bits)) as u32;
    let new = (old & !(mask << shift)) | ((value as u32 & mask) << shift);
    d[top..top + LSE_LEN].copy_from_slice(&new.to_be_bytes());
    Ok(())
}

/// Decrements the top entry's TTL and returns the new value; [`RewriteError::TtlExpired`]
/// (packet unchanged) when it is 0 or 1.
pub fn dec_mpls_ttl(pkt: &mut Packet) -> Result<u8, RewriteError> {
    let d = pkt.data_mut();
    let Some(top) = stack_offset(d) else {
        return Err(no_stack(Field::MplsTtl));
    };
    let ttl = d[top + 3];
    if ttl <= 1 {
        return Err(RewriteError::TtlExpired);
    }
    d[top + 3] = ttl - 1;
    Ok(ttl - 1)
}

/// Where the TTL of the header below the top entry is: the next entry's, or the IPv4 TTL /
/// IPv6 hop limit under the bottom entry. `(offset, is IPv4)`.
fn inner_ttl(d: &[u8], top: usize) -> Option<(usize, bool)> {
    let entry = get32(d, top)?;
    let below = top + LSE_LEN;
    if entry & 0x100 == 0 {
        return (below + LSE_LEN <= d.len()).then_some((below + 3, false));
    }
    match d.get(below)? >> 4 {
        4 if below + 20 <= d.len() => Some((below + 8, true)),
        6 if below + 40 <= d.len() => Some((below + 7, false)),
        _ => None,
    }
}

fn need_inner() -> RewriteError {
    RewriteError::NoHeader {
        field: Field::MplsTtl,
        needs: "MPLS with an IPv4 or IPv6 packet or another entry below the top",
    }
}

/// copy_ttl_out: the top entry's TTL becomes the TTL of the header below it.
pub fn copy_ttl_out(pkt: &mut Packet) -> Result<(), RewriteError> {
    let d = pkt.data_mut();
    let top = stack_offset(d).ok_or_else(|| no_stack(Field::MplsTtl))?;
    let (at, _) = inner_ttl(d, top).ok_or_else(need_inner)?;
    d[top + 3] = d[at];
    Ok(())
}

/// copy_ttl_in: the TTL of the header below the top entry becomes the top entry's (the IPv4
/// header checksum follows).
pub fn copy_ttl_in(pkt: &mut Packet) -> Result<(), RewriteError> {
    let d = pkt.data_mut();
    let top = stack_offset(d).ok_or_else(|| no_stack(Field::MplsTtl))?;
    let (at, ipv4) = inner_ttl(d, top).ok_or_else(need_inner)?;
    let ttl = d[top + 3];
    if ipv4 {
        // TTL and protocol are one 16-bit word of the checksum; the checksum is 2 bytes on.
        let old = get16(d, at).unwrap_or(0);
        d[at] = ttl;
        let new = get16(d, at).unwrap_or(0);
        if let Some(c) = get16(d, at + 2) {
            d[at + 2..at + 4].copy_from_slice(&update16(c, old, new).to_be_bytes());
        }
    } else {
        d[at] = ttl;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

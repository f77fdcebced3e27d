//! Termination: deciding, right after receive on an underlay port, whether a frame is a
//! tunnel packet for this host, checking its outer headers, and saying where the inner frame
//! is and what the outer headers carried.
//!
//! One pass over the outer headers through the `packet::wire` views, no allocation: the
//! result borrows nothing, so the caller can pull the outer headers off the packet and hand
//! the metadata to extraction.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use packet::checksum;
use packet::extract::{ethertype, ipproto};
use packet::wire::{geneve, Ethernet, Geneve, Ipv4, Ipv6, Udp, Vxlan};

use crate::endpoint::TunnelKind;

const ETH_LEN: usize = Ethernet::<&[u8]>::LEN;

/// The addresses and UDP ports this host terminates tunnels on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locals {
    /// Local tunnel endpoints.
    pub addrs: Vec<IpAddr>,
    /// UDP destination ports and the encapsulation each one carries.
    pub ports: Vec<(u16, TunnelKind)>,
}

impl Locals {
    fn has_v4(&self, a: Ipv4Addr) -> bool {
        self.addrs.contains(&IpAddr::V4(a))
    }

    fn has_v6(&self, a: Ipv6Addr) -> bool {
        self.addrs.contains(&IpAddr::V6(a))
    }

    fn kind(&self, port: u16) -> Option<TunnelKind> {
        self.ports.iter().find(|p| p.0 == port).map(|p| p.1)
    }
}

/// What the outer headers of a terminated packet said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decapped {
    /// VXLAN or Geneve.
    pub kind: TunnelKind,
    /// The tunnel id.
    pub vni: u32,
    /// Outer source (the remote endpoint).
    pub src: IpAddr,
    /// Outer destination (the local endpoint).
    pub dst: IpAddr,
    /// Outer TOS / traffic class.
    pub tos: u8,
    /// Outer TTL / hop limit.
    pub ttl: u8,
    /// Outer UDP source port.
    pub src_port: u16,
    /// Geneve options in the frame (empty for VXLAN).
    pub options: Range<usize>,
    /// Whether a Geneve option is marked critical.
    pub critical: bool,
    /// The inner Ethernet frame in the frame (outer padding excluded).
    pub inner: Range<usize>,
}

/// Why a packet addressed to a local tunnel endpoint was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The outer IP or UDP header is malformed or truncated.
    OuterMalformed,
    /// The outer IPv4 header checksum or a non-zero UDP checksum is wrong.
    OuterChecksum,
    /// The outer IPv4 packet is a fragment (tunnel packets are not reassembled).
    OuterFragment,
    /// The VXLAN or Geneve header is malformed (I flag, version, option lengths).
    TunnelHeader,
    /// A Geneve control packet (O flag) or an inner protocol other than Ethernet.
    GeneveNotEthernet,
    /// The inner frame is shorter than an Ethernet header.
    InnerTooShort,
}

impl DropReason {
    /// Every reason, for counters.
    pub const ALL: [DropReason; 6] = [
        DropReason::OuterMalformed,
        DropReason::OuterChecksum,
        DropReason::OuterFragment,
        DropReason::TunnelHeader,
        DropReason::GeneveNotEthernet,
        DropReason::InnerTooShort,
    ];

    /// A short name for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::OuterMalformed => "tunnel_outer_malformed",
            DropReason::OuterChecksum => "tunnel_outer_checksum",
            DropReason::OuterFragment => "tunnel_outer_fragment",
            DropReason::TunnelHeader => "tunnel_header_malformed",
            DropReason::GeneveNotEthernet => "tunnel_geneve_not_ethernet",
            DropReason::InnerTooShort => "tunnel_inner_too_short",
        }
    }
}

/// The decision about one received frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    /// Not for a local tunnel endpoint: switch it as it is.
    NotTunnel,
    /// A tunnel packet: the inner frame and the outer metadata.
    Decapped(Decapped),
    /// Addressed to a local tunnel endpoint but unusable: count and drop.
    Drop(DropReason),
}

/// Decides what `frame`, received on an underlay port, is.
pub fn terminate(frame: &[u8], locals: &Locals) -> Termination {
    let Ok(eth) = Ethernet::new_checked(frame) else {
        return Termination::NotTunnel;
    };
    let Ok((ethertype, l3)) = eth.inner_ethertype() else {
        return Termination::NotTunnel;
    };
    let outer = match ethertype {
        ethertype::IPV4 => outer_v4(frame, l3, locals),
        ethertype::IPV6 => outer_v6(frame, l3, locals),
        _ => return Termination::NotTunnel,
    };
    let o = match outer {
        Ok(Some(o)) => o,
        Ok(None) => return Termination::NotTunnel,
        Err(r) => return Termination::Drop(r),
    };
    match tunnel(frame, &o, locals) {
        Ok(Some(d)) => Termination::Decapped(d),
        Ok(None) => Termination::NotTunnel,
        Err(r) => Termination::Drop(r),
    }
}

/// The outer IP header's facts: addresses, TOS/TTL, where UDP starts and ends, and the
/// pseudo-header sum without the length.
struct Outer {
    src: IpAddr,
    dst: IpAddr,
    tos: u8,
    ttl: u8,
    l4: Range<usize>,
    pseudo: u64,
}

fn outer_v4(frame: &[u8], l3: usize, locals: &Locals) -> Result<Option<Outer>, DropReason> {
    let Ok(ip) = Ipv4::new_checked(&frame[l3..]) else {
        return Ok(None);
    };
    if ip.protocol() != ipproto::UDP || !locals.has_v4(ip.dst()) {
        return Ok(None);
    }
    if !ip.verify_checksum() {
        return Err(DropReason::OuterChecksum);
    }
    if ip.is_fragment() {
        return Err(DropReason::OuterFragment);
    }
    let start = l3 + ip.header_len();
    let end = l3 + ip.total_len() as usize;
    Ok(Some(Outer {
        src: IpAddr::V4(ip.src()),
        dst: IpAddr::V4(ip.dst()),
        tos: ip.tos(),
        ttl: ip.ttl(),
        l4: start..end,
        pseudo: checksum::pseudo_v4(ip.src().into(), ip.dst().into(), ipproto::UDP, 0),
    }))
}

fn outer_v6(frame: &[u8], l3: usize, locals: &Locals) -> Result<Option<Outer>, DropReason> {
    let Ok(ip) = Ipv6::new_checked(&frame[l3..]) else {
        return Ok(None);
    };
    // Tunnel packets carry UDP right after the fixed header; one behind extension headers is
    // not ours to terminate (the kernel's tunnel devices do not either).
    if ip.next_header() != ipproto::UDP || !locals.has_v6(ip.dst()) {
        return Ok(None);
    }
    if ip.payload_len() == 0 {
        return Err(DropReason::OuterMalformed);
    }
    let start = l3 + Ipv6::<&[u8]>::LEN;
    let end = start + ip.payload_len() as usize;
    Ok(Some(Outer {
        src: IpAddr::V6(ip.src()),
        dst: IpAddr::V6(ip.dst()),
        tos: ip.traffic_class(),
        ttl: ip.hop_limit(),
        l4: start..end,
        pseudo: checksum::pseudo_v6(ip.src().into(), ip.dst().into(), ipproto::UDP, 0),
    }))
}

fn tunnel(frame: &[u8], o: &Outer, locals: &Locals) -> Result<Option<Decapped>, DropReason> {
    let seg = &frame[o.l4.clone()];
    let u = Udp::new_checked(seg).map_err(|_| DropReason::OuterMalformed)?;
    let Some(kind) = locals.kind(u.dst_port()) else {
        return Ok(None);
    };
    // The UDP length bounds the inner frame (bytes after it in the IP packet are not ours,
    // as the kernel trims them).
    let end = o.l4.start + u.len() as usize;
    if !u.verify_checksum(checksum::add(o.pseudo, u64::from(u.len()))) {
        return Err(DropReason::OuterChecksum);
    }
    let t = o.l4.start + Udp::<&[u8]>::LEN;
    let (vni, options, critical, inner_start) = match kind {
        TunnelKind::Vxlan => {
            let v = Vxlan::new_checked(u.payload()).map_err(|_| DropReason::TunnelHeader)?;
            (v.vni(), t..t, false, t + Vxlan::<&[u8]>::LEN)
        }
        TunnelKind::Geneve => {
            let g = Geneve::new_checked(u.payload()).map_err(|_| DropReason::TunnelHeader)?;
            if g.flags() & geneve::FLAG_O != 0 || g.protocol() != geneve::PROTO_ETHERNET {
                return Err(DropReason::GeneveNotEthernet);
            }
            let opts = t + Geneve::<&[u8]>::LEN..t + g.header_len();
            let critical = g.options().any(|o| o.critical());
            (g.vni(), opts, critical, t + g.header_len())
        }
    };
    if end - inner_start < ETH_LEN {
        return Err(DropReason::InnerTooShort);
    }
    Ok(Some(Decapped {
        kind,
        vni,
        src: o.src,
        dst: o.dst,
        tos: o.tos,
        ttl: o.ttl,
        src_port: u.src_port(),
        options,
        critical,
        inner: inner_start..end,
    }))
}

#[cfg(test)]
#[path = "decap_tests.rs"]
mod tests;

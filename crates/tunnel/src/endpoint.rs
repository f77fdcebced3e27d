//! What a tunnel's outer headers say: the encapsulation and its options, and the addresses
//! the next hop resolved to.

use std::net::IpAddr;

use packet::wire::{geneve, vxlan};

/// The encapsulation a tunnel port speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN (RFC 7348).
    Vxlan,
    /// Geneve (RFC 8926).
    Geneve,
}

impl TunnelKind {
    /// The IANA UDP destination port (4789 or 6081).
    pub fn default_port(self) -> u16 {
        match self {
            TunnelKind::Vxlan => vxlan::UDP_PORT,
            TunnelKind::Geneve => geneve::UDP_PORT,
        }
    }

    /// The name used in port specs and errors (`vxlan`, `geneve`).
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
        }
    }
}

/// How packets are encapsulated towards one remote with one tunnel id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encap {
    /// VXLAN or Geneve.
    pub kind: TunnelKind,
    /// The 24-bit tunnel id (VNI).
    pub vni: u32,
    /// UDP destination port.
    pub dst_port: u16,
    /// Outer TTL / hop limit.
    pub ttl: u8,
    /// Outer TOS / traffic class.
    pub tos: u8,
    /// Set DF on the outer IPv4 header (the kernel's and Open vSwitch's default).
    pub df: bool,
    /// Fill the outer UDP checksum (IPv4: off by default; IPv6: on by default).
    pub udp_csum: bool,
    /// Geneve options, TLV-encoded as on the wire (empty for VXLAN).
    pub options: Vec<u8>,
}

impl Encap {
    /// The defaults of a Linux tunnel device: IANA port, TTL 64, TOS 0, DF set, UDP
    /// checksum on IPv6 only, no options.
    pub fn new(kind: TunnelKind, vni: u32, ipv6: bool) -> Encap {
        Encap {
            kind,
            vni,
            dst_port: kind.default_port(),
            ttl: 64,
            tos: 0,
            df: true,
            udp_csum: ipv6,
            options: Vec::new(),
        }
    }
}

/// The outer addresses, as the next hop resolved them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OuterAddrs {
    /// The underlay port's MAC address.
    pub src_mac: [u8; 6],
    /// The next hop's MAC address (the remote's, or its router's).
    pub dst_mac: [u8; 6],
    /// The local tunnel endpoint.
    pub src: IpAddr,
    /// The remote tunnel endpoint.
    pub dst: IpAddr,
}

//! A packet builder for tests, benchmarks and the traffic generator: describe a frame with a
//! [`PacketSpec`], get its bytes from [`PacketSpec::build`] with every length and checksum
//! right (IPv4 header, TCP/UDP/ICMPv6 with their pseudo-headers, ICMP, SCTP CRC32c).
//!
//! Not for the per-packet path: it allocates. A generator builds a template once and then
//! rewrites fields in place with [`crate::rewrite`].

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::extract::{ethertype, ipproto};

/// A whole frame (without FCS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketSpec {
    /// Ethernet source.
    pub eth_src: [u8; 6],
    /// Ethernet destination.
    pub eth_dst: [u8; 6],
    /// VLAN tags, outermost first: `(tpid, tci)` as on the wire.
    pub vlans: Vec<(u16, u16)>,
    /// The L3 header.
    pub l3: L3Spec,
    /// The L4 header (ignored after [`L3Spec::Arp`] and [`L3Spec::Raw`]).
    pub l4: L4Spec,
    /// Total frame length; the payload is padded up to it (a frame never gets shorter than
    /// its headers).
    pub frame_len: usize,
    /// Byte the payload is filled with.
    pub payload_fill: u8,
}

/// An L3 header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L3Spec {
    /// No L3 header: only this Ethernet type, then payload.
    Raw {
        /// The Ethernet type.
        ethertype: u16,
    },
    /// IPv4.
    Ipv4(Ipv4Spec),
    /// IPv6.
    Ipv6(Ipv6Spec),
    /// Ethernet/IPv4 ARP.
    Arp(ArpSpec),
}

/// An IPv4 header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Spec {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Time to live.
    pub ttl: u8,
    /// Type of service (DSCP << 2 | ECN).
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Flags and fragment offset as on the wire (0x4000 = don't fragment, 0x2000 = more
    /// fragments, low 13 bits = offset in 8-byte units).
    pub frag: u16,
    /// Option bytes (padded with zeros, end-of-options, to a multiple of 4; at most 40).
    pub options: Vec<u8>,
}

/// An IPv6 extension header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6Ext {
    /// Hop-by-hop options (8 bytes of padding options).
    HopByHop,
    /// Routing header type 0 with no addresses (8 bytes).
    Routing,
    /// Destination options (8 bytes of padding options).
    DestOpts,
    /// Authentication header with a 4-byte ICV (16 bytes).
    Ah,
    /// Fragment header.
    Fragment {
        /// Offset in 8-byte units.
        offset: u16,
        /// More fragments follow.
        more: bool,
        /// Identification.
        ident: u32,
    },
}

/// An IPv6 header and its extension headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Spec {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Hop limit.
    pub hlim: u8,
    /// Traffic class (DSCP << 2 | ECN).
    pub tclass: u8,
    /// Flow label (20 bits).
    pub label: u32,
    /// Extension headers, in order.
    pub ext: Vec<Ipv6Ext>,
}

/// An Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpSpec {
    /// Opcode (1 request, 2 reply).
    pub op: u16,
    /// Sender hardware address.
    pub sha: [u8; 6],
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: [u8; 6],
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

/// Neighbour discovery body of an ICMPv6 solicitation (135) or advertisement (136).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdSpec {
    /// Target address.
    pub target: Ipv6Addr,
    /// Source link-layer address option (type 1).
    pub sll: Option<[u8; 6]>,
    /// Target link-layer address option (type 2).
    pub tll: Option<[u8; 6]>,
}

/// An L4 header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L4Spec {
    /// None: the IP payload is padding.
    None,
    /// UDP.
    Udp {
        /// Source port.
        sp: u16,
        /// Destination port.
        dp: u16,
    },
    /// TCP (20-byte header, no options).
    Tcp {
        /// Source port.
        sp: u16,
        /// Destination port.
        dp: u16,
        /// Flags (12 bits: NS, CWR, ECE, URG, ACK, PSH, RST, SYN, FIN and 3 reserved).
        flags: u16,
    },
    /// SCTP common header.
    Sctp {
        /// Source port.
        sp: u16,
        /// Destination port.
        dp: u16,
    },
    /// ICMP (over IPv4), 8-byte header.
    Icmp {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
    },
    /// ICMPv6 (over IPv6), 8-byte header plus the neighbour discovery body if any.
    Icmpv6 {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
        /// Target and options (for types 135 and 136).
        nd: Option<NdSpec>,
    },
}

impl L4Spec {
    fn proto(&self) -> u8 {
        match self {
            L4Spec::None => 59, // IPv6 "no next header"; an unused protocol for IPv4.
            L4Spec::Udp { .. } => ipproto::UDP,
            L4Spec::Tcp { .. } => ipproto::TCP,
            L4Spec::Sctp { .. } => ipproto::SCTP,
            L4Spec::Icmp { .. } => ipproto::ICMP,
            L4Spec::Icmpv6 { .. } => ipproto::ICMPV6,
        }
    }

    fn header(&self) -> Vec<u8> {
        match self {
            L4Spec::None => Vec::new(),
            L4Spec::Udp { sp, dp } => [sp.to_be_bytes(), dp.to_be_bytes(), [0; 2], [0; 2]].concat(),
            L4Spec::Tcp { sp, dp, flags } => {
                let mut h = vec![0u8; 20];
                h[0..2].copy_from_slice(&sp.to_be_bytes());
                h[2..4].copy_from_slice(&dp.to_be_bytes());
                h[4..8].copy_from_slice(&1u32.to_be_bytes());
                h[12..14].copy_from_slice(&((5u16 << 12) | (flags & 0x0fff)).to_be_bytes());
                h[14..16].copy_from_slice(&65535u16.to_be_bytes());
                h
            }
            L4Spec::Sctp { sp, dp } => {
                let mut h = vec![0u8; 12];
                h[0..2].copy_from_slice(&sp.to_be_bytes());
                h[2..4].copy_from_slice(&dp.to_be_bytes());
                h[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
                h
            }
            L4Spec::Icmp { ty, code } => vec![*ty, *code, 0, 0, 0, 1, 0, 1],
            L4Spec::Icmpv6 { ty, code, nd } => {
                let mut h = vec![*ty, *code, 0, 0, 0, 0, 0, 0];
                if let Some(nd) = nd {
                    h.extend_from_slice(&nd.target.octets());
                    for (t, mac) in [(1u8, nd.sll), (2, nd.tll)] {
                        if let Some(mac) = mac {
                            h.extend_from_slice(&[t, 1]);
                            h.extend_from_slice(&mac);
                        }
                    }
                }
                h
            }
        }
    }
}

impl Default for PacketSpec {
    fn default() -> Self {
        PacketSpec {
            eth_src: [0x02, 0, 0, 0, 0, 0x01],
            eth_dst: [0x02, 0, 0, 0, 0, 0x02],
            vlans: Vec::new(),
            l3: L3Spec::Raw { ethertype: 0x88b5 },
            l4: L4Spec::None,
            frame_len: 60,
            payload_fill: 0,
        }
    }
}

impl Ipv4Spec {
    /// A plain header: TTL 64, no options, not a fragment.
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr) -> Ipv4Spec {
        Ipv4Spec {
            src,
            dst,
            ttl: 64,
            tos: 0,
            ident: 0,
            frag: 0,
            options: Vec::new(),
        }
    }
}

impl Ipv6Spec {
    /// A plain header: hop limit 64, no extension headers.
    pub fn new(src: Ipv6Addr, dst: Ipv6Addr) -> Ipv6Spec {
        Ipv6Spec {
            src,
            dst,
            hlim: 64,
            tclass: 0,
            label: 0,
            ext: Vec::new(),
        }
    }
}

impl PacketSpec {
    /// An untagged Ethernet/IPv4/UDP frame of `frame_len` bytes (TTL 64). Addresses are
    /// anything that converts to [`Ipv4Addr`] (an `Ipv4Addr`, a `u32` or `[u8; 4]`).
    pub fn udp4(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src_ip: impl Into<Ipv4Addr>,
        dst_ip: impl Into<Ipv4Addr>,
        sport: u16,
        dport: u16,
        frame_len: usize,
    ) -> PacketSpec {
        PacketSpec {
            eth_src: src_mac,
            eth_dst: dst_mac,
            vlans: Vec::new(),
            l3: L3Spec::Ipv4(Ipv4Spec::new(src_ip.into(), dst_ip.into())),
            l4: L4Spec::Udp {
                sp: sport,
                dp: dport,
            },
            frame_len,
            payload_fill: 0,
        }
    }

    /// The frame's bytes with an MPLS label stack (`entries`, top first, as on the wire)
    /// between the Ethernet type (after the VLAN tags), which becomes `ethertype`, and the
    /// L3 header this spec describes.
    pub fn build_mpls(&self, ethertype: u16, entries: &[u32]) -> Vec<u8> {
        let mut f = self.build();
        let at = 12 + 4 * self.vlans.len();
        f[at..at + 2].copy_from_slice(&ethertype.to_be_bytes());
        let stack: Vec<u8> = entries.iter().flat_map(|e| e.to_be_bytes()).collect();
        f.splice(at + 2..at + 2, stack);
        f
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(self.frame_len.max(64));
        f.extend_from_slice(&self.eth_dst);
        f.extend_from_slice(&self.eth_src);
        for (tpid, tci) in &self.vlans {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        let l3 = f.len() + 2;
        match &self.l3 {
            L3Spec::Raw { ethertype } => {
                f.extend_from_slice(&ethertype.to_be_bytes());
                self.pad(&mut f);
            }
            L3Spec::Arp(a) => {
                f.extend_from_slice(&ethertype::ARP.to_be_bytes());
                f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
                f.extend_from_slice(&a.op.to_be_bytes());
                f.extend_from_slice(&a.sha);
                f.extend_from_slice(&a.spa.octets());
                f.extend_from_slice(&a.tha);
                f.extend_from_slice(&a.tpa.octets());
                self.pad(&mut f);
            }
            L3Spec::Ipv4(ip) => {
                f.extend_from_slice(&ethertype::IPV4.to_be_bytes());
                let mut opts = ip.options.clone();
                opts.truncate(40);
                while opts.len() % 4 != 0 {
                    opts.push(0);
                }
                let ihl = 20 + opts.len();
                let mut h = [0u8; 20];
                h[0] = 0x40 | (ihl / 4) as u8;
                h[1] = ip.tos;
                h[4..6].copy_from_slice(&ip.ident.to_be_bytes());
                h[6..8].copy_from_slice(&ip.frag.to_be_bytes());
                h[8] = ip.ttl;
                h[9] = self.l4.proto();
                h[12..16].copy_from_slice(&ip.src.octets());
                h[16..20].copy_from_slice(&ip.dst.octets());
                f.extend_from_slice(&h);
                f.extend_from_slice(&opts);
                let l4 = f.len();
                f.extend_from_slice(&self.l4.header());
                self.pad(&mut f);
                let tot = (f.len() - l3) as u16;
                f[l3 + 2..l3 + 4].copy_from_slice(&tot.to_be_bytes());
                let c = checksum::checksum(&f[l3..l4]);
                f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
                let pseudo = checksum::pseudo_v4(
                    u32::from(ip.src),
                    u32::from(ip.dst),
                    self.l4.proto(),
                    (f.len() - l4) as u16,
                );
                self.l4_checksum(&mut f[l4..], pseudo);
            }
            L3Spec::Ipv6(ip) => {
                f.extend_from_slice(&ethertype::IPV6.to_be_bytes());
                let mut h = [0u8; 40];
                let first = (6u32 << 28) | ((ip.tclass as u32) << 20) | (ip.label & 0x000f_ffff);
                h[0..4].copy_from_slice(&first.to_be_bytes());
                h[6] = ip.ext.first().map_or(self.l4.proto(), ext_proto);
                h[7] = ip.hlim;
                h[8..24].copy_from_slice(&ip.src.octets());
                h[24..40].copy_from_slice(&ip.dst.octets());
                f.extend_from_slice(&h);
                for (i, e) in ip.ext.iter().enumerate() {
                    let nh = ip.ext.get(i + 1).map_or(self.l4.proto(), ext_proto);
                    push_ext(&mut f, e, nh);
                }
                let l4 = f.len();
                f.extend_from_slice(&self.l4.header());
                self.pad(&mut f);
                let plen = (f.len() - l3 - 40) as u16;
                f[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
                let pseudo = checksum::pseudo_v6(
                    u128::from(ip.src),
                    u128::from(ip.dst),
                    self.l4.proto(),
                    (f.len() - l4) as u32,
                );
                self.l4_checksum(&mut f[l4..], pseudo);
            }
        }
        f
    }

    fn pad(&self, f: &mut Vec<u8>) {
        if f.len() < self.frame_len {
            f.resize(self.frame_len, self.payload_fill);
        }
    }

    /// Fills the L4 checksum of `seg` (the L4 header and payload).
    fn l4_checksum(&self, seg: &mut [u8], pseudo: u64) {
        let at = match self.l4 {
            L4Spec::None => return,
            L4Spec::Sctp { .. } => {
                let c = checksum::crc32c(seg);
                seg[8..12].copy_from_slice(&c.to_le_bytes());
                return;
            }
            L4Spec::Icmp { .. } => {
                let c = checksum::checksum(seg);
                seg[2..4].copy_from_slice(&c.to_be_bytes());
                return;
            }
            L4Spec::Udp { .. } => {
                let len = seg.len() as u16;
                seg[4..6].copy_from_slice(&len.to_be_bytes());
                6
            }
            L4Spec::Tcp { .. } => 16,
            L4Spec::Icmpv6 { .. } => 2,
        };
        let mut c = !checksum::fold(checksum::sum(seg, pseudo));
        if c == 0 && matches!(self.l4, L4Spec::Udp { .. }) {
            c = 0xffff;
        }
        seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
}

fn ext_proto(e: &Ipv6Ext) -> u8 {
    match e {
        Ipv6Ext::HopByHop => ipproto::HOPOPTS,
        Ipv6Ext::Routing => ipproto::ROUTING,
        Ipv6Ext::DestOpts => ipproto::DSTOPTS,
        Ipv6Ext::Ah => ipproto::AH,
        Ipv6Ext::Fragment { .. } => ipproto::FRAGMENT,
    }
}

fn push_ext(f: &mut Vec<u8>, e: &Ipv6Ext, nh: u8) {
    match *e {
        // PadN option of 4 bytes after the 2-byte header: 8 bytes in all.
        Ipv6Ext::HopByHop | Ipv6Ext::DestOpts => f.extend_from_slice(&[nh, 0, 1, 4, 0, 0, 0, 0]),
        Ipv6Ext::Routing => f.extend_from_slice(&[nh, 0, 0, 0, 0, 0, 0, 0]),
        Ipv6Ext::Ah => f.extend_from_slice(&[nh, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0]),
        Ipv6Ext::Fragment {
            offset,
            more,
            ident,
        } => {
            f.extend_from_slice(&[nh, 0]);
            f.extend_from_slice(&((offset << 3) | more as u16).to_be_bytes());
            f.extend_from_slice(&ident.to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::{hex, UDP4};

    #[test]
    fn udp4_golden() {
        let p = PacketSpec::udp4(
            [0x02, 0, 0, 0, 0, 1],
            [0x02, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            1234,
            80,
            60,
        )
        .build();
        assert_eq!(p, hex(UDP4));
        assert!(checksum::verify(&p[14..34], 0));
    }

    #[test]
    fn frame_never_shorter_than_headers() {
        let mut s = PacketSpec::udp4(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::LOCALHOST,
            1,
            2,
            10,
        );
        assert_eq!(s.build().len(), 14 + 20 + 8);
        s.vlans.push((0x8100, 5));
        assert_eq!(s.build().len(), 18 + 20 + 8);
    }
}

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
//! every write. On read it fills the first ten bytes and zeroes the rest: the port clears
//! `TUN_F_UDP_TUNNEL_GSO` after probing for it, so the kernel never hands over tunnelled
//! super-packets (it cuts them first).
//!
//! For a tunnelled super-packet the request is TCP segmentation (`gso_type` TCPv4 or TCPv6,
//! with [`GSO_UDP_TUNNEL_IPV4`] or [`GSO_UDP_TUNNEL_IPV6`] for the outer family), the inner
//! TCP checksum partial (from the inner TCP header, the pseudo-header sum in its field, as
//! for a plain super-packet), and no outer UDP checksum: the kernel gives each segment its
//! outer IP length (IPv4: identification and header checksum too) and UDP length, and the
//! inner headers as plain TSO does. Tunnels with outer UDP checksums are not encapsulated
//! whole (the datapath cuts their super-packets first).
//!
//! Per-packet code: nothing here allocates.

use packet::extract::ethertype;
use packet::wire::get_be16;
use packet::Packet;

use crate::vnet::{tcp_request, VnetError, VNET_HDR_LEN};

/// Length of the header with the tunnel fields on the wire.
pub const VNET_HDR_TNL_LEN: usize = 24;
/// `gso_type` bit: the TCP super-packet is inside a UDP tunnel over IPv4.
pub const GSO_UDP_TUNNEL_IPV4: u8 = 0x20;
/// `gso_type` bit: the TCP super-packet is inside a UDP tunnel over IPv6.
pub const GSO_UDP_TUNNEL_IPV6: u8 = 0x40;
/// `TUNSETOFFLOAD` bit: the tap can take UDP-tunnelled super-packets (Linux 6.17); only
/// probed (a kernel without it refuses the bit).
pub const TUN_F_UDP_TUNNEL_GSO: u32 = 0x080;

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
    if csum != 0 {
        return Err(VnetError::BadHeaders(
            "outer UDP checksum set: not offloadable",
        ));
    }
    let (mut h, l3) = tcp_request(&mut d[outer..], g)?;
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
    let (th, bit) = match get_be16(d, 12) {
        Some(ethertype::IPV4) => {
            let ihl = usize::from(d[ETH] & 0x0f) * 4;
            if ihl < 20 || d[ETH + 9] != 17 {
                return Err(bad("outer IPv4 header is not UDP"));
            }
            (ETH + ihl, GSO_UDP_TUNNEL_IPV4)
        }
        Some(ethertype::IPV6) => {
            if d[ETH + 6] != 17 {
                return Err(bad("outer IPv6 header is not UDP"));
            }
            (ETH + 40, GSO_UDP_TUNNEL_IPV6)
        }
        _ => return Err(bad("outer headers are not IPv4 or IPv6")),
    };
    if th + UDP > outer {
        return Err(bad("outer headers longer than the request says"));
    }
    Ok((th, bit))
}

#[cfg(test)]
#[path = "vnet_tnl_tests.rs"]
pub(crate) mod tests;

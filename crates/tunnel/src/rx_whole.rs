//! The outer headers of a TCP super-packet that arrived encapsulated whole, as the receive
//! stage judges them.
//!
//! A TAP underlay whose kernel hands over UDP-tunnelled super-packets (`port::vnet_tnl`)
//! delivers one packet of up to 64 KiB that stands for many tunnel frames, marked with its
//! request ([`packet::Gso`], whose `outer` says where the inner frame starts). Its outer
//! lengths describe the whole (or nothing: the kernel writes 0 past 64 KiB), and whoever
//! cuts it rewrites them and the outer IPv4 header checksum for each segment, so they are
//! not evidence of anything. The receive stage therefore judges a *view*: a copy of the
//! outer headers and the inner Ethernet header, with the lengths and the IPv4 header
//! checksum describing just that copy, through the same general path as any frame
//! ([`crate::decap::terminate`]). Everything else — addresses, ports, the tunnel header,
//! the VNI and options — is judged as it is. The outer UDP checksum of a super-packet is
//! not a sum over it either (the kernel leaves the pseudo-header's there for whoever cuts
//! it): the segments it stands for were checked by whoever joined them (GRO checks each) or
//! are summed by whoever cuts them, so the view's is zero (not checked).
//!
//! Size and owner: a view is a 270-byte stack buffer, made only for super-packets (cold);
//! no allocation.

use packet::checksum;
use packet::extract::ethertype;
use packet::wire::{at, ipv4, ipv6, Ethernet};

/// Ethernet header length (the inner frame's, which the view keeps).
const ETH_LEN: usize = 14;

/// The longest outer headers a request can name ([`packet::Gso::outer`] is a byte).
const MAX_OUTER: usize = u8::MAX as usize;

/// A copy of a super-packet's outer headers and inner Ethernet header, its lengths
/// describing just the copy.
pub(crate) struct View {
    buf: [u8; MAX_OUTER + ETH_LEN],
    len: usize,
}

impl View {
    /// The view of `frame`, a super-packet whose inner frame starts at `outer`; `None`
    /// when its outer headers are not Ethernet (VLAN tags allowed), IPv4 or IPv6, and a UDP
    /// header before `outer`, or the frame is shorter than them and an inner Ethernet
    /// header.
    pub(crate) fn of(frame: &[u8], outer: usize) -> Option<View> {
        let len = outer + ETH_LEN;
        if outer > MAX_OUTER || frame.len() < len {
            return None;
        }
        let mut buf = [0u8; MAX_OUTER + ETH_LEN];
        buf[..len].copy_from_slice(&frame[..len]);
        let (ty, l3) = Ethernet::new_checked(&buf[..len])
            .ok()?
            .inner_ethertype()
            .ok()?;
        let udp = match ty {
            ethertype::IPV4 => {
                let ihl = usize::from(*buf.get(l3)? & 0x0f) * 4;
                if ihl < 20 || l3 + ihl + 8 > outer {
                    return None;
                }
                let tot = (len - l3) as u16;
                buf[at(l3, ipv4::field::LENGTH)].copy_from_slice(&tot.to_be_bytes());
                buf[at(l3, ipv4::field::CHECKSUM)].fill(0);
                let c = checksum::checksum(&buf[l3..l3 + ihl]);
                buf[at(l3, ipv4::field::CHECKSUM)].copy_from_slice(&c.to_be_bytes());
                l3 + ihl
            }
            ethertype::IPV6 => {
                let udp = l3 + ipv6::field::DST.end;
                if udp + 8 > outer {
                    return None;
                }
                let plen = (len - udp) as u16;
                buf[at(l3, ipv6::field::LENGTH)].copy_from_slice(&plen.to_be_bytes());
                udp
            }
            _ => return None,
        };
        let udp_len = (len - udp) as u16;
        buf[udp + 4..udp + 6].copy_from_slice(&udp_len.to_be_bytes());
        buf[udp + 6..udp + 8].fill(0);
        Some(View { buf, len })
    }

    /// The view's bytes: a frame the general path can judge.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

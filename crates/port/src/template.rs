//! Template frames for sources: an Ethernet / IPv4 / UDP frame with correct lengths and IPv4
//! header checksum (UDP checksum 0, "none", which IPv4 allows).
//!
//! This is the default traffic of `null:` ports; it is built here rather than with the packet
//! crate's builder so the port crate stays self-contained.

use packet::checksum;

/// Offset of the IPv4 header in a template frame.
pub const IPV4_OFFSET: usize = 14;
/// Offset of the IPv4 source address in a template frame.
pub const IPV4_SRC_OFFSET: usize = IPV4_OFFSET + 12;
/// Offset of the UDP header in a template frame.
pub const UDP_OFFSET: usize = IPV4_OFFSET + 20;
/// Smallest template: the three headers and no payload.
pub const MIN_UDP_FRAME: usize = UDP_OFFSET + 8;

/// The fields of an Ethernet / IPv4 / UDP template frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpFrame {
    /// Source MAC address.
    pub src_mac: [u8; 6],
    /// Destination MAC address.
    pub dst_mac: [u8; 6],
    /// IPv4 source address.
    pub src_ip: [u8; 4],
    /// IPv4 destination address.
    pub dst_ip: [u8; 4],
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// IPv4 time to live.
    pub ttl: u8,
    /// Frame length in bytes without FCS (at least [`MIN_UDP_FRAME`]); the payload is zeros.
    pub size: usize,
}

impl Default for UdpFrame {
    /// 64 bytes, 02:00:00:00:00:01 → 02:00:00:00:00:02, 10.0.0.1 → 10.0.0.2, UDP 1024 → 1024.
    fn default() -> Self {
        UdpFrame {
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            src_port: 1024,
            dst_port: 1024,
            ttl: 64,
            size: 64,
        }
    }
}

impl UdpFrame {
    /// The frame's bytes. A `size` below [`MIN_UDP_FRAME`] is raised to it; a size above
    /// 65535 + 14 is lowered to fit the IPv4 length field.
    pub fn build(&self) -> Vec<u8> {
        let size = self
            .size
            .clamp(MIN_UDP_FRAME, usize::from(u16::MAX) + IPV4_OFFSET);
        let mut f = vec![0u8; size];
        f[0..6].copy_from_slice(&self.dst_mac);
        f[6..12].copy_from_slice(&self.src_mac);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());

        let ip = &mut f[IPV4_OFFSET..UDP_OFFSET];
        ip[0] = 0x45; // version 4, 20-byte header
        ip[2..4].copy_from_slice(&((size - IPV4_OFFSET) as u16).to_be_bytes());
        ip[6] = 0x40; // don't fragment
        ip[8] = self.ttl;
        ip[9] = 17; // UDP
        ip[12..16].copy_from_slice(&self.src_ip);
        ip[16..20].copy_from_slice(&self.dst_ip);
        let check = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&check.to_be_bytes());

        let udp = &mut f[UDP_OFFSET..];
        udp[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&((size - UDP_OFFSET) as u16).to_be_bytes());
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_frame_golden_bytes() {
        let f = UdpFrame::default().build();
        let mut want = vec![
            0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst mac
            0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src mac
            0x08, 0x00, // IPv4
            0x45, 0x00, 0x00, 0x32, // v4 ihl 5, tos, total length 50
            0x00, 0x00, 0x40, 0x00, // id, DF
            0x40, 0x11, 0x26, 0xb9, // ttl 64, UDP, checksum
            10, 0, 0, 1, // src
            10, 0, 0, 2, // dst
            0x04, 0x00, 0x04, 0x00, // ports 1024 -> 1024
            0x00, 0x1e, 0x00, 0x00, // UDP length 30, no checksum
        ];
        want.resize(64, 0);
        assert_eq!(f, want);
        // A correct header sums to 0xffff.
        assert!(checksum::verify(&f[IPV4_OFFSET..UDP_OFFSET], 0));
    }

    #[test]
    fn sizes_are_clamped_to_what_the_headers_allow() {
        let small = UdpFrame {
            size: 10,
            ..UdpFrame::default()
        }
        .build();
        assert_eq!(small.len(), MIN_UDP_FRAME);
        let big = UdpFrame {
            size: 1_000_000,
            ..UdpFrame::default()
        }
        .build();
        assert_eq!(big.len(), 65535 + 14);
        assert_eq!(&big[16..18], &[0xff, 0xff]);
    }
}

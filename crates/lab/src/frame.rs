//! Test frames and the pcap files DPDK's net_pcap and Hayate's `pcap:` port replay without
//! end: 64-byte (60 B + FCS) Ethernet/IPv4/UDP frames with 18 zero bytes of payload.
//!
//! - [`frame`]: the one frame of the peers' pvp.sh and udp64.py (`bench vhost`):
//!   02:00:00:77:00:01 → 02:00:00:77:00:02, 10.77.0.1:1024 → 10.77.0.99:1025, UDP checksum 0.
//! - [`flows`]: the N frames of the peers' churn-ovs.sh (`bench churn-compare`): frame `i` from
//!   10.0.0.0 + i, UDP source port 1024 + i % 4096, to 10.0.0.2:1024, 02:00:00:00:00:01 →
//!   02:00:00:00:00:02, valid checksums.

use std::path::Path;

use anyhow::{Context, Result};

/// Frame length without FCS.
pub const FRAME_LEN: usize = 60;

/// The addresses of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp64 {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// IPv4 source.
    pub src: [u8; 4],
    /// IPv4 destination.
    pub dst: [u8; 4],
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
    /// Whether the UDP checksum is computed (else 0: none).
    pub udp_csum: bool,
}

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s >> 16) + (s & 0xffff);
    }
    !(s as u16)
}

/// The frame's bytes.
pub fn udp64(a: &Udp64) -> Vec<u8> {
    let payload = [0u8; 18];
    let ulen = 8 + payload.len() as u16;
    let mut udp = Vec::with_capacity(ulen as usize);
    udp.extend_from_slice(&a.sport.to_be_bytes());
    udp.extend_from_slice(&a.dport.to_be_bytes());
    udp.extend_from_slice(&ulen.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&payload);
    if a.udp_csum {
        let mut pseudo = Vec::with_capacity(12 + udp.len());
        pseudo.extend_from_slice(&a.src);
        pseudo.extend_from_slice(&a.dst);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&ulen.to_be_bytes());
        pseudo.extend_from_slice(&udp);
        let c = match csum(&pseudo) {
            0 => 0xffff,
            c => c,
        };
        udp[6..8].copy_from_slice(&c.to_be_bytes());
    }
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&(20 + ulen).to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    ip.extend_from_slice(&a.src);
    ip.extend_from_slice(&a.dst);
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = Vec::with_capacity(FRAME_LEN);
    f.extend_from_slice(&a.dst_mac);
    f.extend_from_slice(&a.src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    f
}

/// The frame of `bench vhost` (pvp.sh's).
pub fn frame() -> Vec<u8> {
    udp64(&Udp64 {
        dst_mac: [2, 0, 0, 0x77, 0, 2],
        src_mac: [2, 0, 0, 0x77, 0, 1],
        src: [10, 77, 0, 1],
        dst: [10, 77, 0, 99],
        sport: 1024,
        dport: 1025,
        udp_csum: false,
    })
}

/// The IPv4 source of flow `i` of [`flows`]: 10.0.0.0 + i.
pub fn flow_src(i: u32) -> [u8; 4] {
    (0x0a00_0000u32 + i).to_be_bytes()
}

/// Frame `i` of [`flows`].
pub fn flow(i: u32) -> Vec<u8> {
    udp64(&Udp64 {
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_mac: [2, 0, 0, 0, 0, 1],
        src: flow_src(i),
        dst: [10, 0, 0, 2],
        sport: 1024 + (i % 4096) as u16,
        dport: 1024,
        udp_csum: true,
    })
}

/// The `n` frames of churn-ovs.sh, one per source.
pub fn flows(n: u32) -> Vec<Vec<u8>> {
    (0..n).map(flow).collect()
}

/// A pcap file (microsecond time stamps, Ethernet) holding `frames` in order.
pub fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut p = Vec::with_capacity(24 + frames.iter().map(|f| 16 + f.len()).sum::<usize>());
    p.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    for f in frames {
        for v in [0u32, 0, f.len() as u32, f.len() as u32] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p.extend_from_slice(f);
    }
    p
}

/// Writes [`pcap`] of `frames` to `path`.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<()> {
    std::fs::write(path, pcap(frames)).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(f: &[u8]) -> String {
        f.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_frame_is_the_peers_udp64_frame() {
        let f = frame();
        assert_eq!(f.len(), FRAME_LEN);
        // The bytes of pvp.sh's (and udp64.py's) frame.
        let peers = "02000077000202000077000108004500002e00000000401165c20a4d00010a4d0063\
                     04000401001a0000000000000000000000000000000000000000";
        assert_eq!(hex(&f), peers);
    }

    #[test]
    fn the_flows_are_churn_ovs_frames() {
        // Frame 4097 of churn-ovs.sh's write_pcap (python3, struct.pack), byte for byte.
        let peers = "02000000000202000000000108004500002e00000000401156bd0a0010010a000002\
                     04010400001ad3b6000000000000000000000000000000000000";
        let f = flow(4097);
        assert_eq!(f.len(), FRAME_LEN);
        assert_eq!(hex(&f), peers);
        assert_eq!(csum(&f[14..34]), 0, "IPv4 header checksum");
    }

    #[test]
    fn the_pcap_holds_every_frame_in_order() {
        let fs = flows(3);
        let p = pcap(&fs);
        assert_eq!(p.len(), 24 + 3 * (16 + FRAME_LEN));
        assert_eq!(&p[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(p[20..24].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(p[32..36].try_into().unwrap()), 60);
        assert_eq!(&p[40..100], &fs[0][..]);
        assert_eq!(&p[p.len() - 60..], &fs[2][..]);
    }
}

//! The test frame: one 64-byte (60 B + FCS) Ethernet/IPv4/UDP frame, 02:00:00:77:00:01 →
//! 02:00:00:77:00:02, 10.77.0.1:1024 → 10.77.0.99:1025, 18 zero bytes of payload (the frame of
//! the peers' pvp.sh and udp64.py), and the one-frame pcap file DPDK's net_pcap replays
//! without end (`infinite_rx=1`).

use std::path::Path;

use anyhow::{Context, Result};

/// Frame length without FCS.
pub const FRAME_LEN: usize = 60;

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
pub fn frame() -> Vec<u8> {
    let payload = [0u8; 18];
    let mut udp = Vec::with_capacity(8 + payload.len());
    udp.extend_from_slice(&1024u16.to_be_bytes());
    udp.extend_from_slice(&1025u16.to_be_bytes());
    udp.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&payload);
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&(20 + udp.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    ip.extend_from_slice(&[10, 77, 0, 1, 10, 77, 0, 99]);
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![
        0x02, 0, 0, 0x77, 0, 0x02, 0x02, 0, 0, 0x77, 0, 0x01, 0x08, 0x00,
    ];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    f
}

/// A pcap file (microsecond time stamps, Ethernet) holding the frame once.
pub fn pcap() -> Vec<u8> {
    let f = frame();
    let mut p = Vec::new();
    p.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1, 0, 0, f.len() as u32, f.len() as u32] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p.extend_from_slice(&f);
    p
}

/// Writes [`pcap`] to `path`.
pub fn write_pcap(path: &Path) -> Result<()> {
    std::fs::write(path, pcap()).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_is_the_peers_udp64_frame() {
        let f = frame();
        assert_eq!(f.len(), FRAME_LEN);
        // The bytes of pvp.sh's (and udp64.py's) frame.
        let peers = "02000077000202000077000108004500002e00000000401165c20a4d00010a4d0063\
                     04000401001a0000000000000000000000000000000000000000";
        let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, peers);
    }

    #[test]
    fn the_pcap_holds_one_record() {
        let p = pcap();
        assert_eq!(p.len(), 24 + 16 + FRAME_LEN);
        assert_eq!(&p[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(p[20..24].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(p[32..36].try_into().unwrap()), 60);
        assert_eq!(&p[40..], &frame()[..]);
    }
}

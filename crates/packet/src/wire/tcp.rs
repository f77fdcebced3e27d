//! TCP header (RFC 9293).

use super::{be16, be32, check_len, put, WireError};
use crate::checksum;

/// Byte ranges of a TCP header.
pub mod field {
    use std::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Sequence number.
    pub const SEQ: Range<usize> = 4..8;
    /// Acknowledgement number.
    pub const ACK: Range<usize> = 8..12;
    /// Data offset (high nibble of the first byte) and flags (the low 12 bits).
    pub const FLAGS: Range<usize> = 12..14;
    /// Window.
    pub const WINDOW: Range<usize> = 14..16;
    /// Checksum.
    pub const CHECKSUM: Range<usize> = 16..18;
    /// Urgent pointer.
    pub const URGENT: Range<usize> = 18..20;
}

/// TCP flag bits (low 12 bits of the data-offset/flags word).
pub mod flags {
    /// FIN.
    pub const FIN: u16 = 0x001;
    /// SYN.
    pub const SYN: u16 = 0x002;
    /// RST.
    pub const RST: u16 = 0x004;
    /// PSH.
    pub const PSH: u16 = 0x008;
    /// ACK.
    pub const ACK: u16 = 0x010;
    /// URG.
    pub const URG: u16 = 0x020;
    /// ECE.
    pub const ECE: u16 = 0x040;
    /// CWR.
    pub const CWR: u16 = 0x080;
    /// NS (historic).
    pub const NS: u16 = 0x100;
}

/// A TCP segment.
///
/// `new_checked` guarantees at least 20 bytes and `20 <= data offset × 4 <= buffer length`.
#[derive(Debug, Clone)]
pub struct Tcp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Tcp<T> {
    /// Length of a header without options.
    pub const MIN_LEN: usize = 20;

    /// Wraps `buf` after checking lengths.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("TCP", buf.as_ref().len(), Self::MIN_LEN)?;
        let t = Tcp { buf };
        if t.header_len() < Self::MIN_LEN {
            return Err(WireError::Malformed {
                header: "TCP",
                why: "data offset below 5",
            });
        }
        check_len("TCP", t.buf.as_ref().len(), t.header_len())?;
        Ok(t)
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b(), field::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), field::DST_PORT.start)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.b(), field::SEQ.start)
    }

    /// Acknowledgement number.
    pub fn ack(&self) -> u32 {
        be32(self.b(), field::ACK.start)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        (self.b()[field::FLAGS.start] >> 4) as usize * 4
    }

    /// Flags (12 bits, see [`flags`]).
    pub fn flags(&self) -> u16 {
        be16(self.b(), field::FLAGS.start) & 0x0fff
    }

    /// Window.
    pub fn window(&self) -> u16 {
        be16(self.b(), field::WINDOW.start)
    }

    /// Checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM.start)
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.b(), field::URGENT.start)
    }

    /// Option bytes.
    pub fn options(&self) -> &[u8] {
        self.b()
            .get(Self::MIN_LEN..self.header_len())
            .unwrap_or(&[])
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        self.b().get(self.header_len()..).unwrap_or(&[])
    }

    /// Whether the checksum over the whole buffer is right given the pseudo-header sum.
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::verify(self.b(), pseudo)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tcp<T> {
    fn m(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, p: u16) {
        put(self.m(), field::SRC_PORT.start, &p.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        put(self.m(), field::DST_PORT.start, &p.to_be_bytes());
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        put(self.m(), field::SEQ.start, &v.to_be_bytes());
    }

    /// Sets the acknowledgement number.
    pub fn set_ack(&mut self, v: u32) {
        put(self.m(), field::ACK.start, &v.to_be_bytes());
    }

    /// Sets the header length in bytes (a multiple of 4) and the flags.
    pub fn set_header_len_and_flags(&mut self, len: usize, flags: u16) {
        let w = (((len / 4) as u16) << 12) | (flags & 0x0fff);
        put(self.m(), field::FLAGS.start, &w.to_be_bytes());
    }

    /// Sets the window.
    pub fn set_window(&mut self, w: u16) {
        put(self.m(), field::WINDOW.start, &w.to_be_bytes());
    }

    /// Sets the urgent pointer.
    pub fn set_urgent(&mut self, u: u16) {
        put(self.m(), field::URGENT.start, &u.to_be_bytes());
    }

    /// Computes and stores the checksum over the whole buffer with the pseudo-header sum.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        put(self.m(), field::CHECKSUM.start, &[0, 0]);
        let c = !checksum::fold(checksum::sum(self.b(), pseudo));
        put(self.m(), field::CHECKSUM.start, &c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    const SEG: &str = "04d2 0050 00000001 00000000 5002 ffff 2e52 0000 6869";

    fn pseudo() -> u64 {
        checksum::pseudo_v4(0x0a00_0001, 0x0a00_0002, 6, 22)
    }

    #[test]
    fn parse_golden() {
        let b = hex(SEG);
        let t = Tcp::new_checked(&b[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (1234, 80));
        assert_eq!((t.seq(), t.ack(), t.header_len()), (1, 0, 20));
        assert_eq!(t.flags(), flags::SYN);
        assert_eq!((t.window(), t.urgent()), (65535, 0));
        assert_eq!(t.payload(), b"hi");
        assert!(t.options().is_empty());
        assert!(t.verify_checksum(pseudo()));
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 22];
        b[20..].copy_from_slice(b"hi");
        let mut t = Tcp { buf: &mut b[..] };
        t.set_src_port(1234);
        t.set_dst_port(80);
        t.set_seq(1);
        t.set_ack(0);
        t.set_header_len_and_flags(20, flags::SYN);
        t.set_window(65535);
        t.set_urgent(0);
        t.fill_checksum(pseudo());
        assert_eq!(b, hex(SEG));
    }

    #[test]
    fn bad_offsets_are_refused() {
        let mut b = hex(SEG);
        b[12] = 0x40;
        assert!(Tcp::new_checked(&b[..]).is_err());
        b[12] = 0x60; // 24-byte header in 22 bytes
        assert!(Tcp::new_checked(&b[..]).is_err());
    }
}

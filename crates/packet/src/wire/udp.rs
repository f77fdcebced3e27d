//! UDP header (RFC 768).

use super::{be16, check_len, put, WireError};
use crate::checksum;

/// Byte ranges of a UDP header.
pub mod field {
    use std::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Length of header and payload.
    pub const LENGTH: Range<usize> = 4..6;
    /// Checksum.
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// A UDP header and its payload.
///
/// `new_checked` guarantees at least 8 bytes and `8 <= length field <= buffer length`.
#[derive(Debug, Clone)]
pub struct Udp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Udp<T> {
    /// Header length.
    pub const LEN: usize = 8;

    /// Wraps `buf` after checking lengths.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("UDP", buf.as_ref().len(), Self::LEN)?;
        let u = Udp { buf };
        let l = u.len() as usize;
        if l < Self::LEN {
            return Err(WireError::Malformed {
                header: "UDP",
                why: "length field below 8",
            });
        }
        check_len("UDP", u.buf.as_ref().len(), l)?;
        Ok(u)
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), field::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), field::DST_PORT.start)
    }

    /// Length field (header and payload).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        be16(self.buf.as_ref(), field::LENGTH.start)
    }

    /// Checksum (0 = none, allowed over IPv4 only).
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), field::CHECKSUM.start)
    }

    /// The datagram (header and payload) as the length field says.
    pub fn datagram(&self) -> &[u8] {
        self.buf.as_ref().get(..self.len() as usize).unwrap_or(&[])
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        self.datagram().get(Self::LEN..).unwrap_or(&[])
    }

    /// Whether the checksum is right given the pseudo-header sum (a zero checksum passes).
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        self.checksum() == 0 || checksum::verify(self.datagram(), pseudo)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Udp<T> {
    /// Wraps a buffer of at least 8 bytes to write a header into (a tunnel's outer UDP
    /// header); once the length field is set, [`Udp::fill_checksum`] covers that many bytes.
    pub fn new_unchecked(buf: T) -> Self {
        Udp { buf }
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, p: u16) {
        put(self.buf.as_mut(), field::SRC_PORT.start, &p.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        put(self.buf.as_mut(), field::DST_PORT.start, &p.to_be_bytes());
    }

    /// Sets the length field.
    pub fn set_len(&mut self, l: u16) {
        put(self.buf.as_mut(), field::LENGTH.start, &l.to_be_bytes());
    }

    /// Sets the checksum field (a partial sum a kernel completes, say).
    pub fn set_checksum(&mut self, c: u16) {
        put(self.buf.as_mut(), field::CHECKSUM.start, &c.to_be_bytes());
    }

    /// Computes and stores the checksum over the datagram with the pseudo-header sum (a
    /// result of 0 is stored as 0xffff).
    pub fn fill_checksum(&mut self, pseudo: u64) {
        put(self.buf.as_mut(), field::CHECKSUM.start, &[0, 0]);
        let mut c = !checksum::fold(checksum::sum(self.datagram(), pseudo));
        if c == 0 {
            c = 0xffff;
        }
        put(self.buf.as_mut(), field::CHECKSUM.start, &c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    const DGRAM: &str = "04d2 0050 000c 21eb 61626364";

    fn pseudo() -> u64 {
        checksum::pseudo_v4(0x0a00_0001, 0x0a00_0002, 17, 12)
    }

    #[test]
    fn parse_golden() {
        let b = hex(DGRAM);
        let u = Udp::new_checked(&b[..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (1234, 80, 12));
        assert_eq!(u.payload(), b"abcd");
        assert!(u.verify_checksum(pseudo()));
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 12];
        b[8..].copy_from_slice(b"abcd");
        let mut u = Udp { buf: &mut b[..] };
        u.set_src_port(1234);
        u.set_dst_port(80);
        u.set_len(12);
        u.fill_checksum(pseudo());
        assert_eq!(b, hex(DGRAM));
    }

    #[test]
    fn bad_lengths_are_refused() {
        let mut b = hex(DGRAM);
        assert!(Udp::new_checked(&b[..11]).is_err());
        b[5] = 7;
        assert!(Udp::new_checked(&b[..]).is_err());
    }
}

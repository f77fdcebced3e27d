//! SCTP common header (RFC 9260): ports, verification tag and the CRC32c checksum.

use super::{be16, be32, check_len, put, WireError};
use crate::checksum::{crc32c, crc32c_extend};

/// An SCTP packet (common header and chunks).
#[derive(Debug, Clone)]
pub struct Sctp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Sctp<T> {
    /// Length of the common header.
    pub const LEN: usize = 12;

    /// Wraps `buf` after checking it holds the common header.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("SCTP", buf.as_ref().len(), Self::LEN)?;
        Ok(Sctp { buf })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }

    /// Verification tag.
    pub fn verification_tag(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }

    /// The checksum as stored (CRC32c, little-endian on the wire).
    pub fn checksum(&self) -> u32 {
        let b = self.buf.as_ref();
        u32::from_le_bytes([b[8], b[9], b[10], b[11]])
    }

    /// CRC32c over the packet with the checksum field taken as zero.
    pub fn compute_checksum(&self) -> u32 {
        let b = self.buf.as_ref();
        let mut head = [0u8; 12];
        head[..8].copy_from_slice(&b[..8]);
        crc32c_extend(crc32c(&head), &b[Self::LEN..])
    }

    /// Whether the stored checksum is right.
    pub fn verify_checksum(&self) -> bool {
        self.checksum() == self.compute_checksum()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Sctp<T> {
    /// Sets the source port (the checksum is not updated: call [`Sctp::fill_checksum`]).
    pub fn set_src_port(&mut self, p: u16) {
        put(self.buf.as_mut(), 0, &p.to_be_bytes());
    }

    /// Sets the destination port (the checksum is not updated).
    pub fn set_dst_port(&mut self, p: u16) {
        put(self.buf.as_mut(), 2, &p.to_be_bytes());
    }

    /// Sets the verification tag (the checksum is not updated).
    pub fn set_verification_tag(&mut self, v: u32) {
        put(self.buf.as_mut(), 4, &v.to_be_bytes());
    }

    /// Computes and stores the CRC32c checksum.
    pub fn fill_checksum(&mut self) {
        put(self.buf.as_mut(), 8, &[0; 4]);
        let c = crc32c(self.buf.as_ref());
        put(self.buf.as_mut(), 8, &c.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    // Ports 5000 -> 6000, tag 0x12345678, one 8-byte chunk; CRC computed independently.
    const PKT: &str = "1388 1770 12345678 ac9abcb1 0100000800000000";

    #[test]
    fn parse_golden() {
        let b = hex(PKT);
        let s = Sctp::new_checked(&b[..]).unwrap();
        assert_eq!((s.src_port(), s.dst_port()), (5000, 6000));
        assert_eq!(s.verification_tag(), 0x1234_5678);
        assert_eq!(s.checksum(), 0xb1bc_9aac);
        assert!(s.verify_checksum());
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 20];
        b[12..].copy_from_slice(&hex("0100000800000000"));
        let mut s = Sctp { buf: &mut b[..] };
        s.set_src_port(5000);
        s.set_dst_port(6000);
        s.set_verification_tag(0x1234_5678);
        s.fill_checksum();
        assert_eq!(b, hex(PKT));
        assert!(Sctp::new_checked(&b[..11]).is_err());
    }
}

//! ICMP for IPv4 (RFC 792): type, code, checksum and the 4-byte rest of header.

use super::{be16, be32, check_len, put, WireError};
use crate::checksum;

/// An ICMP message (header and body).
#[derive(Debug, Clone)]
pub struct Icmpv4<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Icmpv4<T> {
    /// Header length (type, code, checksum, rest of header).
    pub const LEN: usize = 8;

    /// Wraps `buf` after checking it holds the 8-byte header.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("ICMP", buf.as_ref().len(), Self::LEN)?;
        Ok(Icmpv4 { buf })
    }

    /// Type.
    pub fn ty(&self) -> u8 {
        self.buf.as_ref()[0]
    }

    /// Code.
    pub fn code(&self) -> u8 {
        self.buf.as_ref()[1]
    }

    /// Checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }

    /// Rest of header (identifier and sequence for echo).
    pub fn rest(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }

    /// The body after the 8-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[Self::LEN..]
    }

    /// Whether the checksum over the message is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.buf.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4<T> {
    /// Sets the type.
    pub fn set_ty(&mut self, t: u8) {
        self.buf.as_mut()[0] = t;
    }

    /// Sets the code.
    pub fn set_code(&mut self, c: u8) {
        self.buf.as_mut()[1] = c;
    }

    /// Sets the rest of header.
    pub fn set_rest(&mut self, r: u32) {
        put(self.buf.as_mut(), 4, &r.to_be_bytes());
    }

    /// Computes and stores the checksum.
    pub fn fill_checksum(&mut self) {
        put(self.buf.as_mut(), 2, &[0, 0]);
        let c = checksum::checksum(self.buf.as_ref());
        put(self.buf.as_mut(), 2, &c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    const ECHO: &str = "08 00 192d 00010001 70696e67";

    #[test]
    fn parse_golden() {
        let b = hex(ECHO);
        let i = Icmpv4::new_checked(&b[..]).unwrap();
        assert_eq!((i.ty(), i.code(), i.rest()), (8, 0, 0x0001_0001));
        assert_eq!(i.payload(), b"ping");
        assert!(i.verify_checksum());
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 12];
        b[8..].copy_from_slice(b"ping");
        let mut i = Icmpv4 { buf: &mut b[..] };
        i.set_ty(8);
        i.set_code(0);
        i.set_rest(0x0001_0001);
        i.fill_checksum();
        assert_eq!(b, hex(ECHO));
        assert!(Icmpv4::new_checked(&b[..7]).is_err());
    }
}

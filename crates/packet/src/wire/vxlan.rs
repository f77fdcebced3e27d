//! VXLAN header (RFC 7348): eight bytes after the outer UDP header (destination port 4789),
//! then the inner Ethernet frame.
//!
//! ```text
//!  0               1               2               3
//! |R|R|R|R|I|R|R|R|            Reserved                           |
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! ```
//! The I flag must be set; the reserved bits are sent as zero and ignored on receipt (as the
//! Linux kernel and Open vSwitch do), so only a missing I flag makes a header malformed.

use super::{be32, check_len, put, WireError};

/// Byte ranges of a VXLAN header.
pub mod field {
    use std::ops::Range;
    /// Flags: bit 3 (0x08) is the I flag ("the VNI is valid").
    pub const FLAGS: usize = 0;
    /// The 24-bit VNI and the reserved byte after it (read as one `u32`).
    pub const VNI: Range<usize> = 4..8;
}

/// The I flag: the VNI field is valid.
pub const FLAG_I: u8 = 0x08;

/// The IANA UDP port of VXLAN.
pub const UDP_PORT: u16 = 4789;

/// The largest VNI (24 bits).
pub const VNI_MAX: u32 = 0x00ff_ffff;

/// A VXLAN header and the inner frame behind it.
///
/// `new_checked` guarantees at least 8 bytes and the I flag set.
#[derive(Debug, Clone)]
pub struct Vxlan<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Vxlan<T> {
    /// Header length.
    pub const LEN: usize = 8;

    /// Wraps `buf` after checking its length and the I flag.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("VXLAN", buf.as_ref().len(), Self::LEN)?;
        let v = Vxlan { buf };
        if v.flags() & FLAG_I == 0 {
            return Err(WireError::Malformed {
                header: "VXLAN",
                why: "I flag clear (no valid VNI)",
            });
        }
        Ok(v)
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS]
    }

    /// The 24-bit VXLAN network identifier.
    pub fn vni(&self) -> u32 {
        be32(self.buf.as_ref(), field::VNI.start) >> 8
    }

    /// The inner Ethernet frame.
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[Self::LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Vxlan<T> {
    /// Wraps a buffer of at least [`Vxlan::LEN`] bytes to write a header into.
    pub fn new_unchecked(buf: T) -> Self {
        Vxlan { buf }
    }

    /// Writes a whole header: the I flag, `vni` (its low 24 bits), every reserved field zero.
    pub fn emit(&mut self, vni: u32) {
        let b = self.buf.as_mut();
        put(b, 0, &[FLAG_I, 0, 0, 0]);
        put(b, field::VNI.start, &((vni & VNI_MAX) << 8).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    /// VNI 0x123456 (1193046), inner frame "abcd".
    const HDR: &str = "08000000 12345600 61626364";

    #[test]
    fn parse_golden() {
        let b = hex(HDR);
        let v = Vxlan::new_checked(&b[..]).unwrap();
        assert_eq!(v.vni(), 0x12_3456);
        assert_eq!(v.flags(), FLAG_I);
        assert_eq!(v.payload(), b"abcd");
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 12];
        b[8..].copy_from_slice(b"abcd");
        // High bits beyond 24 are not VNI bits and must not leak into the reserved byte.
        Vxlan::new_unchecked(&mut b[..]).emit(0xff12_3456);
        assert_eq!(b, hex(HDR));
    }

    #[test]
    fn reserved_bits_are_ignored_on_receipt() {
        let b = hex("ff0000ff 000001ff");
        let v = Vxlan::new_checked(&b[..]).unwrap();
        assert_eq!(v.vni(), 1);
    }

    #[test]
    fn bad_headers_are_refused() {
        let b = hex(HDR);
        assert!(matches!(
            Vxlan::new_checked(&b[..7]),
            Err(WireError::Truncated {
                need: 8,
                have: 7,
                ..
            })
        ));
        let mut b = b;
        b[0] = 0;
        assert!(matches!(
            Vxlan::new_checked(&b[..]),
            Err(WireError::Malformed { .. })
        ));
    }
}

//! ICMPv6 (RFC 4443) and the neighbour discovery messages a switch matches on (RFC 4861):
//! neighbour solicitation (135) and advertisement (136) with their target address and
//! source/target link-layer address options.

use std::net::Ipv6Addr;

use super::{be16, check_len, mac, put, WireError};
use crate::checksum;

/// Neighbour solicitation.
pub const ND_NEIGHBOR_SOLICIT: u8 = 135;
/// Neighbour advertisement.
pub const ND_NEIGHBOR_ADVERT: u8 = 136;
/// Source link-layer address option.
pub const ND_OPT_SOURCE_LL: u8 = 1;
/// Target link-layer address option.
pub const ND_OPT_TARGET_LL: u8 = 2;

/// An ICMPv6 message.
#[derive(Debug, Clone)]
pub struct Icmpv6<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Icmpv6<T> {
    /// Length of type, code and checksum.
    pub const LEN: usize = 4;
    /// Length of a neighbour solicitation/advertisement before its options.
    pub const ND_LEN: usize = 24;

    /// Wraps `buf` after checking it holds type, code and checksum, and for a neighbour
    /// solicitation/advertisement (code 0) the 24 bytes up to the options.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("ICMPv6", buf.as_ref().len(), Self::LEN)?;
        let i = Icmpv6 { buf };
        if i.is_nd() {
            check_len("neighbour discovery", i.buf.as_ref().len(), Self::ND_LEN)?;
        }
        Ok(i)
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

    /// Whether this is a neighbour solicitation or advertisement (code 0).
    pub fn is_nd(&self) -> bool {
        matches!(self.ty(), ND_NEIGHBOR_SOLICIT | ND_NEIGHBOR_ADVERT) && self.code() == 0
    }

    /// The ND target address (for solicitations and advertisements).
    pub fn nd_target(&self) -> Option<Ipv6Addr> {
        if !self.is_nd() {
            return None;
        }
        let b = self.buf.as_ref().get(8..24)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Some(Ipv6Addr::from(a))
    }

    /// The ND options as `(type, bytes after the type and length)`; yields an error and
    /// stops at an option of length 0 or one cut off.
    pub fn nd_options(&self) -> NdOptions<'_> {
        let rest = if self.is_nd() {
            self.buf.as_ref().get(Self::ND_LEN..).unwrap_or(&[])
        } else {
            &[]
        };
        NdOptions { rest }
    }

    /// The first link-layer address option of `kind` ([`ND_OPT_SOURCE_LL`] or
    /// [`ND_OPT_TARGET_LL`]), as key extraction reads it.
    pub fn nd_ll_addr(&self, kind: u8) -> Option<[u8; 6]> {
        self.nd_options()
            .map_while(Result::ok)
            .find(|(t, b)| *t == kind && b.len() == 6)
            .map(|(_, b)| mac(b, 0))
    }

    /// Whether the checksum is right given the pseudo-header sum.
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::verify(self.buf.as_ref(), pseudo)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6<T> {
    /// Sets the type.
    pub fn set_ty(&mut self, t: u8) {
        self.buf.as_mut()[0] = t;
    }

    /// Sets the code.
    pub fn set_code(&mut self, c: u8) {
        self.buf.as_mut()[1] = c;
    }

    /// Sets the ND target; does nothing when the buffer is too short for one.
    pub fn set_nd_target(&mut self, a: Ipv6Addr) {
        if let Some(b) = self.buf.as_mut().get_mut(8..24) {
            b.copy_from_slice(&a.octets());
        }
    }

    /// Computes and stores the checksum with the pseudo-header sum.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        put(self.buf.as_mut(), 2, &[0, 0]);
        let c = !checksum::fold(checksum::sum(self.buf.as_ref(), pseudo));
        put(self.buf.as_mut(), 2, &c.to_be_bytes());
    }
}

/// Iterator over neighbour discovery options (see [`Icmpv6::nd_options`]).
#[derive(Debug, Clone)]
pub struct NdOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NdOptions<'a> {
    type Item = Result<(u8, &'a [u8]), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.rest;
        if r.is_empty() {
            return None;
        }
        let len = r.get(1).map_or(0, |&l| l as usize * 8);
        if len == 0 || len > r.len() {
            self.rest = &[];
            return Some(Err(if len == 0 {
                WireError::Malformed {
                    header: "neighbour discovery option",
                    why: "length 0",
                }
            } else {
                WireError::Truncated {
                    header: "neighbour discovery option",
                    need: len,
                    have: r.len(),
                }
            }));
        }
        self.rest = &r[len..];
        Some(Ok((r[0], &r[2..len])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    const NS: &str = "87 00 7a98 00000000 fe800000000000000000000000000001 01 01 020000000001";

    fn pseudo() -> u64 {
        checksum::pseudo_v6(
            0xfe80_0000_0000_0000_0000_0000_0000_0002,
            0xff02_0000_0000_0000_0000_0001_ff00_0001,
            58,
            32,
        )
    }

    #[test]
    fn parse_golden() {
        let b = hex(NS);
        let i = Icmpv6::new_checked(&b[..]).unwrap();
        assert_eq!((i.ty(), i.code()), (135, 0));
        assert_eq!(i.nd_target(), Some("fe80::1".parse().unwrap()));
        assert_eq!(i.nd_ll_addr(ND_OPT_SOURCE_LL), Some([2, 0, 0, 0, 0, 1]));
        assert_eq!(i.nd_ll_addr(ND_OPT_TARGET_LL), None);
        assert!(i.verify_checksum(pseudo()));
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 32];
        b[4..8].fill(0);
        b[24..].copy_from_slice(&hex("0101020000000001"));
        let mut i = Icmpv6 { buf: &mut b[..] };
        i.set_ty(135);
        i.set_code(0);
        i.set_nd_target("fe80::1".parse().unwrap());
        i.fill_checksum(pseudo());
        assert_eq!(b, hex(NS));
    }

    #[test]
    fn bad_options_are_reported() {
        let mut b = hex(NS);
        b[25] = 0;
        let i = Icmpv6::new_checked(&b[..]).unwrap();
        assert!(i.nd_options().next().unwrap().is_err());
        assert!(Icmpv6::new_checked(&b[..20]).is_err());
    }
}

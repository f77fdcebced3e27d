//! IPv4 header (RFC 791): version, IHL and options, fragment bits, checksum.

use std::net::Ipv4Addr;

use super::{be16, be32, check_len, put, WireError};
use crate::checksum;

/// Byte ranges of an IPv4 header.
pub mod field {
    use std::ops::Range;
    /// Version (high nibble) and header length in words (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP and ECN.
    pub const TOS: usize = 1;
    /// Total length.
    pub const LENGTH: Range<usize> = 2..4;
    /// Identification.
    pub const IDENT: Range<usize> = 4..6;
    /// Flags and fragment offset.
    pub const FLG_OFF: Range<usize> = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol of the payload.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Range<usize> = 10..12;
    /// Source address.
    pub const SRC: Range<usize> = 12..16;
    /// Destination address.
    pub const DST: Range<usize> = 16..20;
    /// Source and destination, adjacent.
    pub const ADDRS: Range<usize> = 12..20;
}

/// An IPv4 header and its payload.
///
/// `new_checked` guarantees: at least 20 bytes, version 4, `20 <= IHL*4 <= total length <=
/// buffer length`. Setters that change IHL or the total length can break that; the slice
/// accessors then return empty slices instead of panicking.
#[derive(Debug, Clone)]
pub struct Ipv4<T: AsRef<[u8]>> {
    buf: T,
}

/// Don't-fragment flag in the flags/offset word.
pub const DONT_FRAGMENT: u16 = 0x4000;
/// More-fragments flag in the flags/offset word.
pub const MORE_FRAGMENTS: u16 = 0x2000;

impl<T: AsRef<[u8]>> Ipv4<T> {
    /// Length of a header without options.
    pub const MIN_LEN: usize = 20;

    /// Wraps `buf` after checking lengths and the version.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        check_len("IPv4", b.len(), Self::MIN_LEN)?;
        let ip = Ipv4 { buf };
        if ip.version() != 4 {
            return Err(WireError::Malformed {
                header: "IPv4",
                why: "version is not 4",
            });
        }
        let ihl = ip.header_len();
        if ihl < Self::MIN_LEN {
            return Err(WireError::Malformed {
                header: "IPv4",
                why: "IHL below 5",
            });
        }
        check_len("IPv4", ip.buf.as_ref().len(), ihl)?;
        let tot = ip.total_len() as usize;
        if tot < ihl {
            return Err(WireError::Malformed {
                header: "IPv4",
                why: "total length shorter than the header",
            });
        }
        check_len("IPv4", ip.buf.as_ref().len(), tot)?;
        Ok(ip)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Version (4).
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        (self.b()[field::VER_IHL] & 0x0f) as usize * 4
    }

    /// Type of service byte.
    pub fn tos(&self) -> u8 {
        self.b()[field::TOS]
    }

    /// DSCP (upper 6 bits of TOS).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// ECN (lower 2 bits of TOS).
    pub fn ecn(&self) -> u8 {
        self.tos() & 3
    }

    /// Total length (header and payload).
    pub fn total_len(&self) -> u16 {
        be16(self.b(), field::LENGTH.start)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.b(), field::IDENT.start)
    }

    /// Flags and fragment offset word.
    pub fn frag_word(&self) -> u16 {
        be16(self.b(), field::FLG_OFF.start)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.frag_word() & DONT_FRAGMENT != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.frag_word() & MORE_FRAGMENTS != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.frag_word() & 0x1fff) << 3
    }

    /// Whether this is a fragment (first or later).
    pub fn is_fragment(&self) -> bool {
        self.frag_word() & 0x3fff != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }

    /// Header checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM.start)
    }

    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(self.b(), field::SRC.start))
    }

    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(self.b(), field::DST.start))
    }

    /// Option bytes (empty when IHL is 5).
    pub fn options(&self) -> &[u8] {
        self.b()
            .get(Self::MIN_LEN..self.header_len())
            .unwrap_or(&[])
    }

    /// The payload: from the end of the header to the total length (Ethernet padding cut).
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(self.header_len()..self.total_len() as usize)
            .unwrap_or(&[])
    }

    /// Whether the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        match self.b().get(..self.header_len()) {
            Some(h) => checksum::verify(h, 0),
            None => false,
        }
    }

    /// Partial sum of the pseudo-header for the payload (for TCP/UDP checksums).
    pub fn pseudo_sum(&self) -> u64 {
        checksum::pseudo_v4(
            be32(self.b(), field::SRC.start),
            be32(self.b(), field::DST.start),
            self.protocol(),
            self.payload().len() as u16,
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4<T> {
    fn m(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    /// Sets version 4 and the header length in bytes (a multiple of 4, 20..=60).
    pub fn set_version_and_header_len(&mut self, len: usize) {
        self.m()[field::VER_IHL] = 0x40 | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the type-of-service byte.
    pub fn set_tos(&mut self, tos: u8) {
        self.m()[field::TOS] = tos;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        put(self.m(), field::LENGTH.start, &len.to_be_bytes());
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, id: u16) {
        put(self.m(), field::IDENT.start, &id.to_be_bytes());
    }

    /// Sets the flags and fragment offset word.
    pub fn set_frag_word(&mut self, w: u16) {
        put(self.m(), field::FLG_OFF.start, &w.to_be_bytes());
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.m()[field::TTL] = ttl;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, p: u8) {
        self.m()[field::PROTOCOL] = p;
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: Ipv4Addr) {
        put(self.m(), field::SRC.start, &a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst(&mut self, a: Ipv4Addr) {
        put(self.m(), field::DST.start, &a.octets());
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        put(self.m(), field::CHECKSUM.start, &[0, 0]);
        let hl = self.header_len().min(self.buf.as_ref().len());
        let c = checksum::checksum(&self.buf.as_ref()[..hl]);
        put(self.m(), field::CHECKSUM.start, &c.to_be_bytes());
    }

    /// The payload, writable (empty when the lengths are inconsistent).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), self.total_len() as usize);
        self.m().get_mut(h..t).unwrap_or(&mut [])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    const HDR: &str = "4500002e 1234 4000 4011 1489 0a000001 0a000002";

    #[test]
    fn parse_golden() {
        let mut b = hex(HDR);
        b.extend_from_slice(&[0u8; 26]);
        let ip = Ipv4::new_checked(&b[..]).unwrap();
        assert_eq!(ip.header_len(), 20);
        assert_eq!(ip.total_len(), 46);
        assert_eq!(ip.ident(), 0x1234);
        assert!(ip.dont_frag() && !ip.more_frags() && !ip.is_fragment());
        assert_eq!((ip.ttl(), ip.protocol()), (64, 17));
        assert_eq!(ip.src(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(ip.dst(), Ipv4Addr::new(10, 0, 0, 2));
        assert!(ip.verify_checksum());
        assert_eq!(ip.payload().len(), 26);
        assert!(ip.options().is_empty());
    }

    #[test]
    fn construct_golden() {
        let mut b = [0xa5u8; 46];
        let mut ip = Ipv4 { buf: &mut b[..] };
        ip.set_version_and_header_len(20);
        ip.set_tos(0);
        ip.set_total_len(46);
        ip.set_ident(0x1234);
        ip.set_frag_word(DONT_FRAGMENT);
        ip.set_ttl(64);
        ip.set_protocol(17);
        ip.set_src(Ipv4Addr::new(10, 0, 0, 1));
        ip.set_dst(Ipv4Addr::new(10, 0, 0, 2));
        ip.fill_checksum();
        assert_eq!(&b[..20], &hex(HDR)[..]);
    }

    #[test]
    fn bad_headers_are_refused() {
        let mut b = hex(HDR);
        b.extend_from_slice(&[0u8; 26]);
        assert!(Ipv4::new_checked(&b[..40]).is_err()); // total length beyond the buffer
        let mut v = b.clone();
        v[0] = 0x44;
        assert!(Ipv4::new_checked(&v[..]).is_err());
        v[0] = 0x55;
        assert!(Ipv4::new_checked(&v[..]).is_err());
        v[0] = 0x4f; // 60-byte header in a 46-byte packet
        assert!(Ipv4::new_checked(&v[..]).is_err());
    }

    #[test]
    fn options_and_fragments() {
        let mut b = hex("46000020 0000 2003 4006 0000 0a000001 0a000002 01010100");
        b.extend_from_slice(&[0u8; 8]);
        let ip = Ipv4::new_checked(&b[..]).unwrap();
        assert_eq!(ip.options(), &[1, 1, 1, 0]);
        assert!(ip.more_frags() && ip.is_fragment());
        assert_eq!(ip.frag_offset(), 24);
        assert_eq!(ip.payload().len(), 8);
    }
}

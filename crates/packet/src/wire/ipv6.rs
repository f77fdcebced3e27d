//! IPv6 header (RFC 8200) and its extension headers: hop-by-hop options, routing,
//! fragment, destination options and authentication (AH).

use std::net::Ipv6Addr;

use super::{be16, be32, check_len, put, WireError};
use crate::checksum;
use crate::extract::{ipproto, MAX_IPV6_EXT};

/// Byte ranges of an IPv6 fixed header.
pub mod field {
    use std::ops::Range;
    /// Version, traffic class and flow label.
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    /// Payload length.
    pub const LENGTH: Range<usize> = 4..6;
    /// Next header.
    pub const NXT_HDR: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC: Range<usize> = 8..24;
    /// Destination address.
    pub const DST: Range<usize> = 24..40;
}

/// An IPv6 header and its payload.
///
/// `new_checked` guarantees at least 40 bytes, version 6 and `40 + payload length <= buffer
/// length` (a payload length of 0, a jumbogram, means "to the end of the buffer").
#[derive(Debug, Clone)]
pub struct Ipv6<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv6<T> {
    /// Length of the fixed header.
    pub const LEN: usize = 40;

    /// Wraps `buf` after checking lengths and the version.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("IPv6", buf.as_ref().len(), Self::LEN)?;
        let ip = Ipv6 { buf };
        if ip.version() != 6 {
            return Err(WireError::Malformed {
                header: "IPv6",
                why: "version is not 6",
            });
        }
        check_len(
            "IPv6",
            ip.buf.as_ref().len(),
            Self::LEN + ip.payload_len() as usize,
        )?;
        Ok(ip)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Version (6).
    pub fn version(&self) -> u8 {
        self.b()[field::VER_TC_FLOW.start] >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        (be32(self.b(), field::VER_TC_FLOW.start) >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        be32(self.b(), field::VER_TC_FLOW.start) & 0x000f_ffff
    }

    /// Payload length (extension headers included).
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), field::LENGTH.start)
    }

    /// Next header after the fixed header.
    pub fn next_header(&self) -> u8 {
        self.b()[field::NXT_HDR]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::SRC]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    pub fn dst(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::DST]);
        Ipv6Addr::from(a)
    }

    /// The payload (extension headers and upper layer), Ethernet padding cut.
    pub fn payload(&self) -> &[u8] {
        let end = match self.payload_len() {
            0 => self.b().len(),
            n => Self::LEN + n as usize,
        };
        self.b().get(Self::LEN..end).unwrap_or(&[])
    }

    /// The extension headers, in order.
    pub fn ext_headers(&self) -> ExtHeaders<'_> {
        ExtHeaders {
            rest: self.payload(),
            next: self.next_header(),
            count: 0,
            done: false,
        }
    }

    /// The upper-layer protocol and its offset within [`Ipv6::payload`], after walking the
    /// extension headers. Fails when one is cut off or the chain is longer than
    /// [`MAX_IPV6_EXT`].
    pub fn upper_layer(&self) -> Result<(u8, usize), WireError> {
        let mut off = 0;
        let mut proto = self.next_header();
        let mut it = self.ext_headers();
        for h in &mut it {
            let h = h?;
            off += h.bytes.len();
            proto = h.next_header;
            if h.fragment().is_some_and(|(o, _, _)| o != 0) {
                break;
            }
        }
        if it.count >= MAX_IPV6_EXT && is_ext(proto) {
            return Err(WireError::Malformed {
                header: "IPv6",
                why: "extension header chain too long",
            });
        }
        Ok((proto, off))
    }

    /// Partial sum of the pseudo-header for an upper-layer packet of `len` bytes.
    pub fn pseudo_sum(&self, proto: u8, len: u32) -> u64 {
        checksum::pseudo_v6(u128::from(self.src()), u128::from(self.dst()), proto, len)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6<T> {
    fn m(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    /// Sets version 6, the traffic class and the flow label.
    pub fn set_first_word(&mut self, tclass: u8, label: u32) {
        let w = (6u32 << 28) | ((tclass as u32) << 20) | (label & 0x000f_ffff);
        put(self.m(), field::VER_TC_FLOW.start, &w.to_be_bytes());
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        put(self.m(), field::LENGTH.start, &len.to_be_bytes());
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: u8) {
        self.m()[field::NXT_HDR] = nh;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        self.m()[field::HOP_LIMIT] = h;
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: Ipv6Addr) {
        put(self.m(), field::SRC.start, &a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst(&mut self, a: Ipv6Addr) {
        put(self.m(), field::DST.start, &a.octets());
    }
}

fn is_ext(p: u8) -> bool {
    matches!(
        p,
        ipproto::HOPOPTS | ipproto::ROUTING | ipproto::FRAGMENT | ipproto::AH | ipproto::DSTOPTS
    )
}

/// One extension header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6ExtHeader<'a> {
    /// Its own type (the previous header's next-header value).
    pub kind: u8,
    /// The header after it.
    pub next_header: u8,
    /// All its bytes.
    pub bytes: &'a [u8],
}

impl Ipv6ExtHeader<'_> {
    /// For a fragment header: offset in bytes, more-fragments flag, identification.
    pub fn fragment(&self) -> Option<(u16, bool, u32)> {
        if self.kind != ipproto::FRAGMENT || self.bytes.len() < 8 {
            return None;
        }
        let w = be16(self.bytes, 2);
        Some((w & 0xfff8, w & 1 != 0, be32(self.bytes, 4)))
    }
}

/// Iterator over extension headers (see [`Ipv6::ext_headers`]); yields an error and stops
/// when a header is cut off; stops after [`MAX_IPV6_EXT`] headers.
#[derive(Debug, Clone)]
pub struct ExtHeaders<'a> {
    rest: &'a [u8],
    next: u8,
    count: usize,
    done: bool,
}

impl<'a> Iterator for ExtHeaders<'a> {
    type Item = Result<Ipv6ExtHeader<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || !is_ext(self.next) || self.count >= MAX_IPV6_EXT {
            return None;
        }
        let r = self.rest;
        let len = match self.next {
            ipproto::FRAGMENT => Some(8),
            ipproto::AH => r.get(1).map(|&l| (l as usize + 2) * 4),
            _ => r.get(1).map(|&l| (l as usize + 1) * 8),
        };
        let Some(len) = len.filter(|&l| l <= r.len()) else {
            self.done = true;
            return Some(Err(WireError::Truncated {
                header: "IPv6 extension",
                need: len.unwrap_or(2),
                have: r.len(),
            }));
        };
        let h = Ipv6ExtHeader {
            kind: self.next,
            next_header: r[0],
            bytes: &r[..len],
        };
        self.rest = &r[len..];
        self.next = r[0];
        self.count += 1;
        Some(Ok(h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    const HDR: &str =
        "6b812345 0010 00 40 20010db8000000000000000000000001 20010db8000000000000000000000002";

    #[test]
    fn parse_golden_with_ext_headers() {
        let mut b = hex(HDR);
        b.extend_from_slice(&hex("2c00 0104 00000000")); // hop-by-hop, PadN
        b.extend_from_slice(&hex("11 00 0011 deadbeef")); // fragment: offset 16, M
        let ip = Ipv6::new_checked(&b[..]).unwrap();
        assert_eq!(ip.traffic_class(), 0xb8);
        assert_eq!(ip.flow_label(), 0x12345);
        assert_eq!(ip.payload_len(), 16);
        assert_eq!(ip.hop_limit(), 64);
        assert_eq!(ip.src(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.dst(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        let h: Vec<_> = ip.ext_headers().map(|h| h.unwrap()).collect();
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].kind, h[0].next_header), (0, 44));
        assert_eq!(h[1].fragment(), Some((16, true, 0xdead_beef)));
        assert_eq!(ip.upper_layer(), Ok((17, 16)));
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 40];
        let mut ip = Ipv6 { buf: &mut b[..] };
        ip.set_first_word(0xb8, 0x12345);
        ip.set_payload_len(16);
        ip.set_next_header(0);
        ip.set_hop_limit(64);
        ip.set_src("2001:db8::1".parse().unwrap());
        ip.set_dst("2001:db8::2".parse().unwrap());
        assert_eq!(b, hex(HDR));
    }

    #[test]
    fn cut_chains_are_errors() {
        let mut b = hex(HDR);
        b[5] = 4;
        b.extend_from_slice(&hex("2c01 0000")); // claims 16 bytes, has 4
        let ip = Ipv6::new_checked(&b[..]).unwrap();
        assert!(ip.upper_layer().is_err());
        assert!(Ipv6::new_checked(&b[..39]).is_err());
        b[5] = 100;
        assert!(Ipv6::new_checked(&b[..]).is_err());
    }
}

//! Ethernet II header and 802.1Q / 802.1ad VLAN tags.

use super::{be16, check_len, mac, put, WireError};
use crate::extract::ethertype;

/// Byte ranges of an Ethernet II header, and of a VLAN tag (after the addresses).
pub mod field {
    use std::ops::Range;
    /// Destination address.
    pub const DST: Range<usize> = 0..6;
    /// Source address.
    pub const SRC: Range<usize> = 6..12;
    /// Type (or a VLAN TPID when tagged).
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// In a VLAN tag (counted from the tag's TCI): tag control information.
    pub const TAG_TCI: Range<usize> = 0..2;
    /// In a VLAN tag: the type of what follows.
    pub const TAG_ETHERTYPE: Range<usize> = 2..4;
}

/// An Ethernet II header (14 bytes) and what follows it.
#[derive(Debug, Clone)]
pub struct Ethernet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ethernet<T> {
    /// Header length.
    pub const LEN: usize = 14;

    /// Wraps `buf` after checking it holds a whole header.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("Ethernet", buf.as_ref().len(), Self::LEN)?;
        Ok(Ethernet { buf })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 6] {
        mac(self.buf.as_ref(), field::DST.start)
    }

    /// Source address.
    pub fn src(&self) -> [u8; 6] {
        mac(self.buf.as_ref(), field::SRC.start)
    }

    /// The type field at offset 12 (a VLAN TPID when the frame is tagged).
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), field::ETHERTYPE.start)
    }

    /// Bytes after the 14-byte header (a VLAN tag first when tagged).
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[Self::LEN..]
    }

    /// The type after up to two VLAN tags and the offset of what it announces, as key
    /// extraction sees it. Fails when a tag is cut off.
    pub fn inner_ethertype(&self) -> Result<(u16, usize), WireError> {
        let mut ty = self.ethertype();
        let mut off = Self::LEN;
        for _ in 0..2 {
            if !ethertype::is_vlan(ty) {
                break;
            }
            let tag = VlanTag::new_checked(&self.buf.as_ref()[off..])?;
            ty = tag.ethertype();
            off += VlanTag::<&[u8]>::LEN;
        }
        Ok((ty, off))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ethernet<T> {
    /// Sets the destination address.
    pub fn set_dst(&mut self, a: [u8; 6]) {
        put(self.buf.as_mut(), field::DST.start, &a);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: [u8; 6]) {
        put(self.buf.as_mut(), field::SRC.start, &a);
    }

    /// Sets the type field.
    pub fn set_ethertype(&mut self, t: u16) {
        put(self.buf.as_mut(), field::ETHERTYPE.start, &t.to_be_bytes());
    }

    /// Bytes after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[Self::LEN..]
    }
}

/// A VLAN tag as it follows a TPID: TCI (2 bytes) and the inner type (2 bytes).
#[derive(Debug, Clone)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Length of the TCI and inner type.
    pub const LEN: usize = 4;

    /// Wraps `buf` after checking it holds a whole tag.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("VLAN tag", buf.as_ref().len(), Self::LEN)?;
        Ok(VlanTag { buf })
    }

    /// Tag control information.
    pub fn tci(&self) -> u16 {
        be16(self.buf.as_ref(), field::TAG_TCI.start)
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN id (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The type of what follows the tag.
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), field::TAG_ETHERTYPE.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the whole TCI.
    pub fn set_tci(&mut self, tci: u16) {
        put(self.buf.as_mut(), field::TAG_TCI.start, &tci.to_be_bytes());
    }

    /// Sets the VLAN id, keeping PCP and DEI.
    pub fn set_vid(&mut self, vid: u16) {
        self.set_tci((self.tci() & 0xf000) | (vid & 0x0fff));
    }

    /// Sets the priority, keeping DEI and VID.
    pub fn set_pcp(&mut self, pcp: u8) {
        self.set_tci((self.tci() & 0x1fff) | ((pcp as u16 & 7) << 13));
    }

    /// Sets the inner type.
    pub fn set_ethertype(&mut self, t: u16) {
        put(
            self.buf.as_mut(),
            field::TAG_ETHERTYPE.start,
            &t.to_be_bytes(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    const TAGGED: &str = "ffffffffffff 020000000001 8100 a064 0800";

    #[test]
    fn parse_golden() {
        let b = hex(TAGGED);
        let e = Ethernet::new_checked(&b[..]).unwrap();
        assert_eq!(e.dst(), [0xff; 6]);
        assert_eq!(e.src(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(e.ethertype(), 0x8100);
        assert_eq!(e.inner_ethertype(), Ok((0x0800, 18)));
        let t = VlanTag::new_checked(e.payload()).unwrap();
        assert_eq!(
            (t.pcp(), t.dei(), t.vid(), t.ethertype()),
            (5, false, 100, 0x0800)
        );
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 18];
        let mut e = Ethernet::new_checked(&mut b[..]).unwrap();
        e.set_dst([0xff; 6]);
        e.set_src([2, 0, 0, 0, 0, 1]);
        e.set_ethertype(0x8100);
        let mut t = VlanTag::new_checked(e.payload_mut()).unwrap();
        t.set_tci(0);
        t.set_vid(100);
        t.set_pcp(5);
        t.set_ethertype(0x0800);
        assert_eq!(b, hex(TAGGED));
    }

    #[test]
    fn short_buffers_are_refused() {
        assert_eq!(
            Ethernet::new_checked(&[0u8; 13][..]).unwrap_err(),
            WireError::Truncated {
                header: "Ethernet",
                need: 14,
                have: 13
            }
        );
        let b = hex("ffffffffffff 020000000001 8100 a0");
        let e = Ethernet::new_checked(&b[..]).unwrap();
        assert!(e.inner_ethertype().is_err());
    }
}

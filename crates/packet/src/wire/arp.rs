//! ARP for Ethernet and IPv4 (RFC 826): 28 bytes.

use std::net::Ipv4Addr;

use super::{be16, be32, check_len, mac, put, WireError};

/// An Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone)]
pub struct Arp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Arp<T> {
    /// Length of an Ethernet/IPv4 ARP packet.
    pub const LEN: usize = 28;

    /// Wraps `buf` after checking its length and that it is Ethernet/IPv4 ARP.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        check_len("ARP", b.len(), Self::LEN)?;
        if be16(b, 0) != 1 || be16(b, 2) != 0x0800 || b[4] != 6 || b[5] != 4 {
            return Err(WireError::Malformed {
                header: "ARP",
                why: "not Ethernet/IPv4 (htype 1, ptype 0x0800, hlen 6, plen 4)",
            });
        }
        Ok(Arp { buf })
    }

    /// Operation (1 request, 2 reply).
    pub fn op(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }

    /// Sender hardware address.
    pub fn sha(&self) -> [u8; 6] {
        mac(self.buf.as_ref(), 8)
    }

    /// Sender protocol address.
    pub fn spa(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(self.buf.as_ref(), 14))
    }

    /// Target hardware address.
    pub fn tha(&self) -> [u8; 6] {
        mac(self.buf.as_ref(), 18)
    }

    /// Target protocol address.
    pub fn tpa(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(self.buf.as_ref(), 24))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Arp<T> {
    /// Writes the fixed Ethernet/IPv4 header words (htype, ptype, hlen, plen) into `buf` and
    /// wraps it.
    pub fn init(mut buf: T) -> Result<Self, WireError> {
        check_len("ARP", buf.as_ref().len(), Self::LEN)?;
        put(buf.as_mut(), 0, &[0, 1, 0x08, 0x00, 6, 4]);
        Ok(Arp { buf })
    }

    /// Sets the operation.
    pub fn set_op(&mut self, op: u16) {
        put(self.buf.as_mut(), 6, &op.to_be_bytes());
    }

    /// Sets the sender hardware address.
    pub fn set_sha(&mut self, a: [u8; 6]) {
        put(self.buf.as_mut(), 8, &a);
    }

    /// Sets the sender protocol address.
    pub fn set_spa(&mut self, a: Ipv4Addr) {
        put(self.buf.as_mut(), 14, &a.octets());
    }

    /// Sets the target hardware address.
    pub fn set_tha(&mut self, a: [u8; 6]) {
        put(self.buf.as_mut(), 18, &a);
    }

    /// Sets the target protocol address.
    pub fn set_tpa(&mut self, a: Ipv4Addr) {
        put(self.buf.as_mut(), 24, &a.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    const REQ: &str = "0001 0800 06 04 0001 020000000001 0a000001 000000000000 0a000002";

    #[test]
    fn parse_golden() {
        let b = hex(REQ);
        let a = Arp::new_checked(&b[..]).unwrap();
        assert_eq!(a.op(), 1);
        assert_eq!(a.sha(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(a.spa(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(a.tha(), [0; 6]);
        assert_eq!(a.tpa(), Ipv4Addr::new(10, 0, 0, 2));
    }

    #[test]
    fn construct_golden() {
        let mut b = vec![0xa5u8; 28];
        let mut a = Arp::init(&mut b[..]).unwrap();
        a.set_op(1);
        a.set_sha([2, 0, 0, 0, 0, 1]);
        a.set_spa(Ipv4Addr::new(10, 0, 0, 1));
        a.set_tha([0; 6]);
        a.set_tpa(Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(b, hex(REQ));
    }

    #[test]
    fn other_hardware_is_refused() {
        let mut b = hex(REQ);
        b[1] = 6;
        assert!(matches!(
            Arp::new_checked(&b[..]),
            Err(WireError::Malformed { .. })
        ));
        assert!(Arp::new_checked(&b[..27]).is_err());
    }
}

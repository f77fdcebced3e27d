//! Geneve header (RFC 8926): eight fixed bytes after the outer UDP header (destination port
//! 6081), then up to 252 bytes of options, then the inner frame.
//!
//! ```text
//!  0                   1                   2                   3
//! |Ver|  Opt Len  |O|C|    Rsvd.  |          Protocol Type        |
//! |        Virtual Network Identifier (VNI)       |    Reserved   |
//! ~                    Variable-Length Options                    ~
//! ```
//! Each option is a TLV: a 16-bit class, an 8-bit type (its top bit is "critical"), three
//! reserved bits and a 5-bit length of the data in 4-byte words, then the data.
//!
//! `new_checked` refuses a version other than 0 (RFC 8926 §3.4: such packets are dropped), an
//! options area that runs past the buffer, and an option whose length runs past the options
//! area, so that [`Geneve::options`] and [`Geneve::payload`] cannot fail afterwards.

use super::{be16, be32, check_len, put, WireError};

/// Byte ranges of a Geneve header.
pub mod field {
    use std::ops::Range;
    /// Version (top 2 bits) and options length in 4-byte words (low 6 bits).
    pub const VER_OPT_LEN: usize = 0;
    /// The O (control packet) and C (critical options present) flags.
    pub const FLAGS: usize = 1;
    /// The inner protocol's EtherType (0x6558: Ethernet).
    pub const PROTOCOL: Range<usize> = 2..4;
    /// The 24-bit VNI and the reserved byte after it (read as one `u32`).
    pub const VNI: Range<usize> = 4..8;
    /// Where the options start.
    pub const OPTIONS: usize = 8;

    /// Byte ranges of one option, from the option's start.
    pub mod option {
        use std::ops::Range;
        /// Option class.
        pub const CLASS: Range<usize> = 0..2;
        /// Option type; its top bit is the critical bit.
        pub const TYPE: usize = 2;
        /// Three reserved bits and the data length in 4-byte words (low 5 bits).
        pub const LEN: usize = 3;
        /// Where the option's data start.
        pub const DATA: usize = 4;
    }
}

/// The O flag: a control packet, not to be forwarded to tenants.
pub const FLAG_O: u8 = 0x80;
/// The C flag: at least one critical option is present.
pub const FLAG_C: u8 = 0x40;
/// The critical bit of an option's type.
pub const OPTION_CRITICAL: u8 = 0x80;
/// The protocol type of an inner Ethernet frame (Transparent Ethernet Bridging).
pub const PROTO_ETHERNET: u16 = 0x6558;
/// The IANA UDP port of Geneve.
pub const UDP_PORT: u16 = 6081;
/// The longest options area: 63 words.
pub const OPTIONS_MAX: usize = 63 * 4;

/// A Geneve header, its options and the inner frame behind them.
#[derive(Debug, Clone)]
pub struct Geneve<T: AsRef<[u8]>> {
    buf: T,
}

/// One Geneve option, borrowed from the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneveOption<'a> {
    /// Option class.
    pub class: u16,
    /// Option type, with its critical bit.
    pub kind: u8,
    /// The option's data (a multiple of 4 bytes).
    pub data: &'a [u8],
}

impl GeneveOption<'_> {
    /// Whether a receiver that does not know this option must drop the packet.
    pub fn critical(&self) -> bool {
        self.kind & OPTION_CRITICAL != 0
    }
}

impl<T: AsRef<[u8]>> Geneve<T> {
    /// Length of the fixed header.
    pub const LEN: usize = 8;

    /// Wraps `buf` after checking the version, the options area and every option's length.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        check_len("Geneve", buf.as_ref().len(), Self::LEN)?;
        let g = Geneve { buf };
        if g.version() != 0 {
            return Err(WireError::Malformed {
                header: "Geneve",
                why: "version is not 0",
            });
        }
        check_len("Geneve", g.buf.as_ref().len(), g.header_len())?;
        let mut rest = g.options_area();
        while !rest.is_empty() {
            // The area and every option are whole words, so only an option's data can overrun.
            match split_option(rest) {
                Some((_, tail)) => rest = tail,
                None => {
                    return Err(WireError::Malformed {
                        header: "Geneve",
                        why: "option longer than the options area",
                    })
                }
            }
        }
        Ok(g)
    }

    /// The version (0 is the only one defined).
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[field::VER_OPT_LEN] >> 6
    }

    /// The options area's length in bytes.
    pub fn options_len(&self) -> usize {
        usize::from(self.buf.as_ref()[field::VER_OPT_LEN] & 0x3f) * 4
    }

    /// The whole header's length: the fixed part and the options.
    pub fn header_len(&self) -> usize {
        Self::LEN + self.options_len()
    }

    /// The O and C flags (with the reserved bits as received).
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS]
    }

    /// The inner protocol's EtherType.
    pub fn protocol(&self) -> u16 {
        be16(self.buf.as_ref(), field::PROTOCOL.start)
    }

    /// The 24-bit virtual network identifier.
    pub fn vni(&self) -> u32 {
        be32(self.buf.as_ref(), field::VNI.start) >> 8
    }

    /// The raw options area (every option header and its data, as received).
    pub fn options_area(&self) -> &[u8] {
        &self.buf.as_ref()[Self::LEN..self.header_len()]
    }

    /// The options, in the order they were sent.
    pub fn options(&self) -> impl Iterator<Item = GeneveOption<'_>> {
        walk_options(self.options_area())
    }

    /// The inner frame.
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Geneve<T> {
    /// Wraps a buffer of at least `8 + options.len()` bytes to write a header into.
    pub fn new_unchecked(buf: T) -> Self {
        Geneve { buf }
    }

    /// Writes a whole header for an inner Ethernet frame: version 0, `vni` (its low 24 bits),
    /// and `options` copied as given (already TLV-encoded, a multiple of 4 bytes of at most
    /// [`OPTIONS_MAX`]; the C flag is set when one of them is critical). Returns the header's
    /// length.
    pub fn emit(&mut self, vni: u32, options: &[u8]) -> usize {
        debug_assert!(options.len().is_multiple_of(4) && options.len() <= OPTIONS_MAX);
        let critical = walk_options(options).any(|o| o.critical());
        let b = self.buf.as_mut();
        b[field::VER_OPT_LEN] = (options.len() / 4) as u8;
        b[field::FLAGS] = if critical { FLAG_C } else { 0 };
        put(b, field::PROTOCOL.start, &PROTO_ETHERNET.to_be_bytes());
        put(
            b,
            field::VNI.start,
            &((vni & 0x00ff_ffff) << 8).to_be_bytes(),
        );
        put(b, field::OPTIONS, options);
        Self::LEN + options.len()
    }
}

/// The options of a TLV-encoded area in order; stops at the first one that overruns it (the
/// checked view has refused those already).
pub fn walk_options(area: &[u8]) -> impl Iterator<Item = GeneveOption<'_>> {
    let mut rest = area;
    std::iter::from_fn(move || {
        let (o, tail) = split_option(rest)?;
        rest = tail;
        Some(o)
    })
}

/// The first option of `area` and what follows it; `None` when `area` is empty or the option
/// runs past its end.
fn split_option(area: &[u8]) -> Option<(GeneveOption<'_>, &[u8])> {
    let len_byte = *area.get(field::option::LEN)?;
    let end = field::option::DATA + option_data_len(len_byte);
    let data = area.get(field::option::DATA..end)?;
    let o = GeneveOption {
        class: be16(area, field::option::CLASS.start),
        kind: area[field::option::TYPE],
        data,
    };
    Some((o, &area[end..]))
}

/// An option's data length in bytes, from its length byte.
fn option_data_len(len_byte: u8) -> usize {
    usize::from(len_byte & 0x1f) * 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_util::hex;

    /// VNI 42, C flag, one critical option (class 0x0102, type 0x80|3, 8 bytes of data) and
    /// one plain option (class 0xffff, type 1, no data), inner frame "ab".
    const HDR: &str = "04 40 6558 00002a00  0102 83 02 1122334455667788  ffff 01 00  6162";

    #[test]
    fn parse_golden() {
        let b = hex(HDR);
        let g = Geneve::new_checked(&b[..]).unwrap();
        assert_eq!(g.version(), 0);
        assert_eq!(g.options_len(), 16);
        assert_eq!(g.header_len(), 24);
        assert_eq!(g.flags(), FLAG_C);
        assert_eq!(g.protocol(), PROTO_ETHERNET);
        assert_eq!(g.vni(), 42);
        let opts: Vec<_> = g.options().collect();
        assert_eq!(opts.len(), 2);
        assert_eq!(
            (opts[0].class, opts[0].kind, opts[0].critical()),
            (0x0102, 0x83, true)
        );
        assert_eq!(opts[0].data, &hex("1122334455667788")[..]);
        assert_eq!(
            (opts[1].class, opts[1].kind, opts[1].data),
            (0xffff, 1, &[][..])
        );
        assert!(!opts[1].critical());
        assert_eq!(g.payload(), b"ab");
    }

    #[test]
    fn construct_golden() {
        let want = hex(HDR);
        let mut b = vec![0xa5u8; want.len()];
        b[24..].copy_from_slice(b"ab");
        let n = Geneve::new_unchecked(&mut b[..]).emit(0x7f00_002a, &want[8..24]);
        assert_eq!(n, 24);
        assert_eq!(b, want);
    }

    #[test]
    fn no_options_no_critical_flag() {
        let mut b = [0u8; 8];
        assert_eq!(Geneve::new_unchecked(&mut b[..]).emit(1, &[]), 8);
        assert_eq!(b, [0, 0, 0x65, 0x58, 0, 0, 1, 0]);
    }

    #[test]
    fn bad_headers_are_refused() {
        let b = hex(HDR);
        // Shorter than the fixed header, and shorter than the options it announces.
        assert!(Geneve::new_checked(&b[..7]).is_err());
        assert!(Geneve::new_checked(&b[..23]).is_err());
        // Version 1.
        let mut v = b.clone();
        v[0] |= 0x40;
        assert!(Geneve::new_checked(&v[..]).is_err());
        // The first option claims 31 words: longer than the 16-byte options area.
        let mut v = b.clone();
        v[11] = 0x1f;
        assert_eq!(
            Geneve::new_checked(&v[..]).unwrap_err(),
            WireError::Malformed {
                header: "Geneve",
                why: "option longer than the options area"
            }
        );
        // An options area of 4 bytes that ends inside an option of 8.
        let v = hex("01006558 00000100 0102 8301");
        assert!(Geneve::new_checked(&v[..]).is_err());
    }

    proptest::proptest! {
        /// Any bytes: the checked view either refuses them or walks every option inside the
        /// announced area, and the options and the payload tile the buffer.
        #[test]
        fn any_bytes_parse_or_refuse(b in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            if let Ok(g) = Geneve::new_checked(&b[..]) {
                let walked: usize = g.options().map(|o| 4 + o.data.len()).sum();
                proptest::prop_assert_eq!(walked, g.options_len());
                proptest::prop_assert_eq!(g.header_len() + g.payload().len(), b.len());
            }
        }

        /// Options emitted are read back in order, with the C flag set exactly when one is
        /// critical.
        #[test]
        fn emit_then_parse(vni in 0u32..=0xff_ffff,
                           opts in proptest::collection::vec((proptest::num::u16::ANY, proptest::num::u8::ANY, 0usize..4), 0..8)) {
            let mut area = Vec::new();
            for (i, (class, kind, words)) in opts.iter().enumerate() {
                area.extend_from_slice(&class.to_be_bytes());
                area.extend_from_slice(&[*kind, *words as u8]);
                area.extend(std::iter::repeat_n(i as u8, words * 4));
            }
            let mut b = vec![0u8; Geneve::<&[u8]>::LEN + area.len()];
            Geneve::new_unchecked(&mut b[..]).emit(vni, &area);
            let g = Geneve::new_checked(&b[..]).unwrap();
            proptest::prop_assert_eq!(g.vni(), vni);
            let back: Vec<_> = g.options().map(|o| (o.class, o.kind, o.data.len() / 4)).collect();
            proptest::prop_assert_eq!(back, opts.clone());
            let critical = opts.iter().any(|o| o.1 & OPTION_CRITICAL != 0);
            proptest::prop_assert_eq!(g.flags() & FLAG_C != 0, critical);
        }
    }
}

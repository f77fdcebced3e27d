//! Zero-copy header views in the smoltcp style: `Header<T: AsRef<[u8]>>` wraps a buffer,
//! `new_checked` validates its length once, and then no accessor can panic. Setters need
//! `T: AsMut<[u8]>`.
//!
//! Each header's byte ranges are named once, in its `field` module (`ipv4::field::CHECKSUM`
//! is `10..12`), and the readers of big-endian numbers at an offset ([`be16`], [`be32`],
//! [`be128`], [`get_be16`]) are here: the views, the per-packet parse
//! ([`mod@crate::extract`]), the rewrites and the ports' virtio-net and checksum paths all
//! read headers through them, so an offset is written in one place.
//!
//! For the crate's tests: `test_util` (spaced hex into bytes, the golden UDP frame the
//! extraction, rewrite and builder tests share) and `crosscheck.rs` (the views against the
//! builder).

pub mod arp;
pub mod ethernet;
pub mod geneve;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod vxlan;

pub use arp::Arp;
pub use ethernet::{Ethernet, VlanTag};
pub use geneve::{Geneve, GeneveOption};
pub use icmpv4::Icmpv4;
pub use icmpv6::Icmpv6;
pub use ipv4::Ipv4;
pub use ipv6::{Ipv6, Ipv6ExtHeader};
pub use sctp::Sctp;
pub use tcp::Tcp;
pub use udp::Udp;
pub use vxlan::Vxlan;

use std::fmt;

/// Why a buffer cannot be viewed as a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer is shorter than the header.
    Truncated {
        /// The header kind.
        header: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes there.
        have: usize,
    },
    /// A field holds an impossible value.
    Malformed {
        /// The header kind.
        header: &'static str,
        /// What is wrong.
        why: &'static str,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated { header, need, have } => {
                write!(
                    f,
                    "{header} header truncated: need {need} bytes, have {have}"
                )
            }
            WireError::Malformed { header, why } => write!(f, "malformed {header} header: {why}"),
        }
    }
}

impl std::error::Error for WireError {}

pub(crate) fn check_len(header: &'static str, have: usize, need: usize) -> Result<(), WireError> {
    if have < need {
        Err(WireError::Truncated { header, need, have })
    } else {
        Ok(())
    }
}

/// Reads a big-endian `u16` at `i`. Panics when `b` is shorter than `i + 2`: callers have
/// checked the length (or use [`get_be16`]).
#[inline(always)]
pub fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

/// Reads a big-endian `u16` at `i`, `None` when `b` is too short.
#[inline(always)]
pub fn get_be16(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        b.get(i..i.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Reads a big-endian `u32` at `i` (callers have checked the length).
#[inline(always)]
pub fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Reads a big-endian `u128` at `i` (an IPv6 address; callers have checked the length).
#[inline(always)]
pub fn be128(b: &[u8], i: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[i..i + 16]);
    u128::from_be_bytes(a)
}

/// A header's field moved to where the header starts in a larger buffer: `at(l3, CHECKSUM)`.
#[inline(always)]
pub const fn at(base: usize, f: std::ops::Range<usize>) -> std::ops::Range<usize> {
    base + f.start..base + f.end
}

/// Writes `v` big-endian at `i` (callers have checked the length).
#[inline(always)]
pub(crate) fn put(b: &mut [u8], i: usize, v: &[u8]) {
    b[i..i + v.len()].copy_from_slice(v);
}

/// Six bytes at `i` as a MAC address.
#[inline(always)]
pub(crate) fn mac(b: &[u8], i: usize) -> [u8; 6] {
    [b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5]]
}

#[cfg(test)]
pub(crate) mod test_util {
    /// Parses spaced hex into bytes.
    pub fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// Eth / IPv4 10.0.0.1 -> 10.0.0.2 / UDP 1234 -> 80, 60 bytes: the golden frame of the
    /// extraction and rewrite tests.
    pub const UDP4: &str = "020000000002 020000000001 0800
    4500002e 00000000 401166bd 0a000001 0a000002
    04d20050 001ae695 000000000000000000000000000000000000";
}

#[cfg(test)]
mod crosscheck;

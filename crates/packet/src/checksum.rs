//! The internet checksum (RFC 1071), its incremental update (RFC 1624, equation 3), the
//! IPv4/IPv6 pseudo-headers that TCP, UDP and ICMPv6 checksums cover, and CRC32c for SCTP.
//!
//! Sums are carried as `u64` "partial sums" (ones'-complement sums not yet folded to 16
//! bits), so pieces can be added with [`add`] and folded once with [`fold`]. A checksum field
//! holds `!fold(sum)`; a received header verifies when the sum over it, checksum included,
//! folds to `0xffff` (see [`verify`]).

/// Ones'-complement partial sum of `data` read as big-endian 16-bit words (an odd last byte
/// is padded with a zero byte), added to `initial`.
///
/// Reads 32-bit little-endian words into four 64-bit accumulators, 16 bytes a step: the adds
/// chain no carries (an accumulator takes 2^32 words before it could overflow) and the four
/// run side by side. Since 2^16 ≡ 1 (mod 2^16 - 1), 32-bit words fold like their 16-bit
/// halves, and a sum of little-endian words is the big-endian sum with its bytes swapped
/// (RFC 1071, "byte order independence"): the result is folded and swapped back once.
#[inline]
pub fn sum(data: &[u8], initial: u64) -> u64 {
    #[inline(always)]
    fn le32(b: &[u8]) -> u64 {
        u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    let mut acc = [0u64; 4];
    let mut chunks = data.chunks_exact(16);
    for c in &mut chunks {
        acc[0] += le32(&c[0..4]);
        acc[1] += le32(&c[4..8]);
        acc[2] += le32(&c[8..12]);
        acc[3] += le32(&c[12..16]);
    }
    let rest = chunks.remainder();
    let mut words = rest.chunks_exact(4);
    for (i, w) in (&mut words).enumerate() {
        acc[i] += le32(w);
    }
    // The last 0-3 bytes as the low end of one little-endian word, built from bytes (a copy
    // into a zeroed array called memcpy and stalled the load that followed it).
    let tail = words.remainder();
    let mut t = 0u64;
    for (i, b) in tail.iter().enumerate() {
        t |= u64::from(*b) << (8 * i);
    }
    let total = acc[0] + acc[1] + acc[2] + acc[3] + t;
    add(initial, u64::from(fold(total).swap_bytes()))
}

/// Adds two partial sums with end-around carry.
#[inline(always)]
pub fn add(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + carry as u64
}

/// Folds a partial sum to 16 bits (with end-around carries), not yet complemented.
#[inline(always)]
pub fn fold(sum: u64) -> u16 {
    let s = (sum & 0xffff_ffff) + (sum >> 32);
    let s = (s & 0xffff_ffff) + (s >> 32);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// Folds a 32-bit accumulator of 16-bit words to 16 bits, not yet complemented: two steps
/// where [`fold`] takes five, for per-packet updates that add a few words (at most 65,537 of
/// them fit a `u32`).
#[inline(always)]
pub fn fold32(acc: u32) -> u16 {
    let s = (acc & 0xffff) + (acc >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// The checksum to store for `data` (with its checksum field zeroed): `!fold(sum(data))`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data, 0))
}

/// Whether `data`, checksum field included, carries a correct internet checksum.
#[inline]
pub fn verify(data: &[u8], initial: u64) -> bool {
    fold(sum(data, initial)) == 0xffff
}

/// Partial sum of the IPv4 pseudo-header (source, destination, zero, protocol, L4 length).
#[inline(always)]
pub fn pseudo_v4(src: u32, dst: u32, proto: u8, l4_len: u16) -> u64 {
    src as u64 + dst as u64 + proto as u64 + l4_len as u64
}

/// Partial sum of the IPv6 pseudo-header (source, destination, upper-layer length, next
/// header).
#[inline(always)]
pub fn pseudo_v6(src: u128, dst: u128, proto: u8, l4_len: u32) -> u64 {
    let mut acc = proto as u64 + l4_len as u64;
    for a in [src, dst] {
        acc = add(acc, (a >> 64) as u64);
        acc = add(acc, a as u64);
    }
    acc
}

/// RFC 1624 equation 3: the new checksum after one 16-bit word of the covered data changes
/// from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
#[inline(always)]
pub fn update16(csum: u16, old: u16, new: u16) -> u16 {
    let s = (!csum) as u64 + (!old) as u64 + new as u64;
    !fold(s)
}

/// [`update16`] for a 32-bit value (an IPv4 address) that changed in the covered data.
#[inline(always)]
pub fn update32(csum: u16, old: u32, new: u32) -> u16 {
    let s = (!csum) as u64 + (!old) as u64 + new as u64;
    !fold(s)
}

/// [`update16`] for a 128-bit value (an IPv6 address) that changed in the covered data.
#[inline(always)]
pub fn update128(csum: u16, old: u128, new: u128) -> u16 {
    let mut s = (!csum) as u64;
    for (o, n) in [
        ((old >> 64) as u64, (new >> 64) as u64),
        (old as u64, new as u64),
    ] {
        s = add(s, !o);
        s = add(s, n);
    }
    !fold(s)
}

const fn crc32c_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC32C: [u32; 256] = crc32c_table();

/// CRC32c (Castagnoli), as SCTP uses it. The SCTP checksum field holds
/// `crc32c(packet with checksum zeroed).to_le_bytes()`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_extend(0, data)
}

/// Continues a CRC32c: `crc32c_extend(crc32c(a), b) == crc32c(a ++ b)`.
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = CRC32C[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reference: 16-bit word loop, straight from RFC 1071.
    fn reference(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from_be_bytes([c[0], 0])
            };
            s += w as u32;
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    /// Ones'-complement equality: 0x0000 and 0xffff are both zero.
    fn same(a: u16, b: u16) -> bool {
        a == b || (a | b == 0xffff && a & b == 0)
    }

    #[test]
    fn ipv4_header_golden() {
        // The example header from RFC 1071 style tests: checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert!(verify(&h, 0));
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c_extend(crc32c(b"1234"), b"56789"), 0xe306_9283);
    }

    #[test]
    fn rfc1071_example_and_the_short_fold() {
        // RFC 1071 section 3: these bytes sum to 0xddf2, checksum 0x220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
        assert_eq!(checksum(&data), 0x220d);
        let words: u32 = data
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        assert_eq!(fold32(words), 0xddf2);
        // An odd last byte is padded with zero.
        assert_eq!(fold(sum(&[0x12, 0x34, 0x56], 0)), 0x1234 + 0x5600);
    }

    proptest! {
        #[test]
        fn the_short_fold_agrees_with_the_long_one(acc in any::<u32>()) {
            prop_assert!(same(fold32(acc), fold(u64::from(acc))));
        }

        #[test]
        fn fast_sum_equals_reference(data in proptest::collection::vec(any::<u8>(), 0..1600)) {
            prop_assert_eq!(checksum(&data), reference(&data));
        }

        #[test]
        fn split_sums_add_up(data in proptest::collection::vec(any::<u8>(), 0..200), at in 0usize..100) {
            let at = (at * 2).min(data.len() & !1);
            let whole = fold(sum(&data, 0));
            let parts = fold(sum(&data[at..], sum(&data[..at], 0)));
            prop_assert!(same(!whole, !parts));
        }

        #[test]
        fn update16_equals_recompute(mut data in proptest::collection::vec(any::<u8>(), 2..64),
                                     idx in 0usize..32, new in any::<u16>()) {
            let i = (idx * 2) % (data.len() & !1);
            let c = checksum(&data);
            let old = u16::from_be_bytes([data[i], data[i + 1]]);
            data[i..i + 2].copy_from_slice(&new.to_be_bytes());
            prop_assert!(same(update16(c, old, new), checksum(&data)));
        }

        #[test]
        fn update32_equals_recompute(mut data in proptest::collection::vec(any::<u8>(), 4..64),
                                     idx in 0usize..16, new in any::<u32>()) {
            let i = (idx * 2) % ((data.len() - 2) & !1);
            let c = checksum(&data);
            let old = u32::from_be_bytes(data[i..i + 4].try_into().unwrap());
            data[i..i + 4].copy_from_slice(&new.to_be_bytes());
            prop_assert!(same(update32(c, old, new), checksum(&data)));
        }

        #[test]
        fn update128_equals_recompute(mut data in proptest::collection::vec(any::<u8>(), 16..80),
                                      idx in 0usize..40, new in any::<u128>()) {
            let i = (idx * 2) % ((data.len() - 14) & !1);
            let c = checksum(&data);
            let old = u128::from_be_bytes(data[i..i + 16].try_into().unwrap());
            data[i..i + 16].copy_from_slice(&new.to_be_bytes());
            prop_assert!(same(update128(c, old, new), checksum(&data)));
        }

        #[test]
        fn pseudo_v6_matches_bytes(src in any::<u128>(), dst in any::<u128>(), proto in any::<u8>(), len in any::<u32>()) {
            let mut b = Vec::new();
            b.extend_from_slice(&src.to_be_bytes());
            b.extend_from_slice(&dst.to_be_bytes());
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, proto]);
            prop_assert_eq!(fold(pseudo_v6(src, dst, proto, len)), fold(sum(&b, 0)));
        }

        #[test]
        fn pseudo_v4_matches_bytes(src in any::<u32>(), dst in any::<u32>(), proto in any::<u8>(), len in any::<u16>()) {
            let mut b = Vec::new();
            b.extend_from_slice(&src.to_be_bytes());
            b.extend_from_slice(&dst.to_be_bytes());
            b.extend_from_slice(&[0, proto]);
            b.extend_from_slice(&len.to_be_bytes());
            prop_assert_eq!(fold(pseudo_v4(src, dst, proto, len)), fold(sum(&b, 0)));
        }
    }
}

//! Internet checksum (RFC 1071) arithmetic, the little this crate needs: building template
//! frames and updating checksums incrementally (RFC 1624) in the `null` source.

/// One's-complement sum of `bytes` as big-endian 16-bit words (a trailing odd byte is padded
/// with zero), not yet folded.
pub(crate) fn sum(bytes: &[u8]) -> u32 {
    let mut acc = 0u32;
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// Folds a 32-bit one's-complement accumulator to 16 bits.
#[inline(always)]
pub(crate) fn fold(mut acc: u32) -> u16 {
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// The checksum field value for data whose sum (with the field zeroed) is `acc`.
pub(crate) fn finish(acc: u32) -> u16 {
    !fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The example of RFC 1071 section 3: sum 0xddf2, checksum 0x220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data)), 0xddf2);
        assert_eq!(finish(sum(&data)), 0x220d);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }
}

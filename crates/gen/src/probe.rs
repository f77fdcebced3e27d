//! The probe: 18 bytes at the very end of every generated frame, inside the L4 payload.
//!
//! ```text
//! offset  0      4                 8          12                 18
//!         | sig  | stream:8 flow:24 | sequence | send time (48-bit) |
//! ```
//!
//! - `sig` is [`SIGNATURE`]; frames without it are counted as foreign traffic;
//! - `stream` is the sending thread (sequence numbers count per stream), `flow` the flow
//!   index of the packet (per-flow counters);
//! - `sequence` counts per stream from 0 (32 bits; the analyzer extends it to 64);
//! - `send time` is the low 48 bits of the sender's time-stamp counter when the batch was
//!   built (wraps after ~26 hours at 3 GHz; differences are taken modulo 2^48).
//!
//! At the end of the frame, the analyzer finds it without parsing any header, whatever the
//! protocol, VLAN tags or encapsulation in front. All fields are big endian.

/// Bytes a probe takes.
pub const PROBE_LEN: usize = 18;
/// The signature, "HyGn".
pub const SIGNATURE: u32 = 0x4879_476e;
/// Mask of the 48-bit send time.
pub const TIME_MASK: u64 = (1 << 48) - 1;
/// Largest flow index a probe can carry, plus one.
pub const MAX_FLOWS: u32 = 1 << 24;

/// A decoded probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Sending stream (thread).
    pub stream: u8,
    /// Flow index (below [`MAX_FLOWS`]).
    pub flow: u32,
    /// Sequence number within the stream.
    pub seq: u32,
    /// Low 48 bits of the sender's time-stamp counter.
    pub time: u64,
}

impl Probe {
    /// Writes the probe into `out`.
    #[inline(always)]
    pub fn write(&self, out: &mut [u8; PROBE_LEN]) {
        out[0..4].copy_from_slice(&SIGNATURE.to_be_bytes());
        out[4..8].copy_from_slice(&self.tag().to_be_bytes());
        out[8..12].copy_from_slice(&self.seq.to_be_bytes());
        out[12..18].copy_from_slice(&(self.time & TIME_MASK).to_be_bytes()[2..8]);
    }

    /// Stream and flow as the second word.
    #[inline(always)]
    pub fn tag(&self) -> u32 {
        (u32::from(self.stream) << 24) | (self.flow & (MAX_FLOWS - 1))
    }

    /// The probe at the end of `frame`, when the frame carries one.
    #[inline(always)]
    pub fn read(frame: &[u8]) -> Option<Probe> {
        let at = frame.len().checked_sub(PROBE_LEN)?;
        let p: &[u8; PROBE_LEN] = frame[at..].try_into().ok()?;
        if u32::from_be_bytes([p[0], p[1], p[2], p[3]]) != SIGNATURE {
            return None;
        }
        let tag = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
        let seq = u32::from_be_bytes([p[8], p[9], p[10], p[11]]);
        let time = u64::from_be_bytes([0, 0, p[12], p[13], p[14], p[15], p[16], p[17]]);
        Some(Probe {
            stream: (tag >> 24) as u8,
            flow: tag & (MAX_FLOWS - 1),
            seq,
            time,
        })
    }

    /// The ones'-complement partial sum of the probe's bytes read as big-endian 16-bit words
    /// from its first byte, computed from the fields (for incremental checksums).
    #[inline(always)]
    pub fn sum(&self) -> u64 {
        let t = self.time & TIME_MASK;
        // 2^16 ≡ 1 (mod 2^16 - 1): a 32-bit value sums like its two 16-bit words.
        u64::from(SIGNATURE)
            + u64::from(self.tag())
            + u64::from(self.seq)
            + (t >> 32)
            + (t & 0xffff_ffff)
    }
}

impl Probe {
    /// [`Probe::sum`] as 16-bit words, below 2^19 (so a 32-bit fold suffices).
    #[inline(always)]
    pub fn sum_small(&self) -> u64 {
        let w = |v: u32| u64::from(v >> 16) + u64::from(v & 0xffff);
        let t = self.time & TIME_MASK;
        w(SIGNATURE) + w(self.tag()) + w(self.seq) + (t >> 32) + w(t as u32)
    }
}

/// Elapsed counter ticks from a probe's 48-bit send time to `now` (a full counter reading).
#[inline(always)]
pub fn elapsed(sent: u64, now: u64) -> u64 {
    now.wrapping_sub(sent) & TIME_MASK
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::checksum;

    #[test]
    fn golden_bytes_and_roundtrip() {
        let p = Probe {
            stream: 3,
            flow: 0x0a0b0c,
            seq: 0x0102_0304,
            time: 0xffff_1122_3344_5566,
        };
        let mut b = [0xa5u8; PROBE_LEN];
        p.write(&mut b);
        assert_eq!(
            b,
            [
                0x48, 0x79, 0x47, 0x6e, 0x03, 0x0a, 0x0b, 0x0c, 0x01, 0x02, 0x03, 0x04, 0x11, 0x22,
                0x33, 0x44, 0x55, 0x66
            ]
        );
        let mut frame = vec![0u8; 40];
        frame.extend_from_slice(&b);
        let back = Probe::read(&frame).unwrap();
        assert_eq!(
            back,
            Probe {
                time: 0x1122_3344_5566,
                ..p
            }
        );
    }

    #[test]
    fn foreign_and_short_frames_are_not_probes() {
        assert_eq!(Probe::read(&[0u8; 60]), None);
        assert_eq!(Probe::read(&[0u8; 5]), None);
    }

    #[test]
    fn field_sum_matches_byte_sum() {
        let p = Probe {
            stream: 200,
            flow: 77,
            seq: u32::MAX,
            time: 0xabcd_ef01_2345,
        };
        let mut b = [0u8; PROBE_LEN];
        p.write(&mut b);
        assert_eq!(
            checksum::fold(p.sum()),
            checksum::fold(checksum::sum(&b, 0))
        );
    }

    #[test]
    fn elapsed_wraps_at_48_bits() {
        assert_eq!(elapsed(TIME_MASK - 1, 1 << 48 | 3), 5);
        assert_eq!(elapsed(100, 250), 150);
    }
}

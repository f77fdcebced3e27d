//! Trains on the fast path ([`crate::rx_fast`]): consecutive frames from one remote tunnel
//! endpoint for one inner flow differ in their outer headers only in the IPv4 identification
//! and header checksum. A frame whose outer headers equal, but for those two fields and the
//! UDP source port, those of the last frame the fast path took gets that frame's verdict
//! after two checks of its own: the header checksum, and that the frame holds what the
//! headers say.
//!
//! Why that is the fast path's answer: every bit the fast path reads is in bytes 12..50
//! (Ethertype to the VXLAN header's VNI) except the frame's length; of those, it checks no
//! fixed value in the identification, the checksum or the source port, and its verdict
//! (port, VNI, endpoints, where the inner frame ends) depends on none of the three. The
//! header checksum is right when the ones' complement sum of the ten 16-bit words is a
//! non-zero multiple of 0xffff; with eight words as in a frame whose sum was, that holds
//! exactly when identification + checksum is congruent to that frame's modulo 0xffff (read
//! natively, as [`crate::rx_fast`] sums: RFC 1071 §2(B)), and the sum cannot be zero (the
//! version byte is in it).
//!
//! `rx_tests.rs` checks, over sequences of mutated frames, that a terminator with a train
//! answers what one without does, frame by frame.
//!
//! Size and owner: a few words, owned by the caller for one batch of one underlay port
//! ([`crate::Terminator::receive_in`]); no allocation.

use crate::rx::TunMeta;

/// Bytes compared, as five native 64-bit loads: 12..44 and 42..50 (the last overlaps).
const AT: [usize; 5] = [12, 20, 28, 36, 42];

/// The bits compared in each word: all but the identification (bytes 18..20), the header
/// checksum (24..26) and the UDP source port (34..36).
const MASK: [u64; 5] = {
    let mut m = [[0xffu8; 8]; 5];
    m[0][6] = 0; // identification
    m[0][7] = 0;
    m[1][4] = 0; // header checksum
    m[1][5] = 0;
    m[2][6] = 0; // UDP source port
    m[2][7] = 0;
    [
        u64::from_ne_bytes(m[0]),
        u64::from_ne_bytes(m[1]),
        u64::from_ne_bytes(m[2]),
        u64::from_ne_bytes(m[3]),
        u64::from_ne_bytes(m[4]),
    ]
};

/// The shortest frame a train compares (its words end at byte 50) and the fast path takes.
const MIN: usize = 50;

/// The last frame the fast path took in this batch: its masked outer headers, the
/// identification + checksum of its IPv4 header, and its verdict.
#[derive(Debug, Clone, Copy, Default)]
pub struct Train {
    /// Whether it holds a frame.
    on: bool,
    words: [u64; 5],
    /// Identification + header checksum, as native 16-bit loads.
    id_sum: u32,
    /// Its IPv4 total length + 14: the frame must hold that much.
    needs: usize,
    meta: TunMeta,
    end: usize,
}

impl Train {
    /// An empty train (a batch's start).
    pub fn new() -> Train {
        Train::default()
    }

    /// The verdict of the last frame, when `d` is in its train; `None`: ask the fast path.
    #[inline(always)]
    pub fn follows(&self, d: &[u8]) -> Option<(TunMeta, usize)> {
        if !self.on || d.len() < MIN {
            return None;
        }
        let mut diff = 0;
        for (i, at) in AT.iter().enumerate() {
            diff |= (n64(d, *at) & MASK[i]) ^ self.words[i];
        }
        let id_sum = id_sum(d);
        let gap = id_sum.abs_diff(self.id_sum);
        if diff != 0 || (gap != 0 && gap != 0xffff) || self.needs > d.len() {
            return None;
        }
        Some((self.meta, self.end))
    }

    /// Makes `d`, which the fast path took with `verdict`, the train's last frame.
    #[inline(always)]
    pub fn take(&mut self, d: &[u8], verdict: (TunMeta, usize)) {
        if d.len() < MIN {
            return;
        }
        for (i, at) in AT.iter().enumerate() {
            self.words[i] = n64(d, *at) & MASK[i];
        }
        self.id_sum = id_sum(d);
        self.needs = 14 + usize::from(u16::from_be_bytes([d[16], d[17]]));
        (self.meta, self.end) = verdict;
        self.on = true;
    }
}

/// Identification + header checksum of the IPv4 header at 14, as native 16-bit loads.
#[inline(always)]
fn id_sum(d: &[u8]) -> u32 {
    u32::from(u16::from_ne_bytes([d[18], d[19]])) + u32::from(u16::from_ne_bytes([d[24], d[25]]))
}

/// The 8 bytes of `d` at `i` read natively.
#[inline(always)]
fn n64(d: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[i..i + 8]);
    u64::from_ne_bytes(b)
}

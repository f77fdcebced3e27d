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

use crate::rx::{RxKind, RxOutcome, TunMeta};

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
/// identification + checksum of its IPv4 header, and its verdict; and the metadata of the
/// last tunnel packet, which the general path may have decided instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct Train {
    /// Whether it holds a frame.
    on: bool,
    words: [u64; 5],
    /// Identification + header checksum, as native 16-bit loads.
    id_sum: u32,
    /// Its IPv4 total length + 14: the frame must hold that much.
    needs: usize,
    /// Its verdict: the metadata and where the inner frame ends.
    meta: TunMeta,
    end: usize,
    /// The metadata of the last tunnel packet the general path decided, and whether the
    /// last tunnel packet was that one (else it was `meta`'s).
    held: TunMeta,
    held_last: bool,
}

impl Train {
    /// An empty train (a batch's start).
    pub fn new() -> Train {
        Train::default()
    }

    /// Where the inner frame ends, when `d` is in the train (its metadata is then the
    /// train's, [`Train::last`]); `None`: ask the fast path.
    #[inline(always)]
    pub fn follows(&mut self, d: &[u8]) -> Option<usize> {
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
        self.held_last = false;
        Some(self.end)
    }

    /// Makes `d`, which the fast path took with `verdict`, the train's last frame; where its
    /// inner frame ends.
    #[inline(always)]
    pub fn take(&mut self, d: &[u8], verdict: (TunMeta, usize)) -> usize {
        (self.meta, self.end) = verdict;
        self.held_last = false;
        if d.len() >= MIN {
            for (i, at) in AT.iter().enumerate() {
                self.words[i] = n64(d, *at) & MASK[i];
            }
            self.id_sum = id_sum(d);
            self.needs = 14 + usize::from(u16::from_be_bytes([d[16], d[17]]));
            self.on = true;
        }
        self.end
    }

    /// `out` (the general path's answer) as a [`RxKind`], its metadata kept for
    /// [`Train::last`]. The train is left as it was.
    #[inline]
    pub fn hold(&mut self, out: RxOutcome) -> RxKind {
        match out {
            RxOutcome::NotTunnel => RxKind::NotTunnel,
            RxOutcome::Drop(d) => RxKind::Drop(d),
            RxOutcome::Tunnel(m) => {
                self.held = m;
                self.held_last = true;
                RxKind::Tunnel
            }
        }
    }

    /// The metadata of the last frame [`crate::Terminator::receive_in`] called a tunnel
    /// packet.
    #[inline(always)]
    pub fn last(&self) -> &TunMeta {
        if self.held_last {
            &self.held
        } else {
            &self.meta
        }
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

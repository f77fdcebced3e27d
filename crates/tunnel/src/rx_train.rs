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
//! version byte is in it). Both sums lie in `0..=0x1fffe`, so the congruent values are the
//! train's sum and that sum ± 0xffff; the train accepts the sum and the one of those in range
//! (a third exists only for a sum of exactly 0xffff: such a frame takes the fast path, which
//! answers the same).
//!
//! Comparing more than the fast path reads only makes fewer frames follow, never another
//! verdict: the compared words reach back into the source MAC address so that none needs a
//! mask. A train with no frame yet needs a length no frame has, so no flag is tested either.
//!
//! `rx_tests.rs` checks, over sequences of mutated frames, that a terminator with a train
//! answers what one without does, frame by frame.
//!
//! Size and owner: a few words, owned by the caller for one batch of one underlay port
//! ([`crate::Terminator::receive_in`]); no allocation.

use packet::Packet;

use crate::rx::{RxKind, RxOutcome, TunMeta, Via};
use crate::rx_fast::INNER_OFF;

/// Where a frame is compared, as native loads: 10..18 (8 bytes), 20..24 (4), 26..34, 36..44
/// and 42..50 (8 each; the last overlaps) — every byte of 12..50 but the identification
/// (18..20), the header checksum (24..26) and the UDP source port (34..36), so no load needs
/// a mask, and bytes 10..12 of the source MAC, which make the train only stricter.
const AT: [usize; 5] = [10, 20, 26, 36, 42];

/// The shortest frame a train compares (its loads end at byte 50) and the fast path takes.
const MIN: usize = 50;

/// The last frame the fast path took in this batch: its outer headers as compared, the
/// identification + checksum of its IPv4 header (and the other value congruent to it), and
/// its verdict; and the metadata of the last tunnel packet the general path decided.
#[derive(Debug, Clone, Copy)]
pub struct Train {
    words: [u64; 5],
    /// Identification + header checksum, as native 16-bit loads, and the other sum in
    /// `0..=0x1fffe` congruent to it modulo 0xffff (`id_sum ± 0xffff`).
    id_sum: u32,
    id_alt: u32,
    /// Its IPv4 total length + 14: the frame must hold that much (at least [`MIN`]);
    /// `usize::MAX` while the train holds no frame, so that nothing follows.
    needs: usize,
    /// Its verdict: the metadata and where the inner frame ends.
    meta: TunMeta,
    end: usize,
    /// The metadata of the last tunnel packet the general path decided ([`Via::General`]).
    held: TunMeta,
}

impl Default for Train {
    fn default() -> Train {
        Train::new()
    }
}

impl Train {
    /// An empty train (a batch's start).
    pub fn new() -> Train {
        Train {
            words: [0; 5],
            id_sum: 0,
            id_alt: 0,
            needs: usize::MAX,
            meta: TunMeta::default(),
            end: 0,
            held: TunMeta::default(),
        }
    }

    /// Where the inner frame ends, when `d` is in the train (its metadata is then
    /// [`Train::meta`]); `None`: ask the fast path.
    #[inline(always)]
    pub fn follows(&self, d: &[u8]) -> Option<usize> {
        // `needs` is at least MIN when the train holds a frame, and larger than any frame
        // when it does not.
        if d.len() < self.needs {
            return None;
        }
        let d: &[u8; MIN] = d.first_chunk()?;
        let now = [
            n64(d, AT[0]),
            n32(d, AT[1]),
            n64(d, AT[2]),
            n64(d, AT[3]),
            n64(d, AT[4]),
        ];
        let mut diff = 0;
        for (w, t) in now.iter().zip(&self.words) {
            diff |= w ^ t;
        }
        let s = id_sum(d);
        let bad_sum = (s != self.id_sum) & (s != self.id_alt);
        if (diff != 0) | bad_sum {
            return None;
        }
        Some(self.end)
    }

    /// Whether `pkt` is in the train ([`Train::follows`]; a super-packet never is); if so it
    /// now holds its inner frame, and its metadata is [`Train::meta`]. The first step of
    /// [`crate::Terminator::receive_in`], apart so that a receive loop can take a train's
    /// frames on a path of their own.
    #[inline(always)]
    pub fn carries(&self, pkt: &mut Packet) -> bool {
        if pkt.is_gso() {
            return false;
        }
        let Some(end) = self.follows(pkt.data()) else {
            return false;
        };
        // The train's frame held `INNER_OFF..end`, and this one holds as much.
        pkt.keep(INNER_OFF, end)
    }

    /// Makes `d`, which the fast path took with `verdict`, the train's last frame; where its
    /// inner frame ends.
    #[inline(always)]
    pub fn take(&mut self, d: &[u8], verdict: (TunMeta, usize)) -> usize {
        (self.meta, self.end) = verdict;
        let Some(h) = d.first_chunk::<MIN>() else {
            self.needs = usize::MAX;
            return self.end;
        };
        self.words = [
            n64(h, AT[0]),
            n32(h, AT[1]),
            n64(h, AT[2]),
            n64(h, AT[3]),
            n64(h, AT[4]),
        ];
        self.id_sum = id_sum(h);
        self.id_alt = if self.id_sum >= 0xffff {
            self.id_sum - 0xffff
        } else {
            self.id_sum + 0xffff
        };
        self.needs = MIN.max(14 + usize::from(u16::from_be_bytes([h[16], h[17]])));
        self.end
    }

    /// `out` (the general path's answer) as a [`RxKind`], its metadata kept for
    /// [`Train::meta_of`] ([`Via::General`]). The train is left as it was.
    #[inline]
    pub fn hold(&mut self, out: RxOutcome) -> RxKind {
        match out {
            RxOutcome::NotTunnel => RxKind::NotTunnel,
            RxOutcome::Drop(d) => RxKind::Drop(d),
            RxOutcome::Tunnel(m) => {
                self.held = m;
                RxKind::Tunnel(Via::General)
            }
        }
    }

    /// The metadata of the frames in the train ([`Via::Train`], [`Via::Fast`]).
    #[inline(always)]
    pub fn meta(&self) -> &TunMeta {
        &self.meta
    }

    /// The metadata of the last tunnel packet [`crate::Terminator::receive_in`] decided
    /// `via`.
    #[inline(always)]
    pub fn meta_of(&self, via: Via) -> &TunMeta {
        match via {
            Via::Train | Via::Fast => &self.meta,
            Via::General => &self.held,
        }
    }
}

/// Identification + header checksum of the IPv4 header at 14, as native 16-bit loads.
#[inline(always)]
fn id_sum(d: &[u8; MIN]) -> u32 {
    u32::from(u16::from_ne_bytes([d[18], d[19]])) + u32::from(u16::from_ne_bytes([d[24], d[25]]))
}

/// The 8 bytes of `d` at `i` read natively.
#[inline(always)]
fn n64(d: &[u8; MIN], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[i..i + 8]);
    u64::from_ne_bytes(b)
}

/// The 4 bytes of `d` at `i` read natively.
#[inline(always)]
fn n32(d: &[u8; MIN], i: usize) -> u64 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&d[i..i + 4]);
    u64::from(u32::from_ne_bytes(b))
}

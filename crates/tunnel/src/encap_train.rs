//! Encapsulation of trains: packets of one inner flow with one length, sent through one
//! template, get outer headers that are the same byte for byte — the IP and UDP lengths, the
//! IPv4 header checksum (the identification is 0 on this path) and the UDP source port (from
//! the flow's hash) all follow from the length and the hash. So the headers are built once for
//! the first packet of a train and then only copied, instead of being copied from the template
//! and finished field by field for every packet.
//!
//! A template with a UDP checksum is not trained: that checksum covers the payload, so each
//! packet takes [`EncapTemplate::push`].
//!
//! `encap_tests.rs` checks, over sequences of packets, that a train writes what
//! [`EncapTemplate::push`] writes, packet by packet.
//!
//! Size and owner: the headers (one headroom's worth of bytes) and two words, owned by the
//! caller for one batch through one template; no allocation.

use packet::pool::{Packet, HEADROOM};

use crate::encap::{copy_header, EncapError, EncapTemplate};

/// The outer headers last built through one template, and what they were built for.
pub struct EncapTrain<'t> {
    template: &'t EncapTemplate,
    hdr: [u8; HEADROOM],
    /// The inner length the headers were built for (`usize::MAX`: none yet).
    inner: usize,
    /// The flow hash they were built for.
    hash: u32,
}

impl<'t> EncapTrain<'t> {
    /// A train through `template`, empty.
    #[inline(always)]
    pub fn new(template: &'t EncapTemplate) -> EncapTrain<'t> {
        EncapTrain {
            template,
            hdr: [0; HEADROOM],
            inner: usize::MAX,
            hash: 0,
        }
    }

    /// Encapsulates `pkt` when it continues the train — the inner length and hash of the
    /// packet [`EncapTrain::push`] last built the headers for, not a super-packet, headroom
    /// enough — and says so; otherwise changes nothing and returns `false`. What that push's
    /// caller checked of the first packet of the train (its fit in the underlay's MTU, say)
    /// holds for the rest.
    #[inline(always)]
    pub fn push_next(&mut self, pkt: &mut Packet, hash: u32) -> bool {
        if pkt.len() != self.inner || hash != self.hash || pkt.is_gso() {
            return false;
        }
        let len = self.template.overhead();
        match pkt.push_front(len) {
            Some(front) => {
                copy_header(front, &self.hdr[..len]);
                true
            }
            None => false,
        }
    }

    /// Encapsulates `pkt` in place as [`EncapTemplate::push`] with identification 0 does:
    /// the same bytes, an error in the same cases (and then `pkt` unchanged).
    #[inline(always)]
    pub fn push(&mut self, pkt: &mut Packet, hash: u32) -> Result<(), EncapError> {
        let t = self.template;
        if t.udp_csum() {
            return t.push(pkt, hash, 0);
        }
        let inner = pkt.len();
        let len = t.overhead();
        if inner != self.inner || hash != self.hash {
            let (ip_len, udp_len) = t.lengths(inner)?;
            let hdr = &mut self.hdr[..len];
            copy_header(hdr, t.header());
            t.fill(hdr, ip_len, udp_len, hash, 0);
            self.inner = inner;
            self.hash = hash;
        }
        let front = pkt.push_front(len).ok_or(EncapError::NoHeadroom)?;
        copy_header(front, &self.hdr[..len]);
        Ok(())
    }
}

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
//! The caller pushes a packet ([`EncapTrain::push`], which builds the headers when its length
//! or hash is new) and then extends the train over the packets after it
//! ([`EncapTrain::extend`]) for as long as they have its flow key — the batch's same-key bits
//! say so, with no hash to compute — and its length. Only the first packet of a train pays
//! for the checks the caller makes (its fit in the underlay's MTU, say): they hold for the
//! rest.
//!
//! `encap_tests.rs` checks, over sequences of packets, that a train writes what
//! [`EncapTemplate::push`] writes, packet by packet.
//!
//! Size and owner: the headers (one headroom's worth of bytes) and three words, owned by the
//! caller for one batch through one template; no allocation.

use packet::batch::low_bits;
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
    /// Whether the last push put them on its packet (so that the packets after it with its
    /// flow key continue the train: [`EncapTrain::extend`]).
    armed: bool,
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
            armed: false,
        }
    }

    /// Encapsulates the packets of `pkts` from `from` on while they continue the train of
    /// the packet the last [`EncapTrain::push`] encapsulated (which must be `from - 1`, or
    /// only packets marked in `skip` lie between): each has that packet's flow key — bit `i`
    /// of `same` says packet `i`'s key is packet `i - 1`'s, so its flow hash is too — and
    /// inner length, is not a super-packet, and has headroom for the headers. Packets marked
    /// in `skip` are passed over (their `same` bit still carries the key along). The run of
    /// `same` bits is found once; a loop of nothing else then visits the packets to push bit
    /// by bit, so that a batch of one flow costs a length compare, the headroom push and a
    /// copy per packet. Returns where it stopped (the first packet that does not continue,
    /// or the end of `pkts`, at most 32) and how many it encapsulated, each of
    /// [`EncapTrain::inner`] bytes; after a stop, nothing continues until the next push.
    #[inline(always)]
    pub fn extend(
        &mut self,
        pkts: &mut [Packet],
        same: u32,
        from: usize,
        skip: u32,
    ) -> (usize, usize) {
        let end = pkts.len().min(32);
        if !self.armed {
            return (from.min(end), 0);
        }
        // The loop for the headers' size: two copies of one block size.
        let (stop, pushed) = match self.template.overhead() {
            16..=32 => self.extend_by::<16>(pkts, same, from, end, skip),
            33..=64 => self.extend_by::<32>(pkts, same, from, end, skip),
            65..=HEADROOM => self.extend_by::<64>(pkts, same, from, end, skip),
            // Headers no headroom can take: no train.
            _ => (from, 0),
        };
        if stop < end {
            self.armed = false;
        }
        (stop.max(from.min(end)), pushed)
    }

    /// [`EncapTrain::extend`] for headers of `B..=2 * B` bytes, up to packet `end`. Not
    /// inlined: a call per train, and the loop has the registers to itself (inlined into the
    /// batch's execution it reloads spilled values every packet).
    #[inline(never)]
    fn extend_by<const B: usize>(
        &mut self,
        pkts: &mut [Packet],
        same: u32,
        from: usize,
        end: usize,
        skip: u32,
    ) -> (usize, usize) {
        let inner = self.inner;
        let len = self.template.overhead();
        if !(B..=2 * B).contains(&len) {
            return (from, 0);
        }
        if from >= end {
            return (from, 0);
        }
        let (Some(head), Some(tail)) = (
            self.hdr.first_chunk::<B>().copied(),
            self.hdr[..len].last_chunk::<B>().copied(),
        ) else {
            return (from, 0);
        };
        // The packets that continue the key: the run of set `same` bits from `from` on (up
        // to `end`); of those, the ones to push are the ones not skipped, visited bit by bit.
        let run = (!(same >> from)).trailing_zeros() as usize;
        let stop = (from + run).min(end);
        let span = low_bits(stop) & !low_bits(from);
        let mut todo = span & !skip;
        let mut pushed = 0;
        while todo != 0 {
            let i = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            let Some(p) = pkts.get_mut(i) else {
                return (i, pushed);
            };
            if p.len() != inner || p.is_gso() {
                return (i, pushed);
            }
            let Some(front) = p.push_front(len) else {
                return (i, pushed);
            };
            // `front` is `len` bytes, `B..=2 * B`: the two blocks cover it.
            if let Some(f) = front.first_chunk_mut::<B>() {
                *f = head;
            }
            if let Some(t) = front.last_chunk_mut::<B>() {
                *t = tail;
            }
            pushed += 1;
        }
        (stop, pushed)
    }

    /// The inner length of the packets in the train (`usize::MAX` before the first).
    #[inline(always)]
    pub fn inner(&self) -> usize {
        self.inner
    }

    /// Encapsulates `pkt` in place as [`EncapTemplate::push`] with identification 0 does:
    /// the same bytes, an error in the same cases (and then `pkt` unchanged).
    #[inline(always)]
    pub fn push(&mut self, pkt: &mut Packet, hash: u32) -> Result<(), EncapError> {
        let t = self.template;
        self.armed = false;
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
        self.armed = true;
        Ok(())
    }
}

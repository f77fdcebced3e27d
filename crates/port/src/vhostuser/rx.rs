//! Receive: the guest's transmit ring (odd vrings) into pool frames.
//!
//! Per batch: read the guest's available index once, and for each head (up to the batch's
//! room) walk its chain, copying the virtio-net header aside and the frame straight into a
//! pool frame — one copy. A frame that asks for an offload the switch finishes in software
//! (a partial checksum) is completed in the frame; a TCP super-packet (GSO) is gathered into
//! a 64 KiB scratch buffer and handed to [`crate::vnet::deliver`], which keeps it whole in a
//! super-packet frame (or cuts it when none is free). Every head goes back as used, in
//! order, with length 0; the used index is published once per batch and the guest is
//! interrupted only when it asked.
//!
//! A chain the guest lied about ([`super::ring::ChainError`]), a header that does not parse,
//! a frame too long for a pool frame: the head is returned, the frame dropped, `rx_errors`
//! counted. A corrupt available index stops the ring until the front end sets it up again.

use std::sync::Arc;

use packet::{Batch, Packet, PoolCache, BATCH_SIZE};

use super::live::{LiveRing, RingUser};
use super::ring::{prefetch_seg, walk, Dir, Seg};
use super::Shared;
use crate::claim::QueueClaim;
use crate::vnet::{self, Delivered, VnetHdr, F_NEEDS_CSUM, GSO_NONE, VNET_HDR_LEN};
use crate::RxQueue;

/// Largest frame a guest may send: a 64 KiB super-packet and its headers.
const SCRATCH: usize = 65536 + 14 + 4 + 256;

/// Empty polls in a row after which the queue asks the guest to kick, so that its poll
/// thread can sleep on the queue's readiness descriptor (the datapath sleeps only after
/// 200 µs of empty polls: many more than this). While frames flow the guest never kicks.
const EMPTY_POLLS: u32 = 64;

/// An open receive queue of a vhost-user port.
pub(super) struct VhostRx {
    shared: Arc<Shared>,
    queue: usize,
    user: RingUser,
    cache: PoolCache,
    /// A super-packet gathered from the guest, allocated on first use.
    scratch: Vec<u8>,
    /// A gathered frame whose segments did not all fit the last batch: (length, its
    /// header, next segment).
    pending: Option<(usize, VnetHdr, usize)>,
    /// The ring was found corrupt (counted once; nothing read until it is replaced).
    broken: bool,
    /// Empty polls in a row.
    empty: u32,
    /// The guest was asked to kick (see [`EMPTY_POLLS`]).
    kicks: bool,
    _claim: QueueClaim,
}

impl VhostRx {
    pub(super) fn new(
        shared: Arc<Shared>,
        queue: usize,
        cache: PoolCache,
        claim: QueueClaim,
    ) -> VhostRx {
        let slot = shared.vrings[2 * queue + 1].clone();
        VhostRx {
            shared,
            queue,
            user: RingUser::new(slot),
            cache,
            scratch: Vec::new(),
            pending: None,
            broken: false,
            empty: 0,
            kicks: false,
            _claim: claim,
        }
    }

    /// Delivers what is left of a gathered super-packet.
    fn drain_pending(&mut self, batch: &mut Batch) -> (usize, usize, u64) {
        let Some((len, hdr, first)) = self.pending.take() else {
            return (0, 0, 0);
        };
        match vnet::deliver(
            &self.scratch[..len],
            None,
            Some(&hdr),
            first,
            true,
            &mut self.cache,
            batch,
        ) {
            Delivered::Done { packets, bytes } => (packets, bytes, 0),
            Delivered::More {
                packets,
                bytes,
                next,
            } => {
                self.pending = Some((len, hdr, next));
                (packets, bytes, 0)
            }
            Delivered::Dropped => (0, 0, 1),
        }
    }
}

/// Where [`take`] put a frame.
enum Took {
    /// Into a pool frame, ready.
    Packet(Packet),
    /// Into the scratch buffer (a super-packet): its length and header.
    Scratch(usize, VnetHdr),
    /// Refused; counted as an error.
    Bad,
}

/// Copies the chain at `head` out of the guest: header aside, frame into `pkt` (or into
/// `scratch` for a super-packet). `single` is the chain's one buffer when it is one plain
/// descriptor ([`super::ring::SplitRing::single`]).
fn take(
    live: &LiveRing,
    head: u16,
    single: Option<Seg>,
    mut pkt: Packet,
    scratch: &mut Vec<u8>,
    cache: &mut PoolCache,
) -> Took {
    let hl = live.net.hdr_len;
    // The common case: one buffer, header and a frame with no offload that fits a frame.
    if let Some(seg) = single {
        let len = seg.len as usize;
        let room = pkt.tailroom() + pkt.len();
        if len >= hl + 14 && len - hl <= room {
            let mut h10 = [0u8; VNET_HDR_LEN];
            // SAFETY: the buffer has `len` >= hl >= 10 readable bytes (translated).
            unsafe { std::ptr::copy_nonoverlapping(seg.host, h10.as_mut_ptr(), VNET_HDR_LEN) };
            if h10[0] == 0 && h10[1] == GSO_NONE {
                pkt.set_len(len - hl);
                // SAFETY: `len - hl` bytes after the header; the frame has room for them.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        seg.host.add(hl),
                        pkt.data_mut().as_mut_ptr(),
                        len - hl,
                    )
                };
                return Took::Packet(pkt);
            }
        }
    }
    let mut hdr = [0u8; 12];
    let mut h = 0usize;
    let room = pkt.tailroom() + pkt.len();
    pkt.set_len(room);
    let frame = pkt.data_mut().as_mut_ptr();
    let mut to_scratch = false;
    let mut d = 0usize;
    let mut too_long = false;
    let r = walk(&live.ring, &live.mem, head, Dir::Read, |s: Seg| {
        let mut src = s.host;
        let mut len = s.len as usize;
        if h < hl {
            let k = (hl - h).min(len);
            // SAFETY: `src` has `len` >= k readable bytes (translated); hdr has room for k.
            unsafe { std::ptr::copy_nonoverlapping(src, hdr.as_mut_ptr().add(h), k) };
            h += k;
            // SAFETY: k <= len: still inside the buffer (or at its end).
            src = unsafe { src.add(k) };
            len -= k;
            if h == hl && hdr[1] != GSO_NONE {
                to_scratch = true;
                if scratch.is_empty() {
                    scratch.resize(SCRATCH, 0);
                }
            }
        }
        if len == 0 {
            return true;
        }
        let (dst, cap) = if to_scratch {
            (scratch.as_mut_ptr(), scratch.len())
        } else {
            (frame, room)
        };
        if d + len > cap {
            too_long = true;
            return false;
        }
        // SAFETY: `src` has `len` readable bytes; `dst` has room for d + len (checked).
        unsafe { std::ptr::copy_nonoverlapping(src, dst.add(d), len) };
        d += len;
        true
    });
    if r.is_err() || too_long || h < hl {
        cache.free(pkt);
        return Took::Bad;
    }
    let mut h10 = [0u8; VNET_HDR_LEN];
    h10.copy_from_slice(&hdr[..VNET_HDR_LEN]);
    let vh = VnetHdr::from_bytes(&h10);
    if to_scratch {
        cache.free(pkt);
        return Took::Scratch(d, vh);
    }
    pkt.set_len(d);
    if vh.flags & F_NEEDS_CSUM != 0
        && vnet::complete_csum(
            pkt.data_mut(),
            usize::from(vh.csum_start),
            usize::from(vh.csum_offset),
        )
        .is_err()
    {
        cache.free(pkt);
        return Took::Bad;
    }
    if d < 14 {
        cache.free(pkt);
        return Took::Bad;
    }
    Took::Packet(pkt)
}

impl RxQueue for VhostRx {
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let (mut packets, mut bytes, mut errors) = self.drain_pending(batch);
        if self.pending.is_some() || batch.room() == 0 {
            self.account(packets, bytes, errors);
            return packets;
        }
        let (scratch, cache, pending, broken, empty, kicks) = (
            &mut self.scratch,
            &mut self.cache,
            &mut self.pending,
            &mut self.broken,
            &mut self.empty,
            &mut self.kicks,
        );
        let r = self.user.with(|live, last_avail, fresh| {
            if fresh {
                // A new ring starts with kicks off.
                *kicks = false;
                *empty = 0;
            }
            let Some(avail) = live.ring.pending(*last_avail) else {
                if !*broken {
                    *broken = true;
                    tracing::warn!(
                        "vhost-user: the guest's available index is more than a queue ahead; \
                         the ring is stopped until the guest sets it up again"
                    );
                    return (0, 0, 1);
                }
                return (0, 0, 0);
            };
            *broken = false;
            let mut avail = avail;
            if avail == 0 {
                *empty += 1;
                if *empty < EMPTY_POLLS || *kicks {
                    return (0, 0, 0);
                }
                // Idle: ask for a kick, then look once more (a frame added before the
                // guest saw the request would not be kicked for).
                live.ring.enable_kicks(*last_avail);
                *kicks = true;
                match live.ring.pending(*last_avail) {
                    Some(n) if n > 0 => avail = n,
                    _ => return (0, 0, 0),
                }
            }
            *empty = 0;
            if *kicks {
                // Frames flow again: no more kicks, and the one that woke us is read.
                live.ring.suppress_kicks(*last_avail);
                live.drain_kick();
                *kicks = false;
            }
            let (mut p, mut b, mut e) = (0usize, 0usize, 0u64);
            let start = *last_avail;
            let n = avail.min(batch.room() as u16).min(BATCH_SIZE as u16);
            // Two passes. The guest wrote descriptors and frames from another core, so each
            // first touch waits for memory: the first pass reads the batch's heads and
            // descriptors and starts loading every one-buffer frame, the second copies them
            // out — the waits overlap instead of coming one after another.
            let mut heads = [0u16; BATCH_SIZE];
            let mut singles = [None::<Seg>; BATCH_SIZE];
            for k in 0..usize::from(n) {
                let head = live.ring.avail_head(start.wrapping_add(k as u16));
                let s = live.ring.single(&live.mem, head, Dir::Read);
                if let Some(s) = &s {
                    prefetch_seg(s);
                }
                heads[k] = head;
                singles[k] = s;
            }
            for k in 0..usize::from(n) {
                let Some(pkt) = cache.alloc() else { break };
                let head = heads[k];
                let took = take(live, head, singles[k], pkt, scratch, cache);
                live.ring.put_used(*last_avail, head, 0);
                *last_avail = last_avail.wrapping_add(1);
                match took {
                    Took::Packet(pkt) => {
                        b += pkt.len();
                        p += 1;
                        let _ = batch.push(pkt);
                    }
                    Took::Scratch(len, hdr) => {
                        match vnet::deliver(
                            &scratch[..len],
                            None,
                            Some(&hdr),
                            0,
                            true,
                            cache,
                            batch,
                        ) {
                            Delivered::Done { packets, bytes } => {
                                p += packets;
                                b += bytes;
                            }
                            Delivered::More {
                                packets,
                                bytes,
                                next,
                            } => {
                                p += packets;
                                b += bytes;
                                *pending = Some((len, hdr, next));
                                break;
                            }
                            Delivered::Dropped => e += 1,
                        }
                    }
                    Took::Bad => e += 1,
                }
                if batch.room() == 0 {
                    break;
                }
            }
            if *last_avail != start {
                live.ring.publish_used(*last_avail);
                if live.ring.wants_interrupt(start, *last_avail) {
                    live.interrupt();
                }
            }
            (p, b, e)
        });
        if let Some((p, b, e)) = r {
            packets += p;
            bytes += b;
            errors += e;
        }
        self.account(packets, bytes, errors);
        packets
    }

    fn readiness_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.user.slot().readiness_fd())
    }
}

impl VhostRx {
    #[inline]
    fn account(&self, packets: usize, bytes: usize, errors: u64) {
        let c = &self.shared.rx[self.queue];
        c.add_batch(packets, bytes as u64, errors);
    }
}

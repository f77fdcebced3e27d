//! Transmit: pool frames into the guest's receive ring (even vrings).
//!
//! Per packet: reserve enough of the guest's buffers for the virtio-net header and the frame
//! (one head; with mergeable buffers as many heads as it takes, their count written in the
//! header's `num_buffers`), then copy header and frame in — one copy — and write a used
//! element per head with the bytes it got. The used index is published once per batch and
//! the guest interrupted only when it asked.
//!
//! A TCP super-packet goes whole, with a header asking the guest to take it as such, when the
//! guest negotiated TSO for its IP version (and ECN, if set); otherwise it is cut into
//! segments here ([`crate::vnet::segment_into`]).
//!
//! When the guest has not posted enough buffers, sending stops: the packet and the rest stay
//! in the batch (the caller counts them dropped). A frame that can never fit (no mergeable
//! buffers and a head too small) is dropped and counted in `tx_dropped`; a head whose chain
//! is bad goes back used with length 0 and counts in `tx_errors`.

use std::sync::Arc;

use packet::{Batch, Packet, PoolCache};

use super::live::{LiveRing, RingUser};
use super::ring::{walk, Dir, Seg};
use super::Shared;
use crate::claim::QueueClaim;
use crate::vnet;
use crate::TxQueue;

/// Most buffers one frame may take (a 64 KiB super-packet in 4 KiB pages takes 17).
const MAX_SEGS: usize = 256;

/// One reserved buffer: where, how long, and which head (index into `heads`) it belongs to.
#[derive(Clone, Copy)]
struct Buf {
    seg: Seg,
    head: usize,
}

/// An open transmit queue of a vhost-user port.
pub(super) struct VhostTx {
    shared: Arc<Shared>,
    queue: usize,
    /// Users of every queue pair's receive vring, this queue's own first: when the guest
    /// runs fewer pairs than the port has, the queue sends on the next pair that runs.
    users: Vec<RingUser>,
    cache: PoolCache,
    /// Buffers reserved for the frame being sent (capacity kept: no allocation per packet).
    bufs: Vec<Buf>,
    /// Heads reserved for it, with the bytes written into each.
    heads: Vec<(u16, u32)>,
    /// Segments of a super-packet the guest cannot take whole.
    segs: Batch,
    _claim: QueueClaim,
}

/// Why a frame did not go.
enum Fail {
    /// The guest has not posted enough buffers: stop, try later.
    NoRoom,
    /// The frame can never fit: drop it.
    TooBig,
}

impl VhostTx {
    pub(super) fn new(
        shared: Arc<Shared>,
        queue: usize,
        cache: PoolCache,
        claim: QueueClaim,
    ) -> VhostTx {
        let pairs = shared.vrings.len() / 2;
        let users = (0..pairs)
            .map(|k| RingUser::new(shared.vrings[2 * ((queue + k) % pairs)].clone()))
            .collect();
        VhostTx {
            shared,
            queue,
            users,
            cache,
            bufs: Vec::with_capacity(MAX_SEGS + 64),
            heads: Vec::with_capacity(MAX_SEGS),
            segs: Batch::new(),
            _claim: claim,
        }
    }
}

/// Per-batch counts.
#[derive(Default)]
struct Counts {
    /// Packets of the batch that went (a super-packet cut here counts once).
    packets: usize,
    /// Frames written to the guest.
    sent: usize,
    bytes: usize,
    dropped: u64,
    errors: u64,
}

/// The queue's working state inside one batch.
struct Writer<'a> {
    live: &'a LiveRing,
    last_avail: &'a mut u16,
    /// Heads the guest has made available past `last_avail` at the batch's start.
    avail: u16,
    bufs: &'a mut Vec<Buf>,
    heads: &'a mut Vec<(u16, u32)>,
    counts: Counts,
}

impl Writer<'_> {
    /// Reserves buffers for `need` bytes from the heads at `last_avail` on. Heads with a bad
    /// chain are returned used (length 0) and counted; reservation goes on after them.
    fn reserve(&mut self, need: usize) -> Result<(), Fail> {
        let mrg = self.live.net.mrg_rxbuf;
        'again: loop {
            self.bufs.clear();
            self.heads.clear();
            let mut have = 0usize;
            while have < need {
                if !mrg && !self.heads.is_empty() {
                    return Err(Fail::TooBig);
                }
                if self.heads.len() as u16 >= self.avail {
                    return Err(Fail::NoRoom);
                }
                let pos = self.last_avail.wrapping_add(self.heads.len() as u16);
                let head = self.live.ring.avail_head(pos);
                let hi = self.heads.len();
                self.heads.push((head, 0));
                let bufs = &mut *self.bufs;
                let mut over = false;
                let r = walk(&self.live.ring, &self.live.mem, head, Dir::Write, |seg| {
                    if bufs.len() >= MAX_SEGS {
                        over = true;
                        return false;
                    }
                    bufs.push(Buf { seg, head: hi });
                    have += seg.len as usize;
                    true
                });
                if r.is_err() || over {
                    // Give back every head reserved so far (the bad one included), unused.
                    for i in 0..self.heads.len() {
                        let (h, _) = self.heads[i];
                        self.used(h, 0);
                    }
                    self.counts.errors += 1;
                    continue 'again;
                }
            }
            return Ok(());
        }
    }

    /// Returns one head used with `len` bytes, advancing the position.
    #[inline]
    fn used(&mut self, head: u16, len: u32) {
        self.live.ring.put_used(*self.last_avail, head, len);
        *self.last_avail = self.last_avail.wrapping_add(1);
        self.avail -= 1;
    }

    /// Copies `hdr` then `data` into the reserved buffers and returns every reserved head
    /// used, with the bytes it got.
    fn write(&mut self, hdr: &[u8], data: &[u8]) {
        let total = hdr.len() + data.len();
        let mut done = 0usize;
        for b in self.bufs.iter() {
            if done == total {
                break;
            }
            let mut off = 0usize;
            let cap = b.seg.len as usize;
            while off < cap && done < total {
                let src = if done < hdr.len() {
                    &hdr[done..]
                } else {
                    &data[done - hdr.len()..]
                };
                let k = src.len().min(cap - off);
                // SAFETY: the buffer has `cap` writable bytes (translated); off + k <= cap;
                // `src` has at least k bytes.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), b.seg.host.add(off), k) };
                off += k;
                done += k;
            }
            self.heads[b.head].1 += off as u32;
        }
        for i in 0..self.heads.len() {
            let (h, len) = self.heads[i];
            self.used(h, len);
        }
    }

    /// Sends plain packet `p` (no offload asked). The common case — the next head is one
    /// plain buffer that holds it all — writes the header into the packet's own headroom and
    /// copies header and frame in one go; anything else goes through [`Self::send_frame`].
    fn send_plain(&mut self, p: &mut Packet, hl: usize) -> Result<(), Fail> {
        if self.avail > 0 {
            let head = self.live.ring.avail_head(*self.last_avail);
            if let Some(b) = self.live.ring.single(&self.live.mem, head, Dir::Write) {
                let total = hl + p.len();
                let mrg = self.live.net.mrg_rxbuf && hl >= 12;
                if b.len as usize >= total {
                    if let Some(front) = p.push_front(hl) {
                        front.fill(0);
                        if mrg {
                            front[10..12].copy_from_slice(&1u16.to_le_bytes());
                        }
                        // SAFETY: the buffer has at least `total` writable bytes (translated);
                        // the packet's data is `total` bytes now.
                        unsafe { std::ptr::copy_nonoverlapping(p.data().as_ptr(), b.host, total) };
                        p.pull_front(hl);
                        self.used(head, total as u32);
                        self.counts.sent += 1;
                        self.counts.bytes += total - hl;
                        return Ok(());
                    }
                }
            }
        }
        self.send_frame(&mut [0u8; 12], hl, p.data())
    }

    /// Sends one complete frame with header `hdr` (its first `hl` bytes go).
    fn send_frame(&mut self, hdr: &mut [u8; 12], hl: usize, data: &[u8]) -> Result<(), Fail> {
        let total = hl + data.len();
        // The common case: the next head is one plain buffer that holds it all.
        if self.avail > 0 {
            let head = self.live.ring.avail_head(*self.last_avail);
            if let Some(b) = self.live.ring.single(&self.live.mem, head, Dir::Write) {
                if b.len as usize >= total {
                    if self.live.net.mrg_rxbuf {
                        hdr[10..12].copy_from_slice(&1u16.to_le_bytes());
                    }
                    // SAFETY: the buffer has at least `total` writable bytes (translated).
                    unsafe {
                        std::ptr::copy_nonoverlapping(hdr.as_ptr(), b.host, hl);
                        std::ptr::copy_nonoverlapping(data.as_ptr(), b.host.add(hl), data.len());
                    }
                    self.used(head, total as u32);
                    self.counts.sent += 1;
                    self.counts.bytes += data.len();
                    return Ok(());
                }
            }
        }
        self.reserve(total)?;
        if self.live.net.mrg_rxbuf {
            // num_buffers: every reserved head takes part of the frame.
            hdr[10..12].copy_from_slice(&(self.heads.len() as u16).to_le_bytes());
        }
        self.write(&hdr[..hl], data);
        self.counts.sent += 1;
        self.counts.bytes += data.len();
        Ok(())
    }
}

/// Whether the guest takes super-packet `p` whole.
fn takes_whole(live: &LiveRing, p: &Packet) -> bool {
    match p.gso() {
        None => true,
        Some(g) => {
            let n = &live.net;
            (if g.v6 { n.guest_tso6 } else { n.guest_tso4 }) && (!g.ecn || n.guest_ecn)
        }
    }
}

impl TxQueue for VhostTx {
    fn dropped(&mut self, n: u64) {
        self.shared.tx[self.queue].add_dropped(n);
    }

    fn takes_supers(&self) -> bool {
        self.users
            .iter()
            .find(|u| u.slot().has_ring())
            .is_some_and(|u| u.slot().guest_tso())
    }

    fn send(&mut self, batch: &mut Batch) -> usize {
        let (bufs, heads, segs, cache) = (
            &mut self.bufs,
            &mut self.heads,
            &mut self.segs,
            &mut self.cache,
        );
        // This queue's own vring, or the next one that runs.
        let user = match self.users.iter().position(|u| u.slot().has_ring()) {
            Some(k) => &mut self.users[k],
            None => return 0,
        };
        let r = user.with_shared(|live, last_avail, _| {
            let Some(avail) = live.ring.pending(*last_avail) else {
                return (0usize, Counts::default());
            };
            let start = *last_avail;
            let mut w = Writer {
                live,
                last_avail,
                avail,
                bufs,
                heads,
                counts: Counts::default(),
            };
            let hl = live.net.hdr_len;
            let mut done = 0usize;
            for p in batch.as_mut_slice() {
                let mut hdr = [0u8; 12];
                let r = if !p.is_gso() {
                    w.send_plain(p, hl)
                } else if takes_whole(live, p) {
                    match vnet::tx_header(p) {
                        Ok(h) => {
                            hdr[..10].copy_from_slice(&h.to_bytes());
                            w.send_frame(&mut hdr, hl, p.data())
                        }
                        Err(_) => {
                            w.counts.errors += 1;
                            Ok(())
                        }
                    }
                } else {
                    send_segments(&mut w, p, hl, segs, cache)
                };
                match r {
                    Ok(()) => {
                        w.counts.packets += 1;
                        done += 1;
                    }
                    Err(Fail::TooBig) => {
                        w.counts.dropped += 1;
                        done += 1;
                    }
                    Err(Fail::NoRoom) => break,
                }
            }
            if *w.last_avail != start {
                let now = *w.last_avail;
                live.ring.publish_used(now);
                if live.ring.wants_interrupt(start, now) {
                    live.interrupt();
                }
            }
            (done, w.counts)
        });
        let Some((done, c)) = r else { return 0 };
        for p in batch.drain_front(done) {
            self.cache.free(p);
        }
        let q = &self.shared.tx[self.queue];
        if c.sent > 0 {
            q.add(c.sent as u64, c.bytes as u64);
        }
        if c.dropped > 0 {
            q.add_dropped(c.dropped);
        }
        if c.errors > 0 {
            q.add_errors(c.errors);
        }
        c.packets
    }
}

/// Cuts super-packet `p` into segments and sends each; all or, when the guest runs out of
/// buffers midway, the first ones (the rest is lost with the packet: TCP resends).
fn send_segments(
    w: &mut Writer<'_>,
    p: &Packet,
    hl: usize,
    segs: &mut Batch,
    cache: &mut PoolCache,
) -> Result<(), Fail> {
    let mut first = 0usize;
    loop {
        let (next, n) = match vnet::segment_into(p, first, cache, segs) {
            Ok(x) => x,
            Err(_) => {
                w.counts.errors += 1;
                return Ok(());
            }
        };
        let mut out = Ok(());
        for s in segs.as_slice() {
            if let Err(e) = w.send_frame(&mut [0u8; 12], hl, s.data()) {
                out = Err(e);
                break;
            }
        }
        segs.free_into(cache);
        out?;
        if next >= n || next == first {
            return Ok(());
        }
        first = next;
    }
}

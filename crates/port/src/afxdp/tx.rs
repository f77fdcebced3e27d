//! The transmit side of one AF_XDP queue: a packet's frame goes on the tx ring as it is (its
//! UMEM address is `frame * FRAME_SIZE + offset` on every socket of the pool), and frames the
//! kernel reports on the completion ring go back to the queue's own pool cache.
//!
//! A packet of another pool (never the case inside one switch) is copied into a frame of this
//! pool; its own frame cannot be given back without its pool's cache, so it is left unfreed,
//! which leaks it safely (as the ring port does).
//!
//! System calls: one `sendto` per batch at most, and only when the kernel sets `need_wakeup`
//! on the tx ring. Zero-copy drivers set it when their transmit side went to sleep; in copy
//! mode the kernel transmits only inside `sendto`, so it keeps the flag set and every batch
//! that put something on the ring is kicked (the floor for a kernel-copied port).

use std::mem::ManuallyDrop;
use std::sync::Arc;

use packet::{Batch, Packet, PoolCache, FRAME_SIZE};
use xdpilone::xdp::XdpDesc;

use super::xsk::{release, TxRings, Xsk};
use crate::{QueueCounters, TxQueue};

/// Transmit queue `q` of an AF_XDP port.
pub struct AfXdpTx {
    rings: ManuallyDrop<TxRings>,
    /// The socket (its slot takes the rings back on drop).
    xsk: Arc<Xsk>,
    cache: PoolCache,
    frames: u32,
    counters: Arc<QueueCounters>,
    /// Packets of another pool that were copied into a frame of ours.
    copies: u64,
}

impl std::fmt::Debug for AfXdpTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpTx")
            .field("in_flight", &self.rings.in_flight)
            .finish()
    }
}

#[inline(always)]
fn desc(pkt: &Packet) -> XdpDesc {
    XdpDesc {
        addr: pkt.frame() as u64 * FRAME_SIZE as u64 + u64::from(pkt.data_offset()),
        len: pkt.len() as u32,
        options: 0,
    }
}

impl AfXdpTx {
    pub(crate) fn new(rings: TxRings, xsk: Arc<Xsk>) -> AfXdpTx {
        AfXdpTx {
            rings: ManuallyDrop::new(rings),
            cache: xsk.pool.cache(),
            frames: xsk.pool.frames(),
            counters: xsk.tx_counters.clone(),
            xsk,
            copies: 0,
        }
    }

    /// Gives frames the kernel has sent back to the cache.
    #[inline]
    fn reap(&mut self) {
        self.reap_with(|_| {});
    }

    /// Reaps the completion ring as `send` does and appends the frame index of every frame
    /// the kernel gave back to `out` (diagnostics and tests: it shows which frames went out).
    pub fn completed_frames(&mut self, out: &mut Vec<u32>) {
        self.reap_with(|f| out.push(f));
    }

    #[inline(always)]
    fn reap_with(&mut self, seen: impl FnMut(u32)) {
        self.rings.reap(self.frames, &mut self.cache, seen);
    }

    /// Asks the kernel to transmit when it needs asking.
    #[inline]
    fn kick(&mut self) {
        if self.rings.tx.needs_wakeup() {
            self.rings.tx.wake();
        }
    }

    /// Packets of another pool this queue copied into frames of its own pool (the only
    /// copies it makes).
    pub fn copies(&self) -> u64 {
        self.copies
    }

    /// Frames on the tx ring or in flight, not yet completed.
    pub fn frames_in_flight(&self) -> u32 {
        self.rings.in_flight
    }
}

impl TxQueue for AfXdpTx {
    fn dropped(&mut self, n: u64) {
        self.counters.add_dropped(n);
    }

    #[inline]
    fn send(&mut self, batch: &mut Batch) -> usize {
        self.reap();
        let want = batch.len() as u32;
        if want == 0 {
            return 0;
        }
        let (mut sent, mut bytes) = (0usize, 0u64);
        {
            let rings = &mut *self.rings;
            let mut writer = rings.tx.transmit(want);
            let cap = writer.capacity() as usize;
            for pkt in &batch.as_slice()[..cap] {
                let d = if self.cache.owns(pkt) {
                    desc(pkt)
                } else {
                    match self.cache.alloc_from(pkt.data()) {
                        Some(copy) => {
                            self.copies += 1;
                            desc(&copy)
                        }
                        None => break,
                    }
                };
                writer.insert_once(d);
                rings.held.insert((d.addr / FRAME_SIZE as u64) as u32);
                sent += 1;
                bytes += u64::from(d.len);
            }
            writer.commit();
        }
        // Ownership of these frames passes to the kernel until the completion ring returns
        // them (a `Packet` has no destructor, so letting it go frees nothing).
        batch.drain_front(sent).for_each(drop);
        self.rings.in_flight += sent as u32;
        if sent > 0 || self.rings.tx.pending() > 0 {
            self.kick();
        }
        self.counters.add(sent as u64, bytes);
        sent
    }

    fn flush(&mut self) {
        self.reap();
        if self.rings.tx.pending() > 0 {
            self.kick();
        }
    }
}

impl Drop for AfXdpTx {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.rings` is not used afterwards.
        let rings = unsafe { ManuallyDrop::take(&mut self.rings) };
        release(&self.xsk.tx, rings);
    }
}

impl TxRings {
    /// Takes what the completion ring holds: each frame this side had put on the tx ring goes
    /// back to `cache` (and is shown to `seen`); anything else is ignored.
    #[inline]
    pub(crate) fn reap(&mut self, frames: u32, cache: &mut PoolCache, mut seen: impl FnMut(u32)) {
        if self.in_flight == 0 {
            return;
        }
        let mut n = 0u32;
        let mut reader = self.comp.complete(self.in_flight);
        while let Some(addr) = reader.read() {
            let frame = addr / FRAME_SIZE as u64;
            if frame < u64::from(frames) && self.held.remove(frame as u32) {
                seen(frame as u32);
                cache.put_frame(frame as u32);
                n += 1;
            }
        }
        reader.release();
        drop(reader);
        self.in_flight -= n;
    }
}

//! The receive side of one AF_XDP queue: rx descriptors become packets on the same frames,
//! and the fill ring is kept topped up from the queue's own pool cache.
//!
//! Per call: one acquire load of the rx producer, one release store of the rx consumer, and
//! (when the fill ring has room for a batch) one release store of the fill producer. A system
//! call happens only when the kernel asks for one (`need_wakeup` on the fill ring, set by
//! zero-copy drivers that sleep when the fill ring ran dry).
//!
//! In copy mode, TCP/UDP checksums a local sender left partial (checksum offload) are
//! completed here ([`crate::partial_csum`]): a few additions per packet, a sum only for those.

use std::mem::ManuallyDrop;
use std::os::fd::RawFd;
use std::sync::Arc;

use packet::{Batch, Pool, PoolCache, BATCH_SIZE, FRAME_SIZE};

use super::xsk::{release, RxRings, Xsk};
use crate::partial_csum::complete_partial;
use crate::{QueueCounters, RxQueue};

/// Receive queue `q` of an AF_XDP port.
pub struct AfXdpRx {
    rings: ManuallyDrop<RxRings>,
    pool: Pool,
    cache: PoolCache,
    /// Frames the fill ring is kept topped up to.
    fill_target: u32,
    counters: Arc<QueueCounters>,
    fd: RawFd,
    /// The socket (its slot takes the rings back on drop).
    xsk: Arc<Xsk>,
}

impl std::fmt::Debug for AfXdpRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpRx")
            .field("fd", &self.fd)
            .field("in_kernel", &self.rings.in_kernel)
            .finish()
    }
}

impl AfXdpRx {
    pub(crate) fn new(rings: RxRings, xsk: Arc<Xsk>, fill_target: u32) -> AfXdpRx {
        let mut rx = AfXdpRx {
            rings: ManuallyDrop::new(rings),
            pool: xsk.pool.clone(),
            cache: xsk.pool.cache(),
            fill_target,
            counters: xsk.rx_counters.clone(),
            fd: xsk.fd(),
            xsk,
        };
        rx.refill();
        rx
    }

    /// Tops the fill ring up to the target with frames from the cache.
    #[inline]
    fn refill(&mut self) {
        let room = self.fill_target.saturating_sub(self.rings.in_kernel);
        if room == 0 {
            return;
        }
        let rings = &mut *self.rings;
        let mut writer = rings.fill.fill(room);
        let cap = writer.capacity() as usize;
        let cache = &mut self.cache;
        let held = &mut rings.held;
        // `take(cap)`: the ring never sees more frames than it reserved, so none is lost.
        let frames = std::iter::from_fn(|| cache.take_frame())
            .take(cap)
            .map(|f| {
                held.insert(f);
                f as u64 * FRAME_SIZE as u64
            });
        let n = writer.insert(frames);
        writer.commit();
        drop(writer);
        self.rings.in_kernel += n;
        if self.rings.fill.needs_wakeup() {
            self.rings.fill.wake();
        }
    }

    /// Frames the kernel holds for this queue (on the fill ring or received, not yet read).
    pub fn frames_in_kernel(&self) -> u32 {
        self.rings.in_kernel
    }
}

impl RxQueue for AfXdpRx {
    #[inline]
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let want = batch.room().min(BATCH_SIZE) as u32;
        if want == 0 {
            return 0;
        }
        let frames = self.pool.frames();
        let (mut got, mut bytes, mut bad, mut back) = (0usize, 0u64, 0u64, 0u32);
        {
            let rings = &mut *self.rings;
            let mut reader = rings.rx.receive(want);
            while let Some(desc) = reader.read() {
                let frame = desc.addr / FRAME_SIZE as u64;
                let off = desc.addr % FRAME_SIZE as u64;
                if frame >= u64::from(frames)
                    || off + u64::from(desc.len) > FRAME_SIZE as u64
                    || !rings.held.remove(frame as u32)
                {
                    // Not a frame this queue gave the kernel (it never does this): making a
                    // packet of it could give a frame two owners. Count it, keep going.
                    bad += 1;
                    continue;
                }
                back += 1;
                // SAFETY: the frame was put on the fill ring by this queue (taken out of the
                // pool's free stacks) and is back from the kernel: no `Packet` owns it.
                let pkt = unsafe {
                    self.pool
                        .packet_from_frame(frame as u32, off as u16, desc.len as u16)
                };
                if let Err(pkt) = batch.push(pkt) {
                    // `want` was at most the room left, so this does not happen.
                    self.cache.free(pkt);
                    continue;
                }
                got += 1;
                bytes += u64::from(desc.len);
            }
            reader.release();
        }
        if !self.xsk.zero_copy && got > 0 {
            // Copy mode takes frames from the kernel's skb path, where a local sender with
            // checksum offload leaves TCP/UDP checksums partial (zero-copy NICs deliver wire
            // frames, complete by definition).
            let n = batch.len();
            for pkt in &mut batch.as_mut_slice()[n - got..] {
                complete_partial(pkt.data_mut());
            }
        }
        self.rings.in_kernel -= back;
        if self.fill_target.saturating_sub(self.rings.in_kernel) >= BATCH_SIZE as u32 {
            self.refill();
        }
        self.counters.add_batch(got, bytes, bad);
        got
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }
}

impl Drop for AfXdpRx {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.rings` is not used afterwards.
        let rings = unsafe { ManuallyDrop::take(&mut self.rings) };
        release(&self.xsk.rx, rings);
    }
}

//! Receive: walk the TPACKET_V3 ring's blocks and copy each frame into a pool frame.
//!
//! The kernel fills blocks in order and hands one over (status `TP_STATUS_USER`) when it is
//! full or when the block timeout (1 ms) expires, so a lone frame waits at most about that
//! long. The queue walks the frames of the current block, copying each into a pool frame
//! (one copy; the VLAN tag the kernel took out goes back in; checksums are completed and TCP
//! super-packets segmented per `vnet.rs`), and gives the block back (status
//! `TP_STATUS_KERNEL`) as soon as its last frame is copied. No system call: the ring is
//! shared memory; the socket fd is the readiness fd (readable when a block is ready).
//!
//! Memory ordering: the kernel writes a block's frames, then its status with a write barrier;
//! the status load is `Acquire`, so the frames are visible after it. Giving the block back is
//! a `Release` store, so the copies out of it are done before the kernel may refill it.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use packet::{Batch, PoolCache};

use super::socket::*;
use crate::claim::QueueClaim;
use crate::close::ClosingFd;
use crate::vnet::{self, Delivered, VlanTag, VnetHdr, VNET_HDR_LEN};
use crate::{QueueCounters, RxQueue};

/// One receive socket and its ring, shared by the port and its open rx queue.
pub(super) struct RxSocket {
    /// Closed off the dropping thread ([`crate::close`]: a release waits for the kernel).
    pub fd: ClosingFd,
    /// The TPACKET_V3 ring (`None` for a socket read with `recvmmsg`, see `mmsg.rs`).
    pub ring: Option<Ring>,
    /// The block the next reader starts at (kept across re-opens of the queue).
    pub next_block: AtomicUsize,
    pub counters: QueueCounters,
    /// Frames the kernel dropped because the ring was full, summed over reads of
    /// `PACKET_STATISTICS` (which resets the kernel's count).
    pub ring_drops: AtomicU64,
}

/// Where the reader is inside the current block.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    /// Frames left in the block, the current one included.
    left: u32,
    /// Offset of the current frame's header from the block start.
    at: usize,
    /// The first segment of the current frame still to deliver.
    segment: usize,
}

/// An open rx queue of an AF_PACKET port.
pub(super) struct AfPacketRx {
    pub sock: Arc<RxSocket>,
    pub cache: PoolCache,
    pub vnet_hdr: bool,
    pub block: usize,
    cursor: Option<Cursor>,
    pub _claim: QueueClaim,
}

impl AfPacketRx {
    pub(super) fn new(
        sock: Arc<RxSocket>,
        cache: PoolCache,
        vnet_hdr: bool,
        claim: QueueClaim,
    ) -> AfPacketRx {
        let block = sock.next_block.load(Ordering::Relaxed);
        AfPacketRx {
            sock,
            cache,
            vnet_hdr,
            block,
            cursor: None,
            _claim: claim,
        }
    }

    fn ring(&self) -> &Ring {
        // A queue of this kind is only made for a socket with a ring (see `open_rx`).
        self.sock
            .ring
            .as_ref()
            .expect("an AF_PACKET ring queue without a ring")
    }

    fn block_ptr(&self) -> *mut u8 {
        let r = self.ring();
        // SAFETY: block < blocks, so the pointer is inside the mapping.
        unsafe { r.base.as_ptr().add(self.block * r.geometry.block_size) }
    }

    fn status(&self) -> &AtomicU32 {
        // SAFETY: the status word is an aligned u32 inside the mapping; the kernel and we
        // both access it as a whole word.
        unsafe { &*(self.block_ptr().add(BLOCK_STATUS) as *const AtomicU32) }
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        self.status().store(TP_STATUS_KERNEL, Ordering::Release);
        self.block = (self.block + 1) % self.ring().geometry.blocks;
        self.cursor = None;
    }
}

fn rd32(p: *const u8, at: usize) -> u32 {
    // SAFETY: callers pass offsets inside a block header or frame header in the mapping.
    unsafe { std::ptr::read_unaligned(p.add(at) as *const u32) }
}

fn rd16(p: *const u8, at: usize) -> u16 {
    // SAFETY: as in `rd32`.
    unsafe { std::ptr::read_unaligned(p.add(at) as *const u16) }
}

impl RxQueue for AfPacketRx {
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let block_size = self.ring().geometry.block_size;
        let (mut packets, mut bytes, mut errors) = (0usize, 0usize, 0u64);
        while batch.room() > 0 {
            let cur = match self.cursor {
                Some(c) => c,
                None => {
                    if self.status().load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                        break;
                    }
                    let b = self.block_ptr();
                    let c = Cursor {
                        left: rd32(b, BLOCK_NUM_PKTS),
                        at: rd32(b, BLOCK_FIRST_PKT) as usize,
                        segment: 0,
                    };
                    self.cursor = Some(c);
                    c
                }
            };
            if cur.left == 0 {
                self.release_block();
                continue;
            }
            let block = self.block_ptr();
            // SAFETY: the kernel wrote a frame header at `at` inside this block.
            let h = unsafe { block.add(cur.at) };
            let snaplen = rd32(h, PKT_SNAPLEN) as usize;
            let len = rd32(h, PKT_LEN) as usize;
            let status = rd32(h, PKT_STATUS);
            let mac = usize::from(rd16(h, PKT_MAC));
            let next = rd32(h, PKT_NEXT) as usize;
            let in_block = cur.at + mac + snaplen <= block_size && mac >= VNET_HDR_LEN;
            let outcome = if !in_block || snaplen < len || status & TP_STATUS_COPY != 0 {
                Delivered::Dropped
            } else {
                // SAFETY: checked above that the frame lies inside the block.
                let frame = unsafe { std::slice::from_raw_parts(h.add(mac), snaplen) };
                let vlan = (status & TP_STATUS_VLAN_VALID != 0).then(|| VlanTag {
                    tpid: if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                        rd16(h, PKT_VLAN_TPID)
                    } else {
                        0x8100
                    },
                    tci: rd32(h, PKT_VLAN_TCI) as u16,
                });
                let hdr = self.vnet_hdr.then(|| {
                    let mut b = [0u8; VNET_HDR_LEN];
                    // SAFETY: with PACKET_VNET_HDR the kernel puts the header right before
                    // the frame (mac >= VNET_HDR_LEN was checked).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            h.add(mac - VNET_HDR_LEN),
                            b.as_mut_ptr(),
                            VNET_HDR_LEN,
                        )
                    };
                    VnetHdr::from_bytes(&b)
                });
                vnet::deliver(
                    frame,
                    vlan,
                    hdr.as_ref(),
                    cur.segment,
                    true,
                    &mut self.cache,
                    batch,
                )
            };
            match outcome {
                Delivered::Done {
                    packets: p,
                    bytes: b,
                } => {
                    packets += p;
                    bytes += b;
                }
                Delivered::More {
                    packets: p,
                    bytes: b,
                    next: s,
                } => {
                    packets += p;
                    bytes += b;
                    // Batch full or pool dry: the rest of the frame waits for the next call.
                    self.cursor = Some(Cursor { segment: s, ..cur });
                    break;
                }
                Delivered::Dropped => errors += 1,
            }
            self.cursor = Some(Cursor {
                left: cur.left - 1,
                at: cur.at + next,
                segment: 0,
            });
            if cur.left == 1 {
                self.release_block();
            }
        }
        self.sock.counters.add_batch(packets, bytes as u64, errors);
        packets
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.sock.fd.as_raw_fd())
    }
}

impl Drop for AfPacketRx {
    fn drop(&mut self) {
        // A block half read is given back whole (its remaining frames are lost); the next
        // reader starts at the following block, where the kernel continues.
        if self.cursor.is_some() {
            self.release_block();
        }
        self.sock.next_block.store(self.block, Ordering::Relaxed);
    }
}

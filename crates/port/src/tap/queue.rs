//! TAP receive and transmit: one `read(2)` / `writev(2)` per frame (what the tun API
//! offers), each frame preceded by a virtio-net header (10 bytes, or 24 with the tunnel
//! fields, [`crate::vnet_tnl`]; the first ten mean the same in both).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use packet::{Batch, Packet, PoolCache};

use super::TapQueueState;
use crate::claim::QueueClaim;
use crate::vnet::{self, Delivered, VnetHdr, VNET_HDR_LEN};
use crate::vnet_tnl::{self, VNET_HDR_TNL_LEN};
use crate::{RxQueue, TxQueue};

/// Bytes one read may return: a 64 KiB super-packet, its Ethernet header and the
/// (longest) virtio-net header.
const SCRATCH: usize = VNET_HDR_TNL_LEN + 14 + 4 + 65536;

/// Where the last frame read is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landed {
    /// In the super-packet frame `big` (its first `len` bytes).
    Big(usize),
    /// In `buf`, after the header (`hdr_len..len`).
    Buf(usize),
}

/// An open rx queue of a TAP port.
///
/// Each read lands in three pieces: the virtio-net header in `buf`, the frame in a 64 KiB
/// frame of the pool's super-packet sibling (`big`), and anything longer than that frame
/// holds in `buf` after it. A super-packet that can be kept whole (the common case of a
/// host's TCP stream, and of tunnelled ones) then becomes the packet as it is, with no copy
/// beyond the kernel's; anything else is copied out of it (plain frames into pool frames,
/// super-packets that cannot be kept whole cut into segments), and `big` serves the next
/// read. Without a super-packet frame free, reads land in `buf`.
pub(super) struct TapRx {
    q: Arc<TapQueueState>,
    cache: PoolCache,
    /// The virtio-net header of the last read, and the frame when it did not land in `big`
    /// (allocated once when the queue is opened).
    buf: Box<[u8]>,
    /// The super-packet frame reads land in, taken when a super-packet is kept whole.
    big: Option<Packet>,
    /// A frame whose segments did not all fit the last batch: where it is, and the next
    /// segment.
    pending: Option<(Landed, usize)>,
    _claim: QueueClaim,
}

impl TapRx {
    pub(super) fn new(q: Arc<TapQueueState>, cache: PoolCache, claim: QueueClaim) -> TapRx {
        TapRx {
            q,
            cache,
            buf: vec![0u8; SCRATCH].into_boxed_slice(),
            big: None,
            pending: None,
            _claim: claim,
        }
    }

    /// Reads one frame; where it landed, or `None` when nothing waits (or the device went
    /// away, or the read was shorter than the header: `errors` counts that).
    fn read(&mut self, errors: &mut u64) -> Option<Landed> {
        let hdr_len = self.q.hdr_len;
        if self.big.is_none() {
            self.big = self.cache.alloc_gso();
        }
        let cap = self.big.as_mut().map_or(0, |p| {
            let cap = (p.frame_size() - p.headroom()).min(usize::from(u16::MAX));
            p.set_len(cap);
            cap
        });
        let (head, rest) = self.buf.split_at_mut(hdr_len);
        let start = cap.min(rest.len());
        let tail = &mut rest[start..];
        let big: &mut [u8] = match self.big.as_mut() {
            Some(p) => p.data_mut(),
            None => &mut [],
        };
        let iov = [
            libc::iovec {
                iov_base: head.as_mut_ptr().cast(),
                iov_len: head.len(),
            },
            libc::iovec {
                iov_base: big.as_mut_ptr().cast(),
                iov_len: big.len(),
            },
            libc::iovec {
                iov_base: tail.as_mut_ptr().cast(),
                iov_len: tail.len(),
            },
        ];
        // SAFETY: the iovecs point at our own buffer and frame, live for the call.
        let n = unsafe { libc::readv(self.q.fd.as_raw_fd(), iov.as_ptr(), 3) };
        if n <= 0 {
            return None; // EAGAIN: nothing waits (or the device went away).
        }
        let n = n as usize;
        if n < hdr_len {
            *errors += 1;
            return None;
        }
        let len = n - hdr_len;
        if len <= cap {
            return Some(Landed::Big(len));
        }
        // Longer than the super-packet frame holds: gather it in `buf`.
        if let Some(p) = self.big.as_ref() {
            self.buf[hdr_len..hdr_len + cap].copy_from_slice(&p.data()[..cap]);
        }
        Some(Landed::Buf(n))
    }
}

impl RxQueue for TapRx {
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let (mut packets, mut bytes, mut errors) = (0usize, 0usize, 0u64);
        // Bounded by the batch's room: every pass adds a packet, drops a frame, or stops.
        for _ in 0..packet::BATCH_SIZE {
            if batch.room() == 0 {
                break;
            }
            let (at, first) = match self.pending.take() {
                Some(p) => p,
                None => match self.read(&mut errors) {
                    Some(at) => (at, 0),
                    None => break,
                },
            };
            let mut h = [0u8; VNET_HDR_LEN];
            h.copy_from_slice(&self.buf[..VNET_HDR_LEN]);
            let hdr = VnetHdr::from_bytes(&h);
            if let (Landed::Big(len), 0) = (at, first) {
                if let Some(mut p) = self.big.take() {
                    p.set_len(len);
                    if vnet::keep_in_place(&mut p, &hdr) {
                        packets += 1;
                        bytes += len;
                        let _ = batch.push(p);
                        continue;
                    }
                    self.big = Some(p);
                }
            }
            let frame = match (at, self.big.as_ref()) {
                (Landed::Big(len), Some(p)) => &p.data()[..len],
                (Landed::Buf(n), _) => &self.buf[self.q.hdr_len..n],
                (Landed::Big(_), None) => &[][..],
            };
            match vnet::deliver(frame, None, Some(&hdr), first, true, &mut self.cache, batch) {
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
                    next,
                } => {
                    packets += p;
                    bytes += b;
                    self.pending = Some((at, next));
                    break;
                }
                Delivered::Dropped => errors += 1,
            }
        }
        self.q.rx.add_batch(packets, bytes as u64, errors);
        packets
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.q.fd.as_raw_fd())
    }
}

impl Drop for TapRx {
    fn drop(&mut self) {
        if let Some(p) = self.big.take() {
            self.cache.free(p);
        }
    }
}

/// An open tx queue of a TAP port.
pub(super) struct TapTx {
    q: Arc<TapQueueState>,
    cache: PoolCache,
    _claim: QueueClaim,
}

impl TapTx {
    pub(super) fn new(q: Arc<TapQueueState>, cache: PoolCache, claim: QueueClaim) -> TapTx {
        TapTx {
            q,
            cache,
            _claim: claim,
        }
    }
}

impl TxQueue for TapTx {
    fn dropped(&mut self, n: u64) {
        self.q.tx.add_dropped(n);
    }

    fn send(&mut self, batch: &mut Batch) -> usize {
        let mut sent = 0;
        let mut bytes = 0;
        let mut errors = 0;
        let mut done = 0;
        for p in batch.as_mut_slice() {
            // A complete frame goes with an all-zero header; a super-packet kept whole with a
            // request to cut it (the guest or the kernel does; one encapsulated whole in a
            // tunnel only with the tunnel header); one whose headers do not parse is dropped
            // as an error.
            let mut hdr = [0u8; VNET_HDR_TNL_LEN];
            if p.is_gso() {
                let h = if self.q.hdr_len == VNET_HDR_TNL_LEN {
                    vnet_tnl::tx_header(p)
                } else {
                    vnet::tx_header(p).map(|h| {
                        hdr[..VNET_HDR_LEN].copy_from_slice(&h.to_bytes());
                        hdr
                    })
                };
                match h {
                    Ok(h) => hdr = h,
                    Err(_) => {
                        errors += 1;
                        done += 1;
                        continue;
                    }
                }
            }
            let iov = [
                libc::iovec {
                    iov_base: hdr.as_ptr() as *mut libc::c_void,
                    iov_len: self.q.hdr_len,
                },
                libc::iovec {
                    iov_base: p.data().as_ptr() as *mut libc::c_void,
                    iov_len: p.len(),
                },
            ];
            // SAFETY: both iovecs point at live memory for the duration of the call.
            let r = unsafe { libc::writev(self.q.fd.as_raw_fd(), iov.as_ptr(), 2) };
            if r < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                if matches!(
                    e,
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
                ) {
                    break;
                }
                // Refused frame (e.g. the device is down): dropped and counted.
                errors += 1;
            } else {
                sent += 1;
                bytes += p.len();
            }
            done += 1;
        }
        for p in batch.drain_front(done) {
            self.cache.free(p);
        }
        self.q.tx.add_batch(sent, bytes as u64, errors);
        sent
    }
}

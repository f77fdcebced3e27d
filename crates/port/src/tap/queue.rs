//! TAP receive and transmit: one `read(2)` / `writev(2)` per frame (what the tun API
//! offers), each frame preceded by a virtio-net header (10 bytes, or 24 with the tunnel
//! fields, [`crate::vnet_tnl`]; the first ten mean the same in both).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use packet::{Batch, PoolCache};

use super::TapQueueState;
use crate::claim::QueueClaim;
use crate::vnet::{self, Delivered, VnetHdr, VNET_HDR_LEN};
use crate::vnet_tnl::{self, VNET_HDR_TNL_LEN};
use crate::{RxQueue, TxQueue};

/// Bytes one read may return: a 64 KiB super-packet, its Ethernet header and the
/// (longest) virtio-net header.
const SCRATCH: usize = VNET_HDR_TNL_LEN + 14 + 4 + 65536;

/// An open rx queue of a TAP port.
pub(super) struct TapRx {
    q: Arc<TapQueueState>,
    cache: PoolCache,
    /// The last frame read (header included), allocated once when the queue is opened.
    buf: Box<[u8]>,
    /// A frame in `buf` whose segments did not all fit the last batch: (length, next
    /// segment).
    pending: Option<(usize, usize)>,
    _claim: QueueClaim,
}

impl TapRx {
    pub(super) fn new(q: Arc<TapQueueState>, cache: PoolCache, claim: QueueClaim) -> TapRx {
        TapRx {
            q,
            cache,
            buf: vec![0u8; SCRATCH].into_boxed_slice(),
            pending: None,
            _claim: claim,
        }
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
            let (len, first) = match self.pending.take() {
                Some(p) => p,
                None => {
                    // SAFETY: reading into our own buffer of SCRATCH bytes.
                    let n = unsafe {
                        libc::read(
                            self.q.fd.as_raw_fd(),
                            self.buf.as_mut_ptr().cast(),
                            self.buf.len(),
                        )
                    };
                    if n <= 0 {
                        break; // EAGAIN: nothing waits (or the device went away).
                    }
                    (n as usize, 0)
                }
            };
            let hdr_len = self.q.hdr_len;
            if len < hdr_len {
                errors += 1;
                continue;
            }
            let mut h = [0u8; VNET_HDR_LEN];
            h.copy_from_slice(&self.buf[..VNET_HDR_LEN]);
            let hdr = VnetHdr::from_bytes(&h);
            let frame = &self.buf[hdr_len..len];
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
                    self.pending = Some((len, next));
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

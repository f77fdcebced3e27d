//! Transmit: one `sendmmsg(2)` per batch.
//!
//! Why not the TPACKET transmit ring: a ring slot stays busy until the kernel frees the
//! socket buffer built from it, which on a veth happens only after the peer consumed the
//! frame, so the slot's lifetime is out of the switch's hands, and filling the ring is a copy
//! of its own. With `sendmmsg` the kernel copies each frame straight from the pool frame, the
//! frames go back to the pool right after the call, and the cost is the same one system call
//! per batch. The socket bypasses the qdisc (`PACKET_QDISC_BYPASS`).
//!
//! With virtio-net headers on, every message is two pieces: a header and the frame. The
//! header is all zero (a complete frame, no offload) except before a TCP super-packet kept
//! whole ([`packet::gso`]), where it asks the kernel to cut it ([`crate::vnet::tx_header`]):
//! a veth or a TSO-capable NIC then carries it as one packet.

use std::os::fd::AsRawFd;
use std::sync::Arc;

use packet::{Batch, PoolCache, BATCH_SIZE};

use crate::claim::QueueClaim;
use crate::close::ClosingFd;
use crate::vnet::{self, VNET_HDR_LEN};
use crate::{QueueCounters, TxQueue};

/// One transmit socket, shared by the port and its open tx queue.
pub(super) struct TxSocket {
    /// Closed off the dropping thread ([`crate::close`]).
    pub fd: ClosingFd,
    pub counters: QueueCounters,
}

/// The all-zero virtio-net header sent before every frame.
static NO_OFFLOAD: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

/// The message vectors of one batch, filled per call (no allocation).
struct Vectors {
    msgs: [libc::mmsghdr; BATCH_SIZE],
    iovs: [[libc::iovec; 2]; BATCH_SIZE],
    /// Headers of the super-packets of the batch.
    hdrs: [[u8; VNET_HDR_LEN]; BATCH_SIZE],
}

/// An open tx queue of an AF_PACKET port.
pub(super) struct AfPacketTx {
    sock: Arc<TxSocket>,
    cache: PoolCache,
    vnet_hdr: bool,
    v: Box<Vectors>,
    _claim: QueueClaim,
}

// SAFETY: the raw pointers in `Vectors` are only meaningful during one `send` call, which
// refills them; between calls they are never dereferenced.
unsafe impl Send for AfPacketTx {}

impl AfPacketTx {
    pub(super) fn new(
        sock: Arc<TxSocket>,
        cache: PoolCache,
        vnet_hdr: bool,
        claim: QueueClaim,
    ) -> AfPacketTx {
        // SAFETY: mmsghdr and iovec are plain data; all-zero is valid (null pointers, 0
        // lengths).
        let v = Box::new(unsafe { std::mem::zeroed::<Vectors>() });
        AfPacketTx {
            sock,
            cache,
            vnet_hdr,
            v,
            _claim: claim,
        }
    }

    /// One `sendmmsg` over `batch[from..]`; returns how many were sent, or the errno.
    fn send_from(&mut self, batch: &mut Batch, from: usize) -> Result<usize, i32> {
        let pkts = &mut batch.as_mut_slice()[from..];
        let pieces = if self.vnet_hdr { 2 } else { 1 };
        for (i, p) in pkts.iter_mut().enumerate() {
            let mut hdr = NO_OFFLOAD.as_ptr();
            if self.vnet_hdr && p.is_gso() {
                match vnet::tx_header(p) {
                    Ok(h) => {
                        self.v.hdrs[i] = h.to_bytes();
                        hdr = self.v.hdrs[i].as_ptr();
                    }
                    // Headers that do not parse: sent plain, so the kernel refuses it as
                    // longer than the MTU and it is counted as an error.
                    Err(_) => {
                        p.set_gso(None);
                    }
                }
            }
            let iov = &mut self.v.iovs[i];
            let data = libc::iovec {
                iov_base: p.data().as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            };
            if self.vnet_hdr {
                iov[0] = libc::iovec {
                    iov_base: hdr as *mut libc::c_void,
                    iov_len: VNET_HDR_LEN,
                };
                iov[1] = data;
            } else {
                iov[0] = data;
            }
            let m = &mut self.v.msgs[i];
            m.msg_hdr.msg_name = std::ptr::null_mut();
            m.msg_hdr.msg_namelen = 0;
            m.msg_hdr.msg_iov = iov.as_mut_ptr();
            m.msg_hdr.msg_iovlen = pieces;
            m.msg_hdr.msg_control = std::ptr::null_mut();
            m.msg_hdr.msg_controllen = 0;
            m.msg_hdr.msg_flags = 0;
            m.msg_len = 0;
        }
        // SAFETY: msgs[..n] point at iovecs that point at live packet data (borrowed from
        // `batch` for this call) and at a static header or one in `self.v`; the kernel only
        // reads them.
        let r = unsafe {
            libc::sendmmsg(
                self.sock.fd.as_raw_fd(),
                self.v.msgs.as_mut_ptr(),
                pkts.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            Ok(r as usize)
        }
    }
}

impl TxQueue for AfPacketTx {
    fn dropped(&mut self, n: u64) {
        self.sock.counters.add_dropped(n);
    }

    fn send(&mut self, batch: &mut Batch) -> usize {
        let mut total = 0;
        // Bounded: each pass sends at least one frame, drops one refused frame, or stops.
        for _ in 0..BATCH_SIZE {
            if batch.is_empty() {
                break;
            }
            match self.send_from(batch, 0) {
                Ok(0) => break,
                Ok(n) => {
                    let mut bytes = 0;
                    for p in batch.drain_front(n) {
                        bytes += p.len();
                        self.cache.free(p);
                    }
                    self.sock.counters.add(n as u64, bytes as u64);
                    total += n;
                }
                // Socket buffer or device queue full: the rest stays in the batch.
                Err(libc::EAGAIN) | Err(libc::ENOBUFS) | Err(libc::EINTR) => break,
                // The first frame itself is refused (longer than the MTU, link down...):
                // it is dropped and counted as an error; the others get their chance.
                Err(_) => {
                    for p in batch.drain_front(1) {
                        self.cache.free(p);
                    }
                    self.sock.counters.add_errors(1);
                }
            }
        }
        total
    }
}

//! One AF_XDP socket per queue, set up with xdpilone: the UMEM is the whole packet pool, and
//! the socket's four rings are split between the receive side (rx + fill) and the transmit
//! side (tx + completion), so the two can be owned by different threads.
//!
//! UMEM choice: every socket registers the *whole* pool region as its own UMEM (one
//! `XDP_UMEM_REG` per socket, chunk size = [`FRAME_SIZE`], no UMEM headroom). A frame's UMEM
//! address is then `frame * FRAME_SIZE + offset` on every socket of every port, so a packet
//! received on one AF_XDP port is put on another port's tx ring as it is: no copy, no address
//! translation. The alternative, `XDP_SHARED_UMEM`, needs one fill/completion ring pair per
//! (interface, queue) anyway and ties the sockets' lifetimes to the first one; registering the
//! region N times costs only pinning bookkeeping (the pages are pinned once more per socket,
//! which root, with CAP_IPC_LOCK, is not charged for).
//!
//! Frames and the kernel: the receive side keeps the fill ring topped up to a target with
//! frames from its own [`packet::PoolCache`]; each received descriptor becomes a `Packet` on the
//! same frame. The transmit side puts packets' frames on the tx ring and, when the kernel
//! reports them on the completion ring, gives them back to its own cache. Each side marks the
//! frames the kernel holds in a [`FrameSet`].
//!
//! Closing: an [`Xsk`] is shared by the port and its open queues; the last one to go drops it,
//! with both ring sets back in their slots. It then closes the socket and gives back to the
//! pool the frames the receive side had handed over — in copy mode, where the kernel has
//! stopped touching them when `close` returns. In zero-copy mode the driver lets go of the
//! UMEM later (the kernel releases it from a work queue), so those frames stay out of the pool,
//! as do tx frames whose completion had not arrived (at most a ring's worth each, once).

use std::ffi::CString;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use packet::{Pool, FRAME_SIZE};
use xdpilone::{
    CompletionQueue, FillQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig,
    User,
};

use super::frames::FrameSet;
use super::sys::{self, advice};
use super::ZeroCopy;
use crate::QueueCounters;

/// Entries in each of the four rings of a socket.
pub(crate) const RING_SIZE: u32 = 1024;

/// The receive side's rings of one socket, and the frames the kernel holds on that side.
pub(crate) struct RxRings {
    pub(crate) rx: RingRx,
    pub(crate) fill: FillQueue,
    /// Frames put on the fill ring and not yet received back.
    pub(crate) held: FrameSet,
    /// `held.len()`, kept as a number.
    pub(crate) in_kernel: u32,
}

/// The transmit side's rings of one socket, and the frames in flight.
pub(crate) struct TxRings {
    pub(crate) tx: RingTx,
    pub(crate) comp: CompletionQueue,
    /// Frames put on the tx ring and not yet seen on the completion ring.
    pub(crate) held: FrameSet,
    /// `held.len()`, kept as a number.
    pub(crate) in_flight: u32,
}

/// Where a queue's rings wait while no queue object holds them.
pub(crate) type Slot<T> = Mutex<Option<T>>;

/// One bound AF_XDP socket (one queue of the interface), shared by the port and its queues.
pub(crate) struct Xsk {
    /// Receive rings, taken by the open rx queue.
    pub(crate) rx: Slot<RxRings>,
    /// Transmit rings, taken by the open tx queue.
    pub(crate) tx: Slot<TxRings>,
    /// Holds the socket open while queues come and go; the last holder of its descriptor.
    user: ManuallyDrop<User>,
    /// The pool whose region is the UMEM.
    pub(crate) pool: Pool,
    /// Whether the kernel runs this socket in zero-copy mode.
    pub(crate) zero_copy: bool,
    /// Receive counters (written by the rx queue).
    pub(crate) rx_counters: Arc<QueueCounters>,
    /// Transmit counters (written by the tx queue).
    pub(crate) tx_counters: Arc<QueueCounters>,
}

impl Xsk {
    /// Creates the socket for `queue` of `ifname`, registers `pool` as its UMEM, maps its
    /// rings and binds it. `native` says whether the XDP program runs in driver mode (zero-copy
    /// needs it).
    pub(crate) fn open(
        pool: &Pool,
        ifname: &str,
        queue: u32,
        zero_copy: ZeroCopy,
        native: bool,
    ) -> Result<Arc<Xsk>, String> {
        let errno = |what: &str, e: xdpilone::Errno| {
            advice(
                &format!("queue {queue}: {what}"),
                &std::io::Error::from_raw_os_error(e.get_raw().abs()),
            )
        };
        let (base, len) = pool.region();
        let config = UmemConfig {
            fill_size: RING_SIZE,
            complete_size: RING_SIZE,
            frame_size: FRAME_SIZE as u32,
            headroom: 0,
            flags: 0,
        };
        // SAFETY: the region is the pool's page-aligned mapping of `len` bytes, and it stays
        // mapped while any socket exists: every queue object and the port hold a `Pool`
        // clone, and the kernel pins the pages for the UMEM's lifetime.
        let umem = unsafe { Umem::new(config, NonNull::slice_from_raw_parts(base, len)) }
            .map_err(|e| errno("registering the packet pool as UMEM", e))?;
        let mut info = IfInfo::invalid();
        let cname = CString::new(ifname).map_err(|_| format!("'{ifname}' contains NUL"))?;
        info.from_name(&cname)
            .map_err(|e| errno(&format!("looking up {ifname}"), e))?;
        info.set_queue(queue);
        let sock = Socket::with_shared(&info, &umem).map_err(|e| errno("AF_XDP socket", e))?;
        let device = umem
            .fq_cq(&sock)
            .map_err(|e| errno("fill and completion rings", e))?;
        let mut bind_flags = SocketConfig::XDP_BIND_NEED_WAKEUP;
        match zero_copy {
            ZeroCopy::On => bind_flags |= SocketConfig::XDP_BIND_ZEROCOPY,
            ZeroCopy::Off => bind_flags |= SocketConfig::XDP_BIND_COPY,
            // Generic XDP hands frames over by copy anyway; in native mode the kernel picks
            // zero-copy when the driver has it and copy mode otherwise.
            ZeroCopy::Auto if !native => bind_flags |= SocketConfig::XDP_BIND_COPY,
            ZeroCopy::Auto => {}
        }
        let ring = std::num::NonZeroU32::new(RING_SIZE);
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: ring,
                    tx_size: ring,
                    bind_flags,
                },
            )
            .map_err(|e| errno("rx and tx rings", e))?;
        let rx = user.map_rx().map_err(|e| errno("mapping the rx ring", e))?;
        let tx = user.map_tx().map_err(|e| errno("mapping the tx ring", e))?;
        umem.bind(&user).map_err(|e| {
            let io = std::io::Error::from_raw_os_error(e.get_raw().abs());
            match (zero_copy, e.get_raw().abs()) {
                (ZeroCopy::On, libc::EOPNOTSUPP | libc::EINVAL | libc::EPROTONOSUPPORT) => {
                    format!(
                        "queue {queue}: binding in zero-copy mode: {io}; the driver of \
                         {ifname} has no AF_XDP zero-copy (or XDP runs in skb mode): use \
                         zerocopy=auto or zerocopy=off"
                    )
                }
                (_, libc::EINVAL) => format!(
                    "queue {queue}: binding to {ifname}: {io}; check that {ifname} has \
                     receive queue {queue} (ethtool -l {ifname})"
                ),
                _ => advice(&format!("queue {queue}: binding to {ifname}"), &io),
            }
        })?;
        let (fill, comp) = device.into_parts();
        let zero_copy = sys::is_zero_copy(user.as_raw_fd());
        let frames = pool.frames();
        Ok(Arc::new(Xsk {
            rx: Mutex::new(Some(RxRings {
                rx,
                fill,
                held: FrameSet::new(frames),
                in_kernel: 0,
            })),
            tx: Mutex::new(Some(TxRings {
                tx,
                comp,
                held: FrameSet::new(frames),
                in_flight: 0,
            })),
            user: ManuallyDrop::new(user),
            pool: pool.clone(),
            zero_copy,
            rx_counters: Arc::default(),
            tx_counters: Arc::default(),
        }))
    }

    /// The socket's descriptor (for the XSKMAP and for `poll`).
    pub(crate) fn fd(&self) -> libc::c_int {
        self.user.as_raw_fd()
    }

    /// The kernel's counters for this socket.
    pub(crate) fn kernel_stats(&self) -> sys::XskStats {
        sys::xsk_stats(self.fd())
    }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // Every queue object holds an `Arc<Xsk>` and puts its rings back before letting go of
        // it, so both ring sets are here.
        let rx = self.rx.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        let tx = self.tx.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        let mut cache = self.pool.cache();
        let frames = self.pool.frames();
        let mut in_flight = 0;
        if let Some(mut tx) = tx {
            tx.reap(frames, &mut cache, |_| {});
            in_flight = tx.in_flight;
        }
        let held = rx.map(|mut rx| std::mem::replace(&mut rx.held, FrameSet::new(0)));
        // SAFETY: taken once, here. With the rings gone this was the last holder of the
        // descriptor: the socket closes now, and the kernel unbinds it before `close` returns.
        drop(unsafe { ManuallyDrop::take(&mut self.user) });
        let mut lost = in_flight;
        if let Some(mut held) = held {
            if self.zero_copy {
                lost += held.len();
            } else {
                held.drain().for_each(|f| cache.put_frame(f));
            }
        }
        if lost > 0 {
            tracing::debug!(
                "AF_XDP socket closed with {lost} frame(s) still held by the kernel; they stay \
                 out of the pool"
            );
        }
    }
}

/// Takes a queue's rings out of their slot, or explains that the queue is already open.
pub(crate) fn claim<T>(slot: &Slot<T>, port: &str, what: &str) -> Result<T, crate::PortError> {
    slot.lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .ok_or_else(|| {
            crate::PortError::new(
                port,
                format!(
                    "{what} is already open; a queue has one owner at a time \
                     (drop the open queue first)"
                ),
            )
        })
}

/// Puts a queue's rings back (the queue object is being dropped).
pub(crate) fn release<T>(slot: &Slot<T>, rings: T) {
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(rings);
}

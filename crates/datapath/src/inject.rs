//! Packet-out: packets the control side hands to the datapath together with the datapath
//! actions to run on them (OpenFlow PACKET_OUT, already resolved by the agent: output to
//! TABLE translated through the pipeline, FLOOD expanded, and so on).
//!
//! Owner and size: one bounded queue per datapath ([`INJECT_QUEUE`] entries); the
//! control side holds any number of [`Injector`]s, poll-mode thread 0 owns the receiving end
//! and drains at most [`INJECT_BURST`] packets per poll, before it receives. An empty queue
//! costs that thread one atomic load per poll; a full queue makes [`Injector::inject`] fail
//! instead of waiting, so neither side ever blocks the other. The agent avoids that error by
//! asking [`Injector::has_room`] first and, when the queue is full, reading no more from that
//! controller until it drains (TCP pushes back on the controller). Packets are copied into frames of the datapath's pool on the control
//! side; the thread frees them into its own cache once sent.
//!
//! Waking: thread 0 may sleep in `poll(2)` when idle (see [`crate::idle`]); an eventfd joins
//! its descriptors and the control side writes it after queueing — only when the thread is
//! not already signalled (a flag), so a burst of packet-outs costs one write, and the thread
//! reads the eventfd only when the flag is up (one atomic load per poll otherwise).
//!
//! The actions are compiled by the thread (its tx table decides port indices); that is one
//! small allocation-free pass once the thread's scratch has grown, and the `Vec` of actions
//! is freed by the thread. Packet-outs are control traffic, not the per-packet path.

use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use packet::{extract_packet, FlowKey, Packet, PoolCache};
use pipeline::DpAction;

use crate::execute::Executor;
use crate::megaflow::{Actions, PortMap};
use crate::stats::LocalStats;
use crate::upcall::Upcall;

/// Packets the packet-out queue holds.
pub const INJECT_QUEUE: usize = 1024;

/// Most injected packets a thread runs per poll.
pub const INJECT_BURST: usize = 32;

/// A packet and the actions to run on it.
#[derive(Debug)]
pub struct Injected {
    /// The packet (a frame of the datapath's pool), `meta.in_port` set.
    pub packet: Packet,
    /// What to do with it.
    pub actions: Vec<DpAction>,
}

/// Why a packet could not be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectError {
    /// The queue is full: the poll thread is behind. Retry later.
    QueueFull,
    /// The datapath is stopped (or was never started).
    Stopped,
    /// No free frame in the pool, or the packet is larger than a frame.
    NoFrame,
}

impl fmt::Display for InjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InjectError::QueueFull => {
                "the packet-out queue is full (the poll thread is behind); retry later"
            }
            InjectError::Stopped => "the datapath is not running; start it before packet-outs",
            InjectError::NoFrame => {
                "no pool frame for the packet (pool exhausted or packet larger than a frame)"
            }
        })
    }
}

impl std::error::Error for InjectError {}

/// A wake-up between a producer and a sleeping consumer: an eventfd and the flag that says it
/// was written and not yet read. Packet-outs wake poll thread 0 with one; packet-ins wake the
/// control side ([`crate::Running::packet_in_wake`]) with another.
#[derive(Debug)]
pub struct Wake {
    fd: Option<OwnedFd>,
    signalled: AtomicBool,
}

impl Wake {
    /// A wake-up; without an eventfd (the kernel refused one) the consumer's own timeouts
    /// bound the delay.
    pub(crate) fn new() -> Wake {
        // SAFETY: eventfd has no memory preconditions; a negative result is an error.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        Wake {
            // SAFETY: `fd` is a fresh descriptor we own when non-negative.
            fd: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }),
            signalled: AtomicBool::new(false),
        }
    }

    /// The descriptor to poll (readable while signalled).
    pub fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Signals the consumer (one write per burst: nothing while already signalled).
    #[inline]
    pub(crate) fn signal(&self) {
        if self.signalled.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(fd) = &self.fd {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writing 8 bytes from a live buffer to our eventfd; failure (counter
            // full) still leaves it readable.
            unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
        }
    }

    /// Consumes the signal; call before looking at what was produced, so that anything
    /// produced meanwhile signals again.
    #[inline]
    pub fn clear(&self) {
        if !self.signalled.load(Ordering::Acquire) {
            return;
        }
        if let Some(fd) = &self.fd {
            let mut buf = [0u8; 8];
            // SAFETY: reading 8 bytes into a live buffer from our non-blocking eventfd.
            unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        }
        self.signalled.store(false, Ordering::Release);
    }
}

/// The control side's handle on the packet-out queue; cheap to clone.
#[derive(Clone)]
pub struct Injector {
    tx: SyncSender<Injected>,
    cache: Arc<Mutex<PoolCache>>,
    wake: Arc<Wake>,
    /// Packets queued and not yet taken by the thread.
    depth: Arc<AtomicUsize>,
}

impl fmt::Debug for Injector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injector").finish_non_exhaustive()
    }
}

impl Injector {
    pub(crate) fn new(
        tx: SyncSender<Injected>,
        cache: PoolCache,
        wake: Arc<Wake>,
        depth: Arc<AtomicUsize>,
    ) -> Injector {
        Injector {
            tx,
            cache: Arc::new(Mutex::new(cache)),
            wake,
            depth,
        }
    }

    /// Whether the queue has room for another packet now (a snapshot: another injector may
    /// take the room first, and then [`Injector::inject`] says [`InjectError::QueueFull`]).
    pub fn has_room(&self) -> bool {
        self.depth.load(Ordering::Acquire) < INJECT_QUEUE
    }

    /// Copies `data` into a pool frame and queues it with `actions`, as if received on
    /// `in_port`. Never waits.
    pub fn inject(
        &self,
        data: &[u8],
        in_port: u32,
        actions: Vec<DpAction>,
    ) -> Result<(), InjectError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut packet = cache.alloc_from(data).ok_or(InjectError::NoFrame)?;
        packet.meta.in_port = in_port;
        // Counted before it is queued, so that the thread never takes one not yet counted.
        self.depth.fetch_add(1, Ordering::AcqRel);
        match self.tx.try_send(Injected { packet, actions }) {
            Ok(()) => {
                self.wake.signal();
                Ok(())
            }
            Err(TrySendError::Full(i)) => {
                self.depth.fetch_sub(1, Ordering::AcqRel);
                cache.free(i.packet);
                Err(InjectError::QueueFull)
            }
            Err(TrySendError::Disconnected(i)) => {
                self.depth.fetch_sub(1, Ordering::AcqRel);
                cache.free(i.packet);
                Err(InjectError::Stopped)
            }
        }
    }
}

/// The receiving end, owned by one poll-mode thread.
pub(crate) struct InjectQueue {
    rx: Receiver<Injected>,
    actions: Actions,
    key: FlowKey,
    wake: Arc<Wake>,
    depth: Arc<AtomicUsize>,
}

impl InjectQueue {
    pub(crate) fn new(
        rx: Receiver<Injected>,
        wake: Arc<Wake>,
        depth: Arc<AtomicUsize>,
    ) -> InjectQueue {
        InjectQueue {
            rx,
            actions: Actions::default(),
            key: FlowKey::ZERO,
            wake,
            depth,
        }
    }

    /// The eventfd that wakes the thread, to poll beside its rx queues.
    pub(crate) fn wake_fd(&self) -> Option<RawFd> {
        self.wake.raw_fd()
    }

    /// Runs up to [`INJECT_BURST`] queued packets through `exec` (outputs are buffered; the
    /// caller flushes). Returns how many ran.
    pub(crate) fn drain(
        &mut self,
        exec: &mut Executor,
        ports: &PortMap,
        upcall: &dyn Upcall,
        now_ns: &dyn Fn() -> u64,
        st: &mut LocalStats,
    ) -> usize {
        // Clear the wake-up before looking, so a packet queued meanwhile signals again.
        self.wake.clear();
        let mut n = 0;
        while n < INJECT_BURST {
            let Ok(Injected {
                mut packet,
                actions,
            }) = self.rx.try_recv()
            else {
                break;
            };
            if n == 0 {
                exec.now_ns = now_ns();
            }
            // Rewrites need the header offsets extraction records.
            extract_packet(&mut packet, &mut self.key);
            self.actions
                .compile(&actions, ports, &|id| upcall.meter(id));
            exec.run(packet, &self.actions, st);
            n += 1;
        }
        if n > 0 {
            self.depth.fetch_sub(n, Ordering::AcqRel);
        }
        n
    }

    /// Frees every queued packet (shutdown).
    pub(crate) fn discard(&mut self, cache: &mut PoolCache) {
        while let Ok(i) = self.rx.try_recv() {
            self.depth.fetch_sub(1, Ordering::AcqRel);
            cache.free(i.packet);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn wake_signals_once_and_clears() {
        let w = Wake::new();
        let fd = w.raw_fd().expect("eventfd");
        assert!(!readable(fd));
        w.signal();
        w.signal();
        assert!(readable(fd), "a signal makes the thread's poll return");
        w.clear();
        assert!(!readable(fd), "one read clears however many signals came");
        w.clear();
        w.signal();
        assert!(readable(fd), "signals again after a clear");
    }
}

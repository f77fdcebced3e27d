//! Handing a ring from the control thread to the poll thread that owns its queue, and back.
//!
//! The protocol thread changes a ring's set-up at any time (a memory table, a call eventfd,
//! a stop before the guest reboots, a disconnect); the poll thread uses it per batch. They
//! meet in a [`VringSlot`] without a lock on the data path:
//!
//! - the control side publishes a [`LiveRing`] (or `None`: stopped) with `arc-swap`;
//! - the owner marks itself `busy` (one sequentially consistent store), loads the current
//!   ring, does its batch, stores how far it got (`next_avail`), and clears `busy`;
//! - after publishing, the control side waits while `busy` is set. Once it is clear, every
//!   later batch sees the new value, and `next_avail` is where the old ring stopped: the
//!   answer to GET_VRING_BASE, or the base of the ring that replaces it.
//!
//! A ring's guest memory is unmapped when the last `Arc` of it goes: never under a batch.
//!
//! Sleeping: each slot has an epoll descriptor — the owner's readiness descriptor, stable
//! for the queue's life — that holds the ring's current kick eventfd (the control side swaps
//! it as SET_VRING_KICK brings new ones) and a wake eventfd the control side signals when it
//! publishes a ring, so a poll thread asleep on an idle port wakes for a new or restarted
//! ring and, once its queue asked the guest to kick ([`SplitRing::enable_kicks`]), for the
//! guest's next frame.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use super::memory::GuestMemory;
use super::ring::SplitRing;

/// Ids of published rings, so an owner knows a new one from the one it had.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What the negotiated features mean for the data path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetFeatures {
    /// Bytes of the virtio-net header before each frame: 12 with `VIRTIO_F_VERSION_1` or
    /// mergeable buffers, else 10.
    pub hdr_len: usize,
    /// Mergeable receive buffers: a frame to the guest may span several heads.
    pub mrg_rxbuf: bool,
    /// The guest takes TCP super-packets over IPv4.
    pub guest_tso4: bool,
    /// The guest takes TCP super-packets over IPv6.
    pub guest_tso6: bool,
    /// The guest takes super-packets with ECN set.
    pub guest_ecn: bool,
}

/// A ring ready for its owner: the ring, the memory it lives in, where to start, how to
/// interrupt the guest.
#[derive(Debug)]
pub struct LiveRing {
    id: u64,
    /// The ring.
    pub ring: SplitRing,
    /// Keeps the guest memory mapped while the ring is in use.
    pub mem: Arc<GuestMemory>,
    /// The available index to start at.
    pub base: u16,
    /// The call eventfd (`None`: the guest polls, never interrupt).
    pub call: Option<OwnedFd>,
    /// The kick eventfd (non-blocking), drained by an owner that asked for kicks.
    pub kick: Option<OwnedFd>,
    /// Header and offload settings.
    pub net: NetFeatures,
}

impl LiveRing {
    /// A ring to publish.
    pub fn new(
        ring: SplitRing,
        mem: Arc<GuestMemory>,
        base: u16,
        call: Option<OwnedFd>,
        net: NetFeatures,
    ) -> LiveRing {
        LiveRing {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            ring,
            mem,
            base,
            call,
            kick: None,
            net,
        }
    }

    /// The same ring with kick eventfd `kick` (which the owner drains).
    pub fn with_kick(mut self, kick: Option<OwnedFd>) -> LiveRing {
        self.kick = kick;
        self
    }

    /// Reads the kick eventfd empty (one system call; when an owner stops asking for kicks).
    pub fn drain_kick(&self) {
        if let Some(fd) = &self.kick {
            drain(fd.as_raw_fd());
        }
    }

    /// Interrupts the guest (one eventfd write), when it has a call eventfd.
    #[inline]
    pub fn interrupt(&self) {
        if let Some(fd) = &self.call {
            let one: u64 = 1;
            // SAFETY: an 8-byte write from a local to an eventfd we hold open.
            let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }
}

/// Reads eventfd `fd` empty (it is non-blocking).
fn drain(fd: RawFd) {
    let mut v = 0u64;
    // SAFETY: an 8-byte read into a local from a descriptor we hold open.
    let _ = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// Makes an owned descriptor from a system call's result.
fn owned(fd: RawFd, what: &str) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    // SAFETY: a descriptor the call just created, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The meeting point of one ring's control side and owner; see the [module docs](self).
#[derive(Debug)]
pub struct VringSlot {
    live: ArcSwapOption<LiveRing>,
    busy: AtomicBool,
    next_avail: AtomicU16,
    /// The owner's readiness descriptor: kick and wake eventfds.
    epoll: OwnedFd,
    /// Signalled when a ring is published.
    wake: OwnedFd,
    /// The kick eventfd in `epoll` now (control side).
    kick: Mutex<Option<RawFd>>,
    /// Taken by a transmit queue for a batch on this ring ([`RingUser::with_shared`]).
    tx_lock: AtomicBool,
    /// A ring is published.
    running: AtomicBool,
}

impl VringSlot {
    /// A stopped slot with its epoll and wake descriptors.
    pub fn new() -> std::io::Result<VringSlot> {
        // SAFETY: plain system calls creating new descriptors.
        let epoll = owned(
            unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
            "epoll_create1",
        )?;
        // SAFETY: as above.
        let wake = owned(
            unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) },
            "eventfd",
        )?;
        let slot = VringSlot {
            live: ArcSwapOption::empty(),
            busy: AtomicBool::new(false),
            next_avail: AtomicU16::new(0),
            epoll,
            wake,
            kick: Mutex::new(None),
            tx_lock: AtomicBool::new(false),
            running: AtomicBool::new(false),
        };
        slot.watch(slot.wake.as_raw_fd(), true)?;
        Ok(slot)
    }

    fn watch(&self, fd: RawFd, add: bool) -> std::io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        let op = if add {
            libc::EPOLL_CTL_ADD
        } else {
            libc::EPOLL_CTL_DEL
        };
        // SAFETY: valid epoll and target descriptors, a valid event.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut ev) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Control side: the ring's kick eventfd is now `kick` (made non-blocking here); the
    /// returned duplicate goes into the next [`LiveRing`].
    pub fn set_kick(&self, kick: Option<&File>) -> Option<OwnedFd> {
        let mut cur = self.kick.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = cur.take() {
            let _ = self.watch(old, false);
            // SAFETY: `old` is the duplicate this slot kept open (below).
            drop(unsafe { OwnedFd::from_raw_fd(old) });
        }
        let f = kick?;
        // SAFETY: F_SETFL on a descriptor we hold.
        unsafe {
            let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        let kept = f.try_clone().ok()?;
        let raw = std::os::fd::IntoRawFd::into_raw_fd(kept);
        if self.watch(raw, true).is_err() {
            // SAFETY: `raw` is ours (just duplicated).
            drop(unsafe { OwnedFd::from_raw_fd(raw) });
            return None;
        }
        *cur = Some(raw);
        f.try_clone().ok().map(OwnedFd::from)
    }

    /// The owner's readiness descriptor.
    pub fn readiness_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }
    /// Control side: stops the ring and returns where it stopped (the owner's next
    /// available index, or the base it was started with if no batch ran).
    pub fn stop(&self) -> u16 {
        self.running.store(false, Ordering::Relaxed);
        self.live.store(None);
        self.quiesce();
        self.next_avail.load(Ordering::Acquire)
    }

    /// Control side: starts `ring` (the slot must be stopped).
    pub fn start(&self, ring: Arc<LiveRing>) {
        self.next_avail.store(ring.base, Ordering::Release);
        self.live.store(Some(ring));
        self.running.store(true, Ordering::Relaxed);
        self.quiesce();
        // Wake an owner asleep on this slot: it has a ring to poll.
        let one: u64 = 1;
        // SAFETY: an 8-byte write from a local to our eventfd.
        let _ = unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Whether the published ring's guest takes TCP super-packets whole (TSO for IPv4 and
    /// for IPv6, as Linux guests negotiate); false with no ring. A hint, as
    /// [`VringSlot::has_ring`].
    pub fn guest_tso(&self) -> bool {
        self.live
            .load()
            .as_ref()
            .is_some_and(|l| l.net.guest_tso4 && l.net.guest_tso6)
    }

    /// Whether a ring is published (a hint: it may stop the next moment).
    #[inline]
    pub fn has_ring(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    /// Waits until no batch that may have seen the previous value runs.
    fn quiesce(&self) {
        fence(Ordering::SeqCst);
        let start = Instant::now();
        while self.busy.load(Ordering::SeqCst) {
            if start.elapsed() > Duration::from_secs(1) {
                tracing::warn!("vhost-user: a poll thread held a ring for over 1 s");
                return;
            }
            std::thread::yield_now();
        }
    }
}

/// A user's side of a slot. The position in the ring lives in the slot (`next_avail`), so
/// several transmit queues may take turns on one ring ([`RingUser::with_shared`]) when the
/// guest runs fewer queue pairs than the port has.
#[derive(Debug)]
pub struct RingUser {
    slot: Arc<VringSlot>,
    /// The ring this user last saw.
    id: u64,
}

impl RingUser {
    /// A user of `slot`.
    pub fn new(slot: Arc<VringSlot>) -> RingUser {
        RingUser { slot, id: 0 }
    }

    /// The slot this user uses.
    pub fn slot(&self) -> &VringSlot {
        &self.slot
    }

    /// Runs one batch `f` on the current ring with the ring's position (which `f` advances:
    /// heads are completed in order, so it is both the next available and the next used
    /// position) and whether the ring is new to this user; `None` when the ring is stopped.
    /// A ring new to this user has the guest asked not to kick. Only one user may call this
    /// on a slot at a time: the queue that owns it, or [`RingUser::with_shared`].
    #[inline]
    pub fn with<R>(&mut self, f: impl FnOnce(&LiveRing, &mut u16, bool) -> R) -> Option<R> {
        self.slot.busy.store(true, Ordering::SeqCst);
        let guard = self.slot.live.load();
        let r = guard.as_ref().map(|live| {
            let fresh = live.id != self.id;
            if fresh {
                self.id = live.id;
                live.ring
                    .suppress_kicks(self.slot.next_avail.load(Ordering::Acquire));
                drain(self.slot.wake.as_raw_fd());
            }
            let mut pos = self.slot.next_avail.load(Ordering::Relaxed);
            let r = f(live, &mut pos, fresh);
            self.slot.next_avail.store(pos, Ordering::Release);
            r
        });
        drop(guard);
        self.slot.busy.store(false, Ordering::Release);
        r
    }

    /// [`RingUser::with`] for a slot other users may take turns on: under the slot's
    /// transmit lock (uncontended, one atomic swap, while each queue has its own ring).
    #[inline]
    pub fn with_shared<R>(&mut self, f: impl FnOnce(&LiveRing, &mut u16, bool) -> R) -> Option<R> {
        while self.slot.tx_lock.swap(true, Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let r = self.with(f);
        self.slot.tx_lock.store(false, Ordering::Release);
        r
    }
}

impl Drop for VringSlot {
    fn drop(&mut self) {
        self.set_kick(None);
    }
}

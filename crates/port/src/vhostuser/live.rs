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

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
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
            net,
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

/// The meeting point of one ring's control side and owner; see the [module docs](self).
#[derive(Debug, Default)]
pub struct VringSlot {
    live: ArcSwapOption<LiveRing>,
    busy: AtomicBool,
    next_avail: AtomicU16,
}

impl VringSlot {
    /// Control side: stops the ring and returns where it stopped (the owner's next
    /// available index, or the base it was started with if no batch ran).
    pub fn stop(&self) -> u16 {
        self.live.store(None);
        self.quiesce();
        self.next_avail.load(Ordering::Acquire)
    }

    /// Control side: starts `ring` (the slot must be stopped).
    pub fn start(&self, ring: Arc<LiveRing>) {
        self.next_avail.store(ring.base, Ordering::Release);
        self.live.store(Some(ring));
        self.quiesce();
    }

    /// Whether a ring is published.
    pub fn is_live(&self) -> bool {
        self.live.load().is_some()
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

/// The owner's side of a slot: its position in the ring it last used.
#[derive(Debug)]
pub struct RingUser {
    slot: Arc<VringSlot>,
    id: u64,
    /// The next available position to take (== the next used position: heads are
    /// completed in order).
    last_avail: u16,
}

impl RingUser {
    /// The owner of `slot`.
    pub fn new(slot: Arc<VringSlot>) -> RingUser {
        RingUser {
            slot,
            id: 0,
            last_avail: 0,
        }
    }

    /// Runs one batch `f` on the current ring with the owner's position (which `f`
    /// advances); `None` when the ring is stopped. A ring new to this owner starts at its
    /// base, with the guest asked not to kick.
    #[inline]
    pub fn with<R>(&mut self, f: impl FnOnce(&LiveRing, &mut u16) -> R) -> Option<R> {
        self.slot.busy.store(true, Ordering::SeqCst);
        let guard = self.slot.live.load();
        let r = guard.as_ref().map(|live| {
            if live.id != self.id {
                self.id = live.id;
                self.last_avail = live.base;
                live.ring.suppress_kicks(live.base);
            }
            let r = f(live, &mut self.last_avail);
            self.slot
                .next_avail
                .store(self.last_avail, Ordering::Release);
            r
        });
        drop(guard);
        self.slot.busy.store(false, Ordering::Release);
        r
    }
}

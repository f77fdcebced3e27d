//! The split virtqueue (virtio 1.x, §2.7) from the device's side, polled: the descriptor
//! table, the driver's available ring and the device's used ring, all in guest memory.
//!
//! ```text
//! desc[n]  : { addr u64, len u32, flags u16, next u16 }      16 B each, driver-written
//! avail    : { flags u16, idx u16, ring[n] u16, used_event u16 }      driver-written
//! used     : { flags u16, idx u16, ring[n] {id u32, len u32}, avail_event u16 }  ours
//! ```
//!
//! The device takes heads from `avail.ring[last_avail % n]` up to `avail.idx` (read once per
//! batch, with acquire ordering), walks each head's chain ([`walk`]), writes one used element
//! per head, and publishes `used.idx` once per batch (release ordering). It interrupts the
//! guest (the call eventfd) only when the guest asked: with `VIRTIO_RING_F_EVENT_IDX` when the
//! new used index passes the guest's `used_event`, else when `VRING_AVAIL_F_NO_INTERRUPT` is
//! clear. The switch polls, so it asks the guest not to kick it (`VRING_USED_F_NO_NOTIFY`;
//! with event idx, an `avail_event` the guest passes once per 65,536 buffers).
//!
//! Every index and address here comes from an untrusted guest. A head or `next` outside the
//! table, a chain longer than the queue (which is how a loop shows), an indirect table inside
//! an indirect table or of a length that is not a multiple of 16, a buffer outside guest
//! memory, a chain with a buffer of the wrong direction: each ends the walk with a
//! [`ChainError`] and the buffer is never touched. An available index more than the queue
//! size ahead of ours means a corrupt ring ([`SplitRing::pending`] says so).
//!
//! Guest memory is read and written through raw pointers with volatile accesses for the
//! fields the guest may change under us; the data of a buffer is copied with plain
//! `copy_nonoverlapping` (the guest gave it to us; if it changes it meanwhile, it only
//! spoils its own packet). Little-endian fields, read natively: the switch builds for x86-64.

use std::sync::atomic::{fence, AtomicU16, Ordering};

use super::memory::GuestMemory;

/// Descriptor flag: the chain goes on at `next`.
pub const DESC_F_NEXT: u16 = 1;
/// Descriptor flag: the buffer is device-writable (the guest's receive buffers).
pub const DESC_F_WRITE: u16 = 2;
/// Descriptor flag: the buffer is a table of descriptors.
pub const DESC_F_INDIRECT: u16 = 4;
/// Used-ring flag: the device does not want kicks.
pub const USED_F_NO_NOTIFY: u16 = 1;
/// Available-ring flag: the guest does not want interrupts.
pub const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// Largest queue the virtio spec allows.
pub const MAX_QUEUE_SIZE: u16 = 32768;

/// Why a chain was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainError {
    /// A head or a `next` index outside the table.
    IndexOutOfRange,
    /// More descriptors than the table holds: a loop, or a lie.
    TooLong,
    /// An indirect descriptor in an indirect table, or beside `NEXT`.
    NestedIndirect,
    /// An indirect table of length 0 or not a multiple of 16, or outside guest memory.
    BadIndirect,
    /// A buffer that is not inside one region of guest memory.
    OutOfMemory,
    /// A read-only buffer where the device must write (or the reverse).
    WrongDirection,
}

impl std::fmt::Display for ChainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChainError::IndexOutOfRange => "a descriptor index outside the table",
            ChainError::TooLong => "a chain longer than the queue (a loop?)",
            ChainError::NestedIndirect => "an indirect descriptor where none may be",
            ChainError::BadIndirect => "an indirect table of a bad length or address",
            ChainError::OutOfMemory => "a buffer outside the guest's memory",
            ChainError::WrongDirection => "a buffer of the wrong direction",
        })
    }
}

/// One buffer of a chain, translated.
#[derive(Debug, Clone, Copy)]
pub struct Seg {
    /// Host address of its first byte.
    pub host: *mut u8,
    /// Its length.
    pub len: u32,
}

// SAFETY: a `Seg` is an address into guest memory, dereferenced only during the batch that
// translated it, while that batch holds the memory (`LiveRing`); kept between batches it is
// stale scratch, never read.
unsafe impl Send for Seg {}

/// Where a ring's three parts are, in guest-physical or front-end addresses as the protocol
/// gives them, and its size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingAddrs {
    /// Queue size (a power of two, at most 32768).
    pub size: u16,
    /// Descriptor table (front-end virtual address).
    pub desc: u64,
    /// Available ring (front-end virtual address).
    pub avail: u64,
    /// Used ring (front-end virtual address).
    pub used: u64,
}

/// A split ring whose three parts were found inside guest memory.
#[derive(Debug)]
pub struct SplitRing {
    desc: *const u8,
    avail: *const u8,
    used: *mut u8,
    size: u16,
    event_idx: bool,
}

// SAFETY: the pointers are into a `GuestMemory` that the owner of the ring keeps alive beside
// it (`LiveRing`); the ring is used by one thread at a time (the queue's owner).
unsafe impl Send for SplitRing {}
// SAFETY: as above.
unsafe impl Sync for SplitRing {}

impl SplitRing {
    /// Finds the ring's parts in `mem`: each must lie inside one region, aligned as the
    /// spec requires (16, 2, 4), and the size must be a power of two up to 32768.
    pub fn new(mem: &GuestMemory, a: &RingAddrs, event_idx: bool) -> Result<SplitRing, String> {
        let n = a.size;
        if n == 0 || n > MAX_QUEUE_SIZE || !n.is_power_of_two() {
            return Err(format!("queue size {n} is not a power of two up to 32768"));
        }
        let n64 = u64::from(n);
        let part = |addr: u64, len: u64, align: u64, what: &str| {
            if !addr.is_multiple_of(align) {
                return Err(format!(
                    "the {what} at {addr:#x} is not {align}-byte aligned"
                ));
            }
            mem.translate_user(addr, len)
                .ok_or_else(|| format!("the {what} at {addr:#x} is outside guest memory"))
        };
        let desc = part(a.desc, 16 * n64, 16, "descriptor table")?;
        let avail = part(a.avail, 6 + 2 * n64, 2, "available ring")?;
        let used = part(a.used, 6 + 8 * n64, 4, "used ring")?;
        // The front end's addresses may be aligned where ours are not (a region whose
        // addresses are odd): the fields are read and written in place, so refuse that.
        if !(avail as usize).is_multiple_of(2) || !(used as usize).is_multiple_of(4) {
            return Err("the rings are not aligned in the switch's mapping of guest memory".into());
        }
        Ok(SplitRing {
            desc,
            avail,
            used,
            size: n,
            event_idx,
        })
    }

    /// Queue size.
    #[inline]
    pub fn size(&self) -> u16 {
        self.size
    }

    /// Whether event idx was negotiated.
    pub fn event_idx(&self) -> bool {
        self.event_idx
    }

    #[inline]
    fn avail_idx_ref(&self) -> &AtomicU16 {
        // SAFETY: offset 2 of the available ring, inside it (checked in `new`), 2-aligned.
        unsafe { &*(self.avail.add(2) as *const AtomicU16) }
    }

    #[inline]
    fn used_idx_ref(&self) -> &AtomicU16 {
        // SAFETY: offset 2 of the used ring, inside it (checked in `new`), 2-aligned.
        unsafe { &*(self.used.add(2) as *const AtomicU16) }
    }

    /// Heads the guest has made available since `last_avail`, or `None` when its index is
    /// more than a queue ahead of ours (a corrupt ring). Reads the index with acquire
    /// ordering, so the heads and descriptors it covers are visible.
    #[inline]
    pub fn pending(&self, last_avail: u16) -> Option<u16> {
        let idx = self.avail_idx_ref().load(Ordering::Acquire);
        let n = idx.wrapping_sub(last_avail);
        (n <= self.size).then_some(n)
    }

    /// The head at available position `pos` (taken modulo the size).
    #[inline]
    pub fn avail_head(&self, pos: u16) -> u16 {
        let i = usize::from(pos & (self.size - 1));
        // SAFETY: ring[i] with i < size, inside the available ring.
        unsafe { std::ptr::read_volatile(self.avail.add(4 + 2 * i) as *const u16) }
    }

    /// The one buffer of the chain at `head` when the chain is a single plain descriptor
    /// (no next, not indirect) inside guest memory, the common case; `None` for anything
    /// else, which [`walk`] then handles (or refuses).
    #[inline]
    pub fn single(&self, mem: &GuestMemory, head: u16, dir: Dir) -> Option<Seg> {
        if head >= self.size {
            return None;
        }
        let (addr, len, flags, _) = self.desc(head);
        let plain = flags & (DESC_F_NEXT | DESC_F_INDIRECT) == 0;
        let right_way = dir == Dir::Read || flags & DESC_F_WRITE != 0;
        if !plain || !right_way || len == 0 {
            return None;
        }
        let host = mem.translate(addr, u64::from(len))?;
        Some(Seg { host, len })
    }

    /// Descriptor `i` of the table (`i < size`): (addr, len, flags, next).
    #[inline]
    fn desc(&self, i: u16) -> (u64, u32, u16, u16) {
        debug_assert!(i < self.size);
        // SAFETY: i < size: inside the descriptor table (16 bytes each, 16-aligned).
        unsafe { read_desc(self.desc.add(16 * usize::from(i))) }
    }

    /// Writes used element `pos` (modulo the size): the head and the bytes written to it.
    #[inline]
    pub fn put_used(&self, pos: u16, head: u16, len: u32) {
        let i = usize::from(pos & (self.size - 1));
        // SAFETY: ring[i] with i < size, inside the used ring; 4-aligned.
        unsafe {
            let e = self.used.add(4 + 8 * i);
            std::ptr::write_volatile(e as *mut u32, u32::from(head));
            std::ptr::write_volatile(e.add(4) as *mut u32, len);
        }
    }

    /// Publishes the used index (release: the elements and the data they name are visible
    /// first).
    #[inline]
    pub fn publish_used(&self, idx: u16) {
        self.used_idx_ref().store(idx, Ordering::Release);
    }

    /// The used index as the ring holds it (where a restarted ring goes on).
    pub fn used_idx(&self) -> u16 {
        self.used_idx_ref().load(Ordering::Acquire)
    }

    /// Asks the guest not to kick: the used ring's flag, and with event idx an
    /// `avail_event` the guest's index reaches only once per 65,536 buffers.
    pub fn suppress_kicks(&self, last_avail: u16) {
        // SAFETY: flags at offset 0 and avail_event after ring[size], inside the used ring.
        unsafe {
            std::ptr::write_volatile(self.used as *mut u16, USED_F_NO_NOTIFY);
            let ev = self.used.add(4 + 8 * usize::from(self.size)) as *mut u16;
            std::ptr::write_volatile(ev, last_avail.wrapping_sub(1));
        }
    }

    /// Asks the guest to kick after its next buffer (an owner about to sleep): clears the
    /// used ring's flag and, with event idx, sets `avail_event` to `last_avail`. The caller
    /// must look at the available index again afterwards ([`SplitRing::pending`]): a buffer
    /// added before the guest saw this is not kicked for.
    pub fn enable_kicks(&self, last_avail: u16) {
        // SAFETY: as in `suppress_kicks`.
        unsafe {
            std::ptr::write_volatile(self.used as *mut u16, 0);
            let ev = self.used.add(4 + 8 * usize::from(self.size)) as *mut u16;
            std::ptr::write_volatile(ev, last_avail);
        }
        fence(Ordering::SeqCst);
    }

    /// Whether the guest wants an interrupt now that the used index moved from `old` to
    /// `new`.
    #[inline]
    pub fn wants_interrupt(&self, old: u16, new: u16) -> bool {
        // The used index store must be visible before the guest's flag or event is read, or
        // both sides could decide the other will act (the classic lost wake-up).
        fence(Ordering::SeqCst);
        if self.event_idx {
            // SAFETY: used_event after ring[size], inside the available ring.
            let ev = unsafe {
                std::ptr::read_volatile(self.avail.add(4 + 2 * usize::from(self.size)) as *const u16)
            };
            new.wrapping_sub(ev).wrapping_sub(1) < new.wrapping_sub(old)
        } else {
            // SAFETY: flags at offset 0 of the available ring.
            let flags = unsafe { std::ptr::read_volatile(self.avail as *const u16) };
            flags & AVAIL_F_NO_INTERRUPT == 0
        }
    }
}

/// A hint to load the cache line at `p` (no fault, whatever `p` is).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, and SSE is baseline on x86-64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Starts loading the first bytes of `seg` (its first cache line, and the second when it is
/// longer than one).
#[inline(always)]
pub fn prefetch_seg(seg: &Seg) {
    prefetch(seg.host);
    if seg.len > 64 {
        // SAFETY: len > 64: still inside the translated buffer.
        prefetch(unsafe { seg.host.add(64) });
    }
}

/// Reads one descriptor at `p`.
///
/// # Safety
/// `p` must point at 16 readable bytes.
#[inline]
unsafe fn read_desc(p: *const u8) -> (u64, u32, u16, u16) {
    // Two 8-byte loads where the table is aligned (the descriptor table always is: 16);
    // as bytes otherwise (an indirect table may sit at any address).
    let (lo, hi) = if p as usize & 7 == 0 {
        (
            u64::from_le(std::ptr::read_volatile(p as *const u64)),
            u64::from_le(std::ptr::read_volatile(p.add(8) as *const u64)),
        )
    } else {
        let b = std::ptr::read_volatile(p as *const [u8; 16]);
        let (l, h) = b.split_at(8);
        (
            u64::from_le_bytes(l.try_into().unwrap_or_default()),
            u64::from_le_bytes(h.try_into().unwrap_or_default()),
        )
    };
    (lo, hi as u32, (hi >> 32) as u16, (hi >> 48) as u16)
}

/// Which way the device uses a chain's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// The device reads (the guest's transmit queue): writable buffers are read too.
    Read,
    /// The device writes (the guest's receive queue): every buffer must be writable.
    Write,
}

/// Walks the chain at `head`, calling `f` with each non-empty buffer in order until it
/// returns `false`. Follows one level of indirect table. Refuses (see [`ChainError`]) before
/// calling `f` on a bad buffer; buffers before it were already passed.
#[inline]
pub fn walk(
    ring: &SplitRing,
    mem: &GuestMemory,
    head: u16,
    dir: Dir,
    mut f: impl FnMut(Seg) -> bool,
) -> Result<(), ChainError> {
    if head >= ring.size {
        return Err(ChainError::IndexOutOfRange);
    }
    let (mut addr, mut len, mut flags, mut next) = ring.desc(head);
    if flags & DESC_F_INDIRECT != 0 {
        if flags & DESC_F_NEXT != 0 {
            return Err(ChainError::NestedIndirect);
        }
        return walk_indirect(mem, addr, len, dir, f);
    }
    let mut seen = 0u32;
    loop {
        seen += 1;
        if seen > u32::from(ring.size) {
            return Err(ChainError::TooLong);
        }
        if flags & DESC_F_INDIRECT != 0 {
            return Err(ChainError::NestedIndirect);
        }
        if !visit(mem, addr, len, flags, dir, &mut f)? {
            return Ok(());
        }
        if flags & DESC_F_NEXT == 0 {
            return Ok(());
        }
        if next >= ring.size {
            return Err(ChainError::IndexOutOfRange);
        }
        (addr, len, flags, next) = ring.desc(next);
    }
}

/// Walks an indirect table of `len` bytes at guest address `addr`.
fn walk_indirect(
    mem: &GuestMemory,
    addr: u64,
    len: u32,
    dir: Dir,
    mut f: impl FnMut(Seg) -> bool,
) -> Result<(), ChainError> {
    if len == 0 || !len.is_multiple_of(16) {
        return Err(ChainError::BadIndirect);
    }
    let table = mem
        .translate(addr, u64::from(len))
        .ok_or(ChainError::BadIndirect)?;
    let n = len / 16;
    let mut i = 0u32;
    let mut seen = 0u32;
    loop {
        seen += 1;
        if seen > n {
            return Err(ChainError::TooLong);
        }
        // SAFETY: i < n: inside the table of n descriptors translated above.
        let (a, l, flags, next) = unsafe { read_desc(table.add(16 * i as usize)) };
        if flags & DESC_F_INDIRECT != 0 {
            return Err(ChainError::NestedIndirect);
        }
        if !visit(mem, a, l, flags, dir, &mut f)? {
            return Ok(());
        }
        if flags & DESC_F_NEXT == 0 {
            return Ok(());
        }
        if u32::from(next) >= n {
            return Err(ChainError::IndexOutOfRange);
        }
        i = u32::from(next);
    }
}

#[inline]
fn visit(
    mem: &GuestMemory,
    addr: u64,
    len: u32,
    flags: u16,
    dir: Dir,
    f: &mut impl FnMut(Seg) -> bool,
) -> Result<bool, ChainError> {
    if dir == Dir::Write && flags & DESC_F_WRITE == 0 {
        return Err(ChainError::WrongDirection);
    }
    if len == 0 {
        return Ok(true);
    }
    let host = mem
        .translate(addr, u64::from(len))
        .ok_or(ChainError::OutOfMemory)?;
    Ok(f(Seg { host, len }))
}

#[cfg(test)]
#[path = "ring_tests.rs"]
mod tests;

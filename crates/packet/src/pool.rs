//! Buffer pool of fixed-size frames and the [`Packet`] handle that owns one frame.
//!
//! A [`Pool`] is one contiguous memory region cut into `frames` slots of one frame size
//! ([`FRAME_SIZE`], 2 KiB, unless [`PoolConfig::frame_size`] asks for 4, 8 or 16 KiB for jumbo
//! frames) — the layout an AF_XDP UMEM needs, so the same region can be registered as one. A
//! frame is named by its index; its byte offset in the region is `index * frame_size`.
//!
//! Free frames live in two tiers:
//! - a [`PoolCache`] per owner (a polling thread, a port queue, a generator) — a plain stack
//!   with no atomics, touched per packet;
//! - the pool's shared stack behind a mutex, touched once per [`CACHE_CHUNK`] frames when a
//!   cache runs empty or full ([`GSO_CACHE_CHUNK`] for the 64 KiB frames of a super-packet
//!   sibling: a frame freed by the thread that sent its super-packet is soon the one a port's
//!   queue reads the next into, still in cache, instead of one of a hundred 64 KiB frames
//!   gone cold).
//!
//! A [`Packet`] is move-only and owns its frame exclusively until it is given back with
//! [`PoolCache::free`] (or a whole batch with [`crate::Batch::free_into`]). A packet that is
//! never given back is leaked, not freed twice: the pool's memory is unmapped only when every
//! frame is back in the shared stack, so no packet can outlive the memory it points into.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::gso::{GSO_FLAG, GSO_RESERVED};

/// Default (and smallest) size of one frame (slot) in bytes, headroom included.
pub const FRAME_SIZE: usize = 2048;
/// Largest frame size a pool can be built with: 16 KiB holds a 9216-byte jumbo frame and more.
pub const MAX_FRAME_SIZE: usize = FRAME_SIZE << MAX_SIZE_CLASS;
/// Frame sizes are `FRAME_SIZE << class` for class 0..=3.
const MAX_SIZE_CLASS: u32 = 3;
/// A packet keeps its frame's size class in the top bits of its frame word.
const CLASS_SHIFT: u32 = 29;
/// The size class of the frames of a pool's super-packet sibling ([`Pool::gso_pool`]): 64 KiB.
const GSO_CLASS: u32 = 5;
/// Frame size of a pool's super-packet sibling: holds a 64 KiB TCP super-packet after the
/// headroom (the kernel makes them at most 65,535 bytes of IP).
pub const GSO_FRAME_SIZE: usize = FRAME_SIZE << GSO_CLASS;
/// Frames in a pool's super-packet sibling: 1 GiB of address space, reserved lazily (no huge
/// pages, `MAP_NORESERVE`), so only frames that have held a super-packet take memory. Every
/// AF_PACKET queue with virtio-net headers keeps one ready per message of its batch (32) and
/// every TAP queue one for its next read, besides its cache's few: 16,384 serves some 500 such
/// queues (1,024 served 31).
pub const GSO_POOL_FRAMES: u32 = 16384;
/// The bits of a packet's frame word that name its frame's size class.
const CLASS_MASK: u32 = !0 << CLASS_SHIFT;
/// The frame index bits of a packet's frame word (bit 28 is the super-packet flag).
const INDEX_MASK: u32 = GSO_FLAG - 1;
/// Bytes kept free in front of a received packet, so that VLAN tags and tunnel headers can
/// be pushed without moving the payload.
pub const HEADROOM: usize = 128;
/// Frames moved at once between a [`PoolCache`] and the pool's shared stack.
pub const CACHE_CHUNK: usize = 64;
/// [`CACHE_CHUNK`] of a pool's super-packet sibling ([`Pool::gso_pool`]).
pub const GSO_CACHE_CHUNK: usize = 2;

/// How to build a [`Pool`].
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Number of frames.
    pub frames: u32,
    /// Try to back the region with 2 MiB huge pages (falls back to normal pages).
    pub hugepages: bool,
    /// Touch every page at creation (no page faults on the fast path later).
    pub populate: bool,
    /// Bytes per frame, headroom included: 2048 (the default), 4096, 8192 or 16384. A packet
    /// holds at most `frame_size - HEADROOM` bytes; see [`frame_size_for`].
    pub frame_size: usize,
}

/// The smallest frame size that holds `len` packet bytes after the headroom, or `None` when
/// even [`MAX_FRAME_SIZE`] does not.
pub fn frame_size_for(len: usize) -> Option<usize> {
    (0..=MAX_SIZE_CLASS)
        .map(|c| FRAME_SIZE << c)
        .find(|&f| f - HEADROOM >= len)
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            frames: 16384,
            hugepages: false,
            populate: false,
            frame_size: FRAME_SIZE,
        }
    }
}

/// Per-packet metadata carried beside the bytes (not inside the frame).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// OpenFlow port number the packet arrived on (0 when not yet known).
    pub in_port: u32,
    /// Flow hash (RSS hash from the port, or computed from the flow key).
    pub hash: u32,
    /// Offset of the L3 header from the start of data, or 0 when not parsed.
    pub l3_off: u16,
    /// Offset of the L4 header from the start of data, or 0 when not parsed.
    pub l4_off: u16,
    /// Free for the stage that owns the packet (e.g. a queue id set by set-queue).
    pub user: u32,
}

/// The shared part of a pool.
struct PoolInner {
    base: NonNull<u8>,
    map_len: usize,
    frames: u32,
    /// Bytes per frame.
    frame_size: usize,
    /// `frame_size == 1 << shift`.
    shift: u32,
    /// `class << CLASS_SHIFT` where `frame_size == FRAME_SIZE << class`: or'ed into every
    /// packet's frame word.
    tag: u32,
    huge: bool,
    free: Mutex<Vec<u32>>,
    foreign_frees: AtomicU64,
    /// Times a cache found the shared stack empty when it needed frames.
    exhausted: AtomicU64,
    /// The sibling pool of 64 KiB frames for TCP super-packets, made on first use (`None`
    /// inside when it could not be mapped, or for a sibling itself).
    gso: OnceLock<Option<Pool>>,
    /// Whether this is a super-packet sibling (which has none of its own).
    is_gso: bool,
    /// Frames moved at once between a cache and the shared stack ([`CACHE_CHUNK`], or
    /// [`GSO_CACHE_CHUNK`] for a sibling).
    chunk: usize,
}

// SAFETY: the region is plain memory; access to any frame is exclusive to the single
// `Packet` that owns it, and the free stack is behind a mutex.
unsafe impl Send for PoolInner {}
unsafe impl Sync for PoolInner {}

impl Drop for PoolInner {
    fn drop(&mut self) {
        let free = self.free.get_mut().map(|v| v.len()).unwrap_or(0);
        if free == self.frames as usize {
            // SAFETY: every frame is back, so no `Packet` points into the region.
            unsafe { libc::munmap(self.base.as_ptr().cast(), self.map_len) };
        }
        // Otherwise packets are still out there (leaked by their owner): the memory stays
        // mapped so they never dangle.
    }
}

/// A pool of packet frames. Cheap to clone (a reference count).
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("frames", &self.inner.frames)
            .field("frame_size", &self.inner.frame_size)
            .field("hugepages", &self.inner.huge)
            .finish()
    }
}

/// Error creating a pool: the mapping failed, or the configuration asks for something a pool
/// cannot be (the error's kind is then `InvalidInput` and its text says what to give).
#[derive(Debug)]
pub struct PoolError(pub std::io::Error);

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot map packet buffer pool: {}", self.0)
    }
}

impl std::error::Error for PoolError {}

impl Pool {
    /// Maps a new pool. Huge pages are used when asked for and available.
    pub fn new(cfg: &PoolConfig) -> Result<Pool, PoolError> {
        let invalid = |why: String| {
            Err(PoolError(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                why,
            )))
        };
        let Some(class) = (0..=MAX_SIZE_CLASS).find(|&c| FRAME_SIZE << c == cfg.frame_size) else {
            return invalid(format!(
                "frame size {}: give 2048, 4096, 8192 or 16384 bytes",
                cfg.frame_size
            ));
        };
        if cfg.frames == 0 || cfg.frames > INDEX_MASK {
            return invalid(format!("{} frames: give 1 to {INDEX_MASK}", cfg.frames));
        }
        Pool::map(cfg, class, false)
    }

    /// Maps a pool of `cfg.frames` frames of size class `class` (already checked).
    fn map(cfg: &PoolConfig, class: u32, is_gso: bool) -> Result<Pool, PoolError> {
        let len = cfg.frames as usize * cfg.frame_size;
        let mut huge = false;
        let mut ptr = libc::MAP_FAILED;
        if cfg.hugepages {
            let huge_len = len.div_ceil(2 << 20) * (2 << 20);
            // SAFETY: anonymous private mapping, no file, checked below.
            ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    huge_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB,
                    -1,
                    0,
                )
            };
            if ptr != libc::MAP_FAILED {
                huge = true;
            }
        }
        let map_len = if huge {
            len.div_ceil(2 << 20) * (2 << 20)
        } else {
            len
        };
        if ptr == libc::MAP_FAILED {
            let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
            if cfg.populate {
                flags |= libc::MAP_POPULATE;
            }
            if is_gso {
                // Address space only: memory is taken frame by frame as they are written.
                flags |= libc::MAP_NORESERVE;
            }
            // SAFETY: anonymous private mapping, checked below.
            ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    flags,
                    -1,
                    0,
                )
            };
        }
        if ptr == libc::MAP_FAILED {
            return Err(PoolError(std::io::Error::last_os_error()));
        }
        let base = NonNull::new(ptr.cast::<u8>()).expect("mmap returned null");
        // Hand out low indices first (they are the pages touched first).
        let free: Vec<u32> = (0..cfg.frames).rev().collect();
        Ok(Pool {
            inner: Arc::new(PoolInner {
                base,
                map_len,
                frames: cfg.frames,
                frame_size: cfg.frame_size,
                shift: FRAME_SIZE.trailing_zeros() + class,
                tag: class << CLASS_SHIFT,
                huge,
                free: Mutex::new(free),
                foreign_frees: AtomicU64::new(0),
                exhausted: AtomicU64::new(0),
                gso: OnceLock::new(),
                is_gso,
                chunk: if is_gso { GSO_CACHE_CHUNK } else { CACHE_CHUNK },
            }),
        })
    }

    /// The sibling pool of [`GSO_FRAME_SIZE`] frames that holds TCP super-packets kept whole
    /// (see [`crate::gso`]), mapped on first call ([`GSO_POOL_FRAMES`]: normal pages, taken
    /// as they are written).
    /// `None` for a sibling itself or when it cannot be mapped. Packets of either pool may be
    /// freed into a cache of this one ([`PoolCache::free`] sends them home).
    pub fn gso_pool(&self) -> Option<Pool> {
        if self.inner.is_gso {
            return None;
        }
        self.inner
            .gso
            .get_or_init(|| {
                let cfg = PoolConfig {
                    frames: GSO_POOL_FRAMES,
                    // On huge pages it would reserve them all at once (512 for 1 GiB).
                    hugepages: false,
                    populate: false,
                    frame_size: GSO_FRAME_SIZE,
                };
                Pool::map(&cfg, GSO_CLASS, true).ok()
            })
            .clone()
    }

    /// The super-packet sibling if it has been mapped ([`Pool::gso_pool`] maps it).
    pub fn gso_mapped(&self) -> Option<Pool> {
        self.inner.gso.get().cloned().flatten()
    }

    /// A pool with `frames` frames on normal pages, for tests and tools.
    pub fn with_frames(frames: u32) -> Pool {
        Pool::new(&PoolConfig {
            frames,
            ..PoolConfig::default()
        })
        .expect("mapping a small packet pool")
    }

    /// Number of frames in the pool.
    pub fn frames(&self) -> u32 {
        self.inner.frames
    }

    /// Bytes per frame, headroom included.
    pub fn frame_size(&self) -> usize {
        self.inner.frame_size
    }

    /// The most bytes one packet of this pool holds (`frame_size - HEADROOM`).
    pub fn max_data(&self) -> usize {
        self.inner.frame_size - HEADROOM
    }

    /// Times a cache needed frames and found none left in the shared stack: the pool is too
    /// small for what its owners keep cached (or packets are being leaked). The control side
    /// watches it; it grows only while the pool is exhausted.
    pub fn exhaustions(&self) -> u64 {
        self.inner.exhausted.load(Ordering::Relaxed)
    }

    /// Whether the region is backed by huge pages.
    pub fn hugepages(&self) -> bool {
        self.inner.huge
    }

    /// Start of the region (for registering it as an AF_XDP UMEM).
    pub fn region(&self) -> (NonNull<u8>, usize) {
        (
            self.inner.base,
            self.inner.frames as usize * self.inner.frame_size,
        )
    }

    /// Frames currently in the shared stack (not in any cache, not in any packet).
    pub fn shared_free(&self) -> usize {
        self.inner.free.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// A new cache owned by the caller.
    pub fn cache(&self) -> PoolCache {
        PoolCache {
            pool: self.inner.clone(),
            local: Vec::with_capacity(2 * self.inner.chunk),
            gso: None,
        }
    }

    /// Wraps a frame index as a packet. Used by ports whose rings name frames by index
    /// (AF_XDP). The caller must own the frame (it was taken out with [`PoolCache::take_frame`]).
    ///
    /// # Safety
    /// `frame` must be a frame of this pool that no other `Packet` owns.
    pub unsafe fn packet_from_frame(&self, frame: u32, data_off: u16, len: u16) -> Packet {
        debug_assert!(frame < self.inner.frames);
        debug_assert!(data_off as usize + len as usize <= self.inner.frame_size);
        Packet {
            base: NonNull::new_unchecked(
                self.inner
                    .base
                    .as_ptr()
                    .add((frame as usize) << self.inner.shift),
            ),
            frame: frame | self.inner.tag,
            data_off,
            len,
            meta: Meta::default(),
        }
    }
}

/// A frame owner's private stack of free frames. Not shared between threads; no atomics.
pub struct PoolCache {
    pool: Arc<PoolInner>,
    local: Vec<u32>,
    /// A cache of the super-packet sibling pool, made when first needed.
    gso: Option<Box<PoolCache>>,
}

impl std::fmt::Debug for PoolCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolCache")
            .field("local", &self.local.len())
            .finish()
    }
}

impl PoolCache {
    /// Takes a free frame index, refilling from the shared stack when empty.
    #[inline]
    pub fn take_frame(&mut self) -> Option<u32> {
        if let Some(f) = self.local.pop() {
            return Some(f);
        }
        self.refill();
        self.local.pop()
    }

    #[cold]
    fn refill(&mut self) {
        let mut shared = self.pool.free.lock().unwrap_or_else(|e| e.into_inner());
        let n = shared.len().min(self.pool.chunk);
        if n == 0 {
            self.pool.exhausted.fetch_add(1, Ordering::Relaxed);
        }
        let at = shared.len() - n;
        self.local.extend_from_slice(&shared[at..]);
        shared.truncate(at);
    }

    #[cold]
    fn spill(&mut self) {
        let mut shared = self.pool.free.lock().unwrap_or_else(|e| e.into_inner());
        let at = self.local.len() - self.pool.chunk;
        shared.extend_from_slice(&self.local[at..]);
        self.local.truncate(at);
    }

    /// Gives a frame index back (the counterpart of [`PoolCache::take_frame`]).
    #[inline]
    pub fn put_frame(&mut self, frame: u32) {
        debug_assert!(frame < self.pool.frames);
        if self.local.len() >= 2 * self.pool.chunk {
            self.spill();
        }
        self.local.push(frame);
    }

    /// Allocates an empty packet with [`HEADROOM`] bytes of headroom, or `None` when the pool
    /// is exhausted.
    #[inline]
    pub fn alloc(&mut self) -> Option<Packet> {
        let frame = self.take_frame()?;
        // SAFETY: the frame came out of the free stacks, so nobody else owns it.
        Some(unsafe {
            Packet {
                base: NonNull::new_unchecked(
                    self.pool
                        .base
                        .as_ptr()
                        .add((frame as usize) << self.pool.shift),
                ),
                frame: frame | self.pool.tag,
                data_off: HEADROOM as u16,
                len: 0,
                meta: Meta::default(),
            }
        })
    }

    /// Allocates a packet holding a copy of `bytes` (at most the pool's
    /// [`Pool::max_data`] bytes; longer input is refused with `None`).
    #[inline]
    pub fn alloc_from(&mut self, bytes: &[u8]) -> Option<Packet> {
        if bytes.len() > self.pool.frame_size - HEADROOM {
            return None;
        }
        let mut p = self.alloc()?;
        p.len = bytes.len() as u16;
        p.data_mut().copy_from_slice(bytes);
        Some(p)
    }

    /// Gives a packet's frame back. A super-packet of this pool's sibling
    /// ([`Pool::gso_pool`]) goes back to the sibling.
    #[inline]
    pub fn free(&mut self, pkt: Packet) {
        if pkt.frame & CLASS_MASK != self.pool.tag {
            return self.free_other(pkt);
        }
        debug_assert!(self.owns(&pkt), "packet freed into a cache of another pool");
        self.put_frame(pkt.frame());
    }

    /// Frees a packet whose frame is of another size class: the sibling's, or (a caller's
    /// bug) a foreign pool's, which is leaked rather than put in the wrong free stack.
    #[cold]
    fn free_other(&mut self, pkt: Packet) {
        match self.gso_cache() {
            Some(g) if g.owns(&pkt) => g.put_frame(pkt.frame()),
            _ => {
                debug_assert!(false, "packet freed into a cache of another pool");
                self.pool.foreign_frees.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The cache of this pool's super-packet sibling, made on first use.
    fn gso_cache(&mut self) -> Option<&mut PoolCache> {
        if self.gso.is_none() {
            let pool = Pool {
                inner: self.pool.clone(),
            };
            self.gso = Some(Box::new(pool.gso_pool()?.cache()));
        }
        self.gso.as_deref_mut()
    }

    /// Allocates an empty packet in a frame of the super-packet sibling pool
    /// ([`GSO_FRAME_SIZE`] bytes), or `None` when it is exhausted or cannot be mapped.
    #[inline]
    pub fn alloc_gso(&mut self) -> Option<Packet> {
        self.gso_cache()?.alloc()
    }

    /// Allocates a packet holding a copy of `bytes`: in this pool's frames when they fit, in
    /// a super-packet frame otherwise (see [`PoolCache::alloc_gso`]).
    #[inline]
    pub fn alloc_copy(&mut self, bytes: &[u8]) -> Option<Packet> {
        if bytes.len() <= self.max_data() {
            return self.alloc_from(bytes);
        }
        let c = self.gso_cache()?;
        c.alloc_from(bytes)
    }

    /// Whether `pkt` belongs to this cache's pool.
    pub fn owns(&self, pkt: &Packet) -> bool {
        let base = self.pool.base.as_ptr() as usize;
        let p = pkt.base.as_ptr() as usize;
        p >= base && p < base + self.pool.frames as usize * self.pool.frame_size
    }

    /// Frames held by this cache.
    pub fn cached(&self) -> usize {
        self.local.len()
    }

    /// The most bytes one packet of this cache's pool holds (see [`Pool::max_data`]).
    #[inline]
    pub fn max_data(&self) -> usize {
        self.pool.frame_size - HEADROOM
    }

    /// The pool this cache draws from.
    pub fn pool(&self) -> Pool {
        Pool {
            inner: self.pool.clone(),
        }
    }

    /// Frees that went to no free stack because the packet was of a foreign pool (a bug in
    /// the caller; the frame is leaked rather than corrupting a free stack).
    pub fn foreign_frees(&self) -> u64 {
        self.pool.foreign_frees.load(Ordering::Relaxed)
    }
}

impl Drop for PoolCache {
    fn drop(&mut self) {
        let mut shared = self.pool.free.lock().unwrap_or_else(|e| e.into_inner());
        shared.extend_from_slice(&self.local);
        self.local.clear();
    }
}

/// One packet: exclusive owner of one pool frame, plus [`Meta`].
///
/// Bytes `data_off .. data_off + len` of the frame are the packet; the bytes before are
/// headroom, the bytes after tailroom.
pub struct Packet {
    pub(crate) base: NonNull<u8>,
    /// Frame index (low bits), the super-packet flag (bit 28, see [`crate::gso`]) and the
    /// pool's frame size class (top bits), so that the packet knows its frame's size without
    /// growing past 32 bytes.
    pub(crate) frame: u32,
    pub(crate) data_off: u16,
    len: u16,
    /// Metadata carried with the packet.
    pub meta: Meta,
}

const _: () = assert!(std::mem::size_of::<Packet>() == 32);

// SAFETY: a packet exclusively owns its frame; moving it to another thread moves that
// ownership. The pool memory it points into is never unmapped while it exists.
unsafe impl Send for Packet {}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet")
            .field("frame", &self.frame())
            .field("len", &self.len)
            .field("meta", &self.meta)
            .finish()
    }
}

impl Packet {
    /// The packet's bytes.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        // SAFETY: data_off + len <= the frame size is an invariant of every constructor and
        // mutator; the frame is exclusively ours.
        unsafe {
            std::slice::from_raw_parts(
                self.base.as_ptr().add(self.data_off as usize),
                self.len as usize,
            )
        }
    }

    /// The packet's bytes, writable.
    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`, and `&mut self` gives exclusive access.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base.as_ptr().add(self.data_off as usize),
                self.len as usize,
            )
        }
    }

    /// Length in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the packet has no bytes.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Frame index in its pool (an AF_XDP UMEM address is `frame * frame_size + data_off`).
    #[inline(always)]
    pub fn frame(&self) -> u32 {
        self.frame & INDEX_MASK
    }

    /// Size of the packet's frame in bytes, headroom included (its pool's frame size).
    #[inline(always)]
    pub fn frame_size(&self) -> usize {
        FRAME_SIZE << (self.frame >> CLASS_SHIFT)
    }

    /// Offset of the first byte within the frame.
    #[inline(always)]
    pub fn data_offset(&self) -> u16 {
        self.data_off
    }

    /// Bytes free in front of the data (those a super-packet's request takes excluded).
    #[inline(always)]
    pub fn headroom(&self) -> usize {
        if self.frame & GSO_FLAG != 0 {
            (self.data_off as usize).saturating_sub(GSO_RESERVED)
        } else {
            self.data_off as usize
        }
    }

    /// Bytes free after the data.
    #[inline(always)]
    pub fn tailroom(&self) -> usize {
        self.frame_size() - self.data_off as usize - self.len as usize
    }

    /// Replaces the contents with `bytes`, keeping the current start. Returns `false` (and
    /// changes nothing) when they do not fit.
    #[inline]
    pub fn set_data(&mut self, bytes: &[u8]) -> bool {
        if self.data_off as usize + bytes.len() > self.frame_size() {
            return false;
        }
        self.len = bytes.len() as u16;
        self.data_mut().copy_from_slice(bytes);
        true
    }

    /// Sets the length (growing exposes whatever the frame held). Returns `false` when the
    /// frame is too short.
    #[inline]
    pub fn set_len(&mut self, len: usize) -> bool {
        if self.data_off as usize + len > self.frame_size() {
            return false;
        }
        self.len = len as u16;
        true
    }

    /// Shortens the packet to `len` bytes (no change when it is not longer).
    #[inline(always)]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len as usize {
            self.len = len as u16;
        }
    }

    /// Keeps only bytes `start..end` of the packet (a tunnel packet's inner frame: the outer
    /// headers before it and any padding after it go). Returns `false`, leaving the packet
    /// as it was, when that is not a range of its bytes.
    #[inline(always)]
    pub fn keep(&mut self, start: usize, end: usize) -> bool {
        if end > self.len as usize || start > end {
            return false;
        }
        self.data_off += start as u16;
        self.len = (end - start) as u16;
        true
    }

    /// Moves the start `n` bytes earlier (into the headroom) and returns the new front bytes.
    /// `None` when the headroom is too small.
    #[inline]
    pub fn push_front(&mut self, n: usize) -> Option<&mut [u8]> {
        // A super-packet's segmentation request lives in the frame's first bytes.
        let floor = if self.frame & GSO_FLAG != 0 {
            GSO_RESERVED
        } else {
            0
        };
        if n + floor > self.data_off as usize {
            return None;
        }
        self.data_off -= n as u16;
        self.len += n as u16;
        Some(&mut self.data_mut()[..n])
    }

    /// Drops the first `n` bytes. Returns `false` (and changes nothing) when shorter.
    #[inline]
    pub fn pull_front(&mut self, n: usize) -> bool {
        if n > self.len as usize {
            return false;
        }
        self.data_off += n as u16;
        self.len -= n as u16;
        true
    }

    /// Resets to an empty packet with the default headroom and default metadata.
    #[inline]
    pub fn reset(&mut self) {
        self.frame &= !GSO_FLAG;
        self.data_off = HEADROOM as u16;
        self.len = 0;
        self.meta = Meta::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn super_packet_frames_go_round_a_few_warm_frames() {
        // A port's queue takes super-packet frames, the thread that sends them frees them
        // into its own cache: the frames in use stay a handful (with the small pools' chunk
        // of 64 they would be hundreds, 64 KiB each, cold when their turn comes).
        let pool = Pool::with_frames(8);
        let (mut rx, mut tx) = (pool.cache(), pool.cache());
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let p = rx.alloc_gso().expect("a super-packet frame");
            seen.insert(p.frame());
            tx.free(p);
        }
        assert!(seen.len() <= 8, "{} frames", seen.len());
    }

    /// Pages of `p`'s room (its data and tailroom) resident in memory, and pages in all.
    fn resident(p: &mut Packet) -> (usize, usize) {
        let room = p.len() + p.tailroom();
        let start = p.data_mut().as_mut_ptr() as usize;
        let page = 4096;
        let (lo, hi) = (start / page * page, (start + room).div_ceil(page) * page);
        let mut vec = vec![0u8; (hi - lo) / page];
        // SAFETY: [lo, hi) lies inside the pool's mapping (the frame is the packet's); `vec`
        // has a byte per page.
        let rc = unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        (vec.iter().filter(|b| **b & 1 != 0).count(), vec.len())
    }

    #[test]
    fn the_super_packet_sibling_stocks_hundreds_of_queues_and_takes_memory_only_as_written() {
        // What 500 AF_PACKET queues with virtio-net headers keep ready (a frame for each of
        // the 32 messages of a batch) fits; the frames take no memory until written, and a
        // frame written takes its own pages.
        let pool = Pool::with_frames(8);
        let mut queues: Vec<(PoolCache, Vec<Packet>)> = Vec::new();
        for _ in 0..500 {
            let mut c = pool.cache();
            let stock: Vec<Packet> = (0..32).filter_map(|_| c.alloc_gso()).collect();
            assert_eq!(
                stock.len(),
                32,
                "queue {} found the sibling empty",
                queues.len()
            );
            queues.push((c, stock));
        }
        let stocked: usize = queues
            .iter_mut()
            .flat_map(|(_, s)| s.iter_mut())
            .map(|p| resident(p).0)
            .sum();
        assert_eq!(stocked, 0, "stocking made pages resident");
        let p = &mut queues[0].1[0];
        let room = p.tailroom();
        assert!(p.set_len(room));
        p.data_mut().fill(7);
        let (written, pages) = resident(p);
        assert_eq!(written, pages, "a written frame is resident");
        assert!(pages >= 16);
        for (mut c, stock) in queues {
            for p in stock {
                c.free(p);
            }
        }
    }

    #[test]
    fn a_cache_that_finds_the_pool_empty_is_counted() {
        let pool = Pool::with_frames(8);
        let mut c = pool.cache();
        let pkts: Vec<Packet> = (0..8).filter_map(|_| c.alloc()).collect();
        assert_eq!((pkts.len(), pool.exhaustions()), (8, 0));
        assert!(c.alloc().is_none());
        assert!(c.alloc().is_none());
        assert_eq!(pool.exhaustions(), 2);
        for p in pkts {
            c.free(p);
        }
        drop(c);
        assert_eq!(pool.shared_free(), 8);
        assert!(pool.cache().alloc().is_some());
        assert_eq!(pool.exhaustions(), 2, "no more once frames are back");
    }

    #[test]
    fn alloc_free_roundtrip_keeps_every_frame() {
        let pool = Pool::with_frames(300);
        let mut cache = pool.cache();
        let mut pkts = Vec::new();
        while let Some(p) = cache.alloc() {
            pkts.push(p);
        }
        assert_eq!(pkts.len(), 300);
        let mut frames: Vec<u32> = pkts.iter().map(|p| p.frame()).collect();
        frames.sort_unstable();
        frames.dedup();
        assert_eq!(frames.len(), 300, "a frame was handed out twice");
        for p in pkts {
            cache.free(p);
        }
        drop(cache);
        assert_eq!(pool.shared_free(), 300);
    }

    #[test]
    fn headroom_push_and_pull() {
        let pool = Pool::with_frames(4);
        let mut cache = pool.cache();
        let mut p = cache.alloc_from(&[1, 2, 3, 4]).unwrap();
        assert_eq!(p.headroom(), HEADROOM);
        p.push_front(2).unwrap().copy_from_slice(&[9, 8]);
        assert_eq!(p.data(), &[9, 8, 1, 2, 3, 4]);
        assert!(p.pull_front(3));
        assert_eq!(p.data(), &[2, 3, 4]);
        assert!(!p.pull_front(4));
        assert!(p.push_front(HEADROOM + 10).is_none());
        cache.free(p);
    }

    #[test]
    fn keep_takes_a_range_or_nothing() {
        let pool = Pool::with_frames(4);
        let mut cache = pool.cache();
        let mut p = cache.alloc_from(&[1, 2, 3, 4, 5, 6]).unwrap();
        assert!(!p.keep(2, 7), "past the end");
        assert!(!p.keep(4, 3), "backwards");
        assert_eq!(
            p.data(),
            &[1, 2, 3, 4, 5, 6],
            "a refused range changes nothing"
        );
        assert!(p.keep(1, 5));
        assert_eq!(p.data(), &[2, 3, 4, 5]);
        assert_eq!(p.headroom(), HEADROOM + 1);
        assert!(p.keep(4, 4));
        assert!(p.is_empty());
        cache.free(p);
    }

    #[test]
    fn oversize_copy_is_refused() {
        let pool = Pool::with_frames(2);
        let mut cache = pool.cache();
        assert!(cache.alloc_from(&[0u8; FRAME_SIZE]).is_none());
        assert_eq!(cache.cached() + pool.shared_free(), 2);
    }

    #[test]
    fn jumbo_frames_hold_their_size_and_keep_their_index() {
        for (size, len) in [(4096, 3000), (8192, 8000), (16384, 9018)] {
            let pool = Pool::new(&PoolConfig {
                frames: 8,
                frame_size: size,
                ..PoolConfig::default()
            })
            .unwrap();
            assert_eq!(pool.frame_size(), size);
            assert_eq!(pool.max_data(), size - HEADROOM);
            assert_eq!(pool.region().1, 8 * size);
            let mut cache = pool.cache();
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut pkts: Vec<Packet> = (0..8).map(|_| cache.alloc_from(&bytes).unwrap()).collect();
            for p in &pkts {
                assert!(p.frame() < 8);
                assert_eq!(p.frame_size(), size);
                assert_eq!(p.data(), &bytes[..]);
                assert_eq!(p.tailroom(), size - HEADROOM - len);
            }
            // Frames do not overlap: writing one leaves the others as they were.
            pkts[3].data_mut().fill(0xee);
            assert_eq!(pkts[4].data(), &bytes[..]);
            assert!(pkts[0].set_len(size - HEADROOM));
            assert!(!pkts[0].set_len(size - HEADROOM + 1));
            assert!(cache.alloc_from(&vec![0; size]).is_none());
            let mut frames: Vec<u32> = pkts.iter().map(|p| p.frame()).collect();
            frames.sort_unstable();
            frames.dedup();
            assert_eq!(frames.len(), 8);
            for p in pkts {
                cache.free(p);
            }
            drop(cache);
            assert_eq!(pool.shared_free(), 8);
        }
    }

    #[test]
    fn bad_frame_sizes_are_refused_with_the_choices() {
        for size in [0, 1024, 3000, 32768] {
            let err = Pool::new(&PoolConfig {
                frames: 8,
                frame_size: size,
                ..PoolConfig::default()
            })
            .unwrap_err();
            assert!(
                err.to_string().contains("2048, 4096, 8192 or 16384"),
                "{err}"
            );
        }
        assert_eq!(frame_size_for(1920), Some(2048));
        assert_eq!(frame_size_for(1921), Some(4096));
        assert_eq!(frame_size_for(9018), Some(16384));
        assert_eq!(frame_size_for(16257), None);
    }

    #[test]
    fn caches_spill_and_refill_across_owners() {
        let pool = Pool::with_frames(1000);
        let mut rx = pool.cache();
        let mut tx = pool.cache();
        for _ in 0..50 {
            let mut batch = Vec::new();
            for _ in 0..32 {
                batch.push(rx.alloc().unwrap());
            }
            for p in batch {
                tx.free(p);
            }
        }
        assert!(tx.cached() <= 2 * CACHE_CHUNK);
        drop(rx);
        drop(tx);
        assert_eq!(pool.shared_free(), 1000);
    }
}

//! A pretend guest for tests and fuzzing: one region of memory the test owns, holding a
//! split ring (descriptor table, available and used rings) and buffer space, driven the
//! way a virtio-net driver drives it — or the way a lying one does (every field can be set
//! to anything).
//!
//! Layout of the region (guest physical address [`GPA`], front-end address [`UA`]):
//! descriptor table at 0, available ring after it, used ring 4-aligned after that, data from
//! [`FakeGuest::data_start`] on.

use std::sync::Arc;

use super::live::{LiveRing, NetFeatures};
use super::memory::GuestMemory;
use super::ring::{RingAddrs, SplitRing, DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE};

/// Guest physical address of the region's first byte.
pub const GPA: u64 = 0x10_0000;
/// Front-end virtual address of the region's first byte.
pub const UA: u64 = 0x7f00_0000_0000;

/// A pretend guest; see the [module docs](self).
pub struct FakeGuest {
    /// Host address of the region (owned by `mem`).
    host: *mut u8,
    len: usize,
    size: u16,
    avail_off: usize,
    used_off: usize,
    data_off: usize,
    /// Next free descriptor (handed out in order, wrapping).
    next_desc: u16,
    /// The driver's available index.
    avail_idx: u16,
    /// Used elements already read.
    last_used: u16,
    /// Next free byte of data space (wrapping to the start).
    next_data: usize,
    mem: Arc<GuestMemory>,
}

// SAFETY: `host` points into memory `mem` owns; the guest moves with it.
unsafe impl Send for FakeGuest {}

impl std::fmt::Debug for FakeGuest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeGuest")
            .field("size", &self.size)
            .finish()
    }
}

impl FakeGuest {
    /// A guest with a ring of `size` entries and `data` bytes of buffer space.
    pub fn new(size: u16, data: usize) -> FakeGuest {
        let n = usize::from(size);
        let avail_off = 16 * n;
        let used_off = (avail_off + 6 + 2 * n).next_multiple_of(16);
        let data_off = (used_off + 6 + 8 * n).next_multiple_of(64);
        let total = (data_off + data).next_multiple_of(8);
        let buf = vec![0u64; total / 8].into_boxed_slice();
        let mem = GuestMemory::owned(GPA, UA, buf).expect("one valid region");
        let host = mem.translate(GPA, total as u64).expect("the region");
        FakeGuest {
            host,
            len: total,
            size,
            avail_off,
            used_off,
            data_off,
            next_desc: 0,
            avail_idx: 0,
            last_used: 0,
            next_data: 0,
            mem: Arc::new(mem),
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes at `host`, owned by `mem` (kept alive by `self`); the borrow of
        // `self` keeps this the only slice the guest side makes.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.len) }
    }

    /// The whole region as bytes (for fuzzing: fill it with anything).
    pub fn region_mut(&mut self) -> &mut [u8] {
        self.bytes()
    }

    /// The ring's addresses, as a front end would send them.
    pub fn addrs(&self) -> RingAddrs {
        RingAddrs {
            size: self.size,
            desc: UA,
            avail: UA + self.avail_off as u64,
            used: UA + self.used_off as u64,
        }
    }

    /// Guest physical address of the data space.
    pub fn data_start(&self) -> u64 {
        GPA + self.data_off as u64
    }

    /// The guest's memory.
    pub fn mem(&self) -> Arc<GuestMemory> {
        self.mem.clone()
    }

    /// A ring ready for a queue, starting at available index `base`.
    pub fn live(&self, base: u16, net: NetFeatures, event_idx: bool) -> Arc<LiveRing> {
        let ring = SplitRing::new(&self.mem, &self.addrs(), event_idx).expect("a valid ring");
        Arc::new(LiveRing::new(ring, self.mem.clone(), base, None, net))
    }

    fn put16(&mut self, off: usize, v: u16) {
        self.bytes()[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn get32(&mut self, off: usize) -> u32 {
        let b = &self.bytes()[off..off + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Writes descriptor `i` (any values: a lying guest).
    pub fn set_desc(&mut self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let off = 16 * usize::from(i);
        let b = self.bytes();
        b[off..off + 8].copy_from_slice(&addr.to_le_bytes());
        b[off + 8..off + 12].copy_from_slice(&len.to_le_bytes());
        b[off + 12..off + 14].copy_from_slice(&flags.to_le_bytes());
        b[off + 14..off + 16].copy_from_slice(&next.to_le_bytes());
    }

    /// Makes `head` available and publishes the new available index.
    pub fn offer(&mut self, head: u16) {
        let slot = usize::from(self.avail_idx & (self.size - 1));
        self.put16(self.avail_off + 4 + 2 * slot, head);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.put16(self.avail_off + 2, self.avail_idx);
    }

    /// Sets the available index to anything (a lying guest).
    pub fn set_avail_idx(&mut self, idx: u16) {
        self.avail_idx = idx;
        self.put16(self.avail_off + 2, idx);
    }

    /// Sets the available ring's flags.
    pub fn set_avail_flags(&mut self, flags: u16) {
        self.put16(self.avail_off, flags);
    }

    /// The used ring's flags (the device's wish about kicks).
    pub fn used_flags(&mut self) -> u16 {
        let off = self.used_off;
        let b = &self.bytes()[off..off + 2];
        u16::from_le_bytes([b[0], b[1]])
    }

    /// Used elements (head, length) published since the last call.
    pub fn take_used(&mut self) -> Vec<(u32, u32)> {
        let off = self.used_off + 2;
        let b = &self.bytes()[off..off + 2];
        let idx = u16::from_le_bytes([b[0], b[1]]);
        let mut out = Vec::new();
        while self.last_used != idx {
            let slot = usize::from(self.last_used & (self.size - 1));
            let e = self.used_off + 4 + 8 * slot;
            out.push((self.get32(e), self.get32(e + 4)));
            self.last_used = self.last_used.wrapping_add(1);
        }
        out
    }

    /// Copies `bytes` into data space; returns its guest address.
    pub fn put_data(&mut self, bytes: &[u8]) -> u64 {
        let space = self.bytes().len() - self.data_off;
        assert!(
            bytes.len() <= space,
            "data larger than the guest's data space"
        );
        if self.next_data + bytes.len() > space {
            self.next_data = 0;
        }
        let off = self.data_off + self.next_data;
        self.bytes()[off..off + bytes.len()].copy_from_slice(bytes);
        self.next_data = (self.next_data + bytes.len()).next_multiple_of(64);
        GPA + off as u64
    }

    /// Reads `len` bytes at guest address `gpa`.
    pub fn read(&mut self, gpa: u64, len: usize) -> Vec<u8> {
        let off = (gpa - GPA) as usize;
        self.bytes()[off..off + len].to_vec()
    }

    fn take_desc(&mut self) -> u16 {
        let d = self.next_desc;
        self.next_desc = (self.next_desc + 1) & (self.size - 1);
        d
    }

    /// Offers one chain whose buffers hold `parts` in order (device-readable, as a driver's
    /// transmit queue); returns its head.
    pub fn send(&mut self, parts: &[&[u8]]) -> u16 {
        let descs: Vec<u16> = parts.iter().map(|_| self.take_desc()).collect();
        for (k, part) in parts.iter().enumerate() {
            let addr = self.put_data(part);
            let more = k + 1 < parts.len();
            let next = if more { descs[k + 1] } else { 0 };
            self.set_desc(
                descs[k],
                addr,
                part.len() as u32,
                if more { DESC_F_NEXT } else { 0 },
                next,
            );
        }
        self.offer(descs[0]);
        descs[0]
    }

    /// Offers one chain through an indirect table holding `parts`; returns its head.
    pub fn send_indirect(&mut self, parts: &[&[u8]]) -> u16 {
        let mut table = Vec::with_capacity(16 * parts.len());
        for (k, part) in parts.iter().enumerate() {
            let addr = self.put_data(part);
            let more = k + 1 < parts.len();
            table.extend_from_slice(&addr.to_le_bytes());
            table.extend_from_slice(&(part.len() as u32).to_le_bytes());
            table.extend_from_slice(&(if more { DESC_F_NEXT } else { 0 }).to_le_bytes());
            table.extend_from_slice(&(if more { k as u16 + 1 } else { 0 }).to_le_bytes());
        }
        let taddr = self.put_data(&table);
        let head = self.take_desc();
        self.set_desc(head, taddr, table.len() as u32, DESC_F_INDIRECT, 0);
        self.offer(head);
        head
    }

    /// Offers one device-writable buffer of `len` bytes (a driver's receive buffer);
    /// returns (head, its guest address).
    pub fn post_rx(&mut self, len: usize) -> (u16, u64) {
        let addr = self.put_data(&vec![0u8; len]);
        let head = self.take_desc();
        self.set_desc(head, addr, len as u32, DESC_F_WRITE, 0);
        self.offer(head);
        (head, addr)
    }
}

//! A bounded single-producer, single-consumer ring of captured frames: the poll thread
//! pushes (never waiting: a full ring refuses the frame), the capture's reader pops.
//!
//! Memory ordering: the producer writes a slot, then publishes it with a release store of
//! `head`; the consumer reads `head` with acquire, copies the slots out, then frees them
//! with a release store of `tail`, which the producer reads with acquire before reusing a
//! slot. Each side writes only its own index.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::SNAPLEN;

/// A captured frame as the reader gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// When it was captured (ns on the poll threads' monotonic clock, `crate::now_ns`).
    pub ts_ns: u64,
    /// Its length on the wire.
    pub wire_len: u32,
    /// Its first [`SNAPLEN`] bytes at most.
    pub data: Vec<u8>,
}

struct Slot {
    ts_ns: u64,
    wire_len: u32,
    len: u16,
    data: [u8; SNAPLEN],
}

/// The ring (module docs).
pub struct Ring {
    slots: Box<[UnsafeCell<Slot>]>,
    /// Next slot the producer writes (count, not index).
    head: AtomicUsize,
    /// Next slot the consumer reads (count, not index).
    tail: AtomicUsize,
}

// SAFETY: a slot is written only by the one producer while it is outside `tail..head`, and
// read only by the one consumer while inside it; the indexes' release/acquire pairs order
// those accesses (module docs).
unsafe impl Sync for Ring {}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("slots", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl Ring {
    /// A ring of `slots` frames.
    pub fn new(slots: usize) -> Ring {
        Ring {
            slots: (0..slots.max(1))
                .map(|_| {
                    UnsafeCell::new(Slot {
                        ts_ns: 0,
                        wire_len: 0,
                        len: 0,
                        data: [0; SNAPLEN],
                    })
                })
                .collect(),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
        }
    }

    /// Copies `frame` in (producer only); false when the ring is full.
    pub fn push(&self, frame: &[u8], ts_ns: u64) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= self.slots.len() {
            return false;
        }
        let n = frame.len().min(SNAPLEN);
        // SAFETY: slot `head` is outside `tail..head`: the consumer does not touch it, and
        // this is the only producer.
        let s = unsafe { &mut *self.slots[head % self.slots.len()].get() };
        s.ts_ns = ts_ns;
        s.wire_len = frame.len() as u32;
        s.len = n as u16;
        s.data[..n].copy_from_slice(&frame[..n]);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Moves every frame pushed so far into `out` (consumer only).
    pub fn pop_all(&self, out: &mut Vec<Frame>) {
        let head = self.head.load(Ordering::Acquire);
        let mut tail = self.tail.load(Ordering::Relaxed);
        while tail != head {
            // SAFETY: slot `tail` is inside `tail..head`: published by the producer (acquire
            // above), which does not write it until `tail` moves past it.
            let s = unsafe { &*self.slots[tail % self.slots.len()].get() };
            out.push(Frame {
                ts_ns: s.ts_ns,
                wire_len: s.wire_len,
                data: s.data[..usize::from(s.len)].to_vec(),
            });
            tail = tail.wrapping_add(1);
        }
        self.tail.store(tail, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_ring_refuses_and_frames_come_out_in_order() {
        let r = Ring::new(2);
        assert!(r.push(&[1, 2, 3], 10));
        assert!(r.push(&[4], 20));
        assert!(!r.push(&[5], 30), "full");
        let mut out = Vec::new();
        r.pop_all(&mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].data, vec![1, 2, 3]);
        assert_eq!((out[1].ts_ns, out[1].wire_len), (20, 1));
        assert!(r.push(&[6], 40), "room again");
        let big = vec![7u8; SNAPLEN + 100];
        assert!(r.push(&big, 50));
        out.clear();
        r.pop_all(&mut out);
        assert_eq!(out[1].data.len(), SNAPLEN);
        assert_eq!(out[1].wire_len as usize, SNAPLEN + 100);
    }

    #[test]
    fn a_producer_thread_and_a_reader_agree() {
        let r = std::sync::Arc::new(Ring::new(64));
        let p = r.clone();
        let producer = std::thread::spawn(move || {
            let mut sent = 0u64;
            let mut i = 0u64;
            while i < 10_000 {
                if p.push(&i.to_le_bytes(), i) {
                    sent += 1;
                }
                i += 1;
            }
            sent
        });
        let mut got = Vec::new();
        let mut all = Vec::new();
        while !producer.is_finished() {
            r.pop_all(&mut got);
            all.append(&mut got);
        }
        let sent = producer.join().unwrap();
        r.pop_all(&mut all);
        assert_eq!(all.len() as u64, sent);
        // In order, and each frame's bytes are the ones pushed with its timestamp.
        for w in all.windows(2) {
            assert!(w[0].ts_ns < w[1].ts_ns);
        }
        for f in &all {
            assert_eq!(f.data, f.ts_ns.to_le_bytes());
        }
    }
}

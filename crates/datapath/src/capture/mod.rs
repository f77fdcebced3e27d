//! Live capture of the frames a port receives and sends (`hayate ctl BRIDGE capture PORT`).
//!
//! Size and owner: one [`Taps`] per datapath, shared by its threads; a [`Capture`] per running
//! capture, with one bounded single-producer ring per poll thread ([`ring::Ring`],
//! [`SLOTS`] frames of up to [`SNAPLEN`] bytes each), made when the capture starts and
//! dropped when it ends — so a capture costs about `threads × 1 MiB` while it runs and
//! nothing after.
//!
//! Cost on the fast path: while no capture runs, one relaxed load per received batch and per
//! sent batch ([`Tap::active`]). While one runs, each thread runs the capture's filter (a
//! classic BPF program, [`packet::cbpf`]) on the frames of the captured port and copies those that
//! match into its own ring; a full ring loses the frame and counts it ([`Capture::lost`]),
//! it never holds a packet back. The thread picks up the set of captures once per change
//! (a generation number), taking a mutex then — never per packet. A capture nobody has read
//! for [`STALE`] (its reader was killed) takes no more frames.
//!
//! Frames are captured as they arrive (before any action) and as they leave (after the
//! actions), the way tcpdump on the port would see them.

pub mod ring;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use packet::Packet;

use packet::cbpf::Program;
use ring::{Frame, Ring};

/// Bytes kept of each frame (the pcap snapshot length).
pub const SNAPLEN: usize = 2048;
/// Frames each thread's ring holds.
pub const SLOTS: usize = 512;
/// A capture nobody has read for this long (its reader died) takes no more frames; the
/// control side stops it at its next capture request.
pub const STALE: std::time::Duration = std::time::Duration::from_secs(10);

/// Which frames of a port a capture takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Direction {
    /// Frames the port receives.
    pub rx: bool,
    /// Frames the switch sends through the port.
    pub tx: bool,
}

/// One running capture.
#[derive(Debug)]
pub struct Capture {
    ofport: u32,
    dir: Direction,
    filter: Option<Program>,
    /// One ring per thread, by thread index.
    rings: Vec<Ring>,
    /// Frames lost to a full ring, per thread (written by that thread only).
    lost: Vec<AtomicU64>,
    /// When it was last read ([`crate::now_ns`]).
    read_ns: AtomicU64,
}

impl Capture {
    /// The frames captured so far, oldest first (each thread's in order), into `out`.
    pub fn drain(&self, out: &mut Vec<Frame>) {
        self.read_ns.store(crate::now_ns(), Ordering::Relaxed);
        for r in &self.rings {
            r.pop_all(out);
        }
    }

    /// Frames lost because a ring was full.
    pub fn lost(&self) -> u64 {
        self.lost.iter().map(|l| l.load(Ordering::Relaxed)).sum()
    }

    /// Copies `pkt` into thread `thread`'s ring if the filter takes it.
    #[inline]
    fn offer(&self, thread: usize, pkt: &Packet, now_ns: u64) {
        let data = pkt.data();
        if let Some(f) = &self.filter {
            if f.run(data, data.len() as u32) == 0 {
                return;
            }
        }
        let Some(ring) = self.rings.get(thread) else {
            return;
        };
        if !ring.push(data, now_ns) {
            let l = &self.lost[thread];
            l.store(l.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }
}

/// The datapath's captures (module docs).
#[derive(Debug)]
pub struct Taps {
    threads: usize,
    /// Running captures: what the fast path checks first.
    active: AtomicUsize,
    /// Bumped on every start and stop.
    gen: AtomicU64,
    list: Mutex<Vec<Arc<Capture>>>,
}

impl Taps {
    /// No capture, for a datapath of `threads` threads.
    pub fn new(threads: usize) -> Taps {
        Taps {
            threads,
            active: AtomicUsize::new(0),
            gen: AtomicU64::new(0),
            list: Mutex::new(Vec::new()),
        }
    }

    /// Starts capturing `dir` frames of OpenFlow port `ofport` that `filter` takes (all
    /// without one). Allocates the rings.
    pub fn start(&self, ofport: u32, dir: Direction, filter: Option<Program>) -> Arc<Capture> {
        let c = Arc::new(Capture {
            ofport,
            dir,
            filter,
            rings: (0..self.threads).map(|_| Ring::new(SLOTS)).collect(),
            lost: (0..self.threads).map(|_| AtomicU64::new(0)).collect(),
            read_ns: AtomicU64::new(crate::now_ns()),
        });
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.push(c.clone());
        self.active.store(l.len(), Ordering::Release);
        self.gen.fetch_add(1, Ordering::Release);
        c
    }

    /// Stops capture `c` (the threads let go of it at their next batch).
    pub fn stop(&self, c: &Arc<Capture>) {
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|x| !Arc::ptr_eq(x, c));
        self.active.store(l.len(), Ordering::Release);
        self.gen.fetch_add(1, Ordering::Release);
    }

    /// Captures running now.
    pub fn running(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }
}

/// A poll thread's view of the captures: the datapath's [`Taps`] and the thread's copy of
/// the list.
#[derive(Debug, Default)]
pub struct Tap {
    taps: Option<Arc<Taps>>,
    thread: usize,
    seen: u64,
    list: Vec<Arc<Capture>>,
}

impl Tap {
    /// Thread `thread`'s view of `taps`.
    pub fn new(taps: Arc<Taps>, thread: usize) -> Tap {
        Tap {
            taps: Some(taps),
            thread,
            seen: 0,
            list: Vec::new(),
        }
    }

    /// Whether any capture runs (one relaxed load).
    #[inline(always)]
    pub fn active(&self) -> bool {
        match &self.taps {
            Some(t) => t.active.load(Ordering::Relaxed) != 0,
            None => false,
        }
    }

    /// Offers the frames of a batch port `ofport` received (`rx`) or is about to send.
    #[cold]
    pub fn offer(&mut self, ofport: u32, rx: bool, pkts: &[Packet], now_ns: u64) {
        self.refresh();
        let stale = STALE.as_nanos() as u64;
        for c in &self.list {
            if c.ofport != ofport || !(if rx { c.dir.rx } else { c.dir.tx }) {
                continue;
            }
            if now_ns.saturating_sub(c.read_ns.load(Ordering::Relaxed)) > stale {
                continue;
            }
            for p in pkts {
                c.offer(self.thread, p, now_ns);
            }
        }
    }

    /// Takes the list of captures anew when it changed.
    fn refresh(&mut self) {
        let Some(t) = &self.taps else { return };
        let g = t.gen.load(Ordering::Acquire);
        if g != self.seen {
            self.list = t.list.lock().unwrap_or_else(|e| e.into_inner()).clone();
            self.seen = g;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_ring_loses_frames_and_counts_them_and_only_the_port_s_frames_are_taken() {
        let pool = packet::Pool::with_frames(SLOTS as u32 + 64);
        let mut cache = pool.cache();
        let frame = [0xabu8; 60];
        let pkts: Vec<Packet> = (0..SLOTS + 10)
            .map(|_| cache.alloc_from(&frame).unwrap())
            .collect();
        let taps = Arc::new(Taps::new(2));
        let c = taps.start(
            5,
            Direction {
                rx: true,
                tx: false,
            },
            None,
        );
        let mut tap = Tap::new(taps.clone(), 1);
        assert!(tap.active());
        tap.offer(5, false, &pkts, 1); // sent frames: not this capture's
        tap.offer(6, true, &pkts, 1); // another port
        let mut out = Vec::new();
        c.drain(&mut out);
        assert!(out.is_empty());
        let now = crate::now_ns();
        tap.offer(5, true, &pkts, now);
        assert_eq!(
            c.lost(),
            10,
            "the ring holds {SLOTS}; the rest is lost and counted"
        );
        c.drain(&mut out);
        assert_eq!(out.len(), SLOTS);
        assert_eq!(out[0].data, frame);
        // Not read for longer than STALE: no more frames.
        tap.offer(5, true, &pkts[..1], now + STALE.as_nanos() as u64 * 2);
        out.clear();
        c.drain(&mut out);
        assert!(out.is_empty());
        taps.stop(&c);
        assert!(!tap.active());
        for p in pkts {
            cache.free(p);
        }
    }
}

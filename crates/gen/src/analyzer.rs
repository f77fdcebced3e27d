//! The receive side: what arrived, what was lost, late or doubled, and how long it took.
//!
//! Per stream (one per sending thread) an [`Analyzer`] tracks sequence numbers with a
//! [`WINDOW`]-bit window below the highest number seen:
//! - a number above the highest is in order (a gap above the highest leaves holes in the
//!   window, filled if the missing packets arrive late);
//! - a number inside the window whose bit is clear arrived late: *reordered* (RFC 4737: it
//!   came after a higher number);
//! - a number whose bit is already set is a *duplicate*;
//! - a number below the window is counted as reordered (it cannot be told from a duplicate).
//!
//! Loss is what was sent minus the distinct packets that arrived (when the sender is in this
//! process), or the highest number + 1 minus the distinct arrivals (receive-only mode).
//!
//! Latency is the receive time minus the probe's send time on the same counter, recorded in
//! nanoseconds into an HDR histogram (1 ns to 100 s, 3 significant digits); jitter is the
//! RFC 3550 interarrival jitter (a running mean of the transit-time differences, gain 1/16).

use hdrhistogram::Histogram;
use packet::Batch;

use crate::probe::{self, Probe};
use cpu::Tsc;

/// Bits in the duplicate/reorder window of each stream.
pub const WINDOW: u64 = 4096;
/// Streams a probe can name.
const STREAMS: usize = 256;
/// Largest latency the histogram holds (100 s, in ns); longer ones are recorded as this.
const MAX_LATENCY_NS: u64 = 100_000_000_000;

/// Sequence state of one stream.
#[derive(Debug, Clone)]
struct Stream {
    seen: bool,
    max: u64,
    received: u64,
    duplicates: u64,
    reordered: u64,
    window: Box<[u64; (WINDOW / 64) as usize]>,
    /// RFC 3550 jitter ×16 (ns) and the previous transit time.
    jitter16: u64,
    last_transit: Option<u64>,
}

impl Default for Stream {
    fn default() -> Self {
        Stream {
            seen: false,
            max: 0,
            received: 0,
            duplicates: 0,
            reordered: 0,
            window: Box::new([0; (WINDOW / 64) as usize]),
            jitter16: 0,
            last_transit: None,
        }
    }
}

impl Stream {
    #[inline(always)]
    fn bit(&mut self, s: u64) -> (&mut u64, u64) {
        let i = (s % WINDOW) as usize;
        (&mut self.window[i / 64], 1u64 << (i % 64))
    }

    /// The 64-bit sequence number closest to the highest seen whose low 32 bits are `seq`.
    #[inline(always)]
    fn extend(&self, seq: u32) -> u64 {
        let c = (self.max & !0xffff_ffff) | u64::from(seq);
        if c + (1 << 31) < self.max {
            c + (1 << 32)
        } else if c > self.max + (1 << 31) && c >= 1 << 32 {
            c - (1 << 32)
        } else {
            c
        }
    }

    #[inline(always)]
    fn on_seq(&mut self, seq: u32) {
        self.received += 1;
        // The common case: the next number in order.
        if self.seen && seq == (self.max as u32).wrapping_add(1) {
            self.max += 1;
            let (w, b) = self.bit(self.max);
            *w |= b;
            return;
        }
        if !self.seen {
            self.seen = true;
            self.max = u64::from(seq);
            let (w, b) = self.bit(self.max);
            *w |= b;
            return;
        }
        let s = self.extend(seq);
        if s > self.max {
            if s - self.max >= WINDOW {
                self.window.fill(0);
            } else {
                for q in self.max + 1..s {
                    let (w, b) = self.bit(q);
                    *w &= !b;
                }
            }
            let (w, b) = self.bit(s);
            *w |= b;
            self.max = s;
        } else if self.max - s >= WINDOW {
            self.reordered += 1;
        } else {
            let (w, b) = self.bit(s);
            if *w & b != 0 {
                self.duplicates += 1;
            } else {
                *w |= b;
                self.reordered += 1;
            }
        }
    }

    #[inline(always)]
    fn on_transit(&mut self, ns: u64) {
        if let Some(last) = self.last_transit {
            let d = ns.abs_diff(last);
            // RFC 3550 A.8: J += (|D| - J) / 16, kept ×16.
            self.jitter16 = self.jitter16 + d - ((self.jitter16 + 8) >> 4);
        }
        self.last_transit = Some(ns);
    }
}

/// Consecutive probes of one stream with one send time (one transmit batch).
#[derive(Debug, Default, Clone, Copy)]
struct Run {
    time: u64,
    stream: u8,
    ns: u64,
    count: u64,
}

/// Counts of one stream, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct StreamCounts {
    /// The stream (sending thread).
    pub stream: u8,
    /// Probes received, duplicates included.
    pub received: u64,
    /// Distinct probes received.
    pub unique: u64,
    /// Probes received more than once (the extra copies).
    pub duplicates: u64,
    /// Probes that arrived after a higher sequence number.
    pub reordered: u64,
    /// Highest sequence number seen + 1 (what a sender counting from 0 sent at least).
    pub highest: u64,
    /// RFC 3550 interarrival jitter, ns.
    pub jitter_ns: u64,
}

/// The receive side of one thread (several merge with [`Analyzer::merge`]).
#[derive(Debug, Clone)]
pub struct Analyzer {
    streams: Box<[Stream; STREAMS]>,
    ns_factor: u64,
    /// Frames received.
    pub packets: u64,
    /// Bytes received (FCS included).
    pub bytes: u64,
    /// Frames without a probe.
    pub foreign: u64,
    /// Probes received per flow (the first flows only; see [`Analyzer::new`]).
    pub flow_rx: Vec<u64>,
    /// Probes of flows beyond `flow_rx`.
    pub flow_rx_other: u64,
    /// Latency in ns.
    pub latency: Histogram<u64>,
}

impl Analyzer {
    /// An analyzer counting the first `flows` flows one by one, converting counter ticks
    /// with `tsc`.
    pub fn new(flows: u32, tsc: Tsc) -> Analyzer {
        Analyzer {
            streams: Box::new(std::array::from_fn(|_| Stream::default())),
            ns_factor: tsc.ns_factor(),
            packets: 0,
            bytes: 0,
            foreign: 0,
            flow_rx: vec![0; flows as usize],
            flow_rx_other: 0,
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)
                .expect("static histogram bounds are valid"),
        }
    }

    /// Takes one frame received at counter value `now`.
    #[inline(always)]
    pub fn frame(&mut self, data: &[u8], now: u64) {
        let mut run = Run::default();
        self.frame_in_run(data, now, &mut run);
        self.flush(&mut run);
    }

    /// [`Analyzer::frame`] for frames of one receive batch: frames sent in one batch share
    /// a send time, so their latencies are recorded in one histogram update per run.
    #[inline(always)]
    fn frame_in_run(&mut self, data: &[u8], now: u64, run: &mut Run) {
        self.packets += 1;
        self.bytes += data.len() as u64 + crate::template::FCS as u64;
        let Some(p) = Probe::read(data) else {
            self.foreign += 1;
            return;
        };
        match self.flow_rx.get_mut(p.flow as usize) {
            Some(c) => *c += 1,
            None => self.flow_rx_other += 1,
        }
        let s = &mut self.streams[usize::from(p.stream)];
        s.on_seq(p.seq);
        if run.count > 0 && run.time == p.time && run.stream == p.stream {
            run.count += 1;
            // Same transit as the previous probe: D = 0, J decays (RFC 3550).
            s.jitter16 -= (s.jitter16 + 8) >> 4;
            return;
        }
        self.flush(run);
        let ns =
            Tsc::ns_fixed(probe::elapsed(p.time, now), self.ns_factor).clamp(1, MAX_LATENCY_NS);
        let s = &mut self.streams[usize::from(p.stream)];
        s.on_transit(ns);
        *run = Run {
            time: p.time,
            stream: p.stream,
            ns,
            count: 1,
        };
    }

    #[inline(always)]
    fn flush(&mut self, run: &mut Run) {
        if run.count > 0 {
            self.latency.saturating_record_n(run.ns, run.count);
            run.count = 0;
        }
    }

    /// Takes every frame of `batch`, all received at counter value `now`.
    #[inline]
    pub fn batch(&mut self, batch: &Batch, now: u64) {
        let mut run = Run::default();
        for p in batch.as_slice() {
            self.frame_in_run(p.data(), now, &mut run);
        }
        self.flush(&mut run);
    }

    /// Adds another thread's counts (sequence windows are not merged: a stream is expected
    /// on one receive queue; split streams still sum correctly except for cross-queue
    /// duplicates and reordering).
    pub fn merge(&mut self, other: &Analyzer) {
        self.packets += other.packets;
        self.bytes += other.bytes;
        self.foreign += other.foreign;
        if self.flow_rx.len() < other.flow_rx.len() {
            self.flow_rx.resize(other.flow_rx.len(), 0);
        }
        for (a, b) in self.flow_rx.iter_mut().zip(&other.flow_rx) {
            *a += b;
        }
        self.flow_rx_other += other.flow_rx_other;
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        for (a, b) in self.streams.iter_mut().zip(other.streams.iter()) {
            if !b.seen {
                continue;
            }
            if !a.seen {
                *a = b.clone();
                continue;
            }
            a.received += b.received;
            a.duplicates += b.duplicates;
            a.reordered += b.reordered;
            a.max = a.max.max(b.max);
            a.jitter16 = a.jitter16.max(b.jitter16);
        }
    }

    /// Counts of every stream that was seen.
    pub fn streams(&self) -> Vec<StreamCounts> {
        self.streams
            .iter()
            .enumerate()
            .filter(|(_, s)| s.seen)
            .map(|(i, s)| StreamCounts {
                stream: i as u8,
                received: s.received,
                unique: s.received - s.duplicates,
                duplicates: s.duplicates,
                reordered: s.reordered,
                highest: s.max + 1,
                jitter_ns: s.jitter16 >> 4,
            })
            .collect()
    }

    /// Probes received (duplicates included).
    pub fn probes(&self) -> u64 {
        self.packets - self.foreign
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsc() -> Tsc {
        Tsc { hz: 1e9 }
    }

    fn probe_frame(stream: u8, seq: u32, time: u64) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        let p = Probe {
            stream,
            flow: seq % 4,
            seq,
            time,
        };
        let at = f.len() - crate::probe::PROBE_LEN;
        p.write((&mut f[at..]).try_into().unwrap());
        f
    }

    #[test]
    fn counts_loss_reorder_and_duplicates() {
        let mut a = Analyzer::new(4, tsc());
        // 0..10 with 3 lost, 5 and 6 swapped, 8 twice, plus one foreign frame.
        for seq in [0, 1, 2, 4, 6, 5, 7, 8, 8, 9] {
            a.frame(&probe_frame(0, seq, 100), 1100);
        }
        a.frame(&[0u8; 60], 1100);
        let s = a.streams();
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0],
            StreamCounts {
                stream: 0,
                received: 10,
                unique: 9,
                duplicates: 1,
                reordered: 1,
                highest: 10,
                jitter_ns: 0,
            }
        );
        assert_eq!((a.packets, a.foreign, a.probes()), (11, 1, 10));
        assert_eq!(a.flow_rx, vec![4, 3, 2, 1]);
        assert_eq!(a.latency.min(), 1000);
        assert_eq!(a.latency.max(), 1000);
    }

    #[test]
    fn sequence_wraps_at_32_bits() {
        let mut a = Analyzer::new(0, tsc());
        for seq in [u32::MAX - 1, u32::MAX, 0, 1] {
            a.frame(&probe_frame(1, seq, 0), 10);
        }
        let s = a.streams()[0];
        assert_eq!((s.unique, s.reordered, s.duplicates), (4, 0, 0));
        assert_eq!(s.highest, (1u64 << 32) + 2);
    }

    #[test]
    fn very_late_packets_count_as_reordered() {
        let mut a = Analyzer::new(0, tsc());
        a.frame(&probe_frame(0, 10_000, 0), 10);
        a.frame(&probe_frame(0, 1, 0), 10);
        assert_eq!(a.streams()[0].reordered, 1);
    }

    #[test]
    fn jitter_follows_rfc_3550() {
        let mut a = Analyzer::new(0, tsc());
        // Transit alternates 1000 / 1160 ns: |D| = 160 each time; J converges to 160.
        for i in 0..400u32 {
            let transit = if i % 2 == 0 { 1000 } else { 1160 };
            a.frame(&probe_frame(0, i, 0), transit);
        }
        let j = a.streams()[0].jitter_ns;
        assert!((150..=160).contains(&j), "{j}");
    }

    #[test]
    fn merge_sums_threads() {
        let mut a = Analyzer::new(2, tsc());
        let mut b = Analyzer::new(2, tsc());
        a.frame(&probe_frame(0, 0, 0), 500);
        b.frame(&probe_frame(1, 0, 0), 700);
        b.frame(&probe_frame(1, 1, 0), 700);
        a.merge(&b);
        assert_eq!(a.packets, 3);
        assert_eq!(a.streams().len(), 2);
        assert_eq!(a.latency.len(), 3);
        assert_eq!(a.flow_rx, vec![2, 1]);
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn probe_frame(seq: u32) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        let p = Probe {
            stream: 0,
            flow: 0,
            seq,
            time: 0,
        };
        let at = f.len() - crate::probe::PROBE_LEN;
        p.write((&mut f[at..]).try_into().unwrap());
        f
    }

    proptest! {
        /// Against a naive model: a set of seen numbers and the highest so far. Within the
        /// window the analyzer must agree exactly.
        #[test]
        fn agrees_with_a_naive_model(ops in proptest::collection::vec((0u32..3000, 0u8..4), 1..400)) {
            let mut a = Analyzer::new(0, Tsc { hz: 1e9 });
            let mut seen = HashSet::new();
            let (mut dups, mut reordered, mut max) = (0u64, 0u64, None::<u32>);
            // Mostly forward motion with jumps back (reordering) and repeats (duplicates).
            let mut next = 0u32;
            for (step, kind) in ops {
                let seq = match kind {
                    0 | 1 => { next += step % 7 + 1; next }
                    2 => next.saturating_sub(step % 200),
                    _ => next,
                };
                a.frame(&probe_frame(seq), 10);
                if !seen.insert(seq) {
                    dups += 1;
                } else if max.is_some_and(|m| seq < m) {
                    reordered += 1;
                }
                max = Some(max.map_or(seq, |m| m.max(seq)));
            }
            let s = a.streams()[0];
            prop_assert_eq!(s.duplicates, dups);
            prop_assert_eq!(s.reordered, reordered);
            prop_assert_eq!(s.unique, seen.len() as u64);
            prop_assert_eq!(s.highest, u64::from(max.unwrap()) + 1);
        }
    }
}

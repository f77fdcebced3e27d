//! Egress queues per port: what `set_queue:Q,output:P` (ovs-ofctl's `enqueue:P:Q`) does.
//! Each queue of a port has a guaranteed rate and a cap, and the port may have a cap of its
//! own (Open vSwitch's Queue `min-rate` / `max-rate` and QoS `max-rate`; the options are
//! parsed in `port::egress`).
//!
//! Two kinds, by the port's QoS type (`port::egress::QosType`):
//!
//! - **Policing** (`egress-policer`, `trtcm-policer`; the default): when a port's output
//!   batch is sent, each packet is judged by the queue it was put in (`pkt.meta.user`, set
//!   by the `set_queue` action; 0 when none was):
//!
//!   1. within its queue's `min_rate` (the committed bucket) and its `max_rate` (the peak
//!      bucket; no cap: always): it passes, whatever the other queues send — the guarantee
//!      (a queue its cap stops has had it) — and uses up room in the port's bucket (as a
//!      debt the next refills pay when the bucket is empty, so the port's total stays within
//!      its cap);
//!   2. else within its queue's `max_rate` (the peak bucket; no cap: always) and the port's
//!      `qos_max_rate` (no cap: always): it passes;
//!   3. else it is dropped and counted against its queue.
//!
//! - **Shaping** (`linux-htb`): the packets of the batch join their queues instead, a ring
//!   per queue that the sending poll thread owns ([`Backlog`], in `egress_backlog.rs`), and
//!   leave when the same buckets allow — first what each queue's `min_rate` allows, then,
//!   deficit round robin over the queues by bytes (each queue's quantum by its `min_rate`, as
//!   HTB's), what each may borrow up to its `max_rate` from the room the port's
//!   `qos_max_rate` has left. A full queue drops the arriving packet (tail drop,
//!   counted as above). The thread releases what the buckets allow on every poll, packets or
//!   not, and does not sleep while it holds any (`Executor::release_held`, `crate::pmd`).
//!
//! A packet whose queue the port lacks is dropped and counted as the port's
//! `drop_queue_unknown`, except queue 0, which without a row of its own is limited by the
//! port's cap only. A port with no queues and no cap ignores queues altogether.
//!
//! A packet the queue's cap passes and the port's cap then refuses has used its queue's
//! peak tokens (the two buckets are not taken as one).
//!
//! Size and owner: one [`PortShaper`] per port, with a slot for each of its queues (ids 0 ..=
//! [`port::egress::MAX_QUEUE_ID`], at most [`port::egress::MAX_QUEUES`] of them;
//! `egress_slots.rs` maps id to slot), made by the datapath ([`Shapers`]) and shared by every thread's tx entry of the port; the
//! control side changes it at any time ([`crate::Running::set_egress`]). Its buckets are the
//! pipeline's token bucket ([`pipeline::meter::TokenBucket`]), one atomic per bucket for the
//! whole port. The cost per output batch: one relaxed load for a port without queues; with
//! queues, per queue present in the batch a lookup of its slot (a scan of the slots in use:
//! relaxed loads, one per queue the port has at most), one refill and one atomic update per
//! bucket and three counter additions; a shaped port's rings are allocated when its
//! configuration changes, never per packet. No allocation, lock or system call per packet.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use packet::Packet;
use pipeline::meter::TokenBucket;
use port::egress::{default_burst, Egress, QueueRates};

#[path = "egress_backlog.rs"]
mod backlog;
pub(crate) use backlog::Backlog;

#[path = "egress_slots.rs"]
mod slots;
use slots::{QueueSlots, FREE, SLOTS};

/// kbit/s → millibits/s, kbit → millibits.
const MILLI: u64 = 1_000_000;

/// What one queue counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Packets it passed.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Packets over its rates, dropped (policing), or arriving at a full queue (shaping).
    pub dropped: u64,
    /// Packets it holds now, all poll threads together (shaping; a gauge).
    pub backlog: u64,
}

/// One queue of a port, as the control side reads it ([`crate::Running::egress_queues`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressQueue {
    /// Queue id.
    pub queue: u32,
    /// Its rates.
    pub rates: QueueRates,
    /// Its counters.
    pub counts: QueueCounts,
}

#[derive(Debug)]
struct QueueShaper {
    on: AtomicBool,
    /// Committed bucket, millibits (rate 0: no guarantee).
    min: TokenBucket,
    /// Peak bucket, millibits (rate 0: no cap of its own).
    max: TokenBucket,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    dropped: AtomicU64,
    /// Packets held, all threads together (shaping).
    held: AtomicU64,
    /// Millibits it may borrow per turn when shaping ([`quantum`]).
    quantum: AtomicU64,
}

impl QueueShaper {
    fn new() -> QueueShaper {
        QueueShaper {
            on: AtomicBool::new(false),
            min: TokenBucket::new(0, 0),
            max: TokenBucket::new(0, 0),
            tx_packets: AtomicU64::new(0),
            tx_bytes: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            held: AtomicU64::new(0),
            quantum: AtomicU64::new(quantum(0)),
        }
    }

    fn set(&self, q: Option<QueueRates>) {
        let q = q.unwrap_or_default();
        let bucket = |rate: u32| match q.burst_kbit {
            0 => default_burst(rate),
            b => b,
        };
        self.min.set(
            u64::from(q.min_kbps) * MILLI,
            u64::from(bucket(q.min_kbps)) * MILLI,
        );
        self.max.set(
            u64::from(q.max_kbps) * MILLI,
            u64::from(bucket(q.max_kbps)) * MILLI,
        );
        self.quantum.store(quantum(q.min_kbps), Ordering::Relaxed);
        self.on
            .store(q.min_kbps != 0 || q.max_kbps != 0, Ordering::Release);
    }

    /// Starts the counters of a queue new to its slot from 0 (the held gauge stays: the
    /// threads take off it what they held for the slot's old queue).
    fn reset_counts(&self) {
        for c in [&self.tx_packets, &self.tx_bytes, &self.dropped] {
            c.store(0, Ordering::Relaxed);
        }
    }

    fn counts(&self) -> QueueCounts {
        QueueCounts {
            tx_packets: self.tx_packets.load(Ordering::Relaxed),
            tx_bytes: self.tx_bytes.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            backlog: self.held.load(Ordering::Relaxed),
        }
    }
}

/// Linux HTB's `r2q` as Open vSwitch sets it: a class's quantum is its rate (bytes/s) / 10.
const RATE_TO_QUANTUM: u64 = 10;
/// The least and most quantum, bytes (Linux HTB's bounds for a quantum it computes).
const QUANTUM_BYTES: (u64, u64) = (1_000, 200_000);

/// The quantum of a queue guaranteed `min_kbps` (0: none), in millibits: what it may borrow
/// per turn of the shaper's deficit round robin (`egress_backlog.rs`), so that queues borrow
/// the port's spare rate in proportion to their guarantees and in bytes, not packets. As
/// Linux HTB under Open vSwitch's `linux-htb`: the class rate is the queue's `min-rate`
/// (one MTU per second without one), its quantum that rate in bytes/s over `r2q` = 10,
/// kept within 1,000 ..= 200,000 bytes (so a queue without a guarantee, or a small one,
/// has the least quantum, and equal queues get equal bytes).
fn quantum(min_kbps: u32) -> u64 {
    let bytes = u64::from(min_kbps) * 1000 / 8 / RATE_TO_QUANTUM;
    bytes.clamp(QUANTUM_BYTES.0, QUANTUM_BYTES.1) * 8000
}

/// One port's egress queues (see the module docs).
#[derive(Debug)]
pub struct PortShaper {
    on: AtomicBool,
    /// The port's cap, millibits (rate 0: none).
    port: TokenBucket,
    /// By slot (`slots` says which queue each serves).
    queues: [QueueShaper; SLOTS],
    slots: QueueSlots,
    /// Millibits that guaranteed traffic used beyond what the port's bucket held, charged
    /// at the next refills (at most the bucket's size), so the guarantee comes out of the
    /// port's cap rather than on top of it.
    debt: AtomicU64,
    /// Packets for a queue the port lacks.
    unknown: AtomicU64,
    /// Packets each queue holds per thread when the port shapes; 0: it polices.
    backlog: AtomicU32,
    /// Changes with every [`PortShaper::set`] (each thread's [`Backlog`] follows it).
    generation: AtomicU64,
    /// What it was given (control side only).
    config: Mutex<Egress>,
}

/// The cost of `pkt` in millibits: its frame's bytes, or for a TCP super-packet
/// ([`packet::gso`]) the bytes of the segments it stands for (each with its own headers).
#[inline(always)]
fn cost(pkt: &Packet) -> u64 {
    if pkt.is_gso() {
        return wire_len(pkt) * 8000;
    }
    pkt.len() as u64 * 8000
}

/// The bytes a super-packet's segments take on the wire: its length and its headers again
/// for every segment after the first (its own length when its headers do not parse). The
/// headers of one encapsulated whole include the outer ones (the metadata's offsets are the
/// inner frame's).
#[cold]
fn wire_len(pkt: &Packet) -> u64 {
    let len = pkt.len();
    let (Some(g), l4) = (pkt.gso(), pkt.meta.l4_off as usize) else {
        return len as u64;
    };
    let outer = usize::from(g.outer);
    let hdr = match pkt.data().get(outer + l4 + 12) {
        Some(b) if l4 != 0 => outer + l4 + usize::from(b >> 4) * 4,
        _ => return len as u64,
    };
    if hdr >= len || g.mss == 0 {
        return len as u64;
    }
    let segments = (len - hdr).div_ceil(usize::from(g.mss));
    (len + (segments - 1) * hdr) as u64
}

impl PortShaper {
    /// A shaper for `e` (off when it has no queue and no cap), buckets full.
    pub fn new(e: Egress) -> PortShaper {
        let s = PortShaper {
            on: AtomicBool::new(false),
            port: TokenBucket::new(0, 0),
            queues: std::array::from_fn(|_| QueueShaper::new()),
            slots: QueueSlots::default(),
            debt: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
            backlog: AtomicU32::new(0),
            generation: AtomicU64::new(0),
            config: Mutex::new(Egress::default()),
        };
        s.set(e);
        s
    }

    /// Changes everything (buckets refilled to their new size; counters kept, but for a
    /// queue new to the port).
    pub fn set(&self, e: Egress) {
        let mut config = self.lock();
        let burst = match e.burst_kbit {
            0 => default_burst(e.max_kbps),
            b => b,
        };
        self.port
            .set(u64::from(e.max_kbps) * MILLI, u64::from(burst) * MILLI);
        // A queue's rates are set before its id is published, and a queue that goes is off
        // before its id goes.
        let plan = self.slots.plan(e.queues.keys().copied());
        for (slot, q) in self.queues.iter().enumerate() {
            let id = plan.ids[slot];
            if plan.fresh & (1 << slot) != 0 {
                q.reset_counts();
            }
            q.set((id != FREE).then(|| e.queues.get(&id).copied()).flatten());
        }
        self.slots.publish(&plan);
        let backlog = if e.is_on() { e.backlog_limit() } else { 0 };
        self.backlog.store(backlog, Ordering::Release);
        self.on.store(e.is_on(), Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        *config = e;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Egress> {
        self.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What it was given.
    pub fn egress(&self) -> Egress {
        self.lock().clone()
    }

    /// Whether the port has queues or a cap (one relaxed load, per batch).
    #[inline(always)]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Whether packets above the rates wait in their queues (`linux-htb`) rather than being
    /// dropped (one relaxed load).
    #[inline(always)]
    pub fn shapes(&self) -> bool {
        self.backlog.load(Ordering::Relaxed) != 0
    }

    /// The slot of queue `id` if it takes packets: a queue the port has, or queue 0.
    #[inline(always)]
    fn slot_of(&self, id: u32) -> Option<usize> {
        self.slots
            .slot(id)
            .filter(|&s| s == 0 || self.queues[s].on.load(Ordering::Relaxed))
    }

    /// Refills the port's bucket and pays what guaranteed traffic owes it; returns whether
    /// the port has a cap.
    #[inline]
    fn refill_port(&self, now_ns: u64) -> bool {
        let capped = self.port.rate() != 0;
        if capped {
            self.port.refill(now_ns);
            if self.debt.load(Ordering::Relaxed) != 0 {
                let d = self.debt.swap(0, Ordering::Relaxed);
                self.owe(self.port.charge(d));
            }
        }
        capped
    }

    /// Packets dropped for a queue the port lacks.
    pub fn unknown(&self) -> u64 {
        self.unknown.load(Ordering::Relaxed)
    }

    /// Each queue with its rates and counters, by id.
    pub fn queues(&self) -> Vec<EgressQueue> {
        let e = self.lock();
        e.queues
            .iter()
            .filter_map(|(&id, &rates)| {
                let q = &self.queues[self.slots.slot(id)?];
                Some(EgressQueue {
                    queue: id,
                    rates,
                    counts: q.counts(),
                })
            })
            .collect()
    }

    /// Queue 0 when the port has queues or a cap but no row of its own for queue 0: the
    /// queue its packets with no `set_queue` go to (slot 0, limited by the port's cap only),
    /// with its counters and no rates of its own. `None` when queue 0 has a row (then
    /// [`PortShaper::queues`] lists it) or the port has no queues.
    pub fn default_queue(&self) -> Option<EgressQueue> {
        let e = self.lock();
        if !self.is_on() || e.queues.contains_key(&0) {
            return None;
        }
        Some(EgressQueue {
            queue: 0,
            rates: QueueRates::default(),
            counts: self.queues[0].counts(),
        })
    }

    /// Adds `millibits` to the debt, up to the port bucket's size.
    #[inline]
    fn owe(&self, millibits: u64) {
        if millibits != 0 {
            let cap = self.port.capacity();
            let _ = self
                .debt
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                    Some(d.saturating_add(millibits).min(cap))
                });
        }
    }

    /// Judges the packets of one output batch (≤ 32) at time `now_ns`; returns the mask of
    /// those that pass (bit `i`: `pkts[i]`) and counts the rest.
    #[inline]
    pub fn shape(&self, now_ns: u64, pkts: &[Packet]) -> u32 {
        let n = pkts.len().min(32);
        let mut todo = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        let capped = self.refill_port(now_ns);
        let mut pass = 0u32;
        while todo != 0 {
            let q = pkts[todo.trailing_zeros() as usize].meta.user;
            let mut same = 0u32;
            for (i, p) in pkts.iter().enumerate().take(n) {
                if todo & (1 << i) != 0 && p.meta.user == q {
                    same |= 1 << i;
                }
            }
            todo &= !same;
            let of = |set: u32| {
                move |i: usize| {
                    if set & (1 << i) != 0 {
                        cost(&pkts[i])
                    } else {
                        0
                    }
                }
            };
            let qs = self
                .slots
                .slot(q)
                .map(|s| &self.queues[s])
                .filter(|s| s.on.load(Ordering::Relaxed));
            let Some(qs) = qs else {
                if q == 0 {
                    pass |= if capped {
                        self.port.take_each(n, of(same)) & same
                    } else {
                        same
                    };
                } else {
                    self.unknown
                        .fetch_add(u64::from(same.count_ones()), Ordering::Relaxed);
                }
                continue;
            };
            let mut ok = 0u32;
            let peak = qs.max.rate() != 0;
            if peak {
                qs.max.refill(now_ns);
            }
            if qs.min.rate() != 0 {
                qs.min.refill(now_ns);
                ok = qs.min.take_each(n, of(same)) & same;
                // The guarantee is part of the queue's cap, not on top of it.
                if peak && ok != 0 {
                    ok &= qs.max.take_each(n, of(ok));
                }
                if capped && ok != 0 {
                    self.owe(self.port.charge(bits_of(pkts, ok)));
                }
            }
            let mut over = same & !ok;
            if over != 0 && peak {
                over &= qs.max.take_each(n, of(over));
            }
            if over != 0 && capped {
                over &= self.port.take_each(n, of(over));
            }
            ok |= over;
            pass |= ok;
            qs.tx_packets
                .fetch_add(u64::from(ok.count_ones()), Ordering::Relaxed);
            qs.tx_bytes
                .fetch_add(bits_of(pkts, ok) / 8000, Ordering::Relaxed);
            let dropped = (same & !ok).count_ones();
            if dropped != 0 {
                qs.dropped.fetch_add(u64::from(dropped), Ordering::Relaxed);
            }
        }
        pass
    }
}

/// The cost in millibits of the packets of `set`.
fn bits_of(pkts: &[Packet], set: u32) -> u64 {
    pkts.iter()
        .enumerate()
        .take(32)
        .filter(|(i, _)| set & (1 << i) != 0)
        .map(|(_, p)| cost(p))
        .sum()
}

/// Frees and takes out of `b` (one output batch, ≤ 32) what `shaper`, when the port has
/// queues, refuses at time `now_ns`; when it shapes, the packets of `b` join `backlog`'s
/// queues and `b` takes what they may send now. Returns whether `backlog` holds packets.
#[inline(always)]
pub(crate) fn shape_batch(
    shaper: Option<&PortShaper>,
    backlog: &mut Backlog,
    now_ns: u64,
    b: &mut packet::Batch,
    cache: &mut packet::PoolCache,
) -> bool {
    let Some(s) = shaper else {
        return false;
    };
    if s.shapes() || !backlog.is_empty() {
        backlog.follow(s, cache);
        if s.shapes() {
            backlog.shape(s, now_ns, b, cache);
            return !backlog.is_empty();
        }
    }
    if !s.is_on() {
        return false;
    }
    let pass = s.shape(now_ns, b.as_slice());
    if pass.count_ones() as usize != b.len() {
        let mut j = 0;
        b.retain_or(
            |_| {
                let keep = pass & (1 << j) != 0;
                j += 1;
                keep
            },
            |p| cache.free(p),
        );
    }
    false
}

/// Every port's egress queues, by OpenFlow port number (control side; a mutex is fine here).
#[derive(Debug, Default)]
pub struct Shapers {
    by_port: Mutex<BTreeMap<u32, Arc<PortShaper>>>,
}

impl Shapers {
    /// The shaper of port `ofport`, made (off) if it has none yet.
    pub fn port(&self, ofport: u32) -> Arc<PortShaper> {
        self.by_port
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(ofport)
            .or_insert_with(|| Arc::new(PortShaper::new(Egress::default())))
            .clone()
    }

    /// Sets port `ofport`'s queues.
    pub fn set(&self, ofport: u32, e: Egress) {
        self.port(ofport).set(e);
    }
}

#[cfg(test)]
#[path = "egress_tests.rs"]
mod tests;

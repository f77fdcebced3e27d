//! Per-thread counters of the fast path.
//!
//! Size and owner: one [`PmdStats`] per poll-mode thread, written only by that thread with a
//! relaxed load followed by a relaxed store (no atomic read-modify-write on the hot path), and
//! read by anyone (the management side, `hayate bench`). A [`Snapshot`] is a plain copy that
//! adds up, so totals over threads are `snapshots.iter().sum()`.

use std::sync::atomic::{AtomicU64, Ordering};

/// One counter of [`PmdStats`]; indexes a [`Snapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counter {
    /// Packets received from rx queues.
    RxPackets,
    /// Bytes received from rx queues.
    RxBytes,
    /// Packets handed to tx queues and accepted by them.
    TxPackets,
    /// Bytes accepted by tx queues.
    TxBytes,
    /// Packets that hit the exact-match cache.
    EmcHits,
    /// Packets that missed the exact-match cache and hit the megaflow classifier.
    MegaflowHits,
    /// Translations through the pipeline (one per new flow in a batch, not per packet).
    Upcalls,
    /// Misses dropped without a translation because the upcall budget was spent.
    UpcallShed,
    /// Megaflows installed.
    MegaflowInstalls,
    /// Megaflows removed because they were idle or evicted to make room for a new one.
    MegaflowEvictions,
    /// Translations not installed because the megaflow table was at its bound.
    MegaflowFull,
    /// Cache flushes because the pipeline changed in a way revalidation does not track
    /// (groups, meters, ports, MAC learning, a change log the thread fell behind on), or the
    /// thread's ports changed.
    CacheFlushes,
    /// Packets dropped because their actions had no output.
    DropNoAction,
    /// Packets dropped because a header rewrite failed.
    DropRewrite,
    /// Packets a tx queue did not take (or the port has no tx queue for this thread).
    DropTxFull,
    /// Packets dropped by a meter.
    DropMeter,
    /// Packet-ins dropped because the packet-in queue was full.
    DropPacketInFull,
    /// Copies (multi-output, packet-in) not made because the buffer pool was empty.
    DropPoolEmpty,
    /// Frames dropped on receive because their headers were truncated or malformed.
    DropMalformed,
    /// Packet-ins queued for the agent.
    PacketIns,
    /// Cycles spent on batches that carried packets.
    BusyCycles,
    /// Cycles spent polling queues that had nothing.
    IdleCycles,
    /// Cycles spent inside upcalls (translation and megaflow install).
    UpcallCycles,
    /// Times the thread slept because its queues stayed empty (see [`crate::idle`]).
    IdleSleeps,
    /// Megaflow subtables probed, summed over the packets that looked them up (divided by
    /// `megaflow_hits`: Open vSwitch's "avg. subtable lookups per megaflow hit").
    MegaflowProbes,
    /// TCP super-packets ([`packet::gso`]) cut into segments in software because their output
    /// port cannot ask its kernel to cut them.
    GsoSegmented,
    /// TCP super-packets encapsulated whole into a UDP tunnel, for the underlay port's kernel
    /// to cut ([`port::Port::udp_tunnel_gso`]).
    GsoTunnelled,
    /// TCP super-packets made by joining segments bound for a port that takes them
    /// ([`crate::DpConfig::gro`]).
    GroSupers,
    /// The segments joined into them (÷ `gro_supers`: segments per super-packet).
    GroSegments,
    /// Times the priority lane ([`crate::Pmd::is_lane`]) used up its share of the core and
    /// slept to the end of its window (a flood of control frames).
    LaneYields,
    /// Megaflows a published flow change may have affected that were checked when hit and
    /// kept ([`crate::revalidate`]).
    MegaflowRevalidated,
    /// Megaflows removed because a published flow change may affect them (their packets take
    /// an upcall).
    MegaflowInvalidated,
    /// Frames dropped on receive, before lookup, because their port sent more than its
    /// ingress policing rate ([`crate::police`]).
    DropPoliced,
    /// Packet-ins not queued because their rx queue had used its packet-in allowance
    /// ([`crate::DpConfig::packet_in_port_rate`]).
    DropPacketInBudget,
}

/// Number of counters.
pub const COUNTERS: usize = 34;

impl Counter {
    /// Every counter, in index order.
    pub const ALL: [Counter; COUNTERS] = [
        Counter::RxPackets,
        Counter::RxBytes,
        Counter::TxPackets,
        Counter::TxBytes,
        Counter::EmcHits,
        Counter::MegaflowHits,
        Counter::Upcalls,
        Counter::UpcallShed,
        Counter::MegaflowInstalls,
        Counter::MegaflowEvictions,
        Counter::MegaflowFull,
        Counter::CacheFlushes,
        Counter::DropNoAction,
        Counter::DropRewrite,
        Counter::DropTxFull,
        Counter::DropMeter,
        Counter::DropPacketInFull,
        Counter::DropPoolEmpty,
        Counter::DropMalformed,
        Counter::PacketIns,
        Counter::BusyCycles,
        Counter::IdleCycles,
        Counter::UpcallCycles,
        Counter::IdleSleeps,
        Counter::MegaflowProbes,
        Counter::GsoSegmented,
        Counter::GsoTunnelled,
        Counter::GroSupers,
        Counter::GroSegments,
        Counter::LaneYields,
        Counter::MegaflowRevalidated,
        Counter::MegaflowInvalidated,
        Counter::DropPoliced,
        Counter::DropPacketInBudget,
    ];

    /// A stable snake_case name (for JSON and tables).
    pub const fn name(self) -> &'static str {
        match self {
            Counter::RxPackets => "rx_packets",
            Counter::RxBytes => "rx_bytes",
            Counter::TxPackets => "tx_packets",
            Counter::TxBytes => "tx_bytes",
            Counter::EmcHits => "emc_hits",
            Counter::MegaflowHits => "megaflow_hits",
            Counter::Upcalls => "upcalls",
            Counter::UpcallShed => "upcall_shed",
            Counter::MegaflowInstalls => "megaflow_installs",
            Counter::MegaflowEvictions => "megaflow_evictions",
            Counter::MegaflowFull => "megaflow_full",
            Counter::CacheFlushes => "cache_flushes",
            Counter::DropNoAction => "drop_no_action",
            Counter::DropRewrite => "drop_rewrite",
            Counter::DropTxFull => "drop_tx_full",
            Counter::DropMeter => "drop_meter",
            Counter::DropPacketInFull => "drop_packet_in_full",
            Counter::DropPoolEmpty => "drop_pool_empty",
            Counter::DropMalformed => "drop_malformed",
            Counter::DropPoliced => "drop_policed",
            Counter::DropPacketInBudget => "drop_packet_in_budget",
            Counter::PacketIns => "packet_ins",
            Counter::BusyCycles => "busy_cycles",
            Counter::IdleCycles => "idle_cycles",
            Counter::UpcallCycles => "upcall_cycles",
            Counter::IdleSleeps => "idle_sleeps",
            Counter::MegaflowProbes => "megaflow_probes",
            Counter::GsoSegmented => "gso_segmented",
            Counter::GsoTunnelled => "gso_tunnelled",
            Counter::GroSupers => "gro_supers",
            Counter::GroSegments => "gro_segments",
            Counter::LaneYields => "lane_yields",
            Counter::MegaflowRevalidated => "megaflow_revalidated",
            Counter::MegaflowInvalidated => "megaflow_invalidated",
        }
    }
}

/// Counters of one poll-mode thread. Written by that thread only; read by anyone.
#[derive(Debug)]
pub struct PmdStats {
    c: [AtomicU64; COUNTERS],
}

impl Default for PmdStats {
    fn default() -> PmdStats {
        PmdStats {
            c: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl PmdStats {
    /// All zero.
    pub fn new() -> PmdStats {
        PmdStats::default()
    }

    /// Adds `n` to a counter. Owning thread only: a relaxed load and store, not an atomic add.
    #[inline(always)]
    pub fn add(&self, c: Counter, n: u64) {
        let a = &self.c[c as usize];
        a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Reads one counter.
    pub fn get(&self, c: Counter) -> u64 {
        self.c[c as usize].load(Ordering::Relaxed)
    }

    /// A copy of every counter.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::default();
        for c in Counter::ALL {
            s[c] = self.c[c as usize].load(Ordering::Relaxed);
        }
        s
    }
}

/// Counts gathered during one batch in plain integers, added to [`PmdStats`] once per batch
/// with [`PmdStats::absorb`].
#[derive(Debug, Clone)]
pub struct LocalStats {
    c: [u64; COUNTERS],
}

impl Default for LocalStats {
    fn default() -> LocalStats {
        LocalStats { c: [0; COUNTERS] }
    }
}

impl LocalStats {
    /// Adds `n` to a counter.
    #[inline(always)]
    pub fn add(&mut self, c: Counter, n: u64) {
        self.c[c as usize] += n;
    }

    /// Takes back `n` added to a counter during this batch (saturating at 0).
    #[inline]
    pub fn sub(&mut self, c: Counter, n: u64) {
        self.c[c as usize] = self.c[c as usize].saturating_sub(n);
    }

    /// Reads a counter.
    #[inline(always)]
    pub fn get(&self, c: Counter) -> u64 {
        self.c[c as usize]
    }
}

impl PmdStats {
    /// Adds every non-zero local count and zeroes them (owning thread only).
    #[inline]
    pub fn absorb(&self, local: &mut LocalStats) {
        for (a, l) in self.c.iter().zip(local.c.iter_mut()) {
            if *l != 0 {
                a.store(
                    a.load(Ordering::Relaxed).wrapping_add(*l),
                    Ordering::Relaxed,
                );
                *l = 0;
            }
        }
    }
}

/// A copy of [`PmdStats`]: one field per [`Counter`] (also indexable by it). Snapshots add up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Packets received from rx queues.
    pub rx_packets: u64,
    /// Bytes received from rx queues.
    pub rx_bytes: u64,
    /// Packets handed to tx queues and accepted by them.
    pub tx_packets: u64,
    /// Bytes accepted by tx queues.
    pub tx_bytes: u64,
    /// Packets that hit the exact-match cache.
    pub emc_hits: u64,
    /// Packets that missed the exact-match cache and hit the megaflow classifier.
    pub megaflow_hits: u64,
    /// Translations through the pipeline (one per new flow in a batch, not per packet).
    pub upcalls: u64,
    /// Misses dropped without a translation because the upcall budget was spent.
    pub upcall_shed: u64,
    /// Megaflows installed.
    pub megaflow_installs: u64,
    /// Megaflows removed because they were idle or evicted to make room for a new one.
    pub megaflow_evictions: u64,
    /// Translations not installed because the megaflow table was at its bound.
    pub megaflow_full: u64,
    /// Cache flushes because the pipeline's generation changed.
    pub cache_flushes: u64,
    /// Packets dropped because their actions had no output.
    pub drop_no_action: u64,
    /// Packets dropped because a header rewrite failed.
    pub drop_rewrite: u64,
    /// Packets a tx queue did not take (or the port has no tx queue for this thread).
    pub drop_tx_full: u64,
    /// Packets dropped by a meter.
    pub drop_meter: u64,
    /// Packet-ins dropped because the packet-in queue was full.
    pub drop_packet_in_full: u64,
    /// Copies (multi-output, packet-in) not made because the buffer pool was empty.
    pub drop_pool_empty: u64,
    /// Frames dropped on receive because their headers were truncated or malformed.
    pub drop_malformed: u64,
    /// Frames dropped on receive because their port exceeded its ingress policing rate.
    pub drop_policed: u64,
    /// Packet-ins over their rx queue's allowance.
    pub drop_packet_in_budget: u64,
    /// Packet-ins queued for the agent.
    pub packet_ins: u64,
    /// Cycles spent on batches that carried packets.
    pub busy_cycles: u64,
    /// Cycles spent polling queues that had nothing.
    pub idle_cycles: u64,
    /// Cycles spent inside upcalls (translation and megaflow install).
    pub upcall_cycles: u64,
    /// Times the thread slept because its queues stayed empty.
    pub idle_sleeps: u64,
    /// Megaflow subtables probed (see [`Counter::MegaflowProbes`]).
    pub megaflow_probes: u64,
    /// Super-packets cut in software (see [`Counter::GsoSegmented`]).
    pub gso_segmented: u64,
    /// Super-packets encapsulated whole (see [`Counter::GsoTunnelled`]).
    pub gso_tunnelled: u64,
    /// See [`Counter::GroSupers`].
    pub gro_supers: u64,
    /// See [`Counter::GroSegments`].
    pub gro_segments: u64,
    /// Times the priority lane used up its share of the core and slept.
    pub lane_yields: u64,
    /// Megaflows checked after a flow change and kept ([`Counter::MegaflowRevalidated`]).
    pub megaflow_revalidated: u64,
    /// Megaflows removed after a flow change ([`Counter::MegaflowInvalidated`]).
    pub megaflow_invalidated: u64,
}

impl Snapshot {
    /// Drops of every reason added up.
    pub fn drops(&self) -> u64 {
        [
            Counter::UpcallShed,
            Counter::DropNoAction,
            Counter::DropRewrite,
            Counter::DropTxFull,
            Counter::DropMeter,
            Counter::DropPoolEmpty,
            Counter::DropMalformed,
            Counter::DropPoliced,
        ]
        .iter()
        .map(|&c| self[c])
        .sum()
    }

    /// `(name, value)` for every counter, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Counter::ALL.iter().map(move |&c| (c.name(), self[c]))
    }
}

impl std::ops::Index<Counter> for Snapshot {
    type Output = u64;
    fn index(&self, c: Counter) -> &u64 {
        match c {
            Counter::RxPackets => &self.rx_packets,
            Counter::RxBytes => &self.rx_bytes,
            Counter::TxPackets => &self.tx_packets,
            Counter::TxBytes => &self.tx_bytes,
            Counter::EmcHits => &self.emc_hits,
            Counter::MegaflowHits => &self.megaflow_hits,
            Counter::Upcalls => &self.upcalls,
            Counter::UpcallShed => &self.upcall_shed,
            Counter::MegaflowInstalls => &self.megaflow_installs,
            Counter::MegaflowEvictions => &self.megaflow_evictions,
            Counter::MegaflowFull => &self.megaflow_full,
            Counter::CacheFlushes => &self.cache_flushes,
            Counter::DropNoAction => &self.drop_no_action,
            Counter::DropRewrite => &self.drop_rewrite,
            Counter::DropTxFull => &self.drop_tx_full,
            Counter::DropMeter => &self.drop_meter,
            Counter::DropPacketInFull => &self.drop_packet_in_full,
            Counter::DropPoolEmpty => &self.drop_pool_empty,
            Counter::DropMalformed => &self.drop_malformed,
            Counter::DropPoliced => &self.drop_policed,
            Counter::DropPacketInBudget => &self.drop_packet_in_budget,
            Counter::PacketIns => &self.packet_ins,
            Counter::BusyCycles => &self.busy_cycles,
            Counter::IdleCycles => &self.idle_cycles,
            Counter::UpcallCycles => &self.upcall_cycles,
            Counter::IdleSleeps => &self.idle_sleeps,
            Counter::MegaflowProbes => &self.megaflow_probes,
            Counter::GsoSegmented => &self.gso_segmented,
            Counter::GsoTunnelled => &self.gso_tunnelled,
            Counter::GroSupers => &self.gro_supers,
            Counter::GroSegments => &self.gro_segments,
            Counter::LaneYields => &self.lane_yields,
            Counter::MegaflowRevalidated => &self.megaflow_revalidated,
            Counter::MegaflowInvalidated => &self.megaflow_invalidated,
        }
    }
}

impl std::ops::IndexMut<Counter> for Snapshot {
    fn index_mut(&mut self, c: Counter) -> &mut u64 {
        match c {
            Counter::RxPackets => &mut self.rx_packets,
            Counter::RxBytes => &mut self.rx_bytes,
            Counter::TxPackets => &mut self.tx_packets,
            Counter::TxBytes => &mut self.tx_bytes,
            Counter::EmcHits => &mut self.emc_hits,
            Counter::MegaflowHits => &mut self.megaflow_hits,
            Counter::Upcalls => &mut self.upcalls,
            Counter::UpcallShed => &mut self.upcall_shed,
            Counter::MegaflowInstalls => &mut self.megaflow_installs,
            Counter::MegaflowEvictions => &mut self.megaflow_evictions,
            Counter::MegaflowFull => &mut self.megaflow_full,
            Counter::CacheFlushes => &mut self.cache_flushes,
            Counter::DropNoAction => &mut self.drop_no_action,
            Counter::DropRewrite => &mut self.drop_rewrite,
            Counter::DropTxFull => &mut self.drop_tx_full,
            Counter::DropMeter => &mut self.drop_meter,
            Counter::DropPacketInFull => &mut self.drop_packet_in_full,
            Counter::DropPoolEmpty => &mut self.drop_pool_empty,
            Counter::DropMalformed => &mut self.drop_malformed,
            Counter::DropPoliced => &mut self.drop_policed,
            Counter::DropPacketInBudget => &mut self.drop_packet_in_budget,
            Counter::PacketIns => &mut self.packet_ins,
            Counter::BusyCycles => &mut self.busy_cycles,
            Counter::IdleCycles => &mut self.idle_cycles,
            Counter::UpcallCycles => &mut self.upcall_cycles,
            Counter::IdleSleeps => &mut self.idle_sleeps,
            Counter::MegaflowProbes => &mut self.megaflow_probes,
            Counter::GsoSegmented => &mut self.gso_segmented,
            Counter::GsoTunnelled => &mut self.gso_tunnelled,
            Counter::GroSupers => &mut self.gro_supers,
            Counter::GroSegments => &mut self.gro_segments,
            Counter::LaneYields => &mut self.lane_yields,
            Counter::MegaflowRevalidated => &mut self.megaflow_revalidated,
            Counter::MegaflowInvalidated => &mut self.megaflow_invalidated,
        }
    }
}

impl std::ops::AddAssign<&Snapshot> for Snapshot {
    fn add_assign(&mut self, o: &Snapshot) {
        for c in Counter::ALL {
            self[c] = self[c].wrapping_add(o[c]);
        }
    }
}

impl std::ops::Add for Snapshot {
    type Output = Snapshot;
    fn add(mut self, o: Snapshot) -> Snapshot {
        self += &o;
        self
    }
}

impl std::iter::Sum for Snapshot {
    fn sum<I: Iterator<Item = Snapshot>>(it: I) -> Snapshot {
        it.fold(Snapshot::default(), |a, b| a + b)
    }
}

impl std::fmt::Display for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}={v}")?;
        }
        Ok(())
    }
}

/// The CPU's cycle counter the busy and idle cycles are counted in.
pub use cpu::cycles;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_indexed_in_order_and_named_uniquely() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
        let mut names: Vec<_> = Counter::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COUNTERS);
    }

    #[test]
    fn snapshots_add_up() {
        let a = PmdStats::new();
        let b = PmdStats::new();
        a.add(Counter::RxPackets, 3);
        b.add(Counter::RxPackets, 4);
        b.add(Counter::DropMeter, 2);
        a.add(Counter::UpcallShed, 1);
        let total: Snapshot = [a.snapshot(), b.snapshot()].into_iter().sum();
        assert_eq!(total[Counter::RxPackets], 7);
        assert_eq!(total.drops(), 3);
        assert!(total.to_string().contains("rx_packets=7"));
        assert_eq!(total.rx_packets, 7);
        assert_eq!(total.drop_meter, 2);
    }
}

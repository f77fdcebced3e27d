//! What translation hands to the fast path: a flat list of datapath actions, the megaflow
//! mask, and the flow entries whose counters the packet bumps.
//!
//! Datapath actions are already resolved: groups are expanded (a select bucket is chosen by a
//! hash of key fields that the mask then covers), FLOOD/ALL/NORMAL are turned into plain
//! outputs, set-field carries the final value. Executing them needs no OpenFlow state except
//! meters (token buckets shared with the control side).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use packet::{Field, FlowKey};

use crate::changes::Trail;

/// Why a packet is sent to the controller (OpenFlow 1.3 `ofp_packet_in_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketInReason {
    /// No matching flow (table-miss flow entry).
    NoMatch,
    /// An output:CONTROLLER action.
    Action,
    /// dec-TTL or dec-MPLS-TTL found a TTL of 0 or 1.
    InvalidTtl,
}

/// One datapath action, applied in order to the packet's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DpAction {
    /// Send a copy of the packet as it is now to this OpenFlow port.
    Output(u32),
    /// Write `value` into `field` of the packet's headers, updating checksums.
    SetField {
        /// The field.
        field: Field,
        /// Its new value (as [`FlowKey::get`] returns it).
        value: u128,
    },
    /// Push a VLAN tag with this TPID (0x8100 or 0x88a8) and TCI (without the present bit).
    PushVlan {
        /// Ethertype of the new tag.
        tpid: u16,
        /// PCP/DEI/VID of the new tag.
        tci: u16,
    },
    /// Remove the outermost VLAN tag.
    PopVlan,
    /// Decrement IPv4 TTL / IPv6 hop limit (translation has already checked it is > 1).
    DecTtl,
    /// Push this MPLS label stack entry (computed by translation) and set the Ethernet type.
    PushMpls {
        /// The new Ethernet type (0x8847 or 0x8848).
        ethertype: u16,
        /// The new top entry as on the wire.
        lse: u32,
    },
    /// Pop the top MPLS entry and set the Ethernet type to this.
    PopMpls(u16),
    /// Decrement the top MPLS entry's TTL (translation has already checked it is > 1).
    DecMplsTtl,
    /// Copy the TTL of the header below the top MPLS entry out to it.
    CopyTtlOut,
    /// Copy the top MPLS entry's TTL in to the header below it.
    CopyTtlIn,
    /// Select the egress queue for following outputs.
    SetQueue(u32),
    /// Pass the packet through meter `id`; a packet over the rate is dropped (or remarked).
    Meter(u32),
    /// Send the packet to the controller(s).
    Controller {
        /// Why.
        reason: PacketInReason,
        /// Bytes of the packet to include (0xffff: all).
        max_len: u16,
        /// Table the decision was made in.
        table_id: u8,
        /// Cookie of the flow entry that decided.
        cookie: u64,
    },
}

/// Counters of one flow entry, bumped by the fast path in bulk (a megaflow keeps its own
/// per-thread counts and adds them here every so often, never per packet).
#[derive(Debug, Default)]
pub struct FlowCounters {
    /// Packets matched.
    pub packets: AtomicU64,
    /// Bytes matched.
    pub bytes: AtomicU64,
    /// Last time a packet matched, in milliseconds of [`now_ms`]'s clock.
    pub last_used_ms: AtomicU64,
}

impl FlowCounters {
    /// Adds a delta (called by the fast path when it flushes a megaflow's counts).
    pub fn add(&self, packets: u64, bytes: u64, now_ms: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        // Most flushes within a millisecond see the time already recorded: skip the locked
        // read-modify-write then (the loaded value only ever grows, so skipping is exact).
        if self.last_used_ms.load(Ordering::Relaxed) < now_ms {
            self.last_used_ms.fetch_max(now_ms, Ordering::Relaxed);
        }
    }
}

/// Milliseconds on a monotonic clock shared by the pipeline and the fast path.
pub fn now_ms() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// The result of translating one flow key. Reused between calls (clear, then fill) so the
/// upcall path does not allocate once the vectors have grown.
#[derive(Debug, Clone, Default)]
pub struct Translation {
    /// Actions to apply, in order. Empty means drop.
    pub actions: Vec<DpAction>,
    /// Every key bit the translation consulted. Packets equal to the translated key under
    /// this mask must get the same actions (extra 1-bits are safe; missing ones are bugs).
    pub mask: FlowKey,
    /// Counters of the flow entries the packet matched, in table order.
    pub flows: Vec<Arc<FlowCounters>>,
    /// False when the result must not be cached as a megaflow (for example it depended on
    /// state the mask cannot express). The packet is still handled with `actions`.
    pub cacheable: bool,
    /// The tables looked up and what decided in each: which later flow changes may affect
    /// the result (see [`crate::changes`]).
    pub trail: Trail,
}

impl Translation {
    /// Empties the translation for reuse.
    pub fn clear(&mut self) {
        self.actions.clear();
        self.mask = FlowKey::ZERO;
        self.flows.clear();
        self.cacheable = true;
        self.trail = Trail::EMPTY;
    }
}

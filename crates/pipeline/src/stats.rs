//! What the control side reports about flows and tables: dump-flows rows, removed-flow
//! notices and table statistics.

use std::sync::atomic::Ordering;

use crate::flow::{FlowEntry, RemovedReason};
use crate::model::{FlowFlags, Instruction, Match};

/// One flow entry as dump-flows shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowView {
    /// Table.
    pub table_id: u8,
    /// Priority.
    pub priority: u16,
    /// Match.
    pub matcher: Match,
    /// Cookie.
    pub cookie: u64,
    /// Instructions, in the order the controller gave them.
    pub instructions: Vec<Instruction>,
    /// Packets matched (as flushed by the datapath so far).
    pub packets: u64,
    /// Bytes matched.
    pub bytes: u64,
    /// Milliseconds since installation.
    pub duration_ms: u64,
    /// Idle timeout, seconds.
    pub idle_timeout: u16,
    /// Hard timeout, seconds.
    pub hard_timeout: u16,
    /// Flags.
    pub flags: FlowFlags,
    /// How the controller wrote the match, when not as the codec writes it back.
    pub matcher_as_sent: Option<crate::model::WireForm>,
    /// The instructions' bytes as the controller wrote them, when the codec would write them
    /// otherwise.
    pub instructions_as_sent: Option<crate::model::WireForm>,
}

impl FlowView {
    /// The view of `e` at `now_ms`.
    pub fn of(e: &FlowEntry, now_ms: u64) -> Self {
        FlowView {
            table_id: e.table_id,
            priority: e.priority,
            matcher: e.matcher,
            cookie: e.cookie,
            instructions: crate::as_sent::in_given_order(&e.instructions, e.given_order),
            packets: e.counters.packets.load(Ordering::Relaxed),
            bytes: e.counters.bytes.load(Ordering::Relaxed),
            duration_ms: now_ms.saturating_sub(e.install_ms),
            idle_timeout: e.idle_timeout,
            hard_timeout: e.hard_timeout,
            flags: e.flags,
            matcher_as_sent: e.matcher_as_sent.clone(),
            instructions_as_sent: e.instructions_as_sent.clone(),
        }
    }
}

/// A flow entry that left its table (for OpenFlow FLOW_REMOVED when `flags.send_flow_rem`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedFlow {
    /// Why.
    pub reason: RemovedReason,
    /// The entry's final state.
    pub flow: FlowView,
}

/// Statistics of one table (OpenFlow `ofp_table_stats`). `lookups` and `matched` count
/// translations (cache misses), not packets: see [`TableStats`](crate::table::TableStats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableStatsView {
    /// Table.
    pub table_id: u8,
    /// Entries installed.
    pub active: u64,
    /// Translations that looked the table up.
    pub lookups: u64,
    /// Of those, the ones that matched an entry.
    pub matched: u64,
}

//! Hayate's OpenFlow 1.3 pipeline model: tables, priorities, masked matches, instructions,
//! actions, groups, meters, timeouts and counters — OpenFlow semantics without the wire format.
//!
//! The control side ([`Control`]) applies flow-mods, group-mods and meter-mods and publishes
//! immutable [`Pipeline`] snapshots through a [`PipelineCell`]. The one job the fast path asks
//! of this crate is [`Pipeline::translate`]: run a flow key through the tables and return the
//! datapath actions plus the mask of every key bit the lookup consulted (the megaflow mask).
//!
//! | file | job |
//! |---|---|
//! | `model.rs` | the OpenFlow vocabulary (matches, actions, instructions, mods) |
//! | `classifier.rs` | one table's tuple-space-search lookup |
//! | `subtable.rs`, `paged.rs` | one mask's rules with staged lookup; copy-on-write buckets |
//! | `prefix.rs` | prefix tracking: how few address bits rule a subtable out |
//! | `flow.rs` | flow entries and flow-mod validation (prerequisites, instructions) |
//! | `table.rs` | a flow table and flow-mod selection filters |
//! | `as_sent.rs` | flows read back as installed: the instructions' given order, shared wire forms |
//! | `group.rs`, `meter.rs` | group table and meters |
//! | `normal.rs` | the MAC learning table behind NORMAL |
//! | `pipeline.rs` | the snapshot and the cell the datapath holds |
//! | `changes.rs` | what each publish changed, and which megaflows a change may affect |
//! | `control.rs` | the control side: mods, publish, timeouts, stats |
//! | `dump.rs` | flow dumps and aggregates walked on a snapshot, in pieces, without the lock |
//! | `translate.rs` | a flow key through the tables into datapath actions |

#![deny(missing_docs)]

pub mod as_sent;
pub mod changes;
pub mod classifier;
pub mod control;
pub mod dpaction;
pub mod dump;
pub mod error;
pub mod flow;
pub mod fuzzing;
pub mod group;
pub mod meter;
pub mod model;
pub mod normal;
pub mod ofctl;
mod paged;
pub mod pipeline;
mod prefix;
pub mod stats;
mod subtable;
pub mod table;
pub mod trace;
mod translate;

pub use changes::{Change, Cursor, Published, Since, Trail};
pub use control::Control;
pub use dpaction::{DpAction, FlowCounters, PacketInReason, Translation};
pub use dump::{Aggregate, FlowDump};
pub use error::{FlowModError, GroupModError, MeterModError};
pub use flow::{FlowEntry, RemovedReason};
pub use meter::{MeterState, MeterVerdict};
pub use model::{Action, FlowMod, FlowModCommand, Instruction, Match};
pub use pipeline::{Pipeline, PipelineCell, PipelineConfig, PortInfo};
pub use stats::{FlowView, RemovedFlow, TableStatsView};
pub use table::FlowFilter;

//! Hayate's OpenFlow 1.3 pipeline model: tables, priorities, masked matches, instructions,
//! actions, groups, meters, timeouts and counters — OpenFlow semantics without the wire format.
//!
//! The one job the fast path asks of this crate is [`translate`](dpaction::Translation): run a
//! flow key through the tables and return the datapath actions plus the mask of every key bit
//! the lookup consulted (the megaflow mask).

#![deny(missing_docs)]

pub mod classifier;
pub mod dpaction;
pub mod error;
pub mod model;

pub use dpaction::{DpAction, FlowCounters, PacketInReason, Translation};
pub use error::{FlowModError, GroupModError, MeterModError};
pub use model::{Action, FlowMod, FlowModCommand, Instruction, Match};

//! Packets for Hayate: buffer pools of fixed slots with headroom, batches of up to
//! [`BATCH_SIZE`] packets, zero-copy header views, flow-key extraction and incremental
//! checksum updates.
//!
//! This crate knows nothing about ports, threads or OpenFlow. Everything else in the switch
//! moves [`Packet`]s in [`Batch`]es and describes them by a [`FlowKey`].

#![deny(missing_docs)]

#[cfg(test)]
mod arb;
pub mod batch;
pub mod builder;
pub mod checksum;
pub mod extract;
pub mod fuzzing;
pub mod key;
pub mod pool;
pub mod rewrite;
pub mod wire;

pub use batch::{Batch, BATCH_SIZE};
pub use extract::{extract, extract_packet, Layers};
pub use key::{Field, FlowKey, KEY_WORDS};
pub use pool::{Meta, Packet, Pool, PoolCache, PoolConfig, FRAME_SIZE, HEADROOM};
pub use rewrite::RewriteError;

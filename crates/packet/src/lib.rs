//! Packets for Hayate: buffer pools of fixed slots with headroom, batches of up to
//! [`BATCH_SIZE`] packets, zero-copy header views, flow-key extraction and incremental
//! checksum updates.
//!
//! This crate knows nothing about ports, threads or OpenFlow. Everything else in the switch
//! moves [`Packet`]s in [`Batch`]es and describes them by a [`FlowKey`].

#![deny(missing_docs)]

pub mod batch;
pub mod key;
pub mod pool;

pub use batch::{Batch, BATCH_SIZE};
pub use key::{Field, FlowKey, KEY_WORDS};
pub use pool::{Meta, Packet, Pool, PoolCache, PoolConfig, FRAME_SIZE, HEADROOM};

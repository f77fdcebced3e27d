//! Packets for Hayate: buffer pools of fixed slots with headroom, batches of up to
//! [`BATCH_SIZE`] packets, zero-copy header views, flow-key extraction and incremental
//! checksum updates.
//!
//! This crate knows nothing about ports, threads or OpenFlow. Everything else in the switch
//! moves [`Packet`]s in [`Batch`]es and describes them by a [`FlowKey`].
//!
//! | module | job | per packet? |
//! |---|---|---|
//! | [`pool`], [`batch`] | frames, packets, batches | yes |
//! | [`gso`] | TCP super-packets kept whole (segmentation request beside the packet) | yes |
//! | [`key`] | the flow key layout | yes |
//! | [`mod@extract`] | bytes → flow key and header offsets | yes (the hot path) |
//! | [`rewrite`] | set-field, push/pop VLAN, TTL, with checksums kept right | yes |
//! | [`mpls`] | MPLS label stacks: push/pop, top-entry fields, TTL decrement and copies | yes |
//! | [`vary`] | template frames with fields rewritten per packet, checksums kept | yes (sources) |
//! | [`checksum`] | internet checksum, RFC 1624 updates, pseudo-headers, CRC32c | yes |
//! | [`wire`] | zero-copy header views with checked construction | no (tools, tests) |
//! | [`builder`] | [`builder::PacketSpec`] → frame bytes | no (tests, generator) |
//! | [`fuzzing`] | the body of the `extract` fuzz target | no |

#![deny(missing_docs)]

#[cfg(test)]
mod arb;
pub mod batch;
pub mod builder;
pub mod cbpf;
pub mod checksum;
pub mod extract;
pub mod fuzzing;
pub mod gso;
pub mod key;
pub mod mpls;
pub mod pool;
pub mod rewrite;
pub mod vary;
pub mod wire;

pub use batch::{Batch, BATCH_SIZE};
pub use extract::{extract, extract_packet, extract_packet_on, Layers};
pub use gso::Gso;
pub use key::{Field, FlowKey, KEY_WORDS};
pub use pool::{
    frame_size_for, Meta, Packet, Pool, PoolCache, PoolConfig, FRAME_SIZE, GSO_FRAME_SIZE,
    HEADROOM, MAX_FRAME_SIZE,
};
pub use rewrite::RewriteError;

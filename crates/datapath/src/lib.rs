//! Hayate's fast path: poll-mode threads, the exact-match cache, the megaflow classifier,
//! upcalls into the OpenFlow pipeline and action execution.
//!
//! # The packet's path
//!
//! Everything below happens in one poll-mode thread ([`Pmd`]), on batches of up to 32 packets,
//! with no allocation, lock or system call per packet:
//!
//! 1. **Receive** — `RxQueue::recv` fills the thread's scratch batch from one rx queue
//!    ([`pmd`]); every rx queue of the thread is polled once per round, each for one batch
//!    of at most 32, so a queue that always has packets cannot starve the others. A policed
//!    port's frames beyond its rate are dropped here, before anything else ([`police`]).
//! 2. **Extract** — each packet's [`packet::FlowKey`] and its hash are computed once
//!    (`packet::extract_packet`), prefetching the next packet's bytes.
//! 3. **Exact-match cache** — [`emc::Emc::lookup_batch`] finds the megaflow of packets whose
//!    whole key was seen recently; it returns a miss mask. It is skipped while the classifier
//!    has at most [`DpConfig::emc_min_subtables`] masks or its lookups probe at most 3 of them
//!    per hit (a classifier lookup is then about as cheap; `emc_gate.rs`).
//! 4. **Megaflow classifier** — [`dpcls::Dpcls::lookup_batch`] runs the EMC misses through one
//!    hash table per distinct mask (tuple-space search, busiest subtable first); hits are
//!    offered to the EMC.
//! 5. **Upcall** — classifier misses are translated by the thread's [`Upcall`] (the OpenFlow
//!    pipeline), within the upcall budget; the result is compiled ([`megaflow::Actions`]) and
//!    installed as a megaflow unless it is uncacheable or the table is at its bound.
//! 6. **Execute** — packets are run through their megaflow's actions ([`execute::Executor`]):
//!    rewrites via `packet::rewrite`, meters, packet-ins into a bounded queue, and outputs
//!    buffered in one batch per output port. When every packet that is not dropped leaves
//!    through the same port (one flow, or many flows to one uplink), the actions before that
//!    output run on the packets where they are and the rx batch is handed to the port as it
//!    is, without moving a packet.
//! 7. **Transmit** — each output batch is sent when full and at the end of the rx batch; what a
//!    port does not take is freed and counted.
//!
//! # Who owns what
//!
//! | thing | owner | shared with |
//! |---|---|---|
//! | rx queues, EMC, classifier, megaflow arena, scratch arrays | one [`Pmd`] | nobody |
//! | tx queue of a port | one [`Pmd`] (shared behind a mutex only when a port has fewer tx queues than threads) | — |
//! | [`PmdStats`] | written by its [`Pmd`] | read by [`Running::stats`] / [`Running::threads`] and tools |
//! | [`RxDrops`] of an rx queue | written by the [`Pmd`] that reads the queue | summed per port by [`Running::port_drops`] |
//! | flow entries' `FlowCounters` | the pipeline | megaflows add to them every ~100 ms |
//! | meters ([`Policer`]) | the pipeline | every thread polices through them |
//! | a port's ingress policer ([`PortPolicer`]) | [`Datapath`] ([`Policers`]) | every thread reading one of the port's rx queues |
//! | a port's egress queues ([`PortShaper`]) | [`Datapath`] ([`Shapers`]) | every thread's tx entry of the port |
//! | packets a shaped (`linux-htb`) port's queues hold | the [`Pmd`] that sent them (its tx entry of the port) | nobody; freed on port removal and shutdown |
//! | packet-in queue | [`Datapath`] | every thread sends, the agent drains with [`Datapath::packet_ins`] |
//!
//! When the pipeline's generation changes, each thread takes what the publishes changed at
//! its next batch, before any lookup, and keeps the megaflows no change can affect: each is
//! checked when next hit, and one that may be affected is removed, so its packet meets the new
//! tables ([`revalidate`]). Changes the pipeline does not track per entry (groups, meters,
//! ports, MAC learning) still empty every cache.
//!
//! Ports join and leave a running datapath through [`Running::add_port`] and
//! [`Running::remove_port`]; [`plug`] describes the hand-over to the threads.
#![deny(missing_docs)]

mod bits;
pub mod capture;
pub mod clock;
pub mod config;
pub mod datapath;
pub mod dpcls;
pub mod egress;
pub mod emc;
mod emc_gate;
pub mod execute;
pub mod idle;
pub mod inject;
pub mod look;
pub mod megaflow;
pub mod plug;
pub mod pmd;
pub mod police;
pub mod revalidate;
pub mod rx_drops;
pub mod stats;
mod target;
pub mod tunnel_counts;
pub mod tunnel_drops;
pub mod tunnel_flows;
pub mod tunnels;
pub mod upcall;

pub use config::DpConfig;
pub use datapath::{Builder, Datapath, DpError, Running, ThreadStats};
pub use egress::{EgressQueue, PortShaper, QueueCounts, Shapers};
pub use execute::PacketIn;
pub use idle::IdleConfig;
pub use inject::{InjectError, Injector, Wake};
pub use look::MegaflowRecord;
pub use pmd::{now_ns, Pmd, PmdParts};
pub use police::{Policers, PortPolicer};
pub use rx_drops::{RxDrops, RxQueueStats, IN_PORT_DROPS};
pub use stats::{Counter, PmdStats, Snapshot};
pub use tunnel_counts::TunnelPortCounts;
pub use tunnel_drops::SendDrop;
pub use tunnel_flows::{FlowDest, PerFlowPort};
pub use tunnels::Tunnels;
pub use upcall::{Police, Policer, Upcall, UpcallFactory};

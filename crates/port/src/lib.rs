//! Hayate ports: one batched, non-blocking [`Port`] trait and one module per backend.
//!
//! A port is opened once and then split into queues: each [`RxQueue`] and [`TxQueue`] is owned
//! by exactly one polling thread, so the data path needs no lock. The control side of a port
//! (name, queue counts, statistics, capabilities) stays on the [`Port`] object, which is shared.
//!
//! Ownership rules, the same for every backend:
//! - `recv` appends packets to the caller's batch and returns how many it appended;
//! - `send` sends from the front of the batch and returns how many it sent; those are removed
//!   from the batch, and the ones not sent stay in it (the caller frees them and counts drops).
//!
//! Backends: [`ring`] (in-memory pairs), [`null`] (benchmark source and sink), [`pcap`]
//! (capture files), [`afxdp`] (kernel interfaces through AF_XDP sockets, the pool as UMEM),
//! [`afpacket`] (kernel interfaces through AF_PACKET sockets: `recvmmsg` straight into pool
//! frames by default, a TPACKET_V3 ring with `rx=ring`), [`tap`] (TAP devices),
//! [`vhostuser`] (VMs over vhost-user, the rings polled by the switch); [`vnet`] handles the
//! virtio-net header (checksum and TCP segmentation offloads) for the last three.
//! [`open`] opens any of them from a text spec such as `null:flows=1000`.

#![deny(missing_docs)]

pub mod afpacket;
pub mod afxdp;
mod bpf_test_run;
mod claim;
pub mod close;
pub mod coalesce;
pub mod dp_options;
pub mod egress;
pub mod fuzzing;
pub mod mtu;
pub mod null;
pub mod partial_csum;
pub mod pcap;
pub mod policing;
pub mod ring;
pub mod spec;
pub mod tap;
pub mod template;
pub mod vhostuser;
pub mod vnet;
pub mod vnet_tnl;
pub mod xdplive;

pub use dp_options::DatapathOptions;
pub use egress::{Egress, QosType, QueueRates};
pub use policing::Policing;
pub use spec::open;

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use packet::Batch;

/// Errors opening or configuring a port.
#[derive(Debug)]
pub struct PortError {
    /// The port's name.
    pub port: String,
    /// What went wrong and how to fix it.
    pub what: String,
}

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "port {}: {}", self.port, self.what)
    }
}

impl std::error::Error for PortError {}

impl PortError {
    /// A new error for `port`.
    pub fn new(port: impl Into<String>, what: impl Into<String>) -> PortError {
        PortError {
            port: port.into(),
            what: what.into(),
        }
    }
}

/// Counters of one port, summed over its queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets the port could not deliver to the switch (ring full, no buffer).
    pub rx_dropped: u64,
    /// Malformed frames seen on receive.
    pub rx_errors: u64,
    /// Of `rx_packets`, those read from a priority receive socket (AF_PACKET `prio=on`).
    pub rx_priority: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets the port could not send (counted by the port when it drops them itself).
    pub tx_dropped: u64,
    /// Errors on send.
    pub tx_errors: u64,
}

impl PortStats {
    /// Port counters from one receive and one transmit queue's counters.
    pub fn from_queues(rx: &QueueCounters, tx: &QueueCounters) -> PortStats {
        let (rx_packets, rx_bytes, rx_dropped, rx_errors) = rx.read();
        let (tx_packets, tx_bytes, tx_dropped, tx_errors) = tx.read();
        PortStats {
            rx_packets,
            rx_bytes,
            rx_dropped,
            rx_errors,
            rx_priority: 0,
            tx_packets,
            tx_bytes,
            tx_dropped,
            tx_errors,
        }
    }
}

/// For backends with one queue per direction: refuses any queue but 0, naming the backend.
pub fn check_single_queue(
    port: &str,
    backend: &str,
    kind: &str,
    queue: u16,
) -> Result<(), PortError> {
    if queue == 0 {
        Ok(())
    } else {
        Err(PortError::new(
            port,
            format!("a {backend} port has one {kind} queue; ask for queue 0, not {queue}"),
        ))
    }
}

/// What a port can do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Number of receive queues.
    pub rx_queues: u16,
    /// Number of transmit queues.
    pub tx_queues: u16,
    /// Packets carry a virtio-net header with checksum/TSO offload information.
    pub vnet_hdr: bool,
    /// Largest frame the port accepts, in bytes.
    pub max_frame: u32,
}

/// The receive side of one queue of a port. Owned by one thread.
pub trait RxQueue: Send {
    /// Appends up to `batch.room()` received packets to `batch`; returns how many.
    /// Never blocks.
    fn recv(&mut self, batch: &mut Batch) -> usize;

    /// A file descriptor that becomes readable when packets wait, so an idle thread can
    /// sleep in `poll` instead of spinning. `None` when the backend has none.
    fn readiness_fd(&self) -> Option<RawFd> {
        None
    }
}

/// The transmit side of one queue of a port. Owned by one thread.
pub trait TxQueue: Send {
    /// Sends packets from the front of `batch`; returns how many were sent (and removed).
    /// Packets not sent stay in `batch`. Never blocks.
    fn send(&mut self, batch: &mut Batch) -> usize;

    /// Pushes out anything the queue buffered (for backends that coalesce). Default: nothing.
    fn flush(&mut self) {}

    /// The caller dropped `n` packets this queue did not take (its ring or the guest's was
    /// full): the queue counts them in its port's `tx_dropped`, as Open vSwitch counts them
    /// on the port. Default: not counted (ports without transmit counters).
    fn dropped(&mut self, n: u64) {
        let _ = n;
    }

    /// Whether TCP super-packets ([`packet::gso`]) sent now leave whole, on a port whose
    /// capabilities say it takes them ([`Capabilities::vnet_hdr`]): a vhost-user guest that
    /// negotiated no TSO takes segments, which the queue cuts. The data path joins segments
    /// into super-packets for a queue only while this holds (asked once per batch). Default:
    /// true.
    fn takes_supers(&self) -> bool {
        true
    }
}

/// A port: a source and sink of packets, split into queues.
pub trait Port: Send + Sync {
    /// The port's name (interface name, file name, ring name).
    fn name(&self) -> &str;

    /// What the port can do.
    fn capabilities(&self) -> Capabilities;

    /// Opens receive queue `queue` (each queue can be opened once).
    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError>;

    /// Opens transmit queue `queue` (each queue can be opened once).
    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError>;

    /// Receive queues of control frames kept apart from bulk traffic (AF_PACKET and AF_XDP
    /// `prio=on`). A datapath reads them on a thread of their own that preempts its poll
    /// threads; a port that has them keeps its last transmit queue
    /// ([`Capabilities::tx_queues`] counts it) for that thread. Default: none.
    fn priority_queues(&self) -> u16 {
        0
    }

    /// Opens priority receive queue `queue` (each can be opened once).
    fn open_priority_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        Err(PortError::new(
            self.name(),
            format!("has no priority receive queue {queue}"),
        ))
    }

    /// Whether the port's link is up: a vhost-user port's while its front end runs a ring;
    /// every other backend's always. Default: up.
    fn link_up(&self) -> bool {
        true
    }

    /// Why the link is down, when the port knows (a tunnel port whose remote cannot be
    /// reached says why; shown by `hayate ctl show` and in an OVSDB Interface's `error`).
    /// Default: nothing to say.
    fn link_status(&self) -> Option<String> {
        None
    }

    /// Whether the link may go down while the port runs although it is up now (a tunnel
    /// port's, with its next hop): the bridge then looks at it every link poll. Default: no
    /// (a port whose link is down when added is watched anyway).
    fn link_may_change(&self) -> bool {
        false
    }

    /// Counters summed over the queues.
    fn stats(&self) -> PortStats;

    /// Whether the port's kernel cuts TCP super-packets encapsulated whole in a UDP tunnel
    /// ([`packet::Gso::outer`]; a TAP with the tunnel virtio-net header, [`vnet_tnl`]): a
    /// tunnel whose underlay this port is then encapsulates super-packets whole instead of
    /// cutting them first.
    fn udp_tunnel_gso(&self) -> bool {
        false
    }

    /// Polices received frames as `p` says before the switch reads them, where the port can
    /// (an AF_XDP port's XDP program drops the excess before it is copied to the switch);
    /// returns whether it does (`Policing::default()`: stops). The datapath polices after
    /// receive either way; what passed here is within the rate, so it rarely drops more.
    /// Default: cannot.
    fn police_early(&self, p: &Policing) -> bool {
        let _ = p;
        false
    }

    /// Frames [`Port::police_early`]'s policer dropped since the port opened.
    fn early_policed(&self) -> u64 {
        0
    }
}

/// Counters one queue owns and a port sums on read. Written by the owning thread with
/// relaxed stores (no read-modify-write atomics on the data path); read by anyone.
#[derive(Debug, Default)]
pub struct QueueCounters {
    /// Packets.
    pub packets: AtomicU64,
    /// Bytes.
    pub bytes: AtomicU64,
    /// Drops.
    pub dropped: AtomicU64,
    /// Errors.
    pub errors: AtomicU64,
}

impl QueueCounters {
    /// Adds to the counters. Only the owning thread may call this (load + store, not an
    /// atomic add).
    #[inline(always)]
    pub fn add(&self, packets: u64, bytes: u64) {
        self.packets.store(
            self.packets.load(Ordering::Relaxed) + packets,
            Ordering::Relaxed,
        );
        self.bytes.store(
            self.bytes.load(Ordering::Relaxed) + bytes,
            Ordering::Relaxed,
        );
    }

    /// Adds drops (owning thread only).
    #[inline(always)]
    pub fn add_dropped(&self, n: u64) {
        self.dropped
            .store(self.dropped.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Adds errors (owning thread only).
    #[inline(always)]
    pub fn add_errors(&self, n: u64) {
        self.errors
            .store(self.errors.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Adds what one call of a queue moved: `packets` of `bytes` in all, and `errors`
    /// (owning thread only; nothing is stored for zeros).
    #[inline(always)]
    pub fn add_batch(&self, packets: usize, bytes: u64, errors: u64) {
        if packets > 0 {
            self.add(packets as u64, bytes);
        }
        if errors > 0 {
            self.add_errors(errors);
        }
    }

    /// Reads (packets, bytes, dropped, errors).
    pub fn read(&self) -> (u64, u64, u64, u64) {
        (
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        )
    }
}

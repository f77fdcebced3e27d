//! `afpacket`: a kernel network interface through AF_PACKET sockets.
//!
//! Spec: `afpacket:IFNAME[,queues=N][,vnet_hdr=on|off][,rx=mmsg|ring][,prio=on|off]`.
//!
//! - Receive: one socket per queue, joined in a `PACKET_FANOUT_HASH` group when there are
//!   several queues so each flow stays on one queue. The interface is made promiscuous
//!   (`PACKET_ADD_MEMBERSHIP`), and frames the host itself sends out of the interface are
//!   ignored (`PACKET_IGNORE_OUTGOING`). Two ways, chosen with `rx=`:
//!   - `mmsg` (the default, `mmsg.rs`): one `recvmmsg` per batch, the kernel copying each
//!     frame straight into a pool frame as soon as it is queued (lowest latency; TCP
//!     super-packets spill into a 64 KiB frame and arrive whole);
//!   - `ring` (`rx.rs`): a memory-mapped TPACKET_V3 ring (64 blocks of 128 KiB) read with no
//!     system call, each frame copied once out of it; a block is handed over when full or
//!     after 1 ms, so a frame on a quiet link waits up to 1 ms (the most small packets per
//!     cycle; slow for TCP, whose ACKs wait in the blocks).
//!
//!   A VLAN tag the kernel took out of the frame is put back.
//! - With `prio=on` (the default with `rx=mmsg`; `rx=ring` cannot have it), each queue has a
//!   second receive socket for control frames (ARP, ICMP, ICMPv6, TCP SYNs without payload), chosen by a
//!   classic-BPF fanout program (`steer.rs`) and offered as the port's priority receive
//!   queues ([`Port::priority_queues`]), which the datapath reads on its priority lane, a
//!   real-time thread that runs ahead of the poll threads: a ping or a TCP handshake does not
//!   wait behind a TCP stream's queue in the socket nor behind the switch's bulk work. The
//!   port then has one more transmit socket than queues, for the lane. `rx_priority` in the
//!   port's stats counts the frames read from priority sockets.
//! - Transmit: one socket per queue, `PACKET_QDISC_BYPASS`, one `sendmmsg` per batch (see
//!   `tx.rs` for why not the TPACKET transmit ring).
//! - With `vnet_hdr=on` (the default), frames carry a virtio-net header, so the host may keep
//!   checksum and TCP segmentation offloads on: partial checksums are completed, and TCP
//!   super-packets are kept whole ([`packet::gso`]) and sent whole to ports with virtio-net
//!   headers (the receiving kernel or guest cuts them), cut into MSS-sized frames for other
//!   ports ([`crate::vnet`]). With `vnet_hdr=off`, turn those offloads off on the host
//!   (`ethtool -K IF tso off gso off tx off`), or frames longer than a pool frame are dropped
//!   and checksums arrive unfinished.
//!
//! `rx_dropped` counts frames the kernel dropped because the ring or the socket's receive
//! buffer was full (the switch did not keep up). Frames longer than a pool frame holds
//! ([`Pool::max_data`]: 1920 bytes with the default 2 KiB frames) that are not TCP
//! super-packets are dropped and counted as `rx_errors`: keep the interface's MTU at 1500, or
//! give the pool larger frames for jumbo frames (`PoolConfig::frame_size`: 16 KiB frames hold
//! 16256 bytes).
//!
//! Needs CAP_NET_RAW (root). Every open error names the interface and the fix.

pub mod host_skip;
mod mmsg;
mod rx;
pub(crate) mod side;
mod socket;
mod steer;
mod tx;

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use packet::Pool;

use crate::claim::{claim_queue, QueueSlot};
use crate::close::ClosingFd;
use crate::{Capabilities, Port, PortError, PortStats, QueueCounters, RxQueue, TxQueue};

use mmsg::AfPacketMmsgRx;
use rx::{AfPacketRx, RxSocket};
use socket::{RingGeometry, RxOptions};
use tx::{AfPacketTx, TxSocket};

/// Most queues an AF_PACKET port may have.
pub const MAX_QUEUES: u16 = 64;

/// What an [`AfPacketPort`] opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// The interface's name.
    pub ifname: String,
    /// Receive and transmit queues (sockets), 1 to [`MAX_QUEUES`].
    pub queues: u16,
    /// Frames carry virtio-net headers (offloads on the host can stay on).
    pub vnet_hdr: bool,
    /// How frames are received.
    pub rx: RxMode,
    /// A priority receive socket per queue for control frames, read by the datapath's
    /// priority lane (needs [`RxMode::Mmsg`]; on by default).
    pub prio: bool,
}

/// How an AF_PACKET port receives (`rx=` in its spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxMode {
    /// `recvmmsg(2)` straight into pool frames: each frame handed over at once (the
    /// default: lowest latency, and TCP super-packets land whole in one copy).
    #[default]
    Mmsg,
    /// A memory-mapped TPACKET_V3 ring: no system call, but a frame waits until its block is
    /// full or 1 ms has passed.
    Ring,
}

impl AfPacketConfig {
    /// One queue with virtio-net headers and a priority socket on `ifname`.
    pub fn new(ifname: &str) -> AfPacketConfig {
        AfPacketConfig {
            ifname: ifname.to_string(),
            queues: 1,
            vnet_hdr: true,
            rx: RxMode::default(),
            prio: true,
        }
    }
}

/// A port on a kernel interface through AF_PACKET; see the [module docs](self).
pub struct AfPacketPort {
    name: String,
    pool: Pool,
    cfg: AfPacketConfig,
    rx: Vec<Arc<RxSocket>>,
    tx: Vec<Arc<TxSocket>>,
    rx_slots: Vec<QueueSlot>,
    tx_slots: Vec<QueueSlot>,
    prio_slots: Vec<QueueSlot>,
    /// The priority socket of each queue (`prio=on`).
    prio: Vec<Arc<RxSocket>>,
}

impl std::fmt::Debug for AfPacketPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketPort")
            .field("name", &self.name)
            .field("cfg", &self.cfg)
            .finish()
    }
}

impl AfPacketPort {
    /// Opens every queue's sockets on the interface. Errors name the fix, e.g.
    /// "port afpacket:x: no interface named x; check `ip link`" or "... needs CAP_NET_RAW;
    /// run as root or grant it".
    pub fn new(name: &str, cfg: AfPacketConfig, pool: &Pool) -> Result<AfPacketPort, PortError> {
        if cfg.queues == 0 || cfg.queues > MAX_QUEUES {
            return Err(PortError::new(
                name,
                format!("queues={}: give 1 to {MAX_QUEUES}", cfg.queues),
            ));
        }
        if cfg.prio && cfg.rx != RxMode::Mmsg {
            return Err(PortError::new(
                name,
                "prio=on needs rx=mmsg (the ring hands frames over by the block)",
            ));
        }
        let ifindex = socket::ifindex(name, &cfg.ifname)?;
        let fanout = (cfg.queues > 1 || cfg.prio).then(socket::fanout_group);
        let opts = RxOptions {
            ifindex,
            vnet_hdr: cfg.vnet_hdr,
            fanout,
            steer: cfg.prio,
            geometry: (cfg.rx == RxMode::Ring).then(RingGeometry::default),
        };
        let mut rx = Vec::new();
        let mut tx = Vec::new();
        // Bulk sockets join the group first: the steering program counts on their indices.
        for _ in 0..cfg.queues {
            rx.push(open_rx(name, &opts)?);
        }
        for _ in 0..cfg.queues + u16::from(cfg.prio) {
            tx.push(Arc::new(TxSocket {
                fd: ClosingFd::new(socket::open_tx_socket(name, ifindex, cfg.vnet_hdr)?),
                counters: QueueCounters::default(),
            }));
        }
        let mut prio = Vec::new();
        if cfg.prio {
            for _ in 0..cfg.queues {
                prio.push(open_rx(name, &opts)?);
            }
            socket::set_steering(name, rx[0].fd.as_raw_fd(), cfg.queues)?;
        }
        let n = usize::from(cfg.queues);
        let lane_tx = usize::from(cfg.prio);
        Ok(AfPacketPort {
            prio,
            name: name.to_string(),
            pool: pool.clone(),
            cfg,
            rx,
            tx,
            rx_slots: (0..n).map(|_| QueueSlot::default()).collect(),
            tx_slots: (0..n + lane_tx).map(|_| QueueSlot::default()).collect(),
            prio_slots: (0..n).map(|_| QueueSlot::default()).collect(),
        })
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            rx_queues: self.cfg.queues,
            tx_queues: self.cfg.queues + u16::from(self.cfg.prio),
            vnet_hdr: self.cfg.vnet_hdr,
            max_frame: self.pool.max_data() as u32,
        }
    }

    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        let claim = claim_queue(&self.rx_slots, &self.name, "rx", queue)?;
        let q = usize::from(queue);
        let (sock, cache, vnet_hdr) = (self.rx[q].clone(), self.pool.cache(), self.cfg.vnet_hdr);
        Ok(if sock.ring.is_some() {
            Box::new(AfPacketRx::new(sock, cache, vnet_hdr, claim))
        } else {
            Box::new(AfPacketMmsgRx::new(
                sock,
                cache,
                vnet_hdr,
                false,
                Some(claim),
            ))
        })
    }

    fn priority_queues(&self) -> u16 {
        self.prio.len() as u16
    }

    fn open_priority_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        let claim = claim_queue(&self.prio_slots, &self.name, "priority rx", queue)?;
        let q = usize::from(queue);
        Ok(Box::new(AfPacketMmsgRx::new(
            self.prio[q].clone(),
            self.pool.cache(),
            self.cfg.vnet_hdr,
            true,
            Some(claim),
        )))
    }

    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        // With prio=on there is one more transmit queue than queues: the priority lane's.
        let claim = claim_queue(&self.tx_slots, &self.name, "tx", queue)?;
        let q = usize::from(queue);
        Ok(Box::new(AfPacketTx::new(
            self.tx[q].clone(),
            self.pool.cache(),
            self.cfg.vnet_hdr,
            claim,
        )))
    }

    fn stats(&self) -> PortStats {
        let mut s = PortStats::default();
        for r in &self.prio {
            s.rx_priority += r.counters.read().0;
        }
        for r in self.rx.iter().chain(&self.prio) {
            let (p, b, d, e) = r.counters.read();
            let kernel = socket::ring_drops(r.fd.as_raw_fd());
            let ring = r.ring_drops.fetch_add(kernel, Ordering::Relaxed) + kernel;
            s.rx_packets += p;
            s.rx_bytes += b;
            s.rx_dropped += d + ring;
            s.rx_errors += e;
        }
        for t in &self.tx {
            let (p, b, d, e) = t.counters.read();
            s.tx_packets += p;
            s.tx_bytes += b;
            s.tx_dropped += d;
            s.tx_errors += e;
        }
        s
    }
}

/// Opens one receive socket.
fn open_rx(name: &str, opts: &RxOptions) -> Result<Arc<RxSocket>, PortError> {
    let (fd, ring) = socket::open_rx_socket(name, opts)?;
    Ok(Arc::new(RxSocket {
        fd: ClosingFd::new(fd),
        ring,
        next_block: AtomicUsize::new(0),
        counters: QueueCounters::default(),
        ring_drops: AtomicU64::new(0),
    }))
}

#[cfg(test)]
pub(crate) mod tests;

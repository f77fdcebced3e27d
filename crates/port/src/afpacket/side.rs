//! A priority path for ports that are not AF_PACKET ports: one AF_PACKET receive socket and
//! one transmit socket on the interface, for the control frames another port's fast path
//! hands to the kernel stack (AF_XDP `prio=on`: the XDP program passes ARP, ICMP, ICMPv6 and
//! TCP SYNs up the stack instead of to the AF_XDP sockets). The datapath's priority lane
//! reads and sends through it ([`crate::Port::priority_queues`]).
//!
//! Both sockets carry virtio-net headers, so a SYN whose checksum the host left to offload
//! arrives completed. The receive socket ignores outgoing frames: what the port's AF_XDP
//! sockets send out of the interface is not read back.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use packet::Pool;

use super::mmsg::AfPacketMmsgRx;
use super::rx::RxSocket;
use super::socket::{self, RxOptions};
use super::tx::{AfPacketTx, TxSocket};
use crate::claim::QueueSlot;
use crate::close::ClosingFd;
use crate::{PortError, QueueCounters, RxQueue, TxQueue};

/// The priority sockets of one interface.
pub(crate) struct SidePath {
    name: String,
    pool: Pool,
    rx: Arc<RxSocket>,
    tx: Arc<TxSocket>,
    rx_slot: QueueSlot,
    tx_slot: QueueSlot,
}

impl SidePath {
    /// Opens both sockets on `ifname`; errors name the port `name` and the fix.
    pub(crate) fn open(name: &str, ifname: &str, pool: &Pool) -> Result<SidePath, PortError> {
        let ifindex = socket::ifindex(name, ifname)?;
        let opts = RxOptions {
            ifindex,
            vnet_hdr: true,
            fanout: None,
            steer: false,
            geometry: None,
        };
        let (fd, ring) = socket::open_rx_socket(name, &opts)?;
        Ok(SidePath {
            name: name.to_string(),
            pool: pool.clone(),
            rx: Arc::new(RxSocket {
                fd: ClosingFd::new(fd),
                ring,
                next_block: AtomicUsize::new(0),
                counters: QueueCounters::default(),
                ring_drops: AtomicU64::new(0),
            }),
            tx: Arc::new(TxSocket {
                fd: ClosingFd::new(socket::open_tx_socket(name, ifindex, true)?),
                counters: QueueCounters::default(),
            }),
            rx_slot: QueueSlot::default(),
            tx_slot: QueueSlot::default(),
        })
    }

    /// Opens the receive side (once).
    pub(crate) fn open_rx(&self) -> Result<Box<dyn RxQueue>, PortError> {
        let claim = self.rx_slot.claim(&self.name, "priority rx queue 0")?;
        Ok(Box::new(AfPacketMmsgRx::new(
            self.rx.clone(),
            self.pool.cache(),
            true,
            true,
            Some(claim),
        )))
    }

    /// Opens the transmit side (once).
    pub(crate) fn open_tx(&self) -> Result<Box<dyn TxQueue>, PortError> {
        let claim = self
            .tx_slot
            .claim(&self.name, "the priority lane's tx queue")?;
        Ok(Box::new(AfPacketTx::new(
            self.tx.clone(),
            self.pool.cache(),
            true,
            claim,
        )))
    }

    /// Receive counters (packets, bytes, dropped incl. the kernel's, errors).
    pub(crate) fn rx_counters(&self) -> (u64, u64, u64, u64) {
        let (p, b, d, e) = self.rx.counters.read();
        // The kernel's count resets on each read: keep the sum.
        let kernel = socket::ring_drops(self.rx.fd.as_raw_fd());
        let dropped = self.rx.ring_drops.fetch_add(kernel, Ordering::Relaxed) + kernel;
        (p, b, d + dropped, e)
    }

    /// Transmit counters (packets, bytes, dropped, errors).
    pub(crate) fn tx_counters(&self) -> (u64, u64, u64, u64) {
        self.tx.counters.read()
    }
}

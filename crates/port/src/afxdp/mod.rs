//! `afxdp`: a port on a Linux interface through AF_XDP sockets, with the switch's packet pool
//! as the UMEM, so packets move between the NIC rings and the pipeline without a copy.
//!
//! Opening `afxdp:IFNAME[,queues=N][,mode=auto|native|skb][,zerocopy=auto|on|off][,prio=on|off]`:
//! 1. checks the interface exists and has at least N receive queues (`ethtool -l`);
//! 2. loads the XDP program built from `bpf/xsk_redirect.c` and attaches it with a bpf_link
//!    (`mode=auto` tries native mode and falls back to skb mode, logging which one it used;
//!    a stale program of ours attached the old way is replaced; module `program`);
//! 3. makes one AF_XDP socket per queue `0..N` (module `xsk`), each registering the whole
//!    pool as its UMEM, binds it (zero-copy when the driver has it, copy mode otherwise) and
//!    puts it in the program's XSKMAP slot for that queue;
//! 4. with `prio=on` (the default), opens an AF_PACKET receive and transmit socket on the
//!    interface (`afpacket/side.rs`) and has the program pass control frames (ARP,
//!    ICMP, ICMPv6, TCP SYNs) up the kernel stack, where that socket reads them: they are the
//!    port's priority receive queue, served by the datapath's priority lane, so a ping does not
//!    queue behind bulk traffic in the AF_XDP rings. The transmit socket is the port's last
//!    transmit queue, the lane's. The kernel stack sees those frames as it would on an
//!    AF_PACKET port (on an interface without addresses it drops them after the socket).
//!
//! Each queue's socket serves both [`AfXdpRx`] (rx + fill rings) and [`AfXdpTx`] (tx +
//! completion rings); the two can live on different threads. Dropping the port detaches the
//! program and, once the queues are dropped too, closes the sockets.
//!
//! When the port and its queues are dropped, the frames the kernel held go back to the pool in
//! copy mode; in zero-copy mode (and for tx frames not yet completed) they stay out of it, as
//! the kernel may still be letting go of them (module `xsk`).

mod frames;
mod netlink;
mod program;
mod rx;
pub(crate) mod sys;
mod tx;
mod xsk;

use std::sync::{Arc, Mutex};

use packet::{Pool, BATCH_SIZE, FRAME_SIZE};

use crate::afpacket::side::SidePath;
use crate::{Capabilities, Port, PortError, PortStats, RxQueue, TxQueue};
use program::{XdpProgram, MAX_QUEUES};
use xsk::{Xsk, RING_SIZE};

pub use program::PROGRAM_NAME;
pub use rx::AfXdpRx;
pub use tx::AfXdpTx;

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Native (driver) mode when the driver supports it, skb (generic) mode otherwise.
    #[default]
    Auto,
    /// Native mode only (fails when the driver has no XDP support).
    Native,
    /// Generic mode, run by the kernel's network stack: works on every interface, slower.
    Skb,
}

/// Whether the sockets use zero-copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Zero-copy when the driver supports it, copy mode otherwise.
    #[default]
    Auto,
    /// Zero-copy only (fails when the driver does not support it).
    On,
    /// Copy mode.
    Off,
}

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// Interface name, as `ip link` shows it.
    pub ifname: String,
    /// Queues to open (`0..queues`), at most the interface's receive queues.
    pub queues: u16,
    /// XDP attach mode.
    pub mode: XdpMode,
    /// Zero-copy choice.
    pub zero_copy: ZeroCopy,
    /// Control frames take the priority path (on by default).
    pub prio: bool,
}

impl AfXdpConfig {
    /// One queue, automatic mode and zero-copy choice.
    pub fn new(ifname: impl Into<String>) -> AfXdpConfig {
        AfXdpConfig {
            ifname: ifname.into(),
            queues: 1,
            mode: XdpMode::Auto,
            zero_copy: ZeroCopy::Auto,
            prio: true,
        }
    }
}

/// A port on a Linux interface through AF_XDP sockets.
pub struct AfXdpPort {
    /// The attached program; dropped (detached) first, before the sockets close.
    program: Mutex<XdpProgram>,
    name: String,
    /// One socket per queue.
    sockets: Vec<Arc<Xsk>>,
    fill_target: u32,
    /// The priority path (`prio=on`).
    side: Option<SidePath>,
    ifindex: u32,
}

impl std::fmt::Debug for AfXdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpPort")
            .field("name", &self.name)
            .field("queues", &self.sockets.len())
            .field("native", &self.native())
            .field("zero_copy", &self.zero_copy())
            .finish()
    }
}

impl AfXdpPort {
    /// Opens `cfg.ifname` with `cfg.queues` queues; packets are frames of `pool`.
    pub fn open(cfg: &AfXdpConfig, pool: &Pool) -> Result<AfXdpPort, PortError> {
        let name = cfg.ifname.clone();
        let err = |what: String| PortError::new(format!("afxdp:{name}"), what);
        let ifindex = sys::ifindex(&name).map_err(err)?;
        if cfg.queues == 0 || u32::from(cfg.queues) > MAX_QUEUES {
            return Err(err(format!(
                "queues={}: give 1 to {MAX_QUEUES}",
                cfg.queues
            )));
        }
        if let Some(have) = sys::rx_channels(&name) {
            if u32::from(cfg.queues) > have {
                return Err(err(format!(
                    "queues={} but {name} has {have} receive queue(s) (ethtool -l {name}); ask \
                     for at most {have}, or add queues with ethtool -L {name} combined {}",
                    cfg.queues, cfg.queues
                )));
            }
        }
        if pool.frame_size() != FRAME_SIZE {
            return Err(err(format!(
                "the packet pool has {}-byte frames; AF_XDP ports need {FRAME_SIZE}-byte frames \
                 (one UMEM chunk per packet: this kernel has no multi-buffer AF_XDP for jumbo \
                 frames). Use afpacket:{name} for frames over {} bytes",
                pool.frame_size(),
                FRAME_SIZE - 256
            )));
        }
        if cfg.zero_copy == ZeroCopy::On && cfg.mode == XdpMode::Skb {
            return Err(err(
                "zerocopy=on needs the XDP program in native mode; use mode=native or mode=auto"
                    .to_string(),
            ));
        }
        let fill_target = (pool.frames() / (4 * u32::from(cfg.queues))).min(RING_SIZE);
        if fill_target < 2 * BATCH_SIZE as u32 {
            return Err(err(format!(
                "the packet pool has {} frames; an AF_XDP port with {} queue(s) needs at least \
                 {} (give the switch a bigger pool)",
                pool.frames(),
                cfg.queues,
                8 * BATCH_SIZE as u32 * u32::from(cfg.queues)
            )));
        }
        let mut program = XdpProgram::attach(&name, ifindex, cfg.mode).map_err(err)?;
        let mut sockets = Vec::with_capacity(cfg.queues.into());
        for q in 0..u32::from(cfg.queues) {
            let xsk = Xsk::open(pool, &name, q, cfg.zero_copy, program.native()).map_err(err)?;
            program.set_socket(q, xsk.fd()).map_err(err)?;
            sockets.push(xsk);
        }
        let side = if cfg.prio {
            let side = SidePath::open(&format!("afxdp:{name}"), &name, pool)?;
            program.set_control_to_stack(true).map_err(err)?;
            Some(side)
        } else {
            None
        };
        let zc = sockets.iter().filter(|s| s.zero_copy).count();
        tracing::info!(
            "port afxdp:{name}: {} queue(s), {}",
            sockets.len(),
            if zc == sockets.len() {
                "zero-copy"
            } else if zc == 0 && cfg.zero_copy == ZeroCopy::Off {
                "copy mode (zerocopy=off)"
            } else if zc == 0 && !program.native() {
                "copy mode (XDP runs in skb mode)"
            } else if zc == 0 {
                "copy mode (the driver has no AF_XDP zero-copy)"
            } else {
                "some queues in zero-copy, some in copy mode"
            }
        );
        Ok(AfXdpPort {
            name,
            sockets,
            program: Mutex::new(program),
            fill_target,
            side,
            ifindex,
        })
    }

    /// Whether the XDP program runs in native (driver) mode.
    pub fn native(&self) -> bool {
        self.program.lock().map(|p| p.native()).unwrap_or(false)
    }

    /// What the port's XDP program does with `frame` arriving on receive queue `queue`,
    /// without sending it anywhere (`BPF_PROG_TEST_RUN`; for tests and diagnosis): the XDP
    /// action, `XDP_PASS` (2: the kernel stack, where the priority socket reads control
    /// frames) or `XDP_REDIRECT` (4: the queue's AF_XDP socket).
    pub fn xdp_verdict(&self, queue: u16, frame: &[u8]) -> Result<u32, PortError> {
        let mut p = self
            .program
            .lock()
            .map_err(|_| PortError::new(&self.name, "the XDP program's lock is poisoned"))?;
        p.verdict(self.ifindex, u32::from(queue), frame)
            .map_err(|e| PortError::new(&self.name, e))
    }

    /// Whether every queue's socket runs in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.sockets.iter().all(|s| s.zero_copy)
    }

    /// Opens receive queue `queue` as its concrete type (what [`Port::open_rx`] boxes).
    pub fn open_rx_queue(&self, queue: u16) -> Result<AfXdpRx, PortError> {
        let s = self.socket(queue, "rx")?;
        let rings = xsk::claim(&s.rx, &self.name, &format!("rx queue {queue}"))?;
        Ok(AfXdpRx::new(rings, s.clone(), self.fill_target))
    }

    /// Opens transmit queue `queue` as its concrete type (what [`Port::open_tx`] boxes).
    pub fn open_tx_queue(&self, queue: u16) -> Result<AfXdpTx, PortError> {
        let s = self.socket(queue, "tx")?;
        let rings = xsk::claim(&s.tx, &self.name, &format!("tx queue {queue}"))?;
        Ok(AfXdpTx::new(rings, s.clone()))
    }

    fn socket(&self, queue: u16, kind: &str) -> Result<&Arc<Xsk>, PortError> {
        self.sockets.get(usize::from(queue)).ok_or_else(|| {
            PortError::new(
                &self.name,
                format!(
                    "{kind} queue {queue} does not exist; this port has queues 0..{}",
                    self.sockets.len()
                ),
            )
        })
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        let n = self.sockets.len() as u16;
        Capabilities {
            rx_queues: n,
            tx_queues: n + u16::from(self.side.is_some()),
            vnet_hdr: false,
            // Received frames start after the kernel's 256-byte XDP headroom.
            max_frame: (FRAME_SIZE - 256) as u32,
        }
    }

    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        Ok(Box::new(self.open_rx_queue(queue)?))
    }

    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        match &self.side {
            // The last transmit queue is the priority lane's.
            Some(side) if usize::from(queue) == self.sockets.len() => side.open_tx(),
            _ => Ok(Box::new(self.open_tx_queue(queue)?)),
        }
    }

    fn priority_queues(&self) -> u16 {
        u16::from(self.side.is_some())
    }

    fn open_priority_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        match &self.side {
            Some(side) if queue == 0 => side.open_rx(),
            _ => Err(PortError::new(
                &self.name,
                format!("has no priority receive queue {queue} (prio=on gives it queue 0)"),
            )),
        }
    }

    fn police_early(&self, p: &crate::Policing) -> bool {
        let Some(police) = program::XdpPolice::of(p) else {
            return false;
        };
        let Ok(mut prog) = self.program.lock() else {
            return false;
        };
        match prog.set_police(&police) {
            Ok(()) => police.is_on(),
            Err(e) => {
                tracing::warn!(port = %self.name, "policing in the XDP program: {e}");
                false
            }
        }
    }

    fn early_policed(&self) -> u64 {
        self.program
            .lock()
            .ok()
            .and_then(|p| p.police_drops().ok())
            .unwrap_or(0)
    }

    fn stats(&self) -> PortStats {
        let mut total = PortStats::default();
        for s in &self.sockets {
            let q = PortStats::from_queues(&s.rx_counters, &s.tx_counters);
            let k = s.kernel_stats();
            total.rx_packets += q.rx_packets;
            total.rx_bytes += q.rx_bytes;
            total.rx_dropped += k.rx_dropped + k.rx_ring_full;
            total.rx_errors += q.rx_errors + k.rx_invalid_descs;
            total.tx_packets += q.tx_packets;
            total.tx_bytes += q.tx_bytes;
            total.tx_dropped += q.tx_dropped;
            total.tx_errors += q.tx_errors + k.tx_invalid_descs;
        }
        if let Some(side) = &self.side {
            let (p, b, d, e) = side.rx_counters();
            total.rx_priority += p;
            total.rx_packets += p;
            total.rx_bytes += b;
            total.rx_dropped += d;
            total.rx_errors += e;
            let (p, b, d, e) = side.tx_counters();
            total.tx_packets += p;
            total.tx_bytes += b;
            total.tx_dropped += d;
            total.tx_errors += e;
        }
        total
    }
}

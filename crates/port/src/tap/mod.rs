//! `tap`: a TAP device (`/dev/net/tun`), the usual way to give a VM or a container a port.
//!
//! Spec: `tap:NAME[,queues=N]`.
//!
//! Opening creates the device or attaches to an existing one of the same name
//! (`IFF_TAP | IFF_NO_PI | IFF_VNET_HDR`, plus `IFF_MULTI_QUEUE` with several queues: one
//! file descriptor per queue), sets it up, and announces checksum and TCP segmentation
//! offloads (`TUNSETOFFLOAD` with `TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN`), so the
//! kernel hands over partial checksums and TCP super-packets of up to 64 KiB, which receive
//! finishes and segments ([`crate::vnet`]). A device the port created goes away when the
//! port is dropped; one that existed (persistent) stays.
//!
//! Where the kernel takes UDP-tunnelled super-packets (Linux 6.17: it accepts
//! `TUN_F_UDP_TUNNEL_GSO`), the port uses the 24-byte header with the tunnel fields
//! ([`crate::vnet_tnl`]) and says so ([`Port::udp_tunnel_gso`]): a VXLAN or Geneve tunnel over
//! this port sends a VM's super-packets encapsulated whole and the kernel cuts them, each
//! segment with its own outer headers; and the kernel hands over the tunnelled super-packets
//! it routes to the TAP whole, which the tunnel's receive stage decapsulates whole (or the
//! data path cuts, for a port that cannot take them).
//!
//! The tun API moves one frame per `read(2)` or `writev(2)`, so this backend makes one
//! system call per packet (not per batch): it is for VMs and containers, not for line rate.
//! File descriptors are non-blocking; the rx queue's is its readiness fd.
//!
//! Needs CAP_NET_ADMIN (root) to create a device.

mod queue;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use packet::Pool;

use crate::claim::{claim_queue, QueueSlot};
use crate::{Capabilities, Port, PortError, PortStats, QueueCounters, RxQueue, TxQueue};

use queue::{TapRx, TapTx};

/// Most queues a TAP port may have (the kernel's limit is 256).
pub const MAX_QUEUES: u16 = 64;

/// Whether a [`TapPort`] takes TCP super-packets encapsulated whole in a UDP tunnel
/// ([`Port::udp_tunnel_gso`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelGso {
    /// Where the kernel can (Linux 6.17 or later), else not.
    Auto,
    /// Required: opening fails on a kernel that cannot.
    On,
    /// Never (super-packets into tunnels over this port are cut first).
    Off,
}

/// What a [`TapPort`] opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapConfig {
    /// The device's name (at most 15 bytes).
    pub name: String,
    /// Queues (file descriptors), 1 to [`MAX_QUEUES`].
    pub queues: u16,
    /// UDP-tunnelled super-packets (default [`TunnelGso::Auto`]).
    pub tunnel_gso: TunnelGso,
}

impl TapConfig {
    /// One queue on device `name`, tunnelled super-packets where the kernel takes them.
    pub fn new(name: &str) -> TapConfig {
        TapConfig {
            name: name.to_string(),
            queues: 1,
            tunnel_gso: TunnelGso::Auto,
        }
    }
}

/// One queue's descriptor and counters.
struct TapQueueState {
    fd: OwnedFd,
    /// Bytes of virtio-net header before each frame: [`crate::vnet::VNET_HDR_LEN`], or
    /// [`crate::vnet_tnl::VNET_HDR_TNL_LEN`] where the kernel takes tunnelled super-packets.
    hdr_len: usize,
    rx: QueueCounters,
    tx: QueueCounters,
}

/// A TAP device port; see the [module docs](self).
pub struct TapPort {
    name: String,
    pool: Pool,
    cfg: TapConfig,
    queues: Vec<Arc<TapQueueState>>,
    rx_slots: Vec<QueueSlot>,
    tx_slots: Vec<QueueSlot>,
}

impl std::fmt::Debug for TapPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapPort")
            .field("name", &self.name)
            .field("cfg", &self.cfg)
            .finish()
    }
}

/// `struct ifreq` with the flags member (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl IfReq {
    fn new(name: &str, flags: libc::c_short) -> IfReq {
        let mut r = IfReq {
            name: [0; libc::IFNAMSIZ],
            flags,
            _pad: [0; 22],
        };
        r.name[..name.len()].copy_from_slice(name.as_bytes());
        r
    }
}

fn ioctl_err(port: &str, what: &str, e: io::Error) -> PortError {
    let fix = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => ": needs CAP_NET_ADMIN; run as root or grant it",
        Some(libc::ENOENT) => ": no /dev/net/tun; load the tun module (modprobe tun)",
        Some(libc::EINVAL) | Some(libc::EBUSY) => {
            ": a device of this name exists with other flags (not a tap, or single-queue \
             while queues>1); delete it or match it"
        }
        _ => "",
    };
    PortError::new(port, format!("{what}: {e}{fix}"))
}

/// Opens one queue's descriptor on device `name`; also returns its virtio-net header length
/// (see [`TapQueueState::hdr_len`]), with the tunnel fields as `tunnel_gso` says.
fn open_queue(
    port: &str,
    name: &str,
    multi: bool,
    tunnel_gso: TunnelGso,
) -> Result<(OwnedFd, usize), PortError> {
    // SAFETY: a constant NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(ioctl_err(
            port,
            "cannot open /dev/net/tun",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR;
    if multi {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    let mut req = IfReq::new(name, flags as libc::c_short);
    let call = |req: libc::c_ulong, arg: *mut libc::c_void| {
        // SAFETY: each call passes the argument type its ioctl expects.
        if unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) } < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    call(libc::TUNSETIFF as _, (&mut req as *mut IfReq).cast())
        .map_err(|e| ioctl_err(port, &format!("cannot create or attach to tap {name}"), e))?;
    let offloads = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;
    // A kernel that knows UDP-tunnelled super-packets accepts the bit (older ones refuse
    // unknown bits); writes then read the tunnel fields of a 24-byte header.
    let tunnel = tunnel_gso != TunnelGso::Off
        && call(
            libc::TUNSETOFFLOAD as _,
            (offloads | crate::vnet_tnl::TUN_F_UDP_TUNNEL_GSO) as usize as *mut libc::c_void,
        )
        .is_ok();
    if tunnel_gso == TunnelGso::On && !tunnel {
        return Err(PortError::new(
            port,
            "tunnel_gso=on: this kernel's TAP takes no UDP-tunnelled super-packets \
             (Linux 6.17 or later does); use tunnel_gso=auto or off",
        ));
    }
    let hdr_len = if tunnel {
        crate::vnet_tnl::VNET_HDR_TNL_LEN
    } else {
        crate::vnet::VNET_HDR_LEN
    };
    let mut sz = hdr_len as libc::c_int;
    call(
        libc::TUNSETVNETHDRSZ as _,
        (&mut sz as *mut libc::c_int).cast(),
    )
    .map_err(|e| ioctl_err(port, "cannot set the virtio-net header size", e))?;
    // With the tunnel bits, reads bring UDP-tunnelled super-packets whole, with an outer UDP
    // checksum or without.
    let offloads = if tunnel {
        offloads
            | crate::vnet_tnl::TUN_F_UDP_TUNNEL_GSO
            | crate::vnet_tnl::TUN_F_UDP_TUNNEL_GSO_CSUM
    } else {
        offloads
    };
    call(
        libc::TUNSETOFFLOAD as _,
        offloads as usize as *mut libc::c_void,
    )
    .map_err(|e| ioctl_err(port, "cannot announce offloads (TUNSETOFFLOAD)", e))?;
    Ok((fd, hdr_len))
}

/// Sets interface `name` up.
fn set_up(port: &str, name: &str) -> Result<(), PortError> {
    // SAFETY: plain socket(2) for interface ioctls.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(ioctl_err(
            port,
            "cannot open a socket",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: s is a fresh descriptor we own.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let mut req = IfReq::new(name, 0);
    let fd: RawFd = s.as_raw_fd();
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS take a struct ifreq.
    unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req as *mut IfReq) < 0 {
            return Err(ioctl_err(
                port,
                "cannot read the tap's flags",
                io::Error::last_os_error(),
            ));
        }
        req.flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &mut req as *mut IfReq) < 0 {
            return Err(ioctl_err(
                port,
                "cannot set the tap up",
                io::Error::last_os_error(),
            ));
        }
    }
    Ok(())
}

impl TapPort {
    /// Creates or attaches to the device and opens every queue. Errors name the fix.
    pub fn new(name: &str, cfg: TapConfig, pool: &Pool) -> Result<TapPort, PortError> {
        if cfg.queues == 0 || cfg.queues > MAX_QUEUES {
            return Err(PortError::new(
                name,
                format!("queues={}: give 1 to {MAX_QUEUES}", cfg.queues),
            ));
        }
        if cfg.name.is_empty() || cfg.name.len() >= libc::IFNAMSIZ || cfg.name.contains('/') {
            return Err(PortError::new(
                name,
                format!("'{}' is not a device name: 1 to 15 bytes, no '/'", cfg.name),
            ));
        }
        let multi = cfg.queues > 1;
        let mut queues = Vec::new();
        for _ in 0..cfg.queues {
            let (fd, hdr_len) = open_queue(name, &cfg.name, multi, cfg.tunnel_gso)?;
            queues.push(Arc::new(TapQueueState {
                fd,
                hdr_len,
                rx: QueueCounters::default(),
                tx: QueueCounters::default(),
            }));
        }
        set_up(name, &cfg.name)?;
        let n = usize::from(cfg.queues);
        Ok(TapPort {
            name: name.to_string(),
            pool: pool.clone(),
            queues,
            rx_slots: (0..n).map(|_| QueueSlot::default()).collect(),
            tx_slots: (0..n).map(|_| QueueSlot::default()).collect(),
            cfg,
        })
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            rx_queues: self.cfg.queues,
            tx_queues: self.cfg.queues,
            vnet_hdr: true,
            max_frame: self.pool.max_data() as u32,
        }
    }

    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        let claim = claim_queue(&self.rx_slots, &self.name, "rx", queue)?;
        let q = usize::from(queue);
        Ok(Box::new(TapRx::new(
            self.queues[q].clone(),
            self.pool.cache(),
            claim,
        )))
    }

    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        let claim = claim_queue(&self.tx_slots, &self.name, "tx", queue)?;
        let q = usize::from(queue);
        Ok(Box::new(TapTx::new(
            self.queues[q].clone(),
            self.pool.cache(),
            claim,
        )))
    }

    fn udp_tunnel_gso(&self) -> bool {
        self.queues
            .iter()
            .all(|q| q.hdr_len == crate::vnet_tnl::VNET_HDR_TNL_LEN)
    }

    fn stats(&self) -> PortStats {
        let mut s = PortStats::default();
        for q in &self.queues {
            let (p, b, d, e) = q.rx.read();
            s.rx_packets += p;
            s.rx_bytes += b;
            s.rx_dropped += d;
            s.rx_errors += e;
            let (p, b, d, e) = q.tx.read();
            s.tx_packets += p;
            s.tx_bytes += b;
            s.tx_dropped += d;
            s.tx_errors += e;
        }
        s
    }
}

#[cfg(test)]
mod tests;

//! AF_PACKET sockets: creation, options, the TPACKET_V3 receive ring, and errors that name
//! the fix. Control path only (runs when a port is opened).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use crate::PortError;

// Constants of <linux/if_packet.h> and <linux/if_ether.h> (stable kernel ABI).
pub(super) const SOL_PACKET: libc::c_int = 263;
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
/// Socket option and control message type of `struct tpacket_auxdata`.
pub(super) const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TPACKET_V3: libc::c_int = 2;
const PACKET_MR_PROMISC: u16 = 1;
const PACKET_FANOUT_DATA: libc::c_int = 22;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_FANOUT_CBPF: u32 = 6;
const PACKET_FANOUT_FLAG_DEFRAG: u32 = 0x8000;
const ETH_P_ALL: u16 = 0x0003;

/// Block status: the block belongs to the kernel.
pub(super) const TP_STATUS_KERNEL: u32 = 0;
/// Block status: the block is ready for user space.
pub(super) const TP_STATUS_USER: u32 = 1;
/// Packet status: the frame was cut short (longer than a ring block).
pub(super) const TP_STATUS_COPY: u32 = 1 << 1;
/// Packet status: `tp_vlan_tci` holds a tag the kernel took out of the frame.
pub(super) const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// Packet status: `tp_vlan_tpid` is valid.
pub(super) const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then tpacket_hdr_v1).
pub(super) const BLOCK_STATUS: usize = 8;
pub(super) const BLOCK_NUM_PKTS: usize = 12;
pub(super) const BLOCK_FIRST_PKT: usize = 16;
// Offsets in `struct tpacket3_hdr`.
pub(super) const PKT_NEXT: usize = 0;
pub(super) const PKT_SNAPLEN: usize = 12;
pub(super) const PKT_LEN: usize = 16;
pub(super) const PKT_STATUS: usize = 20;
pub(super) const PKT_MAC: usize = 24;
pub(super) const PKT_VLAN_TCI: usize = 32;
pub(super) const PKT_VLAN_TPID: usize = 36;

/// `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// `struct packet_mreq`.
#[repr(C)]
struct PacketMreq {
    ifindex: libc::c_int,
    kind: u16,
    alen: u16,
    address: [u8; 8],
}

/// Geometry of a receive ring.
#[derive(Debug, Clone, Copy)]
pub(super) struct RingGeometry {
    /// Bytes per block (a power-of-two number of pages; holds a 64 KiB super-packet).
    pub block_size: usize,
    /// Blocks in the ring.
    pub blocks: usize,
    /// Milliseconds after which the kernel hands over a block that is not full.
    pub retire_ms: u32,
}

impl Default for RingGeometry {
    fn default() -> Self {
        RingGeometry {
            block_size: 1 << 17,
            blocks: 64,
            retire_ms: 1,
        }
    }
}

/// A memory-mapped TPACKET_V3 receive ring. Unmapped on drop.
#[derive(Debug)]
pub(super) struct Ring {
    pub base: NonNull<u8>,
    pub geometry: RingGeometry,
}

// SAFETY: the mapping is plain shared memory; which thread reads which block is decided by
// the block status words (see `rx.rs`) and by the queue claim (one owner at a time).
unsafe impl Send for Ring {}
unsafe impl Sync for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in `open_rx_socket`.
        unsafe {
            libc::munmap(
                self.base.as_ptr().cast(),
                self.geometry.block_size * self.geometry.blocks,
            );
        }
    }
}

/// The interface index of `ifname`, or an error naming the fix.
pub(super) fn ifindex(port: &str, ifname: &str) -> Result<libc::c_int, PortError> {
    let err = || {
        PortError::new(
            port,
            format!("no interface named {ifname}; check `ip link`"),
        )
    };
    if ifname.is_empty() || ifname.len() >= libc::IF_NAMESIZE {
        return Err(err());
    }
    let c = std::ffi::CString::new(ifname).map_err(|_| err())?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(err());
    }
    Ok(idx as libc::c_int)
}

fn os_error(port: &str, what: &str, e: io::Error) -> PortError {
    let fix = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => ": needs CAP_NET_RAW; run as root or grant it",
        Some(libc::ENOMEM) => ": not enough memory for the ring; use fewer queues",
        Some(libc::ENODEV) | Some(libc::ENXIO) => ": the interface went away",
        _ => "",
    };
    PortError::new(port, format!("{what}: {e}{fix}"))
}

fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> Result<(), io::Error> {
    // SAFETY: value points to a T of the given size for the duration of the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn new_socket(port: &str) -> Result<OwnedFd, PortError> {
    // Protocol 0: the socket receives nothing until it is bound with ETH_P_ALL, so no frame
    // lands in its queue before the ring exists.
    // SAFETY: plain socket(2).
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(os_error(
            port,
            "cannot open an AF_PACKET socket",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(port: &str, fd: RawFd, ifindex: libc::c_int, protocol: u16) -> Result<(), PortError> {
    // SAFETY: sockaddr_ll is plain data; zero is a valid start.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: sll is a valid sockaddr_ll of the given size.
    let r = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(os_error(
            port,
            "cannot bind to the interface",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Options of one receive socket.
pub(super) struct RxOptions {
    pub ifindex: libc::c_int,
    pub vnet_hdr: bool,
    /// Fanout group id when the port has several queues or a priority socket per queue.
    pub fanout: Option<u16>,
    /// The group steers with the port's classic-BPF program ([`super::steer`]) instead of
    /// a flow hash.
    pub steer: bool,
    /// The TPACKET_V3 ring's geometry; `None`: no ring (frames are read with `recvmmsg`,
    /// VLAN tags come as `PACKET_AUXDATA` control messages).
    pub geometry: Option<RingGeometry>,
}

/// Opens a receive socket with its TPACKET_V3 ring (or, without a geometry, with a large
/// receive buffer and VLAN tags as control messages), bound to the interface, promiscuous,
/// ignoring outgoing frames, in the fanout group if any.
pub(super) fn open_rx_socket(
    port: &str,
    o: &RxOptions,
) -> Result<(OwnedFd, Option<Ring>), PortError> {
    let sock = new_socket(port)?;
    let fd = sock.as_raw_fd();
    let opt = |name, what: &str, v: &libc::c_int| {
        setsockopt(fd, SOL_PACKET, name, v).map_err(|e| os_error(port, what, e))
    };
    if o.geometry.is_some() {
        opt(
            PACKET_VERSION,
            "cannot select TPACKET_V3 (needs Linux 3.2+)",
            &TPACKET_V3,
        )?;
    }
    if o.vnet_hdr {
        opt(
            PACKET_VNET_HDR,
            "cannot enable virtio-net headers (vnet_hdr=off turns them off)",
            &1,
        )?;
    }
    let ring = match o.geometry {
        Some(g) => Some(map_ring(port, fd, g)?),
        None => {
            opt(
                PACKET_AUXDATA,
                "cannot ask for VLAN tags as control messages (PACKET_AUXDATA)",
                &1,
            )?;
            let rcvbuf: libc::c_int = 8 << 20;
            // As for the send buffer: bigger is a nicety (SO_RCVBUFFORCE needs CAP_NET_ADMIN).
            if setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &rcvbuf).is_err() {
                let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &rcvbuf);
            }
            None
        }
    };
    join(port, fd, o)?;
    Ok((sock, ring))
}

/// Creates and maps the TPACKET_V3 ring of socket `fd`.
fn map_ring(port: &str, fd: RawFd, g: RingGeometry) -> Result<Ring, PortError> {
    let req = TpacketReq3 {
        block_size: g.block_size as u32,
        block_nr: g.blocks as u32,
        frame_size: 2048,
        frame_nr: (g.block_size / 2048 * g.blocks) as u32,
        retire_blk_tov: g.retire_ms,
        sizeof_priv: 0,
        feature_req_word: 0,
    };
    setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req)
        .map_err(|e| os_error(port, "cannot create the receive ring", e))?;
    let len = g.block_size * g.blocks;
    // SAFETY: mapping the ring the kernel just allocated for this socket.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
            fd,
            0,
        )
    };
    let base = if base == libc::MAP_FAILED {
        // MAP_LOCKED can fail under a small RLIMIT_MEMLOCK; the ring works without it.
        // SAFETY: as above.
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        }
    } else {
        base
    };
    if base == libc::MAP_FAILED {
        return Err(os_error(
            port,
            "cannot map the receive ring",
            io::Error::last_os_error(),
        ));
    }
    Ok(Ring {
        base: NonNull::new(base.cast()).expect("mmap returned a non-null mapping"),
        geometry: g,
    })
}

/// Binds receive socket `fd` to the interface, makes the interface promiscuous, ignores
/// outgoing frames and joins the fanout group if any.
fn join(port: &str, fd: RawFd, o: &RxOptions) -> Result<(), PortError> {
    let opt = |name, what: &str, v: &libc::c_int| {
        setsockopt(fd, SOL_PACKET, name, v).map_err(|e| os_error(port, what, e))
    };
    bind(port, fd, o.ifindex, ETH_P_ALL)?;
    let mreq = PacketMreq {
        ifindex: o.ifindex,
        kind: PACKET_MR_PROMISC,
        alen: 0,
        address: [0; 8],
    };
    setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq)
        .map_err(|e| os_error(port, "cannot make the interface promiscuous", e))?;
    opt(
        PACKET_IGNORE_OUTGOING,
        "cannot ignore outgoing frames (needs Linux 4.20+)",
        &1,
    )?;
    if let Some(group) = o.fanout {
        let mode = if o.steer {
            PACKET_FANOUT_CBPF
        } else {
            PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG
        };
        let arg = u32::from(group) | (mode << 16);
        setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &arg)
            .map_err(|e| os_error(port, "cannot join the fanout group (queues=N)", e))?;
    }
    Ok(())
}

/// Gives the fanout group of receive socket `fd` the steering program for `queues` queues.
pub(super) fn set_steering(port: &str, fd: RawFd, queues: u16) -> Result<(), PortError> {
    /// `struct sock_fprog`.
    #[repr(C)]
    struct Fprog {
        len: u16,
        filter: *const libc::sock_filter,
    }
    let prog = super::steer::program(queues);
    let fp = Fprog {
        len: u16::try_from(prog.len()).expect("the steering program is short"),
        filter: prog.as_ptr(),
    };
    setsockopt(fd, SOL_PACKET, PACKET_FANOUT_DATA, &fp).map_err(|e| {
        os_error(
            port,
            "cannot load the priority steering program (needs Linux 4.3+; prio=off avoids it)",
            e,
        )
    })
}

/// Opens a transmit socket: bound to the interface for sending only, bypassing the qdisc,
/// with virtio-net headers when asked, and a large send buffer.
pub(super) fn open_tx_socket(
    port: &str,
    ifindex: libc::c_int,
    vnet_hdr: bool,
) -> Result<OwnedFd, PortError> {
    let sock = new_socket(port)?;
    let fd = sock.as_raw_fd();
    if vnet_hdr {
        setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &1)
            .map_err(|e| os_error(port, "cannot enable virtio-net headers", e))?;
    }
    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &1)
        .map_err(|e| os_error(port, "cannot bypass the qdisc (needs Linux 3.14+)", e))?;
    let sndbuf: libc::c_int = 4 << 20;
    // A bigger buffer is a nicety: SO_SNDBUFFORCE needs CAP_NET_ADMIN, SO_SNDBUF is capped.
    if setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sndbuf).is_err() {
        let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf);
    }
    // Protocol 0: this socket never receives.
    bind(port, fd, ifindex, 0)?;
    Ok(sock)
}

/// Frames the kernel dropped since the last call because the ring was full
/// (`PACKET_STATISTICS`, which resets on read). Control path.
pub(super) fn ring_drops(fd: RawFd) -> u64 {
    // struct tpacket_stats_v3 { tp_packets, tp_drops, tp_freeze_q_cnt }
    let mut st = [0u32; 3];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: st is a buffer of len bytes the kernel fills.
    let r = unsafe {
        libc::getsockopt(
            fd,
            SOL_PACKET,
            PACKET_STATISTICS,
            st.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r == 0 {
        u64::from(st[1])
    } else {
        0
    }
}

/// A fanout group id unlikely to collide with another port's in the same namespace.
pub(super) fn fanout_group() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    (std::process::id() as u16)
        .wrapping_mul(31)
        .wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))
}

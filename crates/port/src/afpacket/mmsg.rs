//! Receive with one `recvmmsg(2)` per batch, straight into pool frames (`rx=mmsg`).
//!
//! Why beside the TPACKET_V3 ring (`rx.rs`): the ring hands a block over only when it is full
//! or when its timer (at least 1 ms) fires, so a frame on a quiet link waits up to 1 ms, and
//! a TCP stream, whose ACKs and window wait on each other, crawls. Here each frame is handed
//! over as soon as it is queued on the socket, and the kernel copies it straight into the
//! pool frame (one copy, on the switch's core; the ring costs a copy into the ring on the
//! sender's core and another out of it). The price is one system call per batch.
//!
//! Each message of the batch reads into up to three pieces: the virtio-net header (with
//! `vnet_hdr=on`), a pool frame, and the part of a 64 KiB frame of the pool's super-packet
//! sibling beyond what the pool frame holds, so that a TCP super-packet lands whole: it is
//! then moved into the big frame (the pool frame's bytes copied in front) and kept whole
//! ([`packet::gso`]). Frames are taken from the pool before the call and kept across calls
//! until a packet takes them. VLAN tags the kernel took out come as `PACKET_AUXDATA` control
//! messages and are put back.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use packet::{Batch, Packet, PoolCache, BATCH_SIZE};

use super::rx::RxSocket;
use super::socket::{PACKET_AUXDATA, SOL_PACKET, TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID};
use crate::claim::QueueClaim;
use crate::vnet::{self, Offload, VlanTag, VnetHdr, VNET_HDR_LEN};
use crate::RxQueue;

/// `struct tpacket_auxdata` (the control message of `PACKET_AUXDATA`).
#[repr(C)]
#[derive(Clone, Copy)]
struct AuxData {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    vlan_tci: u16,
    vlan_tpid: u16,
}

/// Room for one control message (`CMSG_SPACE(sizeof(struct tpacket_auxdata))` is 40 bytes).
const CTL_WORDS: usize = 8;

/// The message vectors of one batch (no allocation per call).
struct Vectors {
    msgs: [libc::mmsghdr; BATCH_SIZE],
    iovs: [[libc::iovec; 3]; BATCH_SIZE],
    hdrs: [[u8; VNET_HDR_LEN]; BATCH_SIZE],
    ctl: [[u64; CTL_WORDS]; BATCH_SIZE],
}

/// An open rx queue of an AF_PACKET port read with `recvmmsg`.
pub(super) struct AfPacketMmsgRx {
    sock: Arc<RxSocket>,
    cache: PoolCache,
    vnet_hdr: bool,
    /// Whether messages get a super-packet frame to spill into (with virtio-net headers,
    /// except on a priority socket, whose control frames are never super-packets).
    supers: bool,
    v: Box<Vectors>,
    /// The pool frame each message reads into.
    small: Vec<Option<Packet>>,
    /// The super-packet frame each message spills into (with virtio-net headers only).
    spill: Vec<Option<Packet>>,
    /// Messages `0..aimed` have their frames and their vectors point at them: a call that
    /// finds nothing costs no setup, and after a call only the messages it filled are aimed
    /// again (the kernel writes only to those).
    aimed: usize,
    _claim: Option<QueueClaim>,
}

// SAFETY: the raw pointers in `Vectors` are only meaningful during one `recv` call, which
// refills them; between calls they are never dereferenced.
unsafe impl Send for AfPacketMmsgRx {}

impl AfPacketMmsgRx {
    /// A queue reading `sock` into frames of `cache`; `priority`: the socket is a priority
    /// socket (`steer.rs`: ARP, ICMP, bare SYNs — never a TCP super-packet), whose messages
    /// get no super-packet frame (each would hold one of the sibling pool's 64 KiB frames
    /// for nothing).
    pub(super) fn new(
        sock: Arc<RxSocket>,
        cache: PoolCache,
        vnet_hdr: bool,
        priority: bool,
        claim: Option<QueueClaim>,
    ) -> AfPacketMmsgRx {
        // SAFETY: mmsghdr and iovec are plain data; all-zero is valid (null pointers, 0
        // lengths).
        let v = Box::new(unsafe { std::mem::zeroed::<Vectors>() });
        AfPacketMmsgRx {
            sock,
            cache,
            vnet_hdr,
            supers: vnet_hdr && !priority,
            v,
            small: (0..BATCH_SIZE).map(|_| None).collect(),
            spill: (0..BATCH_SIZE).map(|_| None).collect(),
            aimed: 0,
            _claim: claim,
        }
    }

    /// Makes sure messages `from..want` have their frames and are aimed at them; returns how
    /// many messages from 0 are ready.
    fn stock(&mut self, from: usize, want: usize) -> usize {
        for i in from..want {
            if self.small[i].is_none() {
                match self.cache.alloc() {
                    Some(p) => self.small[i] = Some(p),
                    None => return i,
                }
            }
            if self.supers && self.spill[i].is_none() {
                // Without one, a super-packet in this message is cut short and counted.
                self.spill[i] = self.cache.alloc_gso();
            }
            self.aim(i);
        }
        want
    }

    /// Points message `i`'s pieces at its header, frame and spill frame.
    fn aim(&mut self, i: usize) {
        let iov = &mut self.v.iovs[i];
        let mut k = 0;
        if self.vnet_hdr {
            iov[k] = libc::iovec {
                iov_base: self.v.hdrs[i].as_mut_ptr().cast(),
                iov_len: VNET_HDR_LEN,
            };
            k += 1;
        }
        let p = self.small[i].as_mut().expect("stocked");
        let room = p.len() + p.tailroom();
        p.set_len(room);
        iov[k] = libc::iovec {
            iov_base: p.data_mut().as_mut_ptr().cast(),
            iov_len: room,
        };
        k += 1;
        if let Some(s) = self.spill[i].as_mut() {
            let big = s.len() + s.tailroom();
            if big > room {
                s.set_len(big);
                iov[k] = libc::iovec {
                    iov_base: s.data_mut()[room..].as_mut_ptr().cast(),
                    iov_len: big - room,
                };
                k += 1;
            }
        }
        let m = &mut self.v.msgs[i];
        m.msg_hdr.msg_name = std::ptr::null_mut();
        m.msg_hdr.msg_namelen = 0;
        m.msg_hdr.msg_iov = iov.as_mut_ptr();
        m.msg_hdr.msg_iovlen = k;
        m.msg_hdr.msg_control = self.v.ctl[i].as_mut_ptr().cast();
        m.msg_hdr.msg_controllen = CTL_WORDS * 8;
        m.msg_hdr.msg_flags = 0;
        m.msg_len = 0;
    }

    /// The VLAN tag in message `i`'s control message, if the kernel took one out.
    fn vlan(&self, i: usize) -> Option<VlanTag> {
        let m = &self.v.msgs[i].msg_hdr;
        // SAFETY: the kernel filled msg_control/msg_controllen for this message; the CMSG
        // macros stay inside it.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(m);
            while !c.is_null() {
                if (*c).cmsg_level == SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                    let aux = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const AuxData);
                    if aux.status & TP_STATUS_VLAN_VALID == 0 {
                        return None;
                    }
                    let tpid = if aux.status & TP_STATUS_VLAN_TPID_VALID != 0 {
                        aux.vlan_tpid
                    } else {
                        0x8100
                    };
                    return Some(VlanTag {
                        tpid,
                        tci: aux.vlan_tci,
                    });
                }
                c = libc::CMSG_NXTHDR(m, c);
            }
        }
        None
    }

    /// Takes message `i`'s frame of `len` bytes out of its pieces: the pool frame, or for a
    /// longer one the spill frame with the pool frame's bytes copied in front.
    fn take(&mut self, i: usize, len: usize) -> Option<Packet> {
        let p = self.small[i].as_mut()?;
        let room = p.len();
        if len <= room {
            let mut p = self.small[i].take()?;
            p.set_len(len);
            return Some(p);
        }
        let mut s = self.spill[i].take()?;
        s.set_len(len);
        s.data_mut()[..room].copy_from_slice(p.data());
        Some(s)
    }
}

/// Puts `vlan` back after the MAC addresses of `pkt` (using 4 bytes of headroom).
fn put_vlan_back(pkt: &mut Packet, tag: VlanTag) -> bool {
    if pkt.len() < 12 || pkt.push_front(4).is_none() {
        return false;
    }
    let d = pkt.data_mut();
    d.copy_within(4..16, 0);
    d[12..14].copy_from_slice(&tag.tpid.to_be_bytes());
    d[14..16].copy_from_slice(&tag.tci.to_be_bytes());
    true
}

/// Finishes one received frame as the kernel gave it (VLAN tag beside it, virtio-net header
/// `hdr`): refuses one longer than a pool frame (`small_room`) unless it is a TCP
/// super-packet, puts the tag back, completes a partial checksum or keeps a super-packet
/// whole, and appends it to `batch`. Returns the packets and bytes appended and the errors
/// to count (a super-packet with IPv6 extension headers is cut here, and one cut short
/// because the batch filled or it could not be cut is an error), or the packet back when it
/// must be dropped as an error.
fn finish(
    mut pkt: Packet,
    vlan: Option<VlanTag>,
    hdr: Option<&VnetHdr>,
    small_room: usize,
    cache: &mut PoolCache,
    batch: &mut Batch,
) -> Result<(usize, usize, u64), Packet> {
    let offload = match hdr {
        None => Offload::None,
        Some(h) => match vnet::plan(pkt.data(), vlan, h) {
            Ok(o) => o,
            Err(_) => return Err(pkt),
        },
    };
    if let (Offload::Tcp(seg), Some(h)) = (&offload, hdr) {
        if !seg.keepable() {
            // IPv6 extension headers: cut here, as the ring path does.
            let d = vnet::deliver(pkt.data(), vlan, Some(h), 0, false, cache, batch);
            cache.free(pkt);
            return Ok(match d {
                vnet::Delivered::Done { packets, bytes } => (packets, bytes, 0),
                vnet::Delivered::More { packets, bytes, .. } => (packets, bytes, 1),
                vnet::Delivered::Dropped => (0, 0, 1),
            });
        }
    } else if pkt.len() > small_room {
        // Longer than a pool frame and not a super-packet: as the ring path, an error.
        return Err(pkt);
    }
    if let Some(tag) = vlan {
        if !put_vlan_back(&mut pkt, tag) {
            return Err(pkt);
        }
    }
    match offload {
        Offload::None => {}
        Offload::Csum { start, offset } => {
            if vnet::complete_csum(pkt.data_mut(), start, offset).is_err() {
                return Err(pkt);
            }
        }
        Offload::Tcp(seg) => {
            let h = hdr.expect("a super-packet has a header");
            pkt.set_gso(Some(seg.request(h)));
        }
    }
    let len = pkt.len();
    let _ = batch.push(pkt);
    Ok((1, len, 0))
}

impl RxQueue for AfPacketMmsgRx {
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let mut want = batch.room().min(BATCH_SIZE);
        if self.aimed < want {
            self.aimed = self.stock(self.aimed, want);
            want = self.aimed;
        }
        if want == 0 {
            return 0;
        }
        // SAFETY: msgs[..want] point at iovecs that point at frames owned by this queue
        // (and at its header and control buffers), all live for the call.
        let r = unsafe {
            libc::recvmmsg(
                self.sock.fd.as_raw_fd(),
                self.v.msgs.as_mut_ptr(),
                want as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r <= 0 {
            return 0;
        }
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        let (mut packets, mut bytes, mut errors) = (0usize, 0usize, 0u64);
        for i in 0..r as usize {
            let got = self.v.msgs[i].msg_len as usize;
            let truncated = self.v.msgs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            if truncated || got < hdr_len + 14 {
                // Longer than every piece (no spill frame was free) or a runt: the frames
                // stay for the next call.
                errors += 1;
                continue;
            }
            let vlan = self.vlan(i);
            let hdr = self.vnet_hdr.then(|| VnetHdr::from_bytes(&self.v.hdrs[i]));
            let small_room = self.small[i].as_ref().map_or(0, |p| p.len());
            let Some(pkt) = self.take(i, got - hdr_len) else {
                errors += 1;
                continue;
            };
            match finish(pkt, vlan, hdr.as_ref(), small_room, &mut self.cache, batch) {
                Ok((p, b, e)) => {
                    packets += p;
                    bytes += b;
                    errors += e;
                }
                Err(pkt) => {
                    self.cache.free(pkt);
                    errors += 1;
                }
            }
        }
        // The messages the kernel filled are aimed again at their (new) frames; when the pool
        // runs dry, the ready prefix ends at the first message left without a frame.
        let filled = r as usize;
        let restocked = self.stock(0, filled);
        if restocked < filled {
            self.aimed = restocked;
        }
        self.sock.counters.add_batch(packets, bytes as u64, errors);
        packets
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.sock.fd.as_raw_fd())
    }
}

impl Drop for AfPacketMmsgRx {
    fn drop(&mut self) {
        for p in self.small.iter_mut().chain(self.spill.iter_mut()) {
            if let Some(p) = p.take() {
                self.cache.free(p);
            }
        }
    }
}

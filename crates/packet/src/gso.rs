//! TCP super-packets kept whole: a packet that stands for many TCP segments.
//!
//! A host with TCP segmentation offload hands its port a super-packet of up to 64 KiB (the
//! headers of the first segment, then the payload of many) and asks for it to be cut into
//! segments of `mss` payload bytes. A switch that keeps it whole forwards one packet instead
//! of forty, and a port that can ask its own kernel for the same offload (AF_PACKET or TAP
//! with virtio-net headers) sends it whole again; any other output cuts it first.
//!
//! The request ([`Gso`]) rides with the packet without growing [`Packet`] past 32 bytes: a
//! flag bit in the packet's frame word says it is there, and its 4 bytes sit at the start of
//! the frame, inside the headroom ([`GSO_RESERVED`] bytes that pushes of headers never
//! reach). Such packets live in the 64 KiB frames of a pool's sibling
//! ([`crate::Pool::gso_pool`]).
//!
//! The packet's TCP checksum field means nothing while it is a super-packet: whoever cuts it
//! (the kernel from the request, or software) computes every segment's checksums, so header
//! rewrites need not keep it right.

use crate::pool::Packet;

/// Flag bit in a packet's frame word: the frame's first bytes hold a [`Gso`].
pub(crate) const GSO_FLAG: u32 = 1 << 28;
/// Bytes at the start of a super-packet's frame that hold its request (never headroom).
pub const GSO_RESERVED: usize = 8;

/// A super-packet's segmentation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gso {
    /// TCP over IPv6 (else over IPv4).
    pub v6: bool,
    /// The sender uses ECN: the kernel's `SKB_GSO_TCP_ECN` (CWR only on the first segment).
    pub ecn: bool,
    /// TCP payload bytes per segment (the MSS), at least 1.
    pub mss: u16,
    /// 0 for a plain super-packet. Otherwise it was encapsulated whole in a UDP tunnel
    /// (VXLAN, Geneve) and this is the length of its outer headers (Ethernet, IP, UDP and
    /// the tunnel header): its TCP headers start after them, and only a port whose kernel
    /// cuts UDP-tunnelled super-packets may send it (a TAP with the tunnel virtio-net
    /// header, `port::vnet_tnl`); others cannot cut it.
    pub outer: u8,
}

impl Gso {
    fn encode(&self) -> [u8; 4] {
        let flags = u8::from(self.v6) | (u8::from(self.ecn) << 1);
        let [a, b] = self.mss.to_ne_bytes();
        [flags, self.outer, a, b]
    }

    fn decode(b: [u8; 4]) -> Gso {
        Gso {
            v6: b[0] & 1 != 0,
            ecn: b[0] & 2 != 0,
            mss: u16::from_ne_bytes([b[2], b[3]]),
            outer: b[1],
        }
    }
}

impl Packet {
    /// The packet's segmentation request, when it is a super-packet.
    #[inline(always)]
    pub fn gso(&self) -> Option<Gso> {
        if self.frame & GSO_FLAG == 0 {
            return None;
        }
        let mut b = [0u8; 4];
        // SAFETY: the flag is only set by `set_gso`, which wrote these 4 bytes at the start of
        // this packet's frame, which the packet owns.
        unsafe { std::ptr::copy_nonoverlapping(self.base.as_ptr(), b.as_mut_ptr(), 4) };
        Some(Gso::decode(b))
    }

    /// Whether the packet is a super-packet (see [`Packet::gso`]).
    #[inline(always)]
    pub fn is_gso(&self) -> bool {
        self.frame & GSO_FLAG != 0
    }

    /// Marks the packet as a super-packet with request `gso`, or (with `None`) as a plain
    /// packet. Returns `false` (and changes nothing) when the data starts inside the first
    /// [`GSO_RESERVED`] bytes of the frame, where the request goes.
    pub fn set_gso(&mut self, gso: Option<Gso>) -> bool {
        match gso {
            None => {
                self.frame &= !GSO_FLAG;
                true
            }
            Some(g) => {
                if (self.data_off as usize) < GSO_RESERVED {
                    return false;
                }
                let b = g.encode();
                // SAFETY: the frame is this packet's and its first GSO_RESERVED bytes are
                // before the data (checked above).
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.base.as_ptr(), 4) };
                self.frame |= GSO_FLAG;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pool, HEADROOM};

    #[test]
    fn request_rides_in_the_headroom_and_survives_pushes() {
        let pool = Pool::with_frames(8);
        let mut cache = pool.cache();
        let mut p = cache.alloc_gso().expect("a super-packet frame");
        assert_eq!(p.frame_size(), crate::pool::GSO_FRAME_SIZE);
        assert!(p.set_len(60_000));
        p.data_mut().fill(0xab);
        assert_eq!(p.gso(), None);
        let g = Gso {
            v6: true,
            ecn: true,
            mss: 1448,
            outer: 70,
        };
        assert!(p.set_gso(Some(g)));
        assert!(p.is_gso());
        assert_eq!(p.gso(), Some(g));
        assert_eq!(p.headroom(), HEADROOM - GSO_RESERVED);
        // Pushing into the headroom stops before the request.
        assert!(p.push_front(HEADROOM - GSO_RESERVED + 1).is_none());
        p.push_front(HEADROOM - GSO_RESERVED).unwrap().fill(0xcd);
        assert_eq!(p.gso(), Some(g));
        assert!(p.set_gso(None));
        assert_eq!(p.gso(), None);
        p.reset();
        assert!(p.set_gso(Some(g)));
        p.reset();
        assert!(!p.is_gso(), "reset makes a plain packet");
        cache.free(p);
    }

    #[test]
    fn request_needs_room_before_the_data() {
        let pool = Pool::with_frames(8);
        let mut cache = pool.cache();
        let mut p = cache.alloc().unwrap();
        p.push_front(HEADROOM - 4).unwrap();
        let g = Gso {
            v6: false,
            ecn: false,
            mss: 536,
            outer: 0,
        };
        assert!(!p.set_gso(Some(g)));
        assert!(!p.is_gso());
        cache.free(p);
    }

    #[test]
    fn super_packets_go_home_when_freed_into_the_small_cache() {
        let pool = Pool::with_frames(8);
        let gso = pool.gso_pool().expect("sibling");
        assert!(gso.gso_pool().is_none(), "a sibling has no sibling");
        let before = gso.shared_free();
        let mut a = pool.cache();
        let mut b = pool.cache();
        let big: Vec<u8> = (0..30_000u32).map(|i| i as u8).collect();
        let p = a.alloc_copy(&big).expect("a copy in a super-packet frame");
        assert_eq!(p.data(), &big[..]);
        assert!(!a.owns(&p));
        let small = a.alloc_copy(&big[..100]).unwrap();
        assert!(a.owns(&small));
        // Freed through another cache of the small pool: back in the sibling's stacks.
        b.free(p);
        b.free(small);
        drop(a);
        drop(b);
        assert_eq!(gso.shared_free(), before);
        assert_eq!(pool.shared_free(), 8);
        assert_eq!(pool.cache().foreign_frees(), 0);
    }

    #[test]
    fn a_packet_of_a_foreign_pool_is_leaked_not_stacked() {
        let pool = Pool::with_frames(8);
        let jumbo = Pool::new(&crate::PoolConfig {
            frames: 4,
            frame_size: 4096,
            ..Default::default()
        })
        .unwrap();
        let mut jc = jumbo.cache();
        let p = jc.alloc().unwrap();
        let mut c = pool.cache();
        if cfg!(debug_assertions) {
            // Debug builds stop at the bug.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.free(p)));
            assert!(r.is_err());
        } else {
            c.free(p);
            assert_eq!(c.foreign_frees(), 1);
        }
        drop(c);
        assert_eq!(pool.shared_free(), 8, "no foreign frame in the stack");
    }
}

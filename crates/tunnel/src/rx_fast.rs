//! The common case of [`crate::rx::Terminator::receive`], specialised: VXLAN over untagged
//! IPv4 with a 20-byte header, not a fragment, with a zero UDP checksum (what Linux and Open
//! vSwitch send over IPv4 unless told otherwise).
//!
//! The general path (`decap.rs` through the `packet::wire` views, then `rx.rs`'s port
//! choice) is the reference. This one checks the bits of that one layout that have a fixed
//! value as four masked 64-bit words (with one local address and one VXLAN UDP port, the
//! usual host, those among them; else compared apart), with values prepared when the
//! terminator was built (addresses as the bytes on the wire), sums the IPv4 header checksum in
//! native byte order (a ones' complement sum does not depend on it: RFC 1071 §2(B)), and
//! picks the tunnel port among those that can take IPv4 VXLAN, as the general path does.
//!
//! It answers only when it is sure the frame is such a packet and is to be terminated; for
//! anything else — a VLAN tag, IP options, a fragment, a UDP checksum to verify, Geneve,
//! IPv6, no port for it, any check failing — it returns `None`, and the general path decides
//! and names the drop. `rx_tests.rs` checks on mutated frames that whenever this answers, the
//! general path gives the same answer.
//!
//! Size and owner: part of each [`crate::rx::Terminator`] (a few words per local address and
//! per VXLAN port, 32 bytes per tunnel port); no allocation, no branch on data beyond the
//! checks. Finding the port costs a hash probe for the ports with the frame's remote (a
//! host with a port per remote VTEP has hundreds) and a scan of those with `remote=flow`.

use std::net::IpAddr;

use crate::endpoint::TunnelKind;
use crate::rx::{TunMeta, TunnelPort};

/// Outer Ethernet + IPv4 (20 bytes) + UDP + VXLAN: where the inner frame starts.
pub const INNER_OFF: usize = 14 + 20 + 8 + 8;

/// The shortest frame taken: the outer headers and an inner Ethernet header.
const MIN_FRAME: usize = INNER_OFF + 14;

/// A tunnel port that can take IPv4 VXLAN, its fixed values as wire bytes (native loads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FastPort {
    ofport: u32,
    dst_port: u16,
    vni: Option<u32>,
    remote: Option<u32>,
    local: Option<u32>,
    /// How specific it is (the general path's score: a fixed VNI, a fixed remote).
    score: u8,
    /// Its place in the terminator's ports, the general path's order (of equals, the later
    /// wins).
    order: u32,
}

impl FastPort {
    /// Whether it takes a frame to `dst_port` and local address `dst` with VNI `vni` (its
    /// remote already agrees), and is more specific than `best` (the later of equals).
    #[inline(always)]
    fn beats(&self, best: Option<&FastPort>, dst_port: u16, vni: u32, dst: u32) -> bool {
        self.dst_port == dst_port
            && self.vni.is_none_or(|v| v == vni)
            && self.local.is_none_or(|l| l == dst)
            && best.is_none_or(|b| (self.score, self.order) > (b.score, b.order))
    }
}

/// Most local IPv4 endpoints and VXLAN UDP ports the fast path checks (a terminator with
/// more leaves the rest to the general path).
const MAX_FAST: usize = 4;

/// The outer headers' bytes 12..44 (Ethertype to the VXLAN flags), as four native 64-bit
/// loads: the bits with a fixed value and that value. Fixed: the Ethertype, version and
/// header length, no fragment, UDP, a zero UDP checksum, VXLAN's I flag; and when the
/// terminator has one local IPv4 address and one VXLAN UDP port (the usual host), those
/// too. One compare of four masked words checks them all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Fixed {
    mask: [u64; 4],
    want: [u64; 4],
}

/// Where [`Fixed`] starts in the frame.
const FIXED_AT: usize = 12;

impl Fixed {
    /// The fixed bits; the local address and UDP port among them when given.
    fn new(local: Option<u32>, dst_port: Option<u16>) -> Fixed {
        let (mut mask, mut want) = ([0u8; 32], [0u8; 32]);
        let mut fix = |at: usize, m: &[u8], w: &[u8]| {
            mask[at - FIXED_AT..][..m.len()].copy_from_slice(m);
            want[at - FIXED_AT..][..w.len()].copy_from_slice(w);
        };
        fix(12, &[0xff, 0xff], &[0x08, 0x00]); // IPv4
        fix(14, &[0xff], &[0x45]); // version 4, 20-byte header
        fix(20, &[0x3f, 0xff], &[0, 0]); // no fragment offset, no more fragments
        fix(23, &[0xff], &[17]); // UDP
        fix(40, &[0xff, 0xff], &[0, 0]); // no UDP checksum
        fix(42, &[0x08], &[0x08]); // VXLAN's I flag: a VNI
        if let Some(a) = local {
            fix(30, &[0xff; 4], &a.to_ne_bytes());
        }
        if let Some(p) = dst_port {
            fix(36, &[0xff, 0xff], &p.to_be_bytes());
        }
        let words = |b: &[u8; 32]| {
            std::array::from_fn(|i| {
                u64::from_ne_bytes(b[i * 8..][..8].try_into().unwrap_or_default())
            })
        };
        Fixed {
            mask: words(&mask),
            want: words(&want),
        }
    }

    /// Whether `d` (at least `FIXED_AT + 32` bytes) has the fixed bits.
    #[inline(always)]
    fn matches(&self, d: &[u8]) -> bool {
        let mut diff = 0;
        for i in 0..4 {
            diff |= (n64(d, FIXED_AT + i * 8) ^ self.want[i]) & self.mask[i];
        }
        diff == 0
    }
}

/// The prepared values of one terminator's fast path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastV4 {
    /// Whether it takes anything (some local IPv4 endpoint, some VXLAN UDP port).
    on: bool,
    /// The bits every frame it takes has.
    fixed: Fixed,
    /// Whether `fixed` holds the local address and the UDP port (one of each), so that
    /// `addrs` and `vxlan_ports` need no check of their own.
    single: bool,
    /// Local IPv4 endpoints, as the 4 bytes on the wire read natively; the first repeated
    /// into the unused slots, so that the check is four compares and no loop.
    addrs: [u32; MAX_FAST],
    /// UDP ports that carry VXLAN (host order), padded the same way.
    vxlan_ports: [u16; MAX_FAST],
    /// The ports that can take IPv4 VXLAN with a fixed remote, grouped by it (in the
    /// general path's order within a group).
    by_remote: Vec<FastPort>,
    /// Where each remote's group is: a host with a port per remote host (hundreds) finds a
    /// frame's candidates with one hash probe.
    remotes: RemoteIndex,
    /// Those that take any remote (`remote=flow`).
    any_remote: Vec<FastPort>,
}

/// An open-addressing hash table from a remote address (as read natively) to its group of
/// ports in [`FastV4::by_remote`]: a power-of-two number of slots, at least twice the
/// remotes, probed linearly from the remote's hash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RemoteIndex {
    /// `(remote, start, end)`: the group `by_remote[start..end]`; `end == 0`: empty.
    slots: Vec<(u32, u32, u32)>,
    /// `slots.len() - 1`.
    mask: usize,
    /// 32 less the bits of a slot number: a hash is the top bits of a multiply (Fibonacci
    /// hashing), which every bit of the address moves.
    shift: u32,
    /// With exactly one remote: it and the end of its group (the table is not probed).
    one: Option<(u32, u32)>,
}

impl RemoteIndex {
    /// The index of `ports`, grouped by remote (each with one).
    fn new(ports: &[FastPort]) -> RemoteIndex {
        let groups = ports.chunk_by(|a, b| a.remote == b.remote);
        let n = groups.clone().count();
        if n == 0 {
            return RemoteIndex::default();
        }
        let size = (2 * n).next_power_of_two();
        let mut index = RemoteIndex {
            slots: vec![(0, 0, 0); size],
            mask: size - 1,
            shift: 32 - size.trailing_zeros(),
            one: None,
        };
        let mut start = 0u32;
        for g in groups {
            let end = start + g.len() as u32;
            let remote = g[0].remote.unwrap_or(0);
            let mut i = index.hash(remote);
            while index.slots[i].2 != 0 {
                i = (i + 1) & index.mask;
            }
            index.slots[i] = (remote, start, end);
            start = end;
        }
        if n == 1 {
            index.one = Some((ports[0].remote.unwrap_or(0), start));
        }
        index
    }

    /// The slot `remote`'s probe starts at.
    #[inline(always)]
    fn hash(&self, remote: u32) -> usize {
        (remote.wrapping_mul(0x9e37_79b1) >> self.shift) as usize
    }

    /// The group of ports of `remote`: `start..end` in `by_remote` (empty: none). One
    /// remote (a host with one peer, the benchmark's) is one compare.
    #[inline(always)]
    fn find(&self, remote: u32) -> std::ops::Range<usize> {
        if let Some((r, end)) = self.one {
            return if r == remote { 0..end as usize } else { 0..0 };
        }
        if self.slots.is_empty() {
            return 0..0;
        }
        let mut i = self.hash(remote);
        loop {
            let (r, start, end) = self.slots[i];
            if end == 0 {
                return 0..0;
            }
            if r == remote {
                return start as usize..end as usize;
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// `v`'s first [`MAX_FAST`] values, the first repeated into the slots left (`None`: empty).
fn padded<T: Copy>(v: &[T]) -> Option<[T; MAX_FAST]> {
    let first = *v.first()?;
    let mut out = [first; MAX_FAST];
    for (o, x) in out.iter_mut().zip(v) {
        *o = *x;
    }
    Some(out)
}

/// The 4 bytes of `a` as a native load of them would read.
fn wire32(a: std::net::Ipv4Addr) -> u32 {
    u32::from_ne_bytes(a.octets())
}

impl FastV4 {
    /// The fast path for a terminator of `ports` that terminates on `addrs` and whose UDP
    /// ports carry the kinds `udp_ports` (the general path's `Locals`).
    pub fn new(ports: &[TunnelPort], addrs: &[IpAddr], udp_ports: &[(u16, TunnelKind)]) -> Self {
        let v4 = |a: Option<IpAddr>| match a {
            None => Some(None),
            Some(IpAddr::V4(a)) => Some(Some(wire32(a))),
            Some(IpAddr::V6(_)) => None,
        };
        let (mut by_remote, any_remote): (Vec<FastPort>, Vec<FastPort>) = ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.kind == TunnelKind::Vxlan)
            .filter_map(|(order, p)| {
                Some(FastPort {
                    ofport: p.ofport,
                    dst_port: p.dst_port,
                    vni: p.vni,
                    remote: v4(p.remote)?,
                    local: v4(p.local)?,
                    score: p.vni.is_some() as u8 + p.remote.is_some() as u8,
                    order: order as u32,
                })
            })
            .partition(|p| p.remote.is_some());
        by_remote.sort_by_key(|p| (p.remote, p.order));
        let remotes = RemoteIndex::new(&by_remote);
        let addrs: Vec<u32> = addrs
            .iter()
            .filter_map(|a| match a {
                IpAddr::V4(a) => Some(wire32(*a)),
                IpAddr::V6(_) => None,
            })
            .collect();
        let vxlan_ports: Vec<u16> = udp_ports
            .iter()
            .filter(|(_, k)| *k == TunnelKind::Vxlan)
            .map(|(p, _)| *p)
            .collect();
        let single = addrs.len() == 1 && vxlan_ports.len() == 1;
        let fixed = match single {
            true => Fixed::new(addrs.first().copied(), vxlan_ports.first().copied()),
            false => Fixed::new(None, None),
        };
        match (padded(&addrs), padded(&vxlan_ports)) {
            (Some(addrs), Some(vxlan_ports)) => FastV4 {
                on: true,
                fixed,
                single,
                addrs,
                vxlan_ports,
                by_remote,
                remotes,
                any_remote,
            },
            _ => FastV4::default(),
        }
    }

    /// The frame's tunnel metadata and where its inner frame ends, when `d` is an IPv4
    /// VXLAN packet of the common layout that this terminator takes; `None`: ask the general
    /// path. The inner frame starts at [`INNER_OFF`].
    #[inline(always)]
    pub fn terminate(&self, d: &[u8]) -> Option<(TunMeta, usize)> {
        // Ethertype IPv4, version 4 with a 20-byte header, not a fragment, UDP with no
        // checksum, VXLAN's I flag (and with one local address and UDP port, those).
        if !self.on || d.len() < MIN_FRAME || !self.fixed.matches(d) {
            return None;
        }
        let dst = n32(d, 30);
        let dst_port = b16(d, 36);
        if !self.single {
            let a = &self.addrs;
            let v = &self.vxlan_ports;
            if (dst != a[0] && dst != a[1] && dst != a[2] && dst != a[3])
                || (dst_port != v[0] && dst_port != v[1] && dst_port != v[2] && dst_port != v[3])
            {
                return None;
            }
        }
        // The IP total length covers the UDP datagram, which covers the VXLAN header and an
        // inner Ethernet header; the frame holds all of it.
        let total = usize::from(b16(d, 16));
        let udp_len = usize::from(b16(d, 38));
        if 14 + total > d.len() || udp_len + 20 > total || udp_len < 8 + 8 + 14 {
            return None;
        }
        // The header checksum: the ten words sum to 0xffff (read natively: see the top).
        let (a, b) = (n64(d, 14), n64(d, 22));
        // Folding keeps a sum's value modulo 0xffff and folds only zero to zero, so "folds to
        // 0xffff" is "a non-zero multiple of 0xffff" (one multiply instead of five folds).
        let s = (a & 0xffff_ffff) + (a >> 32) + (b & 0xffff_ffff) + (b >> 32) + u64::from(dst);
        if s == 0 || s % 0xffff != 0 {
            return None;
        }
        let src = n32(d, 26);
        let vni = u32::from_be_bytes([0, d[46], d[47], d[48]]);
        // The most specific port that accepts it; the last of equals, as `max_by_key`:
        // among those of its remote, then those of any remote.
        let mut best: Option<&FastPort> = None;
        let of_remote = self
            .by_remote
            .get(self.remotes.find(src))
            .unwrap_or_default();
        for p in of_remote {
            if p.beats(best, dst_port, vni, dst) {
                best = Some(p);
            }
        }
        for p in &self.any_remote {
            if p.beats(best, dst_port, vni, dst) {
                best = Some(p);
            }
        }
        let port = best?;
        let meta = TunMeta {
            ofport: port.ofport,
            index: port.order,
            vni,
            src: u32::from_be(src) as u128,
            dst: u32::from_be(dst) as u128,
            ipv6: false,
        };
        Some((meta, 34 + udp_len))
    }
}

/// The big-endian 16 bits of `d` at `i`.
#[inline(always)]
fn b16(d: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([d[i], d[i + 1]])
}

/// The 4 bytes of `d` at `i` read natively.
#[inline(always)]
fn n32(d: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]])
}

/// The 8 bytes of `d` at `i` read natively.
#[inline(always)]
fn n64(d: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes([
        d[i],
        d[i + 1],
        d[i + 2],
        d[i + 3],
        d[i + 4],
        d[i + 5],
        d[i + 6],
        d[i + 7],
    ])
}

//! Frames made from a template many million times a second: the template copied in whole
//! 64-byte chunks, a few fields rewritten per packet, and the IPv4 header and L4 checksums
//! kept right incrementally (RFC 1624), never summed over the payload. The `null` port's
//! source and the traffic generator both make their packets this way.
//!
//! - [`Template`]: the frame's bytes in [`CHUNK`]-byte pieces, copied with inline vector
//!   moves (the buffer's tailroom takes the overhang).
//! - [`Layout`]: where a template's checksums are and which bytes each covers, read once from
//!   the template (Ethernet with any VLAN tags; IPv4 or IPv6; UDP, TCP, ICMP or ICMPv6).
//! - [`Slot`]: one field of 2 or 4 bytes, checked against the layout once; per packet it
//!   writes a value and adds the RFC 1624 difference `~old + new` of its words to the
//!   [`Sums`] of the checksums that cover it.
//! - [`Upkeep`]: at the end of a packet, each checksum a slot touched updated once:
//!   `HC' = ~(~HC + Σ(~m + m'))`.
//! - [`Picker`]: the values `0..count` in order or pseudo-random, no division.
//!
//! Which checksums a field is under:
//! - inside the IPv4 header: the IPv4 header checksum, and over the IPv4 or IPv6 addresses
//!   also the UDP/TCP/ICMPv6 checksum (pseudo-header);
//! - inside the L4 header or payload: the L4 checksum;
//! - a UDP template with checksum 0 ("none") keeps checksum 0;
//! - other fields the pseudo-header covers (lengths, protocol) only the IPv4 header checksum.
//!
//! The template's own checksums must be right to start with (an incremental update keeps a
//! wrong checksum wrong). Every header of an Ethernet frame starts at an even offset, which
//! the byte order of a field's words relies on.

use std::ops::Range;

use crate::checksum::{self, fold32};
use crate::extract::{ethertype, ipproto};
use crate::key::{frag, Field};
use crate::pool::Packet;
use crate::wire::{be16, ipv4, ipv6, tcp, udp};
use crate::FlowKey;

/// Bytes copied at once into a frame.
pub const CHUNK: usize = 64;

/// Where the checksum sits in an ICMP or ICMPv6 header.
const ICMP_CHECKSUM: usize = 2;

/// A template frame in [`CHUNK`]-byte pieces (the last one zero-padded).
#[derive(Debug, Clone)]
pub struct Template {
    chunks: Box<[[u8; CHUNK]]>,
    len: usize,
}

impl Template {
    /// The template `bytes`.
    pub fn new(bytes: &[u8]) -> Template {
        let chunks = bytes
            .chunks(CHUNK)
            .map(|c| {
                let mut a = [0u8; CHUNK];
                a[..c.len()].copy_from_slice(c);
                a
            })
            .collect();
        Template {
            chunks,
            len: bytes.len(),
        }
    }

    /// Bytes in the template.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the template has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The length rounded up to whole chunks: what [`Template::copy_into`] writes.
    pub fn padded(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    /// The template's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.chunks
            .iter()
            .flatten()
            .take(self.len)
            .copied()
            .collect()
    }

    /// Copies the template into the start of `out`, whole chunks at a time; `out` holds at
    /// least [`Template::padded`] bytes (bytes past the template's length are scratch).
    #[inline(always)]
    pub fn copy_into(&self, out: &mut [u8]) {
        for (dst, c) in out.chunks_exact_mut(CHUNK).zip(self.chunks.iter()) {
            if let Ok(dst) = <&mut [u8; CHUNK]>::try_from(dst) {
                *dst = *c;
            }
        }
    }

    /// Makes `pkt` (a new packet) the template, starting `shift` bytes after its headroom.
    /// False, with `pkt` unchanged in length, when its frame cannot hold `shift` +
    /// [`Template::padded`] bytes.
    #[inline(always)]
    pub fn fill(&self, pkt: &mut Packet, shift: usize) -> bool {
        if !pkt.set_len(shift + self.padded()) || !pkt.pull_front(shift) {
            return false;
        }
        self.copy_into(pkt.data_mut());
        pkt.truncate(self.len);
        true
    }
}

/// The L4 checksum of a template and what it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L4Sum {
    /// The L4 header and payload (up to the IP length).
    pub range: Range<usize>,
    /// Offset of the checksum field.
    pub at: usize,
    /// The addresses of the pseudo-header, when there is one (not for ICMP).
    pub addrs: Option<Range<usize>>,
    /// UDP: a computed 0 is sent as 0xffff.
    pub udp: bool,
}

/// Where a template's headers and checksums are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// Offset of the IP header (0: none).
    pub l3: usize,
    /// Offset of the L4 header (0: none).
    pub l4: usize,
    /// The IPv4 header, when there is one (its checksum is at `start + 10`).
    pub ipv4: Option<Range<usize>>,
    /// The L4 checksum, when the template carries one this module keeps right: UDP (unless
    /// 0), TCP, ICMP or ICMPv6 of an unfragmented or first-fragment packet.
    pub l4_sum: Option<L4Sum>,
}

impl Layout {
    /// Reads the layout of `template`.
    pub fn of(template: &[u8]) -> Layout {
        let mut key = FlowKey::default();
        let layers = crate::extract(template, 0, &mut key);
        let (l3, l4) = (usize::from(layers.l3_off), usize::from(layers.l4_off));
        let mut layout = Layout {
            l3,
            l4,
            ..Layout::default()
        };
        let (v4, v6) = match key.get(Field::EthType) as u16 {
            ethertype::IPV4 => (true, false),
            ethertype::IPV6 => (false, true),
            _ => (false, false),
        };
        if l3 == 0 || !(v4 || v6) || l3 % 2 == 1 {
            return layout;
        }
        let end = if v4 {
            let ihl = usize::from(template[l3] & 0x0f) * 4;
            layout.ipv4 = Some(l3..l3 + ihl);
            l3 + usize::from(be16(template, l3 + ipv4::field::LENGTH.start))
        } else {
            l3 + ipv6::Ipv6::<&[u8]>::LEN
                + usize::from(be16(template, l3 + ipv6::field::LENGTH.start))
        };
        let end = end.min(template.len());
        let later_fragment = key.get(Field::IpFrag) as u8 & frag::LATER != 0;
        if l4 == 0 || later_fragment || l4 % 2 == 1 {
            return layout;
        }
        let addrs = if v4 {
            l3 + ipv4::field::ADDRS.start..l3 + ipv4::field::ADDRS.end
        } else {
            l3 + ipv6::field::SRC.start..l3 + ipv6::field::DST.end
        };
        let (at, pseudo, is_udp) = match key.get(Field::IpProto) as u8 {
            ipproto::UDP => (udp::field::CHECKSUM.start, true, true),
            ipproto::TCP => (tcp::field::CHECKSUM.start, true, false),
            ipproto::ICMP if v4 => (ICMP_CHECKSUM, false, false),
            ipproto::ICMPV6 if v6 => (ICMP_CHECKSUM, true, false),
            _ => return layout,
        };
        let at = l4 + at;
        if at + 2 > end || (is_udp && be16(template, at) == 0) {
            return layout;
        }
        layout.l4_sum = Some(L4Sum {
            range: l4..end,
            at,
            addrs: pseudo.then_some(addrs),
            udp: is_udp,
        });
        layout
    }
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

fn inside(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start >= b.start && a.end <= b.end
}

/// Running sums of the changes per checksum within one packet.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sums {
    ip: u32,
    l4: u32,
}

impl Sums {
    /// Adds to the L4 checksum the ones'-complement sum (folded to 16 bits) of bytes the
    /// caller wrote where the template had zeros, starting at an even offset (`odd`: an odd
    /// one; the sum is then byte-swapped).
    #[inline(always)]
    pub fn add_l4(&mut self, sum: u16, odd: bool) {
        self.l4 += u32::from(if odd { sum.swap_bytes() } else { sum });
    }
}

/// One field rewritten per packet, and the checksums it is under.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    offset: usize,
    four: bool,
    /// `~old`: the complement of the template's bytes' contribution to the sum.
    old_inv: u32,
    /// 8 when the field starts at an odd offset (its sum contribution is byte-swapped).
    rot: u32,
    /// All ones when the IPv4 header checksum covers the field, else 0.
    ip_mask: u32,
    /// All ones when the L4 checksum covers the field, else 0.
    l4_mask: u32,
}

impl Slot {
    /// The `width`-byte field (2 or 4) at `offset` of `template`, whose layout is `layout`.
    /// Refused, with the reason, when it does not fit the template, covers a checksum this
    /// module keeps right, or covers part of a checksummed range and something else.
    pub fn new(template: &[u8], layout: &Layout, offset: usize, width: u8) -> Result<Slot, String> {
        if width != 2 && width != 4 {
            return Err("width must be 2 or 4 bytes".into());
        }
        let range = offset..offset.saturating_add(usize::from(width));
        if range.end > template.len() {
            return Err(format!(
                "runs past the {}-byte template; lower the offset",
                template.len()
            ));
        }
        let (mut ip_mask, mut l4_mask) = (0, 0);
        if let Some(ip) = &layout.ipv4 {
            let csum = ip.start + ipv4::field::CHECKSUM.start..ip.start + ipv4::field::CHECKSUM.end;
            if overlaps(&range, &csum) {
                return Err("overlaps the IPv4 header checksum, which is kept right".into());
            }
            if overlaps(&range, ip) {
                if !inside(&range, ip) {
                    return Err(
                        "crosses the end of the IPv4 header; vary one header at a time".into(),
                    );
                }
                ip_mask = u32::MAX;
            }
        }
        if let Some(l4) = &layout.l4_sum {
            if overlaps(&range, &(l4.at..l4.at + 2)) {
                return Err("overlaps the L4 (UDP/TCP/ICMP) checksum, which is kept right".into());
            }
            if overlaps(&range, &l4.range) && !inside(&range, &l4.range) {
                return Err("crosses the end of the IP payload; lower the offset".into());
            }
            let in_addrs = l4
                .addrs
                .as_ref()
                .map(|a| (overlaps(&range, a), inside(&range, a)));
            if inside(&range, &l4.range) {
                l4_mask = u32::MAX;
            } else if let Some((true, whole)) = in_addrs {
                if !whole {
                    return Err(
                        "covers part of the IP addresses and other fields; vary the \
                                addresses on their own"
                            .into(),
                    );
                }
                l4_mask = u32::MAX;
            }
        }
        let rot = if offset % 2 == 1 { 8 } else { 0 };
        let old = checksum::fold(checksum::sum(&template[range], 0)).rotate_left(rot);
        Ok(Slot {
            offset,
            four: width == 4,
            old_inv: u32::from(!old),
            rot,
            ip_mask,
            l4_mask,
        })
    }

    /// Whether the IPv4 header checksum covers the field.
    pub fn under_ip(&self) -> bool {
        self.ip_mask != 0
    }

    /// Whether the L4 checksum covers the field.
    pub fn under_l4(&self) -> bool {
        self.l4_mask != 0
    }

    /// Writes `value` (big endian; a 2-byte field takes its low 16 bits) into `data` (a copy
    /// of the template) and adds the change to `sums`.
    #[inline(always)]
    pub fn write(&self, data: &mut [u8], value: u32, sums: &mut Sums) {
        let o = self.offset;
        let new = if self.four {
            data[o..o + 4].copy_from_slice(&value.to_be_bytes());
            fold32((value >> 16) + (value & 0xffff))
        } else {
            data[o..o + 2].copy_from_slice(&(value as u16).to_be_bytes());
            value as u16
        };
        let diff = self.old_inv + u32::from(new.rotate_left(self.rot));
        sums.ip += diff & self.ip_mask;
        sums.l4 += diff & self.l4_mask;
    }
}

/// The checksums of a template that change per packet, with the template's values.
#[derive(Debug, Clone, Copy, Default)]
pub struct Upkeep {
    /// IPv4 header checksum offset and the template's checksum complemented (`~HC`).
    ip: Option<(usize, u16)>,
    /// L4 checksum offset, the template's value complemented, and whether it is UDP.
    l4: Option<(usize, u16, bool)>,
}

impl Upkeep {
    /// The checksums of `template` (laid out as `layout`) to keep: the IPv4 header checksum
    /// when `ip`, the L4 checksum when `l4` (each only when the template has one).
    pub fn new(template: &[u8], layout: &Layout, ip: bool, l4: bool) -> Upkeep {
        let inv = |at: usize| !be16(template, at);
        Upkeep {
            ip: layout
                .ipv4
                .as_ref()
                .filter(|_| ip)
                .map(|h| h.start + ipv4::field::CHECKSUM.start)
                .map(|at| (at, inv(at))),
            l4: layout
                .l4_sum
                .as_ref()
                .filter(|_| l4)
                .map(|s| (s.at, inv(s.at), s.udp)),
        }
    }

    /// The checksums `slots` are under.
    pub fn for_slots(template: &[u8], layout: &Layout, slots: &[Slot]) -> Upkeep {
        let ip = slots.iter().any(Slot::under_ip);
        let l4 = slots.iter().any(Slot::under_l4);
        Upkeep::new(template, layout, ip, l4)
    }

    /// Writes the checksums of `data` after the changes in `sums`.
    #[inline(always)]
    pub fn finish(&self, data: &mut [u8], sums: Sums) {
        if let Some((at, inv)) = self.ip {
            let c = !fold32(u32::from(inv) + sums.ip);
            data[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        if let Some((at, inv, udp)) = self.l4 {
            let mut c = !fold32(u32::from(inv) + sums.l4);
            if udp && c == 0 {
                c = 0xffff;
            }
            data[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
}

/// Values `0..count`, round robin or pseudo-random (xorshift32 scaled by a multiply-shift,
/// uniform enough and without a division).
#[derive(Debug, Clone, Copy)]
pub struct Picker {
    count: u32,
    random: bool,
    /// Next round-robin value.
    next: u32,
    /// xorshift32 state (never 0).
    rng: u32,
}

impl Picker {
    /// Values below `count` (at least 1), random ones from `seed` (0 is taken as 1).
    pub fn new(count: u32, random: bool, seed: u32) -> Picker {
        Picker {
            count: count.max(1),
            random,
            next: 0,
            rng: seed.max(1),
        }
    }

    /// The next value.
    #[inline(always)]
    pub fn pick(&mut self) -> u32 {
        if self.random {
            let mut x = self.rng;
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            self.rng = x;
            ((u64::from(x) * u64::from(self.count)) >> 32) as u32
        } else {
            let v = self.next;
            self.next = if v + 1 == self.count { 0 } else { v + 1 };
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{Ipv4Spec, Ipv6Spec, L3Spec, L4Spec, PacketSpec};
    use crate::wire::be32;
    use crate::Pool;
    use proptest::prelude::*;

    fn frame(vlans: &[u16], l3: L3Spec, l4: L4Spec, len: usize) -> Vec<u8> {
        let hdr = if matches!(l4, L4Spec::Tcp { .. }) {
            20
        } else {
            8
        };
        let mut f = PacketSpec {
            eth_src: [2, 0, 0, 0, 0, 1],
            eth_dst: [2, 0, 0, 0, 0, 2],
            vlans: vlans.iter().map(|&v| (0x8100, v)).collect(),
            l3,
            l4,
            frame_len: len,
            payload_fill: 0,
        }
        .build();
        // A payload that is not all zeros, checksums made again from scratch.
        let l = Layout::of(&f);
        let payload = if l.l4 == 0 { f.len() } else { l.l4 + hdr };
        for (i, b) in f.iter_mut().enumerate().skip(payload) {
            *b = (i as u8).wrapping_mul(7);
        }
        if let Some(s) = &l.l4_sum {
            f[s.at..s.at + 2].fill(0);
            let c = !checksum::fold(checksum::sum(&f[s.range.clone()], pseudo(&f, &l)));
            f[s.at..s.at + 2].copy_from_slice(&c.to_be_bytes());
        }
        assert!(checksums_ok(&f, &l));
        f
    }

    fn v4(l4: L4Spec, len: usize) -> Vec<u8> {
        let ip = Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        frame(&[], L3Spec::Ipv4(ip), l4, len)
    }

    fn v6(l4: L4Spec, len: usize) -> Vec<u8> {
        let ip = Ipv6Spec::new("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        frame(&[7], L3Spec::Ipv6(ip), l4, len)
    }

    fn udp() -> L4Spec {
        L4Spec::Udp { sp: 1, dp: 2 }
    }

    /// The pseudo-header sum of `f`'s L4 checksum (0 for ICMP).
    fn pseudo(f: &[u8], l: &Layout) -> u64 {
        let Some(s) = &l.l4_sum else { return 0 };
        let Some(a) = &s.addrs else { return 0 };
        let len = s.range.len();
        let proto = if l.ipv4.is_some() {
            f[l.l3 + 9]
        } else {
            f[l.l3 + 6]
        };
        if l.ipv4.is_some() {
            checksum::pseudo_v4(be32(f, a.start), be32(f, a.start + 4), proto, len as u16)
        } else {
            let addr = |at: usize| u128::from_be_bytes(f[at..at + 16].try_into().unwrap());
            checksum::pseudo_v6(addr(a.start), addr(a.start + 16), proto, len as u32)
        }
    }

    /// Whether `f`'s IPv4 header and L4 checksums verify, summed from scratch.
    fn checksums_ok(f: &[u8], l: &Layout) -> bool {
        let ip = l
            .ipv4
            .as_ref()
            .is_none_or(|h| checksum::verify(&f[h.clone()], 0));
        let l4 = l.l4_sum.as_ref().is_none_or(|s| {
            // 0 means "no checksum" only in UDP; elsewhere it is a checksum like any other
            // (an ICMP message whose bytes sum to 0xffff has checksum 0).
            let c = be16(f, s.at);
            (!s.udp || c != 0) && checksum::verify(&f[s.range.clone()], pseudo(f, l))
        });
        ip && l4
    }

    #[test]
    fn layouts_of_each_protocol() {
        let l = Layout::of(&v4(udp(), 64));
        assert_eq!((l.l3, l.l4, l.ipv4.clone()), (14, 34, Some(14..34)));
        assert_eq!(
            l.l4_sum,
            Some(L4Sum {
                range: 34..64,
                at: 40,
                addrs: Some(26..34),
                udp: true
            })
        );
        let l = Layout::of(&v4(L4Spec::Icmp { ty: 8, code: 0 }, 64));
        let s = l.l4_sum.unwrap();
        assert_eq!((s.at, s.addrs, s.udp), (36, None, false));
        let l = Layout::of(&v6(
            L4Spec::Tcp {
                sp: 1,
                dp: 2,
                flags: 0x10,
            },
            100,
        ));
        assert_eq!((l.l3, l.l4, l.ipv4), (18, 58, None));
        let s = l.l4_sum.unwrap();
        assert_eq!((s.at, s.addrs, s.range), (74, Some(26..58), 58..100));
        let icmp6 = L4Spec::Icmpv6 {
            ty: 128,
            code: 0,
            nd: None,
        };
        assert_eq!(Layout::of(&v6(icmp6, 80)).l4_sum.unwrap().at, 60);
        // UDP checksum "none" stays none; a later fragment has no L4 header to keep.
        let mut none = v4(udp(), 64);
        none[40..42].fill(0);
        assert_eq!(Layout::of(&none).l4_sum, None);
        let mut ip = Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        ip.frag = 8;
        let later = frame(&[], L3Spec::Ipv4(ip), udp(), 64);
        let l = Layout::of(&later);
        assert_eq!((l.ipv4, l.l4_sum), (Some(14..34), None));
        assert_eq!(Layout::of(&[0u8; 60]), Layout::default());
    }

    #[test]
    fn bad_slots_are_refused_with_reasons() {
        let t = v4(udp(), 64);
        let l = Layout::of(&t);
        for (offset, width, why) in [
            (0, 3, "width must be 2 or 4"),
            (62, 4, "runs past"),
            (23, 2, "IPv4 header checksum"),
            (32, 4, "crosses the end of the IPv4 header"),
            (40, 2, "L4 (UDP/TCP/ICMP) checksum"),
            (62, 2, "ok"),
        ] {
            match Slot::new(&t, &l, offset, width) {
                Err(e) => assert!(e.contains(why), "{offset}/{width}: {e}"),
                Ok(_) => assert_eq!(why, "ok", "{offset}/{width}"),
            }
        }
        let t = v6(udp(), 80);
        let l = Layout::of(&t);
        let err = Slot::new(&t, &l, 24, 4).unwrap_err();
        assert!(err.contains("part of the IP addresses"), "{err}");
        let err = Slot::new(&t, &l, 78, 4).unwrap_err();
        assert!(err.contains("runs past"), "{err}");
    }

    #[test]
    fn slots_know_their_checksums() {
        let t = v4(udp(), 64);
        let l = Layout::of(&t);
        let under = |o| {
            let s = Slot::new(&t, &l, o, 2).unwrap();
            (s.under_ip(), s.under_l4())
        };
        assert_eq!(under(6), (false, false));
        assert_eq!(under(22), (true, false));
        assert_eq!(under(26), (true, true));
        assert_eq!(under(35), (false, true));
    }

    #[test]
    fn probe_like_sums_keep_the_l4_checksum() {
        // The generator writes bytes where the template has zeros and adds their sum.
        let t = v4(udp(), 64);
        let l = Layout::of(&t);
        let up = Upkeep::new(&t, &l, false, true);
        for (at, bytes) in [(60usize, [1u8, 2, 3, 4]), (59, [9, 8, 7, 6])] {
            let mut p = t.clone();
            let old = checksum::sum(&p[at..at + 4], 0);
            p[at..at + 4].copy_from_slice(&bytes);
            let mut sums = Sums::default();
            let new = checksum::fold(checksum::sum(&bytes, 0));
            let old = !checksum::fold(old);
            let odd = at % 2 == 1;
            sums.add_l4(new, odd);
            sums.add_l4(old, odd);
            up.finish(&mut p, sums);
            assert!(checksums_ok(&p, &l), "at {at}");
        }
    }

    #[test]
    fn picker_runs_round_robin_or_spreads() {
        let mut p = Picker::new(3, false, 0);
        let got: Vec<u32> = (0..7).map(|_| p.pick()).collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
        let mut p = Picker::new(16, true, 0x1234);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let v = p.pick();
            assert!(v < 16);
            seen.insert(v);
        }
        assert_eq!(seen.len(), 16);
        let mut one = Picker::new(1, true, 5);
        assert!((0..100).all(|_| one.pick() == 0));
    }

    #[test]
    fn templates_of_every_length_are_copied_exactly() {
        let pool = Pool::with_frames(8);
        let mut cache = pool.cache();
        for len in [
            14,
            60,
            63,
            64,
            65,
            127,
            128,
            129,
            1514,
            crate::FRAME_SIZE - crate::HEADROOM,
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let t = Template::new(&bytes);
            assert_eq!((t.len(), t.bytes()), (len, bytes.clone()));
            for shift in [0, 64] {
                let mut p = cache.alloc().unwrap();
                let fits = t.fill(&mut p, shift);
                assert_eq!(
                    fits,
                    shift + t.padded() <= crate::FRAME_SIZE - crate::HEADROOM
                );
                if fits {
                    assert_eq!(p.data(), &bytes[..], "template of {len} bytes");
                    assert_eq!(p.headroom(), crate::HEADROOM + shift);
                } else {
                    assert_eq!(p.len(), 0);
                }
                cache.free(p);
            }
        }
    }

    proptest! {
        #[test]
        fn checksums_stay_right(
            kind in 0usize..5,
            fields in proptest::collection::vec((0usize..100, prop::bool::ANY), 1..4),
            values in proptest::collection::vec(any::<u32>(), 12),
            size in 64usize..200,
        ) {
            let t = match kind {
                0 => v4(udp(), size),
                1 => frame(&[5, 6], L3Spec::Ipv4(Ipv4Spec::new([1, 2, 3, 4].into(),
                    [5, 6, 7, 8].into())), L4Spec::Tcp { sp: 1, dp: 2, flags: 0x18 }, size),
                2 => v4(L4Spec::Icmp { ty: 8, code: 0 }, size),
                3 => v6(udp(), size.max(80)),
                _ => v6(L4Spec::Icmpv6 { ty: 128, code: 0, nd: None }, size.max(80)),
            };
            let l = Layout::of(&t);
            let mut slots = Vec::new();
            let mut taken: Vec<Range<usize>> = Vec::new();
            for &(offset, four) in &fields {
                let width = if four { 4 } else { 2 };
                let r = offset..offset + usize::from(width);
                // Refused fields (checksums, header crossings) and overlapping ones are
                // left out; every accepted set must keep the checksums right.
                // The pseudo-header's length and protocol are the template's (a vary there
                // keeps only the IPv4 header checksum right).
                let pseudo_fields = if l.ipv4.is_some() {
                    [l.l3 + 2..l.l3 + 4, l.l3 + 9..l.l3 + 10]
                } else {
                    [l.l3 + 4..l.l3 + 6, l.l3 + 6..l.l3 + 7]
                };
                if taken.iter().chain(&pseudo_fields).any(|o| overlaps(o, &r)) {
                    continue;
                }
                if let Ok(s) = Slot::new(&t, &l, offset, width) {
                    taken.push(r);
                    slots.push(s);
                }
            }
            let up = Upkeep::for_slots(&t, &l, &slots);
            for chunk in values.chunks(slots.len().max(1)) {
                let mut p = t.clone();
                let mut sums = Sums::default();
                for (s, &v) in slots.iter().zip(chunk) {
                    s.write(&mut p, v, &mut sums);
                }
                up.finish(&mut p, sums);
                prop_assert!(checksums_ok(&p, &l), "kind {kind}: {:02x?}", &p[..60]);
            }
        }
    }
}

//! Field variation for the `null` source: which bytes change per packet, and how the IPv4 and
//! L4 checksums follow.
//!
//! A [`Vary`] is checked once against the template and compiled into a plan. Per packet
//! the plan writes each value and accumulates, per checksum, the RFC 1624 difference
//! `~old + new` of the words it changed; at the end each affected checksum is updated once:
//! `HC' = ~(~HC + Σ(~m + m'))`. No branch depends on the packet beyond the configured ones.
//!
//! Which checksums a vary keeps right (template Ethernet/IPv4, ethertype 0x0800 at 12..14):
//! - inside the IPv4 header: the IPv4 header checksum; over the IPv4 addresses also the UDP/TCP
//!   checksum (pseudo-header);
//! - inside the UDP/TCP header or payload: the UDP/TCP checksum;
//! - a UDP template with checksum 0 ("none") keeps checksum 0;
//! - varying other IPv4 fields that the pseudo-header covers (total length, protocol) updates
//!   only the IPv4 header checksum.
//!
//! The template's own checksums must be right to start with (an incremental update keeps a
//! wrong checksum wrong).

use packet::checksum::{self, fold32};

/// One field that changes from packet to packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vary {
    /// Byte offset of the field in the template.
    pub offset: usize,
    /// Field width in bytes: 2 or 4 (written big endian).
    pub width: u8,
    /// First value.
    pub base: u32,
    /// Number of distinct values: `base ..= base + count - 1`.
    pub count: u32,
    /// Pseudo-random values (xorshift) instead of `base + (i % count)` for packet `i`.
    pub random: bool,
}

/// Where the checksums of an IPv4 template are and which bytes they cover.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// IPv4 header range.
    ip: (usize, usize),
    /// IPv4 source and destination address range.
    addrs: (usize, usize),
    /// L4 header and payload range, with the offset of its checksum field, when the template
    /// carries a checksummed UDP or TCP header.
    l4: Option<((usize, usize), usize)>,
}

fn layout(t: &[u8]) -> Option<Layout> {
    if t.len() < 14 + 20 || t[12..14] != [0x08, 0x00] || t[14] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(t[14] & 0x0f) * 4;
    if ihl < 20 || t.len() < 14 + ihl {
        return None;
    }
    let ip = (14, 14 + ihl);
    let total = usize::from(u16::from_be_bytes([t[16], t[17]]));
    let end = (14 + total).min(t.len());
    let frag_offset = u16::from_be_bytes([t[20], t[21]]) & 0x1fff;
    let l4_start = ip.1;
    let csum_at = match t[23] {
        17 => Some(l4_start + 6),
        6 => Some(l4_start + 16),
        _ => None,
    };
    let l4 = match csum_at {
        Some(at) if frag_offset == 0 && at + 2 <= end => {
            let udp_none = t[23] == 17 && t[at..at + 2] == [0, 0];
            (!udp_none).then_some(((l4_start, end), at))
        }
        _ => None,
    };
    Some(Layout {
        ip,
        addrs: (26, 34),
        l4,
    })
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

fn inside(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 >= b.0 && a.1 <= b.1
}

/// One compiled vary.
#[derive(Debug, Clone)]
struct Field {
    offset: usize,
    four: bool,
    base: u32,
    count: u32,
    random: bool,
    /// Sequential position (next `i % count`).
    next: u32,
    /// xorshift32 state.
    rng: u32,
    /// `~old` contribution of the template's bytes to the one's-complement sum.
    old_inv: u32,
    /// 8 when the field starts at an odd offset (its sum contribution is byte-swapped).
    rot: u32,
    /// All ones when the IPv4 header checksum covers the field, else 0.
    ip_mask: u32,
    /// All ones when the L4 checksum covers the field, else 0.
    l4_mask: u32,
}

/// The compiled varies of one template, with the running state of one source.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    fields: Vec<Field>,
    /// IPv4 checksum field offset and template value, when some field is under it.
    ip_csum: Option<(usize, u16)>,
    /// L4 checksum field offset, template value and whether it is UDP (0 is sent as 0xffff).
    l4_csum: Option<(usize, u16, bool)>,
}

impl Plan {
    /// Checks `varies` against `template`; the error says which vary is wrong and why.
    pub(crate) fn new(template: &[u8], varies: &[Vary]) -> Result<Plan, String> {
        let layout = layout(template);
        let mut plan = Plan::default();
        let mut taken: Vec<(usize, usize)> = Vec::new();
        for (i, v) in varies.iter().enumerate() {
            let what = format!("vary #{i} (offset {}, width {})", v.offset, v.width);
            if v.width != 2 && v.width != 4 {
                return Err(format!("{what}: width must be 2 or 4 bytes"));
            }
            let range = (v.offset, v.offset.saturating_add(usize::from(v.width)));
            if range.1 > template.len() {
                return Err(format!(
                    "{what}: runs past the {}-byte template; lower the offset",
                    template.len()
                ));
            }
            if v.count == 0 {
                return Err(format!("{what}: count must be at least 1"));
            }
            let max = if v.width == 2 {
                u64::from(u16::MAX)
            } else {
                u64::from(u32::MAX)
            };
            if u64::from(v.base) + u64::from(v.count) - 1 > max {
                return Err(format!(
                    "{what}: base {} + count {} does not fit in {} bytes",
                    v.base, v.count, v.width
                ));
            }
            if let Some(other) = taken.iter().position(|r| overlaps(*r, range)) {
                return Err(format!(
                    "{what}: overlaps vary #{other}; give each field one vary"
                ));
            }
            taken.push(range);

            let (mut ip_mask, mut l4_mask) = (0, 0);
            if let Some(l) = layout {
                let ip_csum = (l.ip.0 + 10, l.ip.0 + 12);
                if overlaps(range, ip_csum) {
                    return Err(format!(
                        "{what}: overlaps the IPv4 header checksum, which the source keeps right"
                    ));
                }
                if overlaps(range, l.ip) {
                    if !inside(range, l.ip) {
                        return Err(format!(
                            "{what}: crosses the end of the IPv4 header; vary one header at a time"
                        ));
                    }
                    ip_mask = u32::MAX;
                    plan.ip_csum =
                        Some((ip_csum.0, u16::from_be_bytes([template[24], template[25]])));
                }
                if let Some((l4, at)) = l.l4 {
                    if overlaps(range, (at, at + 2)) {
                        return Err(format!(
                            "{what}: overlaps the UDP/TCP checksum, which the source keeps right"
                        ));
                    }
                    if overlaps(range, l4) && !inside(range, l4) {
                        return Err(format!(
                            "{what}: crosses the end of the IPv4 payload; lower the offset"
                        ));
                    }
                    if inside(range, l4) || overlaps(range, l.addrs) {
                        if !inside(range, l4) && !inside(range, l.addrs) {
                            return Err(format!(
                                "{what}: covers part of the IPv4 addresses and other fields; \
                                 vary the addresses on their own"
                            ));
                        }
                        l4_mask = u32::MAX;
                        let old = u16::from_be_bytes([template[at], template[at + 1]]);
                        plan.l4_csum = Some((at, old, template[23] == 17));
                    }
                }
            }
            let rot = if v.offset % 2 == 1 { 8 } else { 0 };
            let old =
                checksum::fold(checksum::sum(&template[range.0..range.1], 0)).rotate_left(rot);
            plan.fields.push(Field {
                offset: v.offset,
                four: v.width == 4,
                base: v.base,
                count: v.count,
                random: v.random,
                next: 0,
                rng: (0x9e37_79b9 ^ (i as u32).wrapping_mul(0x85eb_ca6b)) | 1,
                old_inv: u32::from(!old),
                rot,
                ip_mask,
                l4_mask,
            });
        }
        Ok(plan)
    }

    /// Writes the next packet's values into `data` (a copy of the template) and fixes its
    /// checksums.
    #[inline]
    pub(crate) fn apply(&mut self, data: &mut [u8]) {
        if self.fields.is_empty() {
            return;
        }
        let (mut ip_acc, mut l4_acc) = (0u32, 0u32);
        for f in &mut self.fields {
            let value = if f.random {
                let mut x = f.rng;
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                f.rng = x;
                // Lemire's multiply-shift: uniform enough in 0..count, no division.
                f.base + ((u64::from(x) * u64::from(f.count)) >> 32) as u32
            } else {
                let v = f.base + f.next;
                f.next += 1;
                if f.next == f.count {
                    f.next = 0;
                }
                v
            };
            let new = if f.four {
                data[f.offset..f.offset + 4].copy_from_slice(&value.to_be_bytes());
                fold32((value >> 16) + (value & 0xffff))
            } else {
                data[f.offset..f.offset + 2].copy_from_slice(&(value as u16).to_be_bytes());
                value as u16
            };
            let diff = f.old_inv + u32::from(new.rotate_left(f.rot));
            ip_acc += diff & f.ip_mask;
            l4_acc += diff & f.l4_mask;
        }
        if let Some((at, old)) = self.ip_csum {
            let c = !fold32(u32::from(!old) + ip_acc);
            data[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        if let Some((at, old, udp)) = self.l4_csum {
            let mut c = !fold32(u32::from(!old) + l4_acc);
            if udp && c == 0 {
                c = 0xffff;
            }
            data[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::UdpFrame;
    use proptest::prelude::*;

    fn ip_ok(f: &[u8]) -> bool {
        checksum::verify(&f[14..34], 0)
    }

    /// Full UDP checksum over pseudo-header and datagram, recomputed from scratch.
    fn udp_ok(f: &[u8]) -> bool {
        let udp = &f[34..];
        let pseudo = checksum::sum(&f[26..34], 17 + udp.len() as u64);
        checksum::verify(udp, pseudo)
    }

    fn with_udp_checksum(size: usize) -> Vec<u8> {
        let mut f = UdpFrame {
            size,
            ..UdpFrame::default()
        }
        .build();
        for (i, b) in f[42..].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(7);
        }
        let udp_len = f.len() - 34;
        let pseudo = checksum::sum(&f[26..34], 17 + udp_len as u64);
        let c = !checksum::fold(checksum::sum(&f[34..], pseudo));
        f[40..42].copy_from_slice(&c.to_be_bytes());
        assert!(udp_ok(&f));
        f
    }

    #[test]
    fn sequential_values_wrap_at_count() {
        let t = UdpFrame::default().build();
        let vary = Vary {
            offset: 34,
            width: 2,
            base: 1000,
            count: 3,
            random: false,
        };
        let mut plan = Plan::new(&t, &[vary]).unwrap();
        let mut got = Vec::new();
        for _ in 0..7 {
            let mut p = t.clone();
            plan.apply(&mut p);
            got.push(u16::from_be_bytes([p[34], p[35]]));
        }
        assert_eq!(got, [1000, 1001, 1002, 1000, 1001, 1002, 1000]);
    }

    #[test]
    fn random_values_stay_in_range_and_spread() {
        let t = UdpFrame::default().build();
        let vary = Vary {
            offset: 26,
            width: 4,
            base: 0x0a00_0000,
            count: 16,
            random: true,
        };
        let mut plan = Plan::new(&t, &[vary]).unwrap();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let mut p = t.clone();
            plan.apply(&mut p);
            let v = u32::from_be_bytes(p[26..30].try_into().unwrap());
            assert!((0x0a00_0000..0x0a00_0010).contains(&v));
            assert!(ip_ok(&p));
            seen.insert(v);
        }
        assert_eq!(seen.len(), 16);
    }

    #[test]
    fn bad_varies_are_refused_with_reasons() {
        let t = UdpFrame::default().build();
        let v = |offset, width, base, count| Vary {
            offset,
            width,
            base,
            count,
            random: false,
        };
        let cases = [
            (v(0, 3, 0, 1), "width must be 2 or 4"),
            (v(62, 4, 0, 1), "runs past"),
            (v(34, 2, 0, 0), "count must be at least 1"),
            (v(34, 2, 65535, 2), "does not fit"),
            (v(23, 2, 0, 1), "IPv4 header checksum"),
            (v(32, 4, 0, 1), "crosses the end of the IPv4 header"),
        ];
        for (vary, why) in cases {
            let err = Plan::new(&t, &[vary]).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
        let err = Plan::new(&t, &[v(34, 2, 0, 1), v(35, 2, 0, 1)]).unwrap_err();
        assert!(err.contains("overlaps vary #0"), "{err}");
        let t = with_udp_checksum(64);
        let err = Plan::new(&t, &[v(40, 2, 0, 1)]).unwrap_err();
        assert!(err.contains("UDP/TCP checksum"), "{err}");
    }

    #[test]
    fn udp_checksum_zero_stays_zero() {
        let t = UdpFrame::default().build();
        let vary = Vary {
            offset: 26,
            width: 4,
            base: 7,
            count: 100,
            random: false,
        };
        let mut plan = Plan::new(&t, &[vary]).unwrap();
        let mut p = t.clone();
        plan.apply(&mut p);
        assert_eq!(&p[40..42], &[0, 0]);
        assert!(ip_ok(&p));
    }

    #[test]
    fn odd_offsets_and_addresses_keep_both_checksums() {
        let t = with_udp_checksum(100);
        let v = |offset, width, base, count, random| Vary {
            offset,
            width,
            base,
            count,
            random,
        };
        let varies = [
            v(26, 4, 0x0a00_0001, 70_000, true),
            v(19, 2, 0, 65_536, false),
            v(43, 4, 0xffff_0000, 65_535, false),
            v(35, 2, 60_000, 5_000, true),
        ];
        let mut plan = Plan::new(&t, &varies).unwrap();
        assert_eq!(
            plan.fields
                .iter()
                .map(|f| f.l4_mask != 0)
                .collect::<Vec<_>>(),
            [true, false, true, true]
        );
        for _ in 0..5000 {
            let mut p = t.clone();
            plan.apply(&mut p);
            assert!(ip_ok(&p) && udp_ok(&p), "{:02x?}", &p[..50]);
        }
    }

    proptest! {
        #[test]
        fn checksums_stay_right(
            fields in proptest::collection::vec(
                (14usize..60, prop::bool::ANY, any::<u32>(), 1u32..5000, prop::bool::ANY), 1..4),
            size in 64usize..200,
            n in 1usize..20,
        ) {
            let t = with_udp_checksum(size);
            let varies: Vec<Vary> = fields.iter().map(|&(offset, four, base, count, random)| {
                let width = if four { 4 } else { 2 };
                let base = if four { base.min(u32::MAX - count) } else { base % (65536 - count) };
                Vary { offset, width, base, count, random }
            }).collect();
            // Refused combinations (overlaps, checksum fields, header crossings) are fine;
            // every accepted one must keep both checksums right.
            if let Ok(mut plan) = Plan::new(&t, &varies) {
                for _ in 0..n {
                    let mut p = t.clone();
                    plan.apply(&mut p);
                    prop_assert!(ip_ok(&p), "IPv4 checksum broken: {:02x?}", &p[..42]);
                    prop_assert!(udp_ok(&p), "UDP checksum broken: {:02x?}", &p[..42]);
                }
            }
        }
    }
}

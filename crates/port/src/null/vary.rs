//! Field variation for the `null` source: which fields change per packet and to which
//! values. Writing a value and keeping the IPv4 and L4 checksums right is
//! [`packet::vary`]'s (see there which checksums a field is under).
//!
//! A [`Vary`] is checked once against the template and compiled into a [`Plan`]: per field a
//! [`Slot`] (where, and under which checksums) and a [`Picker`] (the next value); per packet
//! the plan writes each field and updates each affected checksum once.

use packet::vary::{Layout, Picker, Slot, Sums, Upkeep};

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

/// One compiled vary.
#[derive(Debug, Clone)]
struct Field {
    slot: Slot,
    base: u32,
    picker: Picker,
}

/// The compiled varies of one template, with the running state of one source.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    fields: Vec<Field>,
    upkeep: Upkeep,
}

impl Plan {
    /// Checks `varies` against `template`; the error says which vary is wrong and why.
    pub(crate) fn new(template: &[u8], varies: &[Vary]) -> Result<Plan, String> {
        let layout = Layout::of(template);
        let mut fields = Vec::new();
        let mut taken: Vec<(usize, usize)> = Vec::new();
        for (i, v) in varies.iter().enumerate() {
            let what = format!("vary #{i} (offset {}, width {})", v.offset, v.width);
            let slot = Slot::new(template, &layout, v.offset, v.width)
                .map_err(|why| format!("{what}: {why}"))?;
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
            let range = (v.offset, v.offset + usize::from(v.width));
            if let Some(other) = taken.iter().position(|r| r.0 < range.1 && range.0 < r.1) {
                return Err(format!(
                    "{what}: overlaps vary #{other}; give each field one vary"
                ));
            }
            taken.push(range);
            let seed = 0x9e37_79b9 ^ (i as u32).wrapping_mul(0x85eb_ca6b) | 1;
            fields.push(Field {
                slot,
                base: v.base,
                picker: Picker::new(v.count, v.random, seed),
            });
        }
        let slots: Vec<Slot> = fields.iter().map(|f| f.slot).collect();
        let upkeep = Upkeep::for_slots(template, &layout, &slots);
        Ok(Plan { fields, upkeep })
    }

    /// Writes the next packet's values into `data` (a copy of the template) and fixes its
    /// checksums.
    #[inline]
    pub(crate) fn apply(&mut self, data: &mut [u8]) {
        if self.fields.is_empty() {
            return;
        }
        let mut sums = Sums::default();
        for f in &mut self.fields {
            f.slot.write(data, f.base + f.picker.pick(), &mut sums);
        }
        self.upkeep.finish(data, sums);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::UdpFrame;
    use packet::checksum;

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
        assert!(err.contains("L4 (UDP/TCP/ICMP) checksum"), "{err}");
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
                .map(|f| f.slot.under_l4())
                .collect::<Vec<_>>(),
            [true, false, true, true]
        );
        for _ in 0..5000 {
            let mut p = t.clone();
            plan.apply(&mut p);
            assert!(ip_ok(&p) && udp_ok(&p), "{:02x?}", &p[..50]);
        }
    }
}

//! What the generator sends: a [`Traffic`] description compiled into [`Frame`] templates.
//!
//! A template is built once with the packet crate's builder (every length and checksum
//! right, probe area zero). Per packet the generator copies it into a pool frame in whole
//! 64-byte chunks and rewrites in place the varied field (the flow) and the probe, updating
//! the IPv4 header checksum and the L4 checksum incrementally (RFC 1624): the sum of the
//! changed words is added to the template's checksum, nothing is summed over the payload.
//! The copy, the field and the checksums are [`packet::vary`]'s, as for the `null` port's
//! source; the probe is this crate's.
//!
//! Frame sizes count the 4-byte FCS, as RFC 2544 does: a 64-byte frame is 60 bytes in the
//! buffer.

use std::net::{Ipv4Addr, Ipv6Addr};

use packet::builder::{Ipv4Spec, Ipv6Spec, L3Spec, L4Spec, PacketSpec};
use packet::checksum::fold32;
use packet::vary::{Layout, Slot, Sums, Template, Upkeep};
use packet::wire::{ipv4, ipv6, udp};
use packet::{frame_size_for, Packet, FRAME_SIZE, HEADROOM, MAX_FRAME_SIZE};

use crate::probe::{Probe, MAX_FLOWS, PROBE_LEN};

/// Bytes of FCS counted in a frame size but not present in the buffer.
pub const FCS: usize = 4;
/// Smallest frame size (FCS included).
pub const MIN_FRAME: usize = 64;
/// Largest frame size (FCS included) a pool's default 2 KiB frames hold.
pub const MAX_STD_FRAME: usize = FRAME_SIZE - HEADROOM + FCS;
/// Largest frame size (FCS included) any pool holds (16 KiB frames: jumbo frames of 9000
/// bytes and more).
pub const MAX_FRAME: usize = MAX_FRAME_SIZE - HEADROOM + FCS;
/// IMIX sizes (FCS included) and their weights: 7:4:1 of 64, 570 and 1518 bytes.
pub const IMIX: [(usize, u32); 3] = [(64, 7), (570, 4), (1518, 1)];

/// The protocol stack of generated frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// Ethernet / IPv4 / UDP.
    Udp4,
    /// Ethernet / IPv4 / TCP (ACK, 20-byte header).
    Tcp4,
    /// Ethernet / IPv4 / ICMP echo request.
    Icmp4,
    /// Ethernet / IPv6 / UDP.
    Udp6,
}

impl Proto {
    /// Parses `udp`, `udp4`, `tcp`, `tcp4`, `icmp`, `icmp4`, `udp6`.
    pub fn parse(s: &str) -> Result<Proto, String> {
        match s {
            "udp" | "udp4" => Ok(Proto::Udp4),
            "tcp" | "tcp4" => Ok(Proto::Tcp4),
            "icmp" | "icmp4" => Ok(Proto::Icmp4),
            "udp6" => Ok(Proto::Udp6),
            _ => Err(format!(
                "unknown protocol '{s}'; use one of: udp, tcp, icmp, udp6"
            )),
        }
    }

    /// Header bytes in front of the payload (without VLAN tags).
    pub fn headers(self) -> usize {
        match self {
            Proto::Udp4 | Proto::Icmp4 => 14 + 20 + 8,
            Proto::Tcp4 => 14 + 20 + 20,
            Proto::Udp6 => 14 + 40 + 8,
        }
    }
}

/// Frame sizes, FCS included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    /// Every frame this size.
    Fixed(usize),
    /// 7:4:1 of 64, 570 and 1518 bytes, interleaved.
    Imix,
}

impl Sizes {
    /// Parses a size in bytes or `imix`.
    pub fn parse(s: &str) -> Result<Sizes, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(Sizes::Imix);
        }
        s.parse()
            .map(Sizes::Fixed)
            .map_err(|_| format!("frame size '{s}': give bytes (e.g. 64) or imix"))
    }

    /// Mean frame size in bytes (FCS included).
    pub fn mean(self) -> f64 {
        match self {
            Sizes::Fixed(n) => n as f64,
            Sizes::Imix => {
                let (bytes, n) = IMIX
                    .iter()
                    .fold((0, 0), |(b, n), &(s, w)| (b + s as u32 * w, n + w));
                f64::from(bytes) / f64::from(n)
            }
        }
    }

    /// The largest frame size (FCS included).
    pub fn largest(self) -> usize {
        self.pattern().into_iter().max().unwrap_or(MIN_FRAME)
    }

    /// The sizes in the order frames take them (one period of the pattern).
    pub fn pattern(self) -> Vec<usize> {
        match self {
            Sizes::Fixed(n) => vec![n],
            // Spread: 64 570 64 570 64 1518 64 570 64 570 64 64.
            Sizes::Imix => vec![64, 570, 64, 570, 64, 1518, 64, 570, 64, 570, 64, 64],
        }
    }
}

/// Which header field tells flows apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VaryField {
    /// IP source address (the low 32 bits for IPv6).
    SrcIp,
    /// IP destination address (the low 32 bits for IPv6).
    DstIp,
    /// L4 source port.
    SrcPort,
    /// L4 destination port.
    DstPort,
}

impl VaryField {
    /// Parses `src-ip`, `dst-ip`, `src-port`, `dst-port`.
    pub fn parse(s: &str) -> Result<VaryField, String> {
        match s {
            "src-ip" => Ok(VaryField::SrcIp),
            "dst-ip" => Ok(VaryField::DstIp),
            "src-port" => Ok(VaryField::SrcPort),
            "dst-port" => Ok(VaryField::DstPort),
            _ => Err(format!(
                "unknown field '{s}'; vary one of: src-ip, dst-ip, src-port, dst-port"
            )),
        }
    }
}

/// What to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// Protocols.
    pub proto: Proto,
    /// Frame sizes.
    pub sizes: Sizes,
    /// Number of flows.
    pub flows: u32,
    /// The field that differs between flows.
    pub vary: VaryField,
    /// Pseudo-random flow order instead of round robin.
    pub random: bool,
    /// An 802.1Q tag with this VLAN id.
    pub vlan: Option<u16>,
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IPv4 source (first flow's, when it varies).
    pub src_ip4: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip4: Ipv4Addr,
    /// IPv6 source.
    pub src_ip6: Ipv6Addr,
    /// IPv6 destination.
    pub dst_ip6: Ipv6Addr,
    /// L4 source port.
    pub src_port: u16,
    /// L4 destination port.
    pub dst_port: u16,
}

impl Default for Traffic {
    /// 64-byte UDP/IPv4, one flow, 02:00:00:00:00:01 → 02:00:00:00:00:02, 10.0.0.1 →
    /// 10.0.0.2 (fd00::1 → fd00::2), ports 1024 → 1024.
    fn default() -> Self {
        Traffic {
            proto: Proto::Udp4,
            sizes: Sizes::Fixed(64),
            flows: 1,
            vary: VaryField::SrcIp,
            random: false,
            vlan: None,
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_ip4: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip4: Ipv4Addr::new(10, 0, 0, 2),
            src_ip6: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            dst_ip6: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
            src_port: 1024,
            dst_port: 1024,
        }
    }
}

/// One compiled template: bytes, where the checksums and fields are, how to rewrite them.
#[derive(Debug, Clone)]
pub struct Frame {
    template: Template,
    /// The field that tells flows apart.
    slot: Slot,
    /// Its value in flow 0.
    base: u32,
    /// The checksums the field and the probe are under.
    upkeep: Upkeep,
    /// The checksum the probe alone is under (flow 0: the field keeps the template's value).
    upkeep_first: Upkeep,
    /// Whether the frame is long enough to carry a probe (it then always does).
    pub probe: bool,
    /// Whether the probe starts at an odd offset.
    probe_odd: bool,
    /// The most bytes a new pool frame's data may start later and still hold the template
    /// rounded up to whole 64-byte chunks.
    pub max_shift: usize,
}

impl Frame {
    /// Frame size in bytes, FCS included.
    pub fn size(&self) -> usize {
        self.template.len() + FCS
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.template.len()
    }

    /// Always false (a frame has its headers); for the `len` convention.
    pub fn is_empty(&self) -> bool {
        self.template.is_empty()
    }

    /// The template's bytes (probe area zero, first flow).
    pub fn bytes(&self) -> Vec<u8> {
        self.template.bytes()
    }

    /// Makes `pkt` (a new packet) a copy of the template, `shift` bytes after its headroom
    /// (at most [`Frame::max_shift`]); false when its frame is too small.
    #[inline(always)]
    pub fn fill(&self, pkt: &mut Packet, shift: usize) -> bool {
        self.template.fill(pkt, shift)
    }

    /// Writes the template into `out` (at least the template's length rounded up to 64
    /// bytes: the overhang is scratch) with flow `flow` and `probe`, checksums kept right.
    #[inline(always)]
    pub fn write(&self, out: &mut [u8], flow: u32, probe: &Probe) {
        self.template.copy_into(out);
        self.rewrite(out, flow, probe);
    }

    /// Turns `out`, a copy of the template, into flow `flow`'s frame carrying `probe`,
    /// checksums kept right.
    #[inline(always)]
    pub fn rewrite(&self, out: &mut [u8], flow: u32, probe: &Probe) {
        let mut sums = Sums::default();
        // Flow 0 is the template's own value: nothing to write, and only the probe's
        // checksum to update.
        let upkeep = if flow == 0 {
            &self.upkeep_first
        } else {
            self.slot
                .write(out, self.base.wrapping_add(flow), &mut sums);
            &self.upkeep
        };
        if self.probe {
            let end = self.template.len();
            if let Ok(p) = <&mut [u8; PROBE_LEN]>::try_from(&mut out[end - PROBE_LEN..end]) {
                probe.write(p);
            }
            // The template's probe area is zero: the probe's sum is the whole change.
            let s = probe.sum_small();
            debug_assert!(s < 1 << 32);
            sums.add_l4(fold32(s as u32), self.probe_odd);
        }
        upkeep.finish(out, sums);
    }
}

/// The templates of one [`Traffic`], one per frame size, and the size pattern.
#[derive(Debug, Clone)]
pub struct Templates {
    /// One template per distinct size.
    pub frames: Vec<Frame>,
    /// Index into `frames` for each packet of one period.
    pub pattern: Vec<u8>,
}

impl Traffic {
    /// The pool frame size (see [`packet::PoolConfig::frame_size`]) that holds every frame
    /// of this traffic: 2 KiB up to 1924-byte frames, more for jumbo frames. Errors name the
    /// largest size there is.
    pub fn pool_frame_size(&self) -> Result<usize, String> {
        let largest = self.sizes.largest();
        frame_size_for(largest.saturating_sub(FCS))
            .ok_or_else(|| format!("frame size {largest}: give {MIN_FRAME} to {MAX_FRAME} bytes"))
    }

    /// Checks the description and builds its templates for packets of the default 2 KiB
    /// pool frames ([`Traffic::compile_for`] with 1920 bytes).
    pub fn compile(&self) -> Result<Templates, String> {
        self.compile_for(FRAME_SIZE - HEADROOM)
    }

    /// Checks the description and builds its templates for pool frames holding `max_data`
    /// bytes ([`packet::Pool::max_data`]). Errors name the fix.
    pub fn compile_for(&self, max_data: usize) -> Result<Templates, String> {
        if self.flows == 0 {
            return Err("--flows 0: give at least 1 flow".into());
        }
        if self.flows > MAX_FLOWS {
            return Err(format!(
                "--flows {}: at most {MAX_FLOWS} flows (probes carry a 24-bit flow index)",
                self.flows
            ));
        }
        let port_vary = matches!(self.vary, VaryField::SrcPort | VaryField::DstPort);
        if port_vary && self.proto == Proto::Icmp4 {
            return Err("ICMP has no ports; vary src-ip or dst-ip".into());
        }
        let width: u64 = if port_vary { 1 << 16 } else { 1 << 32 };
        let base = u64::from(self.vary_base());
        if base + u64::from(self.flows) > width {
            return Err(format!(
                "--flows {} from {} overflows the {} field; start lower or use fewer flows",
                self.flows,
                base,
                if port_vary {
                    "16-bit port"
                } else {
                    "32-bit address"
                }
            ));
        }
        if let Some(v) = self.vlan {
            if v > 4094 {
                return Err(format!("--vlan {v}: VLAN ids are 0 to 4094"));
            }
        }
        let pattern = self.sizes.pattern();
        let mut distinct: Vec<usize> = pattern.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let mut frames = Vec::new();
        for &size in &distinct {
            frames.push(self.frame(size, max_data)?);
        }
        let pattern = pattern
            .iter()
            .map(|s| distinct.iter().position(|d| d == s).unwrap_or(0) as u8)
            .collect();
        Ok(Templates { frames, pattern })
    }

    /// The smallest frame size (FCS included) with these headers.
    pub fn min_size(&self) -> usize {
        let vlan = if self.vlan.is_some() { 4 } else { 0 };
        (self.proto.headers() + vlan + FCS).max(MIN_FRAME)
    }

    /// The smallest frame size (FCS included) that carries a probe with these headers;
    /// smaller frames go without one (counted, but no sequence or latency).
    pub fn probe_size(&self) -> usize {
        let vlan = if self.vlan.is_some() { 4 } else { 0 };
        (self.proto.headers() + vlan + PROBE_LEN + FCS).max(MIN_FRAME)
    }

    fn vary_base(&self) -> u32 {
        match self.vary {
            VaryField::SrcIp if self.proto == Proto::Udp6 => low32(self.src_ip6),
            VaryField::DstIp if self.proto == Proto::Udp6 => low32(self.dst_ip6),
            VaryField::SrcIp => u32::from(self.src_ip4),
            VaryField::DstIp => u32::from(self.dst_ip4),
            VaryField::SrcPort => u32::from(self.src_port),
            VaryField::DstPort => u32::from(self.dst_port),
        }
    }

    fn frame(&self, size: usize, max_data: usize) -> Result<Frame, String> {
        let min = self.min_size();
        let max = (max_data + FCS).min(MAX_FRAME);
        if size < min || size > max {
            let why = if size > MAX_FRAME {
                format!("the largest pool frames hold {} bytes", MAX_FRAME - FCS)
            } else if size > max {
                format!(
                    "the pool's frames hold {max_data} bytes; jumbo frames need a pool with \
                     larger frames (Traffic::pool_frame_size)"
                )
            } else {
                format!("{:?} headers need {min}", self.proto)
            };
            return Err(format!(
                "frame size {size}: give {min} to {max} bytes ({why})"
            ));
        }
        let len = size - FCS;
        let l4 = match self.proto {
            Proto::Udp4 | Proto::Udp6 => L4Spec::Udp {
                sp: self.src_port,
                dp: self.dst_port,
            },
            Proto::Tcp4 => L4Spec::Tcp {
                sp: self.src_port,
                dp: self.dst_port,
                flags: 0x010,
            },
            Proto::Icmp4 => L4Spec::Icmp { ty: 8, code: 0 },
        };
        let l3 = match self.proto {
            Proto::Udp6 => L3Spec::Ipv6(Ipv6Spec::new(self.src_ip6, self.dst_ip6)),
            _ => {
                let mut ip = Ipv4Spec::new(self.src_ip4, self.dst_ip4);
                ip.frag = 0x4000;
                L3Spec::Ipv4(ip)
            }
        };
        let spec = PacketSpec {
            eth_src: self.src_mac,
            eth_dst: self.dst_mac,
            vlans: self.vlan.map(|v| vec![(0x8100, v)]).unwrap_or_default(),
            l3,
            l4,
            frame_len: len,
            payload_fill: 0,
        };
        let bytes = spec.build();
        let layout = Layout::of(&bytes);
        let (l3, l4) = (layout.l3, layout.l4);
        if l3 == 0 || l4 == 0 {
            return Err(format!(
                "{:?} template of {len} bytes has no L4 header",
                self.proto
            ));
        }
        let v6 = self.proto == Proto::Udp6;
        // The low 32 bits of an IPv6 address.
        let (off, width) = match self.vary {
            VaryField::SrcIp if v6 => (l3 + ipv6::field::SRC.end - 4, 4),
            VaryField::DstIp if v6 => (l3 + ipv6::field::DST.end - 4, 4),
            VaryField::SrcIp => (l3 + ipv4::field::SRC.start, 4),
            VaryField::DstIp => (l3 + ipv4::field::DST.start, 4),
            VaryField::SrcPort => (l4 + udp::field::SRC_PORT.start, 2),
            VaryField::DstPort => (l4 + udp::field::DST_PORT.start, 2),
        };
        let slot = Slot::new(&bytes, &layout, off, width)?;
        let probe = size >= self.probe_size();
        let upkeep = Upkeep::new(&bytes, &layout, slot.under_ip(), slot.under_l4() || probe);
        let upkeep_first = Upkeep::new(&bytes, &layout, false, probe);
        let template = Template::new(&bytes);
        Ok(Frame {
            max_shift: max_data.saturating_sub(template.padded()),
            template,
            slot,
            base: self.vary_base(),
            upkeep,
            upkeep_first,
            probe,
            probe_odd: (len - PROBE_LEN) % 2 == 1,
        })
    }
}

fn low32(a: Ipv6Addr) -> u32 {
    u128::from(a) as u32
}

#[cfg(test)]
#[path = "template_tests.rs"]
mod tests;

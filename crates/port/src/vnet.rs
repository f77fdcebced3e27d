//! The virtio-net header that kernel ports (AF_PACKET with `PACKET_VNET_HDR`, TAP with
//! `IFF_VNET_HDR`) put before each frame, and what the switch does with it.
//!
//! With the header, a host can keep its checksum and TCP segmentation offloads on: the kernel
//! hands over a frame whose L4 checksum is only partial ([`F_NEEDS_CSUM`]) or a TCP
//! "super-packet" of up to 64 KiB ([`GSO_TCPV4`], [`GSO_TCPV6`]) instead of wire-ready frames.
//! On receive ([`plan`], [`deliver`]):
//!
//! - a frame with no offload is copied as it is;
//! - a frame needing its checksum gets it completed in software ([`complete_csum`]);
//! - a TCP super-packet whose payload is longer than one MSS (`gso_size`) is kept whole in a
//!   64 KiB frame and marked with its request ([`packet::gso`]) when the port asks for it and
//!   a frame is free; otherwise it is cut into MSS-sized segments ([`TcpSegmenter`]), each
//!   with its own IPv4 id and total length (or IPv6 payload length), TCP sequence number,
//!   flags (FIN and PSH only on the last segment, CWR only on the first) and a full TCP
//!   checksum — what the host's NIC would have done.
//!
//! On transmit, a complete frame goes with [`VnetHdr::NONE`] and a super-packet kept whole
//! with a request to cut it ([`tx_header`]); for ports without the header the data path cuts
//! super-packets itself ([`segment_into`]).
//!
//! Other GSO types (UDP fragmentation offload, UDP GSO) are refused with [`VnetError`]; hosts
//! only produce them when an application asks, and the port counts them as receive errors.
//!
//! Multi-byte fields are in the host's byte order: both AF_PACKET and TAP (without
//! `TUNSETVNETLE`) use the legacy virtio layout.
//!
//! Per-packet code: nothing here allocates.

use packet::extract::{ethertype, ipproto};
use packet::wire::{at, be128, be32, ethernet, get_be16, ipv4, ipv6, tcp};
use packet::{checksum, Batch, Gso, Packet, PoolCache};

use crate::vnet_tnl::{OuterHeaders, GSO_UDP_TUNNEL_IPV4, GSO_UDP_TUNNEL_IPV6};

/// The `gso_type` bits of a super-packet encapsulated whole in a UDP tunnel
/// ([`crate::vnet_tnl`]).
const TUNNEL_BITS: u8 = GSO_UDP_TUNNEL_IPV4 | GSO_UDP_TUNNEL_IPV6;

/// Length of the virtio-net header (`struct virtio_net_hdr`) on the wire.
pub const VNET_HDR_LEN: usize = 10;

/// `flags`: the L4 checksum is partial; complete it from `csum_start`, store at
/// `csum_start + csum_offset`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `flags`: the checksum was verified by the sender.
pub const F_DATA_VALID: u8 = 2;
/// `gso_type`: not a super-packet.
pub const GSO_NONE: u8 = 0;
/// `gso_type`: TCP over IPv4 super-packet.
pub const GSO_TCPV4: u8 = 1;
/// `gso_type`: UDP fragmentation offload (legacy).
pub const GSO_UDP: u8 = 3;
/// `gso_type`: TCP over IPv6 super-packet.
pub const GSO_TCPV6: u8 = 4;
/// `gso_type`: UDP segmentation offload.
pub const GSO_UDP_L4: u8 = 5;
/// `gso_type` bit: the super-packet carries ECN (segmentation keeps CWR on the first segment
/// only, as it does for every super-packet).
pub const GSO_ECN: u8 = 0x80;

/// Longest header (Ethernet, VLAN tags, IP with options or extension headers, TCP with
/// options) a super-packet may have.
pub const MAX_HEADERS: usize = 256;

/// A virtio-net header (`struct virtio_net_hdr`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// [`F_NEEDS_CSUM`], [`F_DATA_VALID`].
    pub flags: u8,
    /// [`GSO_NONE`], [`GSO_TCPV4`], [`GSO_TCPV6`], ... possibly with [`GSO_ECN`].
    pub gso_type: u8,
    /// Length of the headers (a hint; this module computes it from the frame).
    pub hdr_len: u16,
    /// Maximum segment size of a super-packet.
    pub gso_size: u16,
    /// Where the checksummed data starts (from the start of the frame).
    pub csum_start: u16,
    /// Where the checksum field is, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// A header that asks for nothing: a complete frame.
    pub const NONE: VnetHdr = VnetHdr {
        flags: 0,
        gso_type: GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };

    /// Reads a header from its wire bytes (host byte order).
    pub fn from_bytes(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }

    /// The header's wire bytes (host byte order).
    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

/// Why a received frame's offload request cannot be carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VnetError {
    /// A GSO type other than TCPv4/TCPv6 (the value is the type).
    UnsupportedGso(u8),
    /// The checksum start/offset point outside the frame.
    BadCsum,
    /// The headers of a TCP super-packet could not be parsed (what was wrong).
    BadHeaders(&'static str),
    /// A TCP super-packet with `gso_size` 0.
    ZeroMss,
    /// Ethernet + IP + TCP headers longer than [`MAX_HEADERS`].
    HeadersTooLong,
    /// A super-packet encapsulated whole in a UDP tunnel ([`packet::Gso::outer`]): only a
    /// port with the tunnel header ([`crate::vnet_tnl`]) can have it cut.
    Tunnelled,
}

impl std::fmt::Display for VnetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VnetError::UnsupportedGso(t) => write!(
                f,
                "GSO type {t} is not supported (only TCPv4/TCPv6); turn off UDP offloads on the host"
            ),
            VnetError::BadCsum => write!(f, "checksum start/offset outside the frame"),
            VnetError::BadHeaders(why) => write!(f, "TCP super-packet headers: {why}"),
            VnetError::ZeroMss => write!(f, "TCP super-packet with gso_size 0"),
            VnetError::HeadersTooLong => {
                write!(f, "TCP super-packet headers longer than {MAX_HEADERS} bytes")
            }
            VnetError::Tunnelled => write!(
                f,
                "a super-packet encapsulated whole in a UDP tunnel reached a port that cannot have it cut"
            ),
        }
    }
}

impl std::error::Error for VnetError {}

/// A VLAN tag a kernel port took out of the frame (AF_PACKET reports it beside the frame);
/// it goes back after the MAC addresses when the frame is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100 or 0x88a8).
    pub tpid: u16,
    /// Priority, DEI and VID.
    pub tci: u16,
}

impl VlanTag {
    fn bytes(&self) -> [u8; 4] {
        let [a, b] = self.tpid.to_be_bytes();
        let [c, d] = self.tci.to_be_bytes();
        [a, b, c, d]
    }
}

/// Length of `frame` once `vlan` (if any) is put back.
#[inline]
pub fn copied_len(frame: &[u8], vlan: Option<VlanTag>) -> usize {
    frame.len()
        + if vlan.is_some() && frame.len() >= 12 {
            4
        } else {
            0
        }
}

/// Copies `frame` into `out`, putting `vlan` back after the MAC addresses; returns the length
/// written. `out` must hold [`copied_len`] bytes.
#[inline]
pub fn copy_frame(frame: &[u8], vlan: Option<VlanTag>, out: &mut [u8]) -> usize {
    match vlan {
        Some(tag) if frame.len() >= 12 => {
            out[..12].copy_from_slice(&frame[..12]);
            out[12..16].copy_from_slice(&tag.bytes());
            out[16..frame.len() + 4].copy_from_slice(&frame[12..]);
            frame.len() + 4
        }
        _ => {
            out[..frame.len()].copy_from_slice(frame);
            frame.len()
        }
    }
}

/// Completes a partial L4 checksum in place: sums `frame[start..]` (the field already holds
/// the pseudo-header sum) and stores the complement at `start + offset`. A result of 0 is
/// stored as 0xffff (the same value in ones' complement; 0 would mean "no checksum" in UDP).
#[inline]
pub fn complete_csum(frame: &mut [u8], start: usize, offset: usize) -> Result<(), VnetError> {
    let at = start.checked_add(offset).ok_or(VnetError::BadCsum)?;
    if at + 2 > frame.len() {
        return Err(VnetError::BadCsum);
    }
    let mut c = !checksum::fold(checksum::sum(&frame[start..], 0));
    if c == 0 {
        c = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// What a received frame needs, in the coordinates of the copied frame (VLAN tag back in).
#[derive(Debug, Clone)]
// The segmenter is big (it holds the headers) but lives on the stack for one frame; boxing it
// would allocate per packet.
#[allow(clippy::large_enum_variant)]
pub enum Offload {
    /// Nothing: copy it.
    None,
    /// Copy it, then [`complete_csum`] with this start and offset.
    Csum {
        /// Start of the checksummed data.
        start: usize,
        /// Offset of the checksum field from `start`.
        offset: usize,
    },
    /// Cut it into segments.
    Tcp(TcpSegmenter),
}

/// Decides what a received `frame` (as the kernel delivered it: without `vlan`) with header
/// `hdr` needs.
pub fn plan(frame: &[u8], vlan: Option<VlanTag>, hdr: &VnetHdr) -> Result<Offload, VnetError> {
    let shift = if vlan.is_some() && frame.len() >= 12 {
        4
    } else {
        0
    };
    let needs_csum = hdr.flags & F_NEEDS_CSUM != 0;
    match hdr.gso_type & !(GSO_ECN | TUNNEL_BITS) {
        GSO_NONE => {}
        GSO_TCPV4 | GSO_TCPV6 => {
            let seg = TcpSegmenter::new(frame, vlan, hdr)?;
            if seg.segments() > 1 {
                return Ok(Offload::Tcp(seg));
            }
            // One MSS or less: a plain frame with a partial checksum.
            return Ok(Offload::Csum {
                start: seg.l4,
                offset: 16,
            });
        }
        t => return Err(VnetError::UnsupportedGso(t)),
    }
    if !needs_csum {
        return Ok(Offload::None);
    }
    let start = usize::from(hdr.csum_start) + shift;
    let offset = usize::from(hdr.csum_offset);
    if start + offset + 2 > frame.len() + shift {
        return Err(VnetError::BadCsum);
    }
    Ok(Offload::Csum { start, offset })
}

/// Cuts one TCP super-packet into MSS-sized segments. Holds a copy of the headers (with the
/// VLAN tag back in); the payload is read from the original frame on each
/// [`write`](TcpSegmenter::write).
#[derive(Clone)]
pub struct TcpSegmenter {
    headers: [u8; MAX_HEADERS],
    /// Length of Ethernet + IP + TCP headers in `headers`.
    hdr_len: usize,
    /// Offset of the IP header.
    l3: usize,
    /// Offset of the TCP header.
    l4: usize,
    v4: bool,
    /// Where the payload starts in the original frame.
    payload_at: usize,
    payload_len: usize,
    mss: usize,
    seq: u32,
    ip_id: u16,
    flags: u16,
    /// The outer headers of a super-packet encapsulated whole in a UDP tunnel (its inner
    /// headers are the ones above): each segment gets a copy, its lengths rewritten.
    outer: Option<OuterHeaders>,
}

impl std::fmt::Debug for TcpSegmenter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpSegmenter")
            .field("hdr_len", &self.hdr_len)
            .field("v4", &self.v4)
            .field("payload_len", &self.payload_len)
            .field("mss", &self.mss)
            .field("outer", &self.outer)
            .finish()
    }
}

const TCP_FIN: u16 = 0x001;
const TCP_PSH: u16 = 0x008;
const TCP_CWR: u16 = 0x080;

/// Where the headers of a TCP packet are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpHeaders {
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the TCP header.
    pub l4: usize,
    /// IPv4 (else IPv6).
    pub v4: bool,
    /// Where the TCP payload starts (the TCP header's end).
    pub end: usize,
}

impl TcpHeaders {
    /// Finds the headers of TCP packet `frame` (Ethernet, any VLAN tags, IPv4 or IPv6, TCP).
    /// An IPv6 packet with extension headers needs `csum_start` (where TCP starts, as a
    /// virtio-net header gives it).
    pub fn parse(frame: &[u8], csum_start: Option<usize>) -> Result<TcpHeaders, VnetError> {
        let bad = VnetError::BadHeaders;
        let mut type_at = ethernet::field::ETHERTYPE.start;
        let mut ty = get_be16(frame, type_at).ok_or(bad("frame shorter than Ethernet"))?;
        while ty == ethertype::VLAN || ty == ethertype::QINQ {
            type_at += 4;
            ty = get_be16(frame, type_at).ok_or(bad("truncated VLAN tag"))?;
        }
        let l3 = type_at + 2;
        let (v4, l4) = match ty {
            ethertype::IPV4 => {
                let vihl = frame
                    .get(l3 + ipv4::field::VER_IHL)
                    .ok_or(bad("no IPv4 header"))?;
                let ihl = usize::from(vihl & 0x0f) * 4;
                if ihl < 20 || frame.get(l3 + ipv4::field::PROTOCOL) != Some(&ipproto::TCP) {
                    return Err(bad("IPv4 header length below 20 or protocol not TCP"));
                }
                (true, l3 + ihl)
            }
            ethertype::IPV6 => {
                // Extension headers: trust the checksum start, which points at TCP.
                let fixed_end = l3 + ipv6::field::DST.end;
                let l4 = if frame.get(l3 + ipv6::field::NXT_HDR) == Some(&ipproto::TCP) {
                    fixed_end
                } else {
                    match csum_start {
                        Some(s) if s > fixed_end => s,
                        _ => return Err(bad("IPv6 next header is not TCP")),
                    }
                };
                (false, l4)
            }
            _ => return Err(bad("not IPv4 or IPv6")),
        };
        let doff_at = l4 + tcp::field::FLAGS.start;
        let doff = usize::from(*frame.get(doff_at).ok_or(bad("no TCP header"))? >> 4) * 4;
        if doff < 20 {
            return Err(bad("TCP data offset below 5"));
        }
        let end = l4 + doff;
        if end > frame.len() {
            return Err(bad("TCP header beyond the frame"));
        }
        Ok(TcpHeaders { l3, l4, v4, end })
    }
}

impl TcpSegmenter {
    /// Parses the headers of a TCP super-packet `frame` (delivered without `vlan`), asked to
    /// be cut by `hdr`; with a UDP tunnel bit in its `gso_type` ([`GSO_UDP_TUNNEL_IPV4`],
    /// [`GSO_UDP_TUNNEL_IPV6`]: a TAP with the tunnel header), one encapsulated whole, whose
    /// outer headers end where its checksum start says ([`OuterHeaders::find`]).
    pub fn new(
        frame: &[u8],
        vlan: Option<VlanTag>,
        hdr: &VnetHdr,
    ) -> Result<TcpSegmenter, VnetError> {
        let csum_start = (hdr.flags & F_NEEDS_CSUM != 0).then_some(usize::from(hdr.csum_start));
        let outer = match hdr.gso_type & TUNNEL_BITS {
            0 => None,
            bit => {
                let bad = VnetError::BadHeaders;
                if vlan.is_some() {
                    return Err(bad("a tunnelled super-packet with its VLAN tag taken out"));
                }
                let start =
                    csum_start.ok_or(bad("a tunnelled super-packet without F_NEEDS_CSUM"))?;
                Some(OuterHeaders::find(frame, bit, start)?)
            }
        };
        TcpSegmenter::build(frame, vlan, hdr.gso_size, csum_start, outer)
    }

    /// The segmenter of super-packet `frame` kept whole with request `g` ([`packet::gso`]).
    pub fn of_super(frame: &[u8], g: Gso) -> Result<TcpSegmenter, VnetError> {
        let outer = match g.outer {
            0 => None,
            n => Some(OuterHeaders::at(frame, usize::from(n))?),
        };
        TcpSegmenter::build(frame, None, g.mss, None, outer)
    }

    fn build(
        frame: &[u8],
        vlan: Option<VlanTag>,
        mss: u16,
        csum_start: Option<usize>,
        outer: Option<OuterHeaders>,
    ) -> Result<TcpSegmenter, VnetError> {
        let mss = usize::from(mss);
        if mss == 0 {
            return Err(VnetError::ZeroMss);
        }
        let o = outer.map_or(0, |o| o.len);
        let inner_start = csum_start.map(|s| s.saturating_sub(o));
        let h = TcpHeaders::parse(&frame[o..], inner_start)?;
        let (l3, l4, v4, end) = (h.l3 + o, h.l4 + o, h.v4, h.end + o);
        let shift = if vlan.is_some() { 4 } else { 0 };
        if end + shift > MAX_HEADERS {
            return Err(VnetError::HeadersTooLong);
        }
        let mut headers = [0u8; MAX_HEADERS];
        let hdr_len = copy_frame(&frame[..end], vlan, &mut headers);
        let (l3, l4) = (l3 + shift, l4 + shift);
        let seq = be32(&headers, l4 + tcp::field::SEQ.start);
        Ok(TcpSegmenter {
            headers,
            hdr_len,
            l3,
            l4,
            v4,
            payload_at: end,
            payload_len: frame.len() - end,
            mss,
            seq,
            ip_id: if v4 {
                u16::from_be_bytes([
                    headers[l3 + ipv4::field::IDENT.start],
                    headers[l3 + ipv4::field::IDENT.start + 1],
                ])
            } else {
                0
            },
            flags: u16::from_be_bytes([
                headers[l4 + tcp::field::FLAGS.start],
                headers[l4 + tcp::field::FLAGS.start + 1],
            ]) & 0x0fff,
            outer,
        })
    }

    /// Whether the super-packet can be kept whole ([`packet::gso`]): its headers must parse
    /// again without the virtio-net header, so IPv6 extension headers are not allowed.
    pub fn keepable(&self) -> bool {
        let outer_fits = self.outer.is_none_or(|o| o.len <= usize::from(u8::MAX));
        outer_fits && (self.v4 || self.l4 == self.l3 + ipv6::field::DST.end)
    }

    /// The request that keeps this super-packet whole, from its virtio-net header.
    pub fn request(&self, hdr: &VnetHdr) -> Gso {
        Gso {
            v6: !self.v4,
            ecn: hdr.gso_type & GSO_ECN != 0,
            mss: hdr.gso_size,
            outer: self.outer.map_or(0, |o| o.len as u8),
        }
    }

    /// How many segments the payload makes (at least 1).
    pub fn segments(&self) -> usize {
        self.payload_len.div_ceil(self.mss).max(1)
    }

    /// The length of segment `i`.
    pub fn segment_len(&self, i: usize) -> usize {
        let off = i * self.mss;
        self.hdr_len + self.payload_len.saturating_sub(off).min(self.mss)
    }

    /// Offset of the TCP header in each segment.
    pub fn l4_offset(&self) -> usize {
        self.l4
    }

    /// Writes segment `i` (below [`segments`](Self::segments)) of the super-packet `frame`
    /// (the same frame given to [`new`](Self::new)) into `out`, which must hold
    /// [`segment_len`](Self::segment_len) bytes; returns the length.
    pub fn write(&self, frame: &[u8], i: usize, out: &mut [u8]) -> usize {
        let off = i * self.mss;
        let len = self.payload_len.saturating_sub(off).min(self.mss);
        let last = off + len >= self.payload_len;
        let (h, l3, l4) = (self.hdr_len, self.l3, self.l4);
        out[..h].copy_from_slice(&self.headers[..h]);
        let start = self.payload_at + off;
        out[h..h + len].copy_from_slice(&frame[start..start + len]);
        let l4_len = h - l4 + len;
        if self.v4 {
            let tot = (h - l3 + len) as u16;
            out[at(l3, ipv4::field::LENGTH)].copy_from_slice(&tot.to_be_bytes());
            let id = self.ip_id.wrapping_add(i as u16);
            out[at(l3, ipv4::field::IDENT)].copy_from_slice(&id.to_be_bytes());
            out[at(l3, ipv4::field::CHECKSUM)].fill(0);
            let c = checksum::checksum(&out[l3..l4]);
            out[at(l3, ipv4::field::CHECKSUM)].copy_from_slice(&c.to_be_bytes());
        } else {
            let plen = (h - l3 - ipv6::field::DST.end + len) as u16;
            out[at(l3, ipv6::field::LENGTH)].copy_from_slice(&plen.to_be_bytes());
        }
        let seq = self.seq.wrapping_add(off as u32);
        out[at(l4, tcp::field::SEQ)].copy_from_slice(&seq.to_be_bytes());
        let mut flags = self.flags;
        if !last {
            flags &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            flags &= !TCP_CWR;
        }
        let word = (u16::from(out[l4 + tcp::field::FLAGS.start]) << 8) & 0xf000 | flags;
        out[at(l4, tcp::field::FLAGS)].copy_from_slice(&word.to_be_bytes());
        out[at(l4, tcp::field::CHECKSUM)].fill(0);
        let pseudo = pseudo_of(out, l3, self.v4, l4_len);
        let c = !checksum::fold(checksum::sum(&out[l4..h + len], pseudo));
        out[at(l4, tcp::field::CHECKSUM)].copy_from_slice(&c.to_be_bytes());
        if let Some(o) = &self.outer {
            o.fix(&mut out[..h + len], i);
        }
        h + len
    }
}

/// How far [`deliver`] got with one received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// Every packet the frame makes is in the batch.
    Done {
        /// Packets appended.
        packets: usize,
        /// Their bytes.
        bytes: usize,
    },
    /// The batch filled up or the pool ran dry: call again with `first` = `next`.
    More {
        /// Packets appended.
        packets: usize,
        /// Their bytes.
        bytes: usize,
        /// The first segment (or 0 for a plain frame) still to deliver.
        next: usize,
    },
    /// The frame was dropped: its offload request cannot be carried out, or it (or one of
    /// its segments) is longer than a pool frame.
    Dropped,
}

/// Copies one received frame into pool frames appended to `batch`: one copy per packet,
/// the VLAN tag put back, checksums completed and super-packets segmented as `hdr` asks
/// (`None`: a port without virtio-net headers). With `keep_whole`, a TCP super-packet is
/// instead copied whole into a frame of the pool's super-packet sibling and marked with its
/// request ([`packet::Gso`]; its checksums are left for whoever cuts it), falling back to
/// segmenting when no such frame is free. Segments from `first` on are delivered (a
/// super-packet can make more segments than a batch holds). Never allocates.
pub fn deliver(
    frame: &[u8],
    vlan: Option<VlanTag>,
    hdr: Option<&VnetHdr>,
    first: usize,
    keep_whole: bool,
    cache: &mut packet::PoolCache,
    batch: &mut packet::Batch,
) -> Delivered {
    let room = cache.max_data();
    let offload = match hdr {
        None => Offload::None,
        Some(h) => match plan(frame, vlan, h) {
            Ok(o) => o,
            Err(_) => return Delivered::Dropped,
        },
    };
    if let (Offload::Tcp(seg), Some(h), true, 0) = (&offload, hdr, keep_whole, first) {
        if let Some(d) = deliver_whole(frame, vlan, seg, h, cache, batch) {
            return d;
        }
    }
    match offload {
        Offload::Tcp(seg) => {
            let n = seg.segments();
            let (mut packets, mut bytes) = (0, 0);
            for i in first..n {
                let len = seg.segment_len(i);
                if len > room {
                    return Delivered::Dropped;
                }
                if batch.room() == 0 {
                    return Delivered::More {
                        packets,
                        bytes,
                        next: i,
                    };
                }
                let Some(mut pkt) = cache.alloc() else {
                    return Delivered::More {
                        packets,
                        bytes,
                        next: i,
                    };
                };
                pkt.set_len(len);
                seg.write(frame, i, pkt.data_mut());
                bytes += len;
                packets += 1;
                let _ = batch.push(pkt);
            }
            Delivered::Done { packets, bytes }
        }
        plain => {
            let len = copied_len(frame, vlan);
            if len > room {
                return Delivered::Dropped;
            }
            if batch.room() == 0 {
                return Delivered::More {
                    packets: 0,
                    bytes: 0,
                    next: 0,
                };
            }
            let Some(mut pkt) = cache.alloc() else {
                return Delivered::More {
                    packets: 0,
                    bytes: 0,
                    next: 0,
                };
            };
            pkt.set_len(len);
            copy_frame(frame, vlan, pkt.data_mut());
            if let Offload::Csum { start, offset } = plain {
                if complete_csum(pkt.data_mut(), start, offset).is_err() {
                    cache.free(pkt);
                    return Delivered::Dropped;
                }
            }
            let _ = batch.push(pkt);
            Delivered::Done {
                packets: 1,
                bytes: len,
            }
        }
    }
}

/// For a frame the kernel wrote straight into super-packet frame `pkt` (its data exactly
/// the frame, with header `hdr`): when it is a TCP super-packet that can be kept whole,
/// marks it with its request ([`packet::gso`]) and returns `true`; otherwise `false`, `pkt`
/// unchanged (it is then delivered from its bytes, [`deliver`]).
pub fn keep_in_place(pkt: &mut Packet, hdr: &VnetHdr) -> bool {
    if !matches!(
        hdr.gso_type & !(GSO_ECN | TUNNEL_BITS),
        GSO_TCPV4 | GSO_TCPV6
    ) {
        return false;
    }
    match plan(pkt.data(), None, hdr) {
        Ok(Offload::Tcp(seg)) if seg.keepable() => pkt.set_gso(Some(seg.request(hdr))),
        _ => false,
    }
}

/// Copies TCP super-packet `frame` whole into a super-packet frame (see [`deliver`]);
/// `None` when it cannot be kept whole (no frame free, too long, IPv6 extension headers),
/// and it should be segmented instead.
fn deliver_whole(
    frame: &[u8],
    vlan: Option<VlanTag>,
    seg: &TcpSegmenter,
    hdr: &VnetHdr,
    cache: &mut packet::PoolCache,
    batch: &mut packet::Batch,
) -> Option<Delivered> {
    if !seg.keepable() {
        return None;
    }
    if batch.room() == 0 {
        return Some(Delivered::More {
            packets: 0,
            bytes: 0,
            next: 0,
        });
    }
    let len = copied_len(frame, vlan);
    let mut pkt = cache.alloc_gso()?;
    if !pkt.set_len(len) {
        cache.free(pkt);
        return None;
    }
    copy_frame(frame, vlan, pkt.data_mut());
    pkt.set_gso(Some(seg.request(hdr)));
    let _ = batch.push(pkt);
    Some(Delivered::Done {
        packets: 1,
        bytes: len,
    })
}

/// The virtio-net header to send before `pkt` on a port with virtio-net headers: all zero
/// for a complete frame; for a super-packet, its segmentation request with a partial TCP
/// checksum, which this fills in (the pseudo-header sum, as the kernel expects) along with
/// the IPv4 header checksum, so that header rewrites on the way need not have kept them.
pub fn tx_header(pkt: &mut Packet) -> Result<VnetHdr, VnetError> {
    let Some(g) = pkt.gso() else {
        return Ok(VnetHdr::NONE);
    };
    if g.outer != 0 {
        return Err(VnetError::Tunnelled);
    }
    tcp_request(pkt.data_mut(), g).map(|(h, _)| h)
}

/// The segmentation request for the TCP super-packet that starts `d` (its Ethernet header
/// first), asked for by `g`, and the offset of its IP header. Fills in what the kernel
/// expects of a super-packet ([`tx_header`]): the IPv4 header checksum, and the pseudo-header
/// sum in the TCP checksum field.
pub(crate) fn tcp_request(d: &mut [u8], g: Gso) -> Result<(VnetHdr, usize), VnetError> {
    if g.mss == 0 {
        return Err(VnetError::ZeroMss);
    }
    let h = TcpHeaders::parse(d, None)?;
    if h.v4 == g.v6 {
        return Err(VnetError::BadHeaders("IP version differs from the request"));
    }
    let tcp_len = d.len() - h.l4;
    let pseudo = if h.v4 {
        let l3 = h.l3;
        d[at(l3, ipv4::field::CHECKSUM)].fill(0);
        let c = checksum::checksum(&d[l3..h.l4]);
        d[at(l3, ipv4::field::CHECKSUM)].copy_from_slice(&c.to_be_bytes());
        u16::try_from(tcp_len).map_err(|_| VnetError::BadHeaders("too long"))?;
        pseudo_of(d, l3, true, tcp_len)
    } else {
        pseudo_of(d, h.l3, false, tcp_len)
    };
    let c = checksum::fold(pseudo);
    d[at(h.l4, tcp::field::CHECKSUM)].copy_from_slice(&c.to_be_bytes());
    let base = if g.v6 { GSO_TCPV6 } else { GSO_TCPV4 };
    let hdr = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if g.ecn { base | GSO_ECN } else { base },
        hdr_len: h.end as u16,
        gso_size: g.mss,
        csum_start: h.l4 as u16,
        csum_offset: 16,
    };
    Ok((hdr, h.l3))
}

/// Cuts super-packet `pkt` (see [`packet::gso`]) into plain segments in frames of `cache`,
/// each with the packet's metadata and full checksums, appending segments `first..` to
/// `batch` in order while it has room and `cache` has frames. Returns the index of the first
/// segment not appended and how many segments the packet makes (equal when every one is
/// in); an error when the packet's headers do not parse or a segment would not fit in a
/// frame. `pkt` is left as it was; a packet that is not a super-packet makes none.
pub fn segment_into(
    pkt: &Packet,
    first: usize,
    cache: &mut PoolCache,
    batch: &mut Batch,
) -> Result<(usize, usize), VnetError> {
    let Some(g) = pkt.gso() else {
        return Ok((0, 0));
    };
    let seg = TcpSegmenter::of_super(pkt.data(), g)?;
    if seg.segment_len(0) > cache.max_data() {
        return Err(VnetError::BadHeaders(
            "a segment is longer than a pool frame",
        ));
    }
    let n = seg.segments();
    for i in first..n {
        if batch.room() == 0 {
            return Ok((i, n));
        }
        let Some(mut s) = cache.alloc() else {
            return Ok((i, n));
        };
        s.set_len(seg.segment_len(i));
        seg.write(pkt.data(), i, s.data_mut());
        s.meta = pkt.meta;
        let _ = batch.push(s);
    }
    Ok((n, n))
}

/// The TCP pseudo-header's partial sum for the IP header at `l3` (IPv4 when `v4`) and a TCP
/// segment of `l4_len` bytes.
pub(crate) fn pseudo_of(d: &[u8], l3: usize, v4: bool, l4_len: usize) -> u64 {
    if v4 {
        let (src, dst) = (
            be32(d, l3 + ipv4::field::SRC.start),
            be32(d, l3 + ipv4::field::DST.start),
        );
        checksum::pseudo_v4(src, dst, ipproto::TCP, l4_len as u16)
    } else {
        let (src, dst) = (
            be128(d, l3 + ipv6::field::SRC.start),
            be128(d, l3 + ipv6::field::DST.start),
        );
        checksum::pseudo_v6(src, dst, ipproto::TCP, l4_len as u32)
    }
}

#[cfg(test)]
#[path = "vnet_tests.rs"]
pub(crate) mod tests;

//! Receive offload in software: consecutive TCP segments of one flow, on their way to a port
//! whose kernel or guest takes super-packets ([`packet::gso`]), joined into one super-packet.
//!
//! A VM's TCP receive costs per packet, not per byte: what a NIC or a tunnel delivers in
//! MTU-sized segments costs the receiving kernel one trip through its stack each, where one
//! 64 KiB super-packet costs one. Linux's GRO joins them before the stack; a switch that
//! hands a VM (or a namespace behind a veth) the segments one by one undoes that. This is
//! the inverse of [`crate::vnet::TcpSegmenter`], and exactly so: a run of segments is joined
//! only when cutting the super-packet again gives back the same bytes — the same headers
//! but for the sequence number, IPv4 identification, lengths, checksums and PSH (the last
//! segment's), payloads of the first segment's length but the last, and valid checksums
//! (a damaged segment is passed on as it is, for its receiver to drop; it is never hidden
//! inside a super-packet whose checksums its cutter will compute). Only plain ACK segments
//! join (ECE allowed), without IP options or fragments, as Linux's `tcp_gro_receive` does.
//!
//! Per batch, one pass; a segment that starts a run costs a header parse and is passed on
//! untouched when nothing joins it; a run costs one copy of its bytes into a super-packet
//! frame and one checksum pass over each segment. No allocation beyond the pool's frames.

use packet::extract::{ethertype, ipproto};
use packet::pool::{GSO_FRAME_SIZE, HEADROOM};
use packet::wire::{at, be32, ipv4, ipv6, tcp};
use packet::{checksum, Batch, Gso, Packet, PoolCache};

use crate::vnet::{pseudo_of, TcpHeaders};

const ACK: u16 = 0x010;
const PSH: u16 = 0x008;
const ECE: u16 = 0x040;
/// The IPv4 fixed header's length: segments with options are not joined.
const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = ipv6::field::DST.end;
/// Frames shorter than this carry no TCP payload (Ethernet, IPv4, TCP headers).
const MIN_FRAME: usize = 14 + IPV4_LEN + 20 + 1;
/// The longest IP packet a super-packet can be: what its length field can say.
const MAX_IP_LEN: usize = 65_535;
/// The longest frame a super-packet frame holds.
const MAX_SUPER: usize = GSO_FRAME_SIZE - HEADROOM;

/// What [`coalesce`] did to one batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Joined {
    /// Super-packets made.
    pub supers: u32,
    /// Segments that went into them.
    pub segments: u32,
}

/// One TCP segment's facts, from [`parse`].
#[derive(Debug, Clone, Copy)]
struct Seg {
    h: TcpHeaders,
    seq: u32,
    flags: u16,
    /// IPv4 identification (0 for IPv6).
    id: u16,
    payload: usize,
}

/// The segment a run is being built on.
struct Run {
    pkt: Packet,
    seg: Seg,
    /// `pkt` is a super-packet frame holding the run so far (else the first segment alone,
    /// not yet copied).
    whole: bool,
    /// Segments in the run.
    n: u16,
    /// The sequence number the next segment must carry.
    next_seq: u32,
    /// The last segment carried PSH or was short: nothing more joins.
    closed: bool,
    psh: bool,
}

/// Joins runs of consecutive TCP segments of one flow in `batch` into super-packets, in
/// place; everything else stays as it was and in its order. Segments are joined only in
/// frames of `cache`'s super-packet pool; when it has none free, they pass as they are.
pub fn coalesce(batch: &mut Batch, cache: &mut PoolCache) -> Joined {
    let mut done = Joined::default();
    // Bit i: packet i may be a TCP segment. Nothing to do unless two are neighbours.
    let mut tcp = 0u64;
    for (i, p) in batch.as_slice().iter().enumerate() {
        tcp |= u64::from(may_be_tcp(p)) << i;
    }
    if tcp & (tcp >> 1) == 0 {
        return done;
    }
    let mut pkts = std::mem::take(batch);
    let mut run: Option<Run> = None;
    for pkt in pkts.drain() {
        let Some(seg) = parse(&pkt) else {
            close(run.take(), batch, &mut done);
            push(batch, pkt);
            continue;
        };
        if let Some(r) = run.as_mut() {
            if joins(r, &pkt, &seg) && valid(&pkt, &seg) && grow(r, cache) {
                append(r, &pkt, &seg);
                cache.free(pkt);
                continue;
            }
        }
        close(run.take(), batch, &mut done);
        if seg.flags & PSH == 0 {
            run = Some(Run {
                next_seq: seg.seq.wrapping_add(seg.payload as u32),
                pkt,
                seg,
                whole: false,
                n: 1,
                closed: false,
                psh: false,
            });
        } else {
            push(batch, pkt);
        }
    }
    close(run, batch, &mut done);
    done
}

/// A cheap first look at one packet (two loads from its first cache line): a plain frame
/// long enough to carry TCP payload, with TCP over IPv4 or IPv6 (or VLAN tags, looked at by
/// [`parse`]). A batch of small UDP frames costs this and nothing more.
#[inline(always)]
fn may_be_tcp(p: &Packet) -> bool {
    let x = p.data();
    !p.is_gso()
        && x.len() >= MIN_FRAME
        && match u16::from_be_bytes([x[12], x[13]]) {
            ethertype::IPV4 => x[14 + ipv4::field::PROTOCOL] == ipproto::TCP,
            ethertype::IPV6 => x[14 + ipv6::field::NXT_HDR] == ipproto::TCP,
            t => t == ethertype::VLAN || t == ethertype::QINQ,
        }
}

fn push(batch: &mut Batch, pkt: Packet) {
    // Cannot fail: the batch holds at most as many packets as it was given.
    let r = batch.push(pkt);
    debug_assert!(r.is_ok());
}

/// The facts of `pkt` when it is a TCP segment that could join a run: a plain frame,
/// IPv4 without options or fragmentation or IPv6 without extension headers, lengths that
/// match the frame (no padding), payload, and flags ACK with at most PSH and ECE besides.
fn parse(pkt: &Packet) -> Option<Seg> {
    let d = pkt.data();
    if pkt.is_gso() || d.len() < MIN_FRAME {
        return None;
    }
    let h = TcpHeaders::parse(d, None).ok()?;
    let l3 = h.l3;
    let (ip_len, id) = if h.v4 {
        let frag = u16::from_be_bytes([d[l3 + 6], d[l3 + 7]]);
        if h.l4 != l3 + IPV4_LEN || frag & 0x3fff != 0 {
            return None;
        }
        (
            usize::from(u16::from_be_bytes([d[l3 + 2], d[l3 + 3]])),
            u16::from_be_bytes([d[l3 + 4], d[l3 + 5]]),
        )
    } else {
        let plen = u16::from_be_bytes([d[l3 + 4], d[l3 + 5]]);
        (usize::from(plen) + IPV6_LEN, 0)
    };
    if ip_len != d.len() - l3 || d.len() <= h.end {
        return None;
    }
    let flags = u16::from_be_bytes([d[h.l4 + 12], d[h.l4 + 13]]) & 0x0fff;
    if flags & ACK == 0 || flags & !(ACK | PSH | ECE) != 0 {
        return None;
    }
    Some(Seg {
        h,
        seq: be32(d, h.l4 + tcp::field::SEQ.start),
        flags,
        id,
        payload: d.len() - h.end,
    })
}

/// Whether segment `pkt` (`s`) continues run `r`: every header byte the cutter copies from
/// the run's first segment is the same, and the ones it writes per segment are what it
/// would write; its payload is no longer than the first's; the super-packet stays within
/// one IP packet.
fn joins(r: &Run, pkt: &Packet, s: &Seg) -> bool {
    let (a, b) = (r.pkt.data(), pkt.data());
    let (h, f) = (r.seg.h, &r.seg);
    if r.closed
        || s.h != h
        || s.payload > f.payload
        || s.seq != r.next_seq
        || s.flags & !PSH != f.flags
        || a.len() + s.payload - h.l3 > MAX_IP_LEN
        || a.len() + s.payload > MAX_SUPER
    {
        return false;
    }
    let (l3, l4, end) = (h.l3, h.l4, h.end);
    let same = |x: std::ops::Range<usize>| a[x.clone()] == b[x];
    let ip_same = if h.v4 {
        // Version, header length, TOS; flags, fragment, TTL, protocol; addresses.
        let id = f.id.wrapping_add(r.n);
        s.id == id && same(l3..l3 + 2) && same(l3 + 6..l3 + 10) && same(l3 + 12..l4)
    } else {
        // Version, class, flow label; next header, hop limit, addresses.
        same(l3..l3 + 4) && same(l3 + 6..l4)
    };
    // Ethernet (and VLAN tags); ports; acknowledgement; data offset and window (the flags
    // compared above); urgent pointer and options.
    ip_same
        && same(0..l3)
        && same(l4..l4 + 4)
        && same(l4 + 8..l4 + 13)
        && same(l4 + 14..l4 + 16)
        && same(l4 + 18..end)
}

/// Whether the IPv4 header checksum (IPv4) and the TCP checksum of segment `pkt` are what
/// the cutter would write: a segment joins only when they are, so the super-packet hides no
/// damage.
fn valid(pkt: &Packet, s: &Seg) -> bool {
    let d = pkt.data();
    let TcpHeaders { l3, l4, v4, .. } = s.h;
    if v4 {
        let sum = checksum::sum(&d[l3 + 12..l4], checksum::sum(&d[l3..l3 + 10], 0));
        if !checksum::fold(sum) != u16::from_be_bytes([d[l3 + 10], d[l3 + 11]]) {
            return false;
        }
    }
    let c = tcp::field::CHECKSUM.start;
    let pseudo = pseudo_of(d, l3, v4, d.len() - l4);
    let sum = checksum::sum(&d[l4 + c + 2..], checksum::sum(&d[l4..l4 + c], pseudo));
    !checksum::fold(sum) == u16::from_be_bytes([d[l4 + c], d[l4 + c + 1]])
}

/// Makes sure run `r` lives in a super-packet frame, copying its first segment into one
/// (after checking that segment's checksums). `false` when the segment is damaged or no
/// frame is free: the run ends there.
fn grow(r: &mut Run, cache: &mut PoolCache) -> bool {
    if r.whole {
        return true;
    }
    if !valid(&r.pkt, &r.seg) {
        r.closed = true;
        return false;
    }
    let Some(mut sup) = cache.alloc_gso() else {
        r.closed = true;
        return false;
    };
    let gso = Gso {
        v6: !r.seg.h.v4,
        ecn: false,
        mss: r.seg.payload as u16,
        outer: 0,
    };
    let n = r.pkt.len();
    if !sup.set_len(n) || !sup.set_gso(Some(gso)) {
        cache.free(sup);
        r.closed = true;
        return false;
    }
    sup.data_mut().copy_from_slice(r.pkt.data());
    sup.meta = r.pkt.meta;
    let first = std::mem::replace(&mut r.pkt, sup);
    cache.free(first);
    r.whole = true;
    true
}

/// Appends segment `pkt`'s payload to run `r` (a super-packet frame with room: checked by
/// [`joins`]).
fn append(r: &mut Run, pkt: &Packet, s: &Seg) {
    let old = r.pkt.len();
    let grown = r.pkt.set_len(old + s.payload);
    debug_assert!(grown, "a super-packet frame holds one IP packet");
    r.pkt.data_mut()[old..].copy_from_slice(&pkt.data()[s.h.end..]);
    r.n += 1;
    r.next_seq = r.next_seq.wrapping_add(s.payload as u32);
    r.psh = s.flags & PSH != 0;
    r.closed = r.psh || s.payload < r.seg.payload;
}

/// Ends run `r`: a lone segment goes on as it came; a super-packet gets its lengths, its
/// IPv4 header checksum and its last segment's PSH.
fn close(r: Option<Run>, batch: &mut Batch, done: &mut Joined) {
    let Some(mut r) = r else {
        return;
    };
    if r.whole {
        let TcpHeaders { l3, l4, v4, .. } = r.seg.h;
        let len = r.pkt.len();
        let d = r.pkt.data_mut();
        if v4 {
            d[at(l3, ipv4::field::LENGTH)].copy_from_slice(&((len - l3) as u16).to_be_bytes());
            d[at(l3, ipv4::field::CHECKSUM)].fill(0);
            let c = checksum::checksum(&d[l3..l4]);
            d[at(l3, ipv4::field::CHECKSUM)].copy_from_slice(&c.to_be_bytes());
        } else {
            let plen = (len - l3 - IPV6_LEN) as u16;
            d[at(l3, ipv6::field::LENGTH)].copy_from_slice(&plen.to_be_bytes());
        }
        if r.psh {
            d[l4 + 13] |= PSH as u8;
        }
        done.supers += 1;
        done.segments += u32::from(r.n);
    }
    push(batch, r.pkt);
}

#[cfg(test)]
#[path = "coalesce_tests.rs"]
mod tests;

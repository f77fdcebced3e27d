//! The bodies of the port crate's fuzz targets, here so that a normal test runs them on
//! stable Rust.
//!
//! `vring` ([`fuzz_vring`]): a guest that writes anything into its vhost-user rings (see
//! `vhostuser/fuzz.rs`).
//!
//! `vnet` ([`fuzz_vnet`]): the body of the `vnet` fuzz target (`fuzz/fuzz_targets/vnet.rs`), here so that a normal
//! test runs it on stable Rust: what a host or a VM hands an AF_PACKET or TAP port — a
//! virtio-net header and a frame, both untrusted — through the receive path
//! ([`vnet::deliver`], whole and segmented), then super-packets kept whole cut again
//! ([`vnet::segment_into`]) and sent back with a header ([`vnet::tx_header`]), and
//! encapsulated whole in VXLAN and given the tunnel header ([`crate::vnet_tnl::tx_header`]).
//! Nothing may panic, and every frame taken from the pool must come back to it.
//!
//! `coalesce` ([`fuzz_coalesce`]): a batch of frames bound for a port that takes
//! super-packets, joined where they are a TCP stream's segments ([`crate::coalesce`]); the
//! super-packets made, cut again, must give back exactly the frames given, and no pool frame
//! may be lost.

use std::cell::RefCell;

use packet::{Batch, Pool, PoolCache};

use crate::vnet::{self, Delivered, VlanTag, VnetHdr, VNET_HDR_LEN};

thread_local! {
    static POOL: RefCell<Option<(Pool, PoolCache)>> = const { RefCell::new(None) };
}

/// Most segments of one input walked through (a 1-byte MSS over a 64 KiB payload would make
/// 65,536; the fuzzer learns nothing more from the thousandth).
const MAX_SEGMENTS: usize = 256;

/// Runs `data` (a virtio-net header, one byte of choices, then the frame) through the
/// receive and transmit paths; returns the packets delivered. Panics only if the code under
/// test does.
pub fn fuzz_vnet(data: &[u8]) -> usize {
    if data.len() < VNET_HDR_LEN + 1 {
        return 0;
    }
    let mut raw = [0u8; VNET_HDR_LEN];
    raw.copy_from_slice(&data[..VNET_HDR_LEN]);
    let hdr = VnetHdr::from_bytes(&raw);
    let choice = data[VNET_HDR_LEN];
    let frame = &data[VNET_HDR_LEN + 1..];
    let vlan = (choice & 1 != 0).then_some(VlanTag {
        tpid: if choice & 2 != 0 { 0x88a8 } else { 0x8100 },
        tci: u16::from(choice) << 4,
    });
    let keep_whole = choice & 4 != 0;
    let with_hdr = choice & 8 == 0;
    with_pool(|cache| {
        let mut batch = Batch::new();
        let mut first = 0;
        let mut delivered = 0;
        for _ in 0..MAX_SEGMENTS {
            let d = vnet::deliver(
                frame,
                vlan,
                with_hdr.then_some(&hdr),
                first,
                keep_whole,
                cache,
                &mut batch,
            );
            delivered += batch.len();
            check_and_send(&mut batch, cache);
            match d {
                Delivered::More { next, .. } if next > first => first = next,
                _ => break,
            }
        }
        batch.free_into(cache);
        delivered
    })
}

/// Runs `data` (frames, each after its length as 2 bytes little-endian) as one batch through
/// [`crate::coalesce::coalesce`], then cuts every super-packet it made again; returns the
/// super-packets made. Panics if the frames do not come back exactly (or a pool frame is
/// lost), or if the code under test does.
pub fn fuzz_coalesce(data: &[u8]) -> usize {
    let mut frames: Vec<&[u8]> = Vec::new();
    let mut rest = data;
    while rest.len() >= 2 && frames.len() < packet::BATCH_SIZE {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        frames.push(&rest[2..2 + len]);
        rest = &rest[2 + len..];
    }
    with_pool(|cache| {
        let mut batch = Batch::new();
        let mut given = Vec::new();
        for f in &frames {
            let Some(p) = cache.alloc_copy(f) else {
                break;
            };
            given.push(f.to_vec());
            let _ = batch.push(p);
        }
        let joined = crate::coalesce::coalesce(&mut batch, cache);
        let mut wire: Vec<Vec<u8>> = Vec::new();
        for pkt in batch.drain() {
            if pkt.is_gso() {
                let mut segs = Batch::new();
                let r = vnet::segment_into(&pkt, 0, cache, &mut segs);
                let (next, total) = r.expect("a super-packet coalescing made cuts");
                assert_eq!(next, total, "its segments fit one batch");
                wire.extend(segs.as_slice().iter().map(|s| s.data().to_vec()));
                segs.free_into(cache);
            } else {
                wire.push(pkt.data().to_vec());
            }
            cache.free(pkt);
        }
        assert_eq!(
            wire, given,
            "cut again, the joined frames are the frames given"
        );
        joined.supers as usize
    })
}

/// Runs `f` with this thread's pool cache; panics if a frame went missing or appeared.
fn with_pool<R>(f: impl FnOnce(&mut PoolCache) -> R) -> R {
    POOL.with(|c| {
        let mut c = c.borrow_mut();
        let (pool, cache) = c.get_or_insert_with(|| {
            let pool = Pool::with_frames(64);
            let cache = pool.cache();
            (pool, cache)
        });
        let before = pool.shared_free() + cache.cached();
        let r = f(cache);
        assert_eq!(
            pool.shared_free() + cache.cached(),
            before,
            "frames lost or made up"
        );
        r
    })
}

/// Runs `data` as a guest's rings through a vhost-user port's queues; returns the frames
/// received. Panics only if the code under test does (or loses a pool frame).
pub fn fuzz_vring(data: &[u8]) -> usize {
    crate::vhostuser::fuzz::run(data)
}

/// Checks what was delivered, cuts kept super-packets and builds their transmit headers,
/// then frees everything.
fn check_and_send(batch: &mut Batch, cache: &mut PoolCache) {
    for pkt in batch.drain() {
        if pkt.gso().is_some() {
            let mut out = Batch::new();
            let mut first = 0;
            for _ in 0..MAX_SEGMENTS {
                let r = vnet::segment_into(&pkt, first, cache, &mut out);
                let made = out.len();
                out.free_into(cache);
                match r {
                    Ok((n, _)) if n > 0 && made > 0 => first += n,
                    _ => break,
                }
            }
            let mut pkt = pkt;
            let _ = vnet::tx_header(&mut pkt);
            encapsulate_whole(&mut pkt, cache);
            cache.free(pkt);
        } else {
            cache.free(pkt);
        }
    }
}

/// The bytes of the segments of super-packet `pkt` that one batch holds (the first ones),
/// or software segmentation's error.
fn first_segments(
    pkt: &packet::Packet,
    cache: &mut PoolCache,
) -> Result<Vec<Vec<u8>>, vnet::VnetError> {
    let mut out = Batch::new();
    let r = vnet::segment_into(pkt, 0, cache, &mut out);
    let segs = out.as_slice().iter().map(|s| s.data().to_vec()).collect();
    out.free_into(cache);
    r.map(|_| segs)
}

/// Outer Ethernet, IPv4 (no options, UDP), UDP (port 4789, no checksum) and VXLAN headers
/// (lengths left zero: the tunnel header's request does not read them).
const OUTER: [u8; 50] = [
    2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00, 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0,
    192, 0, 2, 1, 192, 0, 2, 2, 0xc3, 0x50, 0x12, 0xb5, 0, 0, 0, 0, 0x08, 0, 0, 0, 0, 0, 42, 0,
];

/// Encapsulates super-packet `pkt` whole as a tunnel does for a TAP underlay
/// ([`crate::vnet_tnl`]): the outer headers pushed, the request marking their length. The
/// tunnel header must then answer or refuse, and the short header must refuse. Software
/// segmentation must cut it as it cuts the plain super-packet, each segment behind the
/// outer headers with its own lengths, identification and header checksum.
fn encapsulate_whole(pkt: &mut packet::Packet, cache: &mut PoolCache) {
    let Some(g) = pkt.gso() else {
        return;
    };
    let plain = first_segments(pkt, cache);
    let Some(front) = pkt.push_front(OUTER.len()) else {
        return;
    };
    front.copy_from_slice(&OUTER);
    pkt.set_gso(Some(packet::Gso { outer: 50, ..g }));
    let tunnelled = first_segments(pkt, cache);
    match (&plain, &tunnelled) {
        (Ok(p), Ok(t)) => {
            assert_eq!(p.len(), t.len(), "as many segments");
            for (i, (p, t)) in p.iter().zip(t).enumerate() {
                assert_eq!(t[50..], p[..], "segment {i} behind the outer headers");
                let be = |at: usize| usize::from(u16::from_be_bytes([t[at], t[at + 1]]));
                assert_eq!(be(16), t.len() - 14, "outer IPv4 total length");
                assert_eq!(be(18), i % 65536, "outer IPv4 identification");
                assert_eq!(be(38), t.len() - 34, "outer UDP length");
                assert_eq!(
                    packet::checksum::checksum(&t[14..34]),
                    0,
                    "outer header checksum"
                );
            }
        }
        (Err(_), Err(_)) => {}
        // 50 bytes more than a pool frame holds: refused, as it must be.
        (Ok(p), Err(_)) if p.first().is_some_and(|s| s.len() + 50 > cache.max_data()) => {}
        _ => panic!("plain {plain:?} and tunnelled {tunnelled:?} disagree"),
    }
    if let Ok(b) = crate::vnet_tnl::tx_header(pkt) {
        let len = pkt.len();
        assert!(
            usize::from(u16::from_ne_bytes([b[2], b[3]])) <= len,
            "hdr_len"
        );
        assert!(
            usize::from(u16::from_le_bytes([b[22], b[23]])) < len,
            "inner_nh"
        );
    }
    assert_eq!(vnet::tx_header(pkt), Err(vnet::VnetError::Tunnelled));
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::builder::{Ipv4Spec, L3Spec, L4Spec, PacketSpec};
    use proptest::prelude::*;

    /// A TCP/IPv4 super-packet of `payload` bytes with a header asking to cut it by `mss`.
    fn super_packet(payload: usize, mss: u16) -> Vec<u8> {
        let spec = PacketSpec {
            l3: L3Spec::Ipv4(Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into())),
            l4: L4Spec::Tcp {
                sp: 1,
                dp: 2,
                flags: 0x18,
            },
            frame_len: 54 + payload,
            ..PacketSpec::default()
        };
        let hdr = VnetHdr {
            flags: vnet::F_NEEDS_CSUM,
            gso_type: vnet::GSO_TCPV4,
            gso_size: mss,
            csum_start: 34,
            csum_offset: 16,
            ..VnetHdr::NONE
        };
        let mut v = hdr.to_bytes().to_vec();
        v.push(0);
        v.extend_from_slice(&spec.build());
        v
    }

    #[test]
    fn fuzz_body_survives_mutated_super_packets() {
        let seeds = [
            super_packet(3000, 1448),
            super_packet(100, 1),
            super_packet(20_000, 536),
        ];
        let iters = iters();
        // Unmutated, each seed is cut into its segments (the body reaches the segmenter).
        assert_eq!(fuzz_vnet(&seeds[0]), 3);
        assert_eq!(fuzz_vnet(&seeds[2]), 20_000usize.div_ceil(536));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..iters {
            let mut p = seeds[i % seeds.len()].clone();
            for _ in 0..(i % 4 + 1) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x >> 8) as usize % p.len();
                match x % 4 {
                    0 => p[at] ^= 1 << ((x >> 40) % 8),
                    1 => p[at] = (x >> 32) as u8,
                    2 => p.truncate(at.max(VNET_HDR_LEN + 1)),
                    _ => p[(x >> 16) as usize % (VNET_HDR_LEN + 1)] = (x >> 48) as u8,
                }
            }
            fuzz_vnet(&p);
        }
    }

    /// Mutations per test (`HAYATE_FUZZ_ITERS`, default 3,000).
    fn iters() -> usize {
        std::env::var("HAYATE_FUZZ_ITERS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3_000)
    }

    /// Changes `p` `times` times by xorshift state `x`: a bit flipped, a byte set, or the rest
    /// cut off (keeping at least `min_len` bytes).
    fn mutate(p: &mut Vec<u8>, x: &mut u64, times: usize, min_len: usize) {
        for _ in 0..times {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            if p.is_empty() {
                return;
            }
            let at = (*x >> 8) as usize % p.len();
            match *x % 3 {
                0 => p[at] ^= 1 << ((*x >> 40) % 8),
                1 => p[at] = (*x >> 32) as u8,
                _ => p.truncate(at.max(min_len)),
            }
        }
    }

    /// A stream's segments as [`fuzz_coalesce`] takes them: a 3,000-byte super-packet cut by
    /// `mss`, each segment after its length.
    fn segments_input(mss: u16) -> Vec<u8> {
        let sup = super_packet(3000, mss);
        let frame = &sup[VNET_HDR_LEN + 1..];
        let hdr = VnetHdr {
            gso_type: vnet::GSO_TCPV4,
            gso_size: mss,
            ..VnetHdr::NONE
        };
        let seg = vnet::TcpSegmenter::new(frame, None, &hdr).unwrap();
        let mut v = Vec::new();
        for i in 0..seg.segments() {
            let mut out = vec![0; seg.segment_len(i)];
            seg.write(frame, i, &mut out);
            v.extend_from_slice(&(out.len() as u16).to_le_bytes());
            v.extend_from_slice(&out);
        }
        v
    }

    #[test]
    fn coalesce_fuzz_body_survives_mutated_streams() {
        let seeds = [
            segments_input(1000),
            segments_input(700),
            segments_input(1448),
        ];
        // Unmutated, each seed's segments are joined into one super-packet.
        for s in &seeds {
            assert_eq!(fuzz_coalesce(s), 1);
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..iters() {
            let mut p = seeds[i % seeds.len()].clone();
            mutate(&mut p, &mut x, i % 4 + 1, 0);
            fuzz_coalesce(&p);
        }
    }

    /// A well-formed guest: two frames offered through descriptors 0 and 1.
    fn good_rings() -> Vec<u8> {
        let mut d = vec![0b11u8]; // 12-byte header, mergeable buffers
                                  // Buffer contents start at the data space; descriptors point at offsets into the
                                  // region, so find the data space's offset as the pretend guest lays it out.
        let data_off = (crate::vhostuser::guest::FakeGuest::new(16, 8192).data_start()
            - crate::vhostuser::guest::GPA) as u16;
        for i in 0..16u16 {
            let (off, len) = if i < 2 {
                (data_off + 128 * i, 12 + 60)
            } else {
                (0, 0)
            };
            for v in [off, len, 0, 0] {
                d.extend_from_slice(&v.to_le_bytes());
            }
        }
        d.extend_from_slice(&2u16.to_le_bytes()); // available index: two heads
        for i in 0..16u16 {
            d.extend_from_slice(&(i % 2).to_le_bytes());
        }
        let mut contents = vec![0u8; 256];
        for k in 0..2 {
            contents[128 * k + 12..128 * k + 24]
                .copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
            contents[128 * k + 24..128 * k + 26].copy_from_slice(&[0x08, 0x00]);
        }
        d.extend_from_slice(&contents);
        d
    }

    #[test]
    fn vring_fuzz_body_survives_mutated_rings() {
        let seed = good_rings();
        // Unmutated, both frames arrive (the body reaches the receive path).
        assert_eq!(fuzz_vring(&seed), 2);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..iters() {
            let mut p = seed.clone();
            mutate(&mut p, &mut x, i % 6 + 1, 1);
            fuzz_vring(&p);
        }
    }

    proptest! {
        #[test]
        fn vring_fuzz_body_survives_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            fuzz_vring(&data);
        }

        #[test]
        fn fuzz_body_survives_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzz_vnet(&data);
        }
    }
}

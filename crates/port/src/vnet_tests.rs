//! Tests of the virtio-net receive helpers: golden segments, checksum completion, and a
//! property test that segments reassemble to the super-packet and every checksum verifies.

use super::*;
use packet::builder::{Ipv4Spec, Ipv6Spec, L3Spec, L4Spec, PacketSpec};
use packet::wire::{Ipv4, Ipv6, Tcp};
use packet::{Batch, Pool};
use proptest::prelude::*;

const ACK: u16 = 0x010;
const PSH: u16 = 0x008;
const FIN: u16 = 0x001;
const CWR: u16 = 0x080;

/// The IP header of the test streams: 10.0.0.1 → 10.0.0.2 (identification 0xfffe, DF), or
/// fd00::1 → fd00::2 with `v6`.
pub(crate) fn l3_spec(v6: bool) -> L3Spec {
    if v6 {
        L3Spec::Ipv6(Ipv6Spec::new(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
        ))
    } else {
        let mut ip = Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        ip.ident = 0xfffe;
        ip.frag = 0x4000;
        L3Spec::Ipv4(ip)
    }
}

/// A TCP super-packet as a host with TSO hands it over: headers of one segment, `payload`
/// bytes, the TCP checksum field holding only the pseudo-header sum.
fn super_packet(v6: bool, flags: u16, payload: &[u8]) -> Vec<u8> {
    let l3 = l3_spec(v6);
    let hdrs = 14 + if v6 { 40 } else { 20 } + 20;
    let spec = PacketSpec {
        l3,
        l4: L4Spec::Tcp {
            sp: 5001,
            dp: 40000,
            flags,
        },
        frame_len: hdrs + payload.len(),
        ..PacketSpec::default()
    };
    let mut f = spec.build();
    f[hdrs..].copy_from_slice(payload);
    // What the kernel leaves in a partial checksum: the folded pseudo-header sum.
    let l4 = hdrs - 20;
    let pseudo = if v6 {
        checksum::pseudo_v6(
            u128::from_be_bytes(f[22..38].try_into().unwrap()),
            u128::from_be_bytes(f[38..54].try_into().unwrap()),
            6,
            (f.len() - l4) as u32,
        )
    } else {
        checksum::pseudo_v4(be32(&f, 26), be32(&f, 30), 6, (f.len() - l4) as u16)
    };
    f[l4 + 16..l4 + 18].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
    f
}

fn gso(v6: bool, mss: u16, l4: usize) -> VnetHdr {
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
        hdr_len: (l4 + 20) as u16,
        gso_size: mss,
        csum_start: l4 as u16,
        csum_offset: 16,
    }
}

fn segments(frame: &[u8], vlan: Option<VlanTag>, hdr: &VnetHdr) -> Vec<Vec<u8>> {
    let seg = TcpSegmenter::new(frame, vlan, hdr).unwrap();
    (0..seg.segments())
        .map(|i| {
            let mut out = vec![0xa5; seg.segment_len(i)];
            assert_eq!(seg.write(frame, i, &mut out), out.len());
            out
        })
        .collect()
}

/// Checks one segment's IP and TCP headers; returns (seq, flags, payload).
fn check_segment(s: &[u8], l3: usize) -> (u32, u16, Vec<u8>) {
    match u16::from_be_bytes([s[l3 - 2], s[l3 - 1]]) {
        0x0800 => {
            let ip = Ipv4::new_checked(&s[l3..]).unwrap();
            assert!(ip.verify_checksum(), "IPv4 header checksum");
            assert_eq!(ip.total_len() as usize, s.len() - l3);
            let tcp = Tcp::new_checked(ip.payload()).unwrap();
            assert!(tcp.verify_checksum(ip.pseudo_sum()), "TCP checksum");
            (tcp.seq(), tcp.flags(), tcp.payload().to_vec())
        }
        0x86dd => {
            let ip = Ipv6::new_checked(&s[l3..]).unwrap();
            assert_eq!(ip.payload_len() as usize, s.len() - l3 - 40);
            let tcp = Tcp::new_checked(ip.payload()).unwrap();
            let pseudo = ip.pseudo_sum(6, ip.payload().len() as u32);
            assert!(tcp.verify_checksum(pseudo), "TCP checksum");
            (tcp.seq(), tcp.flags(), tcp.payload().to_vec())
        }
        t => panic!("ethertype {t:#x}"),
    }
}

#[test]
fn header_bytes_round_trip() {
    let h = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4 | GSO_ECN,
        hdr_len: 66,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
    };
    assert_eq!(VnetHdr::from_bytes(&h.to_bytes()), h);
    assert_eq!(VnetHdr::NONE.to_bytes(), [0; VNET_HDR_LEN]);
}

/// Golden segments of a small IPv4 super-packet: 10 payload bytes at MSS 4 make 4+4+2.
/// (Both checksums of each were checked with an independent script.)
#[test]
fn ipv4_golden_segments() {
    let payload: Vec<u8> = (1..=10).collect();
    let f = super_packet(false, ACK | PSH | FIN | CWR, &payload);
    let segs = segments(&f, None, &gso(false, 4, 34));
    let hex: Vec<String> = segs
        .iter()
        .map(|s| s[14..].iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    assert_eq!(
        hex,
        [
            // IPv4: len 44, id fffe, DF; TCP: seq 1, flags CWR|ACK, payload 01..04.
            "4500002cfffe4000400626cb0a0000010a00000213899c4000000001000000005090ffffe77d000001020304",
            // id ffff, seq 5, ACK only (no CWR after the first), payload 05..08.
            "4500002cffff4000400626ca0a0000010a00000213899c4000000005000000005010ffffdff1000005060708",
            // id 0000 (wraps), seq 9, ACK|PSH|FIN on the last, payload 09 0a.
            "4500002a00004000400626cc0a0000010a00000213899c4000000009000000005019ffffe2ea0000090a",
        ]
    );
    for s in &segs {
        check_segment(s, 14);
    }
}

#[test]
fn ipv6_segments_with_vlan_put_back() {
    let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let f = super_packet(true, ACK | PSH, &payload);
    let tag = VlanTag {
        tpid: 0x8100,
        tci: 10,
    };
    let segs = segments(&f, Some(tag), &gso(true, 1400, 54));
    assert_eq!(
        segs.iter().map(Vec::len).collect::<Vec<_>>(),
        [78 + 1400, 78 + 1400, 78 + 200]
    );
    let mut got = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        assert_eq!(&s[12..16], &[0x81, 0x00, 0x00, 0x0a]);
        let (seq, flags, p) = check_segment(s, 18);
        assert_eq!(seq, 1 + 1400 * i as u32);
        assert_eq!(flags & PSH != 0, i == 2);
        got.extend(p);
    }
    assert_eq!(got, payload);
}

#[test]
fn checksum_completion_matches_a_full_checksum() {
    for v6 in [false, true] {
        let l3 = if v6 {
            L3Spec::Ipv6(Ipv6Spec::new(
                "fd00::1".parse().unwrap(),
                "fd00::2".parse().unwrap(),
            ))
        } else {
            L3Spec::Ipv4(Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into()))
        };
        let spec = PacketSpec {
            l3,
            l4: L4Spec::Udp { sp: 1, dp: 2 },
            frame_len: 301,
            payload_fill: 0x5a,
            ..PacketSpec::default()
        };
        let good = spec.build();
        let l4 = if v6 { 54 } else { 34 };
        let tag = VlanTag {
            tpid: 0x8100,
            tci: 20,
        };
        // Deliver the frame with a partial checksum and its VLAN tag beside it.
        let mut partial = good.clone();
        let len = good.len() - l4;
        let pseudo = if v6 {
            checksum::pseudo_v6(be128(&good, 22), be128(&good, 38), 17, len as u32)
        } else {
            checksum::pseudo_v4(be32(&good, 26), be32(&good, 30), 17, len as u16)
        };
        partial[l4 + 6..l4 + 8].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
        let full = u16::from_be_bytes([good[l4 + 6], good[l4 + 7]]);
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: l4 as u16,
            csum_offset: 6,
            ..VnetHdr::NONE
        };
        let pool = Pool::with_frames(8);
        let mut cache = pool.cache();
        let mut batch = Batch::new();
        let d = deliver(
            &partial,
            Some(tag),
            Some(&hdr),
            0,
            false,
            &mut cache,
            &mut batch,
        );
        assert_eq!(
            d,
            Delivered::Done {
                packets: 1,
                bytes: 305
            }
        );
        let out = batch[0].data();
        assert_eq!(&out[..12], &good[..12]);
        assert_eq!(&out[12..16], &[0x81, 0, 0, 20]);
        let c = u16::from_be_bytes([out[l4 + 4 + 6], out[l4 + 4 + 7]]);
        assert!(
            c == full || (c == 0xffff && full == 0),
            "{c:#x} vs {full:#x}"
        );
        assert_eq!(&out[16..], &good[12..]);
        batch.free_into(&mut cache);
    }
}

#[test]
fn bad_requests_are_refused() {
    let f = super_packet(false, ACK, &[0; 100]);
    let mut h = gso(false, 10, 34);
    h.gso_type = GSO_UDP_L4;
    assert!(matches!(
        plan(&f, None, &h),
        Err(VnetError::UnsupportedGso(GSO_UDP_L4))
    ));
    h = gso(false, 0, 34);
    assert!(matches!(plan(&f, None, &h), Err(VnetError::ZeroMss)));
    h = VnetHdr {
        flags: F_NEEDS_CSUM,
        csum_start: 150,
        csum_offset: 16,
        ..VnetHdr::NONE
    };
    assert!(matches!(plan(&f, None, &h), Err(VnetError::BadCsum)));
    let arp = PacketSpec::default().build();
    assert!(matches!(
        plan(&arp, None, &gso(false, 10, 34)),
        Err(VnetError::BadHeaders(_))
    ));
    // A GSO frame whose payload fits one MSS only needs its checksum.
    assert!(matches!(
        plan(&f, None, &gso(false, 100, 34)),
        Ok(Offload::Csum {
            start: 34,
            offset: 16
        })
    ));
}

#[test]
fn long_super_packets_span_batches() {
    let payload = vec![7u8; 60_000];
    let f = super_packet(false, ACK, &payload);
    let hdr = gso(false, 1448, 34);
    let pool = Pool::with_frames(128);
    let mut cache = pool.cache();
    let mut batch = Batch::new();
    let d = deliver(&f, None, Some(&hdr), 0, false, &mut cache, &mut batch);
    assert_eq!(
        d,
        Delivered::More {
            packets: 32,
            bytes: 32 * (54 + 1448),
            next: 32
        }
    );
    batch.free_into(&mut cache);
    let d = deliver(&f, None, Some(&hdr), 32, false, &mut cache, &mut batch);
    let Delivered::Done { packets, .. } = d else {
        panic!("{d:?}")
    };
    assert_eq!(packets, 60_000usize.div_ceil(1448) - 32);
    batch.free_into(&mut cache);
    // Longer than a pool frame without segmentation: dropped.
    assert_eq!(
        deliver(&f, None, None, 0, false, &mut cache, &mut batch),
        Delivered::Dropped
    );
}

proptest! {
    #[test]
    fn segments_reassemble_and_verify(
        v6 in any::<bool>(),
        vlan in any::<bool>(),
        len in 1usize..9000,
        mss in 1u16..1460,
        fin in any::<bool>(),
        seed in any::<u8>(),
    ) {
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        let flags = ACK | PSH | CWR | if fin { FIN } else { 0 };
        let f = super_packet(v6, flags, &payload);
        let l4 = if v6 { 54 } else { 34 };
        let tag = vlan.then_some(VlanTag { tpid: 0x8100, tci: 42 });
        let segs = segments(&f, tag, &gso(v6, mss, l4));
        prop_assert_eq!(segs.len(), len.div_ceil(usize::from(mss)));
        let l3 = if vlan { 18 } else { 14 };
        let mut got = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let (seq, fl, p) = check_segment(s, l3);
            prop_assert_eq!(seq, 1 + (i * usize::from(mss)) as u32);
            let last = i + 1 == segs.len();
            prop_assert_eq!(fl & (FIN | PSH) != 0, last);
            prop_assert_eq!(fl & CWR != 0, i == 0);
            prop_assert!(p.len() <= usize::from(mss));
            if !v6 {
                let id = u16::from_be_bytes([s[l3 + 4], s[l3 + 5]]);
                prop_assert_eq!(id, 0xfffeu16.wrapping_add(i as u16));
            }
            got.extend(p);
        }
        prop_assert_eq!(got, payload);
    }
}

/// Delivers `f` (with `vlan` beside it) kept whole; returns the one packet.
fn kept_whole(
    f: &[u8],
    vlan: Option<VlanTag>,
    hdr: &VnetHdr,
    cache: &mut packet::PoolCache,
) -> packet::Packet {
    let mut batch = Batch::new();
    let d = deliver(f, vlan, Some(hdr), 0, true, cache, &mut batch);
    let len = f.len() + if vlan.is_some() { 4 } else { 0 };
    assert_eq!(
        d,
        Delivered::Done {
            packets: 1,
            bytes: len
        }
    );
    let p = batch.pop().unwrap();
    assert_eq!(p.len(), len);
    p
}

#[test]
fn super_packets_are_kept_whole_and_cut_later_as_on_receive() {
    for v6 in [false, true] {
        for vlan in [
            None,
            Some(VlanTag {
                tpid: 0x8100,
                tci: 7,
            }),
        ] {
            let payload: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
            let f = super_packet(v6, ACK | PSH, &payload);
            let l4 = if v6 { 54 } else { 34 };
            let mut hdr = gso(v6, 1448, l4);
            hdr.gso_type |= GSO_ECN;
            let pool = Pool::with_frames(64);
            let mut cache = pool.cache();
            let mut p = kept_whole(&f, vlan, &hdr, &mut cache);
            assert_eq!(
                p.gso(),
                Some(Gso {
                    v6,
                    ecn: true,
                    mss: 1448,
                    outer: 0,
                })
            );
            p.meta.in_port = 9;
            // Cut in software: the same segments as cutting on receive.
            let mut got = Vec::new();
            let mut batch = Batch::new();
            let mut next = 0;
            loop {
                let (n, total) = segment_into(&p, next, &mut cache, &mut batch).unwrap();
                assert_eq!(total, 35);
                assert!(batch
                    .as_slice()
                    .iter()
                    .all(|s| s.meta.in_port == 9 && !s.is_gso()));
                got.extend(batch.as_slice().iter().map(|s| s.data().to_vec()));
                batch.free_into(&mut cache);
                next = n;
                if next == total {
                    break;
                }
            }
            assert_eq!(got, segments(&f, vlan, &hdr));
            cache.free(p);
        }
    }
}

#[test]
fn segmenting_stops_when_the_pool_runs_dry() {
    let f = super_packet(false, ACK, &[3u8; 20_000]);
    let pool = Pool::with_frames(8);
    let mut cache = pool.cache();
    let p = kept_whole(&f, None, &gso(false, 1000, 34), &mut cache);
    let mut batch = Batch::new();
    assert_eq!(
        segment_into(&p, 3, &mut cache, &mut batch).unwrap(),
        (11, 20)
    );
    assert_eq!(batch.len(), 8);
    // The first one made is segment 3: its sequence number is 3 MSS on.
    let seq = |b: &[u8]| u32::from_be_bytes([b[38], b[39], b[40], b[41]]);
    assert_eq!(seq(batch[0].data()), seq(&f) + 3000);
    batch.free_into(&mut cache);
    cache.free(p);
    // A plain packet makes no segment.
    let q = cache.alloc_from(&f[..100]).unwrap();
    assert_eq!(segment_into(&q, 0, &mut cache, &mut batch).unwrap(), (0, 0));
    assert!(batch.is_empty());
    cache.free(q);
}

#[test]
fn tx_header_asks_the_kernel_to_cut_and_fills_the_partial_checksum() {
    for v6 in [false, true] {
        let payload = vec![0x42u8; 10_000];
        let f = super_packet(v6, ACK, &payload);
        let l4 = if v6 { 54 } else { 34 };
        let pool = Pool::with_frames(8);
        let mut cache = pool.cache();
        let mut p = kept_whole(&f, None, &gso(v6, 1400, l4), &mut cache);
        // Spoil what a rewrite would leave stale.
        p.data_mut()[l4 + 16] ^= 0xff;
        if !v6 {
            p.data_mut()[24] ^= 0xff;
        }
        let h = tx_header(&mut p).unwrap();
        assert_eq!(
            h,
            VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
                hdr_len: (l4 + 20) as u16,
                gso_size: 1400,
                csum_start: l4 as u16,
                csum_offset: 16,
            }
        );
        // The frame is back to what the sending host handed over (pseudo-header sum in the
        // TCP checksum, valid IPv4 header checksum).
        assert_eq!(p.data(), &f[..]);
        // A plain packet gets the all-zero header and is not touched.
        let mut q = cache.alloc_from(&f[..200]).unwrap();
        assert_eq!(tx_header(&mut q).unwrap(), VnetHdr::NONE);
        assert_eq!(q.data(), &f[..200]);
        cache.free(q);
        cache.free(p);
    }
}

#[test]
fn without_a_free_super_packet_frame_the_super_packet_is_cut_on_receive() {
    let f = super_packet(false, ACK, &[1u8; 5_000]);
    let pool = Pool::with_frames(64);
    let mut cache = pool.cache();
    let gso_pool = pool.gso_pool().unwrap();
    let mut hog = gso_pool.cache();
    let mut held = Vec::new();
    while let Some(p) = hog.alloc() {
        held.push(p);
    }
    let mut batch = Batch::new();
    let d = deliver(
        &f,
        None,
        Some(&gso(false, 1000, 34)),
        0,
        true,
        &mut cache,
        &mut batch,
    );
    assert!(matches!(d, Delivered::Done { packets: 5, .. }), "{d:?}");
    assert!(batch.as_slice().iter().all(|p| !p.is_gso()));
    batch.free_into(&mut cache);
    for p in held {
        hog.free(p);
    }
}

//! Tests of receive coalescing: a super-packet cut into segments and joined again is the
//! same super-packet; segments that must not join (damaged, another flow, a gap, flags) pass
//! as they came; and a property test that cutting what [`coalesce`] made gives back exactly
//! the frames it was given, whatever they were.

use super::*;
use crate::vnet::{TcpSegmenter, VnetHdr, GSO_TCPV4, GSO_TCPV6};
use packet::builder::{L4Spec, PacketSpec};
use packet::Pool;
use proptest::prelude::*;

/// A TCP super-packet from 10.0.0.1 (or fd00::1) port `sport`, sequence 1000, `payload`
/// bytes of a counting pattern, flags ACK (and PSH with `psh`), a timestamp option.
fn super_packet(v6: bool, sport: u16, psh: bool, payload: usize) -> Vec<u8> {
    tagged_super_packet(v6, sport, psh, payload, false)
}

/// [`super_packet`], in VLAN 5 with `vlan`.
fn tagged_super_packet(v6: bool, sport: u16, psh: bool, payload: usize, vlan: bool) -> Vec<u8> {
    let l3 = crate::vnet::tests::l3_spec(v6);
    let flags = if psh { ACK | PSH } else { ACK };
    let l3_off = if vlan { 18 } else { 14 };
    let l4 = l3_off + if v6 { 40 } else { 20 };
    let spec = PacketSpec {
        vlans: if vlan { vec![(0x8100, 5)] } else { Vec::new() },
        l3,
        l4: L4Spec::Tcp {
            sp: sport,
            dp: 5201,
            flags,
        },
        frame_len: l4 + 20 + payload,
        ..PacketSpec::default()
    };
    let mut f = spec.build();
    // Data offset 8 words: a 12-byte timestamp option (NOP, NOP, TS), inserted.
    let opt = [1u8, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
    f.splice(l4 + 20..l4 + 20, opt);
    f[l4 + 12] = 8 << 4;
    f[l4 + 4..l4 + 8].copy_from_slice(&1000u32.to_be_bytes());
    f[l4 + 8..l4 + 12].copy_from_slice(&77u32.to_be_bytes());
    for (i, b) in f[l4 + 32..].iter_mut().enumerate() {
        *b = i as u8;
    }
    if v6 {
        let plen = (f.len() - l4) as u16;
        f[l3_off + 4..l3_off + 6].copy_from_slice(&plen.to_be_bytes());
    } else {
        let tot = (f.len() - l3_off) as u16;
        f[l3_off + 2..l3_off + 4].copy_from_slice(&tot.to_be_bytes());
        f[l3_off + 10..l3_off + 12].fill(0);
        let c = checksum::checksum(&f[l3_off..l3_off + 20]);
        f[l3_off + 10..l3_off + 12].copy_from_slice(&c.to_be_bytes());
    }
    f
}

/// Cuts `frame` as the kernel or [`crate::vnet::segment_into`] would, `mss` payload bytes a
/// segment, every checksum written.
fn cut(frame: &[u8], v6: bool, mss: u16) -> Vec<Vec<u8>> {
    let hdr = VnetHdr {
        gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
        gso_size: mss,
        ..VnetHdr::NONE
    };
    let seg = TcpSegmenter::new(frame, None, &hdr).unwrap();
    (0..seg.segments())
        .map(|i| {
            let mut out = vec![0; seg.segment_len(i)];
            seg.write(frame, i, &mut out);
            out
        })
        .collect()
}

/// What a batch holds: each packet's bytes and request.
type Out = Vec<(Vec<u8>, Option<Gso>)>;

/// Coalesces `frames` as one batch; returns the packets' bytes and requests, and what it did.
fn run(frames: &[Vec<u8>]) -> (Out, Joined) {
    let pool = Pool::with_frames(256);
    let gso = pool.gso_pool().unwrap();
    let supers = gso.shared_free();
    let mut cache = pool.cache();
    let mut b = Batch::new();
    for f in frames {
        b.push(cache.alloc_copy(f).unwrap()).unwrap();
    }
    let j = coalesce(&mut b, &mut cache);
    let out = b
        .as_slice()
        .iter()
        .map(|p| (p.data().to_vec(), p.gso()))
        .collect();
    b.free_into(&mut cache);
    drop(cache);
    assert_eq!(pool.shared_free(), 256, "every frame back");
    assert_eq!(gso.shared_free(), supers, "every super-packet frame back");
    (out, j)
}

/// What the packets `out` make on a wire: super-packets cut again.
fn wire(out: &[(Vec<u8>, Option<Gso>)]) -> Vec<Vec<u8>> {
    out.iter()
        .flat_map(|(d, g)| match g {
            Some(g) => cut(d, g.v6, g.mss),
            None => vec![d.clone()],
        })
        .collect()
}

#[test]
fn a_cut_super_packet_is_joined_again() {
    for v6 in [false, true] {
        let sup = super_packet(v6, 40000, true, 4 * 1000 + 500);
        let segs = cut(&sup, v6, 1000);
        assert_eq!(segs.len(), 5);
        let (out, j) = run(&segs);
        assert_eq!(
            j,
            Joined {
                supers: 1,
                segments: 5
            }
        );
        assert_eq!(out.len(), 1);
        let (d, g) = &out[0];
        assert_eq!(
            *g,
            Some(Gso {
                v6,
                ecn: false,
                mss: 1000,
                outer: 0
            })
        );
        // The same bytes but the TCP checksum (a super-packet's means nothing); IPv4's
        // length and header checksum are the whole packet's.
        let l4 = 14 + if v6 { 40 } else { 20 };
        assert_eq!(d.len(), sup.len());
        assert_eq!(d[..l4 + 16], sup[..l4 + 16], "headers, PSH of the last");
        assert_eq!(d[l4 + 18..], sup[l4 + 18..]);
        if !v6 {
            assert_eq!(u16::from_be_bytes([d[16], d[17]]) as usize, d.len() - 14);
            assert_eq!(checksum::checksum(&d[14..34]), 0, "IPv4 header checksum");
        }
        assert_eq!(wire(&out), segs);
    }
}

#[test]
fn damage_a_gap_another_flow_or_flags_end_a_run() {
    let segs = cut(&super_packet(false, 40000, false, 6 * 800), false, 800);
    // Segment 2's payload damaged: 0-1 join, 2 passes as it is, 3-5 join.
    let mut bad = segs.clone();
    *bad[2].last_mut().unwrap() ^= 0x40;
    let (out, j) = run(&bad);
    assert_eq!((j.supers, j.segments), (2, 5));
    assert_eq!(out.len(), 3);
    assert_eq!(out[1], (bad[2].clone(), None));
    assert_eq!(wire(&out), bad);
    // A gap (segment 3 lost): 0-2 and 4-5.
    let mut gap = segs.clone();
    gap.remove(3);
    let (out, j) = run(&gap);
    assert_eq!((j.supers, j.segments), (2, 5));
    assert_eq!(wire(&out), gap);
    // Another flow between each: nothing joins, nothing moves.
    let other = cut(&super_packet(false, 40001, false, 6 * 800), false, 800);
    let mixed: Vec<Vec<u8>> = segs
        .iter()
        .zip(&other)
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    let (out, j) = run(&mixed);
    assert_eq!(j, Joined::default());
    assert_eq!(wire(&out), mixed);
    // A different acknowledgement from segment 3 on: 0-2 and 3-5.
    let mut acked = segs.clone();
    for s in &mut acked[3..] {
        s[42..46].copy_from_slice(&78u32.to_be_bytes());
        s[50..52].fill(0);
        let pseudo = pseudo_of(s, 14, true, s.len() - 34);
        let c = !checksum::fold(checksum::sum(&s[34..], pseudo));
        s[50..52].copy_from_slice(&c.to_be_bytes());
    }
    let (out, j) = run(&acked);
    assert_eq!((j.supers, j.segments), (2, 6));
    assert_eq!(wire(&out), acked);
}

#[test]
fn without_super_packet_frames_segments_pass_as_they_are() {
    let segs = cut(&super_packet(false, 40000, false, 3 * 500), false, 500);
    let pool = Pool::with_frames(64);
    let mut cache = pool.cache();
    let gso = pool.gso_pool().unwrap();
    let supers = gso.shared_free();
    let mut held = Vec::new();
    while let Some(p) = cache.alloc_gso() {
        held.push(p);
    }
    let mut b = Batch::new();
    for f in &segs {
        b.push(cache.alloc_copy(f).unwrap()).unwrap();
    }
    assert_eq!(coalesce(&mut b, &mut cache), Joined::default());
    let got: Vec<Vec<u8>> = b.as_slice().iter().map(|p| p.data().to_vec()).collect();
    assert_eq!(got, segs);
    b.free_into(&mut cache);
    for p in held {
        cache.free(p);
    }
    drop(cache);
    assert_eq!((pool.shared_free(), gso.shared_free()), (64, supers));
}

/// Writes `f`'s IPv4 header and TCP checksums as a sender would, where its headers parse.
fn refix(f: &mut [u8]) {
    let Ok(h) = TcpHeaders::parse(f, None) else {
        return;
    };
    if h.v4 {
        f[h.l3 + 10..h.l3 + 12].fill(0);
        let c = checksum::checksum(&f[h.l3..h.l4]);
        f[h.l3 + 10..h.l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    f[h.l4 + 16..h.l4 + 18].fill(0);
    let pseudo = pseudo_of(f, h.l3, h.v4, f.len() - h.l4);
    let c = !checksum::fold(checksum::sum(&f[h.l4..], pseudo));
    f[h.l4 + 16..h.l4 + 18].copy_from_slice(&c.to_be_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Two flows' segments, interleaved in runs, some bytes changed anywhere: cutting what
    /// coalescing made gives back exactly the frames it was given.
    #[test]
    fn cutting_the_joined_gives_back_the_frames(
        v6 in any::<bool>(),
        mss in 1u16..1500,
        payload in 1usize..9000,
        psh in any::<bool>(),
        vlan in any::<bool>(),
        runs in proptest::collection::vec(1usize..6, 1..8),
        damage in proptest::collection::vec(
            (any::<usize>(), 0usize..120, any::<u8>(), any::<bool>()),
            0..4,
        ),
    ) {
        let a = cut(&tagged_super_packet(v6, 40000, psh, payload, vlan), v6, mss);
        let b = cut(&super_packet(!v6, 40001, !psh, payload / 2 + 1), !v6, mss);
        let (mut ia, mut ib) = (a.into_iter(), b.into_iter());
        let mut frames = Vec::new();
        for (i, n) in runs.iter().enumerate() {
            let src = if i % 2 == 0 { &mut ia } else { &mut ib };
            frames.extend(src.take(*n));
        }
        frames.truncate(packet::BATCH_SIZE);
        let n = frames.len().max(1);
        // Mostly in the headers; with `fix`, the checksums written again after.
        for (f, at, x, fix) in damage {
            if let Some(fr) = frames.get_mut(f % n) {
                let i = at % fr.len();
                fr[i] ^= x;
                if fix {
                    refix(fr);
                }
            }
        }
        let (out, j) = run(&frames);
        prop_assert_eq!(wire(&out), frames.clone());
        prop_assert_eq!(out.len() + j.segments as usize - j.supers as usize, frames.len());
    }

    /// One flow's segments, a batch of them, undamaged: one super-packet (two or more).
    #[test]
    fn a_batch_of_one_flow_is_one_super_packet(
        v6 in any::<bool>(),
        mss in 1u16..1500,
        payload in 1usize..40000,
        psh in any::<bool>(),
        vlan in any::<bool>(),
    ) {
        let mut frames = cut(&tagged_super_packet(v6, 40000, psh, payload, vlan), v6, mss);
        frames.truncate(packet::BATCH_SIZE);
        let (out, j) = run(&frames);
        let n = frames.len() as u32;
        prop_assert_eq!(out.len(), 1);
        prop_assert_eq!(j, if n > 1 { Joined { supers: 1, segments: n } } else { Joined::default() });
        prop_assert_eq!(wire(&out), frames);
    }
}

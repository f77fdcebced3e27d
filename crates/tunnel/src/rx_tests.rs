use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use packet::pool::{Pool, PoolCache};
use packet::{extract_packet, Field, FlowKey, Gso};

use super::*;
use crate::encap::EncapTemplate;
use crate::endpoint::{Encap, OuterAddrs};
use crate::spec::TunnelSpec;

const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);

/// An inner Ethernet/IPv4/UDP frame of 64 bytes.
fn inner() -> Vec<u8> {
    packet::builder::PacketSpec::udp4(
        [2, 0, 0, 0, 0, 0xa],
        [2, 0, 0, 0, 0, 0xb],
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        1234,
        80,
        64,
    )
    .build()
}

/// `inner()` encapsulated from `src` to `dst` with `vni`, in a packet of `pool`.
fn tunneled(pool: &mut PoolCache, kind: TunnelKind, vni: u32, src: IpAddr, dst: IpAddr) -> Packet {
    let e = Encap::new(kind, vni, src.is_ipv6());
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src,
        dst,
    };
    let t = EncapTemplate::new(&e, &a).unwrap();
    let mut p = pool.alloc_from(&inner()).unwrap();
    t.push(&mut p, 7, 1).unwrap();
    p
}

fn port(ofport: u32, spec: &str) -> TunnelPort {
    let (kind, opts) = spec.split_once(':').unwrap();
    let kind = if kind == "vxlan" {
        TunnelKind::Vxlan
    } else {
        TunnelKind::Geneve
    };
    TunnelPort::from_spec(ofport, &TunnelSpec::parse(kind, opts).unwrap())
}

fn v4(a: Ipv4Addr) -> IpAddr {
    IpAddr::V4(a)
}

#[test]
fn a_tunnel_packet_comes_out_as_its_inner_frame_with_the_outer_metadata_in_its_key() {
    let mut pool = Pool::with_frames(8).cache();
    let t = Terminator::new(
        vec![
            port(5, "vxlan:remote=192.168.0.1,vni=42"),
            port(6, "vxlan:remote=flow,vni=flow"),
        ],
        &[v4(LOCAL)],
    );
    let mut p = tunneled(&mut pool, TunnelKind::Vxlan, 42, v4(REMOTE), v4(LOCAL));
    let RxOutcome::Tunnel(meta) = t.receive(&mut p) else {
        panic!("not terminated")
    };
    assert_eq!(p.data(), &inner()[..], "the outer headers are off");
    assert_eq!(meta.ofport, 5, "the port with a fixed remote and VNI wins");
    let mut key = FlowKey::ZERO;
    p.meta.in_port = meta.ofport;
    extract_packet(&mut p, &mut key);
    let mut plain = FlowKey::ZERO;
    let mut q = pool.alloc_from(&inner()).unwrap();
    extract_packet(&mut q, &mut plain);
    // The write is the fields' writes and touches nothing else.
    let mut expect = key;
    expect.set(Field::TunnelId, 42);
    expect.set(Field::TunSrc, u32::from(REMOTE).into());
    expect.set(Field::TunDst, u32::from(LOCAL).into());
    expect.or(Field::Parsed, parsed::TUN_IPV4.into());
    meta.write(&mut key);
    assert_eq!(key, expect);
    assert_eq!(key.get(Field::InPort), 5);
    assert_eq!(key.get(Field::TunnelId), 42);
    assert_eq!(key.get(Field::TunSrc), u32::from(REMOTE) as u128);
    assert_eq!(key.get(Field::TunDst), u32::from(LOCAL) as u128);
    assert_eq!(key.get(Field::TunIpv6Src) >> 32, 0);
    let parsed = key.get(Field::Parsed) as u16;
    assert_eq!(
        parsed & (parsed::TUN_IPV4 | parsed::TUN_IPV6),
        parsed::TUN_IPV4
    );
    // Everything else is the inner frame's.
    for f in [Field::EthSrc, Field::EthDst, Field::Ipv4Src, Field::TpDst] {
        assert_eq!(key.get(f), plain.get(f), "{f:?}");
    }
    pool.free(p);
    pool.free(q);
}

#[test]
fn another_vni_goes_to_the_flow_port_and_an_unknown_one_is_dropped() {
    let mut pool = Pool::with_frames(8).cache();
    let both = Terminator::new(
        vec![
            port(5, "vxlan:remote=192.168.0.1,vni=42"),
            port(6, "vxlan:remote=flow,vni=flow"),
        ],
        &[v4(LOCAL)],
    );
    let mut p = tunneled(&mut pool, TunnelKind::Vxlan, 43, v4(REMOTE), v4(LOCAL));
    assert!(matches!(both.receive(&mut p), RxOutcome::Tunnel(m) if m.ofport == 6 && m.vni == 43));
    pool.free(p);

    let fixed = Terminator::new(
        vec![port(5, "vxlan:remote=192.168.0.1,vni=42")],
        &[v4(LOCAL)],
    );
    let mut p = tunneled(&mut pool, TunnelKind::Vxlan, 43, v4(REMOTE), v4(LOCAL));
    let before = p.data().to_vec();
    assert_eq!(fixed.receive(&mut p), RxOutcome::Drop(RxDrop::NoPort));
    assert_eq!(p.data(), &before[..], "a dropped frame is left whole");
    // From another remote.
    let mut q = tunneled(
        &mut pool,
        TunnelKind::Vxlan,
        42,
        v4(Ipv4Addr::new(192, 168, 0, 9)),
        v4(LOCAL),
    );
    assert_eq!(fixed.receive(&mut q), RxOutcome::Drop(RxDrop::NoPort));
    let names: Vec<_> = RxDrop::names().collect();
    assert_eq!(names.len(), RxDrop::COUNT);
    assert_eq!(names[RxDrop::NoPort.index()], "tunnel_no_port");
    let csum = RxDrop::Header(DropReason::OuterChecksum);
    assert_eq!(names[csum.index()], "tunnel_outer_checksum");
    pool.free(p);
    pool.free(q);
}

#[test]
fn other_traffic_and_other_hosts_tunnels_pass_untouched() {
    let mut pool = Pool::with_frames(8).cache();
    let t = Terminator::new(vec![port(5, "vxlan:remote=flow,vni=flow")], &[v4(LOCAL)]);
    let mut plain = pool.alloc_from(&inner()).unwrap();
    assert_eq!(t.receive(&mut plain), RxOutcome::NotTunnel);
    let elsewhere = v4(Ipv4Addr::new(192, 168, 0, 3));
    let mut p = tunneled(&mut pool, TunnelKind::Vxlan, 42, v4(REMOTE), elsewhere);
    let len = p.len();
    assert_eq!(t.receive(&mut p), RxOutcome::NotTunnel);
    assert_eq!(p.len(), len);
    // Geneve to a host that only has VXLAN ports is not a tunnel packet here either.
    let mut g = tunneled(&mut pool, TunnelKind::Geneve, 42, v4(REMOTE), v4(LOCAL));
    assert_eq!(t.receive(&mut g), RxOutcome::NotTunnel);
    assert!(Terminator::new(vec![], &[v4(LOCAL)]).is_empty());
    for x in [plain, p, g] {
        pool.free(x);
    }
}

#[test]
fn a_malformed_outer_header_is_a_counted_drop() {
    let mut pool = Pool::with_frames(8).cache();
    let t = Terminator::new(vec![port(5, "vxlan:remote=flow,vni=flow")], &[v4(LOCAL)]);
    let mut p = tunneled(&mut pool, TunnelKind::Vxlan, 42, v4(REMOTE), v4(LOCAL));
    p.data_mut()[24] ^= 0xff; // the outer IPv4 header checksum
    assert_eq!(
        t.receive(&mut p),
        RxOutcome::Drop(RxDrop::Header(DropReason::OuterChecksum))
    );
    pool.free(p);
}

#[test]
fn geneve_over_ipv6_sets_the_ipv6_endpoints() {
    let mut pool = Pool::with_frames(8).cache();
    let (remote, local): (IpAddr, IpAddr) = (
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).into(),
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).into(),
    );
    let t = Terminator::new(vec![port(7, "geneve:remote=fd00::1,vni=flow")], &[local]);
    let mut p = tunneled(&mut pool, TunnelKind::Geneve, 9, remote, local);
    let RxOutcome::Tunnel(meta) = t.receive(&mut p) else {
        panic!("not terminated")
    };
    assert_eq!(p.data(), &inner()[..]);
    let mut key = FlowKey::ZERO;
    meta.write(&mut key);
    assert_eq!(key.get(Field::TunIpv6Src), 0xfd00u128 << 112 | 1);
    assert_eq!(key.get(Field::TunIpv6Dst), 0xfd00u128 << 112 | 2);
    assert_eq!((key.get(Field::TunnelId), meta.ofport), (9, 7));
    assert_eq!(key.get(Field::Parsed) as u16, parsed::TUN_IPV6);
    pool.free(p);
}

/// `p` marked as a super-packet encapsulated whole behind `outer` bytes (what a TAP underlay
/// whose kernel hands over UDP-tunnelled super-packets delivers).
fn whole(mut p: Packet, outer: u8) -> Packet {
    let g = Gso {
        v6: false,
        ecn: false,
        mss: 1000,
        outer,
    };
    assert!(p.set_gso(Some(g)));
    p
}

#[test]
fn a_super_packet_encapsulated_whole_is_terminated_into_the_plain_super_packet() {
    let mut pool = Pool::with_frames(16).cache();
    let t = Terminator::new(
        vec![
            port(5, "vxlan:remote=192.168.0.1,vni=42"),
            port(7, "geneve:remote=flow,vni=flow"),
        ],
        &[
            v4(LOCAL),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        ],
    );
    let mut plain = tunneled(&mut pool, TunnelKind::Vxlan, 42, v4(REMOTE), v4(LOCAL));
    let RxOutcome::Tunnel(want) = t.receive(&mut plain) else {
        panic!("not terminated")
    };
    let mss = |p: &Packet| p.gso().map(|g| (g.mss, g.outer));
    // As sent, and with the outer lengths and IPv4 header checksum meaning nothing (the
    // kernel writes 0 past 64 KiB; cutting rewrites them): the same port and metadata, the
    // inner frame left, a plain super-packet.
    for garble in [false, true] {
        let mut p = tunneled(&mut pool, TunnelKind::Vxlan, 42, v4(REMOTE), v4(LOCAL));
        if garble {
            let d = p.data_mut();
            d[16..18].fill(0); // IPv4 total length
            d[24..26].copy_from_slice(&[0xbe, 0xef]); // its header checksum
            d[38..40].fill(0); // UDP length
        }
        let mut p = whole(p, 50);
        assert_eq!(
            t.receive(&mut p),
            RxOutcome::Tunnel(want),
            "garbled {garble}"
        );
        assert_eq!(p.data(), &inner()[..]);
        assert_eq!(mss(&p), Some((1000, 0)), "now a plain super-packet");
        pool.free(p);
    }
    // Geneve over IPv6 (no UDP checksum: 70 bytes of outer headers).
    let (remote6, local6): (IpAddr, IpAddr) = (
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).into(),
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).into(),
    );
    let mut p = tunneled(&mut pool, TunnelKind::Geneve, 9, remote6, local6);
    p.data_mut()[60..62].fill(0);
    let mut p = whole(p, 70);
    let RxOutcome::Tunnel(m) = t.receive(&mut p) else {
        panic!("Geneve over IPv6 not terminated")
    };
    assert_eq!((m.ofport, m.vni, m.ipv6), (7, 9, true));
    assert_eq!(p.data(), &inner()[..]);
    pool.free(p);
    // With an outer UDP checksum (the kernel leaves the pseudo-header's sum in a
    // super-packet's; here any value): terminated the same.
    let p = tunneled(&mut pool, TunnelKind::Geneve, 9, remote6, local6);
    assert_ne!(p.data()[60..62], [0, 0], "IPv6 tunnels have UDP checksums");
    let mut p = whole(p, 70);
    assert!(matches!(t.receive(&mut p), RxOutcome::Tunnel(m) if m.ofport == 7));
    assert_eq!(p.data(), &inner()[..]);
    pool.free(p);
    // Outer headers that end elsewhere than the request says, an unknown VNI: dropped,
    // counted by reason. The packet is left as it was.
    let p = tunneled(&mut pool, TunnelKind::Vxlan, 42, v4(REMOTE), v4(LOCAL));
    let mut p = whole(p, 58);
    let r = RxOutcome::Drop(RxDrop::Header(DropReason::TunnelHeader));
    assert_eq!(t.receive(&mut p), r);
    assert_eq!(mss(&p), Some((1000, 58)));
    pool.free(p);
    let p = tunneled(&mut pool, TunnelKind::Vxlan, 43, v4(REMOTE), v4(LOCAL));
    let mut p = whole(p, 50);
    assert_eq!(t.receive(&mut p), RxOutcome::Drop(RxDrop::NoPort));
    pool.free(p);
    // Another host's tunnel packet, and a plain super-packet: not terminated, untouched.
    for (dst, outer) in [(Ipv4Addr::new(192, 168, 0, 9), 50), (LOCAL, 0)] {
        let p = tunneled(&mut pool, TunnelKind::Vxlan, 42, v4(REMOTE), v4(dst));
        let before = p.data().to_vec();
        let mut p = whole(p, outer);
        assert_eq!(t.receive(&mut p), RxOutcome::NotTunnel);
        assert_eq!(p.data(), &before[..]);
        assert_eq!(mss(&p), Some((1000, outer)));
        pool.free(p);
    }
}

/// Terminators the fast path is compared under: fixed and per-flow ports, a fixed local, a
/// Geneve port beside, an IPv6 remote that the fast path leaves out, another UDP port, and
/// a port per remote host (300, the frames' remote among them, with equals on either side).
fn fast_path_terminators() -> Vec<Terminator> {
    let v6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
    let mut per_remote: Vec<TunnelPort> = (0..300u32)
        .map(|i| {
            let [_, _, a, b] = (0x0a01_0000 + i * 7).to_be_bytes();
            port(100 + i, &format!("vxlan:remote=10.1.{a}.{b},vni=flow"))
        })
        .collect();
    per_remote.insert(150, port(21, "vxlan:remote=192.168.0.1,vni=flow"));
    per_remote.insert(151, port(20, "vxlan:remote=flow,vni=43"));
    per_remote.insert(
        152,
        port(22, "vxlan:remote=192.168.0.1,vni=flow,dst_port=8472"),
    );
    vec![
        Terminator::new(
            vec![
                port(5, "vxlan:remote=192.168.0.1,vni=42"),
                port(6, "vxlan:remote=flow,vni=flow"),
            ],
            &[v4(LOCAL)],
        ),
        Terminator::new(
            vec![
                port(7, "vxlan:remote=flow,vni=42,local=192.168.0.2"),
                port(8, "vxlan:remote=192.168.0.1,vni=flow"),
                port(9, "vxlan:remote=fd00::1,vni=42"),
                port(10, "geneve:remote=flow,vni=flow"),
            ],
            &[v4(LOCAL), v6],
        ),
        Terminator::new(
            vec![
                port(11, "vxlan:remote=flow,vni=flow,dst_port=8472"),
                port(12, "vxlan:remote=flow,vni=flow"),
            ],
            &[v4(Ipv4Addr::new(10, 9, 9, 9)), v4(LOCAL)],
        ),
        Terminator::new(per_remote, &[v4(LOCAL)]),
    ]
}

/// IPv4 VXLAN frames the fast path should take (and Geneve, which it should not).
fn fast_path_seeds() -> Vec<Vec<u8>> {
    let mut pool = Pool::with_frames(8).cache();
    let mut out = Vec::new();
    for (kind, vni) in [
        (TunnelKind::Vxlan, 42),
        (TunnelKind::Vxlan, 43),
        (TunnelKind::Geneve, 42),
    ] {
        let p = tunneled(&mut pool, kind, vni, v4(REMOTE), v4(LOCAL));
        out.push(p.data().to_vec());
        pool.free(p);
    }
    out
}

/// Runs `frame` through `t`'s full receive and its general path alone: same outcome, same
/// packet after.
fn fast_and_general_agree(t: &Terminator, pool: &mut PoolCache, frame: &[u8]) -> RxOutcome {
    let mut a = pool.alloc_from(frame).unwrap();
    let mut b = pool.alloc_from(frame).unwrap();
    let ra = t.receive(&mut a);
    let rb = t.receive_general(&mut b);
    assert_eq!(ra, rb, "fast and general paths disagree on {frame:02x?}");
    assert_eq!(a.data(), b.data());
    pool.free(a);
    pool.free(b);
    ra
}

#[test]
fn the_fast_path_takes_plain_ipv4_vxlan_and_agrees_with_the_general_path() {
    let mut pool = Pool::with_frames(8).cache();
    let seeds = fast_path_seeds();
    let ts = fast_path_terminators();
    // It answers for the common layout (it is not dead code) and leaves Geneve alone.
    assert!(ts[0].fast.terminate(&seeds[0]).is_some());
    assert!(ts[0].fast.terminate(&seeds[2]).is_none());
    for t in &ts {
        for s in &seeds {
            fast_and_general_agree(t, &mut pool, s);
        }
    }
    // VNI 43 to port 6 (per-flow) under the first; the fixed local and the fixed remote
    // ports under the second, the later of equals winning as in the general path.
    assert!(matches!(
        fast_and_general_agree(&ts[0], &mut pool, &seeds[1]),
        RxOutcome::Tunnel(m) if m.ofport == 6 && m.vni == 43
    ));
    assert!(matches!(
        fast_and_general_agree(&ts[1], &mut pool, &seeds[0]),
        RxOutcome::Tunnel(m) if m.ofport == 8
    ));
    // Among 300 ports with a remote each: the frames' remote's port; for VNI 43 the later
    // of it and the per-flow-remote port with that VNI (equals).
    let per_remote = &ts[3];
    assert!(per_remote.fast.terminate(&seeds[0]).is_some());
    assert!(matches!(
        fast_and_general_agree(per_remote, &mut pool, &seeds[0]),
        RxOutcome::Tunnel(m) if m.ofport == 21
    ));
    assert!(matches!(
        fast_and_general_agree(per_remote, &mut pool, &seeds[1]),
        RxOutcome::Tunnel(m) if m.ofport == 20
    ));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
    /// Seeds with bytes flipped, set or cut (mostly in the outer headers), with and without
    /// the IPv4 header checksum made right again: whatever the fast path says, the general
    /// path says too.
    #[test]
    fn fast_and_general_paths_agree_on_mutated_frames(
        which in 0usize..3,
        edits in proptest::collection::vec((0usize..80, proptest::prelude::any::<u8>(), 0u8..3), 0..4),
        fix_checksum in proptest::prelude::any::<bool>(),
        tail in 0usize..40,
    ) {
        let mut d = fast_path_seeds()[which].clone();
        for (at, v, op) in edits {
            if d.is_empty() {
                break;
            }
            let at = at % d.len();
            match op {
                0 => d[at] ^= v,
                1 => d[at] = v,
                _ => d.truncate(d.len() - at.min(tail)),
            }
        }
        if fix_checksum && d.len() >= 34 {
            d[24..26].fill(0);
            let c = packet::checksum::checksum(&d[14..34]);
            d[24..26].copy_from_slice(&c.to_be_bytes());
        }
        let mut pool = Pool::with_frames(8).cache();
        for t in &fast_path_terminators() {
            fast_and_general_agree(t, &mut pool, &d);
        }
    }
}

/// Runs `frames` in order through `t`'s receive with one train ([`Terminator::receive_in`])
/// and through its receive alone: the same outcome and the same packet for every frame.
/// Returns how many frames the train answered.
fn train_agrees(t: &Terminator, pool: &mut PoolCache, frames: &[Vec<u8>]) -> usize {
    let mut train = Train::new();
    let mut hits = 0;
    for f in frames {
        let mut a = pool.alloc_from(f).unwrap();
        let mut b = pool.alloc_from(f).unwrap();
        let hit = train.clone().follows(f).is_some();
        hits += hit as usize;
        let kind = t.receive_in(&mut a, &mut train);
        assert_eq!(hit, kind == RxKind::Tunnel(Via::Train), "{kind:?}");
        let ra = match kind {
            RxKind::NotTunnel => RxOutcome::NotTunnel,
            RxKind::Tunnel(v) => RxOutcome::Tunnel(*train.meta_of(v)),
            RxKind::Drop(d) => RxOutcome::Drop(d),
        };
        let rb = t.receive(&mut b);
        assert_eq!(ra, rb, "train and plain receive disagree on {f:02x?}");
        assert_eq!(a.data(), b.data());
        pool.free(a);
        pool.free(b);
    }
    hits
}

/// `d` (an IPv4 frame) with `k` added to its IPv4 identification and the header checksum
/// made right again.
fn next_id(d: &[u8], k: u16) -> Vec<u8> {
    let mut d = d.to_vec();
    let id = u16::from_be_bytes([d[18], d[19]]).wrapping_add(k);
    d[18..20].copy_from_slice(&id.to_be_bytes());
    d[24..26].fill(0);
    let c = packet::checksum::checksum(&d[14..34]);
    d[24..26].copy_from_slice(&c.to_be_bytes());
    d
}

#[test]
fn a_train_of_one_remote_takes_the_fast_paths_verdict_and_rechecks_each_header_checksum() {
    let mut pool = Pool::with_frames(8).cache();
    let seeds = fast_path_seeds();
    let t = &fast_path_terminators()[0];
    // A train: identification counting up (every checksum right), source ports changing.
    let mut frames: Vec<Vec<u8>> = (0..6).map(|i| next_id(&seeds[0], i * 4099)).collect();
    frames[3][34..36].copy_from_slice(&[0x99, 0x01]);
    assert_eq!(
        train_agrees(t, &mut pool, &frames),
        5,
        "all but the first from the train"
    );
    // A wrong checksum in the middle of a train is the general path's drop, and the train
    // goes on after it; so is a frame shorter than its IPv4 length says.
    let mut bad = next_id(&seeds[0], 9);
    bad[25] ^= 1;
    let mut short = next_id(&seeds[0], 10);
    short.truncate(short.len() - 1);
    let frames = [frames[0].clone(), bad, short, frames[1].clone()];
    assert_eq!(train_agrees(t, &mut pool, &frames), 1);
    // Another VNI breaks the train (and goes to another port).
    let frames = [seeds[0].clone(), seeds[1].clone(), seeds[0].clone()];
    assert_eq!(train_agrees(t, &mut pool, &frames), 0);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// Sequences of frames, each a seed (VXLAN, or Geneve, which only the general path takes)
    /// or the frame before with bytes changed (mostly the
    /// outer headers, often the identification, checksum, lengths and source port, the
    /// checksum made right again or not): a terminator with a train answers each as one
    /// without.
    #[test]
    fn a_train_answers_as_the_fast_path_on_mutated_sequences(
        steps in proptest::collection::vec(
            (
                0usize..5,
                proptest::collection::vec((0usize..12, 0usize..60, proptest::prelude::any::<u8>()), 0..3),
                0u8..3,
                0usize..3,
            ),
            1..12,
        ),
        which_t in 0usize..4,
    ) {
        let seeds = fast_path_seeds();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for (base, edits, fix, cut) in steps {
            let mut d = match (base, frames.last()) {
                (0 | 1, Some(prev)) => prev.clone(),
                (b, _) => seeds[b % 3].clone(),
            };
            for (hot, at, v) in edits {
                // Half the edits in the fields a train leaves out or must recheck.
                const HOT: [usize; 8] = [16, 17, 18, 19, 24, 25, 34, 35];
                let at = if hot < HOT.len() { HOT[hot] } else { at };
                if at < d.len() {
                    d[at] ^= v;
                }
            }
            d.truncate(d.len() - cut);
            match fix {
                0 => {}
                1 if d.len() >= 34 => d = next_id(&d, 0),
                _ if d.len() >= 34 => d = next_id(&d, 1),
                _ => {}
            }
            frames.push(d);
        }
        let mut pool = Pool::with_frames(8).cache();
        train_agrees(&fast_path_terminators()[which_t], &mut pool, &frames);
    }
}

use super::*;
use crate::decap::{terminate, Locals, Termination};
use crate::encap_train::EncapTrain;
use packet::pool::Pool;
use packet::wire::{Ipv4, Udp};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Golden frames made by scapy 2.8.0 (an independent implementation), see the test names.
const INNER: &str =
    "02000000000202000000000108004500001e00000000401166cd0a0000010a00000203e807d0000a77b66869";
/// IPv4, VXLAN VNI 42, DF, id 7, UDP source port 46884, no UDP checksum.
const V4_VXLAN: &str = "aabbccddee02aabbccddee01080045000050000740004011b942c0a80001c0a80002b72412b5003c00000800000000002a00";
/// IPv6, flow label 0x12345, Geneve VNI 42 with one critical option, UDP checksum on.
const V6_GENEVE: &str = "aabbccddee02aabbccddee0186dd6001234500481140fd000000000000000000000000000001fd000000000000000000000000000002b72417c10048169d0340655800002a00010283021122334455667788";
/// A hash whose port is 46884 and whose low 20 bits are the flow label 0x12345.
const HASH: u32 = 0x8001_2345;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn addrs(src: IpAddr, dst: IpAddr) -> OuterAddrs {
    OuterAddrs {
        src_mac: [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01],
        dst_mac: [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x02],
        src,
        dst,
    }
}

fn v4() -> OuterAddrs {
    addrs(
        Ipv4Addr::new(192, 168, 0, 1).into(),
        Ipv4Addr::new(192, 168, 0, 2).into(),
    )
}

fn v6() -> OuterAddrs {
    addrs(
        "fd00::1".parse::<Ipv6Addr>().unwrap().into(),
        "fd00::2".parse::<Ipv6Addr>().unwrap().into(),
    )
}

fn encapsulated(t: &EncapTemplate, inner: &[u8], hash: u32, ident: u16) -> Vec<u8> {
    let mut pool = Pool::with_frames(4).cache();
    let mut p = pool.alloc_from(inner).unwrap();
    t.push(&mut p, hash, ident).unwrap();
    let out = p.data().to_vec();
    pool.free(p);
    out
}

#[test]
fn ipv4_vxlan_matches_scapy() {
    let t = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 42, false), &v4()).unwrap();
    assert_eq!(t.overhead(), 50);
    let mut want = hex(V4_VXLAN);
    want.extend(hex(INNER));
    assert_eq!(encapsulated(&t, &hex(INNER), HASH, 7), want);
}

#[test]
fn ipv6_geneve_matches_scapy() {
    let mut e = Encap::new(TunnelKind::Geneve, 42, true);
    e.options = hex("010283021122334455667788");
    let t = EncapTemplate::new(&e, &v6()).unwrap();
    assert_eq!(t.overhead(), 14 + 40 + 8 + 8 + 12);
    let mut want = hex(V6_GENEVE);
    want.extend(hex(INNER));
    assert_eq!(encapsulated(&t, &hex(INNER), HASH, 0), want);
}

#[test]
fn a_whole_super_packet_s_udp_checksum_is_left_partial() {
    // The same packet pushed whole: every byte as scapy's but the UDP checksum, which holds
    // the pseudo-header's sum; summing the datagram over it gives scapy's checksum.
    let mut e = Encap::new(TunnelKind::Geneve, 42, true);
    e.options = hex("010283021122334455667788");
    let t = EncapTemplate::new(&e, &v6()).unwrap();
    let mut pool = Pool::with_frames(4).cache();
    let mut p = pool.alloc_from(&hex(INNER)).unwrap();
    t.push_whole(&mut p, HASH, 0).unwrap();
    let got = p.data().to_vec();
    pool.free(p);
    let mut want = hex(V6_GENEVE);
    want.extend(hex(INNER));
    let csum = 14 + 40 + 6;
    assert_eq!(got[..csum], want[..csum]);
    assert_eq!(got[csum + 2..], want[csum + 2..]);
    let completed = !packet::checksum::fold(packet::checksum::sum(&got[54..], 0));
    assert_eq!(completed.to_be_bytes(), want[csum..csum + 2]);
    // Without a UDP checksum, push_whole is push.
    let t4 = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 42, false), &v4()).unwrap();
    let mut p = pool.alloc_from(&hex(INNER)).unwrap();
    t4.push_whole(&mut p, HASH, 7).unwrap();
    assert_eq!(p.data(), &encapsulated(&t4, &hex(INNER), HASH, 7)[..]);
    pool.free(p);
}

#[test]
fn bad_configurations_are_refused() {
    let mixed = addrs(v4().src, v6().dst);
    let e = Encap::new(TunnelKind::Vxlan, 1, false);
    assert_eq!(
        EncapTemplate::new(&e, &mixed).unwrap_err(),
        EncapError::MixedFamilies
    );
    let mut e = Encap::new(TunnelKind::Vxlan, 1, false);
    e.options = vec![0; 4];
    assert_eq!(
        EncapTemplate::new(&e, &v4()).unwrap_err(),
        EncapError::BadOptions
    );
    // An option announcing 8 bytes of data with 4 present.
    let mut e = Encap::new(TunnelKind::Geneve, 1, false);
    e.options = hex("0102030211223344");
    assert_eq!(
        EncapTemplate::new(&e, &v4()).unwrap_err(),
        EncapError::BadOptions
    );
    // 68 bytes of options over IPv6: 14 + 40 + 8 + 8 + 68 = 138 > 128.
    let mut e = Encap::new(TunnelKind::Geneve, 1, true);
    e.options = [hex("01020310"), vec![0; 64]].concat();
    assert_eq!(
        EncapTemplate::new(&e, &v6()).unwrap_err(),
        EncapError::HeaderTooLong { need: 138 }
    );
}

#[test]
fn no_headroom_is_an_error_and_leaves_the_packet() {
    let t = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 1, false), &v4()).unwrap();
    let mut pool = Pool::with_frames(4).cache();
    let mut p = pool.alloc_from(&hex(INNER)).unwrap();
    assert!(p.push_front(p.headroom() - 10).is_some());
    let before = p.data().to_vec();
    assert_eq!(t.push(&mut p, 1, 1), Err(EncapError::NoHeadroom));
    assert_eq!(p.data(), &before[..]);
    pool.free(p);
}

proptest! {
    /// Whatever is encapsulated is terminated again into the same inner frame and outer
    /// facts, with every outer checksum right and the source port in the kernel's range.
    #[test]
    fn encap_then_terminate(inner in proptest::collection::vec(any::<u8>(), 14..600),
                            vni in 0u32..=0xff_ffff, hash in any::<u32>(), ident in any::<u16>(),
                            ipv6 in any::<bool>(), geneve in any::<bool>(), csum in any::<bool>(),
                            words in 0usize..4) {
        let kind = if geneve { TunnelKind::Geneve } else { TunnelKind::Vxlan };
        let mut e = Encap::new(kind, vni, ipv6);
        e.udp_csum = csum;
        if geneve && words > 0 {
            e.options = [vec![0xff, 0xff, 0x80, words as u8 - 1], vec![7; (words - 1) * 4]].concat();
        }
        let a = if ipv6 { v6() } else { v4() };
        let t = EncapTemplate::new(&e, &a).unwrap();
        let frame = encapsulated(&t, &inner, hash, ident);
        prop_assert_eq!(frame.len(), inner.len() + t.overhead());
        let locals = Locals { addrs: vec![a.dst], ports: vec![(kind.default_port(), kind)] };
        let Termination::Decapped(d) = terminate(&frame, &locals) else {
            return Err(TestCaseError::fail(format!("not terminated: {:?}", terminate(&frame, &locals))));
        };
        prop_assert_eq!(&frame[d.inner.clone()], &inner[..]);
        prop_assert_eq!((d.kind, d.vni, d.src, d.dst, d.ttl), (kind, vni, a.src, a.dst, 64));
        prop_assert_eq!(d.critical, geneve && words > 0);
        prop_assert_eq!(&frame[d.options.clone()], &e.options[..]);
        prop_assert!(SRC_PORT_RANGE.contains(&d.src_port));
        if !ipv6 {
            prop_assert!(Ipv4::new_checked(&frame[14..]).unwrap().verify_checksum());
        }
        let u = Udp::new_checked(&frame[14 + if ipv6 { 40 } else { 20 }..]).unwrap();
        prop_assert_eq!(u.checksum() != 0, csum);
        // The same frame on another port, or to another address, is not a tunnel packet.
        let other = Locals { addrs: vec![a.src], ports: locals.ports.clone() };
        prop_assert_eq!(terminate(&frame, &other), Termination::NotTunnel);
    }
}

#[test]
fn the_inner_flow_hash_is_the_flows_and_spreads_flows() {
    let mut pool = Pool::with_frames(8).cache();
    let frame = |sport: u16, ident: u8| {
        let mut f = packet::builder::PacketSpec::udp4(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            std::net::Ipv4Addr::new(10, 0, 0, 1),
            std::net::Ipv4Addr::new(10, 0, 0, 2),
            sport,
            80,
            64,
        )
        .build();
        f[18] = ident; // the IPv4 identification differs packet to packet
        f
    };
    let hash_of = |pool: &mut packet::PoolCache, f: &[u8]| {
        let mut p = pool.alloc_from(f).unwrap();
        let mut k = packet::FlowKey::ZERO;
        packet::extract_packet(&mut p, &mut k);
        let h = super::inner_flow_hash(&p);
        pool.free(p);
        h
    };
    let a = hash_of(&mut pool, &frame(1000, 1));
    assert_ne!(a, 0);
    assert_eq!(a, hash_of(&mut pool, &frame(1000, 2)), "one flow, one hash");
    assert_ne!(a, hash_of(&mut pool, &frame(1001, 1)), "another flow");
}

/// One packet of a train test: its inner length and hash are picked from a few, so that
/// runs of equal ones (trains) and changes both occur; `room` takes headroom away.
fn train_packet() -> impl Strategy<Value = (usize, u32, bool)> {
    (
        prop_oneof![Just(60usize), Just(64), Just(1400), 14usize..1900],
        prop_oneof![Just(HASH), Just(7u32), any::<u32>()],
        proptest::bool::weighted(0.1),
    )
}

proptest! {
    /// A train writes, packet by packet, what the template's push with identification 0
    /// writes, and refuses what it refuses, leaving the packet as it was — driven as the
    /// datapath drives it: a push, then [`EncapTrain::extend`] over the packets after it
    /// until one does not continue the train, passing over packets marked gone. Packets of
    /// one flow have one hash; a packet's same-key bit may be set only when its predecessor
    /// is of its flow (and is set for some of those).
    #[test]
    fn a_train_writes_what_push_writes(
        pkts in proptest::collection::vec(train_packet(), 1..16),
        gone in any::<u16>(),
        coin in any::<u16>(),
        ipv6 in any::<bool>(), geneve in any::<bool>(), csum in any::<bool>(),
        words in 0usize..4, seed in any::<u8>(),
    ) {
        let kind = if geneve { TunnelKind::Geneve } else { TunnelKind::Vxlan };
        let mut e = Encap::new(kind, 42, ipv6);
        e.udp_csum = csum;
        if geneve && words > 0 {
            e.options = [vec![0xff, 0xff, 0x80, words as u8 - 1], vec![7; (words - 1) * 4]].concat();
        }
        let t = EncapTemplate::new(&e, &if ipv6 { v6() } else { v4() }).unwrap();
        let mut train = EncapTrain::new(&t);
        let mut pool = Pool::with_frames(40).cache();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (k, &(len, _, short)) in pkts.iter().enumerate() {
            let inner: Vec<u8> = (0..len).map(|i| (i as u8) ^ seed ^ k as u8).collect();
            let mut x = pool.alloc_from(&inner).unwrap();
            let mut y = pool.alloc_from(&inner).unwrap();
            if short {
                // Leave less headroom than the outer headers need.
                for p in [&mut x, &mut y] {
                    let take = p.headroom() - (t.overhead() - 1);
                    p.push_front(take).unwrap();
                }
            }
            a.push(x);
            b.push(y);
        }
        let hashes: Vec<u32> = pkts.iter().map(|p| p.1).collect();
        let skip = u32::from(gone);
        let same = (1..hashes.len())
            .filter(|&j| hashes[j] == hashes[j - 1] && coin & (1 << j) != 0)
            .fold(0u32, |m, j| m | 1 << j);
        // As the datapath does: a push, then the packets that continue its train.
        let mut done = vec![None; a.len()];
        let mut i = 0;
        while i < a.len() {
            if skip & (1 << i) == 0 {
                done[i] = Some(train.push(&mut a[i], hashes[i]));
            }
            let (stop, pushed) = train.extend(&mut a, same, i + 1, skip);
            prop_assert!(stop > i && stop <= a.len());
            let continued: Vec<usize> = (i + 1..stop).filter(|j| skip & (1 << j) == 0).collect();
            prop_assert_eq!(continued.len(), pushed);
            for j in continued {
                prop_assert_eq!(a[j].len() - t.overhead(), train.inner());
                done[j] = Some(Ok(()));
            }
            i = stop;
        }
        for (k, (x, y)) in a.iter().zip(b.iter_mut()).enumerate() {
            if skip & (1 << k) != 0 {
                prop_assert!(done[k].is_none(), "a packet marked gone is left alone");
                prop_assert_eq!(x.data(), y.data());
                continue;
            }
            let rb = t.push(y, hashes[k], 0);
            prop_assert_eq!(done[k], Some(rb));
            prop_assert_eq!(x.data(), y.data());
            prop_assert_eq!(rb.is_err(), pkts[k].2);
        }
        for p in a.into_iter().chain(b) {
            pool.free(p);
        }
    }
}

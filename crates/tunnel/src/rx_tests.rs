use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use packet::pool::{Pool, PoolCache};
use packet::{extract_packet, Field, FlowKey};

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
    extract_packet(&mut p, &mut key);
    let mut plain = FlowKey::ZERO;
    let mut q = pool.alloc_from(&inner()).unwrap();
    extract_packet(&mut q, &mut plain);
    meta.write(&mut key);
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
    assert_eq!((key.get(Field::TunnelId), key.get(Field::InPort)), (9, 7));
    assert_eq!(key.get(Field::Parsed) as u16, parsed::TUN_IPV6);
    pool.free(p);
}

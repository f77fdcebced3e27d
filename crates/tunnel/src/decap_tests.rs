use super::*;
use crate::encap::{EncapTemplate, SRC_PORT_RANGE};
use crate::endpoint::{Encap, OuterAddrs};
use packet::pool::Pool;

fn locals() -> Locals {
    Locals {
        addrs: vec![Ipv4Addr::new(192, 168, 0, 2).into()],
        ports: vec![(4789, TunnelKind::Vxlan), (6081, TunnelKind::Geneve)],
    }
}

/// An IPv4 frame to 192.168.0.2 of `kind` with VNI 42 around a 30-byte inner frame, with a UDP
/// checksum.
fn frame(kind: TunnelKind) -> Vec<u8> {
    let mut e = Encap::new(kind, 42, false);
    e.udp_csum = true;
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src: Ipv4Addr::new(192, 168, 0, 1).into(),
        dst: Ipv4Addr::new(192, 168, 0, 2).into(),
    };
    let t = EncapTemplate::new(&e, &a).unwrap();
    let mut pool = Pool::with_frames(2).cache();
    let mut p = pool.alloc_from(&[0x5a; 30]).unwrap();
    t.push(&mut p, 99, 1).unwrap();
    let f = p.data().to_vec();
    pool.free(p);
    f
}

/// Rewrites the IPv4 header checksum of `f` after an edit.
fn fix_ip_csum(f: &mut [u8]) {
    f[24..26].fill(0);
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

fn drop_of(f: &[u8]) -> Termination {
    terminate(f, &locals())
}

#[test]
fn a_good_frame_is_terminated() {
    let f = frame(TunnelKind::Vxlan);
    let Termination::Decapped(d) = drop_of(&f) else {
        panic!("{:?}", drop_of(&f))
    };
    assert_eq!(d.vni, 42);
    assert_eq!(d.inner, 50..80);
    assert!(SRC_PORT_RANGE.contains(&d.src_port));
}

#[test]
fn other_traffic_is_not_a_tunnel() {
    let f = frame(TunnelKind::Vxlan);
    // ARP, IPv4 TCP, UDP to another port, another destination, a runt.
    let mut arp = f.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut tcp = f.clone();
    tcp[23] = 6;
    fix_ip_csum(&mut tcp);
    let mut port = f.clone();
    port[36..38].copy_from_slice(&53u16.to_be_bytes());
    let mut dst = f.clone();
    dst[33] = 9;
    fix_ip_csum(&mut dst);
    for g in [arp, tcp, port, dst, f[..13].to_vec()] {
        assert_eq!(drop_of(&g), Termination::NotTunnel);
    }
}

#[test]
fn each_bad_outer_header_has_its_reason() {
    let f = frame(TunnelKind::Vxlan);
    let mut ip_csum = f.clone();
    ip_csum[24] ^= 1;
    let mut frag = f.clone();
    frag[20] = 0x20; // MF
    fix_ip_csum(&mut frag);
    let mut udp_csum = f.clone();
    udp_csum[40] ^= 1;
    let mut udp_len = f.clone();
    udp_len[38..40].copy_from_slice(&4u16.to_be_bytes());
    udp_len[40..42].fill(0);
    let mut no_i = f.clone();
    no_i[42] = 0;
    no_i[40..42].fill(0);
    let mut short = f.clone();
    short.truncate(50 + 13);
    let ip_len = (short.len() - 14) as u16;
    short[16..18].copy_from_slice(&ip_len.to_be_bytes());
    fix_ip_csum(&mut short);
    short[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    short[40..42].fill(0);
    for (g, why) in [
        (ip_csum, DropReason::OuterChecksum),
        (frag, DropReason::OuterFragment),
        (udp_csum, DropReason::OuterChecksum),
        (udp_len, DropReason::OuterMalformed),
        (no_i, DropReason::TunnelHeader),
        (short, DropReason::InnerTooShort),
    ] {
        assert_eq!(drop_of(&g), Termination::Drop(why));
    }
}

#[test]
fn geneve_control_and_non_ethernet_are_dropped() {
    let f = frame(TunnelKind::Geneve);
    assert!(matches!(drop_of(&f), Termination::Decapped(_)));
    let mut ctl = f.clone();
    ctl[43] |= packet::wire::geneve::FLAG_O;
    ctl[40..42].fill(0);
    let mut ip = f.clone();
    ip[44..46].copy_from_slice(&0x0800u16.to_be_bytes());
    ip[40..42].fill(0);
    let mut ver = f.clone();
    ver[42] |= 0x40;
    ver[40..42].fill(0);
    assert_eq!(
        drop_of(&ctl),
        Termination::Drop(DropReason::GeneveNotEthernet)
    );
    assert_eq!(
        drop_of(&ip),
        Termination::Drop(DropReason::GeneveNotEthernet)
    );
    assert_eq!(drop_of(&ver), Termination::Drop(DropReason::TunnelHeader));
}

#[test]
fn a_vlan_tagged_underlay_and_ethernet_padding() {
    let f = frame(TunnelKind::Vxlan);
    let mut tagged = f[..12].to_vec();
    tagged.extend([0x81, 0x00, 0x00, 0x05]);
    tagged.extend(&f[12..]);
    tagged.extend([0; 6]); // padding after the IP packet
    let Termination::Decapped(d) = drop_of(&tagged) else {
        panic!("{:?}", drop_of(&tagged))
    };
    assert_eq!(d.inner, 54..84);
}

#[test]
fn reasons_have_distinct_names() {
    let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), DropReason::ALL.len());
}

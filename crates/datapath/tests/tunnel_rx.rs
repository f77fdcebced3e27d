//! Tunnels in the fast path. Receive: VXLAN frames received on an underlay port come out of
//! the tables as their inner frames from the tunnel port, with the outer headers' VNI and
//! endpoints in the key (and in the megaflows' masks); frames no tunnel port accepts are
//! counted and dropped. Send: output to a tunnel port leaves the underlay port encapsulated,
//! while other outputs of the same packet leave as they were.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{fixture, mask_of, udp};
use datapath::{Counter, DpConfig};
use packet::Field;
use pipeline::DpAction;
use tunnel::{
    terminate, Encap, EncapTemplate, Locals, OuterAddrs, Termination, Terminator, TunnelKind,
    TunnelPort,
};

const UNDERLAY: u32 = 1;
const TUNNEL: u32 = 9;
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
const OTHER: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 5);
const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);

fn vxlan(src: Ipv4Addr, vni: u32, inner: &[u8]) -> Vec<u8> {
    common::vxlan_frame(src, LOCAL, vni, inner)
}

#[test]
fn vxlan_frames_are_switched_as_their_inner_frames_from_the_tunnel_port() {
    // From the tunnel port with VNI 42 from REMOTE: to port 2. Anything else: no action.
    let mut f = fixture(
        2,
        DpConfig::default(),
        Box::new(|k, out| {
            out.mask = mask_of(&[Field::InPort, Field::TunnelId, Field::TunSrc]);
            let from_remote = k.get(Field::InPort) == TUNNEL as u128
                && k.get(Field::TunnelId) == 42
                && k.get(Field::TunSrc) == u32::from(REMOTE) as u128;
            if from_remote {
                out.actions.push(DpAction::Output(2));
            }
        }),
    );
    let port = TunnelPort {
        ofport: TUNNEL,
        kind: TunnelKind::Vxlan,
        dst_port: 4789,
        vni: None,
        remote: None,
        local: None,
    };
    f.dp.tunnels().set(
        UNDERLAY,
        Some(Terminator::new(vec![port], &[IpAddr::V4(LOCAL)])),
    );
    let inner: Vec<_> = (0..3).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    let frames: Vec<_> = inner.iter().map(|i| vxlan(REMOTE, 42, i)).collect();
    f.inject(UNDERLAY, &frames);
    f.poll();
    assert_eq!(f.collect(2), inner, "the inner frames, outer headers off");
    // The same inner frames from another remote: the megaflow above carries tun_src, so they
    // miss it and their own translation drops them.
    let others: Vec<_> = inner.iter().map(|i| vxlan(OTHER, 42, i)).collect();
    f.inject(UNDERLAY, &others);
    f.poll();
    assert!(
        f.collect(2).is_empty(),
        "another remote is another megaflow"
    );
    let s = f.stats();
    assert_eq!(s[Counter::Upcalls], 2);
    assert_eq!(s[Counter::DropNoAction], 3);
    assert_eq!(s[Counter::RxPackets], 6);
    assert!(f.dp.tunnels().drops().iter().all(|d| d.1 == 0));
}

#[test]
fn a_malformed_outer_header_is_counted_and_dropped_and_other_traffic_passes() {
    let mut f = fixture(
        2,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Output(2));
        }),
    );
    let port = TunnelPort {
        ofport: TUNNEL,
        kind: TunnelKind::Vxlan,
        dst_port: 4789,
        vni: Some(42),
        remote: None,
        local: None,
    };
    f.dp.tunnels().set(
        UNDERLAY,
        Some(Terminator::new(vec![port], &[IpAddr::V4(LOCAL)])),
    );
    let inner = udp(1000, [10, 0, 0, 2]);
    let mut bad = vxlan(REMOTE, 42, &inner);
    bad[24] ^= 0xff; // the outer IPv4 header checksum
    let unknown_vni = vxlan(REMOTE, 7, &inner);
    let plain = udp(2000, [10, 0, 0, 3]);
    f.inject(
        UNDERLAY,
        &[bad, unknown_vni, plain.clone(), vxlan(REMOTE, 42, &inner)],
    );
    f.poll();
    assert_eq!(f.collect(2), [plain, inner]);
    let drops = f.dp.tunnels().drops();
    let count = |name: &str| drops.iter().find(|d| d.0 == name).map(|d| d.1);
    assert_eq!(count("tunnel_outer_checksum"), Some(1));
    assert_eq!(count("tunnel_no_port"), Some(1));
    // Counted on the underlay port they came in by.
    let on_underlay = f.dp.tunnels().port_drops(UNDERLAY);
    assert!(
        on_underlay.contains(&("tunnel_no_port", 1)),
        "{on_underlay:?}"
    );
    assert_eq!(
        f.stats()[Counter::RxPackets],
        4,
        "dropped frames were received"
    );
    assert_eq!(
        f.stats()[Counter::DropMalformed],
        0,
        "termination's drops are counted by their reason, not as malformed"
    );
}

#[test]
fn output_to_a_tunnel_port_leaves_the_underlay_encapsulated_and_other_outputs_plain() {
    // From port 2: to the tunnel port and to port 3.
    let mut f = fixture(
        3,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Output(TUNNEL));
            out.actions.push(DpAction::Output(3));
        }),
    );
    // This host is LOCAL, the remote REMOTE.
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, 1],
        src: LOCAL.into(),
        dst: REMOTE.into(),
    };
    let t = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 42, false), &a).unwrap();
    f.dp.tunnels()
        .set_output(TUNNEL, Some((UNDERLAY, t.clone(), 1500)));
    let inner: Vec<_> = (0..4).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    f.inject(2, &inner);
    f.poll();
    assert_eq!(f.collect(3), inner, "the other output is not encapsulated");
    let sent = f.collect(UNDERLAY);
    assert_eq!(sent.len(), inner.len());
    // The remote's view: each one terminates to its inner frame, VNI 42, from LOCAL.
    let remote = Locals {
        addrs: vec![REMOTE.into()],
        ports: vec![(4789, TunnelKind::Vxlan)],
    };
    let mut sports = std::collections::HashSet::new();
    for (frame, want) in sent.iter().zip(&inner) {
        let Termination::Decapped(d) = terminate(frame, &remote) else {
            panic!("{:?}", terminate(frame, &remote))
        };
        assert_eq!((d.vni, d.src), (42, IpAddr::V4(LOCAL)));
        assert_eq!(&frame[d.inner.clone()], &want[..]);
        sports.insert(d.src_port);
    }
    assert!(sports.len() >= 3, "source ports {sports:?}");
    // New flows that hit the megaflow: the batch computes no flow hash for them (one mask:
    // the exact-match cache is not probed), yet each flow has its own UDP source port (for
    // the underlay's ECMP and RSS).
    let more: Vec<_> = (0..4).map(|i| udp(2000 + i, [10, 0, 0, 2])).collect();
    f.inject(2, &more);
    f.poll();
    f.collect(3);
    let sports: std::collections::HashSet<u16> = f
        .collect(UNDERLAY)
        .iter()
        .map(|frame| match terminate(frame, &remote) {
            Termination::Decapped(d) => d.src_port,
            t => panic!("{t:?}"),
        })
        .collect();
    assert!(sports.len() >= 3, "source ports of hits {sports:?}");
    // No next hop: the output is left out, the other one stays.
    f.dp.tunnels().set_output(TUNNEL, None);
    f.bump();
    f.inject(2, &inner[..1]);
    f.poll();
    assert!(f.collect(UNDERLAY).is_empty());
    assert_eq!(f.collect(3), &inner[..1]);
}

/// When the tunnel is a packet's last output, the packet itself takes the outer headers in
/// its headroom: the frames that leave the underlay are the frames that came in (no copy).
#[test]
fn the_last_output_to_a_tunnel_encapsulates_the_packet_itself() {
    let mut f = fixture(
        3,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Output(3));
            out.actions.push(DpAction::Output(TUNNEL));
        }),
    );
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, 1],
        src: LOCAL.into(),
        dst: REMOTE.into(),
    };
    let t = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 42, false), &a).unwrap();
    f.dp.tunnels()
        .set_output(TUNNEL, Some((UNDERLAY, t.clone(), 1500)));
    let inner: Vec<_> = (0..4).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    let mut b = packet::Batch::new();
    let mut frames = Vec::new();
    for i in &inner {
        let p = f.cache.alloc_from(i).unwrap();
        frames.push(p.frame());
        b.push(p).unwrap();
    }
    assert_eq!(f.peers[1].tx.send(&mut b), inner.len());
    f.poll();
    assert_eq!(f.collect(3), inner, "the copy to port 3 leaves plain");
    let mut b = packet::Batch::new();
    assert_eq!(f.peers[UNDERLAY as usize - 1].rx.recv(&mut b), inner.len());
    let remote = Locals {
        addrs: vec![REMOTE.into()],
        ports: vec![(4789, TunnelKind::Vxlan)],
    };
    let mut sent = Vec::new();
    for (p, want) in b.drain().zip(&inner) {
        let Termination::Decapped(d) = terminate(p.data(), &remote) else {
            panic!("{:?}", terminate(p.data(), &remote))
        };
        assert_eq!(&p.data()[d.inner.clone()], &want[..]);
        sent.push(p.frame());
        f.cache.free(p);
    }
    assert_eq!(
        sent, frames,
        "the underlay sent the received frames, not copies"
    );
}

/// A frame too large for the underlay after encapsulation is counted, answered with ICMP
/// "fragmentation needed" (IPv4 with DF) out of the port it came in by, and not sent; the
/// packet's other outputs still happen.
#[test]
fn a_frame_too_big_for_the_tunnel_is_answered_and_counted() {
    let mut f = fixture(
        3,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Output(TUNNEL));
            out.actions.push(DpAction::Output(3));
        }),
    );
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, 1],
        src: LOCAL.into(),
        dst: REMOTE.into(),
    };
    let t = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 42, false), &a).unwrap();
    // An underlay MTU of 1000: inner IP packets of at most 950 bytes fit.
    f.dp.tunnels().set_output(TUNNEL, Some((UNDERLAY, t, 1000)));
    let frame = |len: usize| {
        let mut spec = packet::builder::PacketSpec::udp4(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            1000,
            80,
            len,
        );
        if let packet::builder::L3Spec::Ipv4(ip) = &mut spec.l3 {
            ip.frag = 0x4000;
        }
        spec.build()
    };
    let (fits, big) = (frame(14 + 950), frame(14 + 951));
    f.inject(2, &[fits.clone(), big.clone()]);
    f.poll();
    assert_eq!(f.collect(3), [fits, big], "the other output happens");
    assert_eq!(f.collect(UNDERLAY).len(), 1, "only the frame that fits");
    let back = f.collect(2);
    assert_eq!(back.len(), 1, "one answer to the sender");
    let r = &back[0];
    // IPv4, ICMP, type 3 code 4, next-hop MTU 950, from the address it was sent to.
    assert_eq!(&r[12..14], &[0x08, 0x00]);
    assert_eq!(r[14 + 9], 1);
    assert_eq!(&r[34..36], &[3, 4]);
    assert_eq!(u16::from_be_bytes([r[40], r[41]]), 950);
    assert_eq!(&r[26..30], &[10, 0, 0, 2]);
    let drops = f.dp.tunnels().drops();
    assert!(drops.contains(&("tunnel_too_big", 1)), "{drops:?}");
    // Counted on the tunnel port, not on the underlay.
    let on_tunnel = f.dp.tunnels().port_drops(TUNNEL);
    assert!(on_tunnel.contains(&("tunnel_too_big", 1)), "{on_tunnel:?}");
    let on_underlay = f.dp.tunnels().port_drops(UNDERLAY);
    assert!(!on_underlay.iter().any(|d| d.0 == "tunnel_too_big"));
}

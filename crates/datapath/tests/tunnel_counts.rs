//! What a tunnel port carried, as the datapath counts it (`Tunnels::port_counts`): frames
//! terminated into each tunnel port (two ports on one underlay, their frames interleaved in
//! one batch) and packets encapsulated out of one — the packet itself when the tunnel is its
//! last output, a copy when another output follows —, bytes of the inner frames; a frame too
//! big for the tunnel is a drop, not a send. The counts survive the table being republished
//! (a new next hop, a new terminator) and go with the port.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{fixture, mask_of, udp};
use datapath::{DpConfig, TunnelPortCounts};
use packet::Field;
use pipeline::DpAction;
use tunnel::{Encap, EncapTemplate, OuterAddrs, Terminator, TunnelKind, TunnelPort};

const UNDERLAY: u32 = 1;
/// VNI 42.
const TUNNEL: u32 = 9;
/// VNI 43, on the same underlay.
const OTHER_TUNNEL: u32 = 10;
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);

/// `inner` as REMOTE sends it to LOCAL in VNI `vni`.
fn vxlan(vni: u32, inner: &[u8]) -> Vec<u8> {
    common::vxlan_frame(REMOTE, LOCAL, vni, inner)
}

/// The headers LOCAL sends to REMOTE with (next hop MAC 02::`mac`).
fn headers(mac: u8) -> EncapTemplate {
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, mac],
        src: LOCAL.into(),
        dst: REMOTE.into(),
    };
    EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 42, false), &a).unwrap()
}

fn terminator() -> Terminator {
    let port = |ofport, vni| TunnelPort {
        ofport,
        kind: TunnelKind::Vxlan,
        dst_port: 4789,
        vni: Some(vni),
        remote: None,
        local: None,
    };
    Terminator::new(
        vec![port(TUNNEL, 42), port(OTHER_TUNNEL, 43)],
        &[IpAddr::V4(LOCAL)],
    )
}

/// `(frames, bytes)`.
fn sum(frames: &[Vec<u8>]) -> (u64, u64) {
    (
        frames.len() as u64,
        frames.iter().map(|f| f.len() as u64).sum(),
    )
}

fn counts(rx: (u64, u64), tx: (u64, u64)) -> TunnelPortCounts {
    TunnelPortCounts {
        rx_packets: rx.0,
        rx_bytes: rx.1,
        tx_packets: tx.0,
        tx_bytes: tx.1,
    }
}

#[test]
fn terminated_and_encapsulated_packets_count_on_their_tunnel_port() {
    // From a tunnel port: to port 2. From port 2: to the tunnel (its last output, the packet
    // itself). From port 3: to the tunnel (a copy), then to port 2.
    let mut f = fixture(
        3,
        DpConfig::default(),
        Box::new(|k, out| {
            out.mask = mask_of(&[Field::InPort]);
            match k.get(Field::InPort) as u32 {
                TUNNEL | OTHER_TUNNEL => out.actions.push(DpAction::Output(2)),
                2 => out.actions.push(DpAction::Output(TUNNEL)),
                3 => {
                    out.actions.push(DpAction::Output(TUNNEL));
                    out.actions.push(DpAction::Output(2));
                }
                _ => {}
            }
        }),
    );
    let t = f.dp.tunnels().clone();
    t.set(UNDERLAY, Some(terminator()));
    t.set_output(TUNNEL, Some((UNDERLAY, headers(1), 1500)));

    // Received: 5 frames for TUNNEL and 2 for OTHER_TUNNEL, interleaved in one batch, with
    // a plain frame and one for a VNI no port takes (neither is counted on a tunnel port).
    let inner: Vec<_> = (0..7).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    let mut wide = udp(1100, [10, 0, 0, 2]);
    wide.extend_from_slice(&[0; 36]);
    let (to_tunnel, to_other) = ([&inner[..4], &[wide]].concat(), inner[4..6].to_vec());
    let frames = vec![
        vxlan(42, &to_tunnel[0]),
        vxlan(42, &to_tunnel[1]),
        vxlan(43, &to_other[0]),
        udp(2000, [10, 0, 0, 3]),
        vxlan(42, &to_tunnel[2]),
        vxlan(44, &inner[6]),
        vxlan(43, &to_other[1]),
        vxlan(42, &to_tunnel[3]),
        vxlan(42, &to_tunnel[4]),
    ];
    f.inject(UNDERLAY, &frames);
    f.poll();
    assert_eq!(f.collect(2).len(), 7, "the terminated frames were switched");
    assert_eq!(t.port_counts(TUNNEL), Some(counts(sum(&to_tunnel), (0, 0))));
    assert_eq!(
        t.port_counts(OTHER_TUNNEL),
        Some(counts(sum(&to_other), (0, 0)))
    );

    // Sent: 6 packets as themselves, 3 as copies; one frame too big is a drop, not a send.
    let moved: Vec<_> = (0..6).map(|i| udp(3000 + i, [10, 0, 0, 4])).collect();
    let copied: Vec<_> = (0..3).map(|i| udp(4000 + i, [10, 0, 0, 5])).collect();
    let mut big = udp(5000, [10, 0, 0, 6]);
    big.resize(1500, 0);
    f.inject(2, &[moved.clone(), vec![big]].concat());
    f.inject(3, &copied);
    f.poll();
    assert_eq!(f.collect(UNDERLAY).len(), 9);
    let sent = sum(&[moved.clone(), copied.clone()].concat());
    assert_eq!(
        t.port_counts(TUNNEL),
        Some(counts(sum(&to_tunnel), sent)),
        "the inner frames' bytes"
    );
    assert!(t.port_drops(TUNNEL).contains(&("tunnel_too_big", 1)));

    // A new next hop and a new terminator: the counts go on from where they were.
    t.set_output(TUNNEL, Some((UNDERLAY, headers(7), 1500)));
    t.set(UNDERLAY, Some(terminator()));
    f.bump();
    f.inject(UNDERLAY, &[vxlan(42, &inner[0])]);
    f.inject(2, &moved[..1]);
    f.poll();
    f.collect(2);
    f.collect(UNDERLAY);
    let rx = (
        sum(&to_tunnel).0 + 1,
        sum(&to_tunnel).1 + inner[0].len() as u64,
    );
    let tx = (sent.0 + 1, sent.1 + moved[0].len() as u64);
    assert_eq!(t.port_counts(TUNNEL), Some(counts(rx, tx)));

    // Removed: its counts go; the other port's stay.
    t.forget(TUNNEL);
    assert_eq!(t.port_counts(TUNNEL), None);
    assert_eq!(
        t.port_counts(OTHER_TUNNEL),
        Some(counts(sum(&to_other), (0, 0)))
    );
}

//! Tunnels in the fast path, sending where the flow picks the remote and the tunnel id
//! (`remote=flow`, `vni=flow`): the outer headers of what the underlay sends name the remote
//! and VNI the flow set; a destination with no headers yet is counted
//! (`tunnel_unresolved`) and asked for once, and sends once the control side installed its
//! headers and the megaflows compiled again. Also: a TCP super-packet into a tunnel leaves as
//! encapsulated segments with valid checksums, and a packet-out to a tunnel port is
//! encapsulated like a flow's output, and `tun_ipv6_dst` gives IPv6 outer headers; a fixed
//! remote that cannot be reached counts its outputs (`tunnel_unreachable`); a batch of trains
//! is encapsulated packet by packet, each with its own lengths.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{fixture, mask_of, udp, Fake};
use datapath::{Counter, Datapath, DpConfig, FlowDest, PerFlowPort, Tunnels};
use packet::builder::{Ipv4Spec, L3Spec, L4Spec, PacketSpec};
use packet::{Batch, Field, Gso, Pool};
use pipeline::DpAction;
use port::{ring, Port};
use tunnel::{terminate, Encap, EncapTemplate, Locals, OuterAddrs, Termination, TunnelKind};

const UNDERLAY: u32 = 1;
/// `remote=flow,vni=flow`.
const FLOW: u32 = 9;
/// `remote=REMOTE,vni=flow` (Neutron's `remote_ip=X, key=flow`).
const KEYED: u32 = 8;
const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
const OTHER: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 5);

fn set(field: Field, value: u128) -> DpAction {
    DpAction::SetField { field, value }
}

fn to(remote: Ipv4Addr, vni: u128, port: u32) -> Vec<DpAction> {
    vec![
        set(Field::TunDst, u32::from(remote).into()),
        set(Field::TunnelId, vni),
        DpAction::Output(port),
    ]
}

fn per_flow(t: &Tunnels) {
    t.set_per_flow(vec![
        (
            FLOW,
            PerFlowPort {
                remote: None,
                vni: None,
            },
        ),
        (
            KEYED,
            PerFlowPort {
                remote: Some(REMOTE.into()),
                vni: None,
            },
        ),
    ]);
}

/// The headers the control side would resolve for `remote` and `vni` (next hop MAC 02::n).
fn headers(remote: Ipv4Addr, vni: u32) -> EncapTemplate {
    headers_of(remote, &Encap::new(TunnelKind::Vxlan, vni, false))
}

/// The headers of `encap` towards `remote` (next hop MAC 02::n).
fn headers_of(remote: Ipv4Addr, encap: &Encap) -> EncapTemplate {
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, remote.octets()[3]],
        src: LOCAL.into(),
        dst: remote.into(),
    };
    EncapTemplate::new(encap, &a).unwrap()
}

/// VXLAN with an outer UDP checksum.
fn vxlan_csum(vni: u32) -> Encap {
    Encap {
        udp_csum: true,
        ..Encap::new(TunnelKind::Vxlan, vni, false)
    }
}

/// Geneve with one 8-byte option (class 0xffff, type 1).
fn geneve_opt(vni: u32) -> Encap {
    Encap {
        options: vec![0xff, 0xff, 0x01, 0x01, 0x11, 0x22, 0x33, 0x44],
        ..Encap::new(TunnelKind::Geneve, vni, false)
    }
}

fn dest(ofport: u32, remote: Ipv4Addr, vni: u32) -> FlowDest {
    FlowDest {
        ofport,
        remote: remote.into(),
        vni,
    }
}

/// `(outer destination, VNI, outer destination MAC, inner frame)` of frames the underlay
/// sent, as a host owning both remotes would terminate them.
fn received(frames: &[Vec<u8>]) -> Vec<(IpAddr, u32, [u8; 6], Vec<u8>)> {
    let remotes = Locals {
        addrs: vec![REMOTE.into(), OTHER.into()],
        ports: vec![(4789, TunnelKind::Vxlan)],
    };
    frames
        .iter()
        .map(|f| match terminate(f, &remotes) {
            Termination::Decapped(d) => {
                assert_eq!(d.src, IpAddr::V4(LOCAL));
                (
                    d.dst,
                    d.vni,
                    f[..6].try_into().unwrap(),
                    f[d.inner].to_vec(),
                )
            }
            t => panic!("not a tunnel frame: {t:?}"),
        })
        .collect()
}

fn drop_count(t: &Tunnels, name: &str) -> u64 {
    t.drops()
        .iter()
        .find(|d| d.0 == name)
        .unwrap_or_else(|| panic!("no drop reason {name}"))
        .1
}

#[test]
fn flows_pick_the_remote_and_vni_once_their_next_hop_is_resolved() {
    // From port 2: REMOTE, VNI 42. From port 3: OTHER, VNI 7, and a plain copy to port 2.
    // From port 4: the keyed port, VNI 5. From port 5: the flow port without tun_dst.
    let mut f = fixture(
        5,
        DpConfig::default(),
        Box::new(|k, out| {
            out.mask = mask_of(&[Field::InPort]);
            let actions = match k.get(Field::InPort) {
                2 => to(REMOTE, 42, FLOW),
                3 => [to(OTHER, 7, FLOW), vec![DpAction::Output(2)]].concat(),
                4 => vec![set(Field::TunnelId, 5), DpAction::Output(KEYED)],
                _ => vec![set(Field::TunnelId, 5), DpAction::Output(FLOW)],
            };
            out.actions.extend(actions);
        }),
    );
    let t = f.dp.tunnels().clone();
    per_flow(&t);
    let a: Vec<_> = (0..3).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    let b: Vec<_> = (0..2).map(|i| udp(2000 + i, [10, 0, 0, 3])).collect();
    let c = vec![udp(3000, [10, 0, 0, 4])];
    f.inject(2, &a);
    f.inject(3, &b);
    f.inject(4, &c);
    f.inject(5, &c);
    f.poll();
    // No headers yet: nothing leaves the underlay, every packet is counted, each
    // destination is asked for once; other outputs happen.
    assert!(f.collect(UNDERLAY).is_empty());
    assert_eq!(f.collect(2), b, "the plain output of port 3's flow");
    assert_eq!(drop_count(&t, "tunnel_unresolved"), 6);
    assert_eq!(drop_count(&t, "tunnel_flow_unset"), 1);
    let (mut asked, overflowed) = t.take_requests();
    asked.sort();
    let want = vec![
        dest(KEYED, REMOTE, 5),
        dest(FLOW, REMOTE, 42),
        dest(FLOW, OTHER, 7),
    ];
    let mut sorted = want.clone();
    sorted.sort();
    assert_eq!((asked, overflowed), (sorted, false));
    // Cached megaflows keep counting, without asking again.
    f.inject(2, &a);
    f.poll();
    assert_eq!(drop_count(&t, "tunnel_unresolved"), 9);
    assert_eq!(t.take_requests(), (vec![], false));
    // The control side resolves them and bumps the generation: the megaflows compile again.
    t.set_flow_outputs(
        want.iter()
            .map(|d| {
                let IpAddr::V4(r) = d.remote else {
                    unreachable!()
                };
                (*d, (UNDERLAY, headers(r, d.vni), 1500))
            })
            .collect(),
    );
    f.bump();
    f.inject(2, &a);
    f.inject(3, &b);
    f.inject(4, &c);
    f.poll();
    assert_eq!(f.collect(2), b);
    let got = received(&f.collect(UNDERLAY));
    let mut want_rx: Vec<_> = a
        .iter()
        .map(|i| (REMOTE.into(), 42, [2, 0, 0, 0, 0, 1], i.clone()))
        .collect();
    want_rx.extend(
        b.iter()
            .map(|i| (OTHER.into(), 7, [2, 0, 0, 0, 0, 5], i.clone())),
    );
    want_rx.push((REMOTE.into(), 5, [2, 0, 0, 0, 0, 1], c[0].clone()));
    assert_eq!(got, want_rx, "outer remote and VNI as each flow set them");
    assert_eq!(drop_count(&t, "tunnel_unresolved"), 9, "no more drops");
    // Megaflows hold the three destinations' headers: in use.
    let mut used = t.flow_outputs_in_use();
    used.sort();
    let mut all = want.clone();
    all.sort();
    assert_eq!(used, all);
}

/// A TCP/IPv4 super-packet of `payload` bytes.
fn super_frame(payload: usize) -> Vec<u8> {
    let mut ip = Ipv4Spec::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    ip.ident = 9;
    PacketSpec {
        l3: L3Spec::Ipv4(ip),
        l4: L4Spec::Tcp {
            sp: 5001,
            dp: 40000,
            flags: 0x018,
        },
        frame_len: 54 + payload,
        payload_fill: 0x5a,
        ..PacketSpec::default()
    }
    .build()
}

/// Whether the IPv4 header and TCP checksums of an Ethernet/IPv4/TCP frame verify.
fn checksums_ok(f: &[u8]) -> bool {
    let ip = &f[14..34];
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if packet::checksum::checksum(ip) != 0 {
        return false;
    }
    let seg = &f[34..14 + total];
    let src = u32::from_be_bytes(ip[12..16].try_into().unwrap());
    let dst = u32::from_be_bytes(ip[16..20].try_into().unwrap());
    let pseudo = packet::checksum::pseudo_v4(src, dst, 6, seg.len() as u16);
    packet::checksum::fold(packet::checksum::sum(seg, pseudo)) == 0xffff
}

#[test]
fn a_super_packet_into_a_tunnel_leaves_as_encapsulated_segments_with_valid_checksums() {
    // The tunnel first (a copy, cut), then again as the last output (the packet, cut).
    // MSS 1398: segments of 1452 bytes fit a 1500-byte underlay after 50 bytes of headers.
    let (mut f, t) = tunnel_fixture(vxlan, false);
    let frame = send_super(&mut f, 1398);
    let got = received(&f.collect(UNDERLAY));
    let n = 20_000usize.div_ceil(1398);
    assert_eq!(got.len(), 2 * n, "every segment, once per tunnel output");
    let mut payload = [Vec::new(), Vec::new()];
    for (i, (remote, vni, _, inner)) in got.iter().enumerate() {
        let which = i / n;
        assert_eq!(
            (*remote, *vni),
            [(IpAddr::V4(REMOTE), 42), (IpAddr::V4(OTHER), 7)][which]
        );
        assert!(
            inner.len() <= 14 + 20 + 20 + 1398,
            "segment {i} is {}",
            inner.len()
        );
        assert!(checksums_ok(inner), "segment {i}: inner checksums");
        let seq = |f: &[u8]| u32::from_be_bytes(f[38..42].try_into().unwrap()) as usize;
        assert_eq!(
            seq(inner) - seq(&frame),
            (i % n) * 1398,
            "segment {i} in order"
        );
        payload[which].extend_from_slice(&inner[54..]);
    }
    assert_eq!(payload[0], frame[54..], "the segments carry the payload");
    assert_eq!(payload[1], frame[54..]);
    let s = f.stats();
    assert_eq!(s[Counter::GsoSegmented], 2);
    assert_eq!(s[Counter::DropMalformed], 0);
    assert_eq!(drop_count(&t, "tunnel_too_big"), 0);
    assert!(!f.collect(3).is_empty(), "the plain output happens");
}

/// Plain VXLAN.
fn vxlan(vni: u32) -> Encap {
    Encap::new(TunnelKind::Vxlan, vni, false)
}

/// A fixture with flows from port 2: the tunnel to REMOTE (a copy), a plain output to port
/// 3, the tunnel to OTHER (the packet itself); the tunnels' encapsulation `encap(vni)`; the
/// underlay (port 1) cuts UDP-tunnelled super-packets when `underlay_cuts`.
fn tunnel_fixture(encap: fn(u32) -> Encap, underlay_cuts: bool) -> (common::Fixture, Arc<Tunnels>) {
    let f = common::fixture_ports(
        3,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.extend(to(REMOTE, 42, FLOW));
            out.actions.push(DpAction::Output(3));
            out.actions.extend(to(OTHER, 7, FLOW));
        }),
        None,
        1,
        256,
        &|p, end| end.set_udp_tunnel_gso(underlay_cuts && p == UNDERLAY),
    );
    let t = f.dp.tunnels().clone();
    per_flow(&t);
    let hdr = |remote, vni| headers_of(remote, &encap(vni));
    t.set_flow_outputs(vec![
        (dest(FLOW, REMOTE, 42), (UNDERLAY, hdr(REMOTE, 42), 1500)),
        (dest(FLOW, OTHER, 7), (UNDERLAY, hdr(OTHER, 7), 1500)),
    ]);
    (f, t)
}

/// Sends a 20,000-byte TCP super-packet (MSS `mss`) into port 2 and polls; returns it.
fn send_super(f: &mut common::Fixture, mss: u16) -> Vec<u8> {
    let frame = super_frame(20_000);
    let mut p = f.cache.alloc_copy(&frame).unwrap();
    assert!(p.set_gso(Some(Gso {
        v6: false,
        ecn: false,
        mss,
        outer: 0,
    })));
    let mut batch = Batch::new();
    batch.push(p).unwrap();
    assert_eq!(f.peers[1].tx.send(&mut batch), 1);
    f.poll();
    frame
}

#[test]
fn a_super_packet_goes_whole_to_an_underlay_whose_kernel_cuts_tunnelled_ones() {
    let (mut f, t) = tunnel_fixture(vxlan, true);
    let frame = send_super(&mut f, 1398);
    // What the underlay got: one packet per tunnel output, each the super-packet whole
    // behind its outer headers, marked with the request and the outer headers' length.
    let mut b = Batch::new();
    f.peers[0].rx.recv(&mut b);
    let got: Vec<(Vec<u8>, Option<Gso>)> = b
        .as_slice()
        .iter()
        .map(|p| (p.data().to_vec(), p.gso()))
        .collect();
    b.free_into(&mut f.cache);
    assert_eq!(got.len(), 2, "one whole packet per tunnel output");
    let want = Gso {
        v6: false,
        ecn: false,
        mss: 1398,
        outer: 50,
    };
    let frames: Vec<Vec<u8>> = got.iter().map(|(d, _)| d.clone()).collect();
    for (i, ((remote, vni, _, inner), (d, g))) in received(&frames).iter().zip(&got).enumerate() {
        assert_eq!(
            (*remote, *vni),
            [(IpAddr::V4(REMOTE), 42), (IpAddr::V4(OTHER), 7)][i]
        );
        assert_eq!(
            *g,
            Some(want),
            "output {i}: the request, with the outer length"
        );
        assert_eq!(
            inner, &frame,
            "output {i}: the inner super-packet untouched"
        );
        let ip_len = u16::from_be_bytes([d[16], d[17]]) as usize;
        assert_eq!(
            ip_len,
            d.len() - 14,
            "output {i}: outer IPv4 length of the whole"
        );
        assert_eq!(u16::from_be_bytes([d[38], d[39]]) as usize, d.len() - 34);
        assert_eq!(&d[40..42], &[0, 0], "no outer UDP checksum");
    }
    let s = f.stats();
    assert_eq!(s[Counter::GsoTunnelled], 2);
    assert_eq!(s[Counter::GsoSegmented], 0);
    assert_eq!(s[Counter::DropMalformed], 0);
    let c = t.port_counts(FLOW).expect("the tunnel port's counts");
    assert_eq!(
        c.tx_packets, 2,
        "a super-packet counts once, with its inner bytes"
    );
    assert_eq!(c.tx_bytes, 2 * frame.len() as u64);
    assert!(!f.collect(3).is_empty(), "the plain output happens");
}

#[test]
fn a_geneve_super_packet_with_options_goes_whole_with_its_longer_outer_headers() {
    let (mut f, _t) = tunnel_fixture(geneve_opt, true);
    let frame = send_super(&mut f, 1390);
    let mut b = Batch::new();
    f.peers[0].rx.recv(&mut b);
    let got: Vec<Option<Gso>> = b.as_slice().iter().map(|p| p.gso()).collect();
    let inner: Vec<Vec<u8>> = b
        .as_slice()
        .iter()
        .map(|p| p.data()[58..].to_vec())
        .collect();
    b.free_into(&mut f.cache);
    // Ethernet 14 + IPv4 20 + UDP 8 + Geneve 8 + one option 8.
    let want = Gso {
        v6: false,
        ecn: false,
        mss: 1390,
        outer: 58,
    };
    assert_eq!(got, vec![Some(want), Some(want)]);
    assert!(
        inner.iter().all(|i| *i == frame),
        "the inner super-packet after the options"
    );
    assert_eq!(f.stats()[Counter::GsoTunnelled], 2);
}

#[test]
fn a_super_packet_goes_whole_with_its_outer_udp_checksum_left_partial() {
    // A tunnel that sums its UDP datagrams: the kernel completes each segment's checksum
    // from the pseudo-header's sum left in the field (not a sum over 64 KiB to be cut).
    let (mut f, _t) = tunnel_fixture(vxlan_csum, true);
    send_super(&mut f, 1398);
    let sent = f.collect(UNDERLAY);
    assert_eq!(sent.len(), 2, "one whole packet per tunnel output");
    for d in &sent {
        let udp_len = d.len() - 34;
        assert_eq!(usize::from(u16::from_be_bytes([d[38], d[39]])), udp_len);
        let a = |i: usize| u32::from_be_bytes(d[i..i + 4].try_into().unwrap());
        let pseudo = packet::checksum::pseudo_v4(a(26), a(30), 17, udp_len as u16);
        assert_eq!(d[40..42], packet::checksum::fold(pseudo).to_be_bytes());
    }
    let s = f.stats();
    assert_eq!((s[Counter::GsoTunnelled], s[Counter::GsoSegmented]), (2, 0));
}

#[test]
fn a_super_packet_is_cut_first_where_it_cannot_go_whole() {
    // Segments that would not fit the underlay's MTU after the outer headers: cut (and the
    // segments counted too big) rather than handed to the kernel whole.
    let (mut f, t) = tunnel_fixture(vxlan, true);
    send_super(&mut f, 1440);
    let sent = f.collect(UNDERLAY);
    // Only each tunnel's last, shorter segment (20,000 - 13 × 1440 bytes) fits.
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|d| d.len() == 50 + 54 + 20_000 - 13 * 1440));
    let s = f.stats();
    assert_eq!((s[Counter::GsoTunnelled], s[Counter::GsoSegmented]), (0, 2));
    assert!(drop_count(&t, "tunnel_too_big") > 0);
}

#[test]
fn a_packet_out_to_a_tunnel_port_is_encapsulated() {
    let pool = Pool::with_frames(1024);
    let mut b = Datapath::builder().pool(pool.clone());
    let mut outside = Vec::new();
    for p in 1..=2u32 {
        let (sw, out) = ring::pair(&format!("tpo{p}"), &format!("tpoo{p}"), 64, &pool);
        outside.push(out.open_rx(0).unwrap());
        b = b.port(p, sw);
    }
    let gen = Arc::new(AtomicU64::new(1));
    let logic: Arc<Mutex<common::Logic>> = Arc::new(Mutex::new(Box::new(|_, _| {})));
    let mut running = b
        .upcall_factory(move |_| {
            Box::new(Fake {
                gen: gen.clone(),
                logic: logic.clone(),
                meter: None,
            })
        })
        .threads(vec![None])
        .start()
        .unwrap();
    let t = running.tunnels().clone();
    per_flow(&t);
    t.set_flow_outputs(vec![(
        dest(FLOW, REMOTE, 5),
        (UNDERLAY, headers(REMOTE, 5), 1500),
    )]);
    let frame = udp(7, [10, 0, 0, 9]);
    // `set_tunnel:5,set_field:REMOTE->tun_dst,output:FLOW`, from the controller.
    let actions = vec![
        set(Field::TunnelId, 5),
        set(Field::TunDst, u32::from(REMOTE).into()),
        DpAction::Output(FLOW),
    ];
    running
        .injector()
        .inject(&frame, 0xffff_fffd, actions)
        .unwrap();
    let mut cache = pool.cache();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.is_empty() && Instant::now() < deadline {
        let mut batch = Batch::new();
        if outside[0].recv(&mut batch) > 0 {
            got.extend(batch.as_slice().iter().map(|p| p.data().to_vec()));
            batch.free_into(&mut cache);
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    assert_eq!(
        received(&got),
        [(IpAddr::V4(REMOTE), 5, [2, 0, 0, 0, 0, 1], frame)],
        "the underlay sends the packet-out in the tunnel's headers"
    );
    running.stop();
}

/// `set_field:2001:db8::2->tun_ipv6_dst`: the outer headers are IPv6 to that remote.
#[test]
fn a_flow_picks_an_ipv6_remote() {
    const REMOTE6: u128 = 0x2001_0db8 << 96 | 2;
    let mut f = fixture(
        2,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.extend([
                set(Field::TunIpv6Dst, REMOTE6),
                set(Field::TunnelId, 77),
                DpAction::Output(FLOW),
            ]);
        }),
    );
    let t = f.dp.tunnels().clone();
    per_flow(&t);
    let (local, remote): (IpAddr, IpAddr) = (
        "2001:db8::1".parse().unwrap(),
        std::net::Ipv6Addr::from(REMOTE6).into(),
    );
    let a = OuterAddrs {
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, 6],
        src: local,
        dst: remote,
    };
    let tpl = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 77, true), &a).unwrap();
    let d = FlowDest {
        ofport: FLOW,
        remote,
        vni: 77,
    };
    t.set_flow_outputs(vec![(d, (UNDERLAY, tpl, 1500))]);
    let inner = udp(1, [10, 0, 0, 2]);
    f.inject(2, std::slice::from_ref(&inner));
    f.poll();
    let sent = f.collect(UNDERLAY);
    assert_eq!(sent.len(), 1);
    let remotes = Locals {
        addrs: vec![remote],
        ports: vec![(4789, TunnelKind::Vxlan)],
    };
    let Termination::Decapped(got) = terminate(&sent[0], &remotes) else {
        panic!("{:?}", terminate(&sent[0], &remotes))
    };
    assert_eq!((got.src, got.dst, got.vni), (local, remote, 77));
    assert_eq!(&sent[0][got.inner], &inner[..]);
}

/// Tunnel port 7, with a fixed remote (its headers are the test's to set).
const FIXED: u32 = 7;

/// A datapath whose every flow outputs to [`FIXED`], and its tunnels.
fn to_fixed() -> (common::Fixture, Arc<Tunnels>) {
    let f = fixture(
        5,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.push(DpAction::Output(FIXED));
        }),
    );
    let t = f.dp.tunnels().clone();
    (f, t)
}

/// A tunnel port with a fixed remote that cannot be reached: its outputs are counted
/// (`tunnel_unreachable`) rather than left out silently; once its next hop is known they
/// leave the underlay, and nothing more is counted.
#[test]
fn an_unreachable_fixed_remote_counts_its_outputs() {
    let (mut f, t) = to_fixed();
    t.set_output(FIXED, None);
    t.set_down(FIXED, true);
    let a: Vec<_> = (0..3).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    f.inject(2, &a);
    f.poll();
    assert!(f.collect(UNDERLAY).is_empty());
    assert_eq!(drop_count(&t, "tunnel_unreachable"), 3);
    assert_eq!(
        t.port_drops(FIXED)
            .iter()
            .find(|d| d.0 == "tunnel_unreachable")
            .map(|d| d.1),
        Some(3),
        "counted on the tunnel port"
    );
    // Reachable again: the control side installs the headers and drops the megaflows.
    t.set_output(FIXED, Some((UNDERLAY, headers(REMOTE, 42), 1500)));
    t.set_down(FIXED, false);
    f.bump();
    f.inject(2, &a);
    f.poll();
    let got = received(&f.collect(UNDERLAY));
    assert_eq!(got.len(), 3, "sent once reachable");
    assert!(got.iter().all(|g| g.0 == IpAddr::V4(REMOTE) && g.1 == 42));
    assert_eq!(drop_count(&t, "tunnel_unreachable"), 3, "no more drops");
}

/// A batch whose only output is a tunnel is encapsulated where it is and handed to the
/// underlay whole; a frame in it too big for the underlay leaves the batch (counted, answered)
/// and the others keep their order.
#[test]
fn a_batch_into_a_tunnel_is_encapsulated_in_place_and_a_too_big_frame_leaves_it() {
    let (mut f, t) = to_fixed();
    // An underlay MTU of 1000: inner IP packets of at most 950 bytes fit.
    t.set_output(FIXED, Some((UNDERLAY, headers(REMOTE, 42), 1000)));
    let frame = |sport: u16, len: usize| {
        let mut spec = PacketSpec::udp4(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            sport,
            80,
            len,
        );
        if let L3Spec::Ipv4(ip) = &mut spec.l3 {
            ip.frag = 0x4000;
        }
        spec.build()
    };
    let batch: Vec<Vec<u8>> = (0..8u16)
        .map(|i| {
            frame(
                1000 + i,
                if i == 3 {
                    14 + 951
                } else {
                    14 + 100 + usize::from(i)
                },
            )
        })
        .collect();
    f.inject(2, &batch);
    f.poll();
    let got = received(&f.collect(UNDERLAY));
    let want: Vec<_> = batch
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, b)| (IpAddr::V4(REMOTE), 42, [2, 0, 0, 0, 0, 1], b.clone()))
        .collect();
    assert_eq!(got, want, "every frame that fits, encapsulated, in order");
    assert_eq!(f.collect(2).len(), 1, "the too-big frame is answered");
    assert_eq!(drop_count(&t, "tunnel_too_big"), 1);
}

/// A batch that is mostly trains (packets whose flow key is their predecessor's) takes the
/// encapsulation train: every packet still leaves with its own lengths and checksum — a
/// longer frame of the same flow in the middle of a train included — in order, counted.
#[test]
fn a_batch_of_trains_is_encapsulated_packet_by_packet() {
    let mut f = fixture(
        2,
        DpConfig::default(),
        Box::new(|_, out| {
            out.mask = mask_of(&[Field::InPort]);
            out.actions.extend(to(REMOTE, 42, FLOW));
        }),
    );
    let t = f.dp.tunnels().clone();
    per_flow(&t);
    t.set_flow_outputs(vec![(
        dest(FLOW, REMOTE, 42),
        (UNDERLAY, headers(REMOTE, 42), 1500),
    )]);
    let one = udp(1000, [10, 0, 0, 2]);
    // The same flow in a longer frame (Ethernet padding after the IP packet): the same key,
    // so the same train, but other outer lengths.
    let longer = [one.clone(), vec![0; 10]].concat();
    let other = udp(2000, [10, 0, 0, 2]);
    let frames = vec![
        one.clone(),
        one.clone(),
        one.clone(),
        longer.clone(),
        longer.clone(),
        one.clone(),
        other,
        one.clone(),
    ];
    let before = t.port_counts(FLOW).unwrap_or_default();
    f.inject(2, &frames);
    f.poll();
    let sent = f.collect(UNDERLAY);
    let got = received(&sent);
    let want: Vec<_> = frames
        .iter()
        .map(|i| (REMOTE.into(), 42, [2, 0, 0, 0, 0, 1], i.clone()))
        .collect();
    assert_eq!(
        got, want,
        "each inner frame whole, in order, behind valid outer headers"
    );
    // One flow, one UDP source port; the outer lengths are each frame's own.
    let sport = |f: &Vec<u8>| u16::from_be_bytes([f[34], f[35]]);
    let firsts: Vec<u16> = [0, 1, 2, 3, 4, 5, 7]
        .iter()
        .map(|&i| sport(&sent[i]))
        .collect();
    assert!(firsts.iter().all(|&p| p == firsts[0]), "{firsts:?}");
    // The other flow, as long as the train's frames right before it, gets its own headers
    // (its hash's source port), not the train's.
    assert_ne!(
        sport(&sent[6]),
        firsts[0],
        "another flow, another source port"
    );
    for (s, inner) in sent.iter().zip(&frames) {
        assert_eq!(s.len(), inner.len() + 50);
        assert_eq!(
            usize::from(u16::from_be_bytes([s[16], s[17]])),
            inner.len() + 36
        );
        assert_eq!(
            usize::from(u16::from_be_bytes([s[38], s[39]])),
            inner.len() + 16
        );
    }
    let after = t.port_counts(FLOW).unwrap_or_default();
    let inner_bytes: usize = frames.iter().map(Vec::len).sum();
    assert_eq!(
        (
            after.tx_packets - before.tx_packets,
            after.tx_bytes - before.tx_bytes
        ),
        (frames.len() as u64, inner_bytes as u64)
    );
}

//! TCP super-packets kept whole ([`packet::gso`]) through the fast path: whole to a port with
//! virtio-net headers, cut into segments for a port without, as packet-ins, and copied whole
//! for several outputs; and segments bound for a port with virtio-net headers joined into
//! one (`DpConfig::gro`).
//!
//! Ports are in-memory rings; the ones that stand for AF_PACKET or TAP ports with virtio-net
//! headers are rings that announce them (the data path decides on the capability alone).

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use datapath::{Counter, Datapath, DpConfig, Pmd, Policer, Upcall};
use packet::builder::{Ipv4Spec, L3Spec, L4Spec, PacketSpec};
use packet::{Batch, FlowKey, Gso, Pool, PoolCache};
use pipeline::{DpAction, PacketInReason, Translation};
use port::vnet::TcpSegmenter;
use port::{ring, Capabilities, Port, PortError, PortStats, RxQueue, TxQueue};

/// A ring port that says it has virtio-net headers.
struct Vnet(Arc<ring::RingPort>);

impl Port for Vnet {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            vnet_hdr: true,
            ..self.0.capabilities()
        }
    }
    fn open_rx(&self, q: u16) -> Result<Box<dyn RxQueue>, PortError> {
        self.0.open_rx(q)
    }
    fn open_tx(&self, q: u16) -> Result<Box<dyn TxQueue>, PortError> {
        let tx = self.0.open_tx(q)?;
        Ok(if self.0.name().ends_with("-nosupers") {
            Box::new(NoSupers(tx))
        } else {
            tx
        })
    }
    fn stats(&self) -> PortStats {
        self.0.stats()
    }
    fn udp_tunnel_gso(&self) -> bool {
        self.0.udp_tunnel_gso()
    }
}

type Logic = Arc<Mutex<Vec<DpAction>>>;

/// Every packet gets the same actions.
struct Fixed(Logic);

impl Upcall for Fixed {
    fn generation(&self) -> u64 {
        1
    }
    fn translate(&mut self, _key: &FlowKey, out: &mut Translation) {
        out.mask = FlowKey::ZERO;
        out.actions.extend(self.0.lock().unwrap().iter().cloned());
    }
    fn meter(&self, _id: u32) -> Option<Arc<dyn Policer>> {
        None
    }
}

struct Rig {
    pmd: Pmd,
    peers: Vec<(Box<dyn RxQueue>, Box<dyn TxQueue>)>,
    cache: PoolCache,
    dp: Datapath,
}

/// A transmit queue whose receiver takes no super-packet now (a vhost-user guest without
/// TSO): [`TxQueue::takes_supers`] false.
struct NoSupers(Box<dyn TxQueue>);

impl TxQueue for NoSupers {
    fn send(&mut self, batch: &mut Batch) -> usize {
        self.0.send(batch)
    }
    fn takes_supers(&self) -> bool {
        false
    }
}

/// Port 1 (virtio-net) in; port 2 plain ring; port 3 virtio-net.
fn rig(actions: Vec<DpAction>) -> Rig {
    rig_with(actions, DpConfig::default())
}

fn rig_with(actions: Vec<DpAction>, cfg: DpConfig) -> Rig {
    rig_full(actions, cfg, false)
}

/// [`rig_with`], port 3's kernel cutting UDP-tunnelled super-packets when `tunnel_gso3`.
fn rig_full(actions: Vec<DpAction>, cfg: DpConfig, tunnel_gso3: bool) -> Rig {
    rig_ports(actions, cfg, tunnel_gso3, false)
}

/// [`rig_full`], port 3's queue taking no super-packet now when `nosupers3`.
fn rig_ports(actions: Vec<DpAction>, cfg: DpConfig, tunnel_gso3: bool, nosupers3: bool) -> Rig {
    let pool = Pool::with_frames(4096);
    let mut b = Datapath::builder().pool(pool.clone());
    let mut peers = Vec::new();
    for p in 1..=3u32 {
        let name = if p == 3 && nosupers3 {
            "gsw3-nosupers".to_string()
        } else {
            format!("gsw{p}")
        };
        let (sw, out) = ring::pair(&name, &format!("gout{p}"), 512, &pool);
        sw.set_udp_tunnel_gso(p == 3 && tunnel_gso3);
        peers.push((out.open_rx(0).unwrap(), out.open_tx(0).unwrap()));
        b = if p == 2 {
            b.port(p, sw)
        } else {
            b.port(p, Arc::new(Vnet(sw)))
        };
    }
    let logic: Logic = Arc::new(Mutex::new(actions));
    let dp = b
        .config(cfg)
        .upcall_factory(move |_| Box::new(Fixed(logic.clone())))
        .threads(vec![None])
        .build()
        .unwrap();
    let pmd = dp.build_pmds().unwrap().pop().unwrap();
    Rig {
        pmd,
        peers,
        cache: pool.cache(),
        dp,
    }
}

/// A TCP/IPv4 super-packet of `payload` bytes with MSS 1448, as a port keeps it.
fn super_frame(payload: usize) -> Vec<u8> {
    let mut ip = Ipv4Spec::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    ip.ident = 77;
    PacketSpec {
        l3: L3Spec::Ipv4(ip),
        l4: L4Spec::Tcp {
            sp: 5001,
            dp: 40000,
            flags: 0x018,
        },
        frame_len: 54 + payload,
        payload_fill: 0x3c,
        ..PacketSpec::default()
    }
    .build()
}

const GSO: Gso = Gso {
    v6: false,
    ecn: false,
    mss: 1448,
    outer: 0,
};

impl Rig {
    fn send_super(&mut self, frame: &[u8]) {
        let mut p = self.cache.alloc_copy(frame).unwrap();
        assert!(p.set_gso(Some(GSO)));
        let mut b = Batch::new();
        b.push(p).unwrap();
        assert_eq!(self.peers[0].1.send(&mut b), 1);
        while self.pmd.poll_once() != 0 {}
    }

    /// (bytes, is a super-packet) of what port `port` sent.
    fn out(&mut self, port: usize) -> Vec<(Vec<u8>, bool)> {
        let mut v = Vec::new();
        let mut b = Batch::new();
        while self.peers[port - 1].0.recv(&mut b) != 0 {
            for p in b.drain() {
                v.push((p.data().to_vec(), p.is_gso()));
                self.cache.free(p);
            }
        }
        v
    }
}

fn expected_segments(frame: &[u8]) -> Vec<Vec<u8>> {
    let hdr = port::vnet::VnetHdr {
        gso_type: port::vnet::GSO_TCPV4,
        gso_size: GSO.mss,
        ..port::vnet::VnetHdr::NONE
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

#[test]
fn whole_to_a_virtio_port_cut_for_a_plain_one() {
    // Output to 2 (a copy, cut) then to 3 (the original, whole).
    let mut r = rig(vec![DpAction::Output(2), DpAction::Output(3)]);
    let frame = super_frame(60_000);
    let want = expected_segments(&frame);
    assert_eq!(want.len(), 42);
    r.send_super(&frame);
    r.send_super(&frame);
    let two = r.out(2);
    assert_eq!(two.len(), 84, "42 segments per super-packet");
    assert!(two.iter().all(|(_, g)| !g));
    let got: Vec<Vec<u8>> = two.into_iter().map(|(b, _)| b).collect();
    assert_eq!(got, [want.clone(), want].concat());
    let three = r.out(3);
    assert_eq!(three, vec![(frame.clone(), true), (frame, true)]);
    let s = r.pmd.stats();
    assert_eq!(s[Counter::GsoSegmented], 2);
    assert_eq!(s[Counter::RxPackets], 2);
    assert_eq!(s[Counter::TxPackets], 84 + 2);
    assert_eq!(s.drops(), 0);
}

#[test]
fn a_whole_batch_for_a_plain_port_is_cut_in_order() {
    let mut r = rig(vec![DpAction::Output(2)]);
    // A plain frame between two super-packets in one rx batch.
    let small = super_frame(100);
    let big = super_frame(5_000);
    let mut b = Batch::new();
    for (f, gso) in [(&big, true), (&small, false), (&big, true)] {
        let mut p = r.cache.alloc_copy(f).unwrap();
        if gso {
            p.set_gso(Some(GSO));
        }
        b.push(p).unwrap();
    }
    assert_eq!(r.peers[0].1.send(&mut b), 3);
    while r.pmd.poll_once() != 0 {}
    let got: Vec<Vec<u8>> = r.out(2).into_iter().map(|(b, _)| b).collect();
    let segs = expected_segments(&big);
    assert_eq!(segs.len(), 4);
    assert_eq!(got, [segs.clone(), vec![small], segs].concat());
}

#[test]
fn a_super_packet_reaches_the_controller_as_segments() {
    let mut r = rig(vec![DpAction::Controller {
        reason: PacketInReason::Action,
        max_len: u16::MAX,
        table_id: 0,
        cookie: 0,
    }]);
    let frame = super_frame(4_000);
    r.send_super(&frame);
    let mut got = Vec::new();
    r.dp.packet_ins(usize::MAX, |pi| {
        assert_eq!(usize::from(pi.total_len), pi.packet.len());
        got.push(pi.packet.data().to_vec())
    });
    assert_eq!(got, expected_segments(&frame));
    assert_eq!(r.pmd.stats()[Counter::GsoSegmented], 1);
}

#[test]
fn segments_for_a_virtio_port_are_joined_unless_gro_is_off() {
    // 21 segments of a stream, from the plain port in one batch, to port 3; with gro on but
    // port 3's queue taking no super-packet now (a guest without TSO), as with gro off.
    let frame = super_frame(20 * 1448 + 100);
    let segs = expected_segments(&frame);
    assert_eq!(segs.len(), 21);
    for (gro, nosupers) in [(true, false), (false, false), (true, true)] {
        let cfg = DpConfig {
            gro,
            ..DpConfig::default()
        };
        let mut r = rig_ports(vec![DpAction::Output(3)], cfg, false, nosupers);
        let gro = gro && !nosupers;
        let mut b = Batch::new();
        for s in &segs {
            b.push(r.cache.alloc_copy(s).unwrap()).unwrap();
        }
        assert_eq!(r.peers[1].1.send(&mut b), 21);
        while r.pmd.poll_once() != 0 {}
        let three = r.out(3);
        let s = r.pmd.stats();
        assert_eq!(s[Counter::RxPackets], 21);
        assert_eq!(s.drops(), 0);
        if gro {
            assert_eq!(three.len(), 1, "one super-packet");
            let (bytes, whole) = &three[0];
            assert!(whole);
            assert_eq!(bytes.len(), frame.len());
            assert_eq!(
                expected_segments(bytes),
                segs,
                "cut again: the same segments"
            );
            assert_eq!((s[Counter::GroSupers], s[Counter::GroSegments]), (1, 21));
            assert_eq!(s[Counter::TxPackets], 1);
        } else {
            let plain: Vec<(Vec<u8>, bool)> = segs.iter().map(|s| (s.clone(), false)).collect();
            assert_eq!(three, plain);
            assert_eq!((s[Counter::GroSupers], s[Counter::TxPackets]), (0, 21));
        }
    }
}

/// `inner` behind outer Ethernet, IPv4 (192.0.2.1 → 192.0.2.2, identification 9, header
/// checksum left 0: cutting rewrites it), UDP (to 4789, no checksum) and VXLAN (VNI 42): 50
/// bytes, the lengths those of the whole (as the kernel writes them up to 64 KiB).
fn vxlan(inner: &[u8]) -> Vec<u8> {
    let mut f = vec![
        0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00, // Ethernet
        0x45, 0, 0, 0, 0, 9, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2, // IPv4
        0xc3, 0x50, 0x12, 0xb5, 0, 0, 0, 0, // UDP
        0x08, 0, 0, 0, 0, 0, 42, 0, // VXLAN
    ];
    f.extend_from_slice(inner);
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

#[test]
fn a_tunnelled_super_packet_is_cut_for_a_port_whose_kernel_cannot_cut_it() {
    // A super-packet encapsulated whole (as a TAP underlay's kernel hands one over when no
    // tunnel port terminates it), switched to port 2 (plain), then port 3 (virtio-net).
    let inner = super_frame(5_000);
    let want_inner = expected_segments(&inner);
    assert_eq!(want_inner.len(), 4);
    let frame = vxlan(&inner);
    let tunnelled = Gso { outer: 50, ..GSO };
    for tunnel_gso3 in [false, true] {
        let actions = vec![DpAction::Output(2), DpAction::Output(3)];
        let mut r = rig_full(actions, DpConfig::default(), tunnel_gso3);
        let mut p = r.cache.alloc_copy(&frame).unwrap();
        assert!(p.set_gso(Some(tunnelled)));
        let mut b = Batch::new();
        b.push(p).unwrap();
        assert_eq!(r.peers[0].1.send(&mut b), 1);
        while r.pmd.poll_once() != 0 {}
        let mut outs = vec![(2, r.out(2))];
        let three = r.out(3);
        if tunnel_gso3 {
            assert_eq!(
                three,
                vec![(frame.clone(), true)],
                "whole to a port that can"
            );
        } else {
            outs.push((3, three));
        }
        for (port, got) in outs {
            assert_eq!(got.len(), 4, "port {port}: four segments");
            for (i, ((seg, whole), want)) in got.iter().zip(&want_inner).enumerate() {
                assert!(!whole);
                assert_eq!(
                    seg[50..],
                    want[..],
                    "port {port}: segment {i}'s inner frame"
                );
                let be = |at: usize| usize::from(u16::from_be_bytes([seg[at], seg[at + 1]]));
                assert_eq!(be(16), seg.len() - 14, "IPv4 total length");
                assert_eq!(be(18), 9 + i, "IPv4 identification");
                assert_eq!(be(38), seg.len() - 34, "UDP length");
                assert_eq!(packet::checksum::checksum(&seg[14..34]), 0, "IPv4 checksum");
            }
        }
        let s = r.pmd.stats();
        assert_eq!(s[Counter::GsoSegmented], if tunnel_gso3 { 1 } else { 2 });
        assert_eq!(s.drops(), 0);
    }
}

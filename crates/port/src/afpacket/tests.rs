//! AF_PACKET tests on a veth pair (root only; they say so loudly when skipped).

use std::process::Command;
use std::time::{Duration, Instant};

use packet::builder::PacketSpec;
use packet::{Batch, Pool};

use super::*;

/// Whether the tests can create interfaces; prints a loud notice when not.
pub(crate) fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("SKIPPED {test}: needs root (creates interfaces); CI runs it as root");
    }
    root
}

/// Runs `ip ARGS`, panicking with its output on failure.
pub(crate) fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A veth pair with unique names, up, deleted on drop (even when the test panics).
pub(crate) struct Veth {
    pub a: String,
    pub b: String,
}

impl Veth {
    pub(crate) fn new(tag: &str) -> Veth {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let base = format!("hp{}{n}{tag}", std::process::id() % 100_000);
        let v = Veth {
            a: format!("{base}a"),
            b: format!("{base}b"),
        };
        ip(&["link", "add", &v.a, "type", "veth", "peer", "name", &v.b]);
        for i in [&v.a, &v.b] {
            // No IPv6 on test links: no router solicitations or DAD frames in the way.
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{i}/disable_ipv6"), "1");
            ip(&["link", "set", i, "up"]);
        }
        v
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).status();
    }
}

const MODES: [RxMode; 2] = [RxMode::Mmsg, RxMode::Ring];

fn port(ifname: &str, queues: u16, rx: RxMode, pool: &Pool) -> AfPacketPort {
    port_with(ifname, queues, true, rx, pool)
}

fn port_with(ifname: &str, queues: u16, vnet_hdr: bool, rx: RxMode, pool: &Pool) -> AfPacketPort {
    let cfg = AfPacketConfig {
        queues,
        vnet_hdr,
        rx,
        prio: false,
        ..AfPacketConfig::new(ifname)
    };
    AfPacketPort::new(&format!("afpacket:{ifname},prio=off"), cfg, pool).unwrap()
}

fn frame(i: u16, len: usize) -> Vec<u8> {
    PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        1000 + i,
        2000,
        len,
    )
    .build()
}

/// Receives from every queue until `want` frames arrived or 3 s passed.
fn receive(rx: &mut [Box<dyn RxQueue>], want: usize, pool: &Pool) -> Vec<(usize, Vec<u8>)> {
    let mut got = Vec::new();
    let mut cache = pool.cache();
    let deadline = Instant::now() + Duration::from_secs(3);
    while got.len() < want && Instant::now() < deadline {
        for (q, r) in rx.iter_mut().enumerate() {
            let mut b = Batch::new();
            r.recv(&mut b);
            for p in b.drain() {
                got.push((q, p.data().to_vec()));
                cache.free(p);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    got
}

fn send(tx: &mut dyn TxQueue, frames: &[Vec<u8>], pool: &Pool) {
    let mut cache = pool.cache();
    for chunk in frames.chunks(32) {
        let mut b = Batch::new();
        for f in chunk {
            b.push(cache.alloc_from(f).unwrap()).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while !b.is_empty() && Instant::now() < deadline {
            tx.send(&mut b);
        }
        assert!(b.is_empty(), "could not send within 2 s");
    }
}

#[test]
fn frames_cross_a_veth_in_order_and_are_counted() {
    if !root_or_skip("frames_cross_a_veth_in_order_and_are_counted") {
        return;
    }
    // Both ends with and without virtio-net headers, and mixed; both ways of receiving.
    let ends = [(true, true), (false, false), (true, false), (false, true)];
    for ((va, vb), mode) in ends.into_iter().flat_map(|e| MODES.map(|m| (e, m))) {
        let v = Veth::new("x");
        let pool = Pool::with_frames(1024);
        let a = port_with(&v.a, 1, va, mode, &pool);
        let b = port_with(&v.b, 1, vb, mode, &pool);
        let mut rx = vec![b.open_rx(0).unwrap()];
        let mut tx = a.open_tx(0).unwrap();
        let frames: Vec<Vec<u8>> = (0..100)
            .map(|i| frame(i, 60 + usize::from(i) * 9))
            .collect();
        send(tx.as_mut(), &frames, &pool);
        let got = receive(&mut rx, 100, &pool);
        let got: Vec<Vec<u8>> = got.into_iter().map(|(_, f)| f).collect();
        assert_eq!(got, frames, "vnet_hdr {va}/{vb}, {mode:?}");
        let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
        let (sa, sb) = (a.stats(), b.stats());
        assert_eq!((sa.tx_packets, sa.tx_bytes), (100, bytes));
        assert_eq!(
            (sb.rx_packets, sb.rx_bytes, sb.rx_errors, sb.rx_dropped),
            (100, bytes, 0, 0)
        );
        drop((rx, tx, a, b));
        assert_eq!(pool.shared_free(), 1024, "frames leaked");
    }
}

#[test]
fn vlan_tag_taken_out_by_the_kernel_is_put_back() {
    if !root_or_skip("vlan_tag_taken_out_by_the_kernel_is_put_back") {
        return;
    }
    for mode in MODES {
        vlan_put_back(mode);
    }
}

fn vlan_put_back(mode: RxMode) {
    let v = Veth::new("v");
    let pool = Pool::with_frames(256);
    let a = port(&v.a, 1, mode, &pool);
    let b = port(&v.b, 1, mode, &pool);
    let mut rx = vec![b.open_rx(0).unwrap()];
    let mut spec = PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        1,
        2,
        100,
    );
    spec.vlans = vec![(0x8100, 0x2000 | 10)];
    let tagged = spec.build();
    send(
        a.open_tx(0).unwrap().as_mut(),
        std::slice::from_ref(&tagged),
        &pool,
    );
    let got = receive(&mut rx, 1, &pool);
    assert_eq!(got.len(), 1, "{mode:?}");
    assert_eq!(got[0].1, tagged, "{mode:?}");
}

#[test]
fn readiness_fd_is_readable_when_a_block_is_ready() {
    if !root_or_skip("readiness_fd_is_readable_when_a_block_is_ready") {
        return;
    }
    for mode in MODES {
        readiness(mode);
    }
}

fn readiness(mode: RxMode) {
    let v = Veth::new("r");
    let pool = Pool::with_frames(256);
    let a = port(&v.a, 1, mode, &pool);
    let b = port(&v.b, 1, mode, &pool);
    let mut rx = b.open_rx(0).unwrap();
    let fd = rx.readiness_fd().expect("afpacket rx has a readiness fd");
    send(a.open_tx(0).unwrap().as_mut(), &[frame(0, 64)], &pool);
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; bounded wait of 2 s.
    let n = unsafe { libc::poll(&mut pfd, 1, 2000) };
    assert_eq!(n, 1, "no readiness within 2 s");
    let mut batch = Batch::new();
    assert_eq!(rx.recv(&mut batch), 1);
    batch.free_into(&mut pool.cache());
}

#[test]
fn several_queues_share_the_flows() {
    if !root_or_skip("several_queues_share_the_flows") {
        return;
    }
    let v = Veth::new("q");
    let pool = Pool::with_frames(1024);
    let a = port(&v.a, 1, RxMode::Ring, &pool);
    let b = port(&v.b, 4, RxMode::Mmsg, &pool);
    assert_eq!(b.capabilities().rx_queues, 4);
    let mut rx: Vec<Box<dyn RxQueue>> = (0..4).map(|q| b.open_rx(q).unwrap()).collect();
    let err = |r: Result<Box<dyn RxQueue>, PortError>| r.err().expect("opened").to_string();
    assert!(err(b.open_rx(0)).contains("already open"));
    assert!(err(b.open_rx(4)).contains("does not exist"));
    let frames: Vec<Vec<u8>> = (0..64).map(|i| frame(i, 64)).collect();
    send(a.open_tx(0).unwrap().as_mut(), &frames, &pool);
    let got = receive(&mut rx, 64, &pool);
    assert_eq!(got.len(), 64);
    let mut per_queue = [0; 4];
    for (q, _) in &got {
        per_queue[*q] += 1;
    }
    assert!(
        per_queue.iter().filter(|&&n| n > 0).count() > 1,
        "64 flows all on one queue: {per_queue:?}"
    );
    assert_eq!(b.stats().rx_packets, 64);
}

#[test]
fn missing_interface_is_named() {
    let pool = Pool::with_frames(4);
    let e = AfPacketPort::new("afpacket:nosuch0", AfPacketConfig::new("nosuch0"), &pool)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "port afpacket:nosuch0: no interface named nosuch0; check `ip link`"
    );
}

/// A TCP/IPv4 super-packet with `payload` bytes (MSS 1448), marked as kept whole.
fn super_packet(cache: &mut packet::PoolCache, payload: usize) -> packet::Packet {
    let mut ip = packet::builder::Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
    ip.ident = 500;
    let f = PacketSpec {
        l3: packet::builder::L3Spec::Ipv4(ip),
        l4: packet::builder::L4Spec::Tcp {
            sp: 5001,
            dp: 40000,
            flags: 0x018,
        },
        frame_len: 54 + payload,
        payload_fill: 0x77,
        ..PacketSpec::default()
    }
    .build();
    let mut p = cache.alloc_copy(&f).unwrap();
    p.set_gso(Some(packet::Gso {
        v6: false,
        ecn: false,
        mss: 1448,
        outer: 0,
    }));
    p
}

#[test]
fn super_packets_cross_a_veth_whole() {
    if !root_or_skip("super_packets_cross_a_veth_whole") {
        return;
    }
    for mode in MODES {
        let v = Veth::new("g");
        let pool = Pool::with_frames(512);
        let mut cache = pool.cache();
        let a = port(&v.a, 1, mode, &pool);
        let b = port(&v.b, 1, mode, &pool);
        let mut rx = b.open_rx(0).unwrap();
        let mut tx = a.open_tx(0).unwrap();
        // What the receiver should see: the frame as the sender asks the kernel to cut it
        // (partial TCP checksum, IPv4 header checksum right).
        let mut want = Vec::new();
        let mut batch = Batch::new();
        for n in [60_000, 3_000, 30_000] {
            let mut p = super_packet(&mut cache, n);
            crate::vnet::tx_header(&mut p).unwrap();
            want.push(p.data().to_vec());
            batch.push(p).unwrap();
        }
        // A plain frame between them.
        batch
            .push(cache.alloc_from(&frame(9, 100)).unwrap())
            .unwrap();
        want.push(frame(9, 100));
        assert_eq!(tx.send(&mut batch), 4, "{mode:?}");
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(3);
        while got.len() < 4 && Instant::now() < deadline {
            let mut b = Batch::new();
            rx.recv(&mut b);
            for p in b.drain() {
                got.push((p.data().to_vec(), p.gso()));
                cache.free(p);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mss = Some(packet::Gso {
            v6: false,
            ecn: false,
            mss: 1448,
            outer: 0,
        });
        let expected: Vec<_> = want.into_iter().zip([mss, mss, mss, None]).collect();
        assert_eq!(got.len(), 4, "{mode:?}");
        for (g, w) in got.iter().zip(&expected) {
            assert_eq!(g.1, w.1, "{mode:?}");
            assert!(
                g.0 == w.0,
                "{mode:?}: {} vs {} bytes differ",
                g.0.len(),
                w.0.len()
            );
        }
        let s = b.stats();
        assert_eq!((s.rx_packets, s.rx_errors), (4, 0), "{mode:?}");
        drop((rx, tx, a, b, cache));
        assert_eq!(pool.shared_free(), 512, "frames leaked");
    }
}

#[test]
fn super_packets_without_virtio_headers_are_errors() {
    if !root_or_skip("super_packets_without_virtio_headers_are_errors") {
        return;
    }
    for mode in MODES {
        let v = Veth::new("n");
        let pool = Pool::with_frames(512);
        let mut cache = pool.cache();
        let a = port(&v.a, 1, mode, &pool);
        let b = port_with(&v.b, 1, false, mode, &pool);
        let mut rx = b.open_rx(0).unwrap();
        let mut batch = Batch::new();
        batch.push(super_packet(&mut cache, 20_000)).unwrap();
        batch
            .push(cache.alloc_from(&frame(1, 100)).unwrap())
            .unwrap();
        assert_eq!(a.open_tx(0).unwrap().send(&mut batch), 2);
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut got = Vec::new();
        while got.is_empty() && Instant::now() < deadline {
            let mut b = Batch::new();
            rx.recv(&mut b);
            for p in b.drain() {
                got.push(p.data().to_vec());
                cache.free(p);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(got, vec![frame(1, 100)], "{mode:?}");
        let s = b.stats();
        assert_eq!((s.rx_packets, s.rx_errors), (1, 1), "{mode:?}");
    }
}

/// A TCP frame from port `sp` with `flags` and `payload` bytes after the headers.
fn tcp_frame(sp: u16, flags: u16, payload: usize) -> Vec<u8> {
    use packet::builder::{Ipv4Spec, L3Spec, L4Spec};
    PacketSpec {
        l3: L3Spec::Ipv4(Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into())),
        l4: L4Spec::Tcp {
            sp,
            dp: 5201,
            flags,
        },
        frame_len: 54 + payload,
        ..PacketSpec::default()
    }
    .build()
}

fn icmp_frame() -> Vec<u8> {
    use packet::builder::{Ipv4Spec, L3Spec, L4Spec};
    PacketSpec {
        l3: L3Spec::Ipv4(Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into())),
        l4: L4Spec::Icmp { ty: 8, code: 0 },
        frame_len: 98,
        ..PacketSpec::default()
    }
    .build()
}

fn prio_port(ifname: &str, queues: u16, pool: &Pool) -> AfPacketPort {
    let cfg = AfPacketConfig {
        queues,
        prio: true,
        ..AfPacketConfig::new(ifname)
    };
    AfPacketPort::new(&format!("afpacket:{ifname},prio=on"), cfg, pool).unwrap()
}

/// Reads until `want` frames came from `rx` or 3 s passed; returns their bytes in order.
fn read_all(rx: &mut dyn RxQueue, want: usize, cache: &mut packet::PoolCache) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while got.len() < want && Instant::now() < deadline {
        let mut batch = Batch::new();
        rx.recv(&mut batch);
        got.extend(batch.drain().map(|p| {
            let f = p.data().to_vec();
            cache.free(p);
            f
        }));
    }
    got
}

#[test]
fn control_frames_go_to_the_priority_queue() {
    if !root_or_skip("control_frames_go_to_the_priority_queue") {
        return;
    }
    let v = Veth::new("p");
    let pool = Pool::with_frames(1024);
    let a = port(&v.a, 1, RxMode::Mmsg, &pool);
    let b = prio_port(&v.b, 1, &pool);
    assert_eq!(b.priority_queues(), 1);
    let mut bulk_rx = b.open_rx(0).unwrap();
    let mut prio_rx = b.open_priority_rx(0).unwrap();
    let (ack, syn, fin, rst) = (0x10, 0x02, 0x11, 0x04);
    let mut bulk: Vec<Vec<u8>> = (0..40).map(|i| frame(i, 64)).collect();
    bulk.push(tcp_frame(40000, ack, 100));
    bulk.push(tcp_frame(40000, ack, 0));
    let control = vec![icmp_frame(), tcp_frame(40001, syn, 0)];
    let ends = vec![tcp_frame(40000, fin, 0), tcp_frame(40002, rst, 0)];
    let sent: Vec<Vec<u8>> = [bulk.clone(), control.clone(), ends.clone()].concat();
    send(a.open_tx(0).unwrap().as_mut(), &sent, &pool);
    let mut cache = pool.cache();
    assert_eq!(
        read_all(prio_rx.as_mut(), control.len(), &mut cache),
        control,
        "ICMP and SYN in the priority queue"
    );
    assert_eq!(
        read_all(bulk_rx.as_mut(), bulk.len() + ends.len(), &mut cache),
        [bulk, ends].concat(),
        "data, pure ACKs, FIN and RST in order in the bulk queue"
    );
    let s = b.stats();
    assert_eq!((s.rx_packets, s.rx_priority), (sent.len() as u64, 2));
    // Each queue's descriptor wakes the thread that sleeps on it.
    let mut tx = a.open_tx(0).unwrap();
    for (f, rx) in [(icmp_frame(), &mut prio_rx), (frame(1, 64), &mut bulk_rx)] {
        send(tx.as_mut(), std::slice::from_ref(&f), &pool);
        let mut pfd = libc::pollfd {
            fd: rx.readiness_fd().expect("a readiness descriptor"),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; bounded wait of 2 s.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 2000) }, 1, "no wake-up");
        assert_eq!(read_all(rx.as_mut(), 1, &mut cache), vec![f]);
    }
    // The lane's transmit queue is the one after the queues; there is none after it.
    let lane_tx = b.open_tx(1).expect("the priority lane's transmit queue");
    assert_eq!(b.capabilities().tx_queues, 2);
    assert!(b.open_tx(2).is_err());
    assert!(b.open_priority_rx(1).is_err());
    assert!(b.open_priority_rx(0).is_err(), "opened twice");
    drop((bulk_rx, prio_rx, tx, lane_tx, a, b, cache));
    assert_eq!(pool.shared_free(), 1024, "frames leaked");
}

#[test]
fn only_the_bulk_queue_keeps_super_packet_frames_ready() {
    // The bulk queue stocks a 64 KiB frame per message of its batch for super-packets; the
    // priority queue, whose control frames never are one, stocks none.
    if !root_or_skip("only_the_bulk_queue_keeps_super_packet_frames_ready") {
        return;
    }
    let v = Veth::new("s");
    let pool = Pool::with_frames(1024);
    let b = prio_port(&v.b, 1, &pool);
    let sibling = pool.gso_pool().expect("the super-packet pool");
    let free0 = sibling.shared_free();
    let mut bulk_rx = b.open_rx(0).unwrap();
    bulk_rx.recv(&mut Batch::new());
    let free1 = sibling.shared_free();
    let mut prio_rx = b.open_priority_rx(0).unwrap();
    prio_rx.recv(&mut Batch::new());
    let free2 = sibling.shared_free();
    assert!(
        (32..=34).contains(&(free0 - free1)),
        "the bulk queue took {} (32 stocked, its cache's chunk besides)",
        free0 - free1
    );
    assert_eq!(free1, free2, "the priority queue took super-packet frames");
}

#[test]
fn several_priority_queues_keep_each_flow_on_one_queue() {
    if !root_or_skip("several_priority_queues_keep_each_flow_on_one_queue") {
        return;
    }
    let v = Veth::new("m");
    let pool = Pool::with_frames(2048);
    let a = port(&v.a, 1, RxMode::Mmsg, &pool);
    let b = prio_port(&v.b, 4, &pool);
    // Queues 0..4 are the bulk ones, 4..8 the priority ones (queue q % 4 for the flow).
    let mut rx: Vec<Box<dyn RxQueue>> = (0..4)
        .map(|q| b.open_rx(q).unwrap())
        .chain((0..4).map(|q| b.open_priority_rx(q).unwrap()))
        .collect();
    // 32 flows, each a handshake and a data segment: both land on the flow's queue.
    let frames: Vec<Vec<u8>> = (0..32)
        .flat_map(|i| {
            [
                tcp_frame(41000 + i, 0x02, 0),
                tcp_frame(41000 + i, 0x10, 200),
            ]
        })
        .collect();
    send(a.open_tx(0).unwrap().as_mut(), &frames, &pool);
    let got = receive(&mut rx, frames.len(), &pool);
    assert_eq!(got.len(), frames.len());
    let mut queue_of = std::collections::HashMap::new();
    let mut used = std::collections::HashSet::new();
    for (q, f) in &got {
        let sport = u16::from_be_bytes([f[34], f[35]]);
        let syn = f[47] & 0x02 != 0;
        assert_eq!(syn, *q >= 4, "flow {sport}: a frame in the wrong class");
        assert_eq!(
            *queue_of.entry(sport).or_insert(q % 4),
            q % 4,
            "flow {sport} on two queues"
        );
        used.insert(q % 4);
    }
    assert!(used.len() > 1, "32 flows all on one queue");
    let s = b.stats();
    assert_eq!((s.rx_packets, s.rx_priority), (64, 32));
}

#[test]
fn prio_needs_mmsg_receive() {
    let v = if root_or_skip("prio_needs_mmsg_receive") {
        Veth::new("n")
    } else {
        return;
    };
    let pool = Pool::with_frames(16);
    let cfg = AfPacketConfig {
        prio: true,
        rx: RxMode::Ring,
        ..AfPacketConfig::new(&v.a)
    };
    let e = AfPacketPort::new("afpacket:x", cfg, &pool).unwrap_err();
    assert!(e.to_string().contains("prio=on needs rx=mmsg"), "{e}");
}

#[test]
fn specs_get_the_priority_lane_by_default_with_mmsg() {
    let v = if root_or_skip("specs_get_the_priority_lane_by_default_with_mmsg") {
        Veth::new("d")
    } else {
        return;
    };
    let pool = Pool::with_frames(64);
    for (opts, lanes) in [
        ("", 1),
        (",prio=off", 0),
        (",rx=ring", 0),
        (",queues=2", 2),
        (",rx=mmsg,prio=on", 1),
    ] {
        let p = crate::spec::open(&format!("afpacket:{}{opts}", v.a), &pool).unwrap();
        assert_eq!(p.priority_queues(), lanes, "afpacket:IF{opts}");
    }
    let Err(e) = crate::spec::open(&format!("afpacket:{},rx=ring,prio=on", v.a), &pool) else {
        panic!("rx=ring,prio=on opened");
    };
    assert!(e.to_string().contains("prio=on needs rx=mmsg"), "{e}");
}

/// Network-layer bytes shaped like the frames the two priority classifiers tell apart: ARP,
/// IPv4 and IPv6 carrying ICMP, TCP (any flags, consistent or not lengths, fragments) or
/// UDP, and other ethertypes; long enough for every header either program reads.
fn classifiable_l3() -> impl proptest::strategy::Strategy<Value = (u16, Vec<u8>)> {
    use proptest::prelude::*;
    let proto = prop_oneof![Just(0x0806u16), Just(0x0800), Just(0x86dd), any::<u16>()];
    let l4 = prop_oneof![Just(1u8), Just(6), Just(6), Just(17), Just(58), any::<u8>()];
    (
        proto,
        l4,
        any::<u8>(),
        0u16..3,
        5u8..=7,
        5u8..=8,
        proptest::bool::weighted(0.8),
        proptest::collection::vec(any::<u8>(), 64..100),
    )
        .prop_map(|(proto, l4, flags, payload, ihl, doff, whole, mut b)| {
            let payload = match payload {
                0 => 0,
                1 => 1 + u16::from(flags % 9),
                _ => u16::from_be_bytes([b[2], b[3]]),
            };
            let tcp_at = match proto {
                0x0800 => {
                    b[0] = 0x40 | ihl;
                    b[9] = l4;
                    if whole {
                        b[6] &= 0x40;
                        b[7] = 0;
                    }
                    // A random payload length may wrap: an inconsistent length, as on the wire.
                    let tot = (u16::from(ihl) * 4 + u16::from(doff) * 4).wrapping_add(payload);
                    b[2..4].copy_from_slice(&tot.to_be_bytes());
                    usize::from(ihl) * 4
                }
                0x86dd => {
                    b[0] = 0x60;
                    b[6] = l4;
                    let len = (u16::from(doff) * 4).wrapping_add(payload);
                    b[4..6].copy_from_slice(&len.to_be_bytes());
                    40
                }
                _ => return (proto, b),
            };
            b[tcp_at + 12] = doff << 4;
            b[tcp_at + 13] = flags;
            (proto, b)
        })
}

#[test]
fn the_xdp_program_and_the_fanout_program_agree_on_the_priority_class() {
    use proptest::test_runner::{Config, TestRunner};
    if !root_or_skip("the_xdp_program_and_the_fanout_program_agree_on_the_priority_class") {
        return;
    }
    let v = Veth::new("x");
    let pool = Pool::with_frames(4096);
    let xdp = crate::afxdp::AfXdpPort::open(&crate::afxdp::AfXdpConfig::new(&v.b), &pool)
        .unwrap_or_else(|e| panic!("{e}"));
    let fanout = super::steer::program(1);
    let (xdp_pass, xdp_redirect) = (2, 4);
    let mut runner = TestRunner::new(Config {
        cases: 2000,
        ..Config::default()
    });
    let prio = std::cell::Cell::new(0usize);
    runner
        .run(&classifiable_l3(), |(proto, l3)| {
            let mut frame = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
            frame.extend_from_slice(&proto.to_be_bytes());
            frame.extend_from_slice(&l3);
            let control = super::steer::tests::run(&fanout, proto, &l3) == 1;
            let verdict = xdp.xdp_verdict(0, &frame).unwrap();
            prio.set(prio.get() + usize::from(control));
            proptest::prop_assert_eq!(
                verdict,
                if control { xdp_pass } else { xdp_redirect },
                "proto {:#06x}, l3 {:02x?}",
                proto,
                l3
            );
            Ok(())
        })
        .unwrap();
    // The generator reaches both classes, so the agreement is not a trivial one.
    assert!(
        prio.get() > 100,
        "only {} control frames generated",
        prio.get()
    );
}

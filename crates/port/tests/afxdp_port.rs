//! The AF_XDP port on veth pairs in a private network namespace (needs root; says so loudly
//! and passes without running when not root).

mod afxdp_support;

use std::time::{Duration, Instant};

use afxdp_support::*;
use packet::{Batch, Pool};
use port::afxdp::{AfXdpConfig, AfXdpPort, XdpMode};
use port::{Port, RxQueue, TxQueue};

const WAIT: Duration = Duration::from_secs(3);

/// Receives from `rx` until `want` frames that `keep` accepts arrived or `WAIT` passed; the
/// others go back to the pool.
fn recv_matching(
    rx: &mut dyn RxQueue,
    want: usize,
    pool: &Pool,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<packet::Packet> {
    let mut cache = pool.cache();
    let mut got = Vec::new();
    let start = Instant::now();
    let mut batch = Batch::new();
    while got.len() < want && start.elapsed() < WAIT {
        rx.recv(&mut batch);
        for p in batch.drain() {
            if keep(p.data()) {
                got.push(p);
            } else {
                cache.free(p);
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    got
}

/// Receives from `rx` until `want` test frames arrived or `WAIT` passed.
fn recv_frames(rx: &mut dyn RxQueue, want: usize, pool: &Pool) -> Vec<packet::Packet> {
    recv_matching(rx, want, pool, is_test_frame)
}

fn open(ifname: &str, pool: &Pool) -> AfXdpPort {
    AfXdpPort::open(&AfXdpConfig::new(ifname), pool).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn frames_from_the_peer_arrive_intact() {
    if !root_or_say_why("frames_from_the_peer_arrive_intact") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("rx");
        let pool = Pool::with_frames(4096);
        let port = open(&veth.port, &pool);
        assert!(port.native(), "veth supports native XDP");
        let mut rx = port.open_rx(0).unwrap();
        let fd = rx
            .readiness_fd()
            .expect("an AF_XDP queue has a readiness fd");
        let peer = Raw::new(&veth.peer);
        let sent: Vec<Vec<u8>> = (0..20)
            .map(|i| test_frame(i, 60 + 70 * i as usize))
            .collect();
        for f in &sent {
            peer.send(f);
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, 2000) };
        assert_eq!(ready, 1, "the readiness fd did not become readable");
        let got = recv_frames(rx.as_mut(), sent.len(), &pool);
        let got_bytes: Vec<&[u8]> = got.iter().map(|p| p.data()).collect();
        let want: Vec<&[u8]> = sent.iter().map(|f| &f[..]).collect();
        assert_eq!(got_bytes, want);
        let stats = port.stats();
        assert!(stats.rx_packets >= 20, "{stats:?}");
        let mut cache = pool.cache();
        got.into_iter().for_each(|p| cache.free(p));

        // A queue dropped and opened again (the datapath moving it to another thread) goes on
        // where it left off.
        drop(rx);
        let mut rx = port.open_rx(0).unwrap();
        let again = test_frame(77, 300);
        peer.send(&again);
        let got = recv_frames(rx.as_mut(), 1, &pool);
        assert_eq!(got.first().map(|p| p.data()), Some(&again[..]));
        got.into_iter().for_each(|p| cache.free(p));
    });
}

#[test]
fn frames_the_port_sends_arrive_at_the_peer() {
    if !root_or_say_why("frames_the_port_sends_arrive_at_the_peer") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("tx");
        let pool = Pool::with_frames(4096);
        let port = open(&veth.port, &pool);
        let mut tx = port.open_tx(0).unwrap();
        let peer = Raw::new(&veth.peer);
        let mut cache = pool.cache();
        let frames: Vec<Vec<u8>> = (0..40)
            .map(|i| test_frame(i, 64 + 33 * i as usize))
            .collect();
        for chunk in frames.chunks(packet::BATCH_SIZE) {
            let mut batch = Batch::new();
            for f in chunk {
                batch.push(cache.alloc_from(f).unwrap()).unwrap();
            }
            let n = tx.send(&mut batch);
            assert_eq!(n, chunk.len(), "the tx ring had room for the whole batch");
        }
        for want in &frames {
            let got = peer
                .recv_test_frame(WAIT)
                .expect("a frame the port sent did not reach the peer");
            assert_eq!(&got, want);
        }
        tx.flush();
        assert_eq!(port.stats().tx_packets, 40);
    });
}

#[test]
fn forwarding_between_ports_of_one_pool_copies_nothing() {
    if !root_or_say_why("forwarding_between_ports_of_one_pool_copies_nothing") {
        return;
    }
    in_netns(|| {
        let a = Veth::new("fa");
        let b = Veth::new("fb");
        let pool = Pool::with_frames(8192);
        let pa = open(&a.port, &pool);
        let pb = open(&b.port, &pool);
        let mut rx = pa.open_rx_queue(0).unwrap();
        let mut tx = pb.open_tx_queue(0).unwrap();
        let src = Raw::new(&a.peer);
        let dst = Raw::new(&b.peer);
        let sent: Vec<Vec<u8>> = (0..16).map(|i| test_frame(i, 100 + i as usize)).collect();
        for f in &sent {
            src.send(f);
        }
        let got = recv_frames(&mut rx, sent.len(), &pool);
        assert_eq!(got.len(), sent.len());
        let mut received: Vec<u32> = got.iter().map(|p| p.frame()).collect();
        let mut batch = Batch::new();
        for p in got {
            batch.push(p).unwrap();
        }
        assert_eq!(tx.send(&mut batch), sent.len());
        for want in &sent {
            assert_eq!(dst.recv_test_frame(WAIT).as_ref(), Some(want));
        }
        assert_eq!(tx.copies(), 0, "a packet of the same pool was copied");
        // The frames the kernel sent are the very frames it received on the other port.
        let mut completed = Vec::new();
        let start = Instant::now();
        while completed.len() < sent.len() && start.elapsed() < WAIT {
            tx.completed_frames(&mut completed);
            std::thread::sleep(Duration::from_millis(1));
        }
        received.sort_unstable();
        completed.sort_unstable();
        assert_eq!(completed, received);

        // A packet of another pool is copied once, and still arrives.
        let other = Pool::with_frames(64);
        let mut other_cache = other.cache();
        let foreign = test_frame(99, 80);
        batch
            .push(other_cache.alloc_from(&foreign).unwrap())
            .unwrap();
        assert_eq!(tx.send(&mut batch), 1);
        assert_eq!(tx.copies(), 1);
        assert_eq!(dst.recv_test_frame(WAIT), Some(foreign));
    });
}

#[test]
fn dropping_the_port_removes_the_program() {
    if !root_or_say_why("dropping_the_port_removes_the_program") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("dr");
        let pool = Pool::with_frames(4096);
        let port = open(&veth.port, &pool);
        let rx = port.open_rx(0).unwrap();
        assert!(
            veth.has_xdp(),
            "{}",
            ip(&["link", "show", "dev", &veth.port])
        );
        drop(port);
        assert!(
            veth.wait_xdp(false, WAIT),
            "program still attached after drop: {}",
            ip(&["link", "show", "dev", &veth.port])
        );
        drop(rx);
        // And the interface can be opened again.
        let again = open(&veth.port, &pool);
        assert!(veth.has_xdp());
        drop(again);
    });
}

#[test]
fn every_frame_is_back_in_the_pool_after_close() {
    if !root_or_say_why("every_frame_is_back_in_the_pool_after_close") {
        return;
    }
    in_netns(|| {
        let a = Veth::new("ca");
        let b = Veth::new("cb");
        let pool = Pool::with_frames(4096);
        {
            let pa = open(&a.port, &pool);
            let pb = open(&b.port, &pool);
            let mut rx = pa.open_rx_queue(0).unwrap();
            let mut tx = pb.open_tx_queue(0).unwrap();
            assert!(rx.frames_in_kernel() > 0, "the fill ring was filled");
            let src = Raw::new(&a.peer);
            let dst = Raw::new(&b.peer);
            for i in 0..8 {
                src.send(&test_frame(i, 90));
            }
            let got = recv_frames(&mut rx, 8, &pool);
            let mut batch = Batch::new();
            got.into_iter().for_each(|p| batch.push(p).unwrap());
            assert_eq!(tx.send(&mut batch), 8);
            for _ in 0..8 {
                assert!(dst.recv_test_frame(WAIT).is_some());
            }
            let start = Instant::now();
            while tx.frames_in_flight() > 0 && start.elapsed() < WAIT {
                tx.flush();
            }
            // Queues dropped before or after the port: either order gives everything back.
            drop(tx);
            drop(pb);
            drop(pa);
            drop(rx);
        }
        assert_eq!(pool.shared_free(), 4096, "frames lost by a closed port");
    });
}

#[test]
fn every_queue_gets_a_socket() {
    if !root_or_say_why("every_queue_gets_a_socket") {
        return;
    }
    in_netns(|| {
        let veth = Veth::with_queues("mq", 2);
        let pool = Pool::with_frames(8192);
        let cfg = AfXdpConfig {
            queues: 2,
            ..AfXdpConfig::new(&veth.port)
        };
        let port = AfXdpPort::open(&cfg, &pool).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(port.capabilities().rx_queues, 2);
        let mut q0 = port.open_rx(0).unwrap();
        let mut q1 = port.open_rx(1).unwrap();
        assert_ne!(q0.readiness_fd(), q1.readiness_fd());
        let peer = Raw::new(&veth.peer);
        for i in 0..32 {
            peer.send(&test_frame(i, 64));
        }
        // The kernel picks the queue; together the two get every frame.
        let mut cache = pool.cache();
        let (mut n, mut batch) = (0, Batch::new());
        let start = Instant::now();
        while n < 32 && start.elapsed() < WAIT {
            for q in [&mut q0, &mut q1] {
                q.recv(&mut batch);
                n += batch
                    .as_slice()
                    .iter()
                    .filter(|p| is_test_frame(p.data()))
                    .count();
                batch.free_into(&mut cache);
            }
        }
        assert_eq!(n, 32);
        // A tx queue on each queue too.
        assert!(port.open_tx(1).is_ok());
    });
}

#[test]
fn skb_mode_works_too() {
    if !root_or_say_why("skb_mode_works_too") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("sk");
        let pool = Pool::with_frames(4096);
        let cfg = AfXdpConfig {
            mode: XdpMode::Skb,
            ..AfXdpConfig::new(&veth.port)
        };
        let port = AfXdpPort::open(&cfg, &pool).unwrap();
        assert!(!port.native());
        assert!(ip(&["link", "show", "dev", &veth.port]).contains("xdpgeneric"));
        let mut rx = port.open_rx(0).unwrap();
        let f = test_frame(7, 200);
        Raw::new(&veth.peer).send(&f);
        let got = recv_frames(rx.as_mut(), 1, &pool);
        assert_eq!(got.first().map(|p| p.data()), Some(&f[..]));
        pool.cache().free(got.into_iter().next().unwrap());
    });
}

#[test]
fn a_stale_program_attached_the_old_way_is_replaced() {
    if !root_or_say_why("a_stale_program_attached_the_old_way_is_replaced") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("st");
        // What a killed switch of the old kind leaves: our program, attached through netlink,
        // with no process holding it.
        let obj = concat!(env!("OUT_DIR"), "/xsk_redirect.o");
        ip(&[
            "link",
            "set",
            "dev",
            &veth.port,
            "xdpgeneric",
            "obj",
            obj,
            "sec",
            "xdp",
        ]);
        assert!(veth.has_xdp());
        let pool = Pool::with_frames(4096);
        let port = open(&veth.port, &pool);
        let show = ip(&["link", "show", "dev", &veth.port]);
        assert!(
            show.contains("xdp") && !show.contains("xdpgeneric"),
            "ours (native) replaced the stale generic one: {show}"
        );
        let mut rx = port.open_rx(0).unwrap();
        let f = test_frame(3, 128);
        Raw::new(&veth.peer).send(&f);
        let got = recv_frames(rx.as_mut(), 1, &pool);
        assert_eq!(got.len(), 1);
        pool.cache().free(got.into_iter().next().unwrap());
        drop(rx);
        drop(port);
        assert!(veth.wait_xdp(false, WAIT), "not stacked: nothing left");
    });
}

#[test]
fn errors_name_the_fix() {
    if !root_or_say_why("errors_name_the_fix") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("er");
        let pool = Pool::with_frames(4096);
        let e = |cfg: AfXdpConfig| AfXdpPort::open(&cfg, &pool).unwrap_err().to_string();
        let too_many = e(AfXdpConfig {
            queues: 4,
            ..AfXdpConfig::new(&veth.port)
        });
        assert!(
            too_many.contains("has 1 receive queue(s) (ethtool -l"),
            "{too_many}"
        );
        let missing = e(AfXdpConfig::new("hyNoSuchIf9"));
        assert!(
            missing.contains("no interface named 'hyNoSuchIf9'"),
            "{missing}"
        );
        let zc = e(AfXdpConfig {
            zero_copy: port::afxdp::ZeroCopy::On,
            ..AfXdpConfig::new(&veth.port)
        });
        assert!(zc.contains("zerocopy=auto or zerocopy=off"), "{zc}");
        assert!(
            veth.wait_xdp(false, WAIT),
            "a failed open left its program attached"
        );
        let small = Pool::with_frames(64);
        let tiny = AfXdpPort::open(&AfXdpConfig::new(&veth.port), &small)
            .unwrap_err()
            .to_string();
        assert!(tiny.contains("bigger pool"), "{tiny}");
        let jumbo = Pool::new(&packet::PoolConfig {
            frames: 4096,
            frame_size: 16384,
            ..packet::PoolConfig::default()
        })
        .unwrap();
        let big = AfXdpPort::open(&AfXdpConfig::new(&veth.port), &jumbo)
            .unwrap_err()
            .to_string();
        assert!(
            big.contains("16384-byte frames") && big.contains("afpacket:"),
            "{big}"
        );
        assert!(
            veth.wait_xdp(false, WAIT),
            "a refused jumbo pool left a program attached"
        );
        // One owner per queue.
        let port = open(&veth.port, &pool);
        let twice = e(AfXdpConfig::new(&veth.port));
        assert!(twice.contains("already open as an AF_XDP port"), "{twice}");
        assert!(
            veth.has_xdp(),
            "the failed second open left the first one attached"
        );
        let _rx = port.open_rx(0).unwrap();
        let twice = port.open_rx_queue(0).unwrap_err().to_string();
        assert!(twice.contains("already open"), "{twice}");
        let none = port.open_tx_queue(1).unwrap_err().to_string();
        assert!(none.contains("queues 0..1"), "{none}");
    });
}

/// An ICMP echo request from 10.0.0.1 to 10.0.0.2.
fn ping_frame() -> Vec<u8> {
    use packet::builder::{Ipv4Spec, L3Spec, L4Spec, PacketSpec};
    PacketSpec {
        l3: L3Spec::Ipv4(Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into())),
        l4: L4Spec::Icmp { ty: 8, code: 0 },
        frame_len: 98,
        ..PacketSpec::default()
    }
    .build()
}

/// Every frame `rx` hands out within `WAIT`, up to `want`, as bytes.
fn recv_any(rx: &mut dyn RxQueue, want: usize, pool: &Pool) -> Vec<Vec<u8>> {
    let mut cache = pool.cache();
    recv_matching(rx, want, pool, |_| true)
        .into_iter()
        .map(|p| {
            let f = p.data().to_vec();
            cache.free(p);
            f
        })
        .collect()
}

#[test]
fn control_frames_take_the_priority_path() {
    if !root_or_say_why("control_frames_take_the_priority_path") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("pr");
        let pool = Pool::with_frames(4096);
        let port = open(&veth.port, &pool);
        assert_eq!(port.priority_queues(), 1, "prio=on is the default");
        assert_eq!(port.capabilities().tx_queues, 2, "one more for the lane");
        let mut rx = port.open_rx(0).unwrap();
        let mut prio = port.open_priority_rx(0).unwrap();
        let peer = Raw::new(&veth.peer);
        let ping = ping_frame();
        let bulk = test_frame(5, 200);
        peer.send(&bulk);
        peer.send(&ping);
        assert_eq!(recv_any(prio.as_mut(), 1, &pool), vec![ping.clone()]);
        let got = recv_frames(rx.as_mut(), 1, &pool);
        assert_eq!(got.first().map(|p| p.data()), Some(&bulk[..]));
        got.into_iter().for_each(|p| pool.cache().free(p));
        assert_eq!(port.stats().rx_priority, 1);
        // The lane's transmit queue reaches the peer as the others do.
        let mut lane_tx = port.open_tx(1).unwrap();
        let out = test_frame(9, 120);
        let mut batch = Batch::new();
        batch.push(pool.cache().alloc_from(&out).unwrap()).unwrap();
        assert_eq!(lane_tx.send(&mut batch), 1);
        assert_eq!(peer.recv_test_frame(WAIT), Some(out));
        assert!(port.open_tx(2).is_err());
        drop((rx, prio, lane_tx, port));

        // prio=off: the ping is the AF_XDP socket's like any frame.
        let cfg = AfXdpConfig {
            prio: false,
            ..AfXdpConfig::new(&veth.port)
        };
        let port = AfXdpPort::open(&cfg, &pool).unwrap();
        assert_eq!(port.priority_queues(), 0);
        let mut rx = port.open_rx(0).unwrap();
        peer.send(&ping);
        assert_eq!(recv_any(rx.as_mut(), 1, &pool), vec![ping]);
    });
}

/// Ingress policing in the XDP program: past the bucket, frames are dropped before the
/// switch's socket sees them, counted; turning it off passes everything again.
#[test]
fn the_xdp_program_polices_before_the_socket() {
    if !root_or_say_why("the_xdp_program_polices_before_the_socket") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("pol");
        let pool = Pool::with_frames(4096);
        let port = open(&veth.port, &pool);
        let (xdp_drop, xdp_redirect) = (1, 4);
        // 8 kbit/s (1,000 bytes a second), a bucket of 13 kbit (1,625 bytes): thirteen
        // 125-byte frames, then one more every 125 ms.
        let p = port::Policing {
            rate_kbps: 8,
            burst_kbit: 13,
            ..Default::default()
        };
        assert!(
            port.police_early(&p),
            "an AF_XDP port polices in its program"
        );
        let frame = test_frame(1, 125);
        let start = Instant::now();
        let verdicts: Vec<u32> = (0..200)
            .map(|_| port.xdp_verdict(0, &frame).unwrap())
            .collect();
        let secs = start.elapsed().as_secs_f64();
        let passed = verdicts.iter().filter(|v| **v == xdp_redirect).count();
        let dropped = verdicts.iter().filter(|v| **v == xdp_drop).count();
        assert_eq!(passed + dropped, 200, "{verdicts:?}");
        let most = 13 + (secs * 8.0).ceil() as usize;
        assert!(
            (13..=most).contains(&passed),
            "{passed} of 200 passed in {secs:.3} s (bucket 13, then 8 a second)"
        );
        assert_eq!(port.early_policed(), dropped as u64);
        assert!(!port.police_early(&port::Policing::default()));
        assert!(
            (0..20).all(|_| port.xdp_verdict(0, &frame).unwrap() == xdp_redirect),
            "policing off passes every frame"
        );
        assert_eq!(port.early_policed(), dropped as u64);
    });
}

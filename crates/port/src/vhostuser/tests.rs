//! The vhost-user queues against a pretend guest ([`super::guest::FakeGuest`]): frames both
//! ways byte for byte, offloads, mergeable buffers, and a guest that lies.

use std::sync::Arc;

use packet::builder::{Ipv4Spec, L3Spec, L4Spec, PacketSpec};
use packet::{Batch, Gso, Pool};

use super::guest::{FakeGuest, GPA};
use super::live::NetFeatures;
use super::ring::{DESC_F_INDIRECT, DESC_F_NEXT, USED_F_NO_NOTIFY};
use super::rx::VhostRx;
use super::tx::VhostTx;
use super::Shared;
use crate::claim::QueueSlot;
use crate::vnet::{F_NEEDS_CSUM, GSO_TCPV4};
use crate::{RxQueue, TxQueue};

const NET: NetFeatures = NetFeatures {
    hdr_len: 12,
    mrg_rxbuf: true,
    guest_tso4: true,
    guest_tso6: true,
    guest_ecn: true,
};

fn udp(len: usize, fill: u8) -> Vec<u8> {
    let mut s = PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        1,
        2,
        len,
    );
    s.payload_fill = fill;
    s.build()
}

/// A queue pair of one port on `guest`'s ring (the same ring serves as both here: tests use
/// one direction at a time).
struct Rig {
    pool: Pool,
    shared: Arc<Shared>,
    rx: VhostRx,
    tx: VhostTx,
}

fn rig() -> Rig {
    let pool = Pool::with_frames(256);
    let shared = Arc::new(Shared::new("t", 1).unwrap());
    let claim = |s: &QueueSlot| s.claim("t", "q").unwrap();
    let rx = VhostRx::new(
        shared.clone(),
        0,
        pool.cache(),
        claim(&QueueSlot::default()),
    );
    let tx = VhostTx::new(
        shared.clone(),
        0,
        pool.cache(),
        claim(&QueueSlot::default()),
    );
    Rig {
        pool,
        shared,
        rx,
        tx,
    }
}

impl Rig {
    /// Starts the guest's ring as the guest's transmit vring (our receive queue).
    fn guest_tx(&self, g: &FakeGuest, net: NetFeatures) {
        self.shared.vrings[1].start(g.live(0, net, false));
    }

    /// Starts the guest's ring as its receive vring (our transmit queue).
    fn guest_rx(&self, g: &FakeGuest, net: NetFeatures, event_idx: bool) {
        self.shared.vrings[0].start(g.live(0, net, event_idx));
    }

    fn recv_all(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..64 {
            let mut b = Batch::new();
            if self.rx.recv(&mut b) == 0 && b.is_empty() {
                break;
            }
            for p in b.drain() {
                out.push(p.data().to_vec());
                self.pool.cache().free(p);
            }
        }
        out
    }
}

#[test]
fn frames_from_the_guest_arrive_whole_in_any_layout() {
    let mut g = FakeGuest::new(64, 1 << 16);
    let mut r = rig();
    r.guest_tx(&g, NET);
    let hdr = [0u8; 12];
    let f1 = udp(60, 1);
    let f2 = udp(1000, 2);
    let f3 = udp(1514, 3);
    let h1 = g.send(&[&hdr, &f1]);
    let mut joined = hdr.to_vec();
    joined.extend_from_slice(&f2);
    let h2 = g.send(&[&joined]);
    // Header split over two buffers, the frame over three, through an indirect table.
    let h3 = g.send_indirect(&[&hdr[..5], &hdr[5..], &f3[..100], &f3[100..101], &f3[101..]]);
    let got = r.recv_all();
    assert_eq!(got, vec![f1, f2, f3]);
    // Every head comes back used, in order, with length 0 (the device wrote nothing).
    assert_eq!(
        g.take_used(),
        vec![(h1.into(), 0), (h2.into(), 0), (h3.into(), 0)]
    );
    assert_eq!(
        g.used_flags(),
        USED_F_NO_NOTIFY,
        "the switch polls: no kicks"
    );
    let s = r.shared.rx[0].read();
    assert_eq!((s.0, s.3), (3, 0));
}

#[test]
fn a_partial_checksum_is_completed() {
    let mut g = FakeGuest::new(16, 1 << 14);
    let mut r = rig();
    r.guest_tx(&g, NET);
    let mut partial = udp(100, 9);
    // UDP checksum at 14 + 20 + 6: what a sender with offload leaves there, the folded
    // pseudo-header sum; the header asks for the rest to be computed.
    let pseudo = packet::checksum::pseudo_v4(0x0a00_0001, 0x0a00_0002, 17, 100 - 34);
    partial[40..42].copy_from_slice(&packet::checksum::fold(pseudo).to_be_bytes());
    let mut hdr = [0u8; 12];
    hdr[0] = F_NEEDS_CSUM;
    hdr[6..8].copy_from_slice(&34u16.to_le_bytes());
    hdr[8..10].copy_from_slice(&6u16.to_le_bytes());
    g.send(&[&hdr, &partial]);
    let got = r.recv_all();
    assert_eq!(got.len(), 1);
    let c = u16::from_be_bytes([got[0][40], got[0][41]]);
    // Recompute what the sender meant: a complete checksum over the datagram.
    let mut zeroed = got[0].clone();
    zeroed[40..42].fill(0);
    assert_eq!(c, udp_checksum(&zeroed), "the completed checksum verifies");
}

fn udp_checksum(f: &[u8]) -> u16 {
    let src = u32::from_be_bytes([f[26], f[27], f[28], f[29]]);
    let dst = u32::from_be_bytes([f[30], f[31], f[32], f[33]]);
    let l4 = &f[34..];
    let pseudo = packet::checksum::pseudo_v4(src, dst, 17, l4.len() as u16);
    !packet::checksum::fold(packet::checksum::sum(l4, pseudo))
}

#[test]
fn a_lying_guest_is_refused_and_counted_and_good_frames_still_pass() {
    let mut g = FakeGuest::new(16, 1 << 14);
    let mut r = rig();
    r.guest_tx(&g, NET);
    let hdr = [0u8; 12];
    let data = g.put_data(&udp(60, 1));
    let far = GPA + (1 << 30);
    // 0: a buffer outside guest memory.
    g.set_desc(0, far, 100, 0, 0);
    g.offer(0);
    // 1 -> 2 -> 1: a loop.
    g.set_desc(1, data, 72, DESC_F_NEXT, 2);
    g.set_desc(2, data, 72, DESC_F_NEXT, 1);
    g.offer(1);
    // 3: next out of the table.
    g.set_desc(3, data, 72, DESC_F_NEXT, 999);
    g.offer(3);
    // 4: an indirect table of a length that is not a multiple of 16.
    g.set_desc(4, data, 20, DESC_F_INDIRECT, 0);
    g.offer(4);
    // 5: a head outside the table.
    g.offer(500);
    // 6: an indirect table that holds an indirect descriptor.
    let mut table = Vec::new();
    table.extend_from_slice(&data.to_le_bytes());
    table.extend_from_slice(&16u32.to_le_bytes());
    table.extend_from_slice(&DESC_F_INDIRECT.to_le_bytes());
    table.extend_from_slice(&0u16.to_le_bytes());
    let t = g.put_data(&table);
    g.set_desc(6, t, 16, DESC_F_INDIRECT, 0);
    g.offer(6);
    // 7: a frame longer than a pool frame without a GSO request.
    let big = g.put_data(&vec![0u8; 4000]);
    g.set_desc(7, big, 4000, 0, 0);
    g.offer(7);
    // 8: shorter than the virtio-net header.
    g.set_desc(8, data, 5, 0, 0);
    g.offer(8);
    // Then a good frame.
    let f = udp(60, 7);
    let mut joined = hdr.to_vec();
    joined.extend_from_slice(&f);
    let a = g.put_data(&joined);
    g.set_desc(9, a, joined.len() as u32, 0, 0);
    g.offer(9);
    let got = r.recv_all();
    assert_eq!(got, vec![f]);
    assert_eq!(r.shared.rx[0].read().3, 8, "eight bad chains counted");
    assert_eq!(g.take_used().len(), 9, "every head is given back");
}

#[test]
fn an_available_index_too_far_ahead_stops_the_ring_and_counts_once() {
    let mut g = FakeGuest::new(16, 1 << 12);
    let mut r = rig();
    r.guest_tx(&g, NET);
    g.set_avail_idx(100);
    assert!(r.recv_all().is_empty());
    assert!(r.recv_all().is_empty());
    assert_eq!(r.shared.rx[0].read().3, 1);
    assert!(g.take_used().is_empty(), "nothing was touched");
}

fn tx_one(r: &mut Rig, frame: &[u8]) -> usize {
    let mut b = Batch::new();
    let mut c = r.pool.cache();
    b.push(c.alloc_from(frame).unwrap()).unwrap();
    let n = r.tx.send(&mut b);
    b.free_into(&mut c);
    n
}

#[test]
fn frames_to_the_guest_span_mergeable_buffers_with_their_count() {
    let mut g = FakeGuest::new(16, 1 << 15);
    let mut r = rig();
    r.guest_rx(&g, NET, false);
    let bufs: Vec<(u16, u64)> = (0..4).map(|_| g.post_rx(512)).collect();
    let f = udp(1000, 5);
    assert_eq!(tx_one(&mut r, &f), 1);
    let used = g.take_used();
    // 12 + 1000 bytes over 512-byte buffers: 512, 500.
    assert_eq!(used, vec![(bufs[0].0.into(), 512), (bufs[1].0.into(), 500)]);
    let mut got = g.read(bufs[0].1, 512);
    got.extend(g.read(bufs[1].1, 500));
    assert_eq!(u16::from_le_bytes([got[10], got[11]]), 2, "num_buffers");
    assert_eq!(&got[..10], &[0u8; 10], "no offload");
    assert_eq!(&got[12..], &f[..]);
    assert_eq!(r.shared.tx[0].read().0, 1);
}

#[test]
fn without_guest_buffers_the_frame_stays_and_a_too_small_one_is_dropped() {
    let mut g = FakeGuest::new(16, 1 << 14);
    let mut r = rig();
    let no_mrg = NetFeatures {
        mrg_rxbuf: false,
        ..NET
    };
    r.guest_rx(&g, no_mrg, false);
    // No buffer posted: nothing sent, the packet stays in the batch.
    let mut b = Batch::new();
    let mut c = r.pool.cache();
    b.push(c.alloc_from(&udp(60, 1)).unwrap()).unwrap();
    assert_eq!(r.tx.send(&mut b), 0);
    assert_eq!(b.len(), 1);
    b.free_into(&mut c);
    // One 100-byte buffer, a 1000-byte frame: it can never fit; dropped and counted, the
    // buffer left for the next frame, which fits.
    let (h, addr) = g.post_rx(100);
    assert_eq!(tx_one(&mut r, &udp(1000, 1)), 0);
    assert_eq!(r.shared.tx[0].read().2, 1);
    let small = udp(60, 4);
    assert_eq!(tx_one(&mut r, &small), 1);
    assert_eq!(g.take_used(), vec![(h.into(), 72)]);
    assert_eq!(&g.read(addr + 12, 60), &small);
}

#[test]
fn a_read_only_receive_buffer_is_refused_and_the_next_one_used() {
    let mut g = FakeGuest::new(16, 1 << 14);
    let mut r = rig();
    r.guest_rx(&g, NET, false);
    let a = g.put_data(&[0u8; 256]);
    g.set_desc(15, a, 256, 0, 0); // not device-writable
    g.offer(15);
    let (h, addr) = g.post_rx(256);
    let f = udp(64, 3);
    assert_eq!(tx_one(&mut r, &f), 1);
    assert_eq!(g.take_used(), vec![(15, 0), (h.into(), 76)]);
    assert_eq!(g.read(addr + 12, 64), f);
    assert_eq!(r.shared.tx[0].read().3, 1);
    assert_eq!(
        g.read(a, 12),
        vec![0u8; 12],
        "the read-only buffer was not written"
    );
}

fn tcp_super(payload: usize) -> Vec<u8> {
    let mut ip = Ipv4Spec::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
    ip.frag = 0x4000;
    PacketSpec {
        l3: L3Spec::Ipv4(ip),
        l4: L4Spec::Tcp {
            sp: 1,
            dp: 2,
            flags: 0x010,
        },
        frame_len: 54 + payload,
        ..PacketSpec::default()
    }
    .build()
}

fn super_packet(r: &Rig, payload: usize) -> packet::Packet {
    let f = tcp_super(payload);
    let mut c = r.pool.cache();
    let mut p = c.alloc_gso().expect("a super-packet frame");
    p.set_data(&f);
    p.set_gso(Some(Gso {
        v6: false,
        ecn: false,
        mss: 1000,
        outer: 0,
    }));
    p
}

#[test]
fn a_super_packet_goes_whole_to_a_guest_with_tso_and_cut_to_one_without() {
    let mut g = FakeGuest::new(64, 1 << 17);
    let mut r = rig();
    r.guest_rx(&g, NET, false);
    for _ in 0..4 {
        g.post_rx(4096);
    }
    assert!(r.tx.takes_supers(), "the guest negotiated TSO");
    let mut b = Batch::new();
    b.push(super_packet(&r, 5000)).unwrap();
    assert_eq!(r.tx.send(&mut b), 1);
    let used = g.take_used();
    let total: u32 = used.iter().map(|u| u.1).sum();
    assert_eq!(total as usize, 12 + 54 + 5000, "one frame, whole");
    let hdr = g.read(g.data_start(), 12);
    assert_eq!(hdr[0], F_NEEDS_CSUM);
    assert_eq!(hdr[1], GSO_TCPV4);
    assert_eq!(u16::from_le_bytes([hdr[4], hdr[5]]), 1000, "gso_size");
    assert_eq!(u16::from_le_bytes([hdr[10], hdr[11]]), used.len() as u16);

    // The same to a guest without TSO: five segments of at most 1000 payload bytes.
    let mut g = FakeGuest::new(64, 1 << 17);
    let mut r2 = rig();
    assert!(!r2.tx.takes_supers(), "no ring yet");
    r2.guest_rx(
        &g,
        NetFeatures {
            guest_tso4: false,
            ..NET
        },
        false,
    );
    for _ in 0..8 {
        g.post_rx(2048);
    }
    assert!(
        !r2.tx.takes_supers(),
        "a guest without TSO: the data path joins nothing"
    );
    let mut b = Batch::new();
    b.push(super_packet(&r2, 5000)).unwrap();
    assert_eq!(r2.tx.send(&mut b), 1);
    let used = g.take_used();
    assert_eq!(used.len(), 5);
    assert!(used.iter().all(|u| u.1 as usize == 12 + 54 + 1000));
    assert_eq!(r2.shared.tx[0].read().0, 5, "five frames sent");
}

#[test]
fn interrupts_follow_the_guest_s_wish() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut g = FakeGuest::new(16, 1 << 14);
    let r = rig();
    // SAFETY: eventfd returns a new descriptor we own.
    let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(efd >= 0);
    // SAFETY: efd is ours.
    let call = unsafe { OwnedFd::from_raw_fd(efd) };
    let ring = super::ring::SplitRing::new(&g.mem(), &g.addrs(), false).unwrap();
    let live = Arc::new(super::live::LiveRing::new(
        ring,
        g.mem(),
        0,
        Some(call.try_clone().unwrap()),
        NET,
    ));
    r.shared.vrings[0].start(live);
    let mut r = r;
    let count = || {
        let mut v = 0u64;
        // SAFETY: 8-byte read into a local from our eventfd.
        let n = unsafe { libc::read(efd, (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            v
        } else {
            0
        }
    };
    g.post_rx(256);
    assert_eq!(tx_one(&mut r, &udp(60, 1)), 1);
    assert_eq!(count(), 1, "interrupt when the guest did not say no");
    g.set_avail_flags(super::ring::AVAIL_F_NO_INTERRUPT);
    g.post_rx(256);
    assert_eq!(tx_one(&mut r, &udp(60, 1)), 1);
    assert_eq!(count(), 0, "none when it said no");
    drop(call);
}

#[test]
fn stopping_a_ring_returns_where_its_owner_got() {
    let mut g = FakeGuest::new(16, 1 << 14);
    let mut r = rig();
    r.guest_tx(&g, NET);
    for _ in 0..5 {
        g.send(&[&[0u8; 12], &udp(60, 1)]);
    }
    assert_eq!(r.recv_all().len(), 5);
    assert_eq!(r.shared.vrings[1].stop(), 5);
    // Stopped: nothing more is read, even when the guest offers more.
    g.send(&[&[0u8; 12], &udp(60, 1)]);
    assert!(r.recv_all().is_empty());
    // Started again from 5: the sixth frame arrives.
    r.shared.vrings[1].start(g.live(5, NET, false));
    assert_eq!(r.recv_all().len(), 1);
}

#[test]
fn a_server_socket_replaces_a_stale_one_and_refuses_anything_else() {
    use super::{Mode, VhostUserConfig, VhostUserPort};
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::with_frames(64);
    let server = |p: &std::path::Path| VhostUserConfig {
        mode: Mode::Server,
        ..VhostUserConfig::new(p)
    };
    // A stale socket (bound, nobody listening any more): replaced.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let port = VhostUserPort::open(server(&stale), &pool).expect("stale socket replaced");
    // While it listens, a second server on the path is refused, naming the fix.
    let e = VhostUserPort::open(server(&stale), &pool)
        .unwrap_err()
        .to_string();
    assert!(e.contains("another process listens"), "{e}");
    drop(port);
    assert!(!stale.exists(), "the port removes the socket it created");
    // A plain file: refused, not removed.
    let file = dir.path().join("file.sock");
    std::fs::write(&file, b"x").unwrap();
    let e = VhostUserPort::open(server(&file), &pool)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a socket"), "{e}");
    assert!(file.exists());
    // A folder that does not exist.
    let e = VhostUserPort::open(server(&dir.path().join("no/such.sock")), &pool)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot create the socket"), "{e}");
    // Too many queues.
    let mut cfg = VhostUserConfig::new(dir.path().join("q.sock"));
    cfg.queues = 65;
    let e = VhostUserPort::open(cfg, &pool).unwrap_err().to_string();
    assert!(e.contains("queues=65"), "{e}");
}

#[test]
fn specs_name_the_port_and_refuse_unknown_options() {
    let pool = Pool::with_frames(64);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vm7.sock");
    let p = crate::open(&format!("vhostuser:{}", path.display()), &pool).unwrap();
    assert_eq!(p.name(), "vm7");
    assert!(!p.link_up(), "no VM yet: link down");
    assert_eq!(p.capabilities().rx_queues, 1);
    let p = crate::open(
        &format!("vhostuser:{},queues=2,name=web", path.display()),
        &pool,
    )
    .unwrap();
    assert_eq!((p.name(), p.capabilities().tx_queues), ("web", 2));
    let err = |s: &str| crate::open(s, &pool).err().expect("refused").to_string();
    assert!(err("vhostuser:/x.sock,color=red").contains("valid options: mode, queues, name"));
    assert!(err("vhostuser:/x.sock,mode=both").contains("give mode=client"));
    assert!(err("vhostuser:").contains("starts with the socket's path"));
}

/// Whether `fd` is readable now.
fn readable(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[test]
fn an_idle_queue_asks_for_kicks_so_its_thread_can_sleep_and_stops_when_frames_flow() {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut g = FakeGuest::new(16, 1 << 14);
    let mut r = rig();
    let ready = r.rx.readiness_fd().expect("a readiness descriptor");
    // SAFETY: eventfd returns a new descriptor we own.
    let kick = unsafe { std::fs::File::from_raw_fd(libc::eventfd(0, 0)) };
    let dup = r.shared.vrings[1].set_kick(Some(&kick));
    let live = super::live::LiveRing::new(
        super::ring::SplitRing::new(&g.mem(), &g.addrs(), true).unwrap(),
        g.mem(),
        0,
        None,
        NET,
    )
    .with_kick(dup);
    r.shared.vrings[1].start(Arc::new(live));
    assert!(readable(ready), "a published ring wakes the queue's thread");
    let mut b = Batch::new();
    r.rx.recv(&mut b);
    assert!(!readable(ready), "the owner took the wake-up");
    assert_eq!(g.used_flags(), USED_F_NO_NOTIFY, "polling: no kicks");
    for _ in 0..64 {
        r.rx.recv(&mut b);
    }
    assert_eq!(g.used_flags(), 0, "idle: the guest is asked to kick");
    // The guest offers a frame and kicks: the thread's descriptor is readable.
    g.send(&[&[0u8; 12], &udp(60, 1)]);
    let one = 1u64.to_ne_bytes();
    // SAFETY: an 8-byte write to our eventfd.
    assert_eq!(
        unsafe { libc::write(kick.as_raw_fd(), one.as_ptr().cast(), 8) },
        8
    );
    assert!(readable(ready));
    assert_eq!(r.recv_all().len(), 1);
    assert_eq!(
        g.used_flags(),
        USED_F_NO_NOTIFY,
        "frames flow: kicks off again"
    );
    assert!(!readable(ready), "the kick was read");
}

#[test]
fn a_transmit_queue_whose_pair_the_guest_does_not_run_sends_on_one_that_runs() {
    let mut g = FakeGuest::new(16, 1 << 14);
    let pool = Pool::with_frames(64);
    let shared = Arc::new(Shared::new("mq", 2).unwrap());
    let slots = [QueueSlot::default(), QueueSlot::default()];
    let mut tx0 = VhostTx::new(
        shared.clone(),
        0,
        pool.cache(),
        slots[0].claim("mq", "0").unwrap(),
    );
    let mut tx1 = VhostTx::new(
        shared.clone(),
        1,
        pool.cache(),
        slots[1].claim("mq", "1").unwrap(),
    );
    // The guest runs pair 0 only (vring 0 is its receive ring).
    shared.vrings[0].start(g.live(0, NET, false));
    for _ in 0..4 {
        g.post_rx(256);
    }
    let mut c = pool.cache();
    for (k, q) in [0, 1, 1, 0].into_iter().enumerate() {
        let tx = if q == 0 { &mut tx0 } else { &mut tx1 };
        let mut b = Batch::new();
        b.push(c.alloc_from(&udp(60, k as u8)).unwrap()).unwrap();
        assert_eq!(tx.send(&mut b), 1, "send {k} on queue {q}");
    }
    // All four in vring 0, in order, each head used once.
    let used = g.take_used();
    assert_eq!(
        used.iter().map(|u| u.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(shared.tx[0].read().0 + shared.tx[1].read().0, 4);
}

#[test]
fn a_front_end_that_sends_garbage_is_cut_off_and_the_port_serves_the_next() {
    use super::{Mode, VhostUserConfig, VhostUserPort};
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.sock");
    let pool = Pool::with_frames(64);
    let port = VhostUserPort::open(
        VhostUserConfig {
            mode: Mode::Server,
            ..VhostUserConfig::new(&path)
        },
        &pool,
    )
    .unwrap();
    let wait_errors = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while port.protocol_errors() < n {
            assert!(
                Instant::now() < deadline,
                "{} errors",
                port.protocol_errors()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // Random bytes: not a message. The session ends; the error is counted.
    let mut s = UnixStream::connect(&path).unwrap();
    let mut x = 0x1234_5678_9abc_def1u64;
    let junk: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let _ = s.write_all(&junk);
    wait_errors(1);
    // A well-formed header for GET_FEATURES, but with an unknown request code next: the
    // first is answered, then the session ends.
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut get_features = Vec::new();
    get_features.extend_from_slice(&1u32.to_le_bytes()); // GET_FEATURES
    get_features.extend_from_slice(&1u32.to_le_bytes()); // version 1
    get_features.extend_from_slice(&0u32.to_le_bytes()); // no body
    s.write_all(&get_features).unwrap();
    let mut reply = [0u8; 20];
    s.read_exact(&mut reply).unwrap();
    let features = u64::from_le_bytes(reply[12..20].try_into().unwrap());
    assert_eq!(features, super::offered_features());
    let mut bad = Vec::new();
    bad.extend_from_slice(&9999u32.to_le_bytes());
    bad.extend_from_slice(&1u32.to_le_bytes());
    bad.extend_from_slice(&0u32.to_le_bytes());
    s.write_all(&bad).unwrap();
    wait_errors(2);
    // The port still takes a front end.
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&get_features).unwrap();
    s.read_exact(&mut reply).unwrap();
    assert!(!crate::Port::link_up(&port));
}

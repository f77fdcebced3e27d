//! TAP tests (root only; they say so loudly when skipped): frames written to the port come
//! out of the device, where an AF_PACKET port on the same device sees them, and back.

use std::time::{Duration, Instant};

use packet::builder::PacketSpec;
use packet::{Batch, Pool};

use super::*;
use crate::afpacket::tests::root_or_skip;
use crate::afpacket::{AfPacketConfig, AfPacketPort};

fn name(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("ht{}{n}{tag}", std::process::id() % 100_000)
}

fn frame(i: u16) -> Vec<u8> {
    PacketSpec::udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        1000 + i,
        2000,
        80,
    )
    .build()
}

/// Receives from `rx` until `want` of the test's frames (source MAC 02::1) came, or 3 s;
/// returns them and how many other frames came (the kernel's own chatter on a new device,
/// such as an IPv6 router solicitation sent before the test could turn IPv6 off).
fn pump(rx: &mut dyn RxQueue, want: usize, pool: &Pool) -> (Vec<Vec<u8>>, u64) {
    let (mut got, mut other) = (Vec::new(), 0);
    let mut cache = pool.cache();
    let deadline = Instant::now() + Duration::from_secs(3);
    while got.len() < want && Instant::now() < deadline {
        let mut b = Batch::new();
        rx.recv(&mut b);
        for p in b.drain() {
            if p.data().get(6..12) == Some(&[2, 0, 0, 0, 0, 1][..]) {
                got.push(p.data().to_vec());
            } else {
                other += 1;
            }
            cache.free(p);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    (got, other)
}

/// A TAP port on a new device named after `tag`, IPv6 off on it, over a pool of `frames`.
fn new_tap(tag: &str, frames: u32) -> (String, Pool, TapPort) {
    let dev = name(tag);
    let pool = Pool::with_frames(frames);
    let tap = TapPort::new(&format!("tap:{dev}"), TapConfig::new(&dev), &pool).unwrap();
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
    (dev, pool, tap)
}

#[test]
fn frames_go_through_the_device_both_ways() {
    if !root_or_skip("frames_go_through_the_device_both_ways") {
        return;
    }
    let (dev, pool, tap) = new_tap("a", 512);
    // The device side: an AF_PACKET port on the tap sees what the tap port sends.
    let cfg = AfPacketConfig {
        prio: false,
        ..AfPacketConfig::new(&dev)
    };
    let kernel = AfPacketPort::new("k", cfg, &pool).unwrap();
    let mut k_rx = kernel.open_rx(0).unwrap();
    let mut k_tx = kernel.open_tx(0).unwrap();
    let mut t_rx = tap.open_rx(0).unwrap();
    let mut t_tx = tap.open_tx(0).unwrap();
    assert!(t_rx.readiness_fd().is_some());
    let mut cache = pool.cache();
    let frames: Vec<Vec<u8>> = (0..20).map(frame).collect();

    let mut b = Batch::new();
    for f in &frames {
        b.push(cache.alloc_from(f).unwrap()).unwrap();
    }
    assert_eq!(t_tx.send(&mut b), 20);
    assert_eq!(pump(k_rx.as_mut(), 20, &pool).0, frames);

    for f in &frames {
        b.push(cache.alloc_from(f).unwrap()).unwrap();
    }
    assert_eq!(k_tx.send(&mut b), 20);
    let (got, chatter) = pump(t_rx.as_mut(), 20, &pool);
    assert_eq!(got, frames);
    let s = tap.stats();
    assert_eq!((s.rx_packets, s.tx_packets), (20 + chatter, 20));
}

/// `frame` in a frame of `cache` marked as a super-packet encapsulated whole in VXLAN over
/// IPv4 (50 bytes of outer headers, MSS 1398).
fn tunnelled(cache: &mut packet::PoolCache, frame: &[u8]) -> packet::Packet {
    tunnelled_by(cache, frame, 50)
}

/// `frame` marked as a super-packet encapsulated whole behind `outer` bytes of headers.
fn tunnelled_by(cache: &mut packet::PoolCache, frame: &[u8], outer: u8) -> packet::Packet {
    let mut p = cache.alloc_copy(frame).unwrap();
    assert!(p.set_gso(Some(packet::Gso {
        v6: false,
        ecn: false,
        mss: 1398,
        outer,
    })));
    p
}

#[test]
fn a_tunnelled_super_packet_is_taken_whole_where_the_kernel_can_cut_it() {
    if !root_or_skip("a_tunnelled_super_packet_is_taken_whole_where_the_kernel_can_cut_it") {
        return;
    }
    let (_dev, pool, tap) = new_tap("g", 64);
    assert_eq!(
        tap.udp_tunnel_gso(),
        crate::vnet_tnl::kernel_has_tunnel_gso(),
        "the probe"
    );
    if !tap.udp_tunnel_gso() {
        eprintln!("SKIPPED: this kernel (before 6.17) takes no UDP-tunnelled super-packets");
        return;
    }
    // A VXLAN-encapsulated TCP super-packet of 5000 payload bytes (MSS 1398): the kernel
    // checks the tunnel header's offsets and types on the write and refuses (EINVAL) what
    // does not match, which the port would count as an error.
    let f = crate::vnet_tnl::tests::vxlan_v4(&crate::vnet_tnl::tests::inner(5000));
    let mut cache = pool.cache();
    let mut b = Batch::new();
    b.push(tunnelled(&mut cache, &f)).unwrap();
    let mut t_tx = tap.open_tx(0).unwrap();
    assert_eq!(t_tx.send(&mut b), 1);
    let s = tap.stats();
    assert_eq!((s.tx_packets, s.tx_errors), (1, 0));
    // The same over IPv6 (70 bytes of outer headers, GSO_UDP_TUNNEL_IPV6).
    let f6 = crate::vnet_tnl::tests::vxlan_v6(&crate::vnet_tnl::tests::inner(5000));
    b.push(tunnelled_by(&mut cache, &f6, 70)).unwrap();
    assert_eq!(t_tx.send(&mut b), 1);
    let s = tap.stats();
    assert_eq!((s.tx_packets, s.tx_errors), (2, 0));
    // Outer headers that do not say UDP: refused by the port before the kernel sees them.
    let mut g = f.clone();
    g[23] = 6;
    b.push(tunnelled(&mut cache, &g)).unwrap();
    assert_eq!(t_tx.send(&mut b), 0);
    assert_eq!(tap.stats().tx_errors, 1);
    // With tunnel_gso=off the port takes none: the same packet is an error there.
    let dev = name("o");
    let cfg = TapConfig {
        tunnel_gso: TunnelGso::Off,
        ..TapConfig::new(&dev)
    };
    let off = TapPort::new(&format!("tap:{dev}"), cfg, &pool).unwrap();
    assert!(!off.udp_tunnel_gso());
    b.push(tunnelled(&mut cache, &f)).unwrap();
    assert_eq!(off.open_tx(0).unwrap().send(&mut b), 0);
    assert_eq!(off.stats().tx_errors, 1);
}

#[test]
fn multi_queue_tap_opens_every_queue() {
    if !root_or_skip("multi_queue_tap_opens_every_queue") {
        return;
    }
    let dev = name("m");
    let pool = Pool::with_frames(64);
    let cfg = TapConfig {
        queues: 3,
        ..TapConfig::new(&dev)
    };
    let tap = TapPort::new(&format!("tap:{dev}"), cfg, &pool).unwrap();
    assert_eq!(tap.capabilities().rx_queues, 3);
    // Every queue open at once (each has its own claim).
    let open: Vec<_> = (0..3)
        .map(|q| (tap.open_rx(q).unwrap(), tap.open_tx(q).unwrap()))
        .collect();
    assert_eq!(open.len(), 3);
    // A single-queue open of the same multi-queue device is refused with the fix.
    let e = TapPort::new("tap:x", TapConfig::new(&dev), &pool)
        .unwrap_err()
        .to_string();
    assert!(e.contains("other flags"), "{e}");
}

#[test]
fn bad_names_are_refused() {
    let pool = Pool::with_frames(4);
    let e = TapPort::new("tap:x", TapConfig::new("a/b"), &pool)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a device name"), "{e}");
}

/// Deletes a persistent device on drop.
struct Persistent(String);

impl Drop for Persistent {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.0])
            .status();
    }
}

#[test]
fn attaches_to_an_existing_persistent_tap_and_leaves_it() {
    if !root_or_skip("attaches_to_an_existing_persistent_tap_and_leaves_it") {
        return;
    }
    let dev = name("p");
    crate::afpacket::tests::ip(&["tuntap", "add", "dev", &dev, "mode", "tap", "vnet_hdr"]);
    let guard = Persistent(dev.clone());
    let pool = Pool::with_frames(64);
    {
        let tap = TapPort::new(&format!("tap:{dev}"), TapConfig::new(&dev), &pool).unwrap();
        let mut tx = tap.open_tx(0).unwrap();
        let mut b = Batch::new();
        b.push(pool.cache().alloc_from(&frame(1)).unwrap()).unwrap();
        assert_eq!(tx.send(&mut b), 1);
    }
    let flags = std::fs::read_to_string(format!("/sys/class/net/{dev}/flags"))
        .expect("the persistent tap outlives the port");
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap();
    assert_eq!(flags & 1, 1, "the port set the device up");
    drop(guard);
}

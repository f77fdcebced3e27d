//! The next-hop resolver against a real kernel: a namespace with a veth to a second one, an
//! on-link prefix and a route through a gateway, IPv4 and IPv6. The resolver runs in a thread
//! that has entered the first namespace. Needs root and `ip`; without them it prints a loud
//! SKIPPED line (CI runs it as root). Every wait is bounded.

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use tunnel::{Resolver, Unreachable};

fn ip(args: &str) {
    let ok = Command::new("ip")
        .args(args.split_whitespace())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "ip {args} failed");
}

/// Two namespaces joined by a veth, removed on drop.
struct Hosts {
    a: String,
    b: String,
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for n in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn hosts() -> Option<Hosts> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED nexthop_netns: needs root (network namespaces); CI runs it as root");
        return None;
    }
    let p = format!("tnh{}", std::process::id() % 100_000);
    let h = Hosts {
        a: format!("{p}a"),
        b: format!("{p}b"),
    };
    ip(&format!("netns add {}", h.a));
    ip(&format!("netns add {}", h.b));
    ip(&format!(
        "link add {p}x netns {} type veth peer name {p}y netns {}",
        h.a, h.b
    ));
    for (ns, dev, v4, v6) in [
        (&h.a, "x", "10.77.0.1", "fd77::1"),
        (&h.b, "y", "10.77.0.2", "fd77::2"),
    ] {
        ip(&format!("-n {ns} link set lo up"));
        ip(&format!("-n {ns} addr add {v4}/24 dev {p}{dev}"));
        ip(&format!("-n {ns} addr add {v6}/64 dev {p}{dev} nodad"));
        ip(&format!(
            "-n {ns} link set {p}{dev} address 02:77:00:00:00:0{}",
            if dev == "x" { 1 } else { 2 }
        ));
        ip(&format!("-n {ns} link set {p}{dev} up"));
    }
    ip(&format!("-n {} route add 10.78.0.0/24 via 10.77.0.2", h.a));
    ip(&format!("-n {} -6 route add fd78::/64 via fd77::2", h.a));
    Some(h)
}

/// Runs `f` in a thread inside namespace `ns`.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).expect("open netns");
        use std::os::fd::AsRawFd;
        // SAFETY: a valid namespace fd; setns changes only this thread's namespace.
        let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("resolver thread")
}

/// Resolves `remote` until it stops being `Resolving` (at most 10 s: the kernel answers a
/// neighbour on a veth at once).
fn settle(r: &mut Resolver, remote: IpAddr) -> Result<tunnel::NextHop, Unreachable> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match r.resolve(remote, None) {
            Err(Unreachable::Resolving { .. }) if Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(50))
            }
            other => return other,
        }
    }
}

#[test]
fn routes_gateways_and_neighbours_from_the_kernel() {
    let Some(h) = hosts() else { return };
    let dev = format!("{}x", &h.a[..h.a.len() - 1]);
    let results = in_netns(&h.a, || {
        let mut r = Resolver::new().expect("rtnetlink socket");
        let on_link = r.resolve("10.77.0.2".parse().unwrap(), None);
        let settled = [
            settle(&mut r, "10.77.0.2".parse().unwrap()),
            settle(&mut r, "10.78.0.9".parse().unwrap()),
            settle(&mut r, "fd77::2".parse().unwrap()),
            settle(&mut r, "fd78::9".parse().unwrap()),
        ];
        let none = r.resolve("10.99.0.1".parse().unwrap(), None);
        (on_link, settled, none)
    });
    let (first, settled, none) = results;
    // The first question finds no neighbour entry yet and starts resolution.
    assert!(
        matches!(&first, Err(Unreachable::Resolving { ifname, .. }) if *ifname == dev),
        "{first:?}"
    );
    let peer = [0x02, 0x77, 0, 0, 0, 0x02];
    let want = [
        ("10.77.0.1", "10.77.0.2"),
        ("10.77.0.1", "10.77.0.2"),
        ("fd77::1", "fd77::2"),
        ("fd77::1", "fd77::2"),
    ];
    for (got, (src, via)) in settled.iter().zip(want) {
        let nh = got.as_ref().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(nh.ifname, dev);
        assert_eq!(nh.src, src.parse::<IpAddr>().unwrap());
        assert_eq!(nh.via, via.parse::<IpAddr>().unwrap());
        assert_eq!(nh.src_mac, [0x02, 0x77, 0, 0, 0, 0x01]);
        assert_eq!(nh.dst_mac, peer);
    }
    assert!(matches!(none, Err(Unreachable::NoRoute(_))), "{none:?}");
}

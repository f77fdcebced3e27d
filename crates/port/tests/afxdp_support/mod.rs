//! Shared by the `afxdp_*` tests: a private network namespace per test, veth pairs in it, and
//! an AF_PACKET socket on a veth end to play the outside world.
//!
//! Each test body runs on its own thread that `unshare(CLONE_NEWNET)`s: the namespace belongs
//! to that thread alone (and to the processes it spawns), so the veths cannot collide with
//! anything on the host, and the kernel deletes namespace and veths when the thread ends, even
//! when the test panics. The [`Veth`] guard deletes its pair explicitly as well.

#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Ethertype of test frames (IEEE local experimental), so stray kernel traffic (IPv6 router
/// solicitations and the like) is told apart.
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// Whether the tests can run; says loudly when they cannot.
pub fn root_or_say_why(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    eprintln!(
        "\n*** SKIPPED {test}: AF_XDP tests need root (CAP_NET_ADMIN, CAP_BPF) to create network \
         namespaces, veths and XDP programs. Run them as root (CI does). ***\n"
    );
    false
}

/// Runs `body` on a new thread inside a new network namespace; panics propagate.
pub fn in_netns<F: FnOnce() + Send + 'static>(body: F) {
    let handle = std::thread::spawn(move || {
        // SAFETY: unshare affects only this thread's namespaces.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        );
        ip(&["link", "set", "lo", "up"]);
        body();
    });
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Runs `ip ARGS` (in the calling thread's namespace) and returns its stdout; panics on failure.
pub fn ip(args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("running ip (apt-get install iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A unique short name prefix: `hy` + pid + counter (interface names stay ≤ 15 characters).
pub fn unique(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("hy{}{}{tag}", std::process::id() % 100_000, n)
}

/// A veth pair `NAME` (the switch's end) and `NAMEp` (the peer), both up; deleted on drop.
pub struct Veth {
    /// The end the AF_XDP port opens.
    pub port: String,
    /// The other end, where the test sends and receives.
    pub peer: String,
}

impl Veth {
    /// Creates the pair in the calling thread's namespace.
    pub fn new(tag: &str) -> Veth {
        Veth::with_queues(tag, 1)
    }

    /// Creates the pair with `queues` receive and transmit queues on each end.
    pub fn with_queues(tag: &str, queues: u16) -> Veth {
        let port = unique(tag);
        let peer = format!("{port}p");
        assert!(peer.len() <= 15, "{peer} is too long for an interface name");
        let q = queues.to_string();
        ip(&[
            "link",
            "add",
            &port,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ]);
        let v = Veth { port, peer };
        for i in [&v.port, &v.peer] {
            // No IPv6 on test links, before they come up: no duplicate-address detection or
            // router solicitation frames racing with what a test sends.
            let knob = format!("/proc/sys/net/ipv6/conf/{i}/disable_ipv6");
            if std::fs::write(&knob, "1").is_ok() {
                let now = std::fs::read_to_string(&knob).unwrap_or_default();
                assert_eq!(now.trim(), "1", "IPv6 still on for {i}");
            }
            ip(&["link", "set", i, "up"]);
        }
        v
    }

    /// `ip link show` of the port end mentions an XDP program.
    pub fn has_xdp(&self) -> bool {
        ip(&["link", "show", "dev", &self.port]).contains("xdp")
    }

    /// Waits up to `limit` for `has_xdp() == want`; returns whether it happened.
    pub fn wait_xdp(&self, want: bool, limit: Duration) -> bool {
        let start = Instant::now();
        loop {
            if self.has_xdp() == want {
                return true;
            }
            if start.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.port])
            .output();
    }
}

/// A raw AF_PACKET socket on one interface, sending and receiving whole Ethernet frames.
pub struct Raw {
    fd: OwnedFd,
}

impl Raw {
    /// Opens it on `ifname`; receives time out after 50 ms.
    pub fn new(ifname: &str) -> Raw {
        // SAFETY: plain socket call, checked below.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                (libc::ETH_P_ALL as u16).to_be() as i32,
            )
        };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let c = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: valid C string.
        let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert!(index > 0, "no interface {ifname}");
        // SAFETY: a zeroed sockaddr_ll filled in below is valid for bind.
        unsafe {
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
            sll.sll_ifindex = index as i32;
            let r = libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(r, 0, "bind AF_PACKET: {}", std::io::Error::last_os_error());
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 50_000,
            };
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
        }
        Raw { fd }
    }

    /// Sends straight to the driver, past the qdisc layer (faster load generation).
    pub fn bypass_qdisc(&self) {
        let one: libc::c_int = 1;
        // SAFETY: `one` is a valid int option value.
        unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            );
        }
    }

    /// Sends one frame.
    pub fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is readable for its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            n,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Sends the same frames many times with one `sendmmsg` per call (the load generator).
    /// Returns how many the kernel took.
    pub fn send_many(&self, frames: &[Vec<u8>]) -> usize {
        let mut iovs: Vec<libc::iovec> = frames
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            })
            .collect();
        // SAFETY: zeroed mmsghdr is valid; each points at one iovec that lives through the call.
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = iov;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        // SAFETY: `msgs` describes valid buffers.
        let n =
            unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), msgs.len() as u32, 0) };
        n.max(0) as usize
    }

    /// The next test frame (ethertype [`TEST_ETHERTYPE`]) within `limit`, skipping others.
    pub fn recv_test_frame(&self, limit: Duration) -> Option<Vec<u8>> {
        let start = Instant::now();
        let mut buf = vec![0u8; 4096];
        while start.elapsed() < limit {
            // SAFETY: `buf` is writable for its length.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n >= 14 && is_test_frame(&buf[..n as usize]) {
                return Some(buf[..n as usize].to_vec());
            }
        }
        None
    }
}

/// Whether `frame` carries [`TEST_ETHERTYPE`].
pub fn is_test_frame(frame: &[u8]) -> bool {
    frame.len() >= 14 && u16::from_be_bytes([frame[12], frame[13]]) == TEST_ETHERTYPE
}

/// A test frame of `len` bytes whose payload starts with `seq` and then counts up.
pub fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(60)];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_add(seq as u8);
    }
    f
}

//! Real QEMU guests on Hayate's vhost-user ports: a small Linux guest (Debian's kernel, a
//! busybox initramfs with virtio-net, ping and iperf3, built by `scripts/guest/build.sh`)
//! whose virtio-net device is served by `hayate run --port vhostuser:SOCK` (client mode:
//! QEMU owns the socket with `server=on`), beside namespace hosts on AF_PACKET veths.
//!
//! - a guest pings a namespace host and back (exact counts from ping's summary, and the
//!   switch's port counters equal what the guest's eth0 counted), and runs iperf3 TCP both
//!   ways;
//! - two guests ping each other;
//! - a guest whose QEMU is killed (SIGKILL) leaves the switch running: the host and a second
//!   guest still reach each other, and the switch stops cleanly;
//! - the switch restarted under a running guest: the port connects again and the guest's
//!   traffic resumes, without the guest rebooting.
//!
//! The guest: its kernel command line gives eth0's address; its console (ttyS0) is a file
//! the test reads; commands go in on ttyS1 (a socket), one a line, and their output comes
//! back on the console between `@@hayate begin N@@` and `@@hayate end N rc=RC@@`
//! (`scripts/guest/init`).
//!
//! Needs root, `qemu-system-x86_64`, `/dev/kvm`, `ip`, `ping`, `iperf3` (and for the guest
//! build `cpio`, `busybox-static`, apt); without QEMU or /dev/kvm each test prints SKIPPED.
//! The accelerator is KVM (`-enable-kvm -cpu host`), except where the machine's KVM is
//! PVM (`kvm_pvm`, as on the project's machines), which boots only kernels built as PVM
//! guests: there the guests run under TCG, with the device's MSI-X off (QEMU 7.2 crashes
//! starting a vhost-user device with MSI-X vectors without KVM). `HAYATE_QEMU_ACCEL=kvm|tcg`
//! overrides the choice; `HAYATE_GUEST_DIR` the image's cache (default
//! /var/cache/hayate/guest). The tests run one at a time (guests take a core each).

mod netns;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use netns::{freeze, port, Hayate, IperfServer, Link, Net, PortKind};

/// How long a guest may take to boot and say it is ready.
const BOOT: Duration = Duration::from_secs(90);
/// How long one guest command may take (beyond its own bound).
const CMD: Duration = Duration::from_secs(60);

/// One test at a time: each guest wants a core of the machine's two.
static SERIAL: Mutex<()> = Mutex::new(());

/// The accelerator's QEMU arguments, and whether the device must go without MSI-X.
#[derive(Debug, Clone)]
struct Accel {
    args: Vec<&'static str>,
    no_msix: bool,
    why: String,
}

fn accel() -> Accel {
    let kvm = Accel {
        args: vec!["-enable-kvm", "-cpu", "host"],
        no_msix: false,
        why: "KVM".into(),
    };
    let tcg = |why: &str| Accel {
        args: vec!["-accel", "tcg", "-cpu", "max"],
        no_msix: true,
        why: why.into(),
    };
    match std::env::var("HAYATE_QEMU_ACCEL").as_deref() {
        Ok("kvm") => return kvm,
        Ok("tcg") => return tcg("TCG (HAYATE_QEMU_ACCEL=tcg)"),
        _ => {}
    }
    if Path::new("/sys/module/kvm_pvm").exists() {
        return tcg(
            "TCG: this machine's KVM is PVM (kvm_pvm), which boots only kernels built as PVM \
             guests, not Debian's",
        );
    }
    kvm
}

/// Whether the suite can run here; prints a loud SKIPPED line when not.
fn can_run(test: &str) -> bool {
    let forced_tcg = std::env::var("HAYATE_QEMU_ACCEL").as_deref() == Ok("tcg");
    if !Path::new("/dev/kvm").exists() && !forced_tcg {
        eprintln!("SKIPPED {test}: no /dev/kvm (HAYATE_QEMU_ACCEL=tcg runs it without KVM)");
        return false;
    }
    netns::can_run(test, &["qemu-system-x86_64", "ping", "iperf3"])
}

/// The guest's kernel and initramfs, built (or found in the cache) once per test process.
fn image() -> &'static (PathBuf, PathBuf) {
    static IMAGE: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let dir = std::env::var("HAYATE_GUEST_DIR")
            .unwrap_or_else(|_| "/var/cache/hayate/guest".to_string());
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/guest/build.sh");
        let t0 = Instant::now();
        let out = Command::new("bash")
            .arg(script)
            .arg(&dir)
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/guest/build.sh");
        assert!(
            out.status.success(),
            "scripts/guest/build.sh {dir} failed (run scripts/setup.sh first)"
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines().map(PathBuf::from);
        let kernel = lines.next().expect("build.sh names the kernel");
        let initrd = lines.next().expect("build.sh names the initramfs");
        eprintln!(
            "guest image {} + {} ready in {:.1} s",
            kernel.display(),
            initrd.display(),
            t0.elapsed().as_secs_f64()
        );
        (kernel, initrd)
    })
}

/// A running QEMU guest; killed on drop.
struct Guest {
    name: String,
    child: Option<Child>,
    log: PathBuf,
    ctl_path: PathBuf,
    ctl: Option<UnixStream>,
    /// Commands sent so far (the guest numbers them from 1).
    sent: u32,
}

impl Guest {
    /// Boots guest `name` (MAC 52:54:00:77:`net`:`host`, eth0 at `ip`) on the vhost-user
    /// socket `sock` (QEMU creates it; the switch connects). Does not wait: see
    /// [`Guest::wait_ready`].
    fn boot(dir: &Path, name: &str, sock: &Path, mac: &str, ip: &str) -> Guest {
        let (kernel, initrd) = image();
        let acc = accel();
        let log = dir.join(format!("{name}.serial.log"));
        let ctl_path = dir.join(format!("{name}.ctl"));
        let out = dir.join(format!("{name}.qemu.log"));
        let mut nic = format!("virtio-net-pci,netdev=n0,mac={mac},romfile=");
        if acc.no_msix {
            nic += ",vectors=0";
        }
        let mut cmd = Command::new("qemu-system-x86_64");
        cmd.args(&acc.args)
            .args(["-name", name, "-m", "256", "-smp", "1"])
            .args([
                "-nographic",
                "-no-reboot",
                "-nodefaults",
                "-monitor",
                "none",
            ])
            .args(["-object", "memory-backend-memfd,id=mem,size=256M,share=on"])
            .args(["-numa", "node,memdev=mem"])
            .arg("-chardev")
            .arg(format!(
                "socket,id=c0,path={},server=on,wait=off",
                sock.display()
            ))
            .args(["-netdev", "vhost-user,id=n0,chardev=c0", "-device", &nic])
            .arg("-kernel")
            .arg(kernel)
            .arg("-initrd")
            .arg(initrd)
            .arg("-append")
            .arg(format!(
                "console=ttyS0 quiet ipv6.disable=1 panic=-1 hayate.ip={ip}"
            ))
            .arg("-serial")
            .arg(format!("file:{}", log.display()))
            .arg("-chardev")
            .arg(format!(
                "socket,id=ctl,path={},server=on,wait=off",
                ctl_path.display()
            ))
            .args(["-serial", "chardev:ctl"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("qemu log"))
            .stderr(std::fs::File::create(dir.join(format!("{name}.qemu.err"))).expect("log"));
        eprintln!("{name}: booting under {} on {}", acc.why, sock.display());
        let child = cmd.spawn().expect("start qemu-system-x86_64");
        Guest {
            name: name.to_string(),
            child: Some(child),
            log,
            ctl_path,
            ctl: None,
            sent: 0,
        }
    }

    fn serial(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn qemu_err(&self) -> String {
        std::fs::read_to_string(self.log.with_file_name(format!("{}.qemu.err", self.name)))
            .unwrap_or_default()
    }

    /// Panics with everything the guest said.
    fn fail(&self, what: &str) -> ! {
        panic!(
            "{}: {what}\n--- serial log ---\n{}\n--- qemu stderr ---\n{}",
            self.name,
            self.serial(),
            self.qemu_err()
        )
    }

    fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Waits (≤ [`BOOT`]) for the guest's `ready` line; returns the boot time.
    fn wait_ready(&mut self) -> Duration {
        let t0 = Instant::now();
        loop {
            let text = self.serial();
            if text.contains("@@hayate ready@@") {
                if !text.contains("@@hayate eth0 ") {
                    self.fail("booted without eth0");
                }
                eprintln!(
                    "{}: ready in {:.1} s",
                    self.name,
                    t0.elapsed().as_secs_f64()
                );
                return t0.elapsed();
            }
            if !self.alive() {
                self.fail("QEMU exited while booting");
            }
            if t0.elapsed() > BOOT {
                self.fail(&format!("not ready within {} s", BOOT.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `cmd` in the guest (≤ [`CMD`]); returns its exit code and output.
    fn run(&mut self, cmd: &str) -> (i32, String) {
        if self.ctl.is_none() {
            let s = UnixStream::connect(&self.ctl_path)
                .unwrap_or_else(|e| self.fail(&format!("command socket: {e}")));
            self.ctl = Some(s);
        }
        self.sent += 1;
        let n = self.sent;
        let line = format!("{cmd}\n");
        if let Err(e) = self
            .ctl
            .as_mut()
            .expect("connected")
            .write_all(line.as_bytes())
        {
            self.fail(&format!("cannot send a command: {e}"));
        }
        let (begin, end) = (
            format!("@@hayate begin {n}@@"),
            format!("@@hayate end {n} rc="),
        );
        let t0 = Instant::now();
        loop {
            let text = self.serial();
            if let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) {
                let rest = &text[e + end.len()..];
                if let Some(stop) = rest.find("@@") {
                    let rc: i32 = rest[..stop].trim().parse().unwrap_or(-1);
                    let out = text[b + begin.len()..e].trim().to_string();
                    return (rc, out);
                }
            }
            if !self.alive() {
                self.fail(&format!("QEMU exited during `{cmd}`"));
            }
            if t0.elapsed() > CMD {
                self.fail(&format!(
                    "`{cmd}` did not finish within {} s",
                    CMD.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `cmd`, which must succeed; returns its output.
    fn must(&mut self, cmd: &str) -> String {
        let (rc, out) = self.run(cmd);
        if rc != 0 {
            self.fail(&format!("`{cmd}` exited {rc}:\n{out}"));
        }
        out
    }

    /// Pings `dst` `count` times from the guest; asserts that every one was answered (the
    /// counts of ping's summary).
    fn ping(&mut self, dst: &str, count: u32) {
        let out = self.must(&format!("ping -c {count} -i 0.2 -W 3 {dst}"));
        let (sent, got) = ping_counts(&out).unwrap_or_else(|| self.fail(&out));
        assert_eq!(
            (sent, got),
            (count, count),
            "{}: ping {dst}: {out}",
            self.name
        );
    }

    /// Whether one ping to `dst` is answered within ~1 s.
    fn reaches(&mut self, dst: &str) -> bool {
        self.run(&format!("ping -c 1 -W 1 {dst}")).0 == 0
    }

    /// The guest's eth0 (rx_packets, tx_packets, rx_bytes, tx_bytes).
    fn counters(&mut self) -> (u64, u64, u64, u64) {
        let out = self.must(
            "cd /sys/class/net/eth0/statistics && cat rx_packets tx_packets rx_bytes tx_bytes",
        );
        let v: Vec<u64> = out.lines().filter_map(|l| l.trim().parse().ok()).collect();
        assert_eq!(v.len(), 4, "{}: eth0 counters: {out}", self.name);
        (v[0], v[1], v[2], v[3])
    }

    /// SIGKILLs the guest's QEMU and waits for it.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {} serial log ---\n{}", self.name, self.serial());
        }
        self.kill();
    }
}

/// (transmitted, received) from the summary of busybox's or iputils' ping.
fn ping_counts(out: &str) -> Option<(u32, u32)> {
    let line = out.lines().find(|l| l.contains("packets transmitted"))?;
    let mut parts = line.split(',');
    let num = |s: Option<&str>| -> Option<u32> { s?.split_whitespace().next()?.parse().ok() };
    Some((num(parts.next())?, num(parts.next())?))
}

/// The receiver's figures of an iperf3 client run (`-f k`): (kilobytes, kbit/s).
fn iperf_receiver(out: &str) -> Option<(f64, f64)> {
    let line = out.lines().rev().find(|l| l.contains("receiver"))?;
    let tok: Vec<&str> = line.split_whitespace().collect();
    let sec = tok.iter().position(|t| *t == "sec")?;
    let amount: f64 = tok.get(sec + 1)?.parse().ok()?;
    let unit = *tok.get(sec + 2)?;
    let kbytes = match unit {
        "Bytes" => amount / 1024.0,
        "KBytes" => amount,
        "MBytes" => amount * 1024.0,
        "GBytes" => amount * 1024.0 * 1024.0,
        _ => return None,
    };
    let rate: f64 = tok.get(sec + 3)?.parse().ok()?;
    Some((kbytes, rate))
}

/// Everything one test sets up: the suite to itself (tests run one at a time), a switch
/// namespace and the switch's log, whose vhost-user port lines (`vhost-user port g1: link
/// up`, logged at `info`, the switch's default) the test waits for. Says how long the test
/// took when dropped.
struct Setup {
    net: Net,
    sw: String,
    t0: Instant,
    _one: MutexGuard<'static, ()>,
}

impl Setup {
    /// The set-up of `test`, or `None` (SKIPPED printed) when the suite cannot run here.
    fn new(test: &str) -> Option<Setup> {
        if !can_run(test) {
            return None;
        }
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let t0 = Instant::now();
        let mut net = Net::new();
        let sw = net.switch_ns("sw");
        Some(Setup { net, sw, t0, _one })
    }

    /// The namespace host `h` on an AF_PACKET veth, its end at `addr`.
    fn host(&mut self, addr: &str) -> Link {
        self.net.link(PortKind::AfPacket, "h", &self.sw, &[addr])
    }

    /// Boots guest `name` (MAC `mac`, eth0 at `ip`) on its vhost-user socket ([`Setup::sock`]).
    fn guest(&self, name: &str, mac: &str, ip: &str) -> Guest {
        let (sock, _) = self.sock(name);
        Guest::boot(self.net.dir.path(), name, &sock, mac, ip)
    }

    /// Waits until each of `guests` has booted and the switch's port to it is up.
    fn up(&self, guests: &mut [&mut Guest]) {
        for g in guests.iter_mut() {
            g.wait_ready();
        }
        for g in guests.iter() {
            self.wait_log(&format!("{}: link up", g.name), 1, 20);
        }
    }

    /// The vhost-user socket of guest `name` and its port spec.
    fn sock(&self, name: &str) -> (PathBuf, String) {
        let p = self.net.dir.path().join(format!("{name}.sock"));
        let spec = format!("vhostuser:{}", p.display());
        (p, spec)
    }

    /// Starts the switch on `ports`, one poll thread.
    fn hayate(&self, ports: &[String]) -> Hayate {
        self.net.hayate(&self.sw, ports, &[], &[1])
    }

    /// The switch's log (stderr), as [`Net::hayate`] names it.
    fn hayate_log(&self) -> String {
        let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
        let p = self
            .net
            .dir
            .path()
            .join(format!("{}-{}.log", self.sw, 1.min(last)));
        std::fs::read_to_string(p).unwrap_or_default()
    }

    /// Waits (≤ `secs`) until the switch's log has `needle` `times` times (the port's
    /// `info` lines; not waited for when RUST_LOG hides them).
    fn wait_log(&self, needle: &str, times: usize, secs: u64) {
        if let Ok(f) = std::env::var("RUST_LOG") {
            if !["info", "debug", "trace"].iter().any(|l| f.contains(l)) {
                return;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.hayate_log().matches(needle).count() < times {
            assert!(
                Instant::now() < deadline,
                "the switch's log did not say `{needle}` {times} time(s) within {secs} s:\n{}",
                self.hayate_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        eprintln!("test took {:.1} s", self.t0.elapsed().as_secs_f64());
    }
}

#[test]
fn a_guest_pings_and_streams_tcp_to_a_namespace_host() {
    let Some(mut s) = Setup::new("vhost_qemu ping+iperf3") else {
        return;
    };
    let h = s.host("10.77.1.1/24");
    let (_, vspec) = s.sock("g1");
    let hayate = s.hayate(&[h.spec(), vspec.clone()]);
    s.net.configure(&h, &s.sw);
    let mut g = s.guest("g1", "52:54:00:77:01:02", "10.77.1.2/24");
    s.up(&mut [&mut g]);

    g.ping("10.77.1.1", 5);
    assert!(h.ping("10.77.1.2", 5), "host -> guest ping");

    // TCP both ways: the guest sends (its TSO super-packets through the switch to an
    // AF_PACKET veth), then receives (-R: the host's through the switch into the guest).
    for (dir, flag) in [("guest -> host", ""), ("host -> guest", " -R")] {
        let _srv = IperfServer::start(&h.host_ns);
        let out = g.must(&format!("iperf3 -c 10.77.1.1 -t 2 -f k{flag}"));
        let (kbytes, kbits) = iperf_receiver(&out).unwrap_or_else(|| g.fail(&out));
        eprintln!("iperf3 {dir}: {kbytes:.0} KB received, {kbits:.0} kbit/s");
        assert!(kbytes > 0.0 && kbits > 0.0, "iperf3 {dir}: {out}");
    }

    // Exact counters: with both ends quiet, the switch's vhost-user port received what the
    // guest's eth0 sent and sent what it received (a TCP super-packet is one packet to
    // both: the switch keeps them whole).
    let _ = freeze(&[&h]);
    g.must("ip link set eth0 down");
    std::thread::sleep(Duration::from_millis(200));
    let (g_rx, g_tx, g_rx_bytes, g_tx_bytes) = g.counters();
    let stats = hayate.stop();
    let p = port(&stats, &vspec);
    eprintln!(
        "guest sent {g_tx} ({g_tx_bytes} B) got {g_rx} ({g_rx_bytes} B); switch port rx {} \
         ({} B) tx {} ({} B) errors rx {} tx {}",
        p.rx_packets, p.rx_bytes, p.tx_packets, p.tx_bytes, p.rx_errors, p.tx_errors
    );
    assert_eq!(p.rx_errors, 0, "vhost-user rx errors");
    assert_eq!(p.tx_errors, 0, "vhost-user tx errors");
    assert!(p.rx_packets >= 10 && p.tx_packets >= 10, "{p:?}");
    assert_eq!(p.rx_packets, g_tx, "switch rx = guest tx");
    assert_eq!(p.tx_packets, g_rx, "switch tx = guest rx");
    assert_eq!(p.rx_bytes, g_tx_bytes, "switch rx bytes = guest tx bytes");
    assert_eq!(p.tx_bytes, g_rx_bytes, "switch tx bytes = guest rx bytes");
}

#[test]
fn two_guests_ping_each_other() {
    let Some(s) = Setup::new("vhost_qemu two guests") else {
        return;
    };
    let (_, spec1) = s.sock("g1");
    let (_, spec2) = s.sock("g2");
    let hayate = s.hayate(&[spec1.clone(), spec2.clone()]);
    let mut g1 = s.guest("g1", "52:54:00:77:02:01", "10.77.2.1/24");
    let mut g2 = s.guest("g2", "52:54:00:77:02:02", "10.77.2.2/24");
    s.up(&mut [&mut g1, &mut g2]);
    g1.ping("10.77.2.2", 5);
    g2.ping("10.77.2.1", 5);
    let stats = hayate.stop();
    for spec in [&spec1, &spec2] {
        let p = port(&stats, spec);
        assert!(p.rx_packets >= 10 && p.tx_packets >= 10, "{spec}: {p:?}");
        assert_eq!((p.rx_errors, p.tx_errors), (0, 0), "{spec}: {p:?}");
    }
}

#[test]
fn a_killed_guest_leaves_the_switch_running() {
    let Some(mut s) = Setup::new("vhost_qemu killed guest") else {
        return;
    };
    let h = s.host("10.77.3.1/24");
    let hayate = s.hayate(&[h.spec(), s.sock("g1").1, s.sock("g2").1]);
    s.net.configure(&h, &s.sw);
    let mut g1 = s.guest("g1", "52:54:00:77:03:01", "10.77.3.11/24");
    let mut g2 = s.guest("g2", "52:54:00:77:03:02", "10.77.3.12/24");
    s.up(&mut [&mut g1, &mut g2]);
    g1.ping("10.77.3.1", 3);
    g2.ping("10.77.3.11", 3);

    // SIGKILL g1's QEMU while it streams pings at the switch.
    let (rc, _) = g1.run("ping -q -i 0.01 10.77.3.1 >/dev/null 2>&1 &");
    assert_eq!(rc, 0);
    std::thread::sleep(Duration::from_millis(500));
    g1.kill();
    s.wait_log("g1: front end disconnected", 1, 10);
    s.wait_log("g1: link down", 1, 10);

    assert!(
        hayate.thread_cpus("hayate-pmd0").is_some(),
        "the switch died with the guest:\n{}",
        s.hayate_log()
    );
    assert!(
        h.ping("10.77.3.12", 5),
        "host -> second guest after the kill"
    );
    g2.ping("10.77.3.1", 5);
    assert!(!g2.reaches("10.77.3.11"), "the killed guest still answers");
    // The switch still runs, and stops cleanly (its exit status is checked).
    assert!(hayate.thread_cpus("hayate-pmd0").is_some(), "switch alive");
    let stats = hayate.stop();
    let p = port(&stats, &h.spec());
    assert!(p.rx_packets >= 5 && p.tx_packets >= 5, "{p:?}");
}

#[test]
fn a_restarted_switch_resumes_a_running_guest() {
    let Some(mut s) = Setup::new("vhost_qemu switch restart") else {
        return;
    };
    let h = s.host("10.77.4.1/24");
    let ports = [h.spec(), s.sock("g1").1];
    let hayate = s.hayate(&ports);
    s.net.configure(&h, &s.sw);
    let mut g = s.guest("g1", "52:54:00:77:04:02", "10.77.4.2/24");
    s.up(&mut [&mut g]);
    g.ping("10.77.4.1", 3);
    let boot_id = g.must("cat /proc/sys/kernel/random/boot_id");

    // End the switch twice — stopped (SIGTERM: it closes the connection) and crashed
    // (SIGKILL) — each time with the guest running and its traffic going nowhere, then start
    // a new switch on the same ports: the port connects to QEMU's socket again and the
    // guest's traffic resumes.
    let mut hayate = Some(hayate);
    for how in ["stopped", "killed"] {
        let old = hayate.take().expect("a running switch");
        if how == "stopped" {
            let _ = old.stop();
        } else {
            drop(old); // SIGKILL
        }
        assert!(
            !g.reaches("10.77.4.1"),
            "the guest reaches the host with the switch {how}"
        );
        let t_restart = Instant::now();
        hayate = Some(s.hayate(&ports));
        s.wait_log("g1: link up", 1, 20);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !g.reaches("10.77.4.1") {
            assert!(
                Instant::now() < deadline,
                "switch {how} and restarted: the guest's traffic did not resume within 30 \
                 s:\n{}",
                s.hayate_log()
            );
        }
        eprintln!(
            "switch {how}: the guest's traffic resumed {:.1} s after the restart",
            t_restart.elapsed().as_secs_f64()
        );
        g.ping("10.77.4.1", 5);
        assert!(
            h.ping("10.77.4.2", 3),
            "host -> guest after the switch was {how}"
        );
    }
    assert_eq!(
        g.must("cat /proc/sys/kernel/random/boot_id"),
        boot_id,
        "the guest rebooted"
    );
    assert_eq!(
        g.serial().matches("@@hayate ready@@").count(),
        1,
        "the guest booted twice"
    );
    let stats = hayate.take().expect("running").stop();
    let p = port(&stats, &ports[1]);
    assert!(p.rx_packets >= 5 && p.tx_packets >= 5, "{p:?}");
}

#[test]
fn a_guest_plugged_into_a_running_switch_gets_link_and_traffic() {
    let Some(s) = Setup::new("vhost_qemu add-port") else {
        return;
    };
    let (_, spec1) = s.sock("g1");
    let (_, spec2) = s.sock("g2");
    // The switch starts with g1 only; g2 boots later and is plugged in while it runs.
    let hayate = s.hayate(std::slice::from_ref(&spec1));
    let mut g1 = s.guest("g1", "52:54:00:77:05:01", "10.77.5.1/24");
    g1.wait_ready();
    // QEMU starts a vhost-user guest only once a back end has connected: g2 waits for the
    // switch to take it.
    let mut g2 = s.guest("g2", "52:54:00:77:05:02", "10.77.5.2/24");
    assert!(!g1.reaches("10.77.5.2"), "g2 is not on the switch yet");
    s.net.ctl("br0", &["add-port", &spec2, "ofport=7"]);
    let desc = s.net.ctl("br0", &["dump-ports-desc"]);
    assert!(desc.contains(" 7(g2)"), "{desc}");
    g2.wait_ready();
    s.wait_log(": link up", 2, 20);
    g1.ping("10.77.5.2", 5);
    g2.ping("10.77.5.1", 3);
    // Unplugged: g2 is gone from the switch (its QEMU keeps running).
    s.net.ctl("br0", &["del-port", "7"]);
    assert!(
        !g1.reaches("10.77.5.2"),
        "g2 still reachable after del-port"
    );
    let stats = hayate.stop();
    assert_eq!(stats.len(), 1, "only g1's port is left: {stats:?}");
    let p = port(&stats, &spec1);
    assert!(p.rx_packets >= 8 && p.tx_packets >= 8, "{p:?}");
    drop(g2);
}

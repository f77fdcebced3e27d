//! vhost-user ports against a real front end: DPDK's virtio-user in `dpdk-testpmd` (the VM's
//! side; `--no-pci --no-huge`, memfd memory), in both modes, with a veth host beside it.
//!
//! testpmd sends 64-byte frames on both its virtio-user ports (`flowgen`, which also takes and drops what it receives); Hayate forwards
//! vm0 → vm1 and the veth host, vm1 → the host. So the host's receive counter shows frames
//! of both VMs crossing the switch, and testpmd's own counters show vm0's frames reaching
//! vm1. Then each side is killed and restarted under the other, and the frames must flow
//! again. Every wait is bounded; every process is killed at the end.

mod netns;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netns::{Link, Net, PortKind};

/// A testpmd with two virtio-user ports, killed on drop.
struct Testpmd {
    child: Child,
    log: PathBuf,
}

impl Testpmd {
    /// Starts testpmd with virtio-user ports on `socks` (`server`: testpmd owns the sockets,
    /// Hayate connects — Hayate's default client mode).
    fn start(dir: &Path, tag: &str, socks: &[PathBuf], server: bool) -> Testpmd {
        Testpmd::start_queues(dir, tag, socks, server, 1)
    }

    /// [`Testpmd::start`] with `queues` queue pairs on each virtio-user port.
    fn start_queues(
        dir: &Path,
        tag: &str,
        socks: &[PathBuf],
        server: bool,
        queues: u16,
    ) -> Testpmd {
        let log = dir.join(format!("testpmd-{tag}.log"));
        // Line-buffered: the statistics reach the log as testpmd prints them.
        let mut args: Vec<String> = [
            "-oL",
            "dpdk-testpmd",
            "--lcores",
            "0@0,1@0",
            "--main-lcore",
            "0",
            "--no-pci",
            "--no-huge",
            "-m",
            "256",
            "--file-prefix",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("hyvt{}{tag}", std::process::id()));
        for (i, s) in socks.iter().enumerate() {
            if server {
                // A testpmd killed earlier leaves its socket file behind.
                let _ = std::fs::remove_file(s);
            }
            args.push("--vdev".into());
            args.push(format!(
                "net_virtio_user{i},path={},queues={queues},queue_size=256{}",
                s.display(),
                if server { ",server=1" } else { "" }
            ));
        }
        args.push("--".into());
        args.push(format!("--rxq={queues}"));
        args.push(format!("--txq={queues}"));
        for a in [
            "--total-num-mbufs=8192",
            "--forward-mode=flowgen",
            "--txpkts=64",
            "--auto-start",
            "--stats-period",
            "1",
        ] {
            args.push(a.into());
        }
        // stdbuf execs testpmd: the child is testpmd itself, killed on drop, and by the
        // kernel if this test dies first.
        let mut cmd = Command::new("stdbuf");
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .args(&args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start testpmd");
        Testpmd { child, log }
    }

    fn text(&self) -> String {
        let raw = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(&raw).into_owned()
    }

    /// The last "RX-packets" testpmd printed for `port` (its statistics every second).
    fn rx(&self, port: u32) -> u64 {
        let text = self.text();
        let head = format!("NIC statistics for port {port}");
        let mut last = 0;
        for block in text.split("######################## ").skip(1) {
            if !block.starts_with(&head) {
                continue;
            }
            if let Some(v) = block
                .split("RX-packets:")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
            {
                last = v;
            }
        }
        last
    }

    /// Stops testpmd with SIGINT and returns, per (port, queue) stream it printed at exit,
    /// the packets received: `(port, queue, rx)`.
    fn stop_streams(mut self) -> Vec<(u32, u32, u64)> {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = self.text();
        let mut out = Vec::new();
        for block in text.split("Forward Stats for RX Port=").skip(1) {
            let num = |s: &str| -> Option<u32> {
                s.trim()
                    .split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse()
                    .ok()
            };
            let Some((port, rest)) = block.split_once("/Queue=") else {
                continue;
            };
            let (Some(port), Some(queue)) = (num(port), num(rest)) else {
                continue;
            };
            let rx = block
                .split("RX-packets:")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            out.push((port, queue, rx));
        }
        out
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (≤ 30 s) until `f` gives more than `above`; returns the value or panics with `what`.
fn grows(what: &str, above: u64, mut f: impl FnMut() -> u64, logs: &dyn Fn() -> String) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = f();
        if v > above + 100 {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: stayed at {v} (from {above}) for 30 s\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn can_run(test: &str) -> bool {
    if !netns::can_run(test, &["dpdk-testpmd", "stdbuf"]) {
        return false;
    }
    true
}

/// vm0 → vm1 and the host; vm1 → the host; the host → both.
const FLOWS: [&str; 3] = [
    "priority=10,in_port=1,actions=output:2,output:3",
    "priority=10,in_port=2,actions=output:3",
    "priority=10,in_port=3,actions=output:1,output:2",
];

struct Rig {
    net: Net,
    sw: String,
    host: Link,
    socks: Vec<PathBuf>,
    specs: Vec<String>,
}

fn rig(mode: &str) -> Rig {
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let host = net.link(PortKind::AfPacket, "h", &sw, &["10.61.0.1/24"]);
    let socks: Vec<PathBuf> = (0..2)
        .map(|i| net.dir.path().join(format!("vm{i}.sock")))
        .collect();
    let mut specs: Vec<String> = socks
        .iter()
        .map(|s| format!("vhostuser:{},mode={mode}", s.display()))
        .collect();
    specs.push(host.spec());
    Rig {
        net,
        sw,
        host,
        socks,
        specs,
    }
}

fn host_rx(l: &Link) -> u64 {
    l.counters().0
}

#[test]
fn frames_cross_between_virtio_user_and_a_veth_host_and_survive_restarts_client_mode() {
    if !can_run("vhost_testpmd client mode") {
        return;
    }
    let r = rig("client");
    let tp = Testpmd::start(r.net.dir.path(), "c1", &r.socks, true);
    let hayate = r.net.hayate(&r.sw, &r.specs, &FLOWS, &[1]);
    r.net.configure(&r.host, &r.sw);
    // Both VMs' frames reach the host; vm0's reach vm1.
    let h = grows("host rx (VMs → host)", 0, || host_rx(&r.host), &|| {
        tp.text()
    });
    let v = grows("testpmd port 1 rx (vm0 → vm1)", 0, || tp.rx(1), &|| {
        tp.text()
    });
    eprintln!("client mode: host got {h} frames, vm1 got {v}");

    // The VM side restarts: Hayate reconnects by itself, frames flow again.
    tp.kill();
    std::thread::sleep(Duration::from_millis(500));
    let before = host_rx(&r.host);
    let tp = Testpmd::start(r.net.dir.path(), "c2", &r.socks, true);
    grows(
        "host rx after testpmd restarted",
        before,
        || host_rx(&r.host),
        &|| tp.text(),
    );
    grows("vm1 rx after testpmd restarted", 0, || tp.rx(1), &|| {
        tp.text()
    });

    // The switch is killed under the running VM side and started again.
    drop(hayate);
    std::thread::sleep(Duration::from_millis(500));
    let before = host_rx(&r.host);
    let vm1_before = tp.rx(1);
    let hayate = r.net.hayate(&r.sw, &r.specs, &FLOWS, &[1]);
    grows(
        "host rx after hayate restarted",
        before,
        || host_rx(&r.host),
        &|| tp.text(),
    );
    grows(
        "vm1 rx after hayate restarted",
        vm1_before,
        || tp.rx(1),
        &|| tp.text(),
    );
    let stats = hayate.stop();
    let vm0 = netns::port(&stats, &r.specs[0]);
    let vm1 = netns::port(&stats, &r.specs[1]);
    assert!(vm0.rx_packets > 0 && vm1.rx_packets > 0, "{stats:?}");
    assert!(
        vm1.tx_packets > 0,
        "vm0's frames were written into vm1: {stats:?}"
    );
    assert_eq!(vm0.rx_errors + vm1.rx_errors, 0, "{stats:?}");
}

#[test]
fn frames_cross_in_server_mode_and_survive_a_front_end_restart() {
    if !can_run("vhost_testpmd server mode") {
        return;
    }
    let r = rig("server");
    let hayate = r.net.hayate(&r.sw, &r.specs, &FLOWS, &[1]);
    r.net.configure(&r.host, &r.sw);
    // The switch created the sockets; testpmd connects to them.
    for s in &r.socks {
        assert!(s.exists(), "{} was not created", s.display());
    }
    let tp = Testpmd::start(r.net.dir.path(), "s1", &r.socks, false);
    grows("host rx (VMs → host)", 0, || host_rx(&r.host), &|| {
        tp.text()
    });
    grows("vm1 rx (vm0 → vm1)", 0, || tp.rx(1), &|| tp.text());
    tp.kill();
    std::thread::sleep(Duration::from_millis(500));
    let before = host_rx(&r.host);
    let tp = Testpmd::start(r.net.dir.path(), "s2", &r.socks, false);
    grows(
        "host rx after testpmd restarted",
        before,
        || host_rx(&r.host),
        &|| tp.text(),
    );
    let stats = hayate.stop();
    assert!(netns::port(&stats, &r.specs[1]).tx_packets > 0, "{stats:?}");
    for s in &r.socks {
        assert!(!s.exists(), "{} left behind", s.display());
    }
}

#[test]
fn a_vm_plugged_into_a_running_switch_gets_link_and_traffic_and_is_unplugged() {
    if !can_run("vhost_testpmd add-port") {
        return;
    }
    let r = rig("client");
    // The switch runs with the host's port only; the VM side comes later.
    let hayate = r.net.hayate(&r.sw, &[r.host.spec()], &[], &[1]);
    r.net.configure(&r.host, &r.sw);
    let tp = Testpmd::start(r.net.dir.path(), "p1", &r.socks[..1], true);
    let spec = format!("vhostuser:{}", r.socks[0].display());
    r.net.ctl("br0", &["add-port", &spec, "ofport=5"]);
    r.net.ctl(
        "br0",
        &["add-flow", "priority=10,in_port=5,actions=output:1"],
    );
    let desc = r.net.ctl("br0", &["dump-ports-desc"]);
    assert!(desc.contains(" 5(vm0)"), "{desc}");
    // The VM's frames reach the host; its link is up.
    grows(
        "host rx from the plugged VM",
        host_rx(&r.host),
        || host_rx(&r.host),
        &|| tp.text(),
    );
    // Its link shows up (the bridge looks at links every 100 ms).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let desc = r.net.ctl("br0", &["dump-ports-desc"]);
        let vm: Vec<&str> = desc
            .lines()
            .skip_while(|l| !l.contains("5(vm0)"))
            .take(4)
            .collect();
        if !vm.is_empty() && !vm.join("\n").contains("LINK_DOWN") {
            break;
        }
        assert!(Instant::now() < deadline, "link still down: {desc}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Unplugged: the port goes, the host gets nothing more from it.
    r.net.ctl("br0", &["del-port", "vm0"]);
    let desc = r.net.ctl("br0", &["dump-ports-desc"]);
    assert!(!desc.contains("vm0"), "{desc}");
    std::thread::sleep(Duration::from_millis(300));
    let a = host_rx(&r.host);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(host_rx(&r.host), a, "frames after del-port");
    drop(tp);
    let stats = hayate.stop();
    assert_eq!(stats.len(), 1, "only the host's port is left: {stats:?}");
}

#[test]
fn two_queue_pairs_on_two_poll_threads_both_carry_frames() {
    if !can_run("vhost_testpmd two queue pairs") {
        return;
    }
    let r = rig("client");
    let specs: Vec<String> = r.specs[..2]
        .iter()
        .map(|s| format!("{s},queues=2"))
        .collect();
    let tp = Testpmd::start_queues(r.net.dir.path(), "q2", &r.socks, true, 2);
    // Two poll threads: each takes one receive queue of each port and sends on its own
    // transmit queue of each, so vm0's queue q reaches vm1's queue q through thread q.
    let flows = ["priority=10,in_port=1,actions=output:2"];
    let hayate = r.net.hayate(&r.sw, &specs, &flows, &[0, 1]);
    grows("vm1 rx (vm0 → vm1)", 0, || tp.rx(1), &|| tp.text());
    std::thread::sleep(Duration::from_millis(500));
    let streams = tp.stop_streams();
    let vm1: Vec<_> = streams.iter().filter(|s| s.0 == 1).collect();
    eprintln!("testpmd streams (port, queue, rx): {streams:?}");
    assert_eq!(vm1.len(), 2, "one stream a queue of vm1: {streams:?}");
    for (_, q, rx) in &vm1 {
        assert!(*rx > 0, "vm1's queue {q} got nothing: {streams:?}");
    }
    let stats = hayate.stop();
    let vm0 = netns::port(&stats, &specs[0]);
    assert!(vm0.rx_packets > 0 && vm0.rx_errors == 0, "{stats:?}");
}

//! The network-namespace harness: hosts in their own namespaces, each joined to a Hayate
//! switch (run as a child process in a switch namespace) by a port of some [`PortKind`].
//!
//! Every name starts with a prefix unique to the test process and the test (`hy<pid><n>`), every
//! namespace is deleted when the [`Net`] is dropped (which deletes the veths and taps inside
//! it), and every Hayate child is killed when its [`Hayate`] is dropped — also when the test
//! panics. Every wait is bounded. Tests need root and `ip`, `ping`, `iperf3`; without them
//! they print a loud SKIPPED line (CI runs them as root after scripts/setup.sh).
//!
//! Also shared by the tests that use it: waiting for a listener in a namespace
//! ([`wait_listening`]), iperf3 servers and clients between hosts ([`IperfServer`],
//! [`iperf3`], [`tcp_bytes`]), and a `hayate bench` run read back from its JSON
//! ([`bench_json`]). Submodules: [`tunnel`], two hosts joined by an underlay with a tunnel
//! between Hayate and another end, and the traffic checks across it; [`ovs`], a private Open
//! vSwitch instance (userspace datapath).
//!
//! `HAYATE_BIN=target/release/hayate cargo test -p hayate --test netns_iperf -- --nocapture`
//! runs the suite against another build of the binary (throughput figures need a release one).

#![allow(dead_code)] // Each test binary uses a part of the harness.

pub mod ovs;
pub mod tunnel;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test: `HAYATE_BIN` when set (e.g. a release build, for throughput
/// figures), else the one cargo built for the tests.
pub fn hayate_bin() -> String {
    std::env::var("HAYATE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_hayate").to_string())
}

/// How a host is joined to the switch. A new backend joins the suite by adding a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortKind {
    /// A veth pair: the host's end in its namespace, the switch's end opened with
    /// `afpacket:IF`.
    AfPacket,
    /// A TAP device the switch creates with `tap:IF`, then moved into the host's namespace.
    Tap,
    /// A veth pair, the switch's end opened with `afxdp:IF` (copy mode: veths have no
    /// zero-copy).
    AfXdp,
    /// A veth pair, the switch's end opened with `afpacket:IF,prio=off` (no priority
    /// socket: control frames queue with the rest; `AfPacket` has the default, the priority
    /// lane).
    AfPacketNoPrio,
}

impl PortKind {
    /// Every kind the suite runs over.
    pub const ALL: [PortKind; 4] = [
        PortKind::AfPacket,
        PortKind::Tap,
        PortKind::AfXdp,
        PortKind::AfPacketNoPrio,
    ];

    /// The switch's port spec for interface `ifname`.
    pub fn spec(self, ifname: &str) -> String {
        match self {
            PortKind::AfPacket => format!("afpacket:{ifname}"),
            PortKind::Tap => format!("tap:{ifname}"),
            PortKind::AfXdp => format!("afxdp:{ifname}"),
            PortKind::AfPacketNoPrio => format!("afpacket:{ifname},prio=off"),
        }
    }

    /// Whether hosts may keep TCP segmentation offload on: AF_XDP carries no virtio-net
    /// header, so a host's 64 KB super-packets cannot pass (XDP frames are one page).
    pub fn carries_tso(self) -> bool {
        self != PortKind::AfXdp
    }
}

/// Whether the suite can run here; prints a loud SKIPPED line when not.
pub fn can_run(test: &str, tools: &[&str]) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED {test}: needs root (network namespaces); CI runs it as root");
        return false;
    }
    for t in tools.iter().chain(&["ip"]) {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !found {
            eprintln!("SKIPPED {test}: needs `{t}`; run scripts/setup.sh");
            return false;
        }
    }
    true
}

/// Runs a command, returning its output (never panics on failure).
pub fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", args.join(" ")))
}

/// Runs a command that must succeed.
pub fn must(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{} failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs a command inside namespace `ns`.
pub fn ns_run(ns: &str, args: &[&str]) -> Output {
    let mut full = vec!["ip", "netns", "exec", ns];
    full.extend_from_slice(args);
    run(&full)
}

/// Whether something listens on TCP `port` in namespace `ns`.
pub fn listening(ns: &str, port: u16) -> bool {
    !ns_run(ns, &["ss", "-Hltn", &format!("sport = :{port}")])
        .stdout
        .is_empty()
}

/// Waits (at most `within`) until something listens on TCP `port` in namespace `ns`;
/// whether it did.
pub fn wait_listening(ns: &str, port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if listening(ns, port) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `iperf3 -s -1` in a host's namespace: it serves one client, then exits. Killed on drop
/// when it is still running.
pub struct IperfServer(Child);

impl IperfServer {
    /// Starts it in namespace `ns` and waits (at most 20 s: on a busy machine starting takes
    /// seconds) until it listens.
    pub fn start(ns: &str) -> IperfServer {
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "iperf3", "-s", "-1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start iperf3 server");
        wait_listening(ns, 5201, Duration::from_secs(20));
        IperfServer(child)
    }

    /// Lets it exit after its one client (at most 5 s), else kills it.
    pub fn reap(mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.0.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for IperfServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs an iperf3 client (`-J` and `args`) in `link`'s host namespace, retrying for at most
/// 10 s while the server starts; its JSON. Panics when it fails.
pub fn iperf3(link: &Link, args: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut full = vec!["timeout", "40", "iperf3", "-J"];
        full.extend_from_slice(args);
        let out = link.run(&full);
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let refused = json["error"]
            .as_str()
            .is_some_and(|e| e.contains("connect"));
        if out.status.success() || !refused || Instant::now() > deadline {
            assert!(
                out.status.success(),
                "iperf3 {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout)
            );
            return json;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The bytes the receiver counted of a TCP stream of `secs` seconds from `from`'s host to
/// `dst`, an address of `to`'s host.
pub fn tcp_bytes(from: &Link, to: &Link, dst: &str, secs: u32) -> u64 {
    let server = IperfServer::start(&to.host_ns);
    let v = iperf3(from, &["-c", dst, "-t", &secs.to_string()]);
    server.reap();
    v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0)
}

/// Runs `hayate bench ARGS… --workdir DIR --json DIR/NAME.json` (`args` begins with the
/// bench's name), which must succeed; the JSON it wrote and its output (stdout, then
/// stderr), for messages.
pub fn bench_json(args: &[&str], dir: &Path) -> (Value, String) {
    let json = dir.join(format!("{}.json", args[0]));
    let out = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .arg("bench")
        .args(args)
        .arg("--workdir")
        .arg(dir)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run hayate bench");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    (v, text)
}

/// One link between a host namespace and a switch namespace.
#[derive(Debug, Clone)]
pub struct Link {
    /// The kind of switch port.
    pub kind: PortKind,
    /// The host's namespace.
    pub host_ns: String,
    /// The host's interface (in `host_ns` once configured).
    pub host_if: String,
    /// The switch's interface (in the switch namespace).
    pub switch_if: String,
    /// Addresses given to the host's interface (`10.0.0.1/24`, `fd00::1/64`).
    pub addrs: Vec<String>,
}

impl Link {
    /// The switch's port spec for this link.
    pub fn spec(&self) -> String {
        self.kind.spec(&self.switch_if)
    }

    /// Runs a command in the host's namespace.
    pub fn run(&self, args: &[&str]) -> Output {
        ns_run(&self.host_ns, args)
    }

    /// Whether `count` pings to `dst` are answered (all of them), within ~`count` seconds.
    pub fn ping(&self, dst: &str, count: u32) -> bool {
        let c = count.to_string();
        let deadline = (count + 3).to_string();
        self.run(&[
            "ping", "-c", &c, "-i", "0.2", "-W", "1", "-w", &deadline, "-q", dst,
        ])
        .status
        .success()
    }

    /// Whether a single ping to `dst` gets an answer within 1 s (for "must not reach").
    pub fn reaches(&self, dst: &str) -> bool {
        self.run(&["ping", "-c", "2", "-i", "0.2", "-W", "1", "-q", dst])
            .status
            .success()
    }

    /// The host interface's (rx_packets, tx_packets, rx_bytes, tx_bytes).
    pub fn counters(&self) -> (u64, u64, u64, u64) {
        let read = |c: &str| -> u64 {
            let path = format!("/sys/class/net/{}/statistics/{c}", self.host_if);
            let o = self.run(&["cat", &path]);
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse()
                .unwrap_or(0)
        };
        (
            read("rx_packets"),
            read("tx_packets"),
            read("rx_bytes"),
            read("tx_bytes"),
        )
    }
}

/// A set of namespaces and links, all deleted on drop.
pub struct Net {
    /// Prefix of every name (unique per test process and test).
    pub prefix: String,
    namespaces: Vec<String>,
    /// Scratch directory for configs and stats.
    pub dir: tempfile::TempDir,
    /// Extra arguments for every `hayate run` this net starts (e.g. `--frame-size 16384`).
    pub run_args: Vec<String>,
    /// `--pool-frames` of every `hayate run` this net starts (16384 unless a test says).
    pub pool_frames: u32,
    /// A command every `hayate run` of this net is started under, inside the switch
    /// namespace (e.g. `prlimit --nofile=1024:1024`).
    pub run_under: Vec<String>,
}

impl Net {
    /// A new, empty net with a unique prefix.
    pub fn new() -> Net {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        Net {
            prefix: format!("hy{}{n}", std::process::id() % 100_000),
            namespaces: Vec::new(),
            dir: tempfile::tempdir().expect("temp dir"),
            run_args: Vec::new(),
            pool_frames: 16384,
            run_under: Vec::new(),
        }
    }

    /// Where the switches of this net put their management sockets (for `hayate ctl
    /// --run-dir`).
    pub fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// `hayate ctl --run-dir <this net's> BRIDGE ARGS…` against a switch of this net;
    /// returns its output, panicking with it unless the command succeeds.
    pub fn ctl(&self, bridge: &str, args: &[&str]) -> String {
        let o = Command::new(hayate_bin())
            .arg("ctl")
            .arg("--run-dir")
            .arg(self.run_dir())
            .arg(bridge)
            .args(args)
            .output()
            .expect("run hayate ctl");
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "hayate ctl {bridge} {args:?}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    }

    /// Creates namespace `<prefix><name>` with loopback up; returns its name.
    pub fn ns(&mut self, name: &str) -> String {
        let ns = format!("{}{name}", self.prefix);
        must(&["ip", "netns", "add", &ns]);
        self.namespaces.push(ns.clone());
        must(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        ns
    }

    /// A switch namespace: IPv6 off, so the switch's own interfaces send nothing.
    pub fn switch_ns(&mut self, name: &str) -> String {
        let ns = self.ns(name);
        for k in ["all", "default"] {
            let key = format!("net.ipv6.conf.{k}.disable_ipv6=1");
            ns_run(&ns, &["sysctl", "-q", "-w", &key]);
        }
        ns
    }

    /// A link of `kind` between a new host namespace `host` and `switch_ns`. A veth is
    /// created now; a tap is created by the switch and moved by [`Net::configure`].
    pub fn link(&mut self, kind: PortKind, host: &str, switch_ns: &str, addrs: &[&str]) -> Link {
        self.link_queues(kind, host, switch_ns, addrs, 1)
    }

    /// As [`Net::link`], with `queues` rx/tx queues on each end of a veth (an AF_XDP port
    /// serves only the queues it opens: a veth's peer picks the receive queue per flow).
    pub fn link_queues(
        &mut self,
        kind: PortKind,
        host: &str,
        switch_ns: &str,
        addrs: &[&str],
        queues: u16,
    ) -> Link {
        let host_ns = self.ns(host);
        let switch_if = format!("{}{host}s", self.prefix);
        let host_if = match kind {
            PortKind::AfPacket | PortKind::AfXdp | PortKind::AfPacketNoPrio => {
                format!("{}{host}h", self.prefix)
            }
            PortKind::Tap => switch_if.clone(),
        };
        assert!(switch_if.len() <= 15, "interface name {switch_if} too long");
        if kind != PortKind::Tap {
            let q = queues.to_string();
            must(&[
                "ip",
                "link",
                "add",
                &host_if,
                "netns",
                &host_ns,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                &switch_if,
                "netns",
                switch_ns,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
            ]);
            let key = format!("net.ipv6.conf.{switch_if}.disable_ipv6=1");
            ns_run(switch_ns, &["sysctl", "-q", "-w", &key]);
            must(&["ip", "-n", switch_ns, "link", "set", &switch_if, "up"]);
        }
        Link {
            kind,
            host_ns,
            host_if,
            switch_if,
            addrs: addrs.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A plain veth between two switch namespaces (a trunk), both ends up.
    pub fn trunk(&mut self, ns_a: &str, ns_b: &str, tag: &str) -> (String, String) {
        let (a, b) = (
            format!("{}{tag}a", self.prefix),
            format!("{}{tag}b", self.prefix),
        );
        must(&[
            "ip", "link", "add", &a, "netns", ns_a, "type", "veth", "peer", "name", &b, "netns",
            ns_b,
        ]);
        for (ns, i) in [(ns_a, &a), (ns_b, &b)] {
            let key = format!("net.ipv6.conf.{i}.disable_ipv6=1");
            ns_run(ns, &["sysctl", "-q", "-w", &key]);
            must(&["ip", "-n", ns, "link", "set", i, "up"]);
        }
        (a, b)
    }

    /// Gives the host its interface (moving a tap out of `switch_ns`), addresses and link up.
    /// Call after the switch runs.
    pub fn configure(&self, link: &Link, switch_ns: &str) {
        if link.kind == PortKind::Tap {
            must(&[
                "ip",
                "-n",
                switch_ns,
                "link",
                "set",
                &link.switch_if,
                "netns",
                &link.host_ns,
            ]);
        }
        if !link.addrs.iter().any(|a| a.contains(':')) {
            // An IPv4-only host sends no IPv6 (link-local DAD, MLD reports, router
            // solicitations as its link comes up): such frames, flooded to a host whose link
            // is not up yet, are refused by its veth after the switch counted them sent, and
            // exact counter checks would fail on them.
            let key = format!("net.ipv6.conf.{}.disable_ipv6=1", link.host_if);
            ns_run(&link.host_ns, &["sysctl", "-q", "-w", &key]);
        }
        for a in &link.addrs {
            let mut args = vec!["ip", "-n", &link.host_ns, "addr", "add", a, "dev"];
            args.push(&link.host_if);
            if a.contains(':') {
                args.push("nodad");
            }
            must(&args);
        }
        must(&[
            "ip",
            "-n",
            &link.host_ns,
            "link",
            "set",
            &link.host_if,
            "up",
        ]);
    }

    /// Starts Hayate in `switch_ns` on `ports` (specs, numbered from 1) with `flows` (none:
    /// standalone L2 learning), one poll thread per entry of `cores` (each clamped to the last
    /// core); waits (≤ 10 s) until it runs.
    pub fn hayate(
        &self,
        switch_ns: &str,
        ports: &[String],
        flows: &[&str],
        cores: &[usize],
    ) -> Hayate {
        self.hayate_with(switch_ns, ports, flows, cores, "")
    }

    /// As [`Net::hayate`], with `bridge_toml` added to the bridge's table (e.g. controllers
    /// and fail mode) and the management socket in this net's folder ([`Net::run_dir`]).
    pub fn hayate_with(
        &self,
        switch_ns: &str,
        ports: &[String],
        flows: &[&str],
        cores: &[usize],
        bridge_toml: &str,
    ) -> Hayate {
        let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
        let cores: Vec<String> = cores.iter().map(|c| (*c).min(last).to_string()).collect();
        let tag = format!("{switch_ns}-{}", cores.join("-"));
        let cfg = self.dir.path().join(format!("{tag}.toml"));
        let stats = self.dir.path().join(format!("{tag}.json"));
        let log = self.dir.path().join(format!("{tag}.log"));
        let mut text = format!(
            "[[bridge]]\nname = \"br0\"\ncores = [{}]\n{bridge_toml}\nflows = [\n",
            cores.join(", ")
        );
        for f in flows {
            text += &format!("  \"{f}\",\n");
        }
        text += "]\n";
        for p in ports {
            text += &format!("[[bridge.port]]\nname = \"{p}\"\nspec = \"{p}\"\n");
        }
        std::fs::write(&cfg, text).expect("write config");
        let bin = hayate_bin();
        let child = Command::new("ip")
            .args(["netns", "exec", switch_ns])
            .args(&self.run_under)
            .args([&bin, "run", "--stats-interval", "0"])
            .arg("--pool-frames")
            .arg(self.pool_frames.to_string())
            .arg("--config")
            .arg(&cfg)
            .arg("--stats-json")
            .arg(&stats)
            .arg("--run-dir")
            .arg(self.run_dir())
            .args(&self.run_args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start hayate");
        let h = Hayate {
            child: Some(child),
            stats,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = h.log_text();
            if text.contains("running") {
                break;
            }
            assert!(
                Instant::now() < deadline && !text.contains("hayate: "),
                "hayate did not start: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        h
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.namespaces.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A counter of `hayate ctl BRIDGE dump-pmd`'s total (the last value printed for `name`).
pub fn pmd_counter(text: &str, name: &str) -> u64 {
    text.lines()
        .rev()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()?.trim_end_matches(':') == name).then(|| w.next()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no {name} in dump-pmd: {text}"))
}

/// Final counters of one switch port (from `hayate run --stats-json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Packets received by the switch on this port.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames lost on receive because the switch did not keep up (e.g. ring full).
    pub rx_dropped: u64,
    /// Frames the port dropped on receive (malformed or refused offload).
    pub rx_errors: u64,
    /// Packets sent by the switch on this port.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Errors on send.
    pub tx_errors: u64,
}

/// A running Hayate child process; killed on drop.
pub struct Hayate {
    child: Option<Child>,
    stats: PathBuf,
    log: PathBuf,
}

impl Hayate {
    /// The switch's process id (`ip netns exec` and `prlimit` exec it in place).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// What the switch wrote to stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The CPUs thread `name` of the switch may run on (`Cpus_allowed_list` of its task), or
    /// `None` when it has no such thread.
    pub fn thread_cpus(&self, name: &str) -> Option<String> {
        // `ip netns exec` execs the switch in place: the child's pid is the switch's.
        let pid = self.child.as_ref()?.id();
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.trim() != name {
                continue;
            }
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            return status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string());
        }
        None
    }

    /// Stops the switch (SIGTERM, ≤ 10 s) and returns each port's final counters by spec.
    pub fn stop(mut self) -> Vec<(String, PortCounters)> {
        let mut child = self.child.take().expect("running");
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait hayate") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("hayate did not stop within 10 s: {}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "hayate failed: {}", self.log_text());
        let text = std::fs::read_to_string(&self.stats).expect("stats json");
        let rows: Vec<Value> = serde_json::from_str(&text).expect("stats json parses");
        rows.iter()
            .map(|r| {
                let n = |k: &str| r[k].as_u64().unwrap_or(0);
                (
                    r["name"].as_str().unwrap_or("").to_string(),
                    PortCounters {
                        rx_packets: n("rx_packets"),
                        rx_bytes: n("rx_bytes"),
                        rx_dropped: n("rx_dropped"),
                        rx_errors: n("rx_errors"),
                        tx_packets: n("tx_packets"),
                        tx_bytes: n("tx_bytes"),
                        tx_errors: n("tx_errors"),
                    },
                )
            })
            .collect()
    }
}

impl Drop for Hayate {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The counters of the port with spec `spec`.
pub fn port<'a>(stats: &'a [(String, PortCounters)], spec: &str) -> &'a PortCounters {
    &stats
        .iter()
        .find(|(n, _)| n == spec)
        .unwrap_or_else(|| panic!("no port {spec} in {stats:?}"))
        .1
}

/// Makes the hosts stop sending and lets what is in flight arrive, then reads every host's
/// counters: call before [`Hayate::stop`] to compare counts exactly.
///
/// Each host's interface gets an nftables egress rule that drops everything it would send
/// (before the interface counts it), so no new frame enters the switch — not the IPv6
/// chatter, not a late ARP — while the links stay up, so frames the switch still forwards
/// are received and counted by the hosts. Then the counters are read until they stay put over
/// 300 ms (at most 5 s). Taking the links down instead raced: a frame the switch forwarded
/// after a host's link went down was in the switch's tx count and in no host's rx count.
pub fn freeze(links: &[&Link]) -> Vec<(u64, u64, u64, u64)> {
    for l in links {
        let nft = |args: &[&str]| {
            let mut all = vec!["ip", "netns", "exec", &l.host_ns, "nft"];
            all.extend_from_slice(args);
            must(&all);
        };
        let hook = format!(
            "{{ type filter hook egress device \"{}\" priority 0; policy drop; }}",
            l.host_if
        );
        nft(&["add", "table", "netdev", "hayate_freeze"]);
        nft(&["add", "chain", "netdev", "hayate_freeze", &l.host_if, &hook]);
    }
    let read = || links.iter().map(|l| l.counters()).collect::<Vec<_>>();
    let mut last = read();
    for _ in 0..16 {
        std::thread::sleep(Duration::from_millis(300));
        let now = read();
        if now == last {
            break;
        }
        last = now;
    }
    last
}

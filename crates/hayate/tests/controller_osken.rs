//! A real controller drives Hayate: os-ken (PyPI, installed into a venv by
//! scripts/setup.sh) runs a learning switch in the style of simple_switch_13
//! (tests/controllers/learning_switch.py) and takes over a bridge in secure fail mode whose
//! ports are veths into namespace hosts, on AF_XDP and on AF_PACKET. The hosts ping each
//! other and run a short iperf3 TCP stream; the flows the controller installed are read back
//! with `hayate ctl dump-flows`. An ignored benchmark measures how many new flows per second
//! the controller sets up through the switch.

mod netns;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netns::{Net, PortKind};

/// The venv's python with os-ken: `$HAYATE_VENV/bin/python`, by default the one
/// scripts/setup.sh makes.
fn venv_python() -> Option<PathBuf> {
    let dir = std::env::var_os("HAYATE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hayate/venv"));
    let py = dir.join("bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import os_ken"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(py)
}

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// The controller, in the switch's namespace (it listens on that namespace's loopback).
struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    /// Starts the learning switch on `port` in namespace `ns` (`""`: this one), with `extra`
    /// arguments (MAC=PORT preloads).
    fn start(py: &Path, ns: &str, port: u16, log: PathBuf, extra: &[&str]) -> Controller {
        let app = repo_file("tests/controllers/learning_switch.py");
        let mut cmd = if ns.is_empty() {
            Command::new(py)
        } else {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(py);
            c
        };
        let child = cmd
            .arg(&app)
            .arg(port.to_string())
            .arg("127.0.0.1")
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("controller log"))
            .spawn()
            .expect("start os-ken");
        Controller { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether something listens on `port` in namespace `ns`.
fn listening(ns: &str, port: u16) -> bool {
    let out = netns::ns_run(ns, &["ss", "-Hltn", &format!("sport = :{port}")]);
    !out.stdout.is_empty()
}

fn iperf3_bytes(net_a: &netns::Link, server: &netns::Link, dst: &str) -> u64 {
    let mut srv = Command::new("ip")
        .args(["netns", "exec", &server.host_ns, "iperf3", "-s", "-1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    let deadline = Instant::now() + Duration::from_secs(10);
    while server
        .run(&["ss", "-Hltn", "sport = :5201"])
        .stdout
        .is_empty()
    {
        assert!(Instant::now() < deadline, "iperf3 server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = net_a.run(&["timeout", "30", "iperf3", "-J", "-c", dst, "-t", "2"]);
    let _ = srv.kill();
    let _ = srv.wait();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0)
}

#[test]
fn osken_learning_switch_drives_hayate() {
    if !netns::can_run("controller_osken", &["ping", "iperf3", "ss"]) {
        return;
    }
    let Some(py) = venv_python() else {
        eprintln!("SKIPPED controller_osken: no venv with os-ken; run scripts/setup.sh");
        return;
    };
    for kind in [PortKind::AfXdp, PortKind::AfPacket] {
        let mut net = Net::new();
        let sw = net.switch_ns("sw");
        let a = net.link(kind, "a", &sw, &["10.11.0.1/24"]);
        let b = net.link(kind, "b", &sw, &["10.11.0.2/24"]);
        let port = 16653;
        let ctl = Controller::start(&py, &sw, port, net.dir.path().join("osken.log"), &[]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !listening(&sw, port) {
            assert!(
                Instant::now() < deadline,
                "os-ken did not listen: {}",
                ctl.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let bridge = format!(
            "controllers = [\"tcp:127.0.0.1:{port}\"]\nfail_mode = \"secure\"\n\
             datapath_id = \"0x00000000000000b1\""
        );
        let hayate = net.hayate_with(&sw, &[a.spec(), b.spec()], &[], &[1], &bridge);
        net.configure(&a, &sw);
        net.configure(&b, &sw);

        // Secure mode: nothing passes until the controller has set the switch up.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !a.ping("10.11.0.2", 1) {
            assert!(
                Instant::now() < deadline,
                "{kind:?}: no ping through the controller; os-ken log:\n{}",
                ctl.log()
            );
        }
        assert!(a.ping("10.11.0.2", 3), "{kind:?}: a -> b");
        assert!(b.ping("10.11.0.1", 3), "{kind:?}: b -> a");
        assert!(
            ctl.log().contains("switch 00000000000000b1 connected"),
            "{kind:?}: os-ken saw the configured datapath id:\n{}",
            ctl.log()
        );

        let bytes = iperf3_bytes(&a, &b, "10.11.0.2");
        eprintln!("{kind:?}: iperf3 through os-ken's flows: {bytes} bytes in 2 s");
        assert!(bytes > 1_000_000, "{kind:?}: iperf3 moved {bytes} bytes");

        // The controller's flows: the table-miss to CONTROLLER and learnt pairs.
        let dump = Command::new(env!("CARGO_BIN_EXE_hayate"))
            .args(["ctl", "--run-dir"])
            .arg(net.run_dir())
            .args(["br0", "dump-flows"])
            .output()
            .expect("hayate ctl");
        let text = String::from_utf8_lossy(&dump.stdout);
        assert!(dump.status.success(), "dump-flows: {text}");
        assert!(
            text.contains("priority=0") && text.contains("actions=CONTROLLER"),
            "{kind:?}: table-miss flow missing:\n{text}"
        );
        let learnt = text
            .lines()
            .filter(|l| l.contains("priority=1") && l.contains("dl_dst="))
            .count();
        assert!(
            learnt >= 2,
            "{kind:?}: learnt flows (want both directions):\n{text}"
        );
        let used = text
            .lines()
            .filter(|l| l.contains("priority=1") && !l.contains("n_packets=0,"))
            .count();
        assert!(used >= 2, "{kind:?}: learnt flows carried packets:\n{text}");
        drop(hayate);
        drop(ctl);
    }
}

/// Active entries in table 0 (`hayate ctl dump-tables`).
fn active_flows(run_dir: &Path, bridge: &str) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .args(["ctl", "--run-dir"])
        .arg(run_dir)
        .args([bridge, "dump-tables"])
        .output()
        .expect("hayate ctl");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("active=")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// New flows per second set up through os-ken: a null source sends from 1,000,000 source
/// MACs in turn towards one MAC the controller already knows, so every packet-in the switch
/// lets through (rate limit `HAYATE_BENCH_PACKET_IN_RATE`, default 50,000/s) is a new flow;
/// the table's growth over 10 s is the rate. Run with:
/// `cargo test --release -p hayate --test controller_osken -- --ignored --nocapture`
#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn osken_new_flows_per_second() {
    let Some(py) = venv_python() else {
        panic!("no venv with os-ken: run scripts/setup.sh");
    };
    let rate: u32 = std::env::var("HAYATE_BENCH_PACKET_IN_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The null template's destination MAC is behind port 2.
    let ctl = Controller::start(
        &py,
        "",
        port,
        dir.path().join("osken.log"),
        &["02:00:00:00:00:02=2"],
    );
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "os-ken: {}",
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let cfg = dir.path().join("pi.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[bridge]]\nname = \"pib\"\ncontrollers = [\"tcp:127.0.0.1:{port}\"]\n\
             fail_mode = \"secure\"\npacket_in_rate = {rate}\npacket_in_burst = {}\n\
             [[bridge.port]]\nspec = \"null:macs=1000000\"\n\
             [[bridge.port]]\nspec = \"null:sink\"\n",
            (rate / 10).max(1)
        ),
    )
    .unwrap();
    let run_dir = dir.path().join("run");
    let log = std::fs::File::create(dir.path().join("hayate.log")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .args(["run", "--config", cfg.to_str().unwrap()])
        .arg("--run-dir")
        .arg(&run_dir)
        .args(["--stats-interval", "0", "--duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    // Warm up until flows appear, then measure 10 s.
    let t = Instant::now();
    while active_flows(&run_dir, "pib") < 100 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no flows from os-ken: {}",
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (f0, w0) = (active_flows(&run_dir, "pib"), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let (f1, w) = (active_flows(&run_dir, "pib"), w0.elapsed().as_secs_f64());
    let _ = child.kill();
    let _ = child.wait();
    let per_s = (f1 - f0) as f64 / w;
    println!(
        "os-ken learning switch: {per_s:.0} new flows/s through Hayate \
         ({} flows in {w:.1} s; packet-in limit {rate}/s)",
        f1 - f0
    );
    assert!(f1 > f0, "the controller installed no flow while measuring");
}

//! A real controller drives Hayate: os-ken (PyPI, installed into a venv by
//! scripts/setup.sh) runs a learning switch in the style of simple_switch_13
//! (tests/controllers/learning_switch.py) and takes over a bridge in secure fail mode whose
//! ports are veths into namespace hosts, on AF_XDP and on AF_PACKET. The hosts ping each
//! other and run a short iperf3 TCP stream; the flows the controller installed are read back
//! with `hayate ctl dump-flows`.

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
    fn start(py: &Path, ns: &str, port: u16, log: PathBuf) -> Controller {
        let app = repo_file("tests/controllers/learning_switch.py");
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(py)
            .arg(&app)
            .arg(port.to_string())
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
        let ctl = Controller::start(&py, &sw, port, net.dir.path().join("osken.log"));
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

//! A real controller drives Hayate: os-ken (PyPI, installed into a venv by
//! scripts/setup.sh) runs a learning switch in the style of simple_switch_13
//! (tests/controllers/learning_switch.py) and takes over a bridge in secure fail mode whose
//! ports are veths into namespace hosts, on AF_XDP and on AF_PACKET. The hosts ping each
//! other and run a short iperf3 TCP stream; the flows the controller installed are read back
//! with `hayate ctl dump-flows`. An ignored benchmark measures how many new flows per second
//! the controller sets up through the switch.

mod controller_common;
mod netns;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use controller_common::Process;
use netns::{Net, PortKind};

/// The controller, in the switch's namespace (it listens on that namespace's loopback).
struct Controller {
    _process: Process,
    log: PathBuf,
}

impl Controller {
    /// Starts the learning switch on `port` in namespace `ns` (`""`: this one), with `extra`
    /// arguments (MAC=PORT preloads).
    fn start(py: &Path, ns: &str, port: u16, log: PathBuf, extra: &[&str]) -> Controller {
        let app = controller_common::repo_file("tests/controllers/learning_switch.py");
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
        Controller {
            _process: Process(child),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

#[test]
fn osken_learning_switch_drives_hayate() {
    if !netns::can_run("controller_osken", &["ping", "iperf3", "ss"]) {
        return;
    }
    let Some(py) = controller_common::osken_python() else {
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
        assert!(
            netns::wait_listening(&sw, port, Duration::from_secs(30)),
            "os-ken did not listen: {}",
            ctl.log()
        );
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

        let bytes = netns::tcp_bytes(&a, &b, "10.11.0.2", 2);
        eprintln!("{kind:?}: iperf3 through os-ken's flows: {bytes} bytes in 2 s");
        assert!(bytes > 1_000_000, "{kind:?}: iperf3 moved {bytes} bytes");

        // The controller's flows: the table-miss to CONTROLLER and learnt pairs.
        let text = net.ctl("br0", &["dump-flows"]);
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
        let log = ctl.log();
        assert!(
            !log.contains("OFP error"),
            "{kind:?}: the switch sent os-ken errors:\n{log}"
        );
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

/// Starts `hayate run` with one bridge `pib` whose port 1 sends from 1,000,000 source MACs
/// in turn (towards the null template's destination MAC, preloaded at port 2) and whose
/// controller is `tcp:127.0.0.1:{port}`; returns the measured new flows per second (table
/// growth over 10 s after the first 100 flows).
fn new_flows_per_second(port: u16, rate: u32, dir: &Path, ctl_log: &dyn Fn() -> String) -> f64 {
    let cfg = dir.join("pi.toml");
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
    let run_dir = dir.join("run");
    let log = std::fs::File::create(dir.join("hayate.log")).unwrap();
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
            "no flows from the controller: {}",
            ctl_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (f0, w0) = (active_flows(&run_dir, "pib"), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let (f1, w) = (active_flows(&run_dir, "pib"), w0.elapsed().as_secs_f64());
    let _ = child.kill();
    let _ = child.wait();
    assert!(f1 > f0, "the controller installed no flow while measuring");
    (f1 - f0) as f64 / w
}

fn bench_rate() -> u32 {
    std::env::var("HAYATE_BENCH_PACKET_IN_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// New flows per second set up through os-ken: a null source sends from 1,000,000 source
/// MACs in turn towards one MAC the controller already knows, so every packet-in the switch
/// lets through (rate limit `HAYATE_BENCH_PACKET_IN_RATE`, default 50,000/s) is a new flow;
/// the table's growth over 10 s is the rate. The same app runs on CPython (the venv of
/// scripts/setup.sh) and, when scripts/setup-pypy.sh has made its venv (`HAYATE_PYPY_VENV`,
/// default /var/cache/hayate/venv-pypy), on PyPy, one after the other. Run with:
/// `cargo test --release -p hayate --test controller_osken -- --ignored --nocapture --test-threads=1`
/// (one at a time: the two benchmarks share the machine's two cores otherwise).
#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn osken_new_flows_per_second() {
    let Some(py) = controller_common::osken_python() else {
        panic!("no venv with os-ken: run scripts/setup.sh");
    };
    let pypy = std::env::var_os("HAYATE_PYPY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hayate/venv-pypy"))
        .join("bin/python");
    let mut runs = vec![("CPython", py)];
    if Command::new(&pypy)
        .args(["-c", "import os_ken"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        runs.push(("PyPy", pypy));
    } else {
        println!("PyPy: skipped (no os-ken venv on PyPy; run scripts/setup-pypy.sh)");
    }
    let rate = bench_rate();
    for (name, py) in runs {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
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
        let per_s = new_flows_per_second(port, rate, dir.path(), &|| ctl.log());
        assert!(
            !ctl.log().contains("OFP error"),
            "the switch sent errors: {}",
            ctl.log()
        );
        println!(
            "os-ken learning switch on {name}: {per_s:.0} new flows/s through Hayate \
             (packet-in limit {rate}/s)"
        );
    }
}

/// The same learning logic as tests/controllers/learning_switch.py, compiled: what the
/// switch sustains when the controller is not the bottleneck.
fn rust_learning_controller(listener: std::net::TcpListener) {
    use openflow::{FlowModMsg, Hello, Message, PacketOut};
    use pipeline::model::{ports, Action, FlowMod, Instruction, Match};
    use std::io::{Read, Write};
    let (mut s, _) = listener.accept().unwrap();
    s.set_nodelay(true).unwrap();
    let mut out = Vec::new();
    let send = |s: &mut std::net::TcpStream, out: &mut Vec<u8>, m: &Message| {
        out.clear();
        openflow::encode(0, m, out).unwrap();
        s.write_all(out)
    };
    let _ = send(&mut s, &mut out, &Message::Hello(Hello::default()));
    let miss = FlowMod::add(
        0,
        0,
        Match::ANY,
        vec![Instruction::ApplyActions(vec![Action::Output {
            port: ports::CONTROLLER,
            max_len: 0xffff,
        }])],
    );
    let _ = send(
        &mut s,
        &mut out,
        &Message::FlowMod(FlowModMsg {
            flow_mod: miss,
            buffer_id: openflow::NO_BUFFER,
        }),
    );
    let known: std::collections::HashMap<[u8; 6], u32> =
        [([2, 0, 0, 0, 0, 2], 2)].into_iter().collect();
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut batch = Vec::new();
    loop {
        let n = match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut at = 0;
        batch.clear();
        while buf.len() - at >= 8 {
            let len = usize::from(u16::from_be_bytes([buf[at + 2], buf[at + 3]]));
            if len < 8 || buf.len() - at < len {
                break;
            }
            let msg = openflow::decode(&buf[at..at + len]).map(|(h, m)| (h.xid, m));
            at += len;
            match msg {
                Ok((x, Message::EchoRequest(d))) => {
                    openflow::encode(x, &Message::EchoReply(d), &mut batch).unwrap();
                }
                Ok((_, Message::PacketIn(pi))) if pi.data.len() >= 14 => {
                    let in_port = pi.matcher.get(packet::Field::InPort).0 as u32;
                    let dst: [u8; 6] = pi.data[0..6].try_into().unwrap();
                    let src: [u8; 6] = pi.data[6..12].try_into().unwrap();
                    let out_port = known.get(&dst).copied().unwrap_or(ports::FLOOD);
                    let actions = vec![Action::Output {
                        port: out_port,
                        max_len: 0,
                    }];
                    if out_port != ports::FLOOD {
                        let mut m = Match::ANY;
                        m.set_exact(packet::Field::InPort, u128::from(in_port));
                        m.set_exact(packet::Field::EthSrc, mac(src));
                        m.set_exact(packet::Field::EthDst, mac(dst));
                        let fm =
                            FlowMod::add(0, 1, m, vec![Instruction::ApplyActions(actions.clone())]);
                        let msg = Message::FlowMod(FlowModMsg {
                            flow_mod: fm,
                            buffer_id: openflow::NO_BUFFER,
                        });
                        openflow::encode(0, &msg, &mut batch).unwrap();
                    }
                    let po = Message::PacketOut(PacketOut {
                        buffer_id: openflow::NO_BUFFER,
                        in_port,
                        actions,
                        data: pi.data,
                    });
                    openflow::encode(0, &po, &mut batch).unwrap();
                }
                _ => {}
            }
        }
        buf.drain(..at);
        if !batch.is_empty() && s.write_all(&batch).is_err() {
            return;
        }
    }
}

fn mac(b: [u8; 6]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x))
}

/// New flows per second with the compiled learning controller (see
/// [`rust_learning_controller`]): the switch's side of the packet-in round trip.
#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn compiled_controller_new_flows_per_second() {
    let rate = bench_rate();
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || rust_learning_controller(listener));
    let per_s = new_flows_per_second(port, rate, dir.path(), &String::new);
    println!("compiled learning controller: {per_s:.0} new flows/s through Hayate (packet-in limit {rate}/s)");
}

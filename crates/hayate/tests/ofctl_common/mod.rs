//! A `hayate run` child listening for OpenFlow on a free loopback port, and `ovs-ofctl`,
//! `hayate ctl` or a raw OpenFlow [`Session`] driving it. The child is killed when the guard
//! drops, even when a test fails.
#![allow(dead_code)]

mod session;

pub use session::Session;

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A 60-byte UDP frame 10.0.0.1:1024 → 10.0.0.2:1024 (no FCS), as hex.
pub const UDP_FRAME_HEX: &str = "00000000000200000000000108004500002e00000000401166bd0a0000010a00000204000400001a0000000000000000000000000000000000000000";

/// Hex, spaces and line breaks allowed anywhere, as bytes.
pub fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Whether `ovs-ofctl` can run here; says so loudly when not.
pub fn have_ofctl(test: &str) -> bool {
    let ok = Command::new("ovs-ofctl")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!(
            "\n*** SKIPPED {test}: ovs-ofctl is not installed (apt-get install -y openvswitch-common; scripts/setup.sh does it) ***\n"
        );
    }
    ok
}

/// A free TCP port on the loopback (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A running switch.
pub struct Hayate {
    child: Option<Child>,
    /// OpenFlow port on 127.0.0.1.
    pub port: u16,
    /// Its run directory (management socket) and scratch files.
    pub dir: tempfile::TempDir,
}

impl Hayate {
    /// Starts `hayate run` with `args` plus a controller listener on a free port and a run
    /// dir of its own; waits until the listener accepts.
    pub fn start(args: &[&str]) -> Hayate {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::start_in(dir, args)
    }

    /// Bridge `br0` in secure fail mode with two `null:sink` ports (1 and 2): a switch whose
    /// tables only a test fills.
    pub fn secure_sinks() -> Hayate {
        Self::start(&[
            "--fail-mode",
            "secure",
            "--port",
            "null:sink",
            "--port",
            "null:sink",
        ])
    }

    /// Starts `hayate run --config` on `toml`, written to `br.toml` in the run dir.
    pub fn with_config(toml: &str) -> Hayate {
        Self::with_config_binary(Path::new(env!("CARGO_BIN_EXE_hayate")), toml, 60)
    }

    /// As [`Hayate::with_config`], running the `hayate` at `bin` for at most `seconds`.
    pub fn with_config_binary(bin: &Path, toml: &str, seconds: u32) -> Hayate {
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = dir.path().join("br.toml");
        std::fs::write(&cfg, toml).expect("write br.toml");
        let cfg = cfg.to_str().expect("utf-8 temp path").to_string();
        Self::start_binary(bin, dir, &["--config", &cfg], seconds)
    }

    /// As [`Hayate::start`], with files already placed in `dir`.
    pub fn start_in(dir: tempfile::TempDir, args: &[&str]) -> Hayate {
        Self::start_binary(Path::new(env!("CARGO_BIN_EXE_hayate")), dir, args, 60)
    }

    /// As [`Hayate::start_in`], running the `hayate` at `bin` (e.g. an older build, for a
    /// benchmark's comparison) for at most `seconds`.
    pub fn start_binary(bin: &Path, dir: tempfile::TempDir, args: &[&str], seconds: u32) -> Hayate {
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("hayate.log")).expect("log file");
        let child = Command::new(bin)
            .arg("run")
            .args(args)
            .args([
                "--controller",
                &format!("ptcp:{port}:127.0.0.1"),
                "--run-dir",
                dir.path().to_str().expect("utf-8 temp path"),
                "--stats-interval",
                "0",
                "--pool-frames",
                "4096",
                "--duration",
                &seconds.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start hayate");
        let mut h = Hayate {
            child: Some(child),
            port,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                panic!(
                    "hayate did not listen on {port} within 10 s; log:\n{}",
                    h.log()
                );
            }
            if let Some(Ok(Some(st))) = h.child.as_mut().map(|c| c.try_wait()) {
                panic!("hayate exited early ({st}); log:\n{}", h.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The management socket comes up after the controller listener: wait for it too, so
        // that a test's first `hayate ctl` does not race the switch's start.
        let has_mgmt = |d: &Path| {
            std::fs::read_dir(d).is_ok_and(|mut entries| {
                entries.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "mgmt")))
            })
        };
        while !has_mgmt(h.dir.path()) {
            if Instant::now() > deadline {
                panic!(
                    "hayate made no management socket within 10 s; log:\n{}",
                    h.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        h
    }

    /// The switch's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// `tcp:127.0.0.1:PORT`.
    pub fn target(&self) -> String {
        format!("tcp:127.0.0.1:{}", self.port)
    }

    /// A path in the scratch folder.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The switch's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("hayate.log")).unwrap_or_default()
    }

    /// Runs `ovs-ofctl -O OpenFlow13 CMD TARGET ARGS…`, which must succeed; its stdout.
    pub fn ofctl(&self, cmd: &str, args: &[&str]) -> String {
        let mut c = Command::new("ovs-ofctl");
        c.args(["-O", "OpenFlow13", "--timeout=5", cmd]);
        // Options (e.g. --strict) go before the switch.
        let (opts, rest): (Vec<&str>, Vec<&str>) = args.iter().partition(|a| a.starts_with("--"));
        c.args(opts).arg(self.target()).args(rest);
        let out = c.output().expect("run ovs-ofctl");
        assert!(
            out.status.success(),
            "ovs-ofctl {cmd} {args:?} failed: {}\nswitch log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `hayate ctl RUN_DIR/BRIDGE.mgmt ARGS…`, which must succeed; its stdout.
    pub fn ctl(&self, bridge: &str, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_hayate"))
            .arg("ctl")
            .arg(self.file(&format!("{bridge}.mgmt")))
            .args(args)
            .output()
            .expect("run hayate ctl");
        assert!(
            out.status.success(),
            "hayate ctl {args:?} failed: {}\nswitch log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A raw OpenFlow session with the switch (HELLO done); reads wait at most `timeout`.
    pub fn session(&self, timeout: Duration) -> Session {
        Session::open(self.port, timeout)
    }

    /// A field of the switch's `/proc/PID/status` in KiB (`"VmRSS:"`, `"VmHWM:"`); 0 when
    /// it cannot be read.
    pub fn status_kib(&self, field: &str) -> u64 {
        status_kib(self.pid(), field)
    }

    /// Stops the switch politely (SIGTERM) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            c.kill().ok();
            c.wait().ok();
        }
    }
}

impl Drop for Hayate {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().ok();
            c.wait().ok();
        }
    }
}

/// The flow lines of a dump-flows output without the changing parts (duration), sorted.
pub fn flows(dump: &str) -> Vec<String> {
    let mut v: Vec<String> = dump
        .lines()
        .filter(|l| l.contains("actions="))
        .map(|l| {
            l.trim()
                .split(", ")
                .filter(|part| !part.starts_with("duration="))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    v.sort();
    v
}

/// Reads a pcap file's packets (classic format).
pub fn pcap_packets(path: &Path) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .expect("read pcap");
    assert!(bytes.len() >= 24, "pcap {} has no header", path.display());
    let le = bytes[0] == 0xd4;
    let rd = |b: &[u8]| {
        let a = [b[0], b[1], b[2], b[3]];
        if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let incl = rd(&bytes[at + 8..]) as usize;
        at += 16;
        if at + incl > bytes.len() {
            break;
        }
        out.push(bytes[at..at + incl].to_vec());
        at += incl;
    }
    out
}

/// A field of process `pid`'s `/proc/PID/status` in KiB (`"VmRSS:"`, `"VmHWM:"`); 0 when it
/// cannot be read.
#[allow(dead_code)] // not every test binary that includes the harness reads it
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A switch in secure fail mode, its port 1 a null sink and its port 2 writing what it sends
/// to `out.pcap` in the switch's folder.
pub fn sink_and_pcap() -> Hayate {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("pcap:out={}", dir.path().join("out.pcap").display());
    Hayate::start_in(
        dir,
        &[
            "--fail-mode",
            "secure",
            "--port",
            "null:sink",
            "--port",
            &spec,
        ],
    )
}

/// The `n` frames port 2 of a [`sink_and_pcap`] switch sent, read once it has sent them and
/// the switch has stopped.
pub fn sent_on_port_2(h: &mut Hayate, n: usize) -> Vec<Vec<u8>> {
    wait_tx(h, 2, n as u64);
    let pcap = h.file("out.pcap");
    h.stop();
    let pkts = pcap_packets(&pcap);
    assert_eq!(pkts.len(), n, "{n} frames in {}", pcap.display());
    pkts
}

/// Waits (at most 10 s) until port `port` of `h` has sent `n` packets by `dump-ports`, so
/// that what a packet-out sent is in the port's file before the switch stops.
pub fn wait_tx(h: &Hayate, port: u32, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = h.ofctl("dump-ports", &[&port.to_string()]);
        let sent = text
            .split("tx pkts=")
            .nth(1)
            .and_then(|t| t.split(',').next())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if sent.is_some_and(|s| s >= n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "port {port} sent {sent:?} of {n} packets:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of `name` in the section of `hayate ctl BR dump-drops` output whose header starts
/// with `header` (e.g. `"port 1 "`).
pub fn drop_counter(text: &str, header: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    lines.next()?;
    let prefix = format!("  {name}: ");
    lines
        .take_while(|l| l.starts_with("  "))
        .find_map(|l| l.strip_prefix(&prefix))?
        .trim()
        .parse()
        .ok()
}

//! Benchmark (ignored by default): 1,000 bridges in one `hayate run`, each connected to one
//! controller, idle. A controller in this test accepts every bridge's connection (HELLO,
//! FEATURES), then sends each an ECHO_REQUEST every second and answers the switch's own.
//! Reports the switch's CPU share over a 10 s window, the echo round-trip times and RSS.
//!
//! ```text
//! cargo test --release -p hayate --test bridges_bench -- --ignored --nocapture
//! ```
//! (`HAYATE_BENCH_BRIDGES=N` changes the count.)

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openflow::{Hello, Message};

/// What the controller's connection threads share.
#[derive(Default)]
struct Shared {
    connected: AtomicUsize,
    measuring: AtomicBool,
    stop: AtomicBool,
    /// Echo round trips seen while measuring, nanoseconds.
    rtts: Mutex<Vec<u64>>,
    /// Echo requests sent while measuring.
    sent: AtomicUsize,
}

fn send(s: &mut TcpStream, xid: u32, m: &Message) -> std::io::Result<()> {
    let mut b = Vec::new();
    openflow::encode(xid, m, &mut b).expect("encodable");
    s.write_all(&b)
}

/// Reads one message; `Ok(None)` on a read timeout.
fn read_msg(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<(u32, Message)>> {
    loop {
        if buf.len() >= 8 {
            let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
            if len >= 8 && buf.len() >= len {
                let (h, m) = openflow::decode(&buf[..len])
                    .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, format!("{e:?}")))?;
                buf.drain(..len);
                return Ok(Some((h.xid, m)));
            }
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
    }
}

/// One controller connection: handshake, then an echo every second until stopped.
fn serve(mut s: TcpStream, sh: Arc<Shared>, phase_ms: u64) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut buf = Vec::new();
    send(&mut s, 1, &Message::Hello(Hello::default()))?;
    send(&mut s, 2, &Message::FeaturesRequest)?;
    let mut featured = false;
    let mut xid = 100u32;
    let mut pending: Option<(u32, Instant)> = None;
    let mut next_echo = Instant::now() + Duration::from_millis(phase_ms);
    while !sh.stop.load(Ordering::Relaxed) {
        if featured && pending.is_none() && Instant::now() >= next_echo {
            xid += 1;
            send(&mut s, xid, &Message::EchoRequest(vec![0; 8]))?;
            pending = Some((xid, Instant::now()));
            if sh.measuring.load(Ordering::Relaxed) {
                sh.sent.fetch_add(1, Ordering::Relaxed);
            }
            next_echo += Duration::from_secs(1);
        }
        match read_msg(&mut s, &mut buf)? {
            None => {}
            Some((x, Message::EchoRequest(d))) => send(&mut s, x, &Message::EchoReply(d))?,
            Some((_, Message::FeaturesReply(_))) if !featured => {
                featured = true;
                sh.connected.fetch_add(1, Ordering::Relaxed);
            }
            Some((x, Message::EchoReply(_))) => {
                if let Some((want, t)) = pending {
                    if x == want {
                        if sh.measuring.load(Ordering::Relaxed) {
                            let rtt = t.elapsed().as_nanos() as u64;
                            sh.rtts.lock().unwrap().push(rtt);
                        }
                        pending = None;
                    }
                }
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn rss_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn a_thousand_idle_bridges_with_controllers() {
    let n: usize = std::env::var("HAYATE_BENCH_BRIDGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sh = Arc::new(Shared::default());
    {
        let sh = sh.clone();
        std::thread::spawn(move || {
            for (i, conn) in listener.incoming().enumerate() {
                let Ok(conn) = conn else { continue };
                let sh = sh.clone();
                // Spread the echoes over the second.
                let phase = (i as u64 * 997) % 1000;
                std::thread::spawn(move || {
                    let _ = serve(conn, sh, phase);
                });
            }
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = String::new();
    for i in 0..n {
        cfg.push_str(&format!(
            "[[bridge]]\nname = \"br{i}\"\ncontrollers = [\"tcp:127.0.0.1:{port}\"]\n\
             fail_mode = \"secure\"\n[[bridge.port]]\nspec = \"null:sink\"\n\n"
        ));
    }
    let path = dir.path().join("bridges.toml");
    std::fs::write(&path, cfg).unwrap();
    let log = std::fs::File::create(dir.path().join("hayate.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .args(["run", "--config", path.to_str().unwrap()])
        .args(["--run-dir", dir.path().to_str().unwrap()])
        .args([
            "--stats-interval",
            "0",
            "--pool-frames",
            "1024",
            "--duration",
            "300",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let child = Kill(child);
    let pid = child.0.id();
    let t0 = Instant::now();
    while sh.connected.load(Ordering::Relaxed) < n && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let connected = sh.connected.load(Ordering::Relaxed);
    let setup = t0.elapsed();
    assert_eq!(
        connected,
        n,
        "bridges connected within 120 s; log:\n{}",
        std::fs::read_to_string(dir.path().join("hayate.log")).unwrap_or_default()
    );
    // Let start-up work settle, then measure.
    std::thread::sleep(Duration::from_secs(5));
    sh.measuring.store(true, Ordering::Relaxed);
    let (c0, w0) = (cpu_ticks(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let (c1, w) = (cpu_ticks(pid), w0.elapsed().as_secs_f64());
    sh.measuring.store(false, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(1500));
    sh.stop.store(true, Ordering::Relaxed);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cpu_pct = 100.0 * (c1 - c0) as f64 / hz / w;
    let mut rtts = sh.rtts.lock().unwrap().clone();
    rtts.sort_unstable();
    let sent = sh.sent.load(Ordering::Relaxed);
    let pct = |p: f64| rtts[((p * rtts.len() as f64) as usize).min(rtts.len() - 1)] as f64 / 1e6;
    println!(
        "{n} bridges, {connected} connected in {:.1} s; idle: {cpu_pct:.2} % of one core over \
         {w:.1} s; RSS {} MiB",
        setup.as_secs_f64(),
        rss_mib(pid)
    );
    assert!(!rtts.is_empty(), "no echo reply while measuring");
    println!(
        "echo round trip ({} of {sent} answered): median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        rtts.len(),
        pct(0.5),
        pct(0.99),
        *rtts.last().unwrap() as f64 / 1e6
    );
    // Every echo sent while measuring was answered (the last ones may land after the flag).
    assert!(
        rtts.len() + n >= sent,
        "{} of {sent} echoes answered",
        rtts.len()
    );
    drop(child);
}

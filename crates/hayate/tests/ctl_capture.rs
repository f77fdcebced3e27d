//! `hayate ctl BRIDGE capture PORT FILTER -w FILE`: live frames as pcap that `tcpdump -r`
//! reads, with a tcpdump filter compiled by libpcap and run by the switch.

mod ofctl_common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ofctl_common::Hayate;

/// Everything goes to port 2 (only port 3, added by the test, receives).
const CONFIG: &str = r#"
[[bridge]]
name = "brcap"
fail_mode = "secure"
flows = ["priority=10,actions=output:2"]

[[bridge.port]]
name = "a"
spec = "null:sink"

[[bridge.port]]
name = "b"
spec = "null:sink"
"#;

fn have_tcpdump() -> bool {
    let ok = Command::new("tcpdump").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: tcpdump is not installed");
    }
    ok
}

/// Starts `hayate ctl brcap capture ARGS` and waits until the capture runs (the pcap header
/// is written after the switch started it).
fn capture(h: &Hayate, file: &Path, args: &[&str]) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .arg("ctl")
        .arg(h.file("brcap.mgmt"))
        .arg("capture")
        .args(args)
        .arg("-w")
        .arg(file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(file).map_or(0, |m| m.len()) < 24 {
        assert!(Instant::now() < deadline, "the capture did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// Waits for `child` to end on its own; its stderr.
fn finish(mut child: Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the capture did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `tcpdump -nn -r FILE`, one line per frame.
fn read(file: &Path) -> Vec<String> {
    let out = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tcpdump cannot read {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn a_capture_writes_the_frames_its_filter_takes_as_pcap() {
    if !have_tcpdump() {
        return;
    }
    let h = Hayate::with_config(CONFIG);
    let all = h.file("all.pcap");
    let one = h.file("one.pcap");
    // Every frame port 2 sends (stops after 100), and those from 10.0.0.1 (stopped below).
    let every = capture(&h, &all, &["b", "-c", "100"]);
    let filtered = capture(&h, &one, &["b", "src", "host", "10.0.0.1"]);
    // 100 frames over 10 sources (10.0.0.1 to 10.0.0.10, in turn) through port 3 to port 2.
    h.ctl(
        "brcap",
        &["add-port", "null:limit=100,flows=10", "ofport=3"],
    );
    let said = finish(every);
    assert!(said.contains("wrote 100 frames"), "{said}");
    let lines = read(&all);
    assert_eq!(lines.len(), 100, "{lines:?}");
    let from = |l: &&String, ip: &str| l.contains(&format!(" IP {ip}.1024 > 10.0.0.2.1024: UDP"));
    assert_eq!(
        lines.iter().filter(|l| from(l, "10.0.0.1")).count(),
        10,
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| from(l, "10.0.0.7")).count(),
        10,
        "{lines:?}"
    );
    // Every frame has gone through port 2: stop the filtered capture; it takes what the
    // switch holds, then stops.
    // SAFETY: signalling a child this test started.
    unsafe { libc::kill(filtered.id() as i32, libc::SIGINT) };
    let said = finish(filtered);
    assert!(said.contains("wrote 10 frames"), "{said}");
    assert!(said.contains("lost 0"), "{said}");
    let lines = read(&one);
    assert_eq!(lines.len(), 10, "only the frames from 10.0.0.1: {lines:?}");
    assert!(lines.iter().all(|l| from(&l, "10.0.0.1")), "{lines:?}");
}

#[test]
fn a_bad_filter_or_port_is_refused_and_nothing_runs() {
    if !have_tcpdump() {
        return;
    }
    let h = Hayate::with_config(CONFIG);
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hayate"))
            .arg("ctl")
            .arg(h.file("brcap.mgmt"))
            .arg("capture")
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["b", "udp and port banana", "-w", "-"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot compile"));
    let out = run(&["nosuch", "-w", "-"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no port nosuch"));
}

//! A switch killed with SIGKILL while it holds an AF_XDP port leaves no XDP program on the
//! interface (the bpf_link dies with the process), and the next open works. Needs root.
//!
//! The "switch" is this test binary itself, run again as a child with `HY_AFXDP_CHILD=IFNAME`
//! so that it only opens the port, says it is ready and waits to be killed.

mod afxdp_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use afxdp_support::*;
use packet::Pool;
use port::afxdp::{AfXdpConfig, AfXdpPort};
use port::Port;

const CHILD_ENV: &str = "HY_AFXDP_CHILD";
const READY: &str = "HY-AFXDP-READY";

/// The child's body: runs only when started by `a_killed_switch_leaves_no_program`.
#[test]
#[ignore = "run by a_killed_switch_leaves_no_program as a child process"]
fn child_holds_a_port_until_killed() {
    let Ok(ifname) = std::env::var(CHILD_ENV) else {
        return;
    };
    let pool = Pool::with_frames(4096);
    let port = AfXdpPort::open(&AfXdpConfig::new(&ifname), &pool).expect("child opens the port");
    let _rx = port.open_rx(0).unwrap();
    println!("{READY}");
    // Bounded: the parent kills us long before this.
    std::thread::sleep(Duration::from_secs(30));
}

/// Kills the child on drop (the parent test may panic before it kills it itself).
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_killed_switch_leaves_no_program() {
    if !root_or_say_why("a_killed_switch_leaves_no_program") {
        return;
    }
    in_netns(|| {
        let veth = Veth::new("kl");
        // The child inherits this thread's network namespace.
        let exe = std::env::current_exe().unwrap();
        let child = Command::new(exe)
            .args([
                "--exact",
                "child_holds_a_port_until_killed",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &veth.port)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut child = Child(child);
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains(READY) {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the child did not open the port within 20 s");
        assert!(veth.has_xdp(), "the child's program is attached");

        // SIGKILL: no destructor runs in the child.
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        let start = Instant::now();
        assert!(
            veth.wait_xdp(false, Duration::from_secs(5)),
            "a program is still attached {:?} after the kill: {}",
            start.elapsed(),
            ip(&["link", "show", "dev", &veth.port])
        );

        // The next switch opens the interface as if nothing happened.
        let pool = Pool::with_frames(4096);
        let port = AfXdpPort::open(&AfXdpConfig::new(&veth.port), &pool).unwrap();
        assert!(veth.has_xdp());
        drop(port);
    });
}

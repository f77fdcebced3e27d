//! A Port's QoS and Queue rows through the stock OVSDB server and `ovs-vsctl`, as Open
//! vSwitch's users write them: `hayate run --ovsdb` gives the port those egress queues
//! (`ovs-ofctl queue-get-config` shows their rates); a Queue's new rate and the Interface's
//! new ingress policing apply to the running port, whose counters go on (`ovs-ofctl
//! dump-ports`: it was not taken out and added again); a Queue changed to a minimum above its
//! maximum reaches the Interface's `error` column naming the fix while the port runs on with
//! its old rates, and fixing it clears the error and applies the new rates. Queue ids run to
//! Open vSwitch's 61439 (0xefff); one above it is refused the same way.

mod netns;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netns::{hayate_bin, must, Net};

/// Packet-outs sent to the port each time.
const PACKET_OUTS: u64 = 20;

/// A broadcast ARP request (the port's kernel side receives it and answers nothing).
const FRAME: &str = concat!(
    "ffffffffffff020000000099080600010800060400010200000000990a4e0009",
    "0000000000000a4e0009"
);

/// Port 1's `tx pkts` in `ovs-ofctl dump-ports` output.
fn tx_packets(dump: &str) -> Option<u64> {
    let at = dump.find("tx pkts=")? + "tx pkts=".len();
    let digits: String = dump[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A child process (or the detached server, by its pid file) stopped when dropped.
enum Stop {
    Child(Child),
    PidFile(std::path::PathBuf),
}

impl Drop for Stop {
    fn drop(&mut self) {
        let pid = match self {
            Stop::Child(c) => Some(c.id() as i32),
            Stop::PidFile(p) => std::fs::read_to_string(p)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok()),
        };
        if let Some(pid) = pid {
            // SAFETY: signalling a process this test started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        if let Stop::Child(c) = self {
            let _ = c.wait();
        }
    }
}

/// Waits (≤ 30 s: the machine may be loaded) until `f` holds; false if it never did.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn qos_and_queue_rows_become_a_ports_egress_queues() {
    if !netns::can_run(
        "ovsdb_qos",
        &["ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl"],
    ) {
        return;
    }
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let dir = net.dir.path().join("db");
    let target = must(&[&hayate_bin(), "ovsdb-init", "--dir", dir.to_str().unwrap()]);
    let _server = Stop::PidFile(dir.join("ovsdb-server.pid"));
    let target = target.trim().to_string();
    let db = format!("--db={target}");
    let vsctl = |args: &[&str]| {
        let mut full = vec!["ovs-vsctl", db.as_str(), "--timeout=20"];
        full.extend_from_slice(args);
        must(&full).trim().to_string()
    };
    let log = net.dir.path().join("hayate.log");
    let run_dir = net.run_dir();
    let _hayate = Stop::Child(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &sw,
                &hayate_bin(),
                "run",
                "--stats-interval",
                "0",
            ])
            .args(["--pool-frames", "4096", "--ovsdb", &target, "--run-dir"])
            .arg(&run_dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start hayate"),
    );
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        eventually(|| logs().contains("configured by the OVSDB server")),
        "{}",
        logs()
    );

    let port = format!("{}q1", net.prefix);
    vsctl(&["add-br", "br0", "--", "set-fail-mode", "br0", "secure"]);
    vsctl(&[
        "add-port",
        "br0",
        &port,
        "--",
        "set",
        "interface",
        &port,
        "type=internal",
    ]);
    vsctl(&[
        "set",
        "port",
        &port,
        "qos=@q",
        "--",
        "--id=@q",
        "create",
        "qos",
        "type=linux-htb",
        "other_config:max-rate=10000000",
        "queues:1=@a",
        "queues:61439=@b",
        "--",
        "--id=@a",
        "create",
        "queue",
        "other_config:min-rate=1000000",
        "other_config:max-rate=5000000",
        "--",
        "--id=@b",
        "create",
        "queue",
        "other_config:max-rate=300000",
    ]);
    let mgmt = format!("unix:{}", run_dir.join("br0.mgmt").display());
    let config = || {
        must(&[
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "queue-get-config",
            &mgmt,
            "1",
        ])
    };
    // Rates in tenths of a percent of the port's 10 Mbit/s.
    let want = [
        "queue 1: min_rate:10.0% max_rate:50.0%",
        "queue 61439: max_rate:3.0%",
    ];
    assert!(
        eventually(|| want.iter().all(|w| config().contains(w))),
        "{}\n{}",
        config(),
        logs()
    );

    // Counters before a change of rates: packet-outs to the port (its kernel side up, IPv6
    // off so the kernel sends nothing of its own).
    must(&[
        "ip",
        "netns",
        "exec",
        &sw,
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{port}.disable_ipv6=1"),
    ]);
    must(&["ip", "-n", &sw, "link", "set", &port, "up"]);
    let send = || {
        for _ in 0..PACKET_OUTS {
            must(&[
                "ovs-ofctl",
                "-O",
                "OpenFlow13",
                "packet-out",
                &mgmt,
                &format!("in_port=controller packet={FRAME} actions=output:1"),
            ]);
        }
    };
    let tx = || {
        tx_packets(&must(&[
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "dump-ports",
            &mgmt,
            "1",
        ]))
    };
    send();
    assert!(
        eventually(|| tx() == Some(PACKET_OUTS)),
        "tx before: {:?}",
        tx()
    );
    // New rates for queue 1 and ingress policing: they apply to the running port.
    let q1 = vsctl(&[
        "--columns=_uuid",
        "--bare",
        "find",
        "queue",
        "other_config:min-rate=1000000",
    ]);
    vsctl(&["set", "queue", &q1, "other_config:max-rate=8000000"]);
    vsctl(&[
        "set",
        "interface",
        &port,
        "ingress_policing_rate=1000",
        "ingress_policing_burst=100",
    ]);
    assert!(
        eventually(|| config().contains("queue 1: min_rate:10.0% max_rate:80.0%")),
        "{}",
        config()
    );
    let policing = "ingress_policing_rate=1000,ingress_policing_burst=100";
    assert!(
        eventually(|| net.ctl("br0", &["show"]).contains(policing)),
        "{}",
        net.ctl("br0", &["show"])
    );
    // The same port: its counters went on, and it was never taken out.
    assert_eq!(tx(), Some(PACKET_OUTS), "tx after the change of rates");
    send();
    assert!(
        eventually(|| tx() == Some(2 * PACKET_OUTS)),
        "tx after more packet-outs: {:?}",
        tx()
    );
    assert!(logs().contains("OVSDB: port rates set"), "{}", logs());

    // A minimum above the maximum: the Interface's error says so and how to fix it, and the
    // port runs on with its old rates meanwhile.
    let q2 = vsctl(&[
        "--columns=_uuid",
        "--bare",
        "find",
        "queue",
        "other_config:max-rate=300000",
    ]);
    vsctl(&["set", "queue", &q2, "other_config:min-rate=900000"]);
    let error = vsctl(&["get", "interface", &port, "error"]);
    assert!(
        error.contains("lower min_rate or raise max_rate"),
        "{error}"
    );
    assert!(
        config().contains("queue 61439: max_rate:3.0%"),
        "{}",
        config()
    );
    assert_eq!(vsctl(&["get", "interface", &port, "ofport"]), "1");
    vsctl(&["set", "queue", &q2, "other_config:min-rate=200000"]);
    assert_eq!(vsctl(&["get", "interface", &port, "error"]), "[]");
    assert!(
        eventually(|| config().contains("queue 61439: min_rate:2.0% max_rate:3.0%")),
        "{}",
        config()
    );
    assert_eq!(tx(), Some(2 * PACKET_OUTS), "tx after the refused rates");

    // A queue id above Open vSwitch's linux-htb range (0xefff) is refused naming it, and
    // taking it away clears the error.
    let qos = vsctl(&["get", "port", &port, "qos"]);
    vsctl(&["add", "qos", &qos, "queues", &format!("61440={q2}")]);
    let error = || vsctl(&["get", "interface", &port, "error"]);
    assert!(
        eventually(|| error().contains("0 ..= 61439")),
        "{}",
        error()
    );
    vsctl(&["remove", "qos", &qos, "queues", "61440"]);
    assert!(eventually(|| error() == "[]"), "{}", error());
    assert!(!logs().contains("OVSDB: port removed"), "{}", logs());
}

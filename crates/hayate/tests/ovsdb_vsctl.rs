//! Hayate configured through the stock OVSDB server, driven by the stock clients: a private
//! `ovsdb-server` made by `hayate ovsdb-init`, `hayate run --ovsdb` in a switch namespace,
//! and `ovs-vsctl` (add-br, add-port with `ofport_request`, show, set-controller,
//! set-fail-mode, del-port, a bad interface type), each in its waiting mode, so every call
//! that returns proves `cur_cfg` was written back; `ovs-vsctl get` reads the write-backs,
//! `ovsdb-client monitor` sees them arrive, ping crosses the bridge, `ovs-ofctl` holds a
//! controller connection and installs a flow on the bridge the database made. A second test
//! plugs a VM's vhost-user port with ovsdbapp (the library Neutron and os-vif use), as os-vif
//! does for a booting VM (`tests/ovsdb/osvif_plug.py`, in the venv `scripts/setup.sh` makes).

mod netns;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netns::{hayate_bin, must, ns_run, run, Net, PortKind};

/// A child process killed when dropped (also when the test panics).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// The `ovsdb-server` that `hayate ovsdb-init` detached, killed by its pid file when dropped.
struct Server(PathBuf);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(pid) = std::fs::read_to_string(self.0.join("ovsdb-server.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            // SAFETY: signalling the server this test started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

/// A database and its server, made by `hayate ovsdb-init` in a folder as a user with none
/// would make them; the server is killed when this is dropped.
struct Database {
    _server: Server,
    /// What `ovsdb-init` printed.
    init: String,
    /// The server's socket.
    sock: PathBuf,
    /// `unix:SOCKET`.
    target: String,
    /// `--db=unix:SOCKET`, for ovs-vsctl.
    db: String,
}

fn database(dir: &Path) -> Database {
    let init = must(&[&hayate_bin(), "ovsdb-init", "--dir", dir.to_str().unwrap()]);
    let server = Server(dir.to_path_buf());
    let sock = dir.canonicalize().unwrap().join("db.sock");
    let target = format!("unix:{}", sock.display());
    Database {
        _server: server,
        init,
        sock,
        db: format!("--db={target}"),
        target,
    }
}

/// `ovs-vsctl --db=… --timeout=20 ARGS` (waiting for `cur_cfg`, as by default); its stdout.
fn vsctl(db: &str, args: &[&str]) -> String {
    let mut full = vec!["ovs-vsctl", db, "--timeout=20"];
    full.extend_from_slice(args);
    must(&full).trim().to_string()
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

/// Where `hayate run --ovsdb --metrics` serves Prometheus, inside the switch's namespace.
const METRICS_PORT: u16 = 19464;

/// A scrape of the metrics in namespace `sw`.
fn metrics(sw: &str) -> String {
    let url = format!("http://127.0.0.1:{METRICS_PORT}/metrics");
    let code =
        format!("import urllib.request; print(urllib.request.urlopen('{url}').read().decode())");
    String::from_utf8_lossy(&ns_run(sw, &["python3", "-c", &code]).stdout).into_owned()
}

fn start_hayate(sw: &str, sock: &Path, run_dir: &Path, log: &Path) -> Killed {
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            sw,
            &hayate_bin(),
            "run",
            "--stats-interval",
            "0",
        ])
        .args(["--pool-frames", "16384"])
        .arg("--ovsdb")
        .arg(format!("unix:{}", sock.display()))
        .arg("--run-dir")
        .arg(run_dir)
        .args(["--metrics", &format!("127.0.0.1:{METRICS_PORT}")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("start hayate");
    let h = Killed(child);
    assert!(
        eventually(|| std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("configured by the OVSDB server")),
        "hayate did not start: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    h
}

/// A minimal OpenFlow 1.3 controller: accepts one connection on 127.0.0.1:16653, says HELLO,
/// answers echo requests, nothing else.
const CONTROLLER: &str = r#"
import socket, struct
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 16653))
s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(struct.pack("!BBHI", 4, 0, 8, 1))
    buf = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        buf += d
        while len(buf) >= 8:
            v, t, l, x = struct.unpack("!BBHI", buf[:8])
            if len(buf) < l:
                break
            m, buf = buf[:l], buf[l:]
            if t == 2:
                c.sendall(struct.pack("!BBHI", 4, 3, l, x) + m[8:])
"#;

#[test]
fn ovs_vsctl_drives_hayate_through_ovsdb() {
    if !netns::can_run(
        "ovsdb_vsctl",
        &[
            "ping",
            "python3",
            "ovsdb-server",
            "ovsdb-tool",
            "ovs-vsctl",
            "ovsdb-client",
            "ovs-ofctl",
        ],
    ) {
        return;
    }
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let a = net.link(PortKind::AfPacket, "a", &sw, &["10.19.0.1/24"]);
    let b = net.link(PortKind::AfPacket, "b", &sw, &["10.19.0.2/24"]);
    net.configure(&a, &sw);
    net.configure(&b, &sw);
    let dir = net.dir.path().join("db");
    let database = database(&dir);
    assert_eq!(database.init.trim(), database.target);
    let db = database.db.clone();
    let log = net.dir.path().join("hayate.log");
    let hayate = start_hayate(&sw, &database.sock, &net.run_dir(), &log);
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();

    // ovsdb-client sees the write-backs arrive.
    let mut monitor = Killed(
        Command::new("ovsdb-client")
            .args(["monitor", &database.target, "Open_vSwitch", "Interface"])
            .args(["name", "ofport", "link_state", "--format=csv"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("ovsdb-client"),
    );

    // add-br and add-port return only once Hayate wrote cur_cfg = next_cfg.
    let br = format!("{}br", net.prefix);
    vsctl(&db, &["add-br", &br]);
    vsctl(
        &db,
        &[
            "add-port",
            &br,
            &a.switch_if,
            "--",
            "set",
            "interface",
            &a.switch_if,
            "ofport_request=11",
        ],
    );
    vsctl(
        &db,
        &[
            "add-port",
            &br,
            &b.switch_if,
            "--",
            "set",
            "interface",
            &b.switch_if,
            "ofport_request=12",
        ],
    );
    assert_eq!(
        vsctl(&db, &["get", "interface", &a.switch_if, "ofport"]),
        "11"
    );
    assert_eq!(
        vsctl(&db, &["get", "interface", &b.switch_if, "ofport"]),
        "12"
    );
    assert_eq!(
        vsctl(&db, &["get", "interface", &a.switch_if, "link_state"]),
        "up"
    );
    assert_eq!(
        vsctl(&db, &["get", "interface", &a.switch_if, "admin_state"]),
        "up"
    );
    assert_eq!(vsctl(&db, &["get", "interface", &br, "ofport"]), "65534");
    // Bridges started by the database are scraped by --metrics.
    let port11 = format!(r#"hayate_port_link_up{{bridge="{br}",ofport="11","#);
    assert!(
        eventually(|| metrics(&sw).contains(&port11)),
        "{port11} not in the metrics:\n{}",
        metrics(&sw)
    );
    let mac = vsctl(&db, &["get", "interface", &a.switch_if, "mac_in_use"]);
    let kernel_mac = ns_run(
        &sw,
        &["cat", &format!("/sys/class/net/{}/address", a.switch_if)],
    );
    assert_eq!(
        mac.trim_matches('"'),
        String::from_utf8_lossy(&kernel_mac.stdout).trim()
    );
    let dpid = vsctl(&db, &["get", "bridge", &br, "datapath_id"]);
    assert_eq!(dpid.trim_matches('"').len(), 16, "{dpid}");
    let cfg = |col: &str| vsctl(&db, &["get", "open_vswitch", ".", col]);
    assert_eq!(cfg("cur_cfg"), cfg("next_cfg"));
    assert!(cfg("iface_types").contains("dpdkvhostuserclient"));
    let show = vsctl(&db, &["show"]);
    assert!(show.contains(&format!("Bridge {br}")), "{show}");
    assert!(show.contains(&format!("Port {}", b.switch_if)), "{show}");
    assert!(!show.contains("error:"), "{show}");

    // Standalone (no fail_mode): the bridge learns; a crosses to b.
    assert!(
        a.ping("10.19.0.2", 3),
        "ping through the bridge OVSDB made\n{}",
        logs()
    );
    assert!(
        eventually(|| {
            // A missing key is an error until the first statistics are written.
            let o = run(&[
                "ovs-vsctl",
                &db,
                "get",
                "interface",
                &a.switch_if,
                "statistics:rx_packets",
            ]);
            let s = String::from_utf8_lossy(&o.stdout);
            s.trim().parse::<u64>().is_ok_and(|n| n >= 3)
        }),
        "statistics written back"
    );

    // The monitor saw ofport 11 written for a's interface.
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(monitor.0.id() as libc::pid_t, libc::SIGTERM) };
    let mut seen = String::new();
    monitor
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut seen)
        .unwrap();
    assert!(
        seen.lines()
            .any(|l| l.contains(&a.switch_if) && l.contains(",11,")),
        "ovsdb-client monitor output:\n{seen}"
    );

    // A controller: a small OpenFlow 1.3 listener in the switch namespace (HELLO, echo
    // replies) that the bridge connects to.
    let mut ctl = Killed(
        Command::new("ip")
            .args(["netns", "exec", &sw, "python3", "-c", CONTROLLER])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 controller"),
    );
    let mut ready = [0u8; 6];
    ctl.0
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    assert_eq!(&ready, b"ready\n");
    vsctl(&db, &["set-controller", &br, "tcp:127.0.0.1:16653"]);
    assert!(
        eventually(|| vsctl(&db, &["get", "controller", &br, "is_connected"]) == "true"),
        "is_connected\n{}",
        logs()
    );
    assert_eq!(vsctl(&db, &["get", "controller", &br, "role"]), "other");
    assert!(vsctl(&db, &["get", "controller", &br, "status"]).contains("ACTIVE"));
    assert_eq!(
        vsctl(&db, &["get", "interface", &a.switch_if, "ofport"]),
        "11"
    );
    // A controller in charge and no flows: nothing forwards (Open vSwitch's rule), until
    // ovs-ofctl puts a flow on the bridge the database made.
    assert!(
        !a.reaches("10.19.0.2"),
        "forwarding without flows under a controller"
    );
    let mgmt = format!(
        "unix:{}",
        net.run_dir().join(format!("{br}.mgmt")).display()
    );
    must(&[
        "ovs-ofctl",
        "-O",
        "OpenFlow13",
        "add-flow",
        &mgmt,
        "priority=7,actions=normal",
    ]);
    assert!(a.ping("10.19.0.2", 3), "ping after ovs-ofctl add-flow");

    // The controller goes (del-controller): its connection closes, the flow tables stay.
    vsctl(&db, &["del-controller", &br]);
    let flows = must(&["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", &mgmt]);
    assert!(flows.contains("priority=7"), "flows kept: {flows}");
    assert!(a.ping("10.19.0.2", 2), "ping after del-controller");
    assert_eq!(
        vsctl(&db, &["get", "interface", &a.switch_if, "ofport"]),
        "11"
    );

    // Secure, live: the flow tables stay (the flow above still forwards); without them a
    // secure bridge forwards nothing, and back to standalone it learns again at once (no
    // controller is connected).
    vsctl(&db, &["set-fail-mode", &br, "secure"]);
    assert!(a.ping("10.19.0.2", 2), "secure keeps the flow tables");
    let ofctl = |args: &[&str]| {
        let mut full = vec!["ovs-ofctl", "-O", "OpenFlow13"];
        full.extend_from_slice(args);
        must(&full)
    };
    ofctl(&["del-flows", &mgmt]);
    assert!(
        !a.reaches("10.19.0.2"),
        "secure bridge without flows forwards"
    );
    vsctl(&db, &["set-fail-mode", &br, "standalone"]);
    assert!(
        a.ping("10.19.0.2", 3),
        "standalone again: the fail-open flow"
    );
    assert!(ofctl(&["dump-flows", &mgmt]).contains("priority=0 actions=NORMAL"));
    let ports = must(&["ovs-ofctl", "-O", "OpenFlow13", "show", &mgmt]);
    assert!(ports.contains(&format!(" 12({})", b.switch_if)), "{ports}");

    // A bad interface type: its error column, the rest untouched.
    let bad = format!("{}bad", net.prefix);
    let o = run(&[
        "ovs-vsctl",
        &db,
        "--timeout=20",
        "add-port",
        &br,
        &bad,
        "--",
        "set",
        "interface",
        &bad,
        "type=vxlan99",
    ]);
    assert!(o.status.success() || !o.stderr.is_empty());
    assert_eq!(vsctl(&db, &["get", "interface", &bad, "ofport"]), "-1");
    assert!(vsctl(&db, &["get", "interface", &bad, "error"]).contains("not supported"));
    assert!(a.ping("10.19.0.2", 2), "a bad port disturbs nothing");

    // A VM's port as os-vif plugs it: QEMU (not running yet) will own the socket; the port
    // is there, its link down until a VM serves the rings.
    let vhu = format!("{}vhu", net.prefix);
    let vhu_sock = net.dir.path().join("vm1.sock");
    vsctl(
        &db,
        &[
            "add-port",
            &br,
            &vhu,
            "--",
            "set",
            "interface",
            &vhu,
            "type=dpdkvhostuserclient",
            &format!("options:vhost-server-path={}", vhu_sock.display()),
            "ofport_request=20",
        ],
    );
    assert_eq!(vsctl(&db, &["get", "interface", &vhu, "ofport"]), "20");
    assert_eq!(
        vsctl(&db, &["get", "interface", &vhu, "link_state"]),
        "down"
    );
    assert_eq!(vsctl(&db, &["get", "interface", &vhu, "error"]), "[]");

    // A second bridge joined to the first by a patch pair: a reaches c across both.
    let c = net.link(PortKind::AfPacket, "c", &sw, &["10.19.0.3/24"]);
    net.configure(&c, &sw);
    let br2 = format!("{}br2", net.prefix);
    let (p1, p2) = (format!("{}p1", net.prefix), format!("{}p2", net.prefix));
    vsctl(
        &db,
        &[
            "add-br",
            &br2,
            "--",
            "add-port",
            &br2,
            &c.switch_if,
            "--",
            "add-port",
            &br2,
            &p2,
            "--",
            "set",
            "interface",
            &p2,
            "type=patch",
            &format!("options:peer={p1}"),
            "--",
            "add-port",
            &br,
            &p1,
            "--",
            "set",
            "interface",
            &p1,
            "type=patch",
            &format!("options:peer={p2}"),
        ],
    );
    for p in [&p1, &p2] {
        assert_eq!(vsctl(&db, &["get", "interface", p, "error"]), "[]", "{p}");
    }
    assert!(
        a.ping("10.19.0.3", 3),
        "ping across the patch pair\n{}",
        logs()
    );
    let second = format!(r#"bridge="{br2}""#);
    assert!(eventually(|| metrics(&sw).contains(&second)), "{second}");
    // A bridge deleted is stopped and no longer scraped (its patch peer stays, in error).
    vsctl(&db, &["del-br", &br2]);
    assert!(
        eventually(|| !metrics(&sw).contains(&second) && metrics(&sw).contains(&port11)),
        "{second} still scraped"
    );

    // The database goes away: forwarding goes on; it comes back: changes apply again.
    drop(database);
    assert!(a.ping("10.19.0.2", 2), "forwarding without the database");
    let _database = self::database(&dir);
    assert!(
        eventually(|| logs().matches("configured by").count() == 1
            && run(&[
                "ovs-vsctl",
                &db,
                "--timeout=2",
                "set",
                "interface",
                &vhu,
                "ofport_request=21"
            ])
            .status
            .success()),
        "reconnected\n{}",
        logs()
    );
    assert_eq!(vsctl(&db, &["get", "interface", &vhu, "ofport"]), "21");
    let text = logs();
    assert!(text.contains("connected again"), "{text}");
    // Its options change (the VM moved its socket): plugged again, same number.
    vsctl(&db, &["clear", "interface", &vhu, "ofport_request"]);
    let moved = format!(
        "options:vhost-server-path={}",
        net.dir.path().join("vm2.sock").display()
    );
    vsctl(&db, &["set", "interface", &vhu, &moved]);
    assert_eq!(vsctl(&db, &["get", "interface", &vhu, "ofport"]), "21");
    assert_eq!(vsctl(&db, &["get", "interface", &vhu, "error"]), "[]");

    // del-port: gone from the database's view and from the bridge.
    vsctl(&db, &["del-port", &br, &b.switch_if]);
    let ports = must(&["ovs-ofctl", "-O", "OpenFlow13", "show", &mgmt]);
    assert!(!ports.contains(&b.switch_if), "{ports}");
    assert!(!a.reaches("10.19.0.2"), "b's port is gone");
    assert_eq!(cfg("cur_cfg"), cfg("next_cfg"));
    drop(hayate);
}

/// The venv's python with ovsdbapp: `$HAYATE_VENV/bin/python`, by default the one
/// `scripts/setup.sh` makes.
fn venv_python() -> Option<PathBuf> {
    let venv = std::env::var_os("HAYATE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hayate/venv"));
    let py = venv.join("bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import ovsdbapp"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(py)
}

#[test]
fn ovsdbapp_plugs_a_vhost_user_port_as_os_vif_does() {
    if !netns::can_run(
        "ovsdbapp_plugs_a_vhost_user_port_as_os_vif_does",
        &["ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl"],
    ) {
        return;
    }
    let Some(py) = venv_python() else {
        eprintln!("SKIPPED ovsdbapp test: no ovsdbapp in the venv; run scripts/setup.sh");
        return;
    };
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let database = database(&net.dir.path().join("db"));
    let (target, db) = (database.target.clone(), database.db.clone());
    let log = net.dir.path().join("hayate.log");
    let _hayate = start_hayate(&sw, &database.sock, &net.run_dir(), &log);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/ovsdb/osvif_plug.py"
    );
    let br = format!("{}int", net.prefix);
    let dev = format!("{}vhu", net.prefix);
    let vm_sock = net.dir.path().join("vm.sock");
    let out = must(&[
        py.to_str().unwrap(),
        script,
        &target,
        "plug",
        &br,
        &dev,
        vm_sock.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect(&out);
    // The port is in the bridge, numbered; its link is down until a VM serves the rings.
    assert_eq!(
        v["ofport"],
        1,
        "{out}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(v["link_state"], "down", "{out}");
    assert_eq!(v["error"], serde_json::json!([]), "{out}");
    // ovs-ofctl drives the same bridge over OpenFlow.
    let mgmt = format!(
        "unix:{}",
        net.run_dir().join(format!("{br}.mgmt")).display()
    );
    let show = must(&["ovs-ofctl", "-O", "OpenFlow13", "show", &mgmt]);
    assert!(show.contains(&format!(" 1({dev})")), "{show}");
    must(&[
        "ovs-ofctl",
        "-O",
        "OpenFlow13",
        "add-flow",
        &mgmt,
        "in_port=1,actions=drop",
    ]);
    let flows = must(&["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", &mgmt]);
    assert!(flows.contains("in_port=1"), "{flows}");
    // The VM boots (DPDK's virtio-user in testpmd, owning the socket as QEMU would): the
    // switch connects, the link comes up and the VM's frames show in the statistics.
    if netns::can_run("ovsdbapp test's VM", &["dpdk-testpmd", "stdbuf"]) {
        let vm_log = net.dir.path().join("testpmd.log");
        let vm_err = net.dir.path().join("testpmd.err");
        let vm = Killed(
            Command::new("stdbuf")
                .args([
                    "-oL",
                    "dpdk-testpmd",
                    "--lcores",
                    "0@0,1@0",
                    "--main-lcore",
                    "0",
                ])
                .args(["--no-pci", "--no-huge", "-m", "256", "--file-prefix"])
                .arg(format!("hyov{}", std::process::id()))
                .arg("--vdev")
                .arg(format!(
                    "net_virtio_user0,path={},queues=1,queue_size=256,server=1",
                    vm_sock.display()
                ))
                .args(["--", "--total-num-mbufs=8192", "--forward-mode=flowgen"])
                // --stats-period: run until killed (without it testpmd waits for Enter and
                // ends at once on a closed stdin).
                .args(["--txpkts=64", "--auto-start", "--stats-period", "1"])
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&vm_log).expect("log"))
                .stderr(std::fs::File::create(&vm_err).expect("log"))
                .spawn()
                .expect("dpdk-testpmd"),
        );
        let vm_text = || {
            let out = std::fs::read(&vm_log).unwrap_or_default();
            let err = std::fs::read(&vm_err).unwrap_or_default();
            format!(
                "testpmd:\n{}\n{}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            )
        };
        assert!(
            eventually(|| vsctl(&db, &["get", "interface", &dev, "link_state"]) == "up"),
            "the VM's link came up\n{}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            vm_text()
        );
        assert!(
            eventually(|| {
                let o = run(&[
                    "ovs-vsctl",
                    &db,
                    "get",
                    "interface",
                    &dev,
                    "statistics:rx_packets",
                ]);
                let s = String::from_utf8_lossy(&o.stdout);
                s.trim().parse::<u64>().is_ok_and(|n| n > 0)
            }),
            "the VM's frames counted: {}\n{}\n{}",
            vsctl(&db, &["get", "interface", &dev, "statistics"]),
            std::fs::read_to_string(&log).unwrap_or_default(),
            vm_text()
        );
        drop(vm);
    }

    // Unplugged as os-vif does when the VM goes.
    must(&[py.to_str().unwrap(), script, &target, "unplug", &br, &dev]);
    vsctl(&db, &["br-exists", &br]);
    assert!(
        eventually(|| !must(&["ovs-ofctl", "-O", "OpenFlow13", "show", &mgmt]).contains(&dev)),
        "the port left the bridge"
    );
}

/// CPU ticks (1/100 s) thread `name` of process `pid` used so far.
fn thread_ticks(pid: u32, name: &str) -> u64 {
    let mut total = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: utime and stime are the 12th, 13th.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        total += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    total
}

/// The issue's figure: 1,000 ports added by one ovs-vsctl transaction, applied with cur_cfg
/// written back (the call returns then), and the OVSDB thread's CPU while idle after.
/// `cargo test --release -p hayate --test ovsdb_vsctl -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: run on a quiet machine"]
fn thousand_ports_in_one_transaction() {
    if !netns::can_run(
        "thousand_ports_in_one_transaction",
        &["ovsdb-server", "ovs-vsctl"],
    ) {
        return;
    }
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let database = database(&net.dir.path().join("db"));
    let db = database.db.clone();
    let log = net.dir.path().join("hayate.log");
    let hayate = start_hayate(&sw, &database.sock, &net.run_dir(), &log);
    let br = format!("{}br", net.prefix);
    vsctl(&db, &["add-br", &br]);
    let names: Vec<String> = (0..1000).map(|i| format!("{}t{i}", net.prefix)).collect();
    let mut args: Vec<&str> = vec!["ovs-vsctl", &db, "--timeout=120"];
    for n in &names {
        args.extend([
            "--",
            "add-port",
            &br,
            n,
            "--",
            "set",
            "interface",
            n,
            "type=internal",
        ]);
    }
    let t = Instant::now();
    must(&args);
    let took = t.elapsed();
    let errors = vsctl(&db, &["--columns=error", "find", "interface", "ofport=-1"]);
    assert!(errors.is_empty(), "{errors}");
    let pid = hayate.0.id();
    let before = thread_ticks(pid, "hayate");
    std::thread::sleep(Duration::from_secs(10));
    let idle = thread_ticks(pid, "hayate") - before;
    println!(
        "1000 ports in one transaction: {:.2} s to cur_cfg; OVSDB thread idle: {:.1} % of a core",
        took.as_secs_f64(),
        idle as f64 / 10.0
    );
}

/// Tunnel interfaces as Open vSwitch users add them (issue 18): `type=vxlan` / `geneve` with
/// Open vSwitch's options get an OpenFlow port; one whose remote the kernel has no route to
/// has `link_state` down and an `error` that says why, and comes up when a route appears;
/// a bad option is refused in `error`; del-port takes a tunnel port out of the bridge.
#[test]
fn ovs_vsctl_adds_vxlan_and_geneve_ports() {
    if !netns::can_run(
        "ovsdb_vsctl_tunnels",
        &["python3", "ovsdb-server", "ovsdb-tool", "ovs-vsctl"],
    ) {
        return;
    }
    let mut net = Net::new();
    let sw = net.switch_ns("sw");
    let h2 = net.ns("h2");
    // The underlay: a veth to host 2, its switch end a port of the bridge.
    let (u1, u2) = net.trunk(&sw, &h2, "u");
    must(&[
        "ip",
        "-n",
        &sw,
        "addr",
        "add",
        "192.168.79.1/24",
        "dev",
        &u1,
    ]);
    must(&[
        "ip",
        "-n",
        &h2,
        "addr",
        "add",
        "192.168.79.2/24",
        "dev",
        &u2,
    ]);
    let dir = net.dir.path().join("db");
    let database = database(&dir);
    let db = database.db.clone();
    let log = net.dir.path().join("hayate.log");
    let _hayate = start_hayate(&sw, &database.sock, &net.run_dir(), &log);
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    let br = format!("{}br", net.prefix);
    vsctl(&db, &["add-br", &br, "--", "add-port", &br, &u1]);
    let get = |iface: &str, col: &str| vsctl(&db, &["get", "interface", iface, col]);
    let add = |iface: &str, kind: &str, options: &[&str]| {
        let mut args = vec!["add-port", &br, iface, "--", "set", "interface", iface];
        let kind = format!("type={kind}");
        args.push(&kind);
        args.extend_from_slice(options);
        vsctl(&db, &args);
    };
    // A remote on the underlay: an OpenFlow port, up once its MAC address is resolved.
    add(
        "vx1",
        "vxlan",
        &["options:remote_ip=192.168.79.2", "options:key=42"],
    );
    let ofport: i64 = get("vx1", "ofport").parse().unwrap();
    assert!(ofport > 0, "vx1 ofport {ofport}: {}", logs());
    assert!(
        eventually(|| get("vx1", "link_state") == "up" && get("vx1", "error") == "[]"),
        "vx1 up: {} {}\n{}",
        get("vx1", "link_state"),
        get("vx1", "error"),
        logs()
    );
    // A remote the kernel has no route to: a port too, down, and the error says why.
    add(
        "vx2",
        "vxlan",
        &[
            "options:remote_ip=10.250.0.2",
            "options:key=7",
            "options:dst_port=4790",
            "options:csum=true",
            "options:df_default=false",
            "options:tos=0",
            "options:ttl=32",
        ],
    );
    assert!(get("vx2", "ofport").parse::<i64>().unwrap() > 0);
    assert!(
        eventually(|| get("vx2", "link_state") == "down"
            && get("vx2", "error").contains("no route to the remote endpoint")),
        "vx2 down with its reason: {} {}\n{}",
        get("vx2", "link_state"),
        get("vx2", "error"),
        logs()
    );
    let show = net.ctl(&br, &["show"]);
    assert!(
        show.contains("link down: no route to the remote endpoint"),
        "{show}"
    );
    // A route appears: the port comes up and its error clears.
    must(&[
        "ip",
        "-n",
        &sw,
        "route",
        "add",
        "10.250.0.0/24",
        "via",
        "192.168.79.2",
    ]);
    assert!(
        eventually(|| get("vx2", "link_state") == "up" && get("vx2", "error") == "[]"),
        "vx2 up with a route: {} {}\n{}",
        get("vx2", "link_state"),
        get("vx2", "error"),
        logs()
    );
    // Geneve receiving from any remote on any VNI (remote_ip=flow, key=flow).
    add(
        "gnv",
        "geneve",
        &[
            "options:remote_ip=flow",
            "options:key=flow",
            "options:local_ip=192.168.79.1",
        ],
    );
    assert!(get("gnv", "ofport").parse::<i64>().unwrap() > 0);
    // A bad option: refused in the error column, the rest untouched.
    add(
        "vx3",
        "vxlan",
        &["options:remote_ip=192.168.79.2", "options:key=nope"],
    );
    assert_eq!(get("vx3", "ofport"), "-1");
    assert!(
        get("vx3", "error").contains("key"),
        "{}",
        get("vx3", "error")
    );
    let types = vsctl(&db, &["get", "open_vswitch", ".", "iface_types"]);
    assert!(
        types.contains("vxlan") && types.contains("geneve"),
        "{types}"
    );
    // del-port: the tunnel port leaves the bridge.
    vsctl(&db, &["del-port", &br, "vx1"]);
    assert!(!net.ctl(&br, &["show"]).contains("\"vx1\""));
    assert!(net.ctl(&br, &["show"]).contains("\"vx2\""));
}

//! A private Open vSwitch instance for tests: its own database, sockets and logs in a folder
//! of the test's [`Net`](super::Net), `ovs-vswitchd` in a namespace, bridges on the
//! userspace datapath (`datapath_type=netdev`: no kernel module needed). Both daemons are
//! stopped when the [`Ovs`] is dropped, also when the test panics.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Open vSwitch's daemon as Debian installs it.
const OVS_VSWITCHD: &str = "/usr/sbin/ovs-vswitchd";
/// Open vSwitch's database schema as Debian installs it.
const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// Why Open vSwitch cannot run here, if it cannot (scripts/setup.sh installs it).
pub fn unavailable() -> Option<String> {
    (!Path::new(OVS_VSWITCHD).exists() || !Path::new(OVS_SCHEMA).exists())
        .then(|| "Open vSwitch is not installed; run scripts/setup.sh".into())
}

/// A running private Open vSwitch.
pub struct Ovs {
    dir: PathBuf,
}

impl Ovs {
    /// Starts `ovsdb-server` (a fresh database in `dir`) and `ovs-vswitchd` in namespace
    /// `ns`; panics with the daemon's log when it does not start.
    pub fn start(ns: &str, dir: &Path) -> Ovs {
        std::fs::create_dir_all(dir).expect("ovs folder");
        let o = Ovs {
            dir: dir.to_path_buf(),
        };
        let d = dir.display();
        let conf = format!("{d}/conf.db");
        o.must(Command::new("ovsdb-tool").args(["create", &conf, OVS_SCHEMA]));
        o.must(Command::new("ovsdb-server").args([
            &conf,
            &format!("--remote=punix:{d}/db.sock"),
            &format!("--pidfile={d}/ovsdb-server.pid"),
            &format!("--unixctl={d}/ovsdb-server.ctl"),
            &format!("--log-file={d}/ovsdb-server.log"),
            "--detach",
            "--no-chdir",
        ]));
        o.vsctl(&["--no-wait", "init"]);
        o.must(Command::new("ip").args([
            "netns",
            "exec",
            ns,
            OVS_VSWITCHD,
            &format!("unix:{d}/db.sock"),
            &format!("--pidfile={d}/ovs-vswitchd.pid"),
            &format!("--unixctl={d}/ovs-vswitchd.ctl"),
            &format!("--log-file={d}/ovs-vswitchd.log"),
            "--detach",
            "--no-chdir",
        ]));
        o
    }

    fn must(&self, c: &mut Command) -> String {
        let d = &self.dir;
        c.env("OVS_RUNDIR", d)
            .env("OVS_DBDIR", d)
            .env("OVS_LOGDIR", d)
            .env("OVS_SYSCONFDIR", d);
        let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert!(
            out.status.success(),
            "{c:?}: {}{}\novs-vswitchd.log: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ovs-vsctl ARGS` against this instance (must succeed); its output.
    pub fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db=unix:{}/db.sock", self.dir.display());
        self.must(
            Command::new("ovs-vsctl")
                .args([&db, "--timeout=30"])
                .args(args),
        )
    }

    /// `ovs-appctl ARGS` to this instance's `ovs-vswitchd` (must succeed); its output.
    pub fn appctl(&self, args: &[&str]) -> String {
        let t = format!("{}/ovs-vswitchd.ctl", self.dir.display());
        self.must(Command::new("ovs-appctl").args(["-t", &t]).args(args))
    }

    /// `ovs-ofctl -O OpenFlow13 CMD BRIDGE ARGS` on bridge `bridge` (must succeed); its
    /// output.
    pub fn ofctl(&self, cmd: &str, bridge: &str, args: &[&str]) -> String {
        let mgmt = format!("unix:{}/{bridge}.mgmt", self.dir.display());
        self.must(
            Command::new("ovs-ofctl")
                .args(["-O", "OpenFlow13", cmd, &mgmt])
                .args(args),
        )
    }

    /// The end of `ovs-vswitchd`'s log (for messages).
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for daemon in ["ovs-vswitchd", "ovsdb-server"] {
            let pidfile = self.dir.join(format!("{daemon}.pid"));
            if let Some(pid) = std::fs::read_to_string(pidfile)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            {
                // SAFETY: signalling a daemon this instance started (its pid file).
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
    }
}

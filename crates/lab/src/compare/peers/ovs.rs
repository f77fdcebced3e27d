//! Open vSwitch's userspace datapath, a private instance (its own database, sockets and logs
//! under the run folder, the daemon in the switch namespace on the switch core): on system
//! (AF_PACKET) ports; on system ports with its userspace TSO support on
//! (`other_config:userspace-tso-enable=true`: virtio-net headers on the sockets, the one other
//! userspace switch here that can carry the hosts' TCP super-packets); or on AF_XDP ports.
//! Policing: the interface's `ingress_policing_rate`/`_burst`; flows: `ovs-ofctl add-flow`
//! on the bridge's management socket, above its NORMAL flow.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::{Peer, StartCtx, Started};
use crate::compare::topo::{in_ns, run, Topo};

/// Open vSwitch's daemon as Debian installs it.
const OVS_VSWITCHD: &str = "/usr/sbin/ovs-vswitchd";
/// Open vSwitch's database schema as Debian installs it.
const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// How Open vSwitch's ports are set up.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// System (AF_PACKET) ports.
    Netdev,
    /// System ports with userspace TSO.
    NetdevTso,
    /// AF_XDP ports.
    Afxdp,
}

/// Open vSwitch in one mode.
pub struct OvsPeer(pub Mode);

impl Peer for OvsPeer {
    fn name(&self) -> &'static str {
        match self.0 {
            Mode::Netdev => "ovs-netdev",
            Mode::NetdevTso => "ovs-netdev-tso",
            Mode::Afxdp => "ovs-afxdp",
        }
    }

    fn unavailable(&self) -> Option<String> {
        (!Path::new(OVS_VSWITCHD).exists() || !Path::new(OVS_SCHEMA).exists())
            .then(|| "Open vSwitch is not installed (apt-get install openvswitch-switch)".into())
    }

    fn start(&self, cx: &StartCtx<'_>) -> Result<Box<dyn Started>> {
        let ovs = Ovs::start(
            cx.topo,
            cx.core,
            self.0 == Mode::NetdevTso,
            &cx.dir.join("ovs"),
        )?;
        let port = |i: usize, dev: &str| {
            let mut s = format!(
                "-- add-port hcovs {dev} -- set interface {dev} ofport_request={}",
                i + 1
            );
            if self.0 == Mode::Afxdp {
                s += " type=afxdp options:xdp-mode=best-effort options:n_rxq=1";
            }
            if let Some(p) = cx.police.filter(|p| p.dev == dev) {
                s += &format!(
                    " ingress_policing_rate={} ingress_policing_burst={}",
                    p.kbps, p.burst_kbit
                );
            }
            s
        };
        let ports: Vec<String> = cx
            .topo
            .switch_ports()
            .into_iter()
            .enumerate()
            .map(|(i, d)| port(i, d))
            .collect();
        ovs.vsctl(&ports.join(" "))?;
        std::thread::sleep(Duration::from_secs(2));
        if let Some(p) = cx.police {
            // Open vSwitch polices system and AF_XDP ports with the kernel's tc police action;
            // it only logs when that fails.
            let out = cx.topo.sh(
                &cx.topo.ns_s,
                &format!("tc filter show dev {} parent ffff:", p.dev),
            );
            let shown = out.map(|o| String::from_utf8_lossy(&o.stdout).contains("police"));
            if !shown.unwrap_or(false) {
                anyhow::bail!(
                    "Open vSwitch could not police {} (this kernel lacks tc's police action, \
                     act_police; see {}/ovs-vswitchd.log)",
                    p.dev,
                    ovs.dir.display()
                );
            }
        }
        for f in cx.flows {
            ovs.ofctl(&["add-flow", f])?;
        }
        Ok(Box::new(ovs))
    }
}

impl Started for Ovs {
    fn pid(&self) -> Option<u32> {
        Ovs::pid(self)
    }
}

/// A private Open vSwitch instance: its own database, sockets and logs under one folder, its
/// daemon in the switch namespace, one netdev (userspace datapath) bridge `hcovs`.
#[derive(Debug)]
pub struct Ovs {
    dir: PathBuf,
}

impl Ovs {
    fn env(&self, c: &mut Command) {
        let d = &self.dir;
        c.env("OVS_RUNDIR", d)
            .env("OVS_DBDIR", d)
            .env("OVS_LOGDIR", d)
            .env("OVS_SYSCONFDIR", d);
    }

    /// Runs `ovs-ofctl ARGS` on the bridge `hcovs` of this instance.
    pub fn ofctl(&self, args: &[&str]) -> Result<()> {
        let mgmt = format!("unix:{}/hcovs.mgmt", self.dir.display());
        let mut c = Command::new("ovs-ofctl");
        c.arg(args[0]).arg(&mgmt).args(&args[1..]);
        self.env(&mut c);
        run(&mut c).map(|_| ())
    }

    fn db(&self) -> String {
        format!("unix:{}/db.sock", self.dir.display())
    }

    /// Runs `ovs-vsctl` with `args` (a shell-split string) against this instance.
    pub fn vsctl(&self, args: &str) -> Result<()> {
        let mut c = Command::new("ovs-vsctl");
        c.arg(format!("--db={}", self.db()))
            .arg("--timeout=30")
            .args(args.split_whitespace());
        self.env(&mut c);
        run(&mut c).map(|_| ())
    }

    /// Starts the daemons with their work on `core`; `tso` turns on the userspace TSO
    /// support, which the daemon reads only when it starts.
    fn start(topo: &Topo, core: usize, tso: bool, dir: &Path) -> Result<Ovs> {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let o = Ovs {
            dir: dir.to_path_buf(),
        };
        let conf = dir.join("conf.db");
        run(Command::new("ovsdb-tool")
            .arg("create")
            .arg(&conf)
            .arg(OVS_SCHEMA))?;
        let mut c = Command::new("ovsdb-server");
        c.arg(&conf)
            .arg(format!("--remote=punix:{}/db.sock", dir.display()))
            .arg(format!("--pidfile={}/ovsdb-server.pid", dir.display()))
            .arg(format!("--unixctl={}/ovsdb-server.ctl", dir.display()))
            .arg(format!("--log-file={}/ovsdb-server.log", dir.display()))
            .args(["--detach", "--no-chdir"]);
        o.env(&mut c);
        run(&mut c)?;
        o.vsctl("--no-wait init")?;
        o.vsctl(&format!(
            "--no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x{:x}",
            1u64 << core
        ))?;
        if tso {
            o.vsctl("--no-wait set Open_vSwitch . other_config:userspace-tso-enable=true")?;
        }
        let mut c = in_ns(
            &topo.ns_s,
            &[
                "taskset",
                "-c",
                &core.to_string(),
                OVS_VSWITCHD,
                &o.db(),
                &format!("--pidfile={}/ovs-vswitchd.pid", dir.display()),
                &format!("--unixctl={}/ovs-vswitchd.ctl", dir.display()),
                &format!("--log-file={}/ovs-vswitchd.log", dir.display()),
                "--detach",
                "--no-chdir",
            ],
        );
        o.env(&mut c);
        run(&mut c)?;
        o.vsctl(
            "add-br hcovs -- set bridge hcovs datapath_type=netdev \
             other_config:hwaddr=02:00:00:77:00:fe",
        )?;
        let _ = topo.sh(&topo.ns_s, "ip link set hcovs up");
        Ok(o)
    }

    fn pid_of(&self, daemon: &str) -> Option<u32> {
        std::fs::read_to_string(self.dir.join(format!("{daemon}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The daemon's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid_of("ovs-vswitchd")
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for daemon in ["ovs-vswitchd", "ovsdb-server"] {
            let Some(pid) = self.pid_of(daemon) else {
                continue;
            };
            // SAFETY: kill(2) on a daemon this instance started (its pid file is ours).
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            for _ in 0..50 {
                // SAFETY: signal 0 only checks that the process exists.
                if unsafe { libc::kill(pid as i32, 0) } != 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

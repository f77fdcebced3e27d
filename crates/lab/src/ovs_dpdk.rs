//! A private Open vSwitch instance with DPDK, as the peers' pvp.sh and churn-ovs.sh run it:
//! its own database, run folder and logs (Debian's service is never used), the daemon of
//! openvswitch-switch-dpdk in a network namespace of its own (its netdev bridge's internal
//! port is a TAP device), DPDK on a private hugetlbfs (`--in-memory`, 1 GiB), the PMD thread
//! on the switch core (`pmd-cpu-mask`), everything else on the main core. Both daemons are
//! children of this process (no `--detach`): they die with it. Used by `bench vhost` and
//! `bench churn-compare`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use crate::needs::{OVS_SCHEMA, OVS_VSWITCHD_DPDK};
use crate::sys::guard;
use crate::sys::host::{remove_dpdk_runtime, Netns};
use crate::sys::proc::{self, Proc, Spawn};
use crate::vhost::counters::{parse_dump_ports, put_ports};

/// Where and how the instance runs.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Prefix of its DPDK file prefix and namespace (unique to this process and run).
    pub tag: String,
    /// The PMD thread's core.
    pub pmd_core: usize,
    /// The core of every other thread (and of ovsdb-server).
    pub main_core: usize,
    /// How long the daemons may live (the watchdog kills them after).
    pub lifetime: Duration,
    /// Run the daemon in this existing network namespace (one whose interfaces it opens,
    /// e.g. with DPDK's `net_af_packet`); `None`: a namespace of its own, deleted with it.
    pub netns: Option<String>,
}

/// The bridge's name.
pub const BRIDGE: &str = "vbr";

/// A private Open vSwitch instance with DPDK; dropping it stops its daemons.
pub struct Ovs {
    vswitchd: Proc,
    ovsdb: Proc,
    dir: PathBuf,
    prefix: String,
    _ns: Option<Netns>,
}

fn env(c: &mut Command, dir: &Path) {
    for k in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
        c.env(k, dir);
    }
}

fn with_env(s: Spawn, dir: &Path) -> Spawn {
    let d = dir.to_string_lossy();
    ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"]
        .iter()
        .fold(s, |s, k| s.env(k, &d))
}

fn vsctl_in(dir: &Path, args: &[&str]) -> Result<String> {
    let mut c = Command::new("ovs-vsctl");
    c.arg(format!("--db=unix:{}/db.sock", dir.display()))
        .arg("--timeout=80")
        .args(args);
    env(&mut c, dir);
    proc::run(&mut c, Duration::from_secs(90))
}

impl Ovs {
    /// Starts the daemons (folder `dir`, DPDK memory on `huge`) and an empty netdev bridge.
    pub fn start(ctx: &Setup, dir: &Path, huge: &Path) -> Result<Ovs> {
        std::fs::create_dir_all(dir)?;
        let conf = dir.join("conf.db");
        proc::run(
            Command::new("ovsdb-tool")
                .arg("create")
                .arg(&conf)
                .arg(OVS_SCHEMA),
            Duration::from_secs(20),
        )?;
        let d = dir.display();
        let ovsdb = with_env(Spawn::new("ovsdb-server", "ovsdb-server"), dir)
            .args([
                conf.display().to_string(),
                format!("--remote=punix:{d}/db.sock"),
                format!("--pidfile={d}/ovsdb-server.pid"),
                format!("--unixctl={d}/ovsdb-server.ctl"),
                format!("--log-file={d}/ovsdb-server.log"),
                "--no-chdir".into(),
            ])
            .cpus(&[ctx.main_core])
            .lifetime(ctx.lifetime)
            .start(dir)?;
        let mut ovsdb = ovsdb;
        for _ in 0..100 {
            if dir.join("db.sock").exists() {
                break;
            }
            ovsdb.alive()?;
            guard::nap(Duration::from_millis(100))?;
        }
        vsctl_in(dir, &["--no-wait", "init"])?;
        let prefix = format!("{}ovs", ctx.tag);
        let extra = format!(
            "other_config:dpdk-extra=--no-pci --in-memory --huge-dir={} --file-prefix={prefix}",
            huge.display()
        );
        vsctl_in(
            dir,
            &[
                "--no-wait",
                "set",
                "Open_vSwitch",
                ".",
                "other_config:dpdk-init=true",
                &format!("other_config:pmd-cpu-mask=0x{:x}", 1u64 << ctx.pmd_core),
                &format!("other_config:dpdk-lcore-mask=0x{:x}", 1u64 << ctx.main_core),
                "other_config:dpdk-socket-mem=1024",
                "other_config:dpdk-socket-limit=1024",
                &extra,
            ],
        )?;
        let own = match &ctx.netns {
            Some(_) => None,
            None => Some(Netns::add(&format!("{}S", ctx.tag))?),
        };
        let ns_name = match (&ctx.netns, &own) {
            (Some(n), _) => n.clone(),
            (None, Some(ns)) => ns.name().to_string(),
            (None, None) => unreachable!("a namespace of its own was just made"),
        };
        let vswitchd = with_env(Spawn::new("ovs-vswitchd", "ip"), dir)
            .args(["netns", "exec", &ns_name, OVS_VSWITCHD_DPDK])
            .args([
                format!("unix:{d}/db.sock"),
                format!("--pidfile={d}/ovs-vswitchd.pid"),
                format!("--unixctl={d}/ovs-vswitchd.ctl"),
                format!("--log-file={d}/ovs-vswitchd.log"),
                "--no-chdir".into(),
            ])
            .cpus(&[ctx.main_core])
            .lifetime(ctx.lifetime)
            .start(dir)?;
        let mut o = Ovs {
            vswitchd,
            ovsdb,
            dir: dir.to_path_buf(),
            prefix,
            _ns: own,
        };
        let br = o.vsctl(&[
            "add-br",
            BRIDGE,
            "--",
            "set",
            "bridge",
            BRIDGE,
            "datapath_type=netdev",
            "other_config:hwaddr=02:00:00:77:00:fe",
        ]);
        o.alive()?;
        // ovs-vsctl waits for the daemon to apply the bridge; when it does not, its log says
        // why (DPDK's start, its memory).
        br.map_err(|e| {
            e.context(format!(
                "ovs-vswitchd's log ends: {}",
                proc::tail(&dir.join("ovs-vswitchd.log"), 6)
            ))
        })?;
        Ok(o)
    }

    /// Runs ovs-vsctl against this instance.
    pub fn vsctl(&self, args: &[&str]) -> Result<String> {
        vsctl_in(&self.dir, args)
    }

    fn tool(&self, prog: &str, args: &[&str]) -> Result<String> {
        let mut c = Command::new(prog);
        c.args(args);
        env(&mut c, &self.dir);
        proc::run(&mut c, Duration::from_secs(30))
    }

    /// Runs ovs-ofctl against this instance's bridge (its arguments after the command).
    pub fn ofctl(&self, cmd: &str, args: &[&str]) -> Result<String> {
        let mut a = vec!["--no-names", cmd, BRIDGE];
        a.extend_from_slice(args);
        self.tool("ovs-ofctl", &a)
    }

    /// Runs ovs-appctl against the daemon.
    pub fn appctl(&self, args: &[&str]) -> Result<String> {
        let ctl = self.dir.join("ovs-vswitchd.ctl");
        let mut a = vec!["-t", ctl.to_str().unwrap_or_default()];
        a.extend_from_slice(args);
        self.tool("ovs-appctl", &a)
    }

    /// The bridge's OpenFlow management socket (`ovs-ofctl`'s target for it).
    pub fn mgmt(&self) -> PathBuf {
        self.dir.join(format!("{BRIDGE}.mgmt"))
    }

    /// Adds ports: `(name, OpenFlow port number, type, options)` each, in one transaction.
    pub fn add_ports(&self, ports: &[(&str, u32, &str, Vec<String>)]) -> Result<()> {
        let mut a: Vec<String> = Vec::new();
        for (name, no, kind, options) in ports {
            a.extend(
                [
                    "--",
                    "add-port",
                    BRIDGE,
                    name,
                    "--",
                    "set",
                    "interface",
                    name,
                ]
                .map(String::from),
            );
            a.push(format!("type={kind}"));
            a.push(format!("ofport_request={no}"));
            a.extend(options.iter().cloned());
        }
        let args: Vec<&str> = a.iter().skip(1).map(String::as_str).collect();
        self.vsctl(&args).map(|_| ())
    }

    /// Fails when a daemon has exited.
    pub fn alive(&mut self) -> Result<()> {
        self.ovsdb.alive()?;
        self.vswitchd.alive()
    }

    /// The bridge's port counters as `switch.p<N>.*`.
    pub fn ports(&self) -> Result<BTreeMap<String, u64>> {
        let mut m = BTreeMap::new();
        put_ports(
            &mut m,
            "switch",
            &parse_dump_ports(&self.ofctl("dump-ports", &[])?),
        );
        Ok(m)
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        self.vswitchd.stop();
        self.ovsdb.stop();
        remove_dpdk_runtime(&self.prefix);
    }
}

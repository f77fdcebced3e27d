//! Open vSwitch with DPDK as the switch, as the peers' pvp.sh runs it: a private instance
//! (its own database, run folder and logs; Debian's service is never used), the daemon of
//! openvswitch-switch-dpdk in a network namespace of its own (its netdev bridge's internal
//! port is a TAP device), DPDK on the private hugetlbfs (`--in-memory`, 1 GiB), the PMD
//! thread on the switch core (`pmd-cpu-mask`), everything else on the VM core.
//! PVP: port 1 `phy-in` = net_pcap replaying the frame without end, 2 `vm` =
//! dpdkvhostuserclient, 3 `phy-out` = net_null. V2V: 1 vmA, 2 vmB (both dpdkvhostuserclient).
//! Both daemons are children of this process (no `--detach`): they die with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Result};

use super::counters::{parse_dump_ports, parse_pmd_cycles, put_ports, Reading};
use super::guard;
use super::host::{remove_dpdk_runtime, Netns};
use super::needs::{OVS_SCHEMA, OVS_VSWITCHD_DPDK};
use super::proc::{self, Proc, Spawn};
use super::testpmd::{Telemetry, Vms};
use super::window::{self, Measured};
use super::{Ctx, Topology};

/// The bridge's name.
const BRIDGE: &str = "vbr";

/// A private Open vSwitch instance with DPDK; dropping it stops its daemons.
pub struct Ovs {
    vswitchd: Proc,
    ovsdb: Proc,
    dir: PathBuf,
    prefix: String,
    _ns: Netns,
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
    pub fn start(ctx: &Ctx, dir: &Path, huge: &Path) -> Result<Ovs> {
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
            .cpus(&[ctx.vm_core])
            .lifetime(ctx.lifetime())
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
                &format!("other_config:pmd-cpu-mask=0x{:x}", 1u64 << ctx.switch_core),
                &format!("other_config:dpdk-lcore-mask=0x{:x}", 1u64 << ctx.vm_core),
                "other_config:dpdk-socket-mem=1024",
                "other_config:dpdk-socket-limit=1024",
                &extra,
            ],
        )?;
        let ns = Netns::add(&format!("{}S", ctx.tag))?;
        let vswitchd = with_env(Spawn::new("ovs-vswitchd", "ip"), dir)
            .args(["netns", "exec", ns.name(), OVS_VSWITCHD_DPDK])
            .args([
                format!("unix:{d}/db.sock"),
                format!("--pidfile={d}/ovs-vswitchd.pid"),
                format!("--unixctl={d}/ovs-vswitchd.ctl"),
                format!("--log-file={d}/ovs-vswitchd.log"),
                "--no-chdir".into(),
            ])
            .cpus(&[ctx.vm_core])
            .lifetime(ctx.lifetime())
            .start(dir)?;
        let mut o = Ovs {
            vswitchd,
            ovsdb,
            dir: dir.to_path_buf(),
            prefix,
            _ns: ns,
        };
        o.vsctl(&[
            "add-br",
            BRIDGE,
            "--",
            "set",
            "bridge",
            BRIDGE,
            "datapath_type=netdev",
            "other_config:hwaddr=02:00:00:77:00:fe",
        ])?;
        o.alive()?;
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

/// Measures Open vSwitch with DPDK on `topo`, with logs and sockets in `dir`.
pub fn measure(ctx: &Ctx, topo: Topology, dir: &Path) -> Result<Measured> {
    let Some(huge) = &ctx.huge else {
        bail!("Open vSwitch with DPDK needs the private hugetlbfs");
    };
    let mut vms = Vms::start(ctx, topo, dir)?;
    let mut ovs = Ovs::start(ctx, &dir.join("ovs"), huge)?;
    let vhost = |name: &str, no: u32, sock: &Path| -> Vec<String> {
        [
            "--",
            "add-port",
            BRIDGE,
            name,
            "--",
            "set",
            "interface",
            name,
            "type=dpdkvhostuserclient",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            format!("ofport_request={no}"),
            format!("options:vhost-server-path={}", sock.display()),
        ])
        .collect()
    };
    let dpdk = |name: &str, no: u32, devargs: String| -> Vec<String> {
        [
            "--",
            "add-port",
            BRIDGE,
            name,
            "--",
            "set",
            "interface",
            name,
            "type=dpdk",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            format!("ofport_request={no}"),
            format!("options:dpdk-devargs={devargs}"),
        ])
        .collect()
    };
    let (ports, flows): (Vec<String>, &[&str]) = match topo {
        Topology::Pvp => (
            [
                dpdk(
                    "phy-in",
                    1,
                    format!("net_pcap0,rx_pcap={},infinite_rx=1", ctx.pcap.display()),
                ),
                vhost("vm", 2, &vms.socks[0]),
                dpdk("phy-out", 3, "net_null1,no-rx=1".into()),
            ]
            .concat(),
            &["in_port=1,actions=output:2", "in_port=2,actions=output:3"],
        ),
        Topology::V2v => (
            [
                vhost("vmA", 1, &vms.socks[0]),
                vhost("vmB", 2, &vms.socks[1]),
            ]
            .concat(),
            &["in_port=1,actions=output:2"],
        ),
    };
    let args: Vec<&str> = ports.iter().skip(1).map(String::as_str).collect();
    ovs.vsctl(&args)?;
    ovs.ofctl("del-flows", &[])?;
    for f in flows {
        ovs.ofctl("add-flow", &[f])?;
    }
    let tele = Telemetry::connect(&vms.prefix, Duration::from_secs(60), &mut || {
        ovs.alive()?;
        vms.proc.alive()
    })?;
    let (vm_key, vm_ports): (&str, &[u16]) = match topo {
        Topology::Pvp => ("vm", &[0]),
        Topology::V2v => ("vms", &[1, 2]),
    };
    let (delivered, offered) = match topo {
        Topology::Pvp => ("switch.p3.tx", "switch.p1.rx"),
        Topology::V2v => ("vms.p2.rx", "vms.p1.tx"),
    };
    let ovs_ref = &ovs;
    let mut read = || -> Result<Vec<Reading>> {
        Ok(vec![
            Reading::take(|| ovs_ref.ports())?,
            Reading::take(|| tele.ports(vm_key, vm_ports))?,
        ])
    };
    let vm_proc = &mut vms.proc;
    let mut m = window::measure(
        ctx,
        &mut read,
        delivered,
        &mut || {
            vm_proc.alive()?;
            // The daemons' exit shows in the reads; a cheap check here.
            Ok(())
        },
        &mut || ovs_ref.appctl(&["dpif-netdev/pmd-stats-clear"]).map(|_| ()),
    )?;
    let stats = ovs.appctl(&["dpif-netdev/pmd-stats-show"])?;
    std::fs::write(dir.join("pmd-stats.txt"), &stats)?;
    if let Ok(rxq) = ovs.appctl(&["dpif-netdev/pmd-rxq-show"]) {
        std::fs::write(dir.join("pmd-rxq.txt"), rxq)?;
    }
    if let Some((idle, busy)) = parse_pmd_cycles(&stats, ctx.switch_core) {
        if idle + busy > 0 {
            m.busy_share = Some(busy as f64 / (idle + busy) as f64);
        }
    }
    ovs.alive()?;
    m.offered = Some(offered.into());
    Ok(m)
}

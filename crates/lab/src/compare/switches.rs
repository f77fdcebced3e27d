//! The switches `hayate bench compare` measures, each started in the topology's switch
//! namespace and stopped when its guard drops.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::generator::{self, Generator};
use super::topo::{in_ns, run, Topo};

/// One switch under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// The Linux bridge (the reference every ratio is taken to). With veths its work runs
    /// on the sender's core: the generator's, iperf3's and ping's.
    Bridge,
    /// The Linux bridge with its work (and host B's receive) steered by RPS to the switch
    /// core, as a userspace switch's is: what crossing cores costs a switch that pays no
    /// userspace cost.
    BridgeRps,
    /// Hayate with AF_XDP ports.
    HayateAfxdp,
    /// Hayate with AF_XDP ports without the priority lane (`prio=off`).
    HayateAfxdpNoprio,
    /// Hayate with AF_PACKET ports.
    HayateAfpacket,
    /// Hayate with AF_PACKET ports without the priority lane (`prio=off`).
    HayateAfpacketNoprio,
    /// Hayate with AF_PACKET ports, its priority lane on the hosts' core (`--lane-core`):
    /// what the lane gives on a host with a housekeeping core. This machine has two cores,
    /// so the lane shares the hosts' one — outside the one-core rule the other figures keep.
    HayateAfpacketLaneHost,
    /// Open vSwitch's userspace datapath on system (AF_PACKET) ports.
    OvsNetdev,
    /// Open vSwitch's userspace datapath on system ports with its userspace TSO support on
    /// (`other_config:userspace-tso-enable=true`: virtio-net headers on the sockets), the one
    /// other userspace switch here that can carry the hosts' TCP super-packets.
    OvsNetdevTso,
    /// Open vSwitch's userspace datapath on AF_XDP ports.
    OvsAfxdp,
    /// dpdk-testpmd forwarding between two AF_XDP ports (`--forward-mode=io`): no parsing,
    /// no lookup, port 0 to port 1 and back. Not a switch: the floor of what any userspace
    /// switch on these AF_XDP ports costs, to show how much of a figure is the kernel's.
    TestpmdAfxdp,
}

/// Every switch, in the order they are measured.
pub const ALL: [Switch; 11] = [
    Switch::Bridge,
    Switch::BridgeRps,
    Switch::HayateAfxdp,
    Switch::HayateAfxdpNoprio,
    Switch::HayateAfpacket,
    Switch::HayateAfpacketNoprio,
    Switch::HayateAfpacketLaneHost,
    Switch::OvsNetdev,
    Switch::OvsNetdevTso,
    Switch::OvsAfxdp,
    Switch::TestpmdAfxdp,
];

/// Open vSwitch's daemon as Debian installs it.
const OVS_VSWITCHD: &str = "/usr/sbin/ovs-vswitchd";
/// Open vSwitch's database schema as Debian installs it.
const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

impl Switch {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Switch::Bridge => "linux-bridge",
            Switch::BridgeRps => "linux-bridge-rps",
            Switch::HayateAfxdp => "hayate-afxdp",
            Switch::HayateAfxdpNoprio => "hayate-afxdp-noprio",
            Switch::HayateAfpacket => "hayate-afpacket",
            Switch::HayateAfpacketNoprio => "hayate-afpacket-noprio",
            Switch::HayateAfpacketLaneHost => "hayate-afpacket-lane-host",
            Switch::OvsNetdev => "ovs-netdev",
            Switch::OvsNetdevTso => "ovs-netdev-tso",
            Switch::OvsAfxdp => "ovs-afxdp",
            Switch::TestpmdAfxdp => "testpmd-afxdp",
        }
    }

    /// The switch named `name`.
    pub fn from_name(name: &str) -> Result<Switch> {
        ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| {
            let names: Vec<_> = ALL.iter().map(|s| s.name()).collect();
            anyhow!("unknown switch '{name}'; use one of: {}", names.join(", "))
        })
    }

    /// Why this switch cannot run here, if it cannot.
    pub fn unavailable(self) -> Option<String> {
        match self {
            Switch::OvsNetdev | Switch::OvsNetdevTso | Switch::OvsAfxdp => {
                (!Path::new(OVS_VSWITCHD).exists() || !Path::new(OVS_SCHEMA).exists()).then(|| {
                    "Open vSwitch is not installed (apt-get install openvswitch-switch)".into()
                })
            }
            Switch::TestpmdAfxdp => Generator::TestpmdAfxdp.unavailable(),
            _ => None,
        }
    }

    /// Starts the switch between the topology's `a1` and `b1`, its work pinned to `core`
    /// (`host_core`: the hosts', for the one variant that puts its priority lane there).
    pub fn start(
        self,
        topo: &Topo,
        hayate: &Path,
        core: usize,
        host_core: usize,
        dir: &Path,
    ) -> Result<Running> {
        match self {
            Switch::Bridge | Switch::BridgeRps => {
                let br = format!("{}br", &topo.ns_s[..topo.ns_s.len() - 1]);
                topo.sh(
                    &topo.ns_s,
                    &format!(
                        "ip link add {br} type bridge stp_state 0 forward_delay 0 && \
                         ip link set {a} master {br} && ip link set {b} master {br} && \
                         ip link set {br} up",
                        a = topo.a1,
                        b = topo.b1
                    ),
                )?;
                if self == Switch::BridgeRps {
                    // Receive packet steering on the switch-side veths: each frame they
                    // receive is handed to `core`'s backlog, where the bridge forwards it
                    // and host B's stack receives it.
                    topo.sh(
                        &topo.ns_s,
                        &format!(
                            "echo {m:x} > /sys/class/net/{a}/queues/rx-0/rps_cpus && \
                             echo {m:x} > /sys/class/net/{b}/queues/rx-0/rps_cpus",
                            m = 1u64 << core,
                            a = topo.a1,
                            b = topo.b1
                        ),
                    )?;
                }
                Ok(Running::Bridge {
                    ns: topo.ns_s.clone(),
                    br,
                })
            }
            Switch::HayateAfxdp
            | Switch::HayateAfxdpNoprio
            | Switch::HayateAfpacket
            | Switch::HayateAfpacketNoprio
            | Switch::HayateAfpacketLaneHost => {
                let (kind, opts) = match self {
                    Switch::HayateAfxdp => ("afxdp", ""),
                    Switch::HayateAfxdpNoprio => ("afxdp", ",prio=off"),
                    Switch::HayateAfpacket | Switch::HayateAfpacketLaneHost => ("afpacket", ""),
                    _ => ("afpacket", ",prio=off"),
                };
                let log = dir.join(format!("{}.log", self.name()));
                let core_s = core.to_string();
                let host_s = host_core.to_string();
                let lane: &[&str] = if self == Switch::HayateAfpacketLaneHost {
                    &["--lane-core", &host_s]
                } else {
                    &[]
                };
                let child = in_ns(
                    &topo.ns_s,
                    &[
                        "taskset",
                        "-c",
                        &core_s,
                        &hayate.to_string_lossy(),
                        "run",
                        "--port",
                        &format!("{kind}:{}{opts}", topo.a1),
                        "--port",
                        &format!("{kind}:{}{opts}", topo.b1),
                        "--core",
                        &core_s,
                        "--stats-interval",
                        "0",
                    ]
                    .iter()
                    .chain(lane)
                    .copied()
                    .collect::<Vec<_>>(),
                )
                .stdin(Stdio::null())
                .stdout(File::create(&log)?)
                .stderr(File::create(dir.join(format!("{}.err", self.name())))?)
                .spawn()
                .context("starting hayate")?;
                let mut r = Running::Child {
                    child,
                    err: dir.join(format!("{}.err", self.name())),
                };
                // A switch that cannot open its ports exits at once; say why.
                std::thread::sleep(Duration::from_millis(500));
                r.check_alive()?;
                Ok(r)
            }
            Switch::TestpmdAfxdp => {
                // Its main lcore (which only prints statistics) shares the core.
                let lcores = format!("0@{core},1@{core}");
                let vdev = |i: usize, dev: &str| {
                    format!("net_af_xdp{i},iface={dev},start_queue=0,queue_count=1")
                };
                let err = dir.join(format!("{}.err", self.name()));
                let child = generator::testpmd(
                    &topo.ns_s,
                    &["--lcores", &lcores, "--main-lcore", "0"],
                    "sw",
                    &[vdev(0, &topo.a1), vdev(1, &topo.b1)],
                    &["--forward-mode=io", "--total-num-mbufs=16384"],
                )?
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(File::create(&err)?)
                .spawn()
                .context("starting dpdk-testpmd")?;
                let mut r = Running::Child { child, err };
                std::thread::sleep(Duration::from_secs(2));
                r.check_alive()?;
                Ok(r)
            }
            Switch::OvsNetdev | Switch::OvsNetdevTso | Switch::OvsAfxdp => {
                let tso = self == Switch::OvsNetdevTso;
                let ovs = Ovs::start(topo, core, tso, &dir.join("ovs"))?;
                let port = |dev: &str| {
                    if self == Switch::OvsAfxdp {
                        format!(
                            "-- add-port hcovs {dev} -- set interface {dev} type=afxdp \
                             options:xdp-mode=best-effort options:n_rxq=1"
                        )
                    } else {
                        format!("-- add-port hcovs {dev}")
                    }
                };
                ovs.vsctl(&format!("{} {}", port(&topo.a1), port(&topo.b1)))?;
                std::thread::sleep(Duration::from_secs(2));
                Ok(Running::Ovs(ovs))
            }
        }
    }
}

/// A started switch; dropping it stops the switch.
#[derive(Debug)]
pub enum Running {
    /// A Linux bridge device.
    Bridge {
        /// Its namespace.
        ns: String,
        /// Its name.
        br: String,
    },
    /// A child process (Hayate).
    Child {
        /// The process.
        child: Child,
        /// Where its stderr goes.
        err: PathBuf,
    },
    /// A private Open vSwitch instance.
    Ovs(Ovs),
}

impl Running {
    /// Fails, with the switch's own words, when its process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Running::Child { child, err } = self {
            if let Some(status) = child.try_wait()? {
                let msg = std::fs::read_to_string(err).unwrap_or_default();
                bail!("the switch exited ({status}): {}", msg.trim());
            }
        }
        Ok(())
    }

    /// The switch's process id, if it has its own process.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Running::Child { child, .. } => Some(child.id()),
            Running::Ovs(o) => o.pid(),
            Running::Bridge { .. } => None,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        match self {
            Running::Bridge { ns, br } => {
                let _ = in_ns(ns, &["ip", "link", "del", br]).output();
            }
            Running::Child { child, .. } => {
                // SIGTERM lets Hayate detach its XDP programs; SIGKILL if it does not exit.
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                let deadline = Instant::now() + Duration::from_secs(5);
                while Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
            Running::Ovs(_) => {}
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_switch_is_found_by_its_name_and_unknown_names_list_them() {
        for s in ALL {
            assert_eq!(Switch::from_name(s.name()).unwrap(), s);
        }
        let e = Switch::from_name("linux-brigde").unwrap_err().to_string();
        assert!(
            e.contains("linux-bridge-rps") && e.contains("hayate-afxdp"),
            "{e}"
        );
    }
}

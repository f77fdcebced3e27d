//! `hayate bench tunnel-tcp`: TCP between two hosts' VMs through a VXLAN overlay (issue 18),
//! two Hayates beside two Linux kernel VXLAN devices in Linux bridges, measured in one run.
//!
//! ```text
//! netns <p>A (VM A) <p>a0 10.77.0.1/24 ─veth─ <p>a1 ┐ host 1 (netns <p>S)
//!                                                   │   the switch: <p>a1, underlay <p>c1, vxlan
//!                               underlay <p>c1 192.168.77.1/24
//!                                                 veth
//!                               underlay <p>c0 192.168.77.2/24
//!                                                   │ host 2 (netns <p>C)
//! netns <p>B (VM B) <p>b0 10.77.0.2/24 ─veth─ <p>b1 ┘   the switch: <p>b1, underlay <p>c0, vxlan
//! ```
//!
//! The compare bench's topology ([`Topo::up_with`] with one extra host C) made into two
//! hosts: B's switch-side veth moves into C's namespace, and the veth between the switch's
//! namespace and C's becomes the underlay, its addresses owned by the hosts' kernels (static
//! neighbours: no ARP during the run). On each host in turn:
//!
//! - `hayate-afpacket` / `hayate-afxdp`: `hayate run` with three ports — the VM's veth, the
//!   underlay veth (AF_PACKET with `vnet_hdr=off`, or AF_XDP), and
//!   `vxlan:remote=OTHER,vni=42` — and `in_port=1 → output:3`, `in_port=3 → output:1`; the
//!   next hop comes from the host's kernel tables, as a user runs it;
//! - `linux-vxlan`: a kernel VXLAN device (id 42, dstport 4789, on the underlay veth) and the
//!   VM's veth in a Linux bridge;
//! - `hayate-tap` (chosen by name only): Hayate with the VM's veth on AF_PACKET and its tunnel
//!   through a TAP underlay (docs/tunnels.md, "Underlay through the host's kernel"): Hayate
//!   is a host behind the TAP with its own VTEP address (192.168.78.1 on host 1, .79.1 on
//!   host 2), which the host's kernel routes to and from over the underlay veth; with
//!   `--offloads on` the VMs' TCP super-packets are encapsulated whole and the kernel cuts
//!   them.
//!
//! The VMs have MTU 1450 (room for the 50 bytes of outer headers) and, by default, their
//! offloads off, the same for every switch; `--offloads on` leaves the VMs' TSO on (what a
//! cloud's VMs have), for the overlays that can carry super-packets (not AF_XDP). One
//! iperf3 TCP stream A → B for `--seconds`, with pings under it; the hosts' programs on
//! `--host-core`, and the VMs' receive processing steered there too (RPS: a VM's kernel
//! runs on the VM's cores, not in the switch's system calls), each switch on its
//! `--switch-cores`. Needs root.

pub mod report;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::bench;
use crate::compare::measure;
use crate::compare::peers::child::ChildSwitch;
use crate::compare::peers::Started;
use crate::compare::topo::{in_ns, Topo};
use report::{Report, Run};

/// The underlay addresses of host 1 and host 2.
pub const UNDERLAY: [&str; 2] = ["192.168.77.1", "192.168.77.2"];
/// The tunnel id.
pub const VNI: u32 = 42;
/// The VMs' MTU: 1500 minus VXLAN's 50 bytes over IPv4.
pub const VM_MTU: u32 = 1450;

/// Options of `hayate bench tunnel-tcp`.
#[derive(Args, Debug, Clone)]
pub struct TunnelTcpArgs {
    /// Overlays to measure, in this order (default: hayate-afpacket, hayate-afxdp,
    /// linux-vxlan).
    #[arg(long, value_delimiter = ',')]
    pub switches: Vec<String>,
    /// Length of each TCP stream, seconds.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Streams per overlay, interleaved (overlay 1, 2, …, then again); the median is
    /// reported.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Pings under each stream (one per millisecond).
    #[arg(long, default_value_t = 1000)]
    pub pings: usize,
    /// Core of the VMs' programs (iperf3, ping).
    #[arg(long, default_value_t = 0)]
    pub host_core: usize,
    /// Cores of host 1's and host 2's switch (Hayate's poll threads; the kernel's overlay
    /// runs where the packets' softirqs do).
    #[arg(long, value_delimiter = ',', default_value = "1,1")]
    pub switch_cores: Vec<usize>,
    /// The VMs' checksum and segmentation offloads: off (every overlay carries MTU-sized
    /// frames) or on (the VMs hand over TCP super-packets; not with hayate-afxdp).
    #[arg(long, value_parser = ["on", "off"], default_value = "off")]
    pub offloads: String,
    /// Each Hayate joins the TCP segments it delivers to its VM's port into super-packets
    /// (the bridge's `gro`; only where that port takes them: `--offloads on`, AF_PACKET
    /// and TAP overlays), or not.
    #[arg(long, value_parser = ["on", "off"], default_value = "on")]
    pub gro: String,
    /// The underlay's transmit offloads (checksum, TSO, GSO; receive offload stays off): off
    /// (a host's kernel cuts super-packets before they leave on the underlay), or on (a NIC
    /// that segments VXLAN itself, as a cloud host's does: super-packets the hosts' kernels
    /// route — linux-vxlan's, hayate-tap's — cross the underlay whole).
    #[arg(long, value_parser = ["on", "off"], default_value = "off")]
    pub underlay_offloads: String,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Folder for logs and configs (default: a fresh one under /tmp).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
}

impl TunnelTcpArgs {
    /// Whether a switch core is another switch's or the hosts' programs' too: then each
    /// Hayate runs with `--shared-core` (it yields its core after an empty poll, as a user
    /// sharing cores would run it); else with `--busy-poll` (a core of its own).
    pub fn shares_cores(&self) -> bool {
        let c = &self.switch_cores;
        c.first() == c.get(1) || c.contains(&self.host_core)
    }

    /// Whether the VMs keep their offloads on (`--offloads on`).
    pub fn offloads_on(&self) -> bool {
        self.offloads == "on"
    }

    /// The `ethtool -K` settings of the underlay veths (`--underlay-offloads`).
    fn underlay_ethtool(&self) -> &'static str {
        if self.underlay_offloads == "on" {
            "tx on sg on tso on gso on gro off"
        } else {
            "tx off tso off gso off gro off"
        }
    }
}

/// One overlay between the two hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    /// Two Hayates on AF_PACKET ports.
    HayateAfpacket,
    /// Two Hayates on AF_XDP ports.
    HayateAfxdp,
    /// Two kernel VXLAN devices in Linux bridges.
    LinuxVxlan,
    /// Two Hayates whose tunnels go through TAP underlays (the hosts' kernels route).
    HayateTap,
    /// Two Hayates on AF_XDP underlays whose VM ports are AF_PACKET with virtio-net headers
    /// (as a cloud's vhost-user VMs: super-packets in, joined segments out; a NIC by XDP).
    HayateAfxdpVnet,
}

impl Overlay {
    /// The overlays measured when none are named, in this order.
    pub const ALL: [Overlay; 3] = [
        Overlay::HayateAfpacket,
        Overlay::HayateAfxdp,
        Overlay::LinuxVxlan,
    ];

    /// Every overlay that can be named.
    pub const NAMED: [Overlay; 5] = [
        Overlay::HayateAfpacket,
        Overlay::HayateAfxdp,
        Overlay::LinuxVxlan,
        Overlay::HayateTap,
        Overlay::HayateAfxdpVnet,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Overlay::HayateAfpacket => "hayate-afpacket",
            Overlay::HayateAfxdp => "hayate-afxdp",
            Overlay::LinuxVxlan => "linux-vxlan",
            Overlay::HayateTap => "hayate-tap",
            Overlay::HayateAfxdpVnet => "hayate-afxdp-vnet",
        }
    }

    /// Whether it is Hayate (whose figures are compared with the kernel's).
    pub fn is_hayate(self) -> bool {
        self != Overlay::LinuxVxlan
    }
}

/// Host `i`'s (0 or 1) side of the topology: its namespace, VM-facing and underlay
/// interfaces, and the other host's underlay address.
struct Side<'a> {
    ns: &'a str,
    vm_if: &'a str,
    underlay_if: &'a str,
    remote: &'static str,
}

fn sides(topo: &Topo) -> [Side<'_>; 2] {
    let c = &topo.extra[0];
    [
        Side {
            ns: &topo.ns_s,
            vm_if: &topo.a1,
            underlay_if: &c.sw,
            remote: UNDERLAY[1],
        },
        Side {
            ns: &c.ns,
            vm_if: &topo.b1,
            underlay_if: &c.dev,
            remote: UNDERLAY[0],
        },
    ]
}

fn check(args: &TunnelTcpArgs) -> Result<Vec<Overlay>> {
    bench::check_root_and_tools(
        "bench tunnel-tcp",
        &[
            ("iperf3", "iperf3"),
            ("ethtool", "ethtool"),
            ("ping", "iputils-ping"),
            ("taskset", "util-linux"),
        ],
    )?;
    bench::check_window(args.seconds as f64, 0.0)?;
    bench::check_repeat(args.repeat, 20)?;
    if args.switch_cores.len() != 2 {
        bail!("--switch-cores takes two cores, host 1's and host 2's, e.g. --switch-cores 1,1");
    }
    let cores = cpu::available_cores();
    if let Some(c) = args
        .switch_cores
        .iter()
        .chain([&args.host_core])
        .find(|c| **c >= cores)
    {
        bail!(
            "core {c} does not exist; this machine has cores 0..={}",
            cores - 1
        );
    }
    let overlays = bench::chosen(
        &args.switches,
        || Overlay::ALL.to_vec(),
        |n| bench::by_name(Overlay::NAMED, |o| o.name(), "overlay", n),
    )?;
    if args.offloads_on() && overlays.contains(&Overlay::HayateAfxdp) {
        bail!(
            "--offloads on: AF_XDP carries no TCP super-packets; leave hayate-afxdp out \
             (--switches hayate-tap,hayate-afpacket,linux-vxlan)"
        );
    }
    Ok(overlays)
}

/// Runs `hayate bench tunnel-tcp`.
pub fn main(args: TunnelTcpArgs) -> Result<()> {
    let overlays = check(&args)?;
    let hayate = std::env::current_exe().context("finding the hayate binary")?;
    let dir = bench::workdir(args.workdir.as_deref(), "tunnel-tcp")?;
    let mut report = Report::new(&args);
    for round in 0..args.repeat {
        for &o in &overlays {
            eprintln!(
                "hayate: {} (stream {} of {}) ...",
                o.name(),
                round + 1,
                args.repeat
            );
            let run = match measure_overlay(o, &args, &hayate, &dir) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("hayate: {}: {e:#}", o.name());
                    Run::failed(o.name(), &format!("{e:#}"))
                }
            };
            report.add(run);
        }
    }
    report.finish();
    print!("{}", report.table());
    bench::write_json(args.json.as_deref(), &report)?;
    Ok(())
}

/// Builds the two hosts, starts overlay `o` on them, runs one stream.
fn measure_overlay(o: Overlay, args: &TunnelTcpArgs, hayate: &Path, dir: &Path) -> Result<Run> {
    let prefix = format!("ht{}", std::process::id() % 100_000);
    let topo = Topo::up_with(&prefix, 1)?;
    two_hosts(&topo, args)?;
    let _switches = match o {
        Overlay::LinuxVxlan => {
            for s in sides(&topo) {
                linux_vxlan(&topo, &s)?;
            }
            Vec::new()
        }
        _ => {
            let mut v = Vec::new();
            for (i, s) in sides(&topo).iter().enumerate() {
                let core = args.switch_cores[i];
                let cfg = match o {
                    Overlay::HayateAfxdp => {
                        hayate_config("afxdp", s.vm_if, s.underlay_if, s.remote, core, false)
                    }
                    Overlay::HayateAfxdpVnet => hayate_config(
                        "afxdp-vnet",
                        s.vm_if,
                        s.underlay_if,
                        s.remote,
                        core,
                        args.offloads_on(),
                    ),
                    Overlay::HayateTap => {
                        let tap = format!("{prefix}t{i}");
                        tap_underlay(&topo, s, i, &tap)?;
                        tap_config(s.vm_if, &tap, i, core, args.offloads_on())
                    }
                    _ => hayate_config(
                        "afpacket",
                        s.vm_if,
                        s.underlay_if,
                        s.remote,
                        core,
                        args.offloads_on(),
                    ),
                };
                let cfg = if args.gro == "off" {
                    cfg.replacen("[[bridge]]\n", "[[bridge]]\ngro = false\n", 1)
                } else {
                    cfg
                };
                v.push(start_hayate(
                    hayate,
                    &cfg,
                    o.name(),
                    s,
                    i,
                    core,
                    args.shares_cores(),
                    dir,
                )?);
            }
            v
        }
    };
    if !measure::reachable(&topo, Duration::from_secs(10)) {
        bail!(
            "VM A cannot reach VM B through the overlay within 10 s (logs in {})",
            dir.display()
        );
    }
    let tcp = measure::tcp(&topo, args.seconds, args.pings, args.host_core, dir)?;
    Ok(Run::measured(o.name(), tcp))
}

/// The compare topology made into two hosts (module docs): B's veth end into C's
/// namespace, the underlay addresses and static neighbours and offloads, the VMs' MTU and
/// offloads, and
/// the VMs' receive processing steered to their own core ([`Topo::host_rps`]: every
/// overlay's VMs do their own receiving).
fn two_hosts(topo: &Topo, args: &TunnelTcpArgs) -> Result<()> {
    let (host_core, offloads) = (args.host_core, args.offloads_on());
    let c = &topo.extra[0];
    topo.sh(
        &topo.ns_s,
        &format!("ip link set {} netns {}", topo.b1, c.ns),
    )?;
    topo.sh(&c.ns, &format!("ip link set {} up", topo.b1))?;
    let mac = |ns: &str, dev: &str| -> Result<String> {
        let out = topo.sh(ns, &format!("cat /sys/class/net/{dev}/address"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let [s1, s2] = sides(topo);
    let macs = [mac(s1.ns, s1.underlay_if)?, mac(s2.ns, s2.underlay_if)?];
    for (i, s) in [s1, s2].iter().enumerate() {
        let u = s.underlay_if;
        topo.sh(
            s.ns,
            &format!(
                "ip addr flush dev {u} && ip addr add {}/24 dev {u} && ip link set {u} up && \
                 ip neigh replace {} lladdr {} dev {u} nud permanent && \
                 ethtool -K {u} {} >/dev/null",
                UNDERLAY[i],
                s.remote,
                macs[1 - i],
                args.underlay_ethtool()
            ),
        )?;
        if !offloads {
            topo.sh(
                s.ns,
                &format!(
                    "ethtool -K {} tx off tso off gso off gro off >/dev/null",
                    s.vm_if
                ),
            )?;
        }
    }
    let off = if offloads {
        ""
    } else {
        " && ethtool -K {dev} tx off tso off gso off gro off >/dev/null"
    };
    for (ns, dev) in [(&topo.ns_a, &topo.a0), (&topo.ns_b, &topo.b0)] {
        let line = format!(
            "ip link set {dev} mtu {VM_MTU}{}",
            off.replace("{dev}", dev)
        );
        topo.sh(ns, &line)?;
    }
    topo.host_rps(host_core)
}

/// A kernel VXLAN device and the VM's veth in a Linux bridge on one host.
fn linux_vxlan(topo: &Topo, s: &Side<'_>) -> Result<()> {
    let local = if s.remote == UNDERLAY[1] {
        UNDERLAY[0]
    } else {
        UNDERLAY[1]
    };
    topo.sh(
        s.ns,
        &format!(
            "ip link add vx{VNI} type vxlan id {VNI} remote {} local {local} dstport 4789 dev {u} && \
             ip link add br0 type bridge && \
             ip link set vx{VNI} master br0 && ip link set {vm} master br0 && \
             ip link set vx{VNI} up && ip link set br0 up",
            s.remote,
            u = s.underlay_if,
            vm = s.vm_if
        ),
    )?;
    Ok(())
}

/// Host `i`'s Hayate VTEP behind its TAP: `(VTEP address, TAP's kernel-side address, VTEP
/// MAC, TAP MAC)`.
fn tap_vtep(i: usize) -> (String, String, String, String) {
    let n = 78 + i;
    (
        format!("192.168.{n}.1"),
        format!("192.168.{n}.254"),
        format!("02:00:00:00:{n:02x}:01"),
        format!("02:00:00:00:{n:02x}:fe"),
    )
}

/// Host `i`'s side of `hayate-tap`: the TAP `tap` made beforehand (its MAC is the tunnel's
/// next hop), its kernel side addressed, Hayate's VTEP reachable through it (a static
/// neighbour), forwarding on, and the route to the other host's VTEP over the underlay.
fn tap_underlay(topo: &Topo, s: &Side<'_>, i: usize, tap: &str) -> Result<()> {
    let (vtep, kernel, vtep_mac, tap_mac) = tap_vtep(i);
    let other = 78 + (1 - i);
    topo.sh(
        s.ns,
        &format!(
            "ip tuntap add dev {tap} mode tap vnet_hdr && ip link set {tap} address {tap_mac} && \
             sysctl -q -w net.ipv6.conf.{tap}.disable_ipv6=1 net.ipv4.ip_forward=1 && \
             ip addr add {kernel}/24 dev {tap} && \
             ip neigh replace {vtep} lladdr {vtep_mac} dev {tap} nud permanent && \
             ip route add 192.168.{other}.0/24 via {}",
            s.remote
        ),
    )?;
    Ok(())
}

/// The `hayate run` config of host `i` for `hayate-tap`: the VM's port (with the virtio-net
/// header when the VMs' offloads are on, so their super-packets stay whole), the TAP
/// underlay, the VXLAN port from its VTEP to the other host's (static next hop: the TAP's
/// kernel side).
pub fn tap_config(vm_if: &str, tap: &str, i: usize, core: usize, offloads: bool) -> String {
    let (vtep, _, vtep_mac, tap_mac) = tap_vtep(i);
    let (remote, _, _, _) = tap_vtep(1 - i);
    let vnet = if offloads { "" } else { ",vnet_hdr=off" };
    format!(
        "[[bridge]]\nname = \"br0\"\ncores = [{core}]\nflows = [\n  \
         \"in_port=1,actions=output:3\",\n  \"in_port=3,actions=output:1\",\n]\n\
         [[bridge.port]]\nname = \"vm\"\nspec = \"afpacket:{vm_if}{vnet}\"\n\
         [[bridge.port]]\nname = \"underlay\"\nspec = \"tap:{tap}\"\n\
         [[bridge.port]]\nname = \"vx\"\nspec = \"vxlan:remote={remote},local={vtep},vni={VNI},\
         underlay={tap},nexthop_mac={tap_mac},local_mac={vtep_mac}\"\n"
    )
}

/// The `hayate run` config of one host: the VM's port, the underlay, the VXLAN port, all of
/// `kind` (`afpacket`, `afxdp`; `afxdp-vnet`: the VM's AF_PACKET, the underlay AF_XDP).
/// AF_PACKET ports go without the virtio-net header, except the VM's when its offloads are on
/// (so its super-packets come whole; the tunnel cuts them before encapsulation).
pub fn hayate_config(
    kind: &str,
    vm_if: &str,
    underlay_if: &str,
    remote: &str,
    core: usize,
    offloads: bool,
) -> String {
    let (vm_kind, u_kind) = match kind {
        "afxdp-vnet" => ("afpacket", "afxdp"),
        k => (k, k),
    };
    let plain = |k: &str| if k == "afpacket" { ",vnet_hdr=off" } else { "" };
    let (o, vm_o) = (plain(u_kind), if offloads { "" } else { plain(vm_kind) });
    format!(
        "[[bridge]]\nname = \"br0\"\ncores = [{core}]\nflows = [\n  \
         \"in_port=1,actions=output:3\",\n  \"in_port=3,actions=output:1\",\n]\n\
         [[bridge.port]]\nname = \"vm\"\nspec = \"{vm_kind}:{vm_if}{vm_o}\"\n\
         [[bridge.port]]\nname = \"underlay\"\nspec = \"{u_kind}:{underlay_if}{o}\"\n\
         [[bridge.port]]\nname = \"vx\"\nspec = \"vxlan:remote={remote},vni={VNI}\"\n"
    )
}

/// Starts Hayate on host `i` with config `text` (overlay `kind`).
#[allow(clippy::too_many_arguments)]
fn start_hayate(
    hayate: &Path,
    text: &str,
    kind: &str,
    s: &Side<'_>,
    i: usize,
    core: usize,
    shared: bool,
    dir: &Path,
) -> Result<Box<dyn Started>> {
    let cfg = dir.join(format!("host{}-{kind}.toml", i + 1));
    std::fs::write(&cfg, text)?;
    let run_dir = dir.join(format!("host{}-run", i + 1));
    std::fs::create_dir_all(&run_dir)?;
    let err = dir.join(format!("host{}-{kind}.err", i + 1));
    let core_s = core.to_string();
    let (hayate_s, cfg_s, run_s) = (
        hayate.to_string_lossy(),
        cfg.to_string_lossy(),
        run_dir.to_string_lossy(),
    );
    let child = in_ns(
        s.ns,
        &[
            "taskset",
            "-c",
            &core_s,
            &hayate_s,
            "run",
            "--config",
            &cfg_s,
            "--stats-interval",
            "0",
            "--run-dir",
            &run_s,
            if shared {
                "--shared-core"
            } else {
                "--busy-poll"
            },
        ],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&err)?)
    .spawn()
    .context("starting hayate")?;
    let started = ChildSwitch {
        child,
        err: err.clone(),
    }
    .settled(Duration::from_millis(500))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&err)
        .unwrap_or_default()
        .contains("running")
    {
        if std::time::Instant::now() > deadline {
            bail!(
                "hayate on host {} did not start within 20 s: {}",
                i + 1,
                crate::sys::proc::tail(&err, 5)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(started)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlays_are_named_and_hayates_are_compared() {
        let names: Vec<&str> = Overlay::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(names, ["hayate-afpacket", "hayate-afxdp", "linux-vxlan"]);
        assert!(Overlay::HayateAfxdp.is_hayate() && !Overlay::LinuxVxlan.is_hayate());
        let cfg = hayate_config("afpacket", "a1", "c1", "192.168.77.2", 1, false);
        assert!(
            cfg.contains("spec = \"vxlan:remote=192.168.77.2,vni=42\""),
            "{cfg}"
        );
        assert!(cfg.contains("spec = \"afpacket:c1,vnet_hdr=off\""), "{cfg}");
        assert!(cfg.contains("cores = [1]"), "{cfg}");
        let cfg = hayate_config("afxdp", "a1", "c1", "192.168.77.2", 1, false);
        assert!(cfg.contains("spec = \"afxdp:c1\""), "{cfg}");
        let cfg = tap_config("a1", "t0", 0, 1, true);
        assert!(cfg.contains("spec = \"afpacket:a1\""), "{cfg}");
        assert!(
            cfg.contains(
                "vxlan:remote=192.168.79.1,local=192.168.78.1,vni=42,underlay=t0,\
                 nexthop_mac=02:00:00:00:4e:fe,local_mac=02:00:00:00:4e:01"
            ),
            "{cfg}"
        );
        assert!(tap_config("b1", "t1", 1, 1, false).contains("afpacket:b1,vnet_hdr=off"));
        assert_eq!(Overlay::NAMED.len(), Overlay::ALL.len() + 2);
        let cfg = hayate_config("afxdp-vnet", "a1", "c1", "192.168.77.2", 1, true);
        assert!(cfg.contains("spec = \"afpacket:a1\"\n"), "{cfg}");
        assert!(cfg.contains("spec = \"afxdp:c1\"\n"), "{cfg}");
        let cfg = hayate_config("afpacket", "a1", "c1", "192.168.77.2", 1, true);
        assert!(cfg.contains("spec = \"afpacket:a1\"\n"), "{cfg}");
        assert!(cfg.contains("spec = \"afpacket:c1,vnet_hdr=off\""), "{cfg}");
    }
}

//! Open vSwitch with DPDK as the switch of `bench vhost`, as the peers' pvp.sh runs it: the
//! private instance of [`crate::ovs_dpdk`] with its PMD on the switch core and everything else
//! on the VM core. PVP: port 1 `phy-in` = net_pcap replaying the frame without end, 2 `vm` =
//! dpdkvhostuserclient, 3 `phy-out` = net_null. V2V: 1 vmA, 2 vmB (both dpdkvhostuserclient).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use super::counters::{parse_pmd_cycles, Reading};
use super::testpmd::{Telemetry, Vms};
use super::window::{self, Measured};
use super::{Ctx, Topology};
use crate::ovs_dpdk::{self, Ovs};

/// Measures Open vSwitch with DPDK on `topo`, with logs and sockets in `dir`.
pub fn measure(ctx: &Ctx, topo: Topology, dir: &Path) -> Result<Measured> {
    let Some(huge) = &ctx.huge else {
        bail!("Open vSwitch with DPDK needs the private hugetlbfs");
    };
    let mut vms = Vms::start(ctx, topo, dir)?;
    let setup = ovs_dpdk::Setup {
        tag: ctx.tag.clone(),
        pmd_core: ctx.switch_core,
        main_core: ctx.vm_core,
        lifetime: ctx.lifetime(),
        netns: None,
    };
    let mut ovs = Ovs::start(&setup, &dir.join("ovs"), huge)?;
    let vhost = |name: &'static str, no: u32, sock: &Path| {
        (
            name,
            no,
            "dpdkvhostuserclient",
            vec![format!("options:vhost-server-path={}", sock.display())],
        )
    };
    let dpdk = |name: &'static str, no: u32, devargs: String| {
        (
            name,
            no,
            "dpdk",
            vec![format!("options:dpdk-devargs={devargs}")],
        )
    };
    let (ports, flows): (Vec<_>, &[&str]) = match topo {
        Topology::Pvp => (
            vec![
                dpdk(
                    "phy-in",
                    1,
                    format!("net_pcap0,rx_pcap={},infinite_rx=1", ctx.pcap.display()),
                ),
                vhost("vm", 2, &vms.socks[0]),
                dpdk("phy-out", 3, "net_null1,no-rx=1".into()),
            ],
            &["in_port=1,actions=output:2", "in_port=2,actions=output:3"],
        ),
        Topology::V2v => (
            vec![
                vhost("vmA", 1, &vms.socks[0]),
                vhost("vmB", 2, &vms.socks[1]),
            ],
            &["in_port=1,actions=output:2"],
        ),
    };
    ovs.add_ports(&ports)?;
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

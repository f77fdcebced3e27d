//! DPDK's vhost library as the floor: dpdk-testpmd io forwarding in place of a switch, its
//! forwarding lcore on the switch core. No parsing, no lookup: the cost of the vhost rings
//! alone, the bound any vhost-user switch on this machine works against.
//!
//! - PVP: port 0 net_pcap (the frame without end) → 1 net_vhost (DPDK's vhost library,
//!   server: it owns the socket) → the VM (virtio-user, client, io forward back) → 1 → 2
//!   net_null.
//! - V2V: the same VMs as the switches get ([`Vms`]: one testpmd, vmA and vmB owning their
//!   sockets), and two net_vhost ports in client mode forwarding vmA → vmB (`paired`; vmB
//!   sends nothing back). On this machine the VMs' core is close to its own limit here, so
//!   this floor is also what V2V can reach at all.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use super::counters::Reading;
use super::testpmd::{self, virtio, Telemetry, Vms};
use super::window::{self, Measured};
use super::{Ctx, Topology};
use crate::sys::guard;
use crate::sys::host::remove_dpdk_runtime;
use crate::sys::proc::Proc;

/// A testpmd's process and runtime folder (removed after it stops).
struct Dpdk(Proc, String);

impl Drop for Dpdk {
    fn drop(&mut self) {
        self.0.stop();
        remove_dpdk_runtime(&self.1);
    }
}

/// Measures the floor, with logs and sockets in `dir`.
pub fn measure(ctx: &Ctx, topo: Topology, dir: &Path) -> Result<Measured> {
    let Some(huge) = &ctx.huge else {
        bail!("the DPDK vhost floor needs the private hugetlbfs");
    };
    match topo {
        Topology::Pvp => pvp(ctx, dir, huge),
        Topology::V2v => v2v(ctx, dir, huge),
    }
}

fn pvp(ctx: &Ctx, dir: &Path, huge: &Path) -> Result<Measured> {
    let sock = dir.join("floor.sock");
    let _ = std::fs::remove_file(&sock);
    let mut host = Dpdk(
        testpmd::floor(ctx, "floor", &ctx.pcap, &sock, huge).start(dir)?,
        testpmd::prefix(ctx, "floor"),
    );
    for _ in 0..300 {
        if sock.exists() {
            break;
        }
        host.0.alive()?;
        guard::nap(Duration::from_millis(100))?;
    }
    let mut vm = Dpdk(
        testpmd::vm(ctx, "fvm", &[virtio(0, &sock, ctx.vq, false)], "loop").start(dir)?,
        testpmd::prefix(ctx, "fvm"),
    );
    let tele = Telemetry::connect(&host.1, Duration::from_secs(60), &mut || host.0.alive())?;
    let vm_tele = Telemetry::connect(&vm.1, Duration::from_secs(60), &mut || vm.0.alive())?;
    let mut read = || -> Result<Vec<Reading>> {
        Ok(vec![
            Reading::take(|| tele.ports("switch", &[0, 1, 2]))?,
            Reading::take(|| vm_tele.ports("vm", &[0]))?,
        ])
    };
    let mut m = window::measure(
        ctx,
        &mut read,
        "switch.p2.tx",
        &mut || {
            host.0.alive()?;
            vm.0.alive()
        },
        &mut || Ok(()),
    )?;
    m.offered = Some("switch.p0.rx".into());
    let _ = std::fs::remove_file(&sock);
    Ok(m)
}

fn v2v(ctx: &Ctx, dir: &Path, huge: &Path) -> Result<Measured> {
    let mut vms = Vms::start(ctx, Topology::V2v, dir)?;
    let mut host = Dpdk(
        testpmd::floor_v2v(ctx, "floor", &vms.socks, huge).start(dir)?,
        testpmd::prefix(ctx, "floor"),
    );
    let vm_tele = Telemetry::connect(&vms.prefix, Duration::from_secs(60), &mut || {
        host.0.alive()?;
        vms.proc.alive()
    })?;
    let tele = Telemetry::connect(&host.1, Duration::from_secs(60), &mut || host.0.alive())?;
    let mut read = || -> Result<Vec<Reading>> {
        Ok(vec![
            Reading::take(|| tele.ports("switch", &[0, 1]))?,
            Reading::take(|| vm_tele.ports("vms", &[1, 2]))?,
        ])
    };
    let mut m = window::measure(
        ctx,
        &mut read,
        "vms.p2.rx",
        &mut || {
            host.0.alive()?;
            vms.proc.alive()
        },
        &mut || Ok(()),
    )?;
    m.offered = Some("vms.p1.tx".into());
    Ok(m)
}

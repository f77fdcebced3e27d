//! Hayate as the switch: `hayate run --config FILE --busy-poll`, one poll thread on the
//! switch core (`cores = [N]`), its other threads on the VM core; vhost-user ports in client
//! mode (the VMs own the sockets). PVP: port 1 `null:` (the in-memory source, as net_pcap's
//! endless replay is for the others), 2 the VM, 3 `null:sink`. V2V: 1 vmA, 2 vmB. Counters
//! come from `hayate ctl dump-ports` over the management socket in a private run folder; the
//! poll thread's busy share from `hayate ctl dump-pmd` (its busy and idle cycles) at the
//! window's two ends.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, Result};

use super::counters::{parse_dump_ports, parse_hayate_pmd_cycles, put_ports, Reading};
use super::testpmd::{Telemetry, Vms};
use super::window::{self, Measured};
use super::{Ctx, Topology};
use crate::sys::proc::{self, Spawn};

/// The bridge's name.
const BRIDGE: &str = "vbr";

/// The TOML config of one topology: ports (name, spec) in OpenFlow port order, flows.
pub fn config(topo: Topology, socks: &[&Path], switch_core: usize, ctl: &Path) -> String {
    let (ports, flows): (Vec<(&str, String)>, &[&str]) = match topo {
        Topology::Pvp => (
            vec![
                ("phy-in", "null:".into()),
                ("vm", format!("vhostuser:{}", socks[0].display())),
                ("phy-out", "null:sink".into()),
            ],
            &["in_port=1,actions=output:2", "in_port=2,actions=output:3"],
        ),
        Topology::V2v => (
            vec![
                ("vmA", format!("vhostuser:{}", socks[0].display())),
                ("vmB", format!("vhostuser:{}", socks[1].display())),
            ],
            &["in_port=1,actions=output:2"],
        ),
    };
    let mut s = format!(
        "[[bridge]]\nname = \"{BRIDGE}\"\ncores = [{switch_core}]\nfail_mode = \"secure\"\n\
         controllers = [\"punix:{}\"]\nflows = [\n",
        ctl.display()
    );
    for f in flows {
        s.push_str(&format!("  \"{f}\",\n"));
    }
    s.push_str("]\n");
    for (i, (name, spec)) in ports.iter().enumerate() {
        s.push_str(&format!(
            "\n[[bridge.port]]\nname = \"{name}\"\nspec = \"{spec}\"\nofport = {}\n",
            i + 1
        ));
    }
    s
}

/// `hayate ctl BRIDGE CMD` on the bridge's management socket.
fn ctl(ctx: &Ctx, run_dir: &Path, cmd: &str) -> Result<String> {
    proc::run(
        Command::new(&ctx.hayate)
            .arg("ctl")
            .arg("--run-dir")
            .arg(run_dir)
            .args([BRIDGE, cmd]),
        Duration::from_secs(10),
    )
}

/// The switch's port counters as `switch.p<N>.*`.
fn ports(ctx: &Ctx, run_dir: &Path) -> Result<BTreeMap<String, u64>> {
    let mut m = BTreeMap::new();
    put_ports(
        &mut m,
        "switch",
        &parse_dump_ports(&ctl(ctx, run_dir, "dump-ports")?),
    );
    Ok(m)
}

/// Idle and busy cycles of the poll thread on the switch core (`hayate ctl dump-pmd`).
fn pmd_cycles(ctx: &Ctx, run_dir: &Path) -> Result<(u64, u64)> {
    let text = ctl(ctx, run_dir, "dump-pmd")?;
    parse_hayate_pmd_cycles(&text, ctx.switch_core).ok_or_else(|| {
        anyhow!(
            "no poll thread on core {} in dump-pmd:\n{text}",
            ctx.switch_core
        )
    })
}

/// Measures Hayate on `topo`, with logs and sockets in `dir`.
pub fn measure(ctx: &Ctx, topo: Topology, dir: &Path) -> Result<Measured> {
    let mut vms = Vms::start(ctx, topo, dir)?;
    let run_dir = dir.join("run");
    std::fs::create_dir_all(&run_dir)?;
    let cfg = dir.join("hayate.toml");
    let socks: Vec<&Path> = vms.socks.iter().map(|p| p.as_path()).collect();
    std::fs::write(
        &cfg,
        config(topo, &socks, ctx.switch_core, &run_dir.join("ctl.sock")),
    )?;
    let mut sw = Spawn::new("hayate", &ctx.hayate.to_string_lossy())
        .args(["run", "--config"])
        .args([cfg.to_string_lossy(), "--run-dir".into()])
        .args([run_dir.to_string_lossy()])
        .args(["--busy-poll", "--stats-interval", "0"])
        .cpus(&[ctx.vm_core])
        .lifetime(ctx.lifetime())
        .start(dir)?;
    let tele = Telemetry::connect(&vms.prefix, Duration::from_secs(60), &mut || {
        sw.alive()?;
        vms.proc.alive()
    })?;
    let (vm_key, vm_ports): (&str, &[u16]) = match topo {
        Topology::Pvp => ("vm", &[0]),
        Topology::V2v => ("vms", &[1, 2]),
    };
    let mut read = || -> Result<Vec<Reading>> {
        Ok(vec![
            Reading::take(|| ports(ctx, &run_dir))?,
            Reading::take(|| tele.ports(vm_key, vm_ports))?,
        ])
    };
    let (delivered, offered) = match topo {
        Topology::Pvp => ("switch.p3.tx", "switch.p1.rx"),
        Topology::V2v => ("vms.p2.rx", "vms.p1.tx"),
    };
    let mut at_start = None;
    let mut m = window::measure(
        ctx,
        &mut read,
        delivered,
        &mut || {
            sw.alive()?;
            vms.proc.alive()
        },
        &mut || {
            at_start = Some(pmd_cycles(ctx, &run_dir)?);
            Ok(())
        },
    )?;
    // The poll thread's own count of its busy and idle cycles over the window (it counts
    // a poll busy when it brought packets).
    if let Some((i0, b0)) = at_start {
        let (i1, b1) = pmd_cycles(ctx, &run_dir)?;
        let (idle, busy) = (i1.saturating_sub(i0), b1.saturating_sub(b0));
        if idle + busy > 0 {
            m.busy_share = Some(busy as f64 / (idle + busy) as f64);
        }
    }
    m.offered = Some(offered.into());
    Ok(m)
}

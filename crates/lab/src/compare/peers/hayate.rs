//! Hayate on the topology's veths: `hayate run --port KIND:IF --port KIND:IF … --core N`, in
//! the switch namespace, pinned to the switch core (policing as the policed port's
//! `ingress_policing_rate`/`_burst` options; flows added with `hayate ctl` once it runs); AF_XDP or AF_PACKET ports, with or without
//! the priority lane (`prio=off`), or with the lane on the hosts' core (`--lane-core`: what
//! the lane gives on a host with a housekeeping core; this machine has two cores, so the lane
//! then shares the hosts' one — outside the one-core rule the other figures keep).

use std::fs::File;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};

use super::child::ChildSwitch;
use super::{Peer, StartCtx, Started};
use crate::compare::topo::in_ns;

/// Hayate's port type here.
#[derive(Clone, Copy)]
pub enum Kind {
    /// AF_XDP sockets.
    Afxdp,
    /// AF_PACKET sockets.
    Afpacket,
}

/// Hayate with one port type and lane setting.
pub struct Hayate {
    kind: Kind,
    prio: bool,
    lane_on_hosts: bool,
    name: &'static str,
}

impl Hayate {
    /// Hayate on `kind` ports; `prio`: the priority lane on; `lane_on_hosts`: the lane on the
    /// hosts' core.
    pub fn new(kind: Kind, prio: bool, lane_on_hosts: bool) -> Hayate {
        let name = match (kind, prio, lane_on_hosts) {
            (Kind::Afxdp, true, _) => "hayate-afxdp",
            (Kind::Afxdp, false, _) => "hayate-afxdp-noprio",
            (Kind::Afpacket, true, false) => "hayate-afpacket",
            (Kind::Afpacket, false, _) => "hayate-afpacket-noprio",
            (Kind::Afpacket, true, true) => "hayate-afpacket-lane-host",
        };
        Hayate {
            kind,
            prio,
            lane_on_hosts,
            name,
        }
    }
}

impl Peer for Hayate {
    fn name(&self) -> &'static str {
        self.name
    }

    fn start(&self, cx: &StartCtx<'_>) -> Result<Box<dyn Started>> {
        let kind = match self.kind {
            Kind::Afxdp => "afxdp",
            Kind::Afpacket => "afpacket",
        };
        let opts = if self.prio { "" } else { ",prio=off" };
        let (core, host) = (cx.core.to_string(), cx.host_core.to_string());
        let hayate = cx.hayate.to_string_lossy();
        let ports: Vec<String> = cx
            .topo
            .switch_ports()
            .into_iter()
            .map(|dev| {
                let police = match cx.police {
                    Some(p) if p.dev == dev => format!(
                        ",ingress_policing_rate={},ingress_policing_burst={}",
                        p.kbps, p.burst_kbit
                    ),
                    _ => String::new(),
                };
                format!("{kind}:{dev}{opts}{police}")
            })
            .collect();
        let run_dir = cx.dir.join("hayate-run");
        std::fs::create_dir_all(&run_dir)?;
        let run_dir = run_dir.to_string_lossy().to_string();
        let mut argv = vec!["taskset", "-c", &core, &hayate, "run"];
        for p in &ports {
            argv.extend(["--port", p]);
        }
        argv.extend([
            "--core",
            &core,
            "--stats-interval",
            "0",
            "--run-dir",
            &run_dir,
        ]);
        if self.lane_on_hosts {
            argv.extend(["--lane-core", &host]);
        }
        let err = cx.dir.join(format!("{}.err", self.name));
        let child = in_ns(&cx.topo.ns_s, &argv)
            .stdin(Stdio::null())
            .stdout(File::create(cx.dir.join(format!("{}.log", self.name)))?)
            .stderr(File::create(&err)?)
            .spawn()
            .context("starting hayate")?;
        let mut started = ChildSwitch { child, err }.settled(Duration::from_millis(500))?;
        if !cx.flows.is_empty() {
            // Ports open before the management socket does (AF_XDP ports take a while).
            let sock = std::path::Path::new(&run_dir).join("br0.mgmt");
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !sock.exists() {
                started.check_alive()?;
                if std::time::Instant::now() > deadline {
                    anyhow::bail!("hayate did not open {} within 20 s", sock.display());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        for f in cx.flows {
            let out = std::process::Command::new(cx.hayate)
                .args(["ctl", "--run-dir", &run_dir, "br0", "add-flow", f])
                .stdin(Stdio::null())
                .output()
                .context("running hayate ctl")?;
            if !out.status.success() {
                anyhow::bail!(
                    "hayate ctl br0 add-flow {f}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        Ok(started)
    }
}

//! `hayate run --ovsdb TARGET`: the switch configured by an OVSDB server (Open vSwitch's
//! `vswitch.ovsschema`), in the place ovs-vswitchd holds, and `hayate ovsdb-init`.
//!
//! ```text
//!  ovsdb-server ◄──monitor / transact── session (this file, the main thread)
//!       │ updates ─► Replica ─► want.rs: bridges, interfaces as port specs, controllers
//!       │                         └─► live.rs: start/stop bridges, add/del ports (live)
//!       ◄── writeback.rs: ofport, error, link_state, statistics, cur_cfg, ...
//! ```
//!
//! The session runs on the thread that called `hayate run`, waiting on the agent runtime
//! for the server's messages (at most [`TICK`] at a time, so link state and controller
//! status are written back within it). When the connection ends, the switch keeps
//! forwarding with what it has and connects again every second; the new monitor's rows are
//! applied as a difference, so a restart of the server disturbs no port.
//!
//! | file | job |
//! |---|---|
//! | `want.rs` | the configuration the replica describes |
//! | `iface.rs` | an Interface's type and options as a port spec |
//! | `qos.rs` | a Port's QoS and Queue rows as the spec's egress options |
//! | `live.rs` | bridges and ports brought to the configuration |
//! | `writeback.rs` | the columns the switch writes |
//! | `init.rs` | `hayate ovsdb-init`: a database and a server for it |

mod iface;
pub mod init;
mod live;
mod qos;
mod want;
mod writeback;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use ovsdb::{ops, Client, Replica};
use packet::Pool;
use serde_json::json;
use tokio::runtime::Runtime;

use crate::config;
use crate::run::{openflow_settings, start_bridge, stop_bridge, RunArgs, Running};
use live::Live;
use want::{Controllers, Setup};
use writeback::{Pass, Written, STATS_EVERY};

/// The database of Open vSwitch's schema.
const DB: &str = "Open_vSwitch";

/// The longest wait for the server between two looks at link state and controllers.
const TICK: Duration = Duration::from_millis(500);

/// The tables and columns monitored.
const TABLES: &[(&str, &[&str])] = &[
    (
        "Open_vSwitch",
        &[
            "bridges",
            "next_cfg",
            "cur_cfg",
            "other_config",
            "iface_types",
            "datapath_types",
        ],
    ),
    (
        "Bridge",
        &[
            "name",
            "ports",
            "controller",
            "fail_mode",
            "protocols",
            "other_config",
            "datapath_id",
        ],
    ),
    ("Port", &["name", "interfaces", "qos"]),
    ("QoS", &["type", "other_config", "queues"]),
    ("Queue", &["other_config"]),
    (
        "Interface",
        &[
            "name",
            "type",
            "options",
            "ofport_request",
            "ingress_policing_rate",
            "ingress_policing_burst",
            "ofport",
            "error",
            "link_state",
            "admin_state",
            "mac_in_use",
            "statistics",
        ],
    ),
    (
        "Controller",
        &[
            "target",
            "inactivity_probe",
            "is_connected",
            "role",
            "status",
        ],
    ),
];

/// Runs the switch from the database at `target` until `stop` is set.
pub fn run(
    target: &str,
    args: &RunArgs,
    rt: &Runtime,
    pool: &Pool,
    last_core: usize,
    metrics: &crate::metrics::Sources,
    stop: &AtomicBool,
) -> Result<()> {
    let target = ovsdb::Target::parse(target)?;
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(crate::openflow_side::default_run_dir);
    let mut runner = Bridges {
        rt,
        args,
        pool,
        last_core,
        metrics,
    };
    let mut live = Live::default();
    let mut written = Written::default();
    eprintln!("hayate: configured by the OVSDB server at {target}");
    // The last connection problem said, so a server that stays away is reported once.
    let mut said = String::new();
    while !stop.load(Ordering::Relaxed) {
        let mut s = Session {
            rt,
            run_dir: &run_dir,
            live: &mut live,
            written: &mut written,
            runner: &mut runner,
            stop,
        };
        if let Err(e) = s.run(&target, &mut said) {
            let text = format!("{e:#}");
            if text != said {
                eprintln!(
                    "hayate: OVSDB {target}: {text}; forwarding goes on, connecting again every second"
                );
                said = text;
            }
            let until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    live.stop(&mut runner);
    Ok(())
}

/// One connection to the server.
struct Session<'a> {
    rt: &'a Runtime,
    run_dir: &'a Path,
    live: &'a mut Live,
    written: &'a mut Written,
    runner: &'a mut dyn live::Runner,
    stop: &'a AtomicBool,
}

impl Session<'_> {
    /// Connects, monitors and applies until the connection ends (an error) or `stop`.
    /// `said`: the last connection problem reported, cleared once connected.
    fn run(&mut self, target: &ovsdb::Target, said: &mut String) -> Result<()> {
        let rt = self.rt;
        let (client, mut updates) = rt.block_on(Client::connect(target))?;
        let initial = rt.block_on(client.monitor(ops::monitor(DB, &json!("hayate"), TABLES)))?;
        if !said.is_empty() {
            eprintln!("hayate: OVSDB {target}: connected again");
            said.clear();
        }
        let mut replica = Replica::default();
        replica.apply(&initial);
        self.written.clear();
        let run_dir = self.run_dir.display().to_string();
        let mut last_full: Option<Instant> = None;
        let mut dirty = true;
        let mut want = want::Want::default();
        while !self.stop.load(Ordering::Relaxed) {
            let full = last_full.is_none_or(|t| t.elapsed() >= STATS_EVERY);
            let pass = if full {
                Pass::Full
            } else if dirty {
                Pass::Changed
            } else {
                Pass::Quick
            };
            // Interfaces that failed are tried again on full passes (a kernel interface may
            // have appeared meanwhile).
            if dirty || (full && !self.live.errors.is_empty()) {
                want = want::want(&replica, iface::kernel_has, &run_dir);
                self.live.apply(&want, self.runner);
                dirty = false;
            }
            if full {
                last_full = Some(Instant::now());
            }
            let writes = writeback::ops(&want, self.live, &replica, pass, self.written);
            if !writes.is_empty() {
                match rt.block_on(client.transact(ops::transact(DB, writes))) {
                    Ok(_) => {}
                    Err(ovsdb::ClientError::Server(e)) => {
                        tracing::warn!("OVSDB: a write-back was refused: {e}");
                        self.written.clear();
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            let next = rt.block_on(async { tokio::time::timeout(TICK, updates.recv()).await });
            match next {
                Ok(Some((_, u))) => {
                    replica.apply(&u);
                    while let Ok((_, u)) = updates.try_recv() {
                        replica.apply(&u);
                    }
                    dirty = true;
                }
                Ok(None) => return Err(anyhow!("the connection closed")),
                Err(_) => {}
            }
        }
        Ok(())
    }
}

/// Starts bridges with `hayate run`'s options and changes their controllers.
struct Bridges<'a> {
    rt: &'a Runtime,
    args: &'a RunArgs,
    pool: &'a Pool,
    last_core: usize,
    /// What `--metrics` reads: a bridge is in it while it runs.
    metrics: &'a crate::metrics::Sources,
}

impl Bridges<'_> {
    fn sources(&self) -> std::sync::MutexGuard<'_, Vec<crate::metrics::BridgeSource>> {
        self.metrics.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl live::Runner for Bridges<'_> {
    fn start(&mut self, name: &str, setup: &Setup, ctl: &Controllers) -> Result<Running> {
        let b = config::Bridge {
            name: name.to_string(),
            cores: self.args.cores.clone(),
            lane_core: self.args.lane_core,
            gro: true,
            ports: Vec::new(),
            flows: Vec::new(),
            datapath_id: setup.datapath_id,
            controllers: ctl.targets.clone(),
            fail_mode: ctl.fail_mode,
            tls: None,
            packet_in_limit: agent::RateLimit::default(),
            pipeline: pipeline::PipelineConfig::default(),
            packet_in_port: None,
            tunnel_refresh: crate::tunnels::REFRESH_INTERVAL,
        };
        let mut settings = openflow_settings(self.args, &b, 1)?;
        settings.default_listener = false;
        settings.probe_interval = ctl.probe;
        let running = start_bridge(self.rt, self.args, b, self.pool, settings, self.last_core)?;
        self.sources()
            .push(crate::metrics::BridgeSource::of(&running));
        Ok(running)
    }

    fn stop(&mut self, running: Running) {
        self.sources().retain(|s| s.name != running.0.name);
        stop_bridge(running);
    }

    fn set_controllers(
        &mut self,
        bridge: &mut Running,
        old: &Controllers,
        ctl: &Controllers,
    ) -> Result<()> {
        if ctl.fail_mode != old.fail_mode {
            bridge.2.set_fail_mode(ctl.fail_mode);
        }
        if (&ctl.targets, ctl.probe) != (&old.targets, old.probe) {
            bridge.2.set_controllers(self.rt, &ctl.targets, ctl.probe)?;
        }
        Ok(())
    }
}

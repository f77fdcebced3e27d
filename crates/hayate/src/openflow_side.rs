//! A running bridge's OpenFlow side: the [`agent::ofproto::OfBridge`] over the switch's
//! pipeline, the agent serving its controllers, the management socket's agent for
//! `hayate ctl`, and the pump task that carries packet-ins, flow-removed and port-status out.
//! Ports added and removed with `hayate ctl BRIDGE add-port` / `del-port` reach the datapath
//! through a [`Plugger`].

use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent::ofproto::{
    datapath_id_from_name, mac_from_name, OfBridge, OfBridgeConfig, OfPort, Secondary,
};
use agent::{Agent, AgentConfig, FailMode, Target, TlsConfig};
use anyhow::{anyhow, Context, Result};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::nudge::Nudging;
use crate::plug::Plugger;
use crate::switch::Switch;

/// The default controller target: listen on the loopback, OpenFlow's port.
pub const DEFAULT_TARGET: &str = "ptcp:6653:127.0.0.1";

/// The pump's sleep while busy and its longest sleep when idle. Packet-ins (eventfd) and
/// controller messages ([`Nudging`]) wake it at once, so the idle bound only paces flow
/// timeouts (OpenFlow's are whole seconds: they fire up to this much late) and MAC aging. A
/// thousand idle bridges' pumps then wake ~2,000 times a second in all.
const PUMP_MIN: Duration = Duration::from_millis(1);
const PUMP_MAX: Duration = Duration::from_millis(500);
/// Longest idle pump sleep while no flow has a timeout: controller messages and packet-ins
/// wake the pump at once, so nothing else needs it.
const PUMP_MAX_UNTIMED: Duration = Duration::from_secs(5);

/// How one bridge talks OpenFlow.
#[derive(Debug, Clone)]
pub struct OpenFlowSettings {
    /// Datapath id (`None`: derived from the bridge name).
    pub datapath_id: Option<u64>,
    /// Controller targets (empty: [`DEFAULT_TARGET`], and a port in use only warns).
    pub controllers: Vec<String>,
    /// Fail mode.
    pub fail_mode: FailMode,
    /// TLS files for ssl:/pssl:.
    pub tls: Option<agent::TlsFiles>,
    /// Folder of the management socket `<bridge>.mgmt` (`None`: no management socket).
    pub run_dir: Option<PathBuf>,
    /// Packet-ins per controller: rate and burst.
    pub packet_in_limit: agent::RateLimit,
    /// With no controllers: listen on [`DEFAULT_TARGET`] (`false`: no controller at all, as
    /// a bridge of an OVSDB configuration without one).
    pub default_listener: bool,
    /// The controllers' inactivity probe (`None`: the agent's default).
    pub probe_interval: Option<Duration>,
}

/// A bridge's OpenFlow side, running. Dropping it stops the agents and the pump.
pub struct OpenFlowSide {
    /// The bridge (its ports change while it runs).
    bridge: Arc<OfBridge>,
    /// The controllers' agent (held: dropping it closes the connections).
    agent: Arc<Agent>,
    /// The management socket's agent (held likewise).
    _mgmt: Option<Arc<Agent>>,
    /// Where the management socket is (removed on drop).
    mgmt_path: Option<PathBuf>,
    pump: JoinHandle<()>,
    /// What a new controllers' agent is started with (less its targets).
    agent_config: AgentConfig,
    /// Wakes the pump.
    nudge: Arc<Notify>,
    /// The datapath the pump serves.
    running: Arc<datapath::Running>,
}

impl OpenFlowSide {
    /// The OpenFlow bridge (e.g. for its current ports).
    pub fn bridge(&self) -> Arc<OfBridge> {
        self.bridge.clone()
    }

    /// The controllers' agent (e.g. for its connections).
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// Changes the fail mode, keeping the bridge, its ports and flow tables.
    pub fn set_fail_mode(&mut self, mode: FailMode) {
        self.agent_config.fail_mode = mode;
        let connected = !self.agent.connections().is_empty();
        self.bridge.set_fail_mode(mode, connected);
    }

    /// Replaces the controllers with `targets` (none: no controller) and their inactivity
    /// probe, keeping the bridge, its ports and its flow tables: the old connections close,
    /// the new agent connects or listens, and the fail mode follows the new connections (a
    /// standalone bridge with no controller in charge installs its fail-open flow after the
    /// fail-open delay, as at start).
    pub fn set_controllers(
        &mut self,
        rt: &Runtime,
        targets: &[String],
        probe: Option<Duration>,
    ) -> Result<()> {
        let name = self.bridge.config().name.clone();
        let mut parsed = Vec::new();
        for t in targets {
            parsed.push(Target::parse(t).with_context(|| format!("bridge {name}"))?);
        }
        let cfg = AgentConfig {
            targets: parsed,
            probe_interval: probe.unwrap_or(AgentConfig::default().probe_interval),
            ..self.agent_config.clone()
        };
        let agent = rt
            .block_on(Agent::start(cfg, nudging(&self.bridge, &self.nudge)))
            .map_err(|e| anyhow!("bridge {name}: {e}"))?;
        for t in agent.listening() {
            eprintln!("hayate: bridge {name}: listening for controllers on {t}");
        }
        self.pump.abort();
        self.agent = Arc::new(agent);
        self.pump = rt.spawn(pump(
            self.bridge.clone(),
            self.agent.clone(),
            self._mgmt.clone(),
            self.running.clone(),
            self.nudge.clone(),
        ));
        Ok(())
    }
}

impl Drop for OpenFlowSide {
    fn drop(&mut self) {
        self.pump.abort();
        if let Some(p) = &self.mgmt_path {
            std::fs::remove_file(p).ok();
        }
    }
}

/// The management socket path of `bridge` under `dir`.
pub fn mgmt_path(dir: &Path, bridge: &str) -> PathBuf {
    dir.join(format!("{bridge}.mgmt"))
}

/// The default run directory: `/run/hayate` as root, else `$XDG_RUNTIME_DIR/hayate`, else
/// `/tmp/hayate-<uid>`.
pub fn default_run_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    if uid == 0 {
        return PathBuf::from("/run/hayate");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => PathBuf::from(d).join("hayate"),
        None => PathBuf::from(format!("/tmp/hayate-{uid}")),
    }
}

/// Takes the switch's pipeline over and starts the OpenFlow side of the bridge.
pub fn start(
    rt: &Runtime,
    sw: &mut Option<Switch>,
    running: Arc<datapath::Running>,
    settings: &OpenFlowSettings,
    tunnels: Arc<crate::tunnels::BridgeTunnels>,
) -> Result<OpenFlowSide> {
    let s = sw
        .take()
        .ok_or_else(|| anyhow!("internal: switch already taken"))?;
    let name = s.name.clone();
    let datapath_id = settings
        .datapath_id
        .unwrap_or_else(|| datapath_id_from_name(&name));
    let agent_config = AgentConfig {
        fail_mode: settings.fail_mode,
        packet_in_limit: settings.packet_in_limit,
        tls: match &settings.tls {
            Some(files) => Some(TlsConfig::load(files).with_context(|| format!("bridge {name}"))?),
            None => None,
        },
        ..AgentConfig::default()
    };
    let agent_config = match settings.probe_interval {
        Some(p) => AgentConfig {
            probe_interval: p,
            ..agent_config
        },
        None => agent_config,
    };
    let ports = s
        .ports
        .iter()
        .map(|p| OfPort {
            no: p.ofport,
            name: p.name.clone(),
            hw_addr: mac_from_name(&format!("{name}/{}", p.name)),
            port: p.port.clone(),
        })
        .collect();
    let bridge = OfBridge::new(
        OfBridgeConfig {
            name: name.clone(),
            datapath_id,
            fail_mode: settings.fail_mode,
            packet_in_limit: agent_config.packet_in_limit,
        },
        s.control,
        ports,
    );
    bridge.attach(running.injector());
    let counters: Arc<dyn agent::ofproto::DatapathCounters> = running.clone();
    bridge.attach_counters(Arc::downgrade(&counters));
    drop(counters);
    let rates: Arc<dyn agent::ofproto::PortRates> = running.clone();
    bridge.attach_rates(Arc::downgrade(&rates));
    drop(rates);
    bridge.attach_plug(Arc::new(Plugger {
        pool: s.pool.clone(),
        datapath: Arc::downgrade(&running),
        bridge: name.clone(),
        pending: Default::default(),
        tunnels,
    }));
    let default = settings.controllers.is_empty() && settings.default_listener;
    let texts: Vec<String> = if default {
        vec![DEFAULT_TARGET.to_string()]
    } else {
        settings.controllers.clone()
    };
    let mut targets = Vec::new();
    for t in &texts {
        targets.push(Target::parse(t).with_context(|| format!("bridge {name}"))?);
    }
    let nudge = Arc::new(Notify::new());
    // A flow-mod applied on a thread of its own (a bulk one) wakes the pump when done.
    bridge.set_pump_wake(nudge.clone());
    let agent = {
        let cfg = AgentConfig {
            targets,
            ..agent_config.clone()
        };
        match rt.block_on(Agent::start(cfg, nudging(&bridge, &nudge))) {
            Ok(a) => a,
            Err(e) if default => {
                eprintln!(
                    "hayate: bridge {name}: cannot listen on {DEFAULT_TARGET} ({e}); running without a controller listener (give --controller to choose another)"
                );
                rt.block_on(Agent::start(agent_config.clone(), nudging(&bridge, &nudge)))
                    .map_err(|e| anyhow!("bridge {name}: {e}"))?
            }
            Err(e) => return Err(anyhow!("bridge {name}: {e}")),
        }
    };
    for t in agent.listening() {
        eprintln!("hayate: bridge {name}: listening for controllers on {t}");
    }
    let (mgmt, mgmt_path) = match &settings.run_dir {
        Some(dir) => start_mgmt(rt, &bridge, &nudge, dir, &name),
        None => (None, None),
    };
    let agent = Arc::new(agent);
    let controllers: Arc<dyn agent::ofproto::ControllerView> = agent.clone();
    bridge.attach_controllers(Arc::downgrade(&controllers));
    drop(controllers);
    let pump = rt.spawn(pump(
        bridge.clone(),
        agent.clone(),
        mgmt.clone(),
        running.clone(),
        nudge.clone(),
    ));
    Ok(OpenFlowSide {
        bridge,
        agent,
        _mgmt: mgmt,
        mgmt_path,
        pump,
        agent_config,
        nudge,
        running,
    })
}

/// The bridge as its agents see it: every message wakes the pump.
fn nudging(bridge: &Arc<OfBridge>, pump: &Arc<Notify>) -> Arc<Nudging<OfBridge>> {
    Arc::new(Nudging {
        inner: bridge.clone(),
        pump: pump.clone(),
    })
}

fn start_mgmt(
    rt: &Runtime,
    bridge: &Arc<OfBridge>,
    nudge: &Arc<Notify>,
    dir: &Path,
    name: &str,
) -> (Option<Arc<Agent>>, Option<PathBuf>) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!(
            "hayate: bridge {name}: cannot create {} ({e}); no management socket (give --run-dir)",
            dir.display()
        );
        return (None, None);
    }
    let path = mgmt_path(dir, name);
    let cfg = AgentConfig {
        targets: vec![Target::PassiveUnix(path.clone())],
        // The management socket never drives the fail mode (Secondary ignores it).
        fail_mode: FailMode::Secure,
        // Its connections live on the descriptors kept in reserve, not on the controller
        // listeners' budget, so a flooded listener cannot lock it out.
        limits: agent::ConnLimits {
            per_listener: 64,
            per_peer: 64,
            shared: false,
        },
        ..AgentConfig::default()
    };
    let secondary = Arc::new(Nudging {
        inner: Arc::new(Secondary(bridge.clone())),
        pump: nudge.clone(),
    });
    match rt.block_on(Agent::start(cfg, secondary)) {
        Ok(a) => {
            eprintln!(
                "hayate: bridge {name}: management socket {}",
                path.display()
            );
            (Some(Arc::new(a)), Some(path))
        }
        Err(e) => {
            eprintln!("hayate: bridge {name}: no management socket: {e}");
            (None, None)
        }
    }
}

/// Idle pumps wake on this shared grid, so the pumps of many idle bridges wake together:
/// one wake-up of the runtime's thread serves them all instead of one each.
const PUMP_GRID: Duration = Duration::from_millis(50);

/// When a pump that means to sleep `sleep` wakes: at once plus `sleep` while busy (shorter
/// than the grid), else at the first grid line after that.
fn wake_at(sleep: Duration) -> tokio::time::Instant {
    static EPOCH: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    let now = tokio::time::Instant::now();
    if sleep < PUMP_GRID {
        return now + sleep;
    }
    let epoch = *EPOCH.get_or_init(|| now);
    let grid = PUMP_GRID.as_nanos();
    let t = (now + sleep).duration_since(epoch).as_nanos();
    let lines = t.div_ceil(grid);
    epoch + Duration::from_nanos((lines * grid) as u64)
}

/// The datapath's packet-in eventfd for [`AsyncFd`], holding its owner so the descriptor
/// stays open as long as it is registered.
/// (Made only when the wake-up has a descriptor.)
struct Fd(Arc<datapath::Wake>);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.raw_fd().unwrap_or(-1)
    }
}

/// Sends what the bridge has to say: woken at once by the datapath when it queues packet-ins,
/// otherwise every 1 ms while busy, backing off to [`PUMP_MAX`] when idle (flow timeouts and
/// publishing run on its 100 ms tick), or to [`PUMP_MAX_UNTIMED`] while no flow has a timeout;
/// at most [`agent::ofproto::LINK_POLL`] while a port's link may change
/// ([`OfBridge::watches_links`]).
async fn pump(
    bridge: Arc<OfBridge>,
    agent: Arc<Agent>,
    mgmt: Option<Arc<Agent>>,
    running: Arc<datapath::Running>,
    nudge: Arc<Notify>,
) {
    let wake = running.packet_in_wake();
    let woken = wake.raw_fd().and_then(|_| {
        // SAFETY: `Fd` keeps the `Wake` that owns the descriptor alive; nothing closes or
        // replaces it while the AsyncFd exists.
        unsafe { AsyncFd::register_with_interest(Fd(wake.clone()), Interest::READABLE) }.ok()
    });
    let mut sleep = PUMP_MIN;
    loop {
        wake.clear();
        let rep = {
            let mut agents: Vec<&Agent> = vec![&agent];
            if let Some(m) = &mgmt {
                agents.push(m);
            }
            bridge.pump(&agents, Some(&running))
        };
        sleep = if rep.is_empty() {
            let max = if bridge.has_timed_flows() {
                PUMP_MAX
            } else {
                PUMP_MAX_UNTIMED
            };
            let max = if bridge.watches_links() {
                // A port's link may change (a vhost-user port's VM): look every LINK_POLL.
                max.min(agent::ofproto::LINK_POLL)
            } else {
                max
            };
            (sleep * 2).min(max)
        } else {
            PUMP_MIN
        };
        let nudged = match &woken {
            Some(fd) => {
                tokio::select! {
                    ready = fd.readable() => {
                        if let Ok(mut guard) = ready {
                            guard.clear_ready();
                        }
                        false
                    }
                    () = nudge.notified() => true,
                    () = tokio::time::sleep_until(wake_at(sleep)) => false,
                }
            }
            None => tokio::select! {
                () = nudge.notified() => true,
                () = tokio::time::sleep_until(wake_at(sleep)) => false,
            },
        };
        if nudged {
            // A controller spoke: what it changed is published on this pump, and the next
            // ones follow quickly while it keeps talking.
            sleep = PUMP_MIN;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_pumps_wake_on_a_shared_grid() {
        let a = wake_at(Duration::from_millis(300));
        tokio::time::sleep(Duration::from_millis(7)).await;
        let b = wake_at(Duration::from_millis(300));
        // Two pumps that went to sleep 7 ms apart wake together (or one grid line apart).
        let gap = b.max(a) - a.min(b);
        assert!(gap == Duration::ZERO || gap == PUMP_GRID, "{gap:?}");
        let now = tokio::time::Instant::now();
        assert!(
            b >= now + Duration::from_millis(290),
            "never earlier than asked"
        );
        // A busy pump sleeps exactly what it asked.
        let c = wake_at(Duration::from_millis(2));
        assert!(c <= tokio::time::Instant::now() + Duration::from_millis(2));
    }
}

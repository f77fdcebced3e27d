//! The OpenFlow bridge: the [`Bridge`] that turns controllers' OpenFlow 1.3 messages into
//! pipeline changes ([`pipeline::Control`]) and datapath actions, and the datapath's events
//! (packet-ins, expired flows, port changes) into asynchronous messages.
//!
//! ```text
//!  agent session ──handle(msg)──► OfBridge ──flow/group/meter/port-mod──► Control (working copy)
//!                                    │ barrier, packet-out, pump tick ──► Control::publish
//!                                    │ packet-out ──► datapath::Injector (poll thread 0)
//!  pump (every 1–50 ms) ◄── datapath packet-ins, Control::tick / take_removed, port-status
//!        └──► agent: AsyncSender (filtered per connection by SET_ASYNC)
//! ```
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | [`OfBridge`], its settings and ports, the [`Bridge`] impl, fail mode |
//! | `handle.rs` | one OpenFlow request → replies or an error |
//! | `multipart.rs` | multipart (statistics) replies, split to fit 64 KiB messages |
//! | `assemble.rs` | multipart requests in several messages (table-features set requests) |
//! | `dump.rs` | flow and aggregate statistics from a snapshot, a big table's in pieces |
//! | `bulk.rs` | a non-strict modify or filtered delete over a big table, worked out off the lock |
//! | `features.rs` | what the switch says about itself: desc, table/group/meter features, ports |
//! | `packet_out.rs` | packet-out actions → datapath actions |
//! | `async_out.rs` | the pump: packet-in, flow-removed, port-status, per-connection filters |
//! | `live_ports.rs` | ports added and removed while running (add-port, del-port), link state |
//! | `port_cmd.rs` | add-port / del-port on the wire: Hayate's experimenter message |
//! | `qos.rs` | a port's rates: egress queues (queue stats, queue get-config, a flow-mod's queue), set-policing and set-queue |
//! | `qos_show.rs` | dump-queues: each port's queues, their rates, counters and held packets (text or JSON) |
//! | `counters.rs` | the datapath's counters: per thread (dump-pmd), drops per port (dump-drops, dump-ports) |
//! | `look.rs` | looking inside: trace, pmd-stats, rxq-show, dump-megaflows, show (text or JSON) |
//! | `capture.rs` | live captures of a port's frames, started, read and stopped by `hayate ctl` |
//!
//! Barrier: the pipeline's working copy is published when a BARRIER_REQUEST arrives (before
//! the reply is written), before a packet-out, and on the pump's tick. A published pipeline is
//! met by the very next packet in the datapath (each poll thread compares the generation once
//! per batch, before any lookup; `crates/datapath/tests/barrier.rs`), so the BARRIER_REPLY
//! means every earlier message is in effect in the fast path.
//!
//! Locking: one mutex over the bridge's state, taken by `handle` and by the pump — both on
//! the control side. The datapath never takes it. A flow or aggregate statistics request
//! holds it only to take a snapshot of the tables (a pointer per table); the walk runs
//! without it, for a big table on a thread of its own, in pieces ([`Bridge::handle_streamed`]);
//! a bulk flow-mod holds it to take a snapshot and to swap the new tables in (`bulk.rs`).

mod assemble;
mod async_out;
mod bulk;
mod capture;
mod counters;
mod dump;
mod features;
mod handle;
mod live_ports;
mod look;
mod multipart;
mod packet_out;
pub mod port_cmd;
mod qos;
mod qos_show;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use datapath::Injector;
use openflow::{AsyncConfig, PortStatus};
use pipeline::model::{Action, FlowFlags, FlowMod, FlowModCommand, Instruction, Match};
use pipeline::{Control, RemovedFlow};
use port::Port;

use crate::bridge::Bridge;
use crate::connectivity::{Connectivity, FailMode};
use crate::rate_limit::{RateLimit, TokenBucket};
use crate::reply_stream::ReplyStream;
use crate::role::Role;
use crate::ConnId;

pub use async_out::{PumpReport, TICK};
pub use counters::{
    format_drops, format_pmd, merged, ControllerState, ControllerView, DatapathCounters,
};
pub use live_ports::{PortPlug, LINK_POLL};
pub use qos::PortRates;

/// Cookie of the flow standalone fail mode installs while no controller is connected
/// (`table=0, priority=0, actions=NORMAL`); it is removed when a controller connects.
pub const FAIL_OPEN_COOKIE: u64 = 0x4861_7961_7465_fa11;

/// Default `miss_send_len` (OpenFlow 1.3's `OFPCML_DEFAULT`... the spec's default is 128).
pub const DEFAULT_MISS_SEND_LEN: u16 = 128;

/// Settings of one OpenFlow bridge.
#[derive(Debug, Clone)]
pub struct OfBridgeConfig {
    /// Bridge name (desc, logs).
    pub name: String,
    /// Datapath id (FEATURES_REPLY).
    pub datapath_id: u64,
    /// What to do without a controller.
    pub fail_mode: FailMode,
    /// Packet-in budget per controller when SET_ASYNC filtering sends one by one (the agent
    /// applies its own otherwise); use the agent's `packet_in_limit`.
    pub packet_in_limit: RateLimit,
}

/// One port of the bridge.
#[derive(Clone)]
pub struct OfPort {
    /// OpenFlow port number.
    pub no: u32,
    /// Name (at most 15 bytes go on the wire).
    pub name: String,
    /// MAC address.
    pub hw_addr: [u8; 6],
    /// The backend (for counters).
    pub port: Arc<dyn Port>,
}

impl std::fmt::Debug for OfPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfPort")
            .field("no", &self.no)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A port with its OpenFlow config bits.
struct PortState {
    port: OfPort,
    /// `ofp_port_config` bits (PORT_DOWN, NO_RECV, NO_FWD, NO_PACKET_IN).
    config: u32,
    since: Instant,
    /// The link was up when last looked at ([`port::Port::link_up`]).
    link: bool,
}

/// Everything behind the bridge's mutex.
struct State {
    control: Control,
    ports: Vec<PortState>,
    /// `ofp_switch_config` flags: always `OFPC_FRAG_NORMAL` (0), the one fragment handling
    /// Hayate has (SET_CONFIG refuses the others).
    config_flags: u16,
    /// Table-features requests arriving in parts ([`assemble`]).
    parts: assemble::Parts,
    /// Per-connection SET_ASYNC settings (absent: the defaults).
    async_cfg: HashMap<ConnId, AsyncConfig>,
    /// Per-connection packet-in budgets for filtered sends.
    buckets: HashMap<ConnId, TokenBucket>,
    /// The working copy has changes not yet published.
    dirty: bool,
    /// The fail-open flow is installed.
    fail_open: bool,
    /// Port-status messages to send.
    port_status: Vec<PortStatus>,
    /// Removed flows (timeouts) to report, before the control side's (deletes).
    removed: std::collections::VecDeque<RemovedFlow>,
    last_tick: Instant,
    /// When the pump last looked at the ports' links.
    last_links: Instant,
    /// The tables a table-features set request configured, as it asked for them (names,
    /// properties): what a table-features request reports for them and what their flow-mods
    /// are held to ([`features::check_layout`]). The others are Hayate's own, `table<N>`.
    table_layout: HashMap<u8, openflow::multipart::TableFeatures>,
}

/// The OpenFlow side of one bridge (see the module docs).
pub struct OfBridge {
    cfg: OfBridgeConfig,
    state: Arc<Mutex<State>>,
    /// Told when a bulk flow-mod is applied after its message was handled (the pump).
    pump_wake: Mutex<Option<Arc<tokio::sync::Notify>>>,
    injector: Mutex<Option<Injector>>,
    /// How add-port and del-port reach the datapath.
    plug: Mutex<Option<Arc<dyn PortPlug>>>,
    /// Where the datapath's counters and the controllers are read
    /// ([`OfBridge::attach_counters`], [`OfBridge::attach_controllers`]).
    counters: counters::Sources,
    miss_send_len: AtomicU16,
    /// Some connection has a non-default async config (the slow, filtered send path).
    filtered: AtomicBool,
    /// Some port's link has been down: its link may change again (see
    /// [`OfBridge::watches_links`]).
    watch_links: AtomicBool,
    /// The fail mode now is standalone (starts as `cfg.fail_mode`; see
    /// [`OfBridge::set_fail_mode`]).
    standalone: AtomicBool,
}

impl std::fmt::Debug for OfBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfBridge")
            .field("name", &self.cfg.name)
            .field(
                "datapath_id",
                &format_args!("{:016x}", self.cfg.datapath_id),
            )
            .finish_non_exhaustive()
    }
}

/// Installs the standalone fail-open flow (table 0, priority 0, NORMAL, [`FAIL_OPEN_COOKIE`])
/// into `control` and publishes it — for a switch to call before its datapath starts, so that
/// no packet meets an empty table before the [`OfBridge`] exists (the bridge recognizes the
/// flow by its cookie and removes it when a controller connects).
pub fn preinstall_fail_open(control: &mut pipeline::Control) -> Result<(), pipeline::FlowModError> {
    control.flow_mod(&fail_open_flow(FlowModCommand::Add))?;
    control.publish();
    Ok(())
}

fn fail_open_flow(command: FlowModCommand) -> FlowMod {
    FlowMod {
        command,
        table_id: 0,
        priority: 0,
        matcher: Match::ANY,
        instructions: vec![Instruction::ApplyActions(vec![Action::Output {
            port: pipeline::model::ports::NORMAL,
            max_len: 0,
        }])],
        cookie: FAIL_OPEN_COOKIE,
        cookie_mask: u64::MAX,
        idle_timeout: 0,
        hard_timeout: 0,
        out_port: pipeline::model::ports::ANY,
        out_group: pipeline::model::GROUP_ANY,
        flags: FlowFlags::default(),
        matcher_as_sent: None,
        instructions_as_sent: None,
    }
}

impl OfBridge {
    /// A bridge over `control` (whose tables may already hold configured flows) and `ports`.
    /// In standalone fail mode the fail-open flow is installed at once (no controller is
    /// connected yet), unless table 0 already has a priority-0 catch-all entry.
    pub fn new(cfg: OfBridgeConfig, control: Control, ports: Vec<OfPort>) -> Arc<OfBridge> {
        let now = Instant::now();
        let mut st = State {
            control,
            ports: ports
                .into_iter()
                .map(|port| PortState {
                    link: port.port.link_up(),
                    port,
                    config: 0,
                    since: now,
                })
                .collect(),
            config_flags: 0,
            parts: assemble::Parts::default(),
            async_cfg: HashMap::new(),
            buckets: HashMap::new(),
            dirty: false,
            fail_open: false,
            port_status: Vec::new(),
            removed: std::collections::VecDeque::new(),
            last_tick: now,
            last_links: now,
            table_layout: HashMap::new(),
        };
        st.ports.sort_by_key(|p| p.port.no);
        let down: Vec<u32> = st
            .ports
            .iter()
            .filter(|p| !p.link)
            .map(|p| p.port.no)
            .collect();
        for &no in &down {
            st.control.set_port_live(no, false);
        }
        if cfg.fail_mode == FailMode::Standalone {
            st.install_fail_open();
            st.publish();
        }
        let standalone = cfg.fail_mode == FailMode::Standalone;
        Arc::new(OfBridge {
            cfg,
            state: Arc::new(Mutex::new(st)),
            pump_wake: Mutex::new(None),
            injector: Mutex::new(None),
            plug: Mutex::new(None),
            counters: counters::Sources::default(),
            miss_send_len: AtomicU16::new(DEFAULT_MISS_SEND_LEN),
            standalone: AtomicBool::new(standalone),
            filtered: AtomicBool::new(false),
            watch_links: AtomicBool::new(!down.is_empty()),
        })
    }

    /// Whether a message of type `msg_type` can be handled now: false only for a PACKET_OUT
    /// while the datapath's packet-out queue is full (the session then waits for it to drain
    /// rather than answer with an error).
    fn packet_out_room(&self, msg_type: u8) -> bool {
        msg_type != openflow::msg_type::PACKET_OUT
            || self
                .injector
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_none_or(Injector::has_room)
    }

    /// Who to tell when a flow-mod finished on a thread of its own (a bulk flow-mod) has
    /// changes to publish and FLOW_REMOVED to send: the pump's wake-up.
    pub fn set_pump_wake(&self, wake: Arc<tokio::sync::Notify>) {
        *self.pump_wake.lock().unwrap_or_else(|e| e.into_inner()) = Some(wake);
    }

    /// Connects packet-outs to a started datapath.
    pub fn attach(&self, injector: Injector) {
        *self.injector.lock().unwrap_or_else(|e| e.into_inner()) = Some(injector);
    }

    /// The settings.
    pub fn config(&self) -> &OfBridgeConfig {
        &self.cfg
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the control side of the pipeline (e.g. for tools); marks it changed.
    pub fn with_control<R>(&self, f: impl FnOnce(&mut Control) -> R) -> R {
        let mut st = self.lock();
        st.dirty = true;
        f(&mut st.control)
    }

    /// Publishes pending changes now.
    pub fn publish(&self) {
        self.lock().publish();
    }

    /// Whether any flow has a timeout (the pump must then tick every 100 ms or so).
    pub fn has_timed_flows(&self) -> bool {
        self.lock().control.has_timed_flows()
    }

    /// The fail mode now.
    pub fn fail_mode(&self) -> FailMode {
        if self.standalone.load(Relaxed) {
            FailMode::Standalone
        } else {
            FailMode::Secure
        }
    }

    /// Changes the fail mode while running: to secure, the fail-open flow goes; to
    /// standalone, it is installed unless `controller_connected` (a controller's connection
    /// then removes it when it takes charge, as at start).
    pub fn set_fail_mode(&self, mode: FailMode, controller_connected: bool) {
        self.standalone.store(mode == FailMode::Standalone, Relaxed);
        let mut st = self.lock();
        match mode {
            FailMode::Secure => st.remove_fail_open(),
            FailMode::Standalone if !controller_connected => {
                st.install_fail_open();
                st.publish();
            }
            FailMode::Standalone => {}
        }
    }

    /// Whether the standalone fail-open flow is installed now.
    pub fn fail_open_active(&self) -> bool {
        self.lock().fail_open
    }
}

impl State {
    fn publish(&mut self) {
        if self.dirty {
            self.control.publish();
            self.dirty = false;
        }
    }

    fn install_fail_open(&mut self) {
        if self.fail_open {
            return;
        }
        let strict = pipeline::FlowFilter {
            matcher: Match::ANY,
            strict_priority: Some(0),
            ..pipeline::FlowFilter::ALL
        };
        let existing = self.control.flows(0, &strict);
        if existing.iter().any(|f| f.cookie == FAIL_OPEN_COOKIE) {
            // Installed before the datapath started (`preinstall_fail_open`): ours.
            self.fail_open = true;
            return;
        }
        if !existing.is_empty() {
            tracing::info!(
                "standalone: table 0 has its own priority-0 catch-all; no fail-open flow"
            );
            return;
        }
        match self.control.flow_mod(&fail_open_flow(FlowModCommand::Add)) {
            Ok(()) => {
                self.fail_open = true;
                self.dirty = true;
            }
            Err(e) => tracing::warn!("standalone: cannot install the fail-open flow: {e}"),
        }
    }

    fn remove_fail_open(&mut self) {
        if !self.fail_open {
            return;
        }
        self.fail_open = false;
        if let Err(e) = self
            .control
            .flow_mod(&fail_open_flow(FlowModCommand::DeleteStrict))
        {
            tracing::warn!("cannot remove the fail-open flow: {e}");
        }
        // Its removal is ours, not a controller's business: no FLOW_REMOVED.
        self.dirty = true;
        self.publish();
    }
}

impl Bridge for OfBridge {
    fn datapath_id(&self) -> u64 {
        self.cfg.datapath_id
    }

    fn handle(&self, conn: ConnId, role: Role, msg: &[u8], replies: &mut Vec<u8>) {
        if let Some(rest) = handle::handle(self, conn, role, msg, replies) {
            ReplyStream::collect(rest, replies);
        }
    }

    fn handle_streamed(
        &self,
        conn: ConnId,
        role: Role,
        msg: &[u8],
        replies: &mut Vec<u8>,
    ) -> Option<ReplyStream> {
        handle::handle(self, conn, role, msg, replies).map(ReplyStream::new)
    }

    fn can_take(&self, msg_type: u8) -> bool {
        self.packet_out_room(msg_type)
    }

    fn on_connectivity(&self, event: Connectivity) {
        if self.fail_mode() != FailMode::Standalone {
            return;
        }
        let mut st = self.lock();
        match event {
            Connectivity::Connected => st.remove_fail_open(),
            Connectivity::Lost => {
                tracing::info!(bridge = %self.cfg.name, "no controller: standalone L2 learning");
                st.install_fail_open();
                st.publish();
            }
        }
    }

    fn on_connect(&self, conn: ConnId) {
        let _ = conn;
        // Hand the tables over before the controller's first request is handled.
        if self.fail_mode() == FailMode::Standalone {
            self.lock().remove_fail_open();
        }
    }

    fn on_disconnect(&self, conn: ConnId) {
        let mut st = self.lock();
        st.async_cfg.remove(&conn);
        st.buckets.remove(&conn);
        st.parts.forget(conn);
        let filtered = !st.async_cfg.is_empty();
        self.filtered.store(filtered, Relaxed);
    }
}

/// A datapath id from a bridge name: a locally administered MAC derived from the name
/// (stable across restarts), in the low 48 bits.
pub fn datapath_id_from_name(name: &str) -> u64 {
    let mac = mac_from_name(name);
    mac.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b))
}

/// A locally administered unicast MAC derived from `name` (FNV-1a), stable across restarts.
pub fn mac_from_name(name: &str) -> [u8; 6] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let b = h.to_be_bytes();
    [(b[2] & 0xfe) | 0x02, b[3], b[4], b[5], b[6], b[7]]
}

/// The same bridge seen through a second agent (the management socket): requests are
/// handled alike, but its connections do not count as controllers for the fail mode, and
/// their ids are kept apart from the main agent's (bit 63 set).
pub struct Secondary(pub Arc<OfBridge>);

/// Marks a secondary agent's connection ids.
pub(crate) const SECONDARY_BIT: u64 = 1 << 63;

impl Bridge for Secondary {
    fn datapath_id(&self) -> u64 {
        self.0.cfg.datapath_id
    }

    fn handle(&self, conn: ConnId, role: Role, msg: &[u8], replies: &mut Vec<u8>) {
        self.0
            .handle(ConnId(conn.0 | SECONDARY_BIT), role, msg, replies);
    }

    fn handle_streamed(
        &self,
        conn: ConnId,
        role: Role,
        msg: &[u8],
        replies: &mut Vec<u8>,
    ) -> Option<ReplyStream> {
        self.0
            .handle_streamed(ConnId(conn.0 | SECONDARY_BIT), role, msg, replies)
    }

    fn can_take(&self, msg_type: u8) -> bool {
        self.0.packet_out_room(msg_type)
    }

    fn on_connectivity(&self, event: Connectivity) {
        let _ = event;
    }

    fn on_disconnect(&self, conn: ConnId) {
        self.0.on_disconnect(ConnId(conn.0 | SECONDARY_BIT));
    }
}

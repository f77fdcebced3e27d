//! One scrape's reading of a bridge: the same sources the management socket's dumps read
//! (`dump-ports` and `dump-drops`: [`agent::ofproto::OfBridge::port_counters`]; `dump-pmd`:
//! [`datapath::Running::threads`]; `dump-tables`: [`pipeline::Control::table_stats`]) and the
//! controllers' agent's connections. Nothing here touches the fast path: the poll threads'
//! counters are plain per-thread values any thread may read.

use std::sync::{Arc, Weak};

use agent::ofproto::OfBridge;
use agent::Agent;
use datapath::{Snapshot, ThreadStats};
use pipeline::TableStatsView;

/// What the metrics server reads of one running bridge. It holds the datapath and the agent
/// weakly, so that it never keeps either alive at exit.
#[derive(Clone)]
pub struct BridgeSource {
    /// The bridge's name (the `bridge` label).
    pub name: String,
    /// The OpenFlow bridge: ports, their counters, the switch's drops, tables.
    pub bridge: Arc<OfBridge>,
    /// The poll threads' counters.
    pub datapath: Weak<datapath::Running>,
    /// The controllers' connections.
    pub agent: Weak<Agent>,
}

impl BridgeSource {
    /// What a scrape reads of a bridge started by `run::start_bridge`.
    pub(crate) fn of(r: &crate::run::Running) -> BridgeSource {
        BridgeSource {
            name: r.0.name.clone(),
            bridge: r.0.bridge.clone(),
            datapath: Arc::downgrade(&r.1),
            agent: Arc::downgrade(r.2.agent()),
        }
    }
}

/// The bridges a metrics server reads, shared with whoever starts and stops them (`hayate
/// run --ovsdb` does as the database changes).
pub type Sources = Arc<std::sync::Mutex<Vec<BridgeSource>>>;

/// One port as a scrape saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSample {
    /// OpenFlow port number.
    pub ofport: u32,
    /// Port name.
    pub name: String,
    /// Whether its link is up.
    pub link_up: bool,
    /// Its counters as `dump-ports` shows them (the switch's receive drops folded in:
    /// [`agent::ofproto::merged`]).
    pub stats: port::PortStats,
    /// The switch's drops of its packets by reason (`dump-drops`; the
    /// [`datapath::IN_PORT_DROPS`] fields).
    pub drops: Snapshot,
    /// Its egress queues with their counters (`ovs-ofctl queue-stats`).
    pub queues: Vec<datapath::EgressQueue>,
    /// Its drops for a queue it lacks (`dump-drops` `drop_queue_unknown`).
    pub queue_unknown: u64,
    /// Its tunnel drops by reason (`dump-drops`): an underlay port's termination drops, a
    /// tunnel port's send-side drops; empty for other ports.
    pub tunnel_drops: Vec<(&'static str, u64)>,
}

/// One rx queue as a scrape saw it (`rxq-show`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxqSample {
    /// The poll thread that reads it.
    pub thread: usize,
    /// Its port's OpenFlow number.
    pub ofport: u32,
    /// Its port's name.
    pub port: String,
    /// Its number among the port's queues.
    pub queue: usize,
    /// Packets received from it.
    pub packets: u64,
    /// Busy cycles its batches took.
    pub busy_cycles: u64,
}

/// One controller connection as a scrape saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSample {
    /// The target it came from or through (`tcp:…`, `ptcp:…`).
    pub target: String,
    /// The peer's address.
    pub peer: String,
    /// Its role (`equal`, `master`, `slave`).
    pub role: &'static str,
    /// Messages received.
    pub rx_messages: u64,
    /// Asynchronous messages (packet-ins among them) queued for it.
    pub async_queued: u64,
    /// Packet-ins not sent because its rate limit was spent.
    pub rate_limited: u64,
    /// Asynchronous messages dropped on its full queue.
    pub queue_full: u64,
    /// Inactivity probes sent.
    pub probes: u64,
}

/// A packet pool as a scrape saw it: the bridge's, and its super-packet sibling once mapped
/// (every bridge of a process shares them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSample {
    /// `packet` or `super` (the `pool` label).
    pub pool: &'static str,
    /// Its frames.
    pub frames: u32,
    /// Frames in its shared stack: in no queue's cache and in no packet.
    pub shared_free: usize,
    /// Times a queue needed frames and found none ([`packet::Pool::exhaustions`]).
    pub exhaustions: u64,
}

impl PoolSample {
    fn of(pool: &'static str, p: &packet::Pool) -> PoolSample {
        PoolSample {
            pool,
            frames: p.frames(),
            shared_free: p.shared_free(),
            exhaustions: p.exhaustions(),
        }
    }
}

/// Everything one scrape reads of one bridge.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BridgeSample {
    /// The bridge's name.
    pub bridge: String,
    /// Whether the bridge forwards on its own because no controller is connected (standalone
    /// fail mode).
    pub fail_open: bool,
    /// Its ports, by number.
    pub ports: Vec<PortSample>,
    /// Its poll threads (empty once the datapath stopped).
    pub threads: Vec<ThreadStats>,
    /// Megaflows alive per thread (by thread index), as of each one's last maintenance pass.
    pub megaflows: Vec<u64>,
    /// Its rx queues.
    pub rx_queues: Vec<RxqSample>,
    /// Tables that hold flows or were ever looked up.
    pub tables: Vec<TableStatsView>,
    /// Its controller connections (not the management socket's).
    pub controllers: Vec<ControllerSample>,
    /// Its packet pools (empty once the datapath stopped).
    pub pools: Vec<PoolSample>,
}

impl BridgeSource {
    /// Reads the bridge now.
    pub fn read(&self) -> BridgeSample {
        let ports: Vec<PortSample> = self
            .bridge
            .port_counters()
            .into_iter()
            .map(|(p, own, drops)| {
                let (queues, queue_unknown) = self.bridge.port_queues(p.no);
                PortSample {
                    tunnel_drops: self.bridge.tunnel_drops(p.no),
                    ofport: p.no,
                    link_up: p.port.link_up(),
                    name: p.name,
                    stats: agent::ofproto::merged(own, &drops),
                    drops,
                    queues,
                    queue_unknown,
                }
            })
            .collect();
        let dp = self.datapath.upgrade();
        let threads = dp.as_ref().map(|d| d.threads()).unwrap_or_default();
        let megaflows = dp.as_ref().map(|d| d.megaflow_counts()).unwrap_or_default();
        let rx_queues = dp
            .as_ref()
            .map(|d| d.rx_queues())
            .unwrap_or_default()
            .into_iter()
            .map(|q| RxqSample {
                thread: q.thread,
                ofport: q.ofport,
                port: ports
                    .iter()
                    .find(|p: &&PortSample| p.ofport == q.ofport)
                    .map_or_else(String::new, |p| p.name.clone()),
                queue: q.queue,
                packets: q.stats.rx_packets,
                busy_cycles: q.stats.busy_cycles,
            })
            .collect();
        let tables = self
            .bridge
            .with_control(|c| c.table_stats())
            .into_iter()
            .filter(|t| t.active > 0 || t.lookups > 0)
            .collect();
        let controllers = self
            .agent
            .upgrade()
            .map(|a| a.connections())
            .unwrap_or_default()
            .into_iter()
            .map(|c| ControllerSample {
                target: c.target.to_string(),
                peer: c.peer,
                role: role_name(c.role),
                rx_messages: c.rx_messages,
                async_queued: c.async_queued,
                rate_limited: c.rate_limited,
                queue_full: c.queue_full,
                probes: c.probes,
            })
            .collect();
        let pools = dp
            .as_ref()
            .map(|d| {
                let p = d.pool();
                std::iter::once(PoolSample::of("packet", p))
                    .chain(p.gso_mapped().map(|g| PoolSample::of("super", &g)))
                    .collect()
            })
            .unwrap_or_default();
        BridgeSample {
            bridge: self.name.clone(),
            fail_open: self.bridge.fail_open_active(),
            ports,
            threads,
            megaflows,
            rx_queues,
            tables,
            controllers,
            pools,
        }
    }
}

/// The `role` label of a controller connection.
fn role_name(r: agent::Role) -> &'static str {
    match r {
        agent::Role::Equal => "equal",
        agent::Role::Master => "master",
        agent::Role::Slave => "slave",
    }
}

//! The pump: what the switch says on its own — packet-ins from the datapath's queue,
//! FLOW_REMOVED for entries that asked for it (timeouts from `Control::tick`, deletes from
//! `Control::take_removed`), PORT_STATUS after a port changed — sent to the controllers
//! whose role and asynchronous configuration (SET_ASYNC) want them.
//!
//! FLOW_REMOVED goes out as fast as the controllers take it: a pump sends no more than the
//! fullest queue among the connections that want them has room for (and
//! [`REMOVED_PER_PUMP`] at most), the rest waits on the control side as entry pointers
//! ([`PumpReport::backlog`] keeps the pump busy meanwhile). So a delete of millions of
//! flows that asked for it neither builds millions of messages at once nor drops any on a
//! full queue; a controller that stops reading holds them up until its session ends (a
//! write stalled for the probe interval).
//!
//! While every controller has the default configuration (the usual case), a message goes
//! through [`crate::AsyncSender::send`] once: the agent picks controllers by role and applies
//! its packet-in rate limit. Once one controller set its own masks, each message is checked
//! per connection and sent with `send_to`, packet-ins through this bridge's own token bucket
//! per connection (same limits).
//!
//! Call [`OfBridge::pump`] often (every millisecond while busy; at least every
//! [`super::LINK_POLL`] while [`OfBridge::watches_links`]): it also runs flow timeouts and
//! publishes pending changes every [`TICK`], and looks at the ports' links every
//! [`super::LINK_POLL`] (a change: PORT_STATUS MODIFY).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use openflow::{AsyncConfig, FlowRemoved, FlowRemovedReason, Message, PortReason, NO_BUFFER};
use packet::Field;
use pipeline::dpaction::now_ms;
use pipeline::model::Match;
use pipeline::PacketInReason;
use tokio::time::Instant;

use super::handle::reply;
use super::OfBridge;
use crate::bridge::AsyncKind;
use crate::rate_limit::TokenBucket;
use crate::role::Role;
use crate::{Agent, ConnId, ConnInfo};

/// How many FLOW_REMOVED messages every connection that wants some can take now (`conns`:
/// each agent's connections with the mark of its ids); unbounded when none wants any.
fn removed_room(st: &super::State, conns: &[(u64, Vec<ConnInfo>)]) -> usize {
    let mut room = usize::MAX;
    for (mark, list) in conns {
        for c in list {
            let cfg = st
                .async_cfg
                .get(&ConnId(c.id.0 | mark))
                .copied()
                .unwrap_or(AsyncConfig::DEFAULT);
            let wants_some = (0..4).any(|bit| wants(&cfg, c.role, AsyncKind::FlowRemoved, bit));
            if wants_some {
                room = room.min(c.queue_room);
            }
        }
    }
    room
}

/// How often flow timeouts run and pending changes are published by the pump.
pub const TICK: Duration = Duration::from_millis(100);

/// Most packet-ins taken from the datapath per pump.
const PACKET_INS_PER_PUMP: usize = 1024;

/// Most FLOW_REMOVED messages made per pump.
pub const REMOVED_PER_PUMP: usize = 1024;

/// What one pump sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PumpReport {
    /// Packet-ins taken from the datapath (sent or dropped by rate limits).
    pub packet_ins: usize,
    /// FLOW_REMOVED messages.
    pub flow_removed: usize,
    /// PORT_STATUS messages.
    pub port_status: usize,
    /// FLOW_REMOVED messages still waiting for room in the controllers' queues.
    pub backlog: usize,
}

impl PumpReport {
    /// Whether nothing happened and nothing waits (the pump may sleep long).
    pub fn is_empty(&self) -> bool {
        *self == PumpReport::default()
    }
}

fn packet_in_bit(r: PacketInReason) -> u32 {
    match r {
        PacketInReason::NoMatch => 0,
        PacketInReason::Action => 1,
        PacketInReason::InvalidTtl => 2,
    }
}

fn removed_bit(r: FlowRemovedReason) -> u32 {
    match r {
        FlowRemovedReason::IdleTimeout => 0,
        FlowRemovedReason::HardTimeout => 1,
        FlowRemovedReason::Delete => 2,
        FlowRemovedReason::GroupDelete => 3,
    }
}

fn port_bit(r: PortReason) -> u32 {
    match r {
        PortReason::Add => 0,
        PortReason::Delete => 1,
        PortReason::Modify => 2,
    }
}

/// Whether `cfg` lets a controller in `role` receive `kind` for reason bit `bit`.
pub(super) fn wants(cfg: &AsyncConfig, role: Role, kind: AsyncKind, bit: u32) -> bool {
    let i = usize::from(role == Role::Slave);
    let mask = match kind {
        AsyncKind::PacketIn => cfg.packet_in_mask[i],
        AsyncKind::FlowRemoved => cfg.flow_removed_mask[i],
        AsyncKind::PortStatus => cfg.port_status_mask[i],
    };
    mask & (1 << bit) != 0
}

impl OfBridge {
    /// Sends pending asynchronous messages through `agents` — the controllers' agent first,
    /// then any agent serving this bridge through [`super::Secondary`] (the management
    /// socket) — taking packet-ins from `datapath` when given; every [`TICK`] also expires
    /// flows and publishes pending changes. Never blocks.
    pub fn pump(&self, agents: &[&Agent], datapath: Option<&datapath::Running>) -> PumpReport {
        let mut rep = PumpReport::default();
        let mut buf = Vec::new();
        if let Some(dp) = datapath {
            let miss_send_len = self.miss_send_len.load(Relaxed);
            rep.packet_ins = dp.packet_ins(PACKET_INS_PER_PUMP, |pi| {
                let data = pi.packet.data();
                let keep = if pi.reason == PacketInReason::NoMatch && miss_send_len != u16::MAX {
                    data.len().min(usize::from(miss_send_len))
                } else {
                    data.len()
                };
                let mut matcher = Match::ANY;
                matcher.set_exact(Field::InPort, u128::from(pi.in_port));
                buf.clear();
                reply(
                    &mut buf,
                    0,
                    &Message::PacketIn(openflow::PacketIn {
                        buffer_id: NO_BUFFER,
                        total_len: pi.total_len,
                        reason: pi.reason,
                        table_id: pi.table_id,
                        cookie: pi.cookie,
                        matcher,
                        data: data[..keep].to_vec(),
                    }),
                );
                self.deliver(agents, AsyncKind::PacketIn, packet_in_bit(pi.reason), &buf);
            });
        }
        let conns: Vec<(u64, Vec<ConnInfo>)> = agents
            .iter()
            .enumerate()
            .map(|(i, a)| {
                (
                    if i == 0 { 0 } else { super::SECONDARY_BIT },
                    a.connections(),
                )
            })
            .collect();
        let (removed, statuses) = {
            let mut st = self.lock();
            if st.last_tick.elapsed() >= TICK {
                st.last_tick = std::time::Instant::now();
                let expired = st.control.tick(now_ms());
                st.removed
                    .extend(expired.into_iter().filter(|r| r.flow.flags.send_flow_rem));
                st.publish();
            }
            if st.last_links.elapsed() >= super::LINK_POLL {
                st.last_links = std::time::Instant::now();
                if st.poll_links() {
                    self.watch_links.store(true, Relaxed);
                }
            }
            let budget = removed_room(&st, &conns).min(REMOVED_PER_PUMP);
            let first = budget.min(st.removed.len());
            let mut removed: Vec<_> = st.removed.drain(..first).collect();
            removed.extend(st.control.take_removed_at_most(budget - first));
            rep.backlog = st.removed.len() + st.control.removed_waiting();
            (removed, std::mem::take(&mut st.port_status))
        };
        for r in removed {
            let msg = FlowRemoved::from(&r);
            let bit = removed_bit(msg.reason);
            buf.clear();
            reply(&mut buf, 0, &Message::FlowRemoved(msg));
            self.deliver(agents, AsyncKind::FlowRemoved, bit, &buf);
            rep.flow_removed += 1;
        }
        for s in statuses {
            let bit = port_bit(s.reason);
            buf.clear();
            reply(&mut buf, 0, &Message::PortStatus(s));
            self.deliver(agents, AsyncKind::PortStatus, bit, &buf);
            rep.port_status += 1;
        }
        rep
    }

    /// Sends `msg` to the controllers that want it (see the module docs).
    fn deliver(&self, agents: &[&Agent], kind: AsyncKind, bit: u32, msg: &[u8]) {
        for (i, agent) in agents.iter().enumerate() {
            // Connections of agents after the first are known here under their marked ids.
            let mark = if i == 0 { 0 } else { super::SECONDARY_BIT };
            self.deliver_one(agent, mark, kind, bit, msg);
        }
    }

    fn deliver_one(&self, agent: &Agent, mark: u64, kind: AsyncKind, bit: u32, msg: &[u8]) {
        let sender = agent.sender();
        let default_ok = wants(&AsyncConfig::DEFAULT, Role::Equal, kind, bit);
        if !self.filtered.load(Relaxed) && default_ok {
            sender.send(kind, msg);
            return;
        }
        let conns = agent.connections();
        let now = Instant::now();
        let mut st = self.lock();
        for c in conns {
            let id = ConnId(c.id.0 | mark);
            let cfg = st
                .async_cfg
                .get(&id)
                .copied()
                .unwrap_or(AsyncConfig::DEFAULT);
            if !wants(&cfg, c.role, kind, bit) {
                continue;
            }
            if kind == AsyncKind::PacketIn {
                let limit = self.cfg.packet_in_limit;
                let bucket = st
                    .buckets
                    .entry(id)
                    .or_insert_with(|| TokenBucket::new(limit, now));
                if !bucket.try_take(now) {
                    continue;
                }
            }
            sender.send_to(c.id, msg);
        }
    }
}

//! A port's rates as OpenFlow and `hayate ctl` see them: its egress queues (queue
//! statistics, `OFPT_QUEUE_GET_CONFIG`, the queue a flow-mod's output names) and the
//! commands that change a running port's ingress policing and queues (`set-policing`,
//! `set-queue`: Hayate experimenter messages from the management socket only, as
//! [`super::port_cmd`]). The datapath enforces them (`datapath::egress`,
//! `datapath::police`); it is reached through [`PortRates`].
//!
//! | request | body (after the `text` line of [`super::port_cmd::look_request`]) |
//! |---|---|
//! | [`exp_type::SET_POLICING`](super::port_cmd::exp_type::SET_POLICING) | the port, then `rate=KBPS,burst=KBIT,kpkts_rate=KPPS,kpkts_burst=KPKTS` (or the `ingress_policing_` names) or `off` |
//! | [`exp_type::SET_QUEUE`](super::port_cmd::exp_type::SET_QUEUE) | the port, the queue id, then `min_rate=KBPS,max_rate=KBPS,burst=KBIT` or `off`; or the port, `port`, then `max_rate=KBPS,burst=KBIT` or `off` for the port's own cap |
//!
//! Queue rates go on the wire in tenths of a percent of the port's speed: of its
//! `qos_max_rate` when it has one, else of the speed ports report (10 Gbit/s).

use std::sync::{Arc, Weak};

use datapath::EgressQueue;
use openflow::messages::queue::{PacketQueue, QueueProp};
use openflow::multipart::QueueStats;
use openflow::Experimenter;
use pipeline::model::{Action, FlowMod, Instruction};
use port::{Egress, Policing, QueueRates};

use super::handle::reply;
use super::port_cmd::{done, exp_error, exp_type, parse_look_request, refusal};
use super::{OfBridge, SECONDARY_BIT};
use crate::ConnId;

/// The speed ports report (`curr_speed`, kbit/s): the base of queue rates without a port cap.
const PORT_SPEED_KBPS: u64 = 10_000_000;

/// Where the bridge reads and changes the rates the datapath enforces. Attached with
/// [`OfBridge::attach_rates`]; `datapath::Running` is one.
pub trait PortRates: Send + Sync {
    /// Port `ofport`'s ingress policing.
    fn policing(&self, ofport: u32) -> Policing;
    /// Polices port `ofport`'s ingress from now on.
    fn set_policing(&self, ofport: u32, p: Policing);
    /// Port `ofport`'s egress queues and cap.
    fn egress(&self, ofport: u32) -> Egress;
    /// Gives port `ofport` these egress queues from now on.
    fn set_egress(&self, ofport: u32, e: Egress);
    /// Port `ofport`'s queues with their counters, and its drops for a queue it lacks.
    fn egress_queues(&self, ofport: u32) -> (Vec<EgressQueue>, u64);
    /// Port `ofport`'s queue 0 when it has no row of its own but carries the port's unqueued
    /// packets (shown by `dump-queues`, not in OpenFlow's queue lists, as Open vSwitch lists
    /// only the queues configured).
    fn egress_default_queue(&self, _ofport: u32) -> Option<EgressQueue> {
        None
    }
}

impl PortRates for datapath::Running {
    fn policing(&self, ofport: u32) -> Policing {
        datapath::Running::policing(self, ofport)
    }
    fn set_policing(&self, ofport: u32, p: Policing) {
        datapath::Running::set_policing(self, ofport, p)
    }
    fn egress(&self, ofport: u32) -> Egress {
        datapath::Running::egress(self, ofport)
    }
    fn set_egress(&self, ofport: u32, e: Egress) {
        datapath::Running::set_egress(self, ofport, e)
    }
    fn egress_queues(&self, ofport: u32) -> (Vec<EgressQueue>, u64) {
        datapath::Running::egress_queues(self, ofport)
    }
    fn egress_default_queue(&self, ofport: u32) -> Option<EgressQueue> {
        datapath::Running::egress_default_queue(self, ofport)
    }
}

impl OfBridge {
    /// Lets the bridge read and change the datapath's rates (weak, as the counters).
    pub fn attach_rates(&self, rates: Weak<dyn PortRates>) {
        *self
            .counters
            .rates
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(rates);
    }

    /// Port `ofport`'s ingress policing and egress queues as text, each `None` when it has
    /// none (`show`).
    pub(super) fn rates_text(&self, ofport: u32) -> (Option<String>, Option<String>) {
        let Some(r) = self.rates() else {
            return (None, None);
        };
        let (p, e) = (r.policing(ofport), r.egress(ofport));
        (
            p.is_on().then(|| p.to_string()),
            e.is_on().then(|| e.to_string()),
        )
    }

    pub(super) fn rates(&self) -> Option<Arc<dyn PortRates>> {
        self.counters
            .rates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(Weak::upgrade)
    }

    /// Port `ofport`'s egress queues with their counters, and its drops for a queue it lacks
    /// (none without a datapath).
    pub fn port_queues(&self, ofport: u32) -> (Vec<EgressQueue>, u64) {
        self.rates()
            .map(|r| r.egress_queues(ofport))
            .unwrap_or_default()
    }

    /// The queue statistics of `port_no` (ANY: every port) and `queue_id` (`OFPQ_ALL`: every
    /// queue). `None`: no such port; `Some(empty)` for a queue id asked by number: no such
    /// queue.
    pub(super) fn queue_stats(&self, port_no: u32, queue_id: u32) -> Option<Vec<QueueStats>> {
        let ports = self.asked_ports(port_no)?;
        let mut out = Vec::new();
        for no in ports {
            for q in self.port_queues(no).0 {
                if queue_id == openflow::multipart::QUEUE_ALL || q.queue == queue_id {
                    out.push(QueueStats {
                        port_no: no,
                        queue_id: q.queue,
                        tx_bytes: q.counts.tx_bytes,
                        tx_packets: q.counts.tx_packets,
                        tx_errors: q.counts.dropped,
                        // Unknown (Open vSwitch prints `duration=?`).
                        duration_sec: u32::MAX,
                        duration_nsec: u32::MAX,
                    });
                }
            }
        }
        Some(out)
    }

    /// The queues of `port_no` (ANY: every port) with their rate properties; `None`: no such
    /// port.
    pub(super) fn queue_config(&self, port_no: u32) -> Option<Vec<PacketQueue>> {
        let ports = self.asked_ports(port_no)?;
        let rates = self.rates();
        let mut out = Vec::new();
        for no in ports {
            let Some(e) = rates.as_ref().map(|r| r.egress(no)) else {
                continue;
            };
            let base = match e.max_kbps {
                0 => PORT_SPEED_KBPS,
                m => u64::from(m),
            };
            let share = |kbps: u32| -> u16 {
                if kbps == 0 {
                    0xffff
                } else {
                    (u64::from(kbps) * 1000 / base).clamp(1, 1000) as u16
                }
            };
            for (&id, q) in &e.queues {
                out.push(PacketQueue {
                    queue_id: id,
                    port: no,
                    properties: vec![
                        QueueProp::MinRate(share(q.min_kbps)),
                        QueueProp::MaxRate(share(q.max_kbps)),
                    ],
                });
            }
        }
        Some(out)
    }

    fn asked_ports(&self, port_no: u32) -> Option<Vec<u32>> {
        let all: Vec<u32> = self.ports().iter().map(|p| p.no).collect();
        if port_no == pipeline::model::ports::ANY {
            Some(all)
        } else {
            all.contains(&port_no).then(|| vec![port_no])
        }
    }

    /// The queue of a known port with queues that a flow-mod's output names and the port
    /// lacks, as `(port, queue)` (OFPBAC_BAD_QUEUE). A port without queues ignores
    /// `set_queue`, and queue 0 always exists; ports the bridge does not have yet are not
    /// judged (their packets are, when they come: `datapath::egress`).
    pub(super) fn missing_queue(&self, fm: &FlowMod) -> Option<(u32, u32)> {
        let queued = fm.instructions.iter().any(|i| match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a
                .iter()
                .any(|a| matches!(a, Action::SetQueue(q) if *q != 0)),
            _ => false,
        });
        if !queued {
            return None;
        }
        let rates = self.rates()?;
        let lacks = |port: u32, queue: u32| {
            if queue == 0 {
                return false;
            }
            let e = rates.egress(port);
            e.is_on() && !e.queues.contains_key(&queue)
        };
        for i in &fm.instructions {
            let (list, set) = match i {
                Instruction::ApplyActions(a) => (a, false),
                Instruction::WriteActions(a) => (a, true),
                _ => continue,
            };
            // In an action set, set_queue applies to the output whatever their order.
            let mut queue = if set {
                list.iter().rev().find_map(|a| match a {
                    Action::SetQueue(q) => Some(*q),
                    _ => None,
                })
            } else {
                None
            };
            for a in list {
                match *a {
                    Action::SetQueue(q) if !set => queue = Some(q),
                    Action::Output { port, .. } => {
                        if let Some(q) = queue.filter(|&q| lacks(port, q)) {
                            return Some((port, q));
                        }
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

/// A `set-policing` or `set-queue` request: done for the management socket, refused for
/// controllers.
pub(super) fn handle(b: &OfBridge, conn: ConnId, xid: u32, e: &Experimenter, out: &mut Vec<u8>) {
    if conn.0 & SECONDARY_BIT == 0 {
        let text = "port rates are set through the bridge's management socket (hayate ctl \
                    BRIDGE set-policing / set-queue), not by controllers";
        reply(out, xid, &refusal(exp_error::NOT_PERMITTED, text));
        return;
    }
    let result = parse_look_request(e).and_then(|(_, args)| {
        let rates = b
            .rates()
            .ok_or_else(|| format!("bridge {} has no running datapath", b.cfg.name))?;
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        let (no, name) = match words.first() {
            Some(w) => {
                let st = b.lock();
                let i = super::live_ports::find(&st, w).ok_or_else(|| {
                    format!(
                        "bridge {} has no port {w}; give a port's name or number",
                        b.cfg.name
                    )
                })?;
                (st.ports[i].port.no, st.ports[i].port.name.clone())
            }
            None => return Err("give the port first, by name or OpenFlow number".into()),
        };
        if e.exp_type == exp_type::SET_POLICING {
            set_policing(&*rates, no, &name, &words[1..])
        } else {
            set_queue(&*rates, no, &name, &words[1..])
        }
    });
    match result {
        Ok(text) => {
            tracing::info!(bridge = %b.cfg.name, "{text}");
            reply(out, xid, &done(&text));
        }
        Err(text) => reply(out, xid, &refusal(exp_error::BAD_REQUEST, &text)),
    }
}

/// `set-policing PORT OPTIONS|off`.
fn set_policing(r: &dyn PortRates, no: u32, name: &str, words: &[&str]) -> Result<String, String> {
    let p = match words {
        ["off"] => Policing::default(),
        [opts] => {
            // The short names of `hayate ctl` beside the spec's.
            let long: Vec<String> = opts
                .split(',')
                .filter(|o| !o.is_empty())
                .map(|o| match o.strip_prefix("ingress_policing_") {
                    Some(_) => o.to_string(),
                    None => format!("ingress_policing_{o}"),
                })
                .collect();
            Policing::parse(&long.join(","))?
        }
        _ => {
            return Err("set-policing PORT rate=KBPS[,burst=KBIT][,kpkts_rate=KPPS]\
                        [,kpkts_burst=KPKTS] | off"
                .into())
        }
    };
    r.set_policing(no, p);
    Ok(format!("port {name} (OpenFlow port {no}): {p}"))
}

/// `set-queue PORT QUEUE OPTIONS|off`, or `set-queue PORT port OPTIONS|off`.
fn set_queue(r: &dyn PortRates, no: u32, name: &str, words: &[&str]) -> Result<String, String> {
    let usage = "set-queue PORT QUEUE min_rate=KBPS[,max_rate=KBPS][,burst=KBIT] | off, \
                 or set-queue PORT port [type=linux-htb|egress-policer|trtcm-policer]\
                 [,max_rate=KBPS][,burst=KBIT][,backlog=PKTS] | off";
    let [which, opts] = words else {
        return Err(usage.into());
    };
    let mut e = r.egress(no);
    let what = if *which == "port" {
        if *opts == "off" {
            (e.max_kbps, e.burst_kbit) = (0, 0);
            (e.qos_type, e.backlog) = Default::default();
        } else {
            e.set_port(opts)?;
        }
        "its own options".to_string()
    } else {
        let id = port::egress::queue_id(which)?;
        if *opts == "off" {
            e.queues.remove(&id);
        } else {
            e.queues.insert(id, QueueRates::parse(opts, ',')?);
        }
        format!("queue {id}")
    };
    let e = e.finish()?;
    r.set_egress(no, e.clone());
    let now = if *opts == "off" {
        "off".to_string()
    } else {
        (*opts).to_string()
    };
    Ok(format!(
        "port {name} (OpenFlow port {no}): {what} {now}; {} queue(s){}, {}",
        e.queues.len(),
        match e.max_kbps {
            0 => String::new(),
            m => format!(", port cap {m} kbit/s"),
        },
        e.qos_type.name()
    ))
}

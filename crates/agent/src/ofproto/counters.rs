//! What the datapath counted, as the bridge shows it: each poll thread's counters
//! (`hayate ctl BRIDGE dump-pmd`, Open vSwitch's `dpif-netdev/pmd-stats-show`), and the
//! drops of each port by reason (`hayate ctl BRIDGE dump-drops`), also folded into the
//! port's OpenFlow counters (`dump-ports`) the way Open vSwitch fills them:
//!
//! | port counter | is |
//! |---|---|
//! | `rx_dropped` | the port's own receive drops (ring or socket full, no buffer) + `upcall_shed` (misses the switch had no time to translate) + `drop_policed` (over the port's ingress policing rate, as Open vSwitch counts its policer's drops) |
//! | `rx_errors` | the port's own receive errors (refused offloads, bad descriptors) + `drop_malformed` (truncated or malformed headers) |
//! | `tx_dropped`, `tx_errors` | the port's own (a full ring's drops reach it through `port::TxQueue::dropped`) |
//!
//! Open vSwitch counts in `rx_dropped` what a port could not take for lack of resources
//! (DPDK's `imissed` and `rx_nombuf`, ingress policing) and in `rx_errors` frames that are
//! bad (DPDK's `ierrors`, the kernel's length and frame errors); Hayate sorts its own
//! receive-side drops the same way. Drops the pipeline asked for (no output, a meter, a
//! failed rewrite) are not port errors in Open vSwitch either (its `drop_action_*` and
//! `datapath_drop_meter` are global coverage counters); Hayate shows them per port in
//! `dump-drops` only. `rx_packets` counts every frame the port took from its interface,
//! those then dropped included.
//!
//! Both dumps travel as Hayate experimenter messages ([`super::port_cmd`]), answered with
//! their text, and only the management socket may ask.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use datapath::{Counter, MegaflowRecord, RxQueueStats, Snapshot, ThreadStats, IN_PORT_DROPS};
use openflow::Experimenter;

use super::handle::reply;
use super::port_cmd::{done, exp_error, exp_type, refusal, HAYATE_EXPERIMENTER};
use super::{OfBridge, OfPort, SECONDARY_BIT};
use crate::ConnId;

/// Where the bridge reads the datapath's counters. Attached with
/// [`OfBridge::attach_counters`]; `datapath::Running` is one.
pub trait DatapathCounters: Send + Sync {
    /// Each poll thread's counters, in index order.
    fn threads(&self) -> Vec<ThreadStats>;

    /// Drops by reason of the packets OpenFlow port `ofport` delivered
    /// ([`datapath::IN_PORT_DROPS`]; other fields 0).
    fn port_drops(&self, ofport: u32) -> Snapshot;

    /// Tunnel drops by reason counted on OpenFlow port `ofport`: termination's when it is an
    /// underlay port, the send side's when it is a tunnel port (`datapath::Tunnels::
    /// port_drops`; empty for other ports).
    fn tunnel_drops(&self, ofport: u32) -> Vec<(&'static str, u64)> {
        let _ = ofport;
        Vec::new()
    }

    /// Every rx queue with its thread and counters (`rxq-show`).
    fn rx_queues(&self) -> Vec<RxQueueStats> {
        Vec::new()
    }

    /// Every thread's megaflows, waiting at most `deadline`, and the threads that did not
    /// answer (`dump-megaflows`).
    fn megaflows(&self, deadline: Duration) -> (Vec<MegaflowRecord>, Vec<usize>) {
        let _ = deadline;
        (Vec::new(), Vec::new())
    }

    /// The datapath's captures (`capture`).
    fn taps(&self) -> Option<Arc<datapath::capture::Taps>> {
        None
    }
}

impl DatapathCounters for datapath::Running {
    fn threads(&self) -> Vec<ThreadStats> {
        datapath::Running::threads(self)
    }

    fn port_drops(&self, ofport: u32) -> Snapshot {
        datapath::Running::port_drops(self, ofport)
    }

    fn rx_queues(&self) -> Vec<RxQueueStats> {
        datapath::Running::rx_queues(self)
    }

    fn tunnel_drops(&self, ofport: u32) -> Vec<(&'static str, u64)> {
        self.tunnels().port_drops(ofport)
    }

    fn megaflows(&self, deadline: Duration) -> (Vec<MegaflowRecord>, Vec<usize>) {
        datapath::Running::megaflows(self, deadline)
    }

    fn taps(&self) -> Option<Arc<datapath::capture::Taps>> {
        Some(datapath::Running::taps(self).clone())
    }
}

/// A controller connection as `show` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerState {
    /// The target it came from or through (`tcp:…`, `ptcp:…`).
    pub target: String,
    /// The peer's address.
    pub peer: String,
    /// Its role (`equal`, `master`, `slave`).
    pub role: String,
}

/// Where the bridge reads its controllers' connections (`show`). Attached with
/// [`OfBridge::attach_controllers`]; [`crate::Agent`] is one.
pub trait ControllerView: Send + Sync {
    /// The targets it listens on or connects to.
    fn targets(&self) -> Vec<String>;
    /// The connected controllers.
    fn connected(&self) -> Vec<ControllerState>;
}

impl ControllerView for crate::Agent {
    fn targets(&self) -> Vec<String> {
        self.listening().iter().map(ToString::to_string).collect()
    }

    fn connected(&self) -> Vec<ControllerState> {
        self.connections()
            .into_iter()
            .map(|c| ControllerState {
                target: c.target.to_string(),
                peer: c.peer,
                role: format!("{:?}", c.role).to_lowercase(),
            })
            .collect()
    }
}

/// What the bridge reads its dumps from, attached after it is made: the datapath's counters,
/// the controllers' agent, and the counts `pmd-stats --reset` took as its zero.
#[derive(Default)]
pub struct Sources {
    datapath: Mutex<Option<Weak<dyn DatapathCounters>>>,
    controllers: Mutex<Option<Weak<dyn ControllerView>>>,
    /// Per thread, the counts at the last `pmd-stats --reset` (empty: none yet).
    pmd_zero: Mutex<Vec<Snapshot>>,
    /// Where the datapath's rates are read and changed ([`super::qos`]).
    pub(super) rates: Mutex<Option<Weak<dyn super::qos::PortRates>>>,
    /// Running captures (`capture`).
    pub(super) captures: Mutex<super::capture::Captures>,
}

impl Sources {
    /// The datapath's counters, while it runs.
    pub(super) fn datapath(&self) -> Option<Arc<dyn DatapathCounters>> {
        lock(&self.datapath).as_ref().and_then(Weak::upgrade)
    }

    /// The controllers' agent, while it runs.
    pub(super) fn controllers(&self) -> Option<Arc<dyn ControllerView>> {
        lock(&self.controllers).as_ref().and_then(Weak::upgrade)
    }

    /// Each thread's counters since the last reset (all of them without one); with `reset`,
    /// the counts now become the new zero.
    pub(super) fn threads_since_reset(
        &self,
        dp: &dyn DatapathCounters,
        reset: bool,
    ) -> Vec<ThreadStats> {
        let now = dp.threads();
        let mut zero = lock(&self.pmd_zero);
        let out = now
            .iter()
            .map(|t| {
                let mut d = t.stats;
                if let Some(z) = zero.get(t.index) {
                    for c in Counter::ALL {
                        d[c] = d[c].wrapping_sub(z[c]);
                    }
                }
                ThreadStats { stats: d, ..*t }
            })
            .collect();
        if reset {
            *zero = now.iter().map(|t| t.stats).collect();
        }
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A port's counters with the switch's drops of its packets folded in (module docs).
pub fn merged(port: port::PortStats, drops: &Snapshot) -> port::PortStats {
    port::PortStats {
        rx_dropped: port.rx_dropped + drops.upcall_shed + drops.drop_policed,
        rx_errors: port.rx_errors + drops.drop_malformed,
        ..port
    }
}

/// The `dump-pmd` text: per thread `pmd thread N core C:` (C `-` when not pinned), then
/// `  NAME: VALUE` for every [`Counter`], and last `total:` with the sums. Other tools parse
/// it: keep it stable.
pub fn format_pmd(threads: &[ThreadStats]) -> String {
    let mut s = String::new();
    let lines = |s: &mut String, snap: &Snapshot| {
        for c in Counter::ALL {
            let _ = writeln!(s, "  {}: {}", c.name(), snap[c]);
        }
    };
    for t in threads {
        let core = t.core.map_or_else(|| "-".to_string(), |c| c.to_string());
        let _ = writeln!(s, "pmd thread {} core {core}:", t.index);
        lines(&mut s, &t.stats);
    }
    let total: Snapshot = threads.iter().map(|t| t.stats).sum();
    s.push_str("total:\n");
    lines(&mut s, &total);
    s
}

/// The `dump-drops` text for `ports` (each with its own counters and the switch's drops of
/// its packets): per port `port N (NAME):`, then `  rx_dropped`, `rx_errors`, `tx_dropped`,
/// `tx_errors` as `dump-ports` shows them, the port's own `port_rx_dropped`,
/// `port_rx_errors`, every reason of [`IN_PORT_DROPS`], the drops at output by its egress
/// queues (`queues(ofport)`: `drop_queue`, over a queue's rates, and `drop_queue_unknown`, for
/// a queue the port lacks; `datapath::egress`), and last the port's tunnel drops
/// (`tunnel(ofport)`: an underlay's termination drops, a tunnel port's send-side drops).
pub fn format_drops(
    ports: &[(OfPort, port::PortStats, Snapshot)],
    queues: impl Fn(u32) -> (u64, u64),
    tunnel: impl Fn(u32) -> Vec<(&'static str, u64)>,
) -> String {
    let mut s = String::new();
    for (p, own, drops) in ports {
        let all = merged(*own, drops);
        let _ = writeln!(s, "port {} ({}):", p.no, p.name);
        for (name, v) in [
            ("rx_dropped", all.rx_dropped),
            ("rx_errors", all.rx_errors),
            ("tx_dropped", all.tx_dropped),
            ("tx_errors", all.tx_errors),
            ("port_rx_dropped", own.rx_dropped),
            ("port_rx_errors", own.rx_errors),
        ] {
            let _ = writeln!(s, "  {name}: {v}");
        }
        for c in IN_PORT_DROPS {
            let _ = writeln!(s, "  {}: {}", c.name(), drops[c]);
        }
        let (over, unknown) = queues(p.no);
        let _ = writeln!(s, "  drop_queue: {over}");
        let _ = writeln!(s, "  drop_queue_unknown: {unknown}");
        for (name, v) in tunnel(p.no) {
            let _ = writeln!(s, "  {name}: {v}");
        }
    }
    s
}

impl OfBridge {
    /// Lets the bridge read the datapath's counters (weak: it must not keep the datapath
    /// running at exit).
    pub fn attach_counters(&self, counters: Weak<dyn DatapathCounters>) {
        *lock(&self.counters.datapath) = Some(counters);
    }

    /// Lets the bridge list its controllers (`show`; weak, as the counters).
    pub fn attach_controllers(&self, controllers: Weak<dyn ControllerView>) {
        *lock(&self.counters.controllers) = Some(controllers);
    }

    pub(super) fn datapath_counters(&self) -> Option<Arc<dyn DatapathCounters>> {
        self.counters.datapath()
    }

    /// The switch's drops of the packets port `ofport` delivered (all zero without a
    /// datapath).
    pub fn port_drops(&self, ofport: u32) -> Snapshot {
        self.datapath_counters()
            .map(|c| c.port_drops(ofport))
            .unwrap_or_default()
    }

    /// The tunnel drops counted on port `ofport` by reason
    /// ([`DatapathCounters::tunnel_drops`]; empty without a datapath).
    pub fn tunnel_drops(&self, ofport: u32) -> Vec<(&'static str, u64)> {
        self.datapath_counters()
            .map(|c| c.tunnel_drops(ofport))
            .unwrap_or_default()
    }

    /// Every port with its own counters and the switch's drops of its packets, by number.
    pub fn port_counters(&self) -> Vec<(OfPort, port::PortStats, Snapshot)> {
        let ports = self.ports();
        let dp = self.datapath_counters();
        ports
            .into_iter()
            .map(|p| {
                let own = p.port.stats();
                let drops = dp.as_ref().map(|c| c.port_drops(p.no)).unwrap_or_default();
                (p, own, drops)
            })
            .collect()
    }
}

/// A Hayate experimenter dump request (`dump-pmd`, `dump-drops`, and those of `look.rs`):
/// answered with its text for the management socket, refused for controllers.
pub(super) fn handle(b: &OfBridge, conn: ConnId, xid: u32, e: &Experimenter, out: &mut Vec<u8>) {
    debug_assert_eq!(e.experimenter, HAYATE_EXPERIMENTER);
    if conn.0 & SECONDARY_BIT == 0 {
        let text = format!(
            "the switch's counters are read through bridge {}'s management socket (hayate ctl \
             {} dump-pmd / dump-drops), not by controllers",
            b.cfg.name, b.cfg.name
        );
        reply(out, xid, &refusal(exp_error::NOT_PERMITTED, &text));
        return;
    }
    if !matches!(e.exp_type, exp_type::DUMP_PMD | exp_type::DUMP_DROPS) {
        return super::look::handle(b, xid, e, out);
    }
    let text = match e.exp_type {
        exp_type::DUMP_PMD => match b.datapath_counters() {
            Some(c) => format_pmd(&c.threads()),
            None => {
                let text = format!("bridge {} has no running datapath", b.cfg.name);
                reply(out, xid, &refusal(exp_error::REFUSED, &text));
                return;
            }
        },
        _ => {
            let dp = b.datapath_counters();
            let tunnel = |no| dp.as_ref().map(|c| c.tunnel_drops(no)).unwrap_or_default();
            let queues = |no| {
                let (queues, unknown) = b.port_queues(no);
                (queues.iter().map(|q| q.counts.dropped).sum(), unknown)
            };
            format_drops(&b.port_counters(), queues, tunnel)
        }
    };
    reply(out, xid, &done(&text));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(index: usize, core: Option<usize>, rx: u64, busy: u64) -> ThreadStats {
        ThreadStats {
            index,
            core,
            lane: false,
            stats: Snapshot {
                rx_packets: rx,
                busy_cycles: busy,
                ..Snapshot::default()
            },
        }
    }

    #[test]
    fn pmd_dump_has_every_counter_per_thread_and_a_total() {
        let text = format_pmd(&[thread(0, Some(3), 10, 100), thread(1, None, 5, 23)]);
        let lines: Vec<&str> = text.lines().collect();
        let per = Counter::ALL.len() + 1;
        assert_eq!(lines.len(), 3 * per);
        assert_eq!(lines[0], "pmd thread 0 core 3:");
        assert_eq!(lines[1], "  rx_packets: 10");
        assert_eq!(lines[per], "pmd thread 1 core -:");
        assert_eq!(lines[2 * per], "total:");
        assert_eq!(lines[2 * per + 1], "  rx_packets: 15");
        assert!(lines.contains(&"  busy_cycles: 123"));
        for c in Counter::ALL {
            let n = lines
                .iter()
                .filter(|l| l.starts_with(&format!("  {}: ", c.name())))
                .count();
            assert_eq!(n, 3, "{} once per thread and in the total", c.name());
        }
    }

    #[test]
    fn drops_list_each_ports_tunnel_reasons_after_the_switchs() {
        let port = |no: u32| OfPort {
            no,
            name: format!("p{no}"),
            hw_addr: [0; 6],
            port: port::spec::open("null:sink", &packet::Pool::with_frames(4)).unwrap(),
        };
        let rows = [
            (port(1), port::PortStats::default(), Snapshot::default()),
            (port(5), port::PortStats::default(), Snapshot::default()),
        ];
        let text = format_drops(
            &rows,
            |_| (0, 0),
            |no| match no {
                1 => vec![("tunnel_no_port", 3)],
                _ => Vec::new(),
            },
        );
        let p5 = text.find("port 5 (p5):").unwrap();
        let no_port = text.find("  tunnel_no_port: 3").unwrap();
        assert!(no_port < p5, "under port 1: {text}");
        assert_eq!(text.matches("tunnel_").count(), 1, "{text}");
    }

    #[test]
    fn switch_drops_fold_into_port_counters_as_open_vswitch_fills_them() {
        let own = port::PortStats {
            rx_dropped: 1,
            rx_errors: 2,
            tx_dropped: 3,
            ..Default::default()
        };
        let drops = Snapshot {
            drop_malformed: 10,
            upcall_shed: 20,
            drop_policed: 160,
            drop_no_action: 40,
            drop_meter: 80,
            ..Snapshot::default()
        };
        let m = merged(own, &drops);
        assert_eq!((m.rx_dropped, m.rx_errors, m.tx_dropped), (181, 12, 3));
    }
}

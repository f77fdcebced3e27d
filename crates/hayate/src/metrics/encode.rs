//! Bridge samples in Prometheus's text exposition format (version 0.0.4), through
//! `prometheus-client`: each scrape registers the samples as one collector and encodes it, so
//! every family has its `# HELP` and `# TYPE` lines once and counters get their `_total`.
//!
//! | family | labels | from |
//! |---|---|---|
//! | `hayate_port_{rx,tx}_{packets,bytes,dropped,errors}_total`, `hayate_port_rx_priority_packets_total` | bridge, ofport, port | `dump-ports` |
//! | `hayate_port_link_up` | bridge, ofport, port | the port's link |
//! | `hayate_port_drops_total` | bridge, ofport, port, reason | `dump-drops` (tunnel drops too: `tunnel_*` reasons on underlay and tunnel ports) |
//! | `hayate_port_queue_unknown_drops_total` | bridge, ofport, port | `dump-drops` `drop_queue_unknown` |
//! | `hayate_queue_{tx_packets,tx_bytes,dropped}_total` | bridge, ofport, port, queue | `ovs-ofctl queue-stats` (`dropped` is its `tx_errors`) |
//! | `hayate_queue_backlog_packets` | bridge, ofport, port, queue | packets a shaped (`linux-htb`) queue holds |
//! | `hayate_pmd_<counter>_total` (every `datapath::Counter`) | bridge, thread, core, lane | `dump-pmd` |
//! | `hayate_pmd_megaflows` | bridge, thread | megaflows alive (`dump-megaflows` lists them) |
//! | `hayate_rxq_{packets,busy_cycles}_total` | bridge, thread, ofport, port, queue | `rxq-show` |
//! | `hayate_table_flows`, `hayate_table_{lookups,matched}_total` | bridge, table | `dump-tables` |
//! | `hayate_bridge_fail_open`, `hayate_controller_connections` | bridge | the agent |
//! | `hayate_controller_{rx_messages,async_queued,packet_ins_rate_limited,async_queue_full,probes}_total` | bridge, target, peer, role | the agent's connections |
//! | `hayate_pool_frames`, `hayate_pool_shared_free_frames`, `hayate_pool_exhaustions_total` | bridge, pool (`packet`, `super`) | the packet pool and its super-packet sibling (`pool_watch.rs` warns on exhaustions) |

use std::fmt;

use datapath::{Counter, IN_PORT_DROPS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::sample::{BridgeSample, ControllerSample, PortSample, RxqSample};

/// The `Content-Type` of [`render`]'s text.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The labels of one series.
type Labels = Vec<(&'static str, String)>;

/// The exposition of `samples`.
pub fn render(samples: Vec<BridgeSample>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape(samples)));
    let mut text = String::new();
    // Writing to a String cannot fail; the collector below fails only through its writer.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry);
    text
}

/// One scrape's samples, as a collector.
#[derive(Debug)]
struct Scrape(Vec<BridgeSample>);

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        self.ports(&mut enc)?;
        self.threads(&mut enc)?;
        self.tables(&mut enc)?;
        self.controllers(&mut enc)?;
        self.pools(&mut enc)
    }
}

type PortField = fn(&port::PortStats) -> u64;

/// The port counters, as `dump-ports` shows them.
const PORT_COUNTERS: [(&str, &str, PortField); 9] = [
    (
        "rx_packets",
        "Packets the port received, those the switch then dropped included.",
        |s| s.rx_packets,
    ),
    ("rx_bytes", "Bytes the port received.", |s| s.rx_bytes),
    (
        "rx_dropped",
        "Packets lost on receive for lack of resources: the port's own (ring or socket \
         full, no buffer) plus misses the switch had no time to translate \
         (upcall_shed), as dump-ports shows.",
        |s| s.rx_dropped,
    ),
    (
        "rx_errors",
        "Bad frames on receive: the port's own plus truncated or malformed headers \
         (drop_malformed), as dump-ports shows.",
        |s| s.rx_errors,
    ),
    (
        "rx_priority_packets",
        "Of the packets received, those read from a priority queue (control frames).",
        |s| s.rx_priority,
    ),
    ("tx_packets", "Packets the port sent.", |s| s.tx_packets),
    ("tx_bytes", "Bytes the port sent.", |s| s.tx_bytes),
    (
        "tx_dropped",
        "Packets the port could not send (a full ring among them).",
        |s| s.tx_dropped,
    ),
    ("tx_errors", "Errors on send.", |s| s.tx_errors),
];

type ControllerField = fn(&ControllerSample) -> u64;

/// The counters of a controller connection.
const CONTROLLER_COUNTERS: [(&str, &str, ControllerField); 5] = [
    (
        "rx_messages",
        "OpenFlow messages received from the controller.",
        |c| c.rx_messages,
    ),
    (
        "async_queued",
        "Asynchronous messages (packet-ins, flow-removed, port-status) queued for the controller.",
        |c| c.async_queued,
    ),
    (
        "packet_ins_rate_limited",
        "Packet-ins not sent to the controller because its rate limit was spent.",
        |c| c.rate_limited,
    ),
    (
        "async_queue_full",
        "Asynchronous messages dropped because the controller's queue was full.",
        |c| c.queue_full,
    ),
    (
        "probes",
        "Inactivity probes (echo requests) sent to the controller.",
        |c| c.probes,
    ),
];

impl Scrape {
    fn port_series(&self) -> impl Iterator<Item = (&str, &PortSample)> + '_ {
        self.0
            .iter()
            .flat_map(|b| b.ports.iter().map(move |p| (b.bridge.as_str(), p)))
    }

    fn ports(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let labels = |bridge: &str, p: &PortSample| -> Labels {
            vec![
                ("bridge", bridge.to_string()),
                ("ofport", p.ofport.to_string()),
                ("port", p.name.clone()),
            ]
        };
        for (name, help, field) in PORT_COUNTERS {
            let series = self
                .port_series()
                .map(|(b, p)| (labels(b, p), field(&p.stats)));
            counters(enc, &format!("hayate_port_{name}"), help, series)?;
        }
        let series = self
            .port_series()
            .map(|(b, p)| (labels(b, p), i64::from(p.link_up)));
        gauges(
            enc,
            "hayate_port_link_up",
            "1 while the port's link is up.",
            series,
        )?;
        let series = self.port_series().flat_map(|(b, p)| {
            let switch = IN_PORT_DROPS.iter().map(|c| (c.name(), p.drops[*c]));
            let tunnel = p.tunnel_drops.iter().copied();
            switch.chain(tunnel).map(move |(reason, v)| {
                let mut l = labels(b, p);
                l.push(("reason", reason.to_string()));
                (l, v)
            })
        });
        counters(
            enc,
            "hayate_port_drops",
            "The switch's drops of the packets the port received, by reason, as `hayate ctl BRIDGE dump-drops` shows.",
            series,
        )?;
        let series = self
            .port_series()
            .map(|(b, p)| (labels(b, p), p.queue_unknown));
        counters(
            enc,
            "hayate_port_queue_unknown_drops",
            "Packets sent to a queue the port lacks, dropped (`dump-drops` drop_queue_unknown).",
            series,
        )?;
        type Field = fn(&datapath::QueueCounts) -> u64;
        let queue_counters: [(&str, &str, Field); 3] = [
            ("tx_packets", "Packets the egress queue passed.", |c| {
                c.tx_packets
            }),
            ("tx_bytes", "Bytes the egress queue passed.", |c| c.tx_bytes),
            (
                "dropped",
                "Packets over the egress queue's rates, dropped (queue-stats tx_errors).",
                |c| c.dropped,
            ),
        ];
        for (name, help, field) in queue_counters {
            let series = self.port_series().flat_map(|(b, p)| {
                p.queues.iter().map(move |q| {
                    let mut l = labels(b, p);
                    l.push(("queue", q.queue.to_string()));
                    (l, field(&q.counts))
                })
            });
            counters(enc, &format!("hayate_queue_{name}"), help, series)?;
        }
        let series = self.port_series().flat_map(|(b, p)| {
            p.queues.iter().map(move |q| {
                let mut l = labels(b, p);
                l.push(("queue", q.queue.to_string()));
                (l, q.counts.backlog as i64)
            })
        });
        gauges(
            enc,
            "hayate_queue_backlog_packets",
            "Packets the egress queue holds now, all poll threads together (linux-htb shaping).",
            series,
        )
    }

    fn threads(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        for c in Counter::ALL {
            let series = self.0.iter().flat_map(|b| {
                b.threads.iter().map(move |t| {
                    let core = t.core.map_or_else(|| "-".to_string(), |c| c.to_string());
                    let labels: Labels = vec![
                        ("bridge", b.bridge.clone()),
                        ("thread", t.index.to_string()),
                        ("core", core),
                        ("lane", t.lane.to_string()),
                    ];
                    (labels, t.stats[c])
                })
            });
            let help = format!(
                "Poll-thread counter {}, as `hayate ctl BRIDGE dump-pmd` shows it.",
                c.name()
            );
            counters(enc, &format!("hayate_pmd_{}", c.name()), &help, series)?;
        }
        gauges(
            enc,
            "hayate_pmd_megaflows",
            "Megaflows alive in the poll thread, as of its last maintenance pass (every 100 ms).",
            self.0.iter().flat_map(|b| {
                b.megaflows.iter().enumerate().map(move |(t, n)| {
                    let labels: Labels =
                        vec![("bridge", b.bridge.clone()), ("thread", t.to_string())];
                    (labels, *n as i64)
                })
            }),
        )?;
        type RxqField = fn(&RxqSample) -> u64;
        let rxq: [(&str, &str, RxqField); 2] = [
            ("packets", "Packets received from the rx queue.", |q| {
                q.packets
            }),
            (
                "busy_cycles",
                "Cycles its poll thread spent on the rx queue's batches (its share of the \
                 thread, as `hayate ctl BRIDGE rxq-show` shows).",
                |q| q.busy_cycles,
            ),
        ];
        for (name, help, field) in rxq {
            let series = self.0.iter().flat_map(|b| {
                b.rx_queues.iter().map(move |q| {
                    let labels: Labels = vec![
                        ("bridge", b.bridge.clone()),
                        ("thread", q.thread.to_string()),
                        ("ofport", q.ofport.to_string()),
                        ("port", q.port.clone()),
                        ("queue", q.queue.to_string()),
                    ];
                    (labels, field(q))
                })
            });
            counters(enc, &format!("hayate_rxq_{name}"), help, series)?;
        }
        Ok(())
    }

    fn tables(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let series = || {
            self.0.iter().flat_map(|b| {
                b.tables.iter().map(move |t| {
                    let labels: Labels = vec![
                        ("bridge", b.bridge.clone()),
                        ("table", t.table_id.to_string()),
                    ];
                    (labels, t)
                })
            })
        };
        gauges(
            enc,
            "hayate_table_flows",
            "Flow entries in the table.",
            series().map(|(l, t)| (l, t.active as i64)),
        )?;
        counters(
            enc,
            "hayate_table_lookups",
            "Translations (cache misses, not packets) that looked the table up.",
            series().map(|(l, t)| (l, t.lookups)),
        )?;
        counters(
            enc,
            "hayate_table_matched",
            "Of the table's lookups, those that matched an entry.",
            series().map(|(l, t)| (l, t.matched)),
        )
    }

    fn controllers(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let bridge = |b: &BridgeSample| -> Labels { vec![("bridge", b.bridge.clone())] };
        gauges(
            enc,
            "hayate_bridge_fail_open",
            "1 while the bridge forwards on its own (standalone fail mode, no controller).",
            self.0.iter().map(|b| (bridge(b), i64::from(b.fail_open))),
        )?;
        gauges(
            enc,
            "hayate_controller_connections",
            "Controller connections open (the management socket's not counted).",
            self.0
                .iter()
                .map(|b| (bridge(b), b.controllers.len() as i64)),
        )?;
        for (name, help, field) in CONTROLLER_COUNTERS {
            let series = self.0.iter().flat_map(|b| {
                b.controllers.iter().map(move |c| {
                    let labels: Labels = vec![
                        ("bridge", b.bridge.clone()),
                        ("target", c.target.clone()),
                        ("peer", c.peer.clone()),
                        ("role", c.role.to_string()),
                    ];
                    (labels, field(c))
                })
            });
            counters(enc, &format!("hayate_controller_{name}"), help, series)?;
        }
        Ok(())
    }
}

impl Scrape {
    fn pools(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let series = || {
            self.0.iter().flat_map(|b| {
                b.pools.iter().map(move |p| {
                    let labels: Labels =
                        vec![("bridge", b.bridge.clone()), ("pool", p.pool.to_string())];
                    (labels, p)
                })
            })
        };
        gauges(
            enc,
            "hayate_pool_frames",
            "Frames in the pool (packet: --pool-frames of 2 KiB or --frame-size; super: 64 KiB \
             frames for TCP super-packets).",
            series().map(|(l, p)| (l, i64::from(p.frames))),
        )?;
        gauges(
            enc,
            "hayate_pool_shared_free_frames",
            "Frames in the pool's shared stack: in no queue's cache and in no packet.",
            series().map(|(l, p)| (l, p.shared_free as i64)),
        )?;
        counters(
            enc,
            "hayate_pool_exhaustions",
            "Times a queue needed frames and found the pool empty (raise --pool-frames).",
            series().map(|(l, p)| (l, p.exhaustions)),
        )
    }
}

/// A counter family (`_total` is appended to `name`); none when `series` is empty.
fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Labels, u64)>,
) -> fmt::Result {
    family(
        enc,
        name,
        help,
        MetricType::Counter,
        series.map(|(l, v)| (l, ConstCounter::new(v))),
    )
}

/// A gauge family; none when `series` is empty.
fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Labels, i64)>,
) -> fmt::Result {
    family(
        enc,
        name,
        help,
        MetricType::Gauge,
        series.map(|(l, v)| (l, ConstGauge::new(v))),
    )
}

fn family<M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    ty: MetricType,
    series: impl Iterator<Item = (Labels, M)>,
) -> fmt::Result {
    let mut series = series.peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, ty)?;
    for (labels, value) in series {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;

//! Multipart (statistics and description) replies. A reply that does not fit one 64 KiB
//! message is split into several, all but the last flagged MORE. Flow and aggregate
//! statistics are built from a snapshot of the tables, group and meter statistics and
//! descriptions from a snapshot of the groups or meters, off the bridge's lock, and a big
//! one's come in pieces ([`super::dump`]).

use std::sync::atomic::Ordering::Relaxed;

use openflow::multipart::{
    Counter, FlowStatsRequest, GroupStats, MeterConfig, MeterStats, TableStats, MORE, QUEUE_ALL,
};
use openflow::{ErrorCode, Message, MultipartReply, MultipartReplyBody as B};
use openflow::{MultipartRequest, MultipartRequestBody as R};
use pipeline::model::{ports, GROUP_ALL, MAX_TABLE, METER_ALL};
use pipeline::FlowFilter;

use super::handle::{error, reply};
use super::{dump, features, OfBridge};
use crate::reply_stream::Producer;

/// Items per reply message to try first; halved while a message would be too long.
const FIRST_CHUNK: usize = 256;

/// Sends `items` in as many messages as needed.
fn split<T: Clone>(out: &mut Vec<u8>, xid: u32, items: &[T], wrap: impl Fn(Vec<T>) -> B) {
    split_parts(out, xid, items, wrap, true);
}

/// Sends `items` in as many messages as needed, all flagged MORE but the last when `last`
/// (these items end the reply), every one when more items follow in later calls. No items
/// and `last`: one empty message ends the reply.
pub(super) fn split_parts<T: Clone>(
    out: &mut Vec<u8>,
    xid: u32,
    items: &[T],
    wrap: impl Fn(Vec<T>) -> B,
    last: bool,
) {
    if items.is_empty() {
        if last {
            reply(
                out,
                xid,
                &Message::MultipartReply(MultipartReply {
                    flags: 0,
                    body: wrap(Vec::new()),
                }),
            );
        }
        return;
    }
    let mut i = 0;
    let mut chunk = FIRST_CHUNK;
    while i < items.len() {
        let end = (i + chunk).min(items.len());
        let msg = Message::MultipartReply(MultipartReply {
            flags: if end < items.len() || !last { MORE } else { 0 },
            body: wrap(items[i..end].to_vec()),
        });
        match openflow::encode(xid, &msg, out) {
            Ok(()) => i = end,
            Err(_) if end - i > 1 => chunk = (end - i) / 2,
            Err(e) => {
                tracing::error!("a multipart reply entry does not fit a message: {e}");
                i = end;
            }
        }
    }
}

/// The ids of `all` a request for `want` (or every one: `every`) selects.
fn selected(all: impl Iterator<Item = u32>, want: u32, every: u32) -> Vec<u32> {
    all.filter(|&id| want == every || id == want).collect()
}

/// A meter's statistics.
fn meter_stats(m: &pipeline::MeterState) -> MeterStats {
    MeterStats {
        meter_id: m.meter.id,
        flow_count: 0,
        packet_in_count: m.packets.load(Relaxed),
        byte_in_count: m.bytes.load(Relaxed),
        duration_sec: 0,
        duration_nsec: 0,
        band_stats: (0..m.meter.bands.len())
            .map(|i| {
                m.band_counters(i).map_or(Counter::default(), |c| Counter {
                    packet_count: c.packets.load(Relaxed),
                    byte_count: c.bytes.load(Relaxed),
                })
            })
            .collect(),
    }
}

fn filter_of(r: &FlowStatsRequest) -> FlowFilter {
    FlowFilter {
        matcher: r.matcher,
        strict_priority: None,
        cookie: r.cookie,
        cookie_mask: r.cookie_mask,
        out_port: r.out_port,
        out_group: r.out_group,
    }
}

/// Answers `req` into `out`, or returns the producer of a reply too big to build at once
/// (which then follows whatever `out` holds).
pub(super) fn reply_to(
    b: &OfBridge,
    xid: u32,
    msg: &[u8],
    req: &MultipartRequest,
    out: &mut Vec<u8>,
) -> Option<Producer> {
    let one = |out: &mut Vec<u8>, body: B| {
        reply(
            out,
            xid,
            &Message::MultipartReply(MultipartReply { flags: 0, body }),
        )
    };
    match &req.body {
        R::Desc => one(out, B::Desc(features::desc(&b.cfg.name, b.cfg.datapath_id))),
        R::Flow(r) => {
            // A snapshot (one pointer per table) is all that is taken under the lock.
            let snapshot = b.lock().control.dump(r.table_id, &filter_of(r));
            return dump::flow_stats(snapshot, xid, out);
        }
        R::Aggregate(r) => {
            let snapshot = b.lock().control.dump(r.table_id, &filter_of(r));
            return dump::aggregate(snapshot, xid, out);
        }
        R::Table => {
            let stats: Vec<TableStats> = b
                .lock()
                .control
                .table_stats()
                .iter()
                .map(TableStats::from)
                .collect();
            split(out, xid, &stats, B::Table);
        }
        R::PortStats { port_no } => {
            let st = b.lock();
            let stats: Vec<_> = st
                .ports
                .iter()
                .filter(|p| *port_no == ports::ANY || p.port.no == *port_no)
                .map(|p| features::port_stats(p, &b.port_drops(p.port.no)))
                .collect();
            drop(st);
            if stats.is_empty() && *port_no != ports::ANY {
                error(out, msg, ErrorCode::BRC_BAD_PORT);
            } else {
                split(out, xid, &stats, B::PortStats);
            }
        }
        R::Queue { port_no, queue_id } => match b.queue_stats(*port_no, *queue_id) {
            None => error(out, msg, ErrorCode::QOFC_BAD_PORT),
            Some(q) if q.is_empty() && *queue_id != QUEUE_ALL => {
                error(out, msg, ErrorCode::QOFC_BAD_QUEUE)
            }
            Some(q) => split(out, xid, &q, B::Queue),
        },
        R::Group { group_id } => {
            let groups = b.lock().control.groups_snapshot();
            let len = groups.len();
            let want = *group_id;
            return dump::by_id(
                groups,
                len,
                xid,
                move |g| selected(g.iter().map(|g| g.id), want, GROUP_ALL),
                |g, id| {
                    g.get(id).map(|g| GroupStats {
                        group_id: g.id,
                        bucket_stats: vec![Counter::default(); g.buckets.len()],
                        ..GroupStats::default()
                    })
                },
                B::Group,
                out,
            );
        }
        R::GroupDesc => {
            let groups = b.lock().control.groups_snapshot();
            let len = groups.len();
            return dump::by_id(
                groups,
                len,
                xid,
                |g| g.iter().map(|g| g.id).collect(),
                |g, id| g.get(id).map(|g| (**g).clone()),
                B::GroupDesc,
                out,
            );
        }
        R::GroupFeatures => one(out, B::GroupFeatures(features::group_features())),
        R::Meter { meter_id } => {
            let meters = b.lock().control.meters_snapshot();
            let len = meters.len();
            let want = *meter_id;
            return dump::by_id(
                meters,
                len,
                xid,
                move |m| selected(m.keys().copied(), want, METER_ALL),
                |m, id| m.get(&id).map(|m| meter_stats(m)),
                B::Meter,
                out,
            );
        }
        R::MeterConfig { meter_id } => {
            let meters = b.lock().control.meters_snapshot();
            let len = meters.len();
            let want = *meter_id;
            return dump::by_id(
                meters,
                len,
                xid,
                move |m| selected(m.keys().copied(), want, METER_ALL),
                |m, id| {
                    m.get(&id).map(|m| MeterConfig {
                        meter: m.meter.clone(),
                    })
                },
                B::MeterConfig,
                out,
            );
        }
        R::MeterFeatures => one(out, B::MeterFeatures(features::meter_features())),
        R::TableFeatures(set) => {
            let mut st = b.lock();
            let cap = st.control.config().table_capacity;
            if !set.is_empty() {
                // A set request: accepted when each table asks for no more than Hayate's
                // tables do; from then on the listed tables report what was asked and their
                // flow-mods are held to it (features::check_layout).
                if let Err((code, why)) = features::check_table_config(set, cap) {
                    drop(st);
                    tracing::info!(bridge = %b.cfg.name, "table-features request refused: {why}");
                    error(out, msg, code);
                    return None;
                }
                st.table_layout = set.iter().map(|t| (t.table_id, t.clone())).collect();
            }
            let layout = st.table_layout.clone();
            drop(st);
            let all: Vec<_> = (0..=MAX_TABLE)
                .map(|t| match layout.get(&t) {
                    Some(asked) => asked.clone(),
                    None => features::table_features(t, cap),
                })
                .collect();
            split(out, xid, &all, B::TableFeatures);
        }
        R::PortDesc => {
            let descs: Vec<_> = b.lock().ports.iter().map(features::port_desc).collect();
            split(out, xid, &descs, B::PortDesc);
        }
    }
    None
}

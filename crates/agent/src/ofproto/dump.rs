//! Flow and aggregate statistics from a snapshot of the tables ([`pipeline::FlowDump`]), and
//! group and meter statistics and descriptions from a snapshot of the groups or meters, so
//! the bridge's lock is held only to take the snapshot (a pointer per table).
//!
//! A dump that may select at most [`INLINE_MAX`] flows is answered at once. A bigger one is a
//! [`Producer`]: it walks the snapshot [`PIECE`] flows at a time and passes each piece's
//! encoded messages on (all flagged MORE; the last message of the reply not), so no more
//! than a few pieces exist at once whatever the table's size — not the whole reply (208 MB
//! for 2,000,000 flows). The session runs it on a thread of its own and sends the pieces as
//! they come ([`crate::ReplyStream`]); other sessions are served meanwhile.

use openflow::multipart::{AggregateStats, FlowStats};
use openflow::{Message, MultipartReply, MultipartReplyBody as B};
use pipeline::FlowDump;

use super::handle::reply;
use super::multipart::split_parts;
use crate::reply_stream::{Producer, ReplyStream, Sink};

/// Flows per piece of a streamed flow-stats reply (about 100–200 KB encoded).
pub const PIECE: usize = 1024;

/// Dumps of at most this many flows (as the tables' sizes bound them) are answered at once.
pub const INLINE_MAX: usize = PIECE;

/// Flow-stats reply under `xid`: into `out` for a small dump, else its producer.
pub(super) fn flow_stats(dump: FlowDump, xid: u32, out: &mut Vec<u8>) -> Option<Producer> {
    let max = dump.max_flows();
    let produce: Producer = Box::new(move |sink: &mut Sink<'_>| {
        // One piece's worth is held back until the walk says whether more follow, so the
        // last message is the one without MORE.
        let mut held: Vec<FlowStats> = Vec::with_capacity(2 * PIECE);
        let done = dump.for_each_chunk(PIECE, |views| {
            held.extend(views.iter().map(FlowStats::from));
            if held.len() <= PIECE {
                return true;
            }
            let rest = held.split_off(PIECE);
            let mut piece = Vec::new();
            split_parts(&mut piece, xid, &held, B::Flow, false);
            held = rest;
            sink(piece)
        });
        if done {
            let mut piece = Vec::new();
            split_parts(&mut piece, xid, &held, B::Flow, true);
            sink(piece);
        }
    });
    inline_or(produce, max, out)
}

/// Aggregate-stats reply under `xid`: into `out` for a small dump, else its producer.
pub(super) fn aggregate(dump: FlowDump, xid: u32, out: &mut Vec<u8>) -> Option<Producer> {
    let max = dump.max_flows();
    let produce: Producer = Box::new(move |sink: &mut Sink<'_>| {
        let a = dump.aggregate();
        let body = B::Aggregate(AggregateStats {
            packet_count: a.packets,
            byte_count: a.bytes,
            flow_count: u32::try_from(a.flows).unwrap_or(u32::MAX),
        });
        let mut piece = Vec::new();
        reply(
            &mut piece,
            xid,
            &Message::MultipartReply(MultipartReply { flags: 0, body }),
        );
        sink(piece);
    });
    inline_or(produce, max, out)
}

fn inline_or(produce: Producer, max_flows: usize, out: &mut Vec<u8>) -> Option<Producer> {
    if max_flows <= INLINE_MAX {
        ReplyStream::collect(produce, out);
        None
    } else {
        Some(produce)
    }
}

/// A reply listing what `ids` gives of `snapshot` (a snapshot of the groups or meters, taken
/// under the lock as one pointer), by ascending id, `make` turning an id into its entry
/// (`None`: skipped): into `out` when `len` (the snapshot's size) is small, else its
/// producer, which lists and sorts the ids and makes the entries [`PIECE`] at a time.
pub(super) fn by_id<S, T>(
    snapshot: S,
    len: usize,
    xid: u32,
    ids: impl Fn(&S) -> Vec<u32> + Send + 'static,
    make: impl Fn(&S, u32) -> Option<T> + Send + 'static,
    wrap: fn(Vec<T>) -> B,
    out: &mut Vec<u8>,
) -> Option<Producer>
where
    S: Send + 'static,
    T: Clone + 'static,
{
    let produce: Producer = Box::new(move |sink: &mut Sink<'_>| {
        let mut ids = ids(&snapshot);
        ids.sort_unstable();
        let pieces = ids.len().div_ceil(PIECE).max(1);
        for (k, part) in ids
            .chunks(PIECE)
            .chain(ids.is_empty().then_some(&[][..]))
            .enumerate()
        {
            let items: Vec<T> = part.iter().filter_map(|&id| make(&snapshot, id)).collect();
            let mut piece = Vec::new();
            split_parts(&mut piece, xid, &items, wrap, k + 1 == pieces);
            if !piece.is_empty() && !sink(piece) {
                return;
            }
        }
    });
    inline_or(produce, len, out)
}

//! Splitting a multipart reply too long for one message (a 16-bit length) into several, with
//! `OFPMPF_REPLY_MORE` on all but the last.

use crate::error::EncodeError;
use crate::message::{encode, Message};
use crate::multipart::{config, MultipartReply, MultipartReplyBody, MORE};

/// Largest body of one multipart reply: 65535 minus the 8-byte header and the 8-byte
/// multipart header.
pub const MAX_REPLY_BODY: usize = 0xffff - 16;

/// Packs `items` greedily into chunks whose encoded sizes sum to at most `max`.
fn chunks<T: Clone>(
    items: &[T],
    max: usize,
    size: impl Fn(&T) -> Result<usize, EncodeError>,
) -> Result<Vec<Vec<T>>, EncodeError> {
    let mut out: Vec<Vec<T>> = vec![Vec::new()];
    let mut used = 0;
    for it in items {
        let n = size(it)?;
        if n > max {
            return Err(EncodeError::TooLong {
                what: "one multipart reply entry",
                len: n,
            });
        }
        if used + n > max {
            out.push(Vec::new());
            used = 0;
        }
        used += n;
        if let Some(last) = out.last_mut() {
            last.push(it.clone());
        }
    }
    Ok(out)
}

fn measured(f: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>) -> Result<usize, EncodeError> {
    let mut b = Vec::new();
    f(&mut b)?;
    Ok(b.len())
}

/// Splits a reply body into bodies of at most `max` encoded bytes each (single-value
/// bodies such as desc or aggregate are returned whole).
pub fn split_body(
    body: &MultipartReplyBody,
    max: usize,
) -> Result<Vec<MultipartReplyBody>, EncodeError> {
    use MultipartReplyBody as B;
    fn wrap<T>(v: Vec<Vec<T>>, f: impl Fn(Vec<T>) -> B) -> Vec<B> {
        v.into_iter().map(f).collect()
    }
    Ok(match body {
        B::Flow(v) => wrap(chunks(v, max, |x| measured(|b| x.write(b)))?, B::Flow),
        B::Table(v) => wrap(chunks(v, max, |_| Ok(24))?, B::Table),
        B::PortStats(v) => wrap(chunks(v, max, |_| Ok(112))?, B::PortStats),
        B::Queue(v) => wrap(chunks(v, max, |_| Ok(40))?, B::Queue),
        B::Group(v) => wrap(chunks(v, max, |x| measured(|b| x.write(b)))?, B::Group),
        B::GroupDesc(v) => wrap(
            chunks(v, max, |g| measured(|b| config::write_group_desc(g, b)))?,
            B::GroupDesc,
        ),
        B::Meter(v) => wrap(chunks(v, max, |x| measured(|b| x.write(b)))?, B::Meter),
        B::MeterConfig(v) => wrap(
            chunks(v, max, |x| measured(|b| x.write(b)))?,
            B::MeterConfig,
        ),
        B::TableFeatures(v) => wrap(
            chunks(v, max, |x| measured(|b| x.write(b)))?,
            B::TableFeatures,
        ),
        B::PortDesc(v) => wrap(chunks(v, max, |_| Ok(64))?, B::PortDesc),
        B::Desc(_) | B::Aggregate(_) | B::GroupFeatures(_) | B::MeterFeatures(_) => {
            vec![body.clone()]
        }
    })
}

/// Appends `body` as as many multipart replies with transaction id `xid` as its length
/// needs, `OFPMPF_REPLY_MORE` set on all but the last; returns how many. On error `buf` is
/// left as it was.
pub fn encode_reply(
    xid: u32,
    body: &MultipartReplyBody,
    buf: &mut Vec<u8>,
) -> Result<usize, EncodeError> {
    let parts = split_body(body, MAX_REPLY_BODY)?;
    let start = buf.len();
    let n = parts.len();
    for (i, part) in parts.into_iter().enumerate() {
        let flags = if i + 1 < n { MORE } else { 0 };
        let msg = Message::MultipartReply(MultipartReply { flags, body: part });
        if let Err(e) = encode(xid, &msg, buf) {
            buf.truncate(start);
            return Err(e);
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multipart::{FlowStats, PortStats};
    use crate::{decode, frame_len};
    use packet::Field;
    use pipeline::model::{Action, FlowFlags, Instruction, Match};

    #[test]
    fn long_flow_stats_split_with_reply_more() {
        let mut m = Match::ANY;
        m.set_exact(Field::EthType, 0x0800);
        m.set_exact(Field::Ipv4Src, 0x0a00_0001);
        let entry = FlowStats {
            table_id: 0,
            duration_sec: 1,
            duration_nsec: 0,
            priority: 1,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: FlowFlags::default(),
            cookie: 0,
            packet_count: 0,
            byte_count: 0,
            matcher: m,
            instructions: vec![Instruction::ApplyActions(vec![
                Action::Output {
                    port: 1,
                    max_len: 0
                };
                4
            ])],
            matcher_as_sent: None,
            instructions_as_sent: None,
        };
        let body = MultipartReplyBody::Flow(vec![entry; 2000]);
        let mut buf = Vec::new();
        let n = encode_reply(9, &body, &mut buf).unwrap();
        assert!(n >= 3, "{n} messages");
        let (mut off, mut got, mut seen) = (0, 0, 0);
        while off < buf.len() {
            let len = frame_len(&buf[off..]).unwrap().unwrap();
            assert!(len <= 0xffff);
            let (h, msg) = decode(&buf[off..off + len]).unwrap();
            assert_eq!(h.xid, 9);
            let Message::MultipartReply(r) = msg else {
                panic!()
            };
            seen += 1;
            assert_eq!(r.flags, if seen < n { MORE } else { 0 });
            let MultipartReplyBody::Flow(v) = r.body else {
                panic!()
            };
            got += v.len();
            off += len;
        }
        assert_eq!((got, seen), (2000, n));
    }

    #[test]
    fn short_bodies_stay_whole() {
        let body = MultipartReplyBody::PortStats(vec![PortStats::default(); 3]);
        let mut buf = Vec::new();
        assert_eq!(encode_reply(1, &body, &mut buf).unwrap(), 1);
        assert_eq!(buf.len(), 16 + 3 * 112);
        let empty = MultipartReplyBody::Flow(vec![]);
        assert_eq!(encode_reply(1, &empty, &mut Vec::new()).unwrap(), 1);
    }
}

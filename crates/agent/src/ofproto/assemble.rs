//! Multipart requests sent in several messages (`OFPMPF_REQ_MORE`, OpenFlow 1.3.5 §7.3.5).
//!
//! The one request of OpenFlow 1.3 whose body is a list that may outgrow a message is a
//! table-features set request (the properties of 255 tables run past 64 KiB): its parts are
//! gathered per connection and request (xid) until the part without MORE, then handled as
//! one request. The other requests have fixed bodies; a MORE flag on one of them announces
//! nothing to gather, and the request is answered as it is. A part of another type under the
//! xid of a table-features request being gathered is refused with `OFPBRC_BAD_MULTIPART`,
//! and more tables than the switch has with `OFPBRC_MULTIPART_BUFFER_OVERFLOW` (which bounds
//! what a connection can make the switch hold).

use std::collections::HashMap;

use openflow::multipart::{TableFeatures, MORE};
use openflow::{ErrorCode, MultipartRequest, MultipartRequestBody as R};
use pipeline::model::N_TABLES;

use crate::ConnId;

/// Table-features parts gathered so far, by connection and xid.
#[derive(Debug, Default)]
pub(super) struct Parts {
    pending: HashMap<(ConnId, u32), Vec<TableFeatures>>,
}

/// What to do with one request message.
#[derive(Debug)]
pub(super) enum Step {
    /// Answer this request (whole, or the gathered parts with this last one).
    Handle(Box<MultipartRequest>),
    /// A part was kept; nothing to answer yet.
    Held,
    /// Refuse with this error (the parts gathered so far are dropped).
    Refuse(ErrorCode),
}

impl Parts {
    /// Takes one request message of `conn` under `xid`.
    pub(super) fn take(&mut self, conn: ConnId, xid: u32, req: MultipartRequest) -> Step {
        let key = (conn, xid);
        let more = req.flags & MORE != 0;
        match req.body {
            R::TableFeatures(part) => {
                let gathered = self.pending.remove(&key);
                let mut all = gathered.unwrap_or_default();
                all.extend(part);
                if all.len() > usize::from(N_TABLES) {
                    return Step::Refuse(ErrorCode::BRC_MULTIPART_BUFFER_OVERFLOW);
                }
                if more {
                    self.pending.insert(key, all);
                    return Step::Held;
                }
                Step::Handle(Box::new(MultipartRequest {
                    flags: 0,
                    body: R::TableFeatures(all),
                }))
            }
            body => {
                if self.pending.remove(&key).is_some() {
                    return Step::Refuse(ErrorCode::BRC_BAD_MULTIPART);
                }
                Step::Handle(Box::new(MultipartRequest {
                    flags: req.flags,
                    body,
                }))
            }
        }
    }

    /// Forgets what `conn` sent (it disconnected).
    pub(super) fn forget(&mut self, conn: ConnId) {
        self.pending.retain(|(c, _), _| *c != conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(id: u8) -> TableFeatures {
        TableFeatures {
            table_id: id,
            ..TableFeatures::default()
        }
    }

    fn req(more: bool, body: R) -> MultipartRequest {
        MultipartRequest {
            flags: if more { MORE } else { 0 },
            body,
        }
    }

    #[test]
    fn parts_are_gathered_until_the_last() {
        let mut p = Parts::default();
        let c = ConnId(1);
        let part = |ids: &[u8]| R::TableFeatures(ids.iter().map(|&i| features(i)).collect());
        assert!(matches!(p.take(c, 7, req(true, part(&[0, 1]))), Step::Held));
        // Another connection's request with the same xid is its own.
        assert!(matches!(
            p.take(ConnId(2), 7, req(false, part(&[9]))),
            Step::Handle(r) if r.body == part(&[9])
        ));
        assert!(matches!(p.take(c, 7, req(true, part(&[2]))), Step::Held));
        match p.take(c, 7, req(false, part(&[3]))) {
            Step::Handle(r) => assert_eq!(r.body, part(&[0, 1, 2, 3])),
            other => panic!("{other:?}"),
        }
        assert!(p.pending.is_empty());
    }

    #[test]
    fn a_part_of_another_type_and_too_many_tables_are_refused() {
        let mut p = Parts::default();
        let c = ConnId(1);
        assert!(matches!(
            p.take(c, 1, req(true, R::TableFeatures(vec![features(0)]))),
            Step::Held
        ));
        assert!(matches!(
            p.take(c, 1, req(false, R::Desc)),
            Step::Refuse(ErrorCode::BRC_BAD_MULTIPART)
        ));
        let all: Vec<_> = (0..=254u8).map(features).collect();
        assert!(matches!(
            p.take(c, 2, req(true, R::TableFeatures(all))),
            Step::Held
        ));
        assert!(matches!(
            p.take(c, 2, req(false, R::TableFeatures(vec![features(0)]))),
            Step::Refuse(ErrorCode::BRC_MULTIPART_BUFFER_OVERFLOW)
        ));
        assert!(matches!(
            p.take(c, 3, req(true, R::TableFeatures(vec![features(0)]))),
            Step::Held
        ));
        p.forget(c);
        assert!(p.pending.is_empty());
        // A fixed-body request with MORE is answered as it is.
        assert!(matches!(p.take(c, 4, req(true, R::Desc)), Step::Handle(_)));
    }
}

//! Bulk flow-mods from controllers (`pipeline::control::bulk`): a non-strict modify or a
//! filtered delete over a big table holds the bridge's lock only to take its snapshot and,
//! later, to swap the new tables in; the walk runs on a thread of its own as a reply
//! [`Producer`] (usually with nothing to say, or an error), so the session handles that
//! controller's next message — a BARRIER — only once the flow-mod is applied, while every
//! other session goes on meanwhile.
//!
//! A plan the tables outran (another bulk flow-mod or a delete of everything in between) is
//! made again, [`RETRIES`] times at most; then the flow-mod is applied in place, under the
//! lock, as a small one is.

use std::sync::{Arc, Mutex, MutexGuard};

use openflow::{ErrorCode, NO_BUFFER};
use pipeline::control::bulk::{BulkDone, BulkPlan};
use pipeline::model::FlowMod;
use pipeline::FlowModError;
use tokio::sync::Notify;

use super::handle::error;
use super::State;
use crate::reply_stream::{Producer, Sink};

/// Plans made again before the flow-mod is applied in place.
pub const RETRIES: usize = 2;

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the bulk flow-mod `m` (request bytes `msg`, first plan `plan`) does off the lock;
/// `wake` is told when it is applied (the pump then sends its FLOW_REMOVED and publishes).
pub(super) fn producer(
    state: Arc<Mutex<State>>,
    wake: Option<Arc<Notify>>,
    plan: BulkPlan,
    m: FlowMod,
    buffer_id: u32,
    msg: Vec<u8>,
) -> Producer {
    Box::new(move |sink: &mut Sink<'_>| {
        let mut out = Vec::new();
        if let Err(e) = run(&state, plan, &m) {
            tracing::debug!("bulk flow-mod refused: {e}");
            let (kind, code) = e.ofp_error();
            error(&mut out, &msg, ErrorCode { kind, code });
        } else if buffer_id != NO_BUFFER {
            // Applied; the packet it names was never buffered.
            error(&mut out, &msg, ErrorCode::BRC_BUFFER_UNKNOWN);
        }
        if let Some(w) = wake {
            w.notify_one();
        }
        if !out.is_empty() {
            sink(out);
        }
    })
}

fn run(state: &Mutex<State>, mut plan: BulkPlan, m: &FlowMod) -> Result<(), FlowModError> {
    for _ in 0..=RETRIES {
        let ready = plan.prepare()?;
        let mut st = lock(state);
        match st.control.finish_bulk(ready)? {
            BulkDone::Applied(_) => {
                st.dirty = true;
                return Ok(());
            }
            BulkDone::Stale => plan = st.control.plan_bulk(m)?,
        }
    }
    // Outrun every time: in place, under the lock.
    let mut st = lock(state);
    st.control.flow_mod(m)?;
    st.dirty = true;
    Ok(())
}

#[cfg(test)]
#[path = "bulk_tests.rs"]
mod tests;

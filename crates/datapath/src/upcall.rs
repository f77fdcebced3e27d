//! The seam between the fast path and the OpenFlow pipeline: [`Upcall`] (translate a key a
//! cache missed) and [`Policer`] (a meter's token bucket).
//!
//! Owner: each poll-mode thread owns one `Box<dyn Upcall>`; it is only called on a cache miss
//! (at most a budgeted number of times per batch) and once per batch for
//! [`Upcall::generation`]. Keeping the seam this narrow lets tests drive the datapath with a
//! fake translator, and lets the pipeline change its insides without touching this crate.

use std::sync::Arc;

use packet::FlowKey;
use pipeline::{Cursor, MeterState, MeterVerdict, PipelineCell, Published, Since, Translation};

/// What a meter says about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Police {
    /// Within the rate: go on with the actions.
    Pass,
    /// Over the rate: drop the packet.
    Drop,
    /// Over a DSCP-remark band's rate: raise the packet's drop precedence by this many levels
    /// (only AF code points have one; other packets pass unchanged).
    Remark(u8),
}

/// A meter's token bucket, shared with the control side (which configures it and reads its
/// counters). Called per packet: implementations must not lock or allocate.
pub trait Policer: Send + Sync {
    /// Charges `bytes` at time `now_ns` (a monotonic clock) and says whether the packet passes.
    fn police(&self, now_ns: u64, bytes: u32) -> Police;
}

/// Translation of cache misses, one instance per poll-mode thread.
pub trait Upcall: Send {
    /// A number that changes whenever earlier translations may no longer hold (flow table,
    /// group or meter changes, MAC learning moves). Read once per batch; must be cheap.
    fn generation(&self) -> u64;

    /// Runs `key` through the pipeline and fills `out` (which the caller has cleared).
    fn translate(&mut self, key: &FlowKey, out: &mut Translation);

    /// What the publishes since `cursor` changed (appended to `out`; see
    /// [`pipeline::changes`]), called after [`Upcall::generation`] showed a change. The
    /// default, [`Since::Full`], empties every cache on every change.
    fn changes_since(&self, cursor: &mut Cursor, out: &mut Vec<Arc<Published>>) -> Since {
        let _ = (cursor, out);
        Since::Full
    }

    /// The meter `id` as of the current generation, resolved when a megaflow is installed.
    /// `None` when there is no such meter (the meter action then passes every packet).
    fn meter(&self, id: u32) -> Option<Arc<dyn Policer>> {
        let _ = id;
        None
    }
}

/// Makes one [`Upcall`] per poll-mode thread (the argument is the thread index).
pub type UpcallFactory = Box<dyn Fn(usize) -> Box<dyn Upcall> + Send + Sync>;

impl Policer for MeterState {
    #[inline]
    fn police(&self, now_ns: u64, bytes: u32) -> Police {
        match MeterState::police(self, now_ns, bytes) {
            MeterVerdict::Pass => Police::Pass,
            MeterVerdict::Drop { .. } => Police::Drop,
            MeterVerdict::Remark { prec } => Police::Remark(prec),
        }
    }
}

/// The real translator: the pipeline's current snapshot. Generation reads are one atomic
/// load; each translation loads the snapshot once (lock-free).
impl Upcall for Arc<PipelineCell> {
    #[inline]
    fn generation(&self) -> u64 {
        PipelineCell::generation(self)
    }

    fn translate(&mut self, key: &FlowKey, out: &mut Translation) {
        PipelineCell::translate(self, key, out);
    }

    fn changes_since(&self, cursor: &mut Cursor, out: &mut Vec<Arc<Published>>) -> Since {
        PipelineCell::changes_since(self, cursor, out)
    }

    fn meter(&self, id: u32) -> Option<Arc<dyn Policer>> {
        let m: Arc<dyn Policer> = self.load().meter(id)?.clone();
        Some(m)
    }
}

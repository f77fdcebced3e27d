//! Megaflows: a masked key, the mask, the compiled actions and counters — and the per-thread
//! arena that owns them.
//!
//! Size and owner: one [`Arena`] per poll-mode thread holding at most `max_megaflows`
//! (default 200k) megaflows; only that thread reads or writes it. The exact-match cache and
//! the classifier name megaflows by [`MegaflowId`] (slot index + slot generation), so a slot
//! that is freed and reused never answers for an id that pointed at its previous tenant.
//!
//! Actions are compiled once, at install: `Output(ofport)` becomes an index into the thread's
//! tx table, meters are resolved to their token bucket, and a [`Plan`] records the cheap cases
//! (drop, a single output that moves the packet) so the executor skips the general loop.
//!
//! Counters: a megaflow counts packets and bytes in plain `u64`s (the thread owns it) and adds
//! them to the flow entries' [`FlowCounters`] when the thread flushes (every ~100 ms and when the
//! megaflow dies). Flushing walks only the "dirty" list of megaflows hit since the last flush.

use std::sync::Arc;

use packet::{Field, FlowKey};
use pipeline::{DpAction, FlowCounters, PacketInReason, Translation};

use crate::upcall::Policer;

/// Names a megaflow in its thread's [`Arena`]: slot index plus the slot's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MegaflowId {
    idx: u32,
    gen: u32,
}

impl MegaflowId {
    /// An id for slot `idx` at generation `gen`.
    pub const fn new(idx: u32, gen: u32) -> MegaflowId {
        MegaflowId { idx, gen }
    }

    /// The slot index.
    pub const fn index(self) -> usize {
        self.idx as usize
    }

    /// The slot generation the id was issued at.
    pub const fn generation(self) -> u32 {
        self.gen
    }
}

/// One compiled action.
#[derive(Clone)]
pub enum Op {
    /// Send to the port at this index of the thread's tx table.
    Output(u16),
    /// Rewrite a header field.
    SetField {
        /// The field.
        field: Field,
        /// Its new value.
        value: u128,
    },
    /// Push a VLAN tag.
    PushVlan {
        /// Ethertype of the tag.
        tpid: u16,
        /// PCP/DEI/VID.
        tci: u16,
    },
    /// Pop the outer VLAN tag.
    PopVlan,
    /// Decrement the TTL / hop limit.
    DecTtl,
    /// Set the egress queue (stored in `Meta::user`).
    SetQueue(u32),
    /// Police through a meter.
    Meter(Arc<dyn Policer>),
    /// Copy the packet to the packet-in queue.
    Controller {
        /// Why.
        reason: PacketInReason,
        /// Bytes to copy at most.
        max_len: u16,
        /// Deciding table.
        table_id: u8,
        /// Deciding flow entry's cookie.
        cookie: u64,
    },
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Output(i) => write!(f, "output(tx#{i})"),
            Op::SetField { field, value } => write!(f, "set({}={value:#x})", field.name()),
            Op::PushVlan { tpid, tci } => write!(f, "push_vlan({tpid:#06x},{tci:#06x})"),
            Op::PopVlan => f.write_str("pop_vlan"),
            Op::DecTtl => f.write_str("dec_ttl"),
            Op::SetQueue(q) => write!(f, "set_queue({q})"),
            Op::Meter(_) => f.write_str("meter"),
            Op::Controller { reason, .. } => write!(f, "controller({reason:?})"),
        }
    }
}

/// How the executor handles a megaflow's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No output, no packet-in: free the packet (counted as "no action").
    Drop,
    /// The only action is one output: move the packet there, no copy, no rewrite.
    Forward(u16),
    /// Run the ops in order. `move_at` is the op index whose output takes the packet itself
    /// (the last output, when no packet-in follows it); every other output sends a copy.
    General {
        /// Index into the ops of the output that moves the packet.
        move_at: Option<usize>,
    },
}

/// Compiled actions: the ops and the plan.
#[derive(Debug, Clone)]
pub struct Actions {
    /// The ops, in order.
    pub ops: Vec<Op>,
    /// The shortcut the executor takes.
    pub plan: Plan,
}

impl Default for Actions {
    fn default() -> Self {
        Actions {
            ops: Vec::new(),
            plan: Plan::Drop,
        }
    }
}

/// Maps OpenFlow port numbers to the thread's tx table indices. Sorted; looked up only when a
/// megaflow is compiled.
#[derive(Debug, Clone, Default)]
pub struct PortMap {
    sorted: Vec<(u32, u16)>,
}

impl PortMap {
    /// Builds the map from `(ofport, tx index)` pairs.
    pub fn new(mut pairs: Vec<(u32, u16)>) -> PortMap {
        pairs.sort_unstable();
        PortMap { sorted: pairs }
    }

    /// The tx index of `ofport`.
    pub fn get(&self, ofport: u32) -> Option<u16> {
        self.sorted
            .binary_search_by_key(&ofport, |p| p.0)
            .ok()
            .map(|i| self.sorted[i].1)
    }
}

impl Actions {
    /// Compiles a translation's actions into `self` (reusing its storage). Outputs to ports
    /// this thread does not know are left out, as are meters `meter` cannot resolve.
    pub fn compile(
        &mut self,
        actions: &[DpAction],
        ports: &PortMap,
        meter: &dyn Fn(u32) -> Option<Arc<dyn Policer>>,
    ) {
        self.ops.clear();
        for a in actions {
            let op = match *a {
                DpAction::Output(p) => match ports.get(p) {
                    Some(i) => Op::Output(i),
                    None => continue,
                },
                DpAction::SetField { field, value } => Op::SetField { field, value },
                DpAction::PushVlan { tpid, tci } => Op::PushVlan { tpid, tci },
                DpAction::PopVlan => Op::PopVlan,
                DpAction::DecTtl => Op::DecTtl,
                DpAction::SetQueue(q) => Op::SetQueue(q),
                DpAction::Meter(id) => match meter(id) {
                    Some(m) => Op::Meter(m),
                    None => continue,
                },
                DpAction::Controller {
                    reason,
                    max_len,
                    table_id,
                    cookie,
                } => Op::Controller {
                    reason,
                    max_len,
                    table_id,
                    cookie,
                },
            };
            self.ops.push(op);
        }
        self.plan = plan_of(&self.ops);
    }
}

fn plan_of(ops: &[Op]) -> Plan {
    if let [Op::Output(i)] = ops {
        return Plan::Forward(*i);
    }
    let last_out = ops.iter().rposition(|o| matches!(o, Op::Output(_)));
    let last_pi = ops.iter().rposition(|o| matches!(o, Op::Controller { .. }));
    match (last_out, last_pi) {
        (None, None) => Plan::Drop,
        (Some(o), Some(p)) if p > o => Plan::General { move_at: None },
        (o, _) => Plan::General { move_at: o },
    }
}

/// A cached flow: packets equal to `key` under `mask` get `actions`.
#[derive(Debug)]
pub struct Megaflow {
    /// The key, already masked.
    pub key: FlowKey,
    /// The mask.
    pub mask: FlowKey,
    /// Compiled actions.
    pub actions: Actions,
    flows: Vec<Arc<FlowCounters>>,
    packets: u64,
    bytes: u64,
    dirty: bool,
    /// Last time (ms of `pipeline::dpaction::now_ms`) a packet hit it, updated at flush.
    pub last_used_ms: u64,
}

impl Megaflow {
    /// A megaflow for `key` under `tr.mask` with compiled `actions`.
    pub fn new(key: &FlowKey, tr: &Translation, actions: Actions, now_ms: u64) -> Megaflow {
        Megaflow {
            key: key.masked(&tr.mask),
            mask: tr.mask,
            actions,
            flows: tr.flows.clone(),
            packets: 0,
            bytes: 0,
            dirty: false,
            last_used_ms: now_ms,
        }
    }

    /// Counts packets not yet flushed.
    pub fn unflushed(&self) -> (u64, u64) {
        (self.packets, self.bytes)
    }

    /// Counts packets directly on the megaflow (for one not in an [`Arena`]).
    pub fn count(&mut self, packets: u64, bytes: u64) {
        self.packets += packets;
        self.bytes += bytes;
    }

    /// Adds the unflushed counts to every flow entry's counters and zeroes them.
    pub fn flush(&mut self, now_ms: u64) {
        if self.packets != 0 {
            for f in &self.flows {
                f.add(self.packets, self.bytes, now_ms);
            }
            self.last_used_ms = now_ms;
        }
        self.packets = 0;
        self.bytes = 0;
        self.dirty = false;
    }
}

struct Slot {
    gen: u32,
    flow: Option<Megaflow>,
}

/// The megaflows of one thread, by [`MegaflowId`].
pub struct Arena {
    slots: Vec<Slot>,
    free: Vec<u32>,
    dirty: Vec<u32>,
    live: usize,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena").field("live", &self.live).finish()
    }
}

impl Arena {
    /// An empty arena with room reserved for `capacity` megaflows' bookkeeping.
    pub fn new(capacity: usize) -> Arena {
        Arena {
            slots: Vec::new(),
            free: Vec::new(),
            dirty: Vec::with_capacity(capacity.min(1 << 20)),
            live: 0,
        }
    }

    /// Megaflows alive.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no megaflow is alive.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Stores a megaflow and returns its id.
    pub fn insert(&mut self, mf: Megaflow) -> MegaflowId {
        self.live += 1;
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.flow = Some(mf);
            return MegaflowId::new(i, s.gen);
        }
        self.slots.push(Slot {
            gen: 1,
            flow: Some(mf),
        });
        MegaflowId::new(self.slots.len() as u32 - 1, 1)
    }

    /// The megaflow `id` names, if it is still alive.
    #[inline(always)]
    pub fn get(&self, id: MegaflowId) -> Option<&Megaflow> {
        match self.slots.get(id.index()) {
            Some(s) if s.gen == id.gen => s.flow.as_ref(),
            _ => None,
        }
    }

    /// The megaflow `id` names, writable.
    #[inline(always)]
    pub fn get_mut(&mut self, id: MegaflowId) -> Option<&mut Megaflow> {
        match self.slots.get_mut(id.index()) {
            Some(s) if s.gen == id.gen => s.flow.as_mut(),
            _ => None,
        }
    }

    /// Counts one packet of `bytes` on megaflow `id` (no-op for a stale id).
    #[inline(always)]
    pub fn count(&mut self, id: MegaflowId, packets: u64, bytes: u64) {
        if let Some(s) = self.slots.get_mut(id.index()) {
            if s.gen == id.gen {
                if let Some(mf) = s.flow.as_mut() {
                    mf.packets += packets;
                    mf.bytes += bytes;
                    if !mf.dirty {
                        mf.dirty = true;
                        self.dirty.push(id.idx);
                    }
                }
            }
        }
    }

    /// Removes megaflow `id`, flushing its counters first. The id (and every copy of it in
    /// the caches) goes stale.
    pub fn remove(&mut self, id: MegaflowId, now_ms: u64) -> Option<Megaflow> {
        let s = self.slots.get_mut(id.index())?;
        if s.gen != id.gen {
            return None;
        }
        let mut mf = s.flow.take()?;
        mf.flush(now_ms);
        s.gen = s.gen.wrapping_add(1).max(1);
        self.free.push(id.idx);
        self.live -= 1;
        Some(mf)
    }

    /// Flushes the counters of every megaflow hit since the last flush.
    pub fn flush_dirty(&mut self, now_ms: u64) {
        for i in self.dirty.drain(..) {
            if let Some(mf) = self.slots[i as usize].flow.as_mut() {
                mf.flush(now_ms);
            }
        }
    }

    /// Flushes every counter, then removes every megaflow.
    pub fn clear(&mut self, now_ms: u64) {
        self.flush_dirty(now_ms);
        self.free.clear();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.flow.take().is_some() {
                s.gen = s.gen.wrapping_add(1).max(1);
            }
            self.free.push(i as u32);
        }
        self.free.reverse();
        self.live = 0;
    }

    /// Ids of the megaflows in slots `start..start + n` (wrapping), for incremental sweeps.
    /// Returns the slot to start the next sweep at.
    pub fn sweep(&self, start: usize, n: usize, mut f: impl FnMut(MegaflowId, &Megaflow)) -> usize {
        let len = self.slots.len();
        if len == 0 {
            return 0;
        }
        let mut i = start % len;
        for _ in 0..n.min(len) {
            let s = &self.slots[i];
            if let Some(mf) = &s.flow {
                f(MegaflowId::new(i as u32, s.gen), mf);
            }
            i = (i + 1) % len;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_meter(_: u32) -> Option<Arc<dyn Policer>> {
        None
    }

    fn compile(actions: &[DpAction]) -> Actions {
        let ports = PortMap::new(vec![(1, 0), (2, 1), (7, 2)]);
        let mut a = Actions::default();
        a.compile(actions, &ports, &no_meter);
        a
    }

    #[test]
    fn plans_pick_the_cheap_cases() {
        assert_eq!(compile(&[]).plan, Plan::Drop);
        assert_eq!(compile(&[DpAction::Output(7)]).plan, Plan::Forward(2));
        // Unknown ports vanish; what is left may be a single forward.
        assert_eq!(
            compile(&[DpAction::Output(99), DpAction::Output(2)]).plan,
            Plan::Forward(1)
        );
        assert_eq!(
            compile(&[DpAction::Output(1), DpAction::PopVlan, DpAction::Output(2)]).plan,
            Plan::General { move_at: Some(2) }
        );
        let pi = DpAction::Controller {
            reason: PacketInReason::Action,
            max_len: 128,
            table_id: 0,
            cookie: 0,
        };
        assert_eq!(
            compile(&[DpAction::Output(1), pi.clone()]).plan,
            Plan::General { move_at: None }
        );
        assert_eq!(compile(&[pi]).plan, Plan::General { move_at: None });
        // A meter that cannot be resolved is left out.
        assert_eq!(compile(&[DpAction::Meter(3)]).plan, Plan::Drop);
    }

    #[test]
    fn port_map_finds_ports() {
        let m = PortMap::new(vec![(9, 3), (1, 0), (5, 2)]);
        assert_eq!(m.get(5), Some(2));
        assert_eq!(m.get(9), Some(3));
        assert_eq!(m.get(4), None);
    }

    #[test]
    fn arena_ids_go_stale_and_counters_flush() {
        let fc = Arc::new(FlowCounters::default());
        let mut tr = Translation::default();
        tr.clear();
        tr.flows.push(fc.clone());
        tr.mask.set_all(Field::InPort);
        let mut key = FlowKey::ZERO;
        key.set(Field::InPort, 3);
        key.set(Field::TpDst, 80);
        let mut arena = Arena::new(16);
        let id = arena.insert(Megaflow::new(&key, &tr, Actions::default(), 1));
        assert_eq!(
            arena.get(id).unwrap().key.get(Field::TpDst),
            0,
            "key is masked"
        );
        arena.count(id, 2, 120);
        arena.count(id, 1, 60);
        arena.flush_dirty(5);
        assert_eq!(fc.packets.load(std::sync::atomic::Ordering::Relaxed), 3);
        assert_eq!(fc.bytes.load(std::sync::atomic::Ordering::Relaxed), 180);
        arena.count(id, 1, 60);
        let mf = arena.remove(id, 6).unwrap();
        assert_eq!(mf.unflushed(), (0, 0));
        assert_eq!(fc.packets.load(std::sync::atomic::Ordering::Relaxed), 4);
        assert!(arena.get(id).is_none());
        let id2 = arena.insert(Megaflow::new(&key, &tr, Actions::default(), 7));
        assert_eq!(id2.index(), id.index());
        assert_ne!(id2, id);
        assert!(arena.get(id).is_none());
        arena.clear(8);
        assert!(arena.get(id2).is_none());
        assert!(arena.is_empty());
    }
}

//! Megaflows: a masked key, the mask, the compiled actions and counters — and the per-thread
//! arena that owns them.
//!
//! Size and owner: one [`Arena`] per poll-mode thread holding at most `max_megaflows`
//! (default 200k) megaflows of 512 + 32 bytes each (109 MB at the default), reserved up front and
//! never grown; only that thread reads or writes it. The exact-match cache and the classifier
//! name megaflows by [`MegaflowId`] (slot index + slot generation), so a slot that is freed
//! and reused never answers for an id that pointed at its previous tenant.
//!
//! A full arena makes room by eviction, not by refusing the install: [`Arena::victim`] runs a
//! clock sweep over the slots (approximate LRU: a megaflow used since the hand last passed it
//! gets a second chance), the victim's counters are flushed and its slot is refilled in place
//! by the next install ([`Arena::insert_from`]), its action and flow-counter lists reused. So
//! a flood of new flows reaches a steady state with no allocation and no page faults.
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
use pipeline::{DpAction, FlowCounters, PacketInReason, Trail, Translation};

use crate::tunnel_drops::SendCounter;
use crate::tunnel_flows::TunFields;
use crate::tunnels::{TunnelOutput, TunnelSend, Tunnels};
use crate::upcall::Policer;

#[path = "megaflow_arena.rs"]
mod arena;
pub use arena::{Arena, Hot, Life};

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

    /// The id as one word (index high, generation low), for tables that store it packed.
    pub const fn to_bits(self) -> u64 {
        (self.idx as u64) << 32 | self.gen as u64
    }

    /// The id [`MegaflowId::to_bits`] packed.
    pub const fn from_bits(bits: u64) -> MegaflowId {
        MegaflowId {
            idx: (bits >> 32) as u32,
            gen: bits as u32,
        }
    }
}

/// One compiled action.
#[derive(Clone)]
pub enum Op {
    /// Send to the port at this index of the thread's tx table.
    Output(u16),
    /// Send a copy, in a tunnel's outer headers, to the underlay port at this tx index
    /// (output to a tunnel port, [`crate::tunnels`]).
    Tunnel {
        /// The outer headers, the underlay's MTU and the too-big counter.
        out: TunnelOutput,
        /// The underlay port's tx index.
        port: u16,
    },
    /// Count a packet output to a tunnel that cannot send it (no headers for its destination
    /// yet, or the flow named none) here; the packet's other actions still run.
    TunnelDrop(SendCounter),
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
    /// Push an MPLS label stack entry.
    PushMpls {
        /// The new Ethernet type.
        ethertype: u16,
        /// The entry.
        lse: u32,
    },
    /// Pop the top MPLS entry, setting the Ethernet type.
    PopMpls(u16),
    /// Decrement the top MPLS entry's TTL.
    DecMplsTtl,
    /// Copy the inner TTL out to the top MPLS entry.
    CopyTtlOut,
    /// Copy the top MPLS entry's TTL in.
    CopyTtlIn,
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
            Op::Tunnel { port, .. } => write!(f, "tunnel(tx#{port})"),
            Op::TunnelDrop(_) => f.write_str("tunnel_drop"),
            Op::SetField { field, value } => write!(f, "set({}={value:#x})", field.name()),
            Op::PushVlan { tpid, tci } => write!(f, "push_vlan({tpid:#06x},{tci:#06x})"),
            Op::PopVlan => f.write_str("pop_vlan"),
            Op::DecTtl => f.write_str("dec_ttl"),
            Op::PushMpls { ethertype, lse } => write!(f, "push_mpls({ethertype:#06x},{lse:#010x})"),
            Op::PopMpls(t) => write!(f, "pop_mpls({t:#06x})"),
            Op::DecMplsTtl => f.write_str("dec_mpls_ttl"),
            Op::CopyTtlOut => f.write_str("copy_ttl_out"),
            Op::CopyTtlIn => f.write_str("copy_ttl_in"),
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

/// Compiled actions: the ops and the plan. The plan comes first (`repr(C)`) so that it
/// shares a cache line with a [`Megaflow`]'s generation and counters.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct Actions {
    /// The shortcut the executor takes.
    pub plan: Plan,
    /// The ops, in order.
    pub ops: Vec<Op>,
}

impl Default for Actions {
    fn default() -> Self {
        Actions {
            ops: Vec::new(),
            plan: Plan::Drop,
        }
    }
}

/// Maps OpenFlow port numbers to the thread's tx table indices, and tunnel ports to their
/// outer headers and underlay port. Sorted; looked up only when a megaflow is compiled.
#[derive(Debug, Clone, Default)]
pub struct PortMap {
    sorted: Vec<(u32, u16)>,
    tunnels: Option<Arc<Tunnels>>,
}

impl PortMap {
    /// Builds the map from `(ofport, tx index)` pairs.
    pub fn new(mut pairs: Vec<(u32, u16)>) -> PortMap {
        pairs.sort_unstable();
        PortMap {
            sorted: pairs,
            tunnels: None,
        }
    }

    /// Resolves outputs to tunnel ports through `tunnels` from now on.
    pub fn set_tunnels(&mut self, tunnels: Option<Arc<Tunnels>>) {
        self.tunnels = tunnels;
    }

    /// What output to tunnel port `ofport` compiles to when the flow set `fields` before it
    /// ([`Tunnels::send`]): `None` when it is not a tunnel, has no next hop, or its underlay
    /// port is not in the tx table.
    pub fn tunnel(&self, ofport: u32, fields: &TunFields) -> Option<Op> {
        match self.tunnels.as_ref()?.send(ofport, fields)? {
            TunnelSend::Out(out) => {
                let port = self.get(out.underlay)?;
                Some(Op::Tunnel { out, port })
            }
            TunnelSend::Drop(count) => Some(Op::TunnelDrop(count)),
        }
    }

    /// The OpenFlow port at tx index `index` (a linear search: for dumps, not packets).
    pub fn ofport_of(&self, index: u16) -> Option<u32> {
        self.sorted.iter().find(|p| p.1 == index).map(|p| p.0)
    }

    /// The tx index of `ofport`.
    pub fn get(&self, ofport: u32) -> Option<u16> {
        self.sorted
            .binary_search_by_key(&ofport, |p| p.0)
            .ok()
            .map(|i| self.sorted[i].1)
    }
}

/// What [`Actions::in_place`] says about a megaflow's actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// After [`crate::execute::Executor::run_in_place`] (which also encapsulates a packet whose
    /// moving output is a tunnel), the packet goes to this tx table entry.
    Forward(u16),
    /// The packet is dropped (no output).
    Drop,
    /// The actions need the packet by value (no output takes it): run them with
    /// [`crate::execute::Executor::run`].
    No,
}

impl Actions {
    /// How these actions can run on a packet that stays in its rx batch, for the batch
    /// hand-over ([`crate::execute::Executor::forward_batch`]).
    #[inline]
    pub fn in_place(&self) -> InPlace {
        match self.plan {
            Plan::Forward(port) => InPlace::Forward(port),
            Plan::Drop => InPlace::Drop,
            Plan::General { move_at: Some(k) } => match self.ops.get(k) {
                Some(Op::Output(port)) => InPlace::Forward(*port),
                // The packet takes the outer headers in its own headroom where it is, and the
                // batch goes to the underlay (`run_in_place` encapsulates).
                Some(Op::Tunnel { port, .. }) => InPlace::Forward(*port),
                _ => InPlace::No,
            },
            Plan::General { move_at: None } => InPlace::No,
        }
    }

    /// Compiles a translation's actions into `self` (reusing its storage). Outputs to ports
    /// this thread does not know are left out, as are meters `meter` cannot resolve.
    pub fn compile(
        &mut self,
        actions: &[DpAction],
        ports: &PortMap,
        meter: &dyn Fn(u32) -> Option<Arc<dyn Policer>>,
    ) {
        self.ops.clear();
        // The tunnel fields set so far: a per-flow tunnel's destination at its output.
        let mut tun = TunFields::default();
        for a in actions {
            let op = match *a {
                DpAction::Output(p) => match ports.get(p) {
                    Some(i) => Op::Output(i),
                    None => match ports.tunnel(p, &tun) {
                        Some(op) => op,
                        None => continue,
                    },
                },
                // Tunnel fields change no packet byte: they matter only here.
                DpAction::SetField { field, value } if tun.see(field, value) => continue,
                DpAction::SetField { field, value } => Op::SetField { field, value },
                DpAction::PushVlan { tpid, tci } => Op::PushVlan { tpid, tci },
                DpAction::PopVlan => Op::PopVlan,
                DpAction::DecTtl => Op::DecTtl,
                DpAction::PushMpls { ethertype, lse } => Op::PushMpls { ethertype, lse },
                DpAction::PopMpls(t) => Op::PopMpls(t),
                DpAction::DecMplsTtl => Op::DecMplsTtl,
                DpAction::CopyTtlOut => Op::CopyTtlOut,
                DpAction::CopyTtlIn => Op::CopyTtlIn,
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
    let last_out = ops
        .iter()
        .rposition(|o| matches!(o, Op::Output(_) | Op::Tunnel { .. }));
    let last_pi = ops.iter().rposition(|o| matches!(o, Op::Controller { .. }));
    let counted = ops.iter().any(|o| matches!(o, Op::TunnelDrop(_)));
    match (last_out, last_pi) {
        // A tunnel drop counts the packet where its reason is.
        (None, None) if counted => Plan::General { move_at: None },
        (None, None) => Plan::Drop,
        (Some(o), Some(p)) if p > o => Plan::General { move_at: None },
        (o, _) => Plan::General { move_at: o },
    }
}

/// A cached flow: packets equal to `key` under `mask` get `actions`.
///
/// Layout (`repr(C)`, 512 bytes): the first cache line holds the flags, the counters of a
/// megaflow outside an arena, the flow counter list and the plan, the second the ops and the
/// trail (what revalidation reads first), the rest the key and mask (read at install and eviction only). In an [`Arena`], what every hit
/// reads or writes (generation, counters, where the packets go) is in the slot's [`Hot`]
/// entry instead; the general executor path reads the ops here.
#[derive(Debug)]
#[repr(C)]
pub struct Megaflow {
    dirty: bool,
    packets: u64,
    bytes: u64,
    flows: Vec<Arc<FlowCounters>>,
    /// Compiled actions.
    pub actions: Actions,
    /// Last time (ms of `pipeline::dpaction::now_ms`) a packet hit it, updated at flush.
    pub last_used_ms: u64,
    /// The tables its translation looked up and what decided there: which flow changes may
    /// affect it ([`crate::revalidate`]).
    pub trail: Trail,
    /// The key, already masked.
    pub key: FlowKey,
    /// The mask.
    pub mask: FlowKey,
}

const _: () = assert!(std::mem::size_of::<Megaflow>() == 512);
// The trail shares the second cache line with the ops.
const _: () = assert!(std::mem::offset_of!(Megaflow, trail) + std::mem::size_of::<Trail>() <= 128);
// The plan ends within the first cache line.
const _: () = assert!(std::mem::offset_of!(Megaflow, actions) + std::mem::size_of::<Plan>() <= 64);

impl Megaflow {
    /// A megaflow for `key` under `tr.mask` with compiled `actions`. Allocates; the upcall
    /// path refills arena slots in place instead ([`Arena::insert_from`]).
    pub fn new(key: &FlowKey, tr: &Translation, actions: Actions, now_ms: u64) -> Megaflow {
        let mut mf = Megaflow::vacant();
        mf.refill(key, tr, now_ms);
        mf.actions = actions;
        mf
    }

    /// A megaflow that matches nothing yet: storage waiting for [`Megaflow::refill`].
    fn vacant() -> Megaflow {
        Megaflow {
            dirty: false,
            packets: 0,
            bytes: 0,
            flows: Vec::new(),
            actions: Actions::default(),
            last_used_ms: 0,
            trail: Trail::UNKNOWN,
            key: FlowKey::ZERO,
            mask: FlowKey::ZERO,
        }
    }

    /// Makes this megaflow the one for `key` under `tr.mask`, reusing its storage: the flow
    /// counter list is refilled in place (no allocation once it has grown), counts restart at
    /// zero. The actions are left as they are; compile into [`Megaflow::actions`] next.
    pub fn refill(&mut self, key: &FlowKey, tr: &Translation, now_ms: u64) {
        self.key = key.masked(&tr.mask);
        self.mask = tr.mask;
        self.trail = tr.trail;
        // A churning table mostly replaces a megaflow with one for the same flow entries:
        // keep the counter references then (no reference-count traffic).
        let same = self.flows.len() == tr.flows.len()
            && self
                .flows
                .iter()
                .zip(&tr.flows)
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.flows.clear();
            self.flows.extend(tr.flows.iter().cloned());
        }
        self.packets = 0;
        self.bytes = 0;
        self.dirty = false;
        self.last_used_ms = now_ms;
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

/// Megaflows of one batch that are run but not cached (uncacheable translations, or no room),
/// refilled in place batch after batch so they do not allocate once warm.
#[derive(Debug, Default)]
pub struct MegaflowPool {
    flows: Vec<Megaflow>,
    len: usize,
}

impl MegaflowPool {
    /// A pool with storage for `n` megaflows.
    pub fn with_capacity(n: usize) -> MegaflowPool {
        MegaflowPool {
            flows: (0..n).map(|_| Megaflow::vacant()).collect(),
            len: 0,
        }
    }

    /// Megaflows in use.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is in use.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Megaflow `i` of this batch.
    pub fn get(&self, i: usize) -> Option<&Megaflow> {
        self.flows[..self.len].get(i)
    }

    /// Megaflow `i` of this batch, writable.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Megaflow> {
        self.flows[..self.len].get_mut(i)
    }

    /// Refills the next megaflow for `key` under `tr` and returns its index and the megaflow
    /// (compile its actions next).
    pub fn push_from(
        &mut self,
        key: &FlowKey,
        tr: &Translation,
        now_ms: u64,
    ) -> (usize, &mut Megaflow) {
        if self.len == self.flows.len() {
            self.flows.push(Megaflow::vacant());
        }
        let i = self.len;
        self.len += 1;
        let mf = &mut self.flows[i];
        mf.refill(key, tr, now_ms);
        (i, mf)
    }

    /// Ends the batch: every megaflow is released (storage kept).
    pub fn clear(&mut self) {
        for mf in &mut self.flows[..self.len] {
            mf.flows.clear();
        }
        self.len = 0;
    }
}

#[cfg(test)]
#[path = "megaflow_tests.rs"]
mod tests;

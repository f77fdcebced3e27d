//! Translation: one flow key through the OpenFlow tables, producing datapath actions, the
//! megaflow mask and the matched entries' counters.
//!
//! Tables are walked from 0 following goto-table. Apply-actions act at once on a working copy
//! of the key, so a set-field changes what later tables match; write-actions accumulate in an
//! action set executed when no goto-table follows, in OpenFlow's order (copy TTL in, pop
//! VLAN, pop MPLS, push MPLS, push VLAN, copy TTL out, dec TTL, dec MPLS TTL, set TTL, set
//! MPLS TTL, set-fields, set-queue, then the group or else the output). No matching
//! entry and no table-miss entry means drop (OpenFlow 1.3 has no implicit packet-in).
//!
//! The mask is kept sound by three rules: every lookup ORs in the masks of the subtables it
//! visited; every action that depends on a key value (output checks in_port, dec-TTL reads
//! the TTL, select groups hash L2–L4, NORMAL reads in_port/eth_src/eth_dst/vlan) adds those
//! fields; and every action that moves bits from one place to another (push/pop VLAN, push
//! MPLS from the IP header or the old top entry) adds the source bits in full.
//!
//! MPLS: push_mpls sets the working key's `eth_type` and top entry (what a new extraction
//! would give); pop_mpls sets `eth_type` and clears the entry. Under a bottom-of-stack entry
//! extraction reads an IPv4 or IPv6 header and its L4 header into the key
//! ([`packet::extract`]), so after a pop to 0x0800 or 0x86dd later tables match the packet
//! as it then is (Open vSwitch re-parses it by recirculating); the mask stays sound because
//! translation is a function of the key alone. Below a top entry that is not the bottom of
//! the stack nothing is in the key, so after its pop the next entry is not known to later
//! tables in the same pass (it reads as 0), and copy_ttl_out/in leave the key's TTLs as
//! they were.
//! The datapath actions themselves work on the packet's bytes and are right either way: a
//! push onto a packet that has a stack copies its real top entry, and dec_mpls_ttl on an
//! entry the key does not hold is checked by the datapath (TTL 0 or 1: dropped and counted,
//! without the packet-in a known TTL would give).
//!
//! Groups: each bucket acts on a copy of the packet. As datapath actions are one sequence on
//! one packet, a bucket's header changes are undone after it by compensating actions:
//! `SetField` with the value from before the bucket for every changed field (those fields
//! join the mask, since the restored value comes from the key), and pop/push for VLAN tag
//! changes (a re-pushed tag uses TPID 0x8100, or 0x88a8 for the outer tag of two: the key does
//! not record the original TPID). MPLS entries a bucket pushed are popped; one entry it
//! popped is pushed back from the key; a bucket that pops two or more cannot be undone (the
//! key holds only the top entry) and the packet is dropped.
//!
//! The translation also records its [`crate::changes::Trail`]: each table looked up, the
//! priority of the entry that decided there, and whether the key had been rewritten by then,
//! which is what lets the datapath keep a megaflow across flow changes that cannot affect it.
//!
//! Bounds: group chains deeper than [`MAX_GROUP_DEPTH`] are cut; a translation producing more
//! than `PipelineConfig::max_actions` actions drops the packet and is not cacheable.
//!
//! Cost: no allocation once `out`'s vectors have grown (the action set is a fixed array);
//! NORMAL takes the MAC table's mutex, which is fine since translation runs only on a miss.
//!
//! Tracing (`hayate ctl BRIDGE trace`): [`Pipeline::translate_observed`] runs the same walk
//! and tells an [`Observer`] each table's lookup ([`crate::trace`]); a trace leaves the table
//! counters and the MAC table alone. [`Pipeline::translate`] passes [`NoObserver`], whose
//! empty methods compile away.

use std::sync::atomic::Ordering;

use arrayvec::ArrayVec;
use packet::key::parsed;
use packet::{Field, FlowKey};

use crate::dpaction::{now_ms, DpAction, PacketInReason, Translation};
use crate::group::MAX_GROUP_DEPTH;
use crate::model::{ports, Action, Bucket, GroupType, Instruction, CONTROLLER_MAX_LEN_ALL};
use crate::normal::is_multicast;
use crate::pipeline::{select_hash_mask, Pipeline};
use crate::trace::{NoObserver, Observer};

/// The write-actions action set: at most one action of each kind (one set-field per field).
#[derive(Debug, Default)]
struct ActionSet {
    copy_ttl_in: bool,
    pop_vlan: bool,
    pop_mpls: Option<u16>,
    push_mpls: Option<u16>,
    push_vlan: Option<u16>,
    copy_ttl_out: bool,
    dec_ttl: bool,
    dec_mpls_ttl: bool,
    set_ttl: Option<u8>,
    set_mpls_ttl: Option<u8>,
    set_fields: ArrayVec<(Field, u128), 32>,
    queue: Option<u32>,
    group: Option<u32>,
    output: Option<(u32, u16)>,
}

impl ActionSet {
    fn clear(&mut self) {
        *self = ActionSet::default();
    }

    fn write(&mut self, actions: &[Action]) {
        for a in actions {
            match *a {
                Action::Output { port, max_len } => self.output = Some((port, max_len)),
                Action::Group(g) => self.group = Some(g),
                Action::SetQueue(q) => self.queue = Some(q),
                Action::SetField { field, value } => {
                    if let Some(slot) = self.set_fields.iter_mut().find(|(f, _)| *f == field) {
                        slot.1 = value;
                    } else if self.set_fields.try_push((field, value)).is_err() {
                        // More distinct fields than exist cannot happen; ignore defensively.
                    }
                }
                Action::PushVlan(t) => self.push_vlan = Some(t),
                Action::PopVlan => self.pop_vlan = true,
                Action::DecNwTtl => self.dec_ttl = true,
                Action::SetNwTtl(t) => self.set_ttl = Some(t),
                Action::PushMpls(t) => self.push_mpls = Some(t),
                Action::PopMpls(t) => self.pop_mpls = Some(t),
                Action::SetMplsTtl(t) => self.set_mpls_ttl = Some(t),
                Action::DecMplsTtl => self.dec_mpls_ttl = true,
                Action::CopyTtlOut => self.copy_ttl_out = true,
                Action::CopyTtlIn => self.copy_ttl_in = true,
            }
        }
    }
}

/// Fields a bucket may change that restoration compares (VLAN tags are handled apart).
const RESTORABLE: &[Field] = &[
    Field::TunnelId,
    Field::EthType,
    Field::MplsLse,
    Field::EthDst,
    Field::EthSrc,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::IpProto,
    Field::IpDscp,
    Field::IpEcn,
    Field::IpTtl,
    Field::TpSrc,
    Field::TpDst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::ArpSha,
    Field::ArpOp,
    Field::ArpTha,
    Field::NdTarget,
    Field::Ipv6Label,
];

const VLAN_PRESENT: u128 = 0x1000;

/// Whether an Ethernet type is MPLS's.
fn is_mpls_type(t: u128) -> bool {
    t == 0x8847 || t == 0x8848
}

struct Ctx<'a> {
    p: &'a Pipeline,
    key: FlowKey,
    out: &'a mut Translation,
    /// Table and cookie of the entry deciding now, and whether it is a table-miss entry.
    table_id: u8,
    cookie: u64,
    miss: bool,
    /// NORMAL learns source addresses (not while tracing).
    learn: bool,
    /// dec-TTL found TTL <= 1: stop (within the current group bucket, or everything).
    ttl_stop: bool,
    /// Too many actions: the packet is dropped.
    overflow: bool,
    /// The key differs from the packet's own by an action run so far (outside group
    /// buckets, which undo theirs): later lookups are marked as such on the trail.
    rewritten: bool,
    /// MPLS entries pushed minus popped so far (a group bucket undoes its own).
    mpls_depth: i32,
    /// A pop left an MPLS entry on top that the key does not hold (the key has only the
    /// entry the packet arrived with): dec_mpls_ttl then cannot check the TTL here and leaves
    /// it to the datapath, which drops the packet (counted) when the TTL is 0 or 1.
    mpls_unknown: bool,
}

impl Pipeline {
    /// Translates `key` through the tables into `out` (cleared first). See the module docs.
    #[inline]
    pub fn translate(&self, key: &FlowKey, out: &mut Translation) {
        self.translate_observed(key, out, &mut NoObserver);
    }

    /// [`Pipeline::translate`], telling `obs` each table's lookup. With an observer whose
    /// [`Observer::TRACE`] is true, table counters and MAC learning are left alone.
    pub fn translate_observed<O: Observer>(
        &self,
        key: &FlowKey,
        out: &mut Translation,
        obs: &mut O,
    ) {
        out.clear();
        let mut cx = Ctx {
            p: self,
            key: *key,
            out,
            table_id: 0,
            cookie: 0,
            miss: false,
            learn: !O::TRACE,
            ttl_stop: false,
            overflow: false,
            rewritten: false,
            mpls_depth: 0,
            mpls_unknown: false,
        };
        let mut set = ActionSet::default();
        let mut table = 0u8;
        loop {
            let stats = &self.shared.stats[table as usize];
            if !O::TRACE {
                stats.lookups.fetch_add(1, Ordering::Relaxed);
            }
            let found = self
                .tables
                .get(table as usize)
                .and_then(|t| t.classifier.lookup(&cx.key, &mut cx.out.mask));
            obs.lookup(table, &cx.key, found, cx.out.actions.len());
            let Some(e) = found else {
                cx.out.trail.push(table, 0, cx.rewritten);
                if !O::TRACE {
                    stats.missed.fetch_add(1, Ordering::Relaxed);
                }
                break;
            };
            cx.out.trail.push(table, e.priority, cx.rewritten);
            cx.out.flows.push(e.counters.clone());
            cx.table_id = table;
            cx.cookie = e.cookie;
            cx.miss = e.is_table_miss();
            let mut next = None;
            for ins in &e.instructions {
                match ins {
                    Instruction::Meter(id) => cx.emit(DpAction::Meter(*id)),
                    Instruction::ApplyActions(a) => cx.actions(a, 0),
                    Instruction::ClearActions => set.clear(),
                    Instruction::WriteActions(a) => set.write(a),
                    Instruction::WriteMetadata { value, mask } => {
                        let m = &mut cx.key.w[Field::Metadata.spec().word as usize];
                        *m = (*m & !mask) | (value & mask);
                        cx.rewritten = true;
                    }
                    Instruction::GotoTable(t) => next = Some(*t),
                }
                if cx.halted() {
                    break;
                }
            }
            if cx.halted() {
                break;
            }
            match next {
                Some(t) => table = t,
                None => {
                    cx.action_set(&set);
                    break;
                }
            }
        }
        if cx.overflow {
            cx.out.actions.clear();
            cx.out.cacheable = false;
        }
        obs.finish(&cx.key);
    }
}

impl Ctx<'_> {
    #[inline]
    fn halted(&self) -> bool {
        self.ttl_stop || self.overflow
    }

    #[inline]
    fn emit(&mut self, a: DpAction) {
        if self.out.actions.len() >= self.p.config.max_actions {
            self.overflow = true;
            return;
        }
        self.out.actions.push(a);
    }

    fn unwildcard(&mut self, f: Field) {
        self.out.mask.set_all(f);
    }

    fn action_set(&mut self, set: &ActionSet) {
        if set.copy_ttl_in {
            self.action(&Action::CopyTtlIn, 0);
        }
        if set.pop_vlan {
            self.action(&Action::PopVlan, 0);
        }
        if let Some(t) = set.pop_mpls {
            self.action(&Action::PopMpls(t), 0);
        }
        if let Some(t) = set.push_mpls {
            self.action(&Action::PushMpls(t), 0);
        }
        if let Some(t) = set.push_vlan {
            self.action(&Action::PushVlan(t), 0);
        }
        if set.copy_ttl_out {
            self.action(&Action::CopyTtlOut, 0);
        }
        if set.dec_ttl {
            self.action(&Action::DecNwTtl, 0);
        }
        if set.dec_mpls_ttl {
            self.action(&Action::DecMplsTtl, 0);
        }
        if let Some(t) = set.set_ttl {
            self.action(&Action::SetNwTtl(t), 0);
        }
        if let Some(t) = set.set_mpls_ttl {
            self.action(&Action::SetMplsTtl(t), 0);
        }
        for &(field, value) in &set.set_fields {
            self.action(&Action::SetField { field, value }, 0);
        }
        if let Some(q) = set.queue {
            self.action(&Action::SetQueue(q), 0);
        }
        if let Some(g) = set.group {
            self.action(&Action::Group(g), 0);
        } else if let Some((port, max_len)) = set.output {
            self.action(&Action::Output { port, max_len }, 0);
        }
    }

    fn actions(&mut self, actions: &[Action], depth: usize) {
        for a in actions {
            if self.halted() {
                return;
            }
            self.action(a, depth);
        }
    }

    fn action(&mut self, a: &Action, depth: usize) {
        if self.halted() {
            return;
        }
        match *a {
            Action::Output { port, max_len } => self.output(port, max_len),
            Action::Group(g) => self.group(g, depth),
            Action::SetQueue(q) => self.emit(DpAction::SetQueue(q)),
            Action::SetField { field, value } => self.set_field(field, value),
            Action::PushVlan(tpid) => self.push_vlan(tpid),
            Action::PopVlan => self.pop_vlan(),
            Action::DecNwTtl => {
                if self.is_ip() {
                    self.dec_ttl(Field::IpTtl, DpAction::DecTtl);
                }
            }
            Action::DecMplsTtl => {
                if self.is_mpls() && self.mpls_unknown {
                    self.rewritten = true;
                    self.emit(DpAction::DecMplsTtl);
                } else if self.is_mpls() {
                    self.dec_ttl(Field::MplsTtl, DpAction::DecMplsTtl);
                }
            }
            Action::SetMplsTtl(t) => self.set_field(Field::MplsTtl, u128::from(t)),
            Action::PushMpls(t) => self.push_mpls(t),
            Action::PopMpls(t) => self.pop_mpls(t),
            Action::CopyTtlOut | Action::CopyTtlIn => {
                if self.is_mpls() {
                    self.rewritten = true;
                    self.emit(if *a == Action::CopyTtlOut {
                        DpAction::CopyTtlOut
                    } else {
                        DpAction::CopyTtlIn
                    });
                }
            }
            Action::SetNwTtl(t) => {
                if self.is_ip() {
                    self.key.set(Field::IpTtl, u128::from(t));
                    self.rewritten = true;
                    self.emit(DpAction::SetField {
                        field: Field::IpTtl,
                        value: u128::from(t),
                    });
                }
            }
        }
    }

    fn is_ip(&mut self) -> bool {
        self.unwildcard(Field::EthType);
        matches!(self.key.get(Field::EthType), 0x0800 | 0x86dd)
    }

    fn is_mpls(&mut self) -> bool {
        self.unwildcard(Field::EthType);
        is_mpls_type(self.key.get(Field::EthType))
    }

    /// dec_ttl / dec_mpls_ttl: a TTL of 0 or 1 stops the actions (and, when configured, sends
    /// the packet to the controller with reason INVALID_TTL), as Open vSwitch does.
    fn dec_ttl(&mut self, field: Field, action: DpAction) {
        self.unwildcard(field);
        let ttl = self.key.get(field);
        if ttl <= 1 {
            self.ttl_stop = true;
            if self.p.config.invalid_ttl_to_controller {
                self.controller(PacketInReason::InvalidTtl, CONTROLLER_MAX_LEN_ALL);
            }
            return;
        }
        self.key.set(field, ttl - 1);
        self.rewritten = true;
        self.emit(action);
    }

    /// The new entry is [`packet::mpls::push_entry`]'s; the fields it reads join the mask.
    fn push_mpls(&mut self, ethertype: u16) {
        if self.is_mpls() {
            self.unwildcard(Field::MplsLse);
        } else if self.is_ip() {
            self.unwildcard(Field::IpDscp);
            self.unwildcard(Field::IpTtl);
        }
        let lse = packet::mpls::push_entry(&self.key);
        self.key.set(Field::EthType, u128::from(ethertype));
        self.key.set(Field::MplsLse, u128::from(lse));
        self.rewritten = true;
        self.mpls_depth += 1;
        self.emit(DpAction::PushMpls { ethertype, lse });
    }

    fn pop_mpls(&mut self, ethertype: u16) {
        if !self.is_mpls() {
            return;
        }
        self.key.set(Field::EthType, u128::from(ethertype));
        self.key.set(Field::MplsLse, 0);
        self.mpls_unknown = is_mpls_type(u128::from(ethertype));
        self.rewritten = true;
        self.mpls_depth -= 1;
        self.emit(DpAction::PopMpls(ethertype));
    }

    fn vlan_present(&mut self) -> bool {
        self.out.mask.w[Field::VlanTci.spec().word as usize] |= 0x1000;
        self.key.get(Field::VlanTci) & VLAN_PRESENT != 0
    }

    fn set_field(&mut self, field: Field, value: u128) {
        let value = match field {
            Field::VlanVid | Field::VlanTci => {
                if !self.vlan_present() {
                    return;
                }
                value | VLAN_PRESENT
            }
            Field::VlanPcp => {
                if !self.vlan_present() {
                    return;
                }
                value
            }
            Field::MplsLse | Field::MplsLabel | Field::MplsTc | Field::MplsBos | Field::MplsTtl => {
                if !self.is_mpls() {
                    return;
                }
                value
            }
            _ => value,
        };
        self.key.set(field, value);
        self.rewritten = true;
        self.emit(DpAction::SetField { field, value });
    }

    fn set_parsed(&mut self, vlan: bool, qinq: bool) {
        let mut p = self.key.get(Field::Parsed) as u16 & !(parsed::VLAN | parsed::QINQ);
        if vlan {
            p |= parsed::VLAN;
        }
        if qinq {
            p |= parsed::QINQ;
        }
        self.key.set(Field::Parsed, u128::from(p));
    }

    fn push_vlan(&mut self, tpid: u16) {
        // The new tag copies the outer tag's PCP/VID; the old outer tag becomes the inner one.
        self.unwildcard(Field::VlanTci);
        let old = self.key.get(Field::VlanTci);
        let tci = if old & VLAN_PRESENT != 0 {
            old & !VLAN_PRESENT
        } else {
            0
        };
        self.key.set(Field::CvlanTci, old);
        self.key.set(Field::VlanTci, tci | VLAN_PRESENT);
        self.set_parsed(true, old & VLAN_PRESENT != 0);
        self.rewritten = true;
        self.emit(DpAction::PushVlan {
            tpid,
            tci: tci as u16,
        });
    }

    fn pop_vlan(&mut self) {
        self.unwildcard(Field::VlanTci);
        if self.key.get(Field::VlanTci) & VLAN_PRESENT == 0 {
            // A pop on a packet without a tag: the datapath refuses the rewrite, counts the
            // packet in its rewrite drops and drops it (Open vSwitch skips the pop instead).
            self.emit(DpAction::PopVlan);
            return;
        }
        self.unwildcard(Field::CvlanTci);
        let inner = self.key.get(Field::CvlanTci);
        self.key.set(Field::VlanTci, inner);
        self.key.set(Field::CvlanTci, 0);
        self.set_parsed(inner & VLAN_PRESENT != 0, false);
        self.rewritten = true;
        self.emit(DpAction::PopVlan);
    }

    fn in_port(&mut self) -> u32 {
        self.unwildcard(Field::InPort);
        self.key.get(Field::InPort) as u32
    }

    /// Output to a concrete port (not back to the ingress port, not to a no_fwd port).
    fn output_to(&mut self, port: u32, in_port: u32) {
        if port == in_port {
            return;
        }
        if self.p.port(port).is_some_and(|p| p.no_fwd) {
            return;
        }
        self.emit(DpAction::Output(port));
    }

    fn flood(&mut self, in_port: u32, all: bool) {
        let pipeline = self.p;
        for p in pipeline.ports.iter() {
            if p.no == in_port || p.no_fwd || (!all && (p.no_flood || p.down)) {
                continue;
            }
            self.emit(DpAction::Output(p.no));
        }
    }

    fn output(&mut self, port: u32, max_len: u16) {
        let in_port = self.in_port();
        match port {
            ports::IN_PORT => {
                if !self.p.port(in_port).is_some_and(|p| p.no_fwd) {
                    self.emit(DpAction::Output(in_port));
                }
            }
            ports::FLOOD => self.flood(in_port, false),
            ports::ALL => self.flood(in_port, true),
            ports::NORMAL => self.normal(in_port),
            ports::CONTROLLER => {
                let reason = if self.miss {
                    PacketInReason::NoMatch
                } else {
                    PacketInReason::Action
                };
                self.controller(reason, max_len);
            }
            ports::TABLE | ports::ANY => {}
            p => self.output_to(p, in_port),
        }
    }

    fn controller(&mut self, reason: PacketInReason, max_len: u16) {
        let in_port = self.in_port();
        if self.p.port(in_port).is_some_and(|p| p.no_packet_in) {
            return;
        }
        self.emit(DpAction::Controller {
            reason,
            max_len,
            table_id: self.table_id,
            cookie: self.cookie,
        });
    }

    fn normal(&mut self, in_port: u32) {
        self.unwildcard(Field::EthSrc);
        self.unwildcard(Field::EthDst);
        self.unwildcard(Field::VlanTci);
        let src = self.key.get(Field::EthSrc) as u64;
        let dst = self.key.get(Field::EthDst) as u64;
        let vlan = (self.key.get(Field::VlanVid) & 0x1fff) as u16;
        let mac = &self.p.shared.mac;
        let now = now_ms();
        if self.learn && mac.learn(src, vlan, in_port, now) {
            self.p.shared.bump();
        }
        if is_multicast(dst) {
            return self.flood(in_port, false);
        }
        match mac.lookup(dst, vlan, now) {
            Some(p) => self.output_to(p, in_port),
            None => self.flood(in_port, false),
        }
    }

    fn group(&mut self, id: u32, depth: usize) {
        if depth >= MAX_GROUP_DEPTH {
            return;
        }
        let p = self.p;
        let Some(g) = p.groups.get(id) else {
            return;
        };
        let live = |port: u32| p.port_live(port);
        match g.kind {
            GroupType::All => {
                for b in &g.buckets {
                    self.bucket(b, depth);
                }
            }
            GroupType::Indirect => {
                if let Some(b) = g.buckets.first() {
                    self.bucket(b, depth);
                }
            }
            GroupType::FastFailover => {
                if let Some(b) = g
                    .buckets
                    .iter()
                    .find(|b| p.groups.bucket_live(b, &live, depth))
                {
                    self.bucket(b, depth);
                }
            }
            GroupType::Select => {
                let (mask, words) = select_hash_mask();
                self.out.mask.or_assign(mask);
                let usable = |b: &&Bucket| b.weight > 0 && p.groups.bucket_live(b, &live, depth);
                let total: u64 = g
                    .buckets
                    .iter()
                    .filter(usable)
                    .map(|b| u64::from(b.weight))
                    .sum();
                if total == 0 {
                    return;
                }
                let mut point = u64::from(self.key.masked_hash(mask, words)) % total;
                for b in g.buckets.iter().filter(usable) {
                    let w = u64::from(b.weight);
                    if point < w {
                        self.bucket(b, depth);
                        return;
                    }
                    point -= w;
                }
            }
        }
    }

    /// Runs a bucket on a copy of the packet: afterwards the key is as before and
    /// compensating actions undo the bucket's header changes.
    fn bucket(&mut self, b: &Bucket, depth: usize) {
        let saved = self.key;
        let (rewritten, mpls_depth, unknown) = (self.rewritten, self.mpls_depth, self.mpls_unknown);
        self.actions(&b.actions, depth + 1);
        self.ttl_stop = false;
        if self.overflow {
            return;
        }
        self.restore_mpls(&saved, self.mpls_depth - mpls_depth);
        self.restore(&saved);
        self.key = saved;
        self.rewritten = rewritten;
        self.mpls_depth = mpls_depth;
        self.mpls_unknown = unknown;
    }

    /// Undoes a bucket's MPLS pushes (`delta` > 0) or its one pop (`delta` = -1); leaves the
    /// key's `eth_type` and top entry as the packet now has them, for [`Ctx::restore`] to
    /// compare. Two or more pops cannot be undone: the packet is dropped.
    fn restore_mpls(&mut self, saved: &FlowKey, delta: i32) {
        if delta == 0 {
            return;
        }
        self.unwildcard(Field::EthType);
        let eth = saved.get(Field::EthType) as u16;
        if delta > 0 {
            for i in 0..delta {
                let t = if i + 1 == delta { eth } else { 0x8847 };
                self.emit(DpAction::PopMpls(t));
            }
            self.key.set(Field::EthType, u128::from(eth));
            self.key.set(Field::MplsLse, saved.get(Field::MplsLse));
        } else if delta == -1 {
            self.unwildcard(Field::MplsLse);
            let lse = saved.get(Field::MplsLse) as u32;
            self.emit(DpAction::PushMpls {
                ethertype: eth,
                lse,
            });
            self.key.set(Field::EthType, u128::from(eth));
            self.key.set(Field::MplsLse, u128::from(lse));
        } else {
            self.overflow = true;
        }
    }

    fn restore(&mut self, saved: &FlowKey) {
        let tags = |k: &FlowKey| {
            (
                k.get(Field::VlanTci) & VLAN_PRESENT != 0,
                k.get(Field::CvlanTci) & VLAN_PRESENT != 0,
            )
        };
        let (now, before) = (tags(&self.key), tags(saved));
        if now != before || self.key.get(Field::CvlanTci) != saved.get(Field::CvlanTci) {
            self.unwildcard(Field::VlanTci);
            self.unwildcard(Field::CvlanTci);
            for _ in 0..(now.0 as u8 + now.1 as u8) {
                self.emit(DpAction::PopVlan);
            }
            let two = before.0 && before.1;
            if before.1 {
                let tci = (saved.get(Field::CvlanTci) & !VLAN_PRESENT) as u16;
                self.emit(DpAction::PushVlan { tpid: 0x8100, tci });
            }
            if before.0 {
                let tci = (saved.get(Field::VlanTci) & !VLAN_PRESENT) as u16;
                let tpid = if two { 0x88a8 } else { 0x8100 };
                self.emit(DpAction::PushVlan { tpid, tci });
            }
        } else if self.key.get(Field::VlanTci) != saved.get(Field::VlanTci) {
            self.unwildcard(Field::VlanTci);
            let value = saved.get(Field::VlanTci);
            self.emit(DpAction::SetField {
                field: Field::VlanTci,
                value,
            });
        }
        for &f in RESTORABLE {
            let value = saved.get(f);
            if self.key.get(f) != value {
                self.unwildcard(f);
                self.emit(DpAction::SetField { field: f, value });
            }
        }
    }
}

#[cfg(test)]
#[path = "translate_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "translate_mask_tests.rs"]
pub(crate) mod mask_tests;

#[cfg(test)]
#[path = "translate_mpls_tests.rs"]
mod mpls_tests;

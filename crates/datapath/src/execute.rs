//! Action execution: apply a megaflow's compiled actions to packets and batch them per output.
//!
//! Size and owner: one [`Executor`] per poll-mode thread, holding one [`Batch`] per port of
//! the thread's tx table (up to 32 packets each), the thread's pool cache (for copies) and its
//! sending end of the packet-in queue.
//!
//! Outputs are buffered: a packet goes into its port's batch, which is sent when full and at
//! the end of every rx batch ([`Executor::flush`]). What a tx queue does not take is freed and
//! counted as a tx drop. A megaflow whose only action is one output moves the packet (no copy,
//! no rewrite); with several outputs, every output but the last sends a copy (a new frame from
//! the pool), so later rewrites do not change what earlier outputs sent.
//!
//! A TCP super-packet kept whole by its rx port ([`packet::gso`]) goes whole to ports that can
//! ask their kernel to cut it (virtio-net headers) and is cut into segments in software at
//! the output to any other port (and before a packet-in, and before encapsulation at the
//! output to a tunnel), counted in [`Counter::GsoSegmented`].
//!
//! Nothing here allocates, locks or makes a system call per packet. The one exception is a
//! port with fewer tx queues than there are threads: its queues are shared behind a mutex,
//! taken once per tx batch (not per packet), as Open vSwitch does with its tx locks.

use crate::bits::prefetch;
use crate::capture::Tap;
use crate::egress::{shape_batch, Backlog, PortShaper, Shapers};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use packet::{mpls, Batch, Field, Packet, PoolCache};
use pipeline::PacketInReason;
use port::TxQueue;
use tunnel::encap_train::EncapTrain;

use crate::megaflow::{Actions, Op, Plan, PortMap};
use crate::stats::{Counter, LocalStats};
use crate::tunnel_drops::SendDrop;
use crate::tunnels::TunnelOutput;
use crate::upcall::Police;

/// Bytes of an Ethernet header (an IP MTU plus this is the largest frame).
const ETH_HEADER: usize = 14;
use packet::rewrite;

/// Whether `pkt` fits the tunnel's underlay MTU once encapsulated.
#[inline(always)]
fn fits_underlay(pkt: &Packet, out: &TunnelOutput) -> bool {
    pkt.len() + out.template.overhead() <= usize::from(out.mtu) + ETH_HEADER
}

/// The inner flow's hash that picks a tunnel packet's UDP source port: the batch's when it
/// computed one, else one from the packet's addresses and ports (never one shared by all).
#[inline]
fn tunnel_hash(pkt: &Packet) -> u32 {
    match pkt.meta.hash {
        0 => tunnel::encap::inner_flow_hash(pkt),
        h => h,
    }
}

/// Raises the drop precedence of an AF-marked IPv4 or IPv6 packet by `prec` levels (capped
/// at 3, "high"). Other DSCP values carry no drop precedence and are left alone. Returns
/// `false` only when the rewrite itself fails.
fn remark_dscp(pkt: &mut Packet, prec: u8) -> bool {
    let l3 = pkt.meta.l3_off as usize;
    let d = pkt.data();
    if l3 == 0 || d.len() < l3 + 2 {
        return true;
    }
    let dscp = match d[l3] >> 4 {
        4 => d[l3 + 1] >> 2,
        6 => ((d[l3] & 0x0f) << 2) | (d[l3 + 1] >> 6),
        _ => return true,
    };
    // AFxy = class x (1..=4) in bits 5..3, drop precedence y (1..=3) in bits 2..1.
    let class = dscp >> 3;
    let dp = (dscp >> 1) & 3;
    if !(1..=4).contains(&class) || dscp & 1 != 0 || dp == 0 {
        return true;
    }
    let new = (class << 3) | (dp.saturating_add(prec).min(3) << 1);
    rewrite::set_field(pkt, Field::IpDscp, new as u128).is_ok()
}

/// A packet copied to the controller, waiting in the packet-in queue for the agent.
#[derive(Debug)]
pub struct PacketIn {
    /// The first `max_len` bytes of the packet (a frame of the datapath's pool).
    pub packet: Packet,
    /// Length of the whole packet.
    pub total_len: u16,
    /// OpenFlow port it came in on.
    pub in_port: u32,
    /// Why it is sent up.
    pub reason: PacketInReason,
    /// Table that decided.
    pub table_id: u8,
    /// Cookie of the deciding flow entry.
    pub cookie: u64,
}

/// How a thread reaches one tx queue of a port.
pub enum TxSlot {
    /// The thread owns the queue.
    Own(Box<dyn TxQueue>),
    /// The queue is shared with other threads (the port has fewer tx queues than threads).
    Shared(Arc<Mutex<Box<dyn TxQueue>>>),
    /// The port has no tx queue: everything sent to it is dropped.
    Closed,
}

impl TxSlot {
    fn send(&mut self, b: &mut Batch) -> usize {
        match self {
            TxSlot::Own(q) => {
                let n = q.send(b);
                q.flush();
                n
            }
            TxSlot::Shared(q) => {
                let mut q = q.lock().unwrap_or_else(|e| e.into_inner());
                let n = q.send(b);
                q.flush();
                n
            }
            TxSlot::Closed => 0,
        }
    }

    /// Whether super-packets sent now leave whole ([`TxQueue::takes_supers`]).
    fn takes_supers(&self) -> bool {
        match self {
            TxSlot::Own(q) => q.takes_supers(),
            TxSlot::Shared(q) => q.lock().unwrap_or_else(|e| e.into_inner()).takes_supers(),
            TxSlot::Closed => false,
        }
    }

    /// Tells the queue that `n` packets it did not take were dropped (its port counts them).
    #[cold]
    fn dropped(&mut self, n: u64) {
        match self {
            TxSlot::Own(q) => q.dropped(n),
            TxSlot::Shared(q) => q.lock().unwrap_or_else(|e| e.into_inner()).dropped(n),
            TxSlot::Closed => {}
        }
    }
}

/// How a port takes super-packets ([`packet::gso`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Supers {
    /// It cannot: they are cut first.
    Cut,
    /// It can, and they are passed as they are.
    Take,
    /// It can, and TCP segments bound for it are joined into them ([`port::coalesce`])
    /// while its queue takes them whole ([`TxQueue::takes_supers`]: a vhost-user guest
    /// without TSO does not).
    Join,
}

/// Offers `b` to `slot`, counts what was sent, frees and counts as dropped what was not.
/// Super-packets are cut first, or segments joined first, as `supers` says; those
/// encapsulated whole in a UDP tunnel ([`packet::Gso::outer`], as a TAP underlay's kernel
/// hands them over when no tunnel port terminates them) are cut first unless the port's
/// kernel cuts them (`tunnel_gso`).
#[inline]
fn send_counted(
    slot: &mut TxSlot,
    supers: Supers,
    tunnel_gso: bool,
    b: &mut Batch,
    cache: &mut PoolCache,
    st: &mut LocalStats,
) {
    let gso = b.as_slice().iter().any(|p| p.is_gso());
    match supers {
        Supers::Cut if gso => return send_segmenting(slot, b, cache, st),
        _ if gso && !tunnel_gso && any_tunnelled(b) => return send_segmenting(slot, b, cache, st),
        Supers::Join if b.len() > 1 && slot.takes_supers() => join(b, cache, st),
        _ => {}
    }
    send_plain(slot, b, cache, st);
}

/// Whether `b` holds a super-packet encapsulated whole in a UDP tunnel.
#[cold]
fn any_tunnelled(b: &Batch) -> bool {
    b.as_slice()
        .iter()
        .any(|p| p.gso().is_some_and(|g| g.outer != 0))
}

/// Joins `b`'s runs of TCP segments into super-packets ([`port::coalesce`]), counted.
#[inline(never)]
fn join(b: &mut Batch, cache: &mut PoolCache, st: &mut LocalStats) {
    let j = port::coalesce::coalesce(b, cache);
    if j.supers > 0 {
        st.add(Counter::GroSupers, u64::from(j.supers));
        st.add(Counter::GroSegments, u64::from(j.segments));
    }
}

/// [`send_counted`] for a batch with no super-packet for this port.
#[inline]
fn send_plain(slot: &mut TxSlot, b: &mut Batch, cache: &mut PoolCache, st: &mut LocalStats) {
    let before: u64 = b.as_slice().iter().map(|p| p.len() as u64).sum();
    let offered = b.len();
    let sent = slot.send(b);
    let left: u64 = if b.is_empty() {
        0
    } else {
        b.as_slice().iter().map(|p| p.len() as u64).sum()
    };
    st.add(Counter::TxPackets, sent as u64);
    st.add(Counter::TxBytes, before - left);
    if sent < offered {
        st.add(Counter::DropTxFull, b.len() as u64);
        slot.dropped(b.len() as u64);
        b.free_into(cache);
    }
}

/// Sends `b` to a port that cannot take super-packets: plain packets as they are, each
/// super-packet as its segments, in order, a batch at a time. A super-packet whose headers do
/// not parse is dropped as malformed; segments the pool has no frame for are counted as
/// [`Counter::DropPoolEmpty`].
#[cold]
fn send_segmenting(slot: &mut TxSlot, b: &mut Batch, cache: &mut PoolCache, st: &mut LocalStats) {
    let mut out = Batch::new();
    let mut pkts = std::mem::take(b);
    for pkt in pkts.drain() {
        if !pkt.is_gso() {
            if let Err(pkt) = out.push(pkt) {
                send_plain(slot, &mut out, cache, st);
                let _ = out.push(pkt);
            }
            continue;
        }
        let mut next = 0;
        loop {
            match port::vnet::segment_into(&pkt, next, cache, &mut out) {
                Err(_) => {
                    st.add(Counter::DropMalformed, 1);
                    break;
                }
                Ok((n, total)) => {
                    next = n;
                    if next == total {
                        st.add(Counter::GsoSegmented, 1);
                        break;
                    }
                    if !out.is_full() {
                        // The pool ran dry: the rest of this super-packet is lost.
                        st.add(Counter::DropPoolEmpty, (total - next) as u64);
                        st.add(Counter::GsoSegmented, 1);
                        break;
                    }
                    send_plain(slot, &mut out, cache, st);
                }
            }
        }
        cache.free(pkt);
    }
    if !out.is_empty() {
        send_plain(slot, &mut out, cache, st);
    }
}

/// One output port of a thread's tx table.
pub struct TxPort {
    /// OpenFlow port number.
    pub ofport: u32,
    slot: TxSlot,
    /// Whether super-packets are cut before they reach this port, or segments joined (see
    /// [`TxPort::segmenting`], [`TxPort::joining`]).
    supers: Supers,
    /// The port's kernel cuts super-packets encapsulated whole in a UDP tunnel (see
    /// [`TxPort::cutting_tunnelled`]).
    tunnel_gso: bool,
    buf: Batch,
    /// The port's egress queues ([`crate::egress`]; none: not judged).
    shaper: Option<Arc<PortShaper>>,
    /// What this thread holds in them when they shape ([`crate::egress`]).
    backlog: Backlog,
}

impl TxPort {
    /// A tx table entry for `ofport` sending through `slot`.
    pub fn new(ofport: u32, slot: TxSlot) -> TxPort {
        TxPort {
            ofport,
            slot,
            supers: Supers::Take,
            tunnel_gso: false,
            buf: Batch::new(),
            shaper: None,
            backlog: Backlog::default(),
        }
    }

    /// Judges what is sent to this port by its egress queues ([`crate::egress`]).
    pub(crate) fn shaped(mut self, shaper: Arc<PortShaper>) -> TxPort {
        self.shaper = Some(shaper);
        self
    }

    /// Whether super-packets ([`packet::gso`]) are cut into segments before they reach this
    /// port: set for a port without virtio-net headers when another port may deliver
    /// super-packets.
    pub fn segmenting(mut self, on: bool) -> TxPort {
        self.supers = if on { Supers::Cut } else { Supers::Take };
        self
    }

    /// Whether TCP segments bound for this port, which takes super-packets, are joined into
    /// them first ([`crate::DpConfig::gro`], [`port::coalesce`]).
    pub fn joining(mut self, on: bool) -> TxPort {
        if on {
            self.supers = Supers::Join;
        }
        self
    }

    /// Whether the port's kernel cuts TCP super-packets encapsulated whole in a UDP tunnel
    /// ([`port::Port::udp_tunnel_gso`]): a tunnel over it then sends them whole
    /// ([`Counter::GsoTunnelled`]) instead of cutting them before encapsulation.
    pub fn cutting_tunnelled(mut self, on: bool) -> TxPort {
        self.tunnel_gso = on;
        self
    }
}

/// Applies actions and buffers outputs for one thread.
pub struct Executor {
    tx: Vec<TxPort>,
    pending: Vec<u16>,
    cache: PoolCache,
    packet_ins: SyncSender<PacketIn>,
    /// Time used for meters, set once per rx batch.
    pub now_ns: u64,
    /// Captures of sent frames ([`crate::capture`]; none until attached).
    pub tap: Tap,
    /// Packet-ins this rx batch may still queue (`u32::MAX`: no bound; set per batch by
    /// the thread when [`crate::DpConfig::packet_in_port_rate`] is set).
    pub(crate) packet_in_allow: u32,
    /// Some tx entry's shaped queues may hold packets ([`Executor::release_held`]).
    held: bool,
    /// The thread's index: its slot in the tunnel ports' counts ([`crate::tunnel_counts`]).
    thread: usize,
}

impl Executor {
    /// An executor over the tx table `tx`, copying into frames of `cache`.
    pub fn new(tx: Vec<TxPort>, cache: PoolCache, packet_ins: SyncSender<PacketIn>) -> Executor {
        let pending = Vec::with_capacity(tx.len());
        Executor {
            tx,
            pending,
            cache,
            packet_ins,
            now_ns: 0,
            tap: Tap::default(),
            packet_in_allow: u32::MAX,
            held: false,
            thread: 0,
        }
    }

    /// The executor of thread `index` (its slot in per-thread counters shared between
    /// threads, [`crate::tunnel_counts`]).
    pub fn on_thread(mut self, index: usize) -> Executor {
        self.thread = index;
        self
    }

    /// The thread's pool cache (to free packets into).
    #[inline(always)]
    pub fn cache(&mut self) -> &mut PoolCache {
        &mut self.cache
    }

    /// The tx table's OpenFlow port numbers, by index.
    pub fn ports(&self) -> impl Iterator<Item = u32> + '_ {
        self.tx.iter().map(|t| t.ofport)
    }

    /// Runs `actions` on `pkt`, which ends up buffered for output, queued for the controller,
    /// or freed (and counted).
    #[inline]
    pub fn run(&mut self, pkt: Packet, actions: &Actions, st: &mut LocalStats) {
        match actions.plan {
            Plan::Forward(i) => self.enqueue(i, pkt, st),
            Plan::Drop => {
                st.add(Counter::DropNoAction, 1);
                self.cache.free(pkt);
            }
            Plan::General { move_at } => self.run_general(pkt, &actions.ops, move_at, st),
        }
    }

    fn run_general(
        &mut self,
        mut pkt: Packet,
        ops: &[Op],
        move_at: Option<usize>,
        st: &mut LocalStats,
    ) {
        for (i, op) in ops.iter().enumerate() {
            if move_at == Some(i) {
                match op {
                    Op::Output(port) => return self.enqueue(*port, pkt, st),
                    // The last output is a tunnel: the packet itself takes the outer headers
                    // in its headroom (no copy).
                    Op::Tunnel { out, port } => return self.tunnel_move(pkt, out, *port, st),
                    _ => {}
                }
            }
            if let Err(reason) = self.step(&mut pkt, op, st) {
                st.add(reason, 1);
                self.cache.free(pkt);
                return;
            }
        }
        // Every output was a copy (or there was only a packet-in): the original is done.
        self.cache.free(pkt);
    }

    /// Whether `pkt` still fits the tunnel's underlay once encapsulated; when it does not, it
    /// is counted and answered ([`Executor::too_big_reply`]).
    #[inline]
    fn tunnel_fits(&mut self, pkt: &Packet, out: &TunnelOutput, st: &mut LocalStats) -> bool {
        if fits_underlay(pkt, out) {
            return true;
        }
        out.counts.drops().send(SendDrop::TooBig);
        let inner_mtu = usize::from(out.mtu).saturating_sub(out.template.overhead());
        self.too_big_reply(pkt, inner_mtu as u16, st);
        false
    }

    /// Encapsulates `c` (a copy, or the packet itself) and queues it on the underlay's tx
    /// entry `port`.
    #[inline]
    fn tunnel_send(
        &mut self,
        mut c: Packet,
        hash: u32,
        out: &TunnelOutput,
        port: u16,
        st: &mut LocalStats,
    ) {
        let inner = c.len() as u64;
        match out.template.push(&mut c, hash, 0) {
            Ok(()) => {
                out.counts.tx(self.thread, 1, inner);
                self.enqueue(port, c, st);
            }
            Err(_) => {
                self.cache.free(c);
                st.add(Counter::DropRewrite, 1);
            }
        }
    }

    /// The last output of a packet to a tunnel: the packet itself is encapsulated, unless
    /// earlier pushes left its headroom too small for the outer headers (then a copy, which
    /// starts with the whole headroom, is); see [`Executor::tunnel_in_place`].
    fn tunnel_move(&mut self, mut pkt: Packet, out: &TunnelOutput, port: u16, st: &mut LocalStats) {
        let hash = tunnel_hash(&pkt);
        let mut train = EncapTrain::new(&out.template);
        if self.tunnel_in_place::<false>(&mut pkt, hash, out, port, &mut train, st) {
            let inner = pkt.len() - out.template.overhead();
            out.counts.tx(self.thread, 1, inner as u64);
            self.enqueue(port, pkt, st);
        } else {
            self.cache.free(pkt);
        }
    }

    /// Output of a super-packet to a tunnel: it is cut into its segments (each with its
    /// checksums complete, [`port::vnet::segment_into`]) and each segment is encapsulated,
    /// all with the super-packet's flow hash (one UDP source port for the flow). `pkt` is
    /// left as it was.
    #[cold]
    fn tunnel_segments(
        &mut self,
        pkt: &Packet,
        out: &TunnelOutput,
        port: u16,
        st: &mut LocalStats,
    ) {
        let hash = tunnel_hash(pkt);
        self.each_segment(pkt, st, |ex, s, st| {
            if ex.tunnel_fits(&s, out, st) {
                ex.tunnel_send(s, hash, out, port, st);
            } else {
                ex.cache.free(s);
            }
        });
    }

    /// Cuts super-packet `pkt` into the segments a wire would carry (each with its checksums
    /// complete, [`port::vnet::segment_into`]), a batch at a time, and hands each to `each`,
    /// which owns it. Counts the super-packet as segmented, or as malformed when it cannot be
    /// cut, and the segments the pool had no frame for. `pkt` is left as it was.
    #[cold]
    fn each_segment(
        &mut self,
        pkt: &Packet,
        st: &mut LocalStats,
        mut each: impl FnMut(&mut Self, Packet, &mut LocalStats),
    ) {
        let mut segs = Batch::new();
        let mut next = 0;
        loop {
            let (n, total) = match port::vnet::segment_into(pkt, next, &mut self.cache, &mut segs) {
                Ok(r) => r,
                Err(_) => {
                    st.add(Counter::DropMalformed, 1);
                    segs.free_into(&mut self.cache);
                    return;
                }
            };
            // Segments the pool had no frame for: the rest of the super-packet is lost.
            let stuck = n < total && !segs.is_full();
            for seg in segs.drain() {
                each(self, seg, st);
            }
            if n == total || stuck {
                if stuck {
                    st.add(Counter::DropPoolEmpty, (total - n) as u64);
                }
                st.add(Counter::GsoSegmented, 1);
                return;
            }
            next = n;
        }
    }

    /// Answers a frame too large for a tunnel ([`tunnel::pmtud`]) out of the port it came
    /// in by, when an answer is due. Rare: a search of the tx table for the port.
    #[cold]
    fn too_big_reply(&mut self, pkt: &Packet, inner_mtu: u16, st: &mut LocalStats) {
        let Some(i) = self.tx.iter().position(|t| t.ofport == pkt.meta.in_port) else {
            return;
        };
        let Some(mut r) = self.cache.alloc() else {
            st.add(Counter::DropPoolEmpty, 1);
            return;
        };
        let n = r
            .set_len(tunnel::pmtud::REPLY_MAX)
            .then(|| tunnel::pmtud::too_big_reply(pkt.data(), inner_mtu, r.data_mut()));
        match n.flatten() {
            Some(n) => {
                r.truncate(n);
                self.enqueue(i as u16, r, st);
            }
            None => self.cache.free(r),
        }
    }

    /// Runs one op that does not take the packet (an output here sends a copy). `Err` names
    /// the drop counter when the packet must be dropped.
    #[inline]
    fn step(&mut self, pkt: &mut Packet, op: &Op, st: &mut LocalStats) -> Result<(), Counter> {
        let ok = match op {
            Op::Output(port) => {
                match self.copy(pkt, usize::MAX) {
                    Some(c) => self.enqueue(*port, c, st),
                    None => st.add(Counter::DropPoolEmpty, 1),
                }
                true
            }
            Op::Tunnel { out, port } => {
                if pkt.is_gso() {
                    self.tunnel_super(pkt, out, *port, st);
                } else if self.tunnel_fits(pkt, out, st) {
                    match self.copy(pkt, usize::MAX) {
                        Some(c) => self.tunnel_send(c, tunnel_hash(pkt), out, *port, st),
                        None => st.add(Counter::DropPoolEmpty, 1),
                    }
                }
                true
            }
            Op::TunnelDrop(count) => {
                count.add();
                true
            }
            Op::SetField { field, value } => rewrite::set_field(pkt, *field, *value).is_ok(),
            Op::PushVlan { tpid, tci } => rewrite::push_vlan(pkt, *tpid, *tci).is_ok(),
            Op::PopVlan => rewrite::pop_vlan(pkt).is_ok(),
            Op::DecTtl => rewrite::dec_ttl(pkt).is_ok(),
            Op::PushMpls { ethertype, lse } => mpls::push_mpls(pkt, *ethertype, *lse).is_ok(),
            Op::PopMpls(t) => mpls::pop_mpls(pkt, *t).is_ok(),
            Op::DecMplsTtl => mpls::dec_mpls_ttl(pkt).is_ok(),
            Op::CopyTtlOut => mpls::copy_ttl_out(pkt).is_ok(),
            Op::CopyTtlIn => mpls::copy_ttl_in(pkt).is_ok(),
            Op::SetQueue(q) => {
                pkt.meta.user = *q;
                true
            }
            Op::Meter(m) => match m.police(self.now_ns, pkt.len() as u32) {
                Police::Pass => true,
                Police::Remark(prec) => remark_dscp(pkt, prec),
                Police::Drop => return Err(Counter::DropMeter),
            },
            Op::Controller {
                reason,
                max_len,
                table_id,
                cookie,
            } => {
                self.packet_in(pkt, *reason, *max_len, *table_id, *cookie, st);
                true
            }
        };
        if ok {
            Ok(())
        } else {
            Err(Counter::DropRewrite)
        }
    }

    /// Runs the ops of `actions` that come before the output which takes the packet, on
    /// `pkts` where they are (see [`Actions::in_place`]): op by op over all the packets, so
    /// each op is dispatched once per batch, not once per packet; when that output is a tunnel,
    /// the packets are encapsulated where they are too. Returns a mask of the packets that
    /// leave the batch (bit `i` for `pkts[i]`: dropped, with their drop counters added, or sent
    /// otherwise — a super-packet's encapsulated segments, an encapsulated copy); the caller
    /// removes and frees them. Per port, copies and packet-ins keep the packets' order.
    /// Bit `i` of `same` says `pkts[i]`'s flow key is `pkts[i - 1]`'s (bit 0 means nothing).
    #[inline]
    pub fn run_in_place(
        &mut self,
        pkts: &mut [Packet],
        actions: &Actions,
        same: u32,
        st: &mut LocalStats,
    ) -> u32 {
        let n = pkts.len().min(32);
        let all = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        let prefix = match actions.plan {
            Plan::Forward(_) => return 0,
            Plan::Drop => {
                st.add(Counter::DropNoAction, n as u64);
                return all;
            }
            Plan::General { move_at: Some(k) } => actions.ops.get(..k).unwrap_or(&[]),
            Plan::General { move_at: None } => &[],
        };
        let mut dropped = 0u32;
        for op in prefix {
            for (i, pkt) in pkts.iter_mut().enumerate().take(n) {
                if dropped & (1 << i) != 0 {
                    continue;
                }
                if let Err(counter) = self.step(pkt, op, st) {
                    st.add(counter, 1);
                    dropped |= 1 << i;
                }
            }
        }
        if let Plan::General { move_at: Some(k) } = actions.plan {
            if let Some(Op::Tunnel { out, port }) = actions.ops.get(k) {
                // Packets of one flow and length get the same outer headers: where most of
                // the batch continues its predecessor's flow, a train builds them once and
                // copies them, following the batch's same-key bits; otherwise (flows
                // interleaved) each packet's come from the template, which the train's
                // checks would only slow.
                let trains = 2 * (same & all & !1).count_ones() >= n as u32;
                // First, in a loop of their own, ask for the headroom's cache lines, which
                // the outer headers will be written into and which nothing has touched
                // since the frame was last used (the copy into the headroom otherwise waits
                // for them); without a train, also the flow hashes: each is a short chain of
                // dependent steps, and a loop of nothing else runs many packets' at once. A
                // packet whose flow key is its predecessor's (bit i of `same`) has its hash
                // too. A train hashes only the packets that start one.
                let mut hashes = [0u32; 32];
                let overhead = out.template.overhead();
                for (i, pkt) in pkts.iter().enumerate().take(n) {
                    let data = pkt.data().as_ptr();
                    prefetch(data.wrapping_sub(overhead));
                    prefetch(data.wrapping_sub(1));
                    if !trains {
                        hashes[i] = if i > 0 && same & (1 << i) != 0 {
                            hashes[i - 1]
                        } else {
                            tunnel_hash(pkt)
                        };
                    }
                }
                let encap = if trains {
                    Self::encap_in_place::<true>
                } else {
                    Self::encap_in_place::<false>
                };
                encap(self, pkts, n, &hashes, same, out, *port, &mut dropped, st);
            }
        }
        dropped
    }

    /// Encapsulates the first `n` packets of `pkts` where they are, but those `dropped`
    /// says are gone (and adds the packets that leave to it), through a train of outer
    /// headers when `TRAIN` ([`EncapTrain`]: a push, then the packets after it with its flow
    /// key, bit `i` of `same`, and length), else with the flow `hashes`. What stays in the
    /// batch is counted here, once for the batch (inner bytes: less the outer headers); what
    /// leaves it is counted where it is sent ([`Executor::tunnel_send`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn encap_in_place<const TRAIN: bool>(
        &mut self,
        pkts: &mut [Packet],
        n: usize,
        hashes: &[u32; 32],
        same: u32,
        out: &TunnelOutput,
        port: u16,
        dropped: &mut u32,
        st: &mut LocalStats,
    ) {
        let overhead = out.template.overhead();
        let mut train = EncapTrain::new(&out.template);
        let (mut kept, mut bytes) = (0u64, 0u64);
        let n = n.min(pkts.len());
        let pkts = &mut pkts[..n];
        let mut i = 0;
        while i < pkts.len() {
            if *dropped & (1 << i) == 0 {
                let pkt = &mut pkts[i];
                let hash = if TRAIN { tunnel_hash(pkt) } else { hashes[i] };
                if self.tunnel_in_place::<TRAIN>(pkt, hash, out, port, &mut train, st) {
                    kept += 1;
                    bytes += (pkt.len() - overhead) as u64;
                } else {
                    *dropped |= 1 << i;
                }
            }
            i += 1;
            if TRAIN {
                // The packets after it that continue its train, in a loop of their own.
                let (stop, pushed) = train.extend(pkts, same, i, *dropped);
                kept += pushed as u64;
                bytes += (pushed * train.inner()) as u64;
                i = stop;
            }
        }
        if kept > 0 {
            out.counts.tx(self.thread, kept, bytes);
        }
    }

    /// The moving output of `pkt` to a tunnel, where the packet stays in its batch: the outer
    /// headers go into its headroom and it stays (`true`), a super-packet too where the
    /// underlay's kernel cuts it whole ([`Executor::tunnel_whole`]). Otherwise it leaves the
    /// batch (`false`): too big (counted, answered), a super-packet cut first (its
    /// encapsulated segments are queued on `port`), too little headroom (an encapsulated copy
    /// is queued), or headers that do not fit (counted).
    #[inline(always)]
    fn tunnel_in_place<const TRAIN: bool>(
        &mut self,
        pkt: &mut Packet,
        hash: u32,
        out: &TunnelOutput,
        port: u16,
        train: &mut EncapTrain,
        st: &mut LocalStats,
    ) -> bool {
        if pkt.is_gso() || !fits_underlay(pkt, out) || pkt.headroom() < out.template.overhead() {
            return self.tunnel_rare(pkt, hash, out, port, st);
        }
        let pushed = if TRAIN {
            train.push(pkt, hash)
        } else {
            out.template.push(pkt, hash, 0)
        };
        if pushed.is_err() {
            st.add(Counter::DropRewrite, 1);
            return false;
        }
        true
    }

    /// The rare cases of [`Executor::tunnel_in_place`]: a super-packet the underlay can
    /// take encapsulated whole stays in the batch, encapsulated (`true`); otherwise the
    /// packet leaves it (`false`, [`Executor::tunnel_leaves`]).
    #[cold]
    #[inline(never)]
    fn tunnel_rare(
        &mut self,
        pkt: &mut Packet,
        hash: u32,
        out: &TunnelOutput,
        port: u16,
        st: &mut LocalStats,
    ) -> bool {
        if pkt.is_gso() && self.tunnel_whole(pkt, hash, out, port, st) {
            return true;
        }
        self.tunnel_leaves(pkt, hash, out, port, st);
        false
    }

    /// The outer headers' length when super-packet `pkt` can be encapsulated whole for
    /// `out`'s underlay `port` to have its kernel cut: the port's kernel cuts tunnelled
    /// super-packets ([`TxPort::cutting_tunnelled`], with or without an outer UDP checksum)
    /// and each segment will fit the underlay's MTU. `None` otherwise (it is cut first).
    fn whole_outer(&self, pkt: &Packet, out: &TunnelOutput, port: u16) -> Option<u8> {
        let t = &out.template;
        let g = pkt.gso()?;
        let takes = self.tx.get(usize::from(port)).is_some_and(|p| p.tunnel_gso);
        if !takes || g.outer != 0 {
            return None;
        }
        // A segment: the inner headers (through TCP's, by its data offset) and one MSS.
        let l4 = usize::from(pkt.meta.l4_off);
        let doff = match pkt.data().get(l4 + 12) {
            Some(&b) if l4 != 0 => usize::from(b >> 4) * 4,
            _ => return None,
        };
        let segment = l4 + doff + usize::from(g.mss) + t.overhead();
        if segment > usize::from(out.mtu) + ETH_HEADER {
            return None;
        }
        u8::try_from(t.overhead()).ok()
    }

    /// Encapsulates super-packet `pkt` whole, in place, when [`Executor::whole_outer`] allows
    /// and the whole fits an IP packet and the headroom; [`packet::Gso::outer`] then says how
    /// long the outer headers are. Otherwise `false`, `pkt` unchanged (the caller cuts it
    /// first).
    fn tunnel_whole(
        &mut self,
        pkt: &mut Packet,
        hash: u32,
        out: &TunnelOutput,
        port: u16,
        st: &mut LocalStats,
    ) -> bool {
        let (Some(outer), Some(g)) = (self.whole_outer(pkt, out, port), pkt.gso()) else {
            return false;
        };
        if out.template.push_whole(pkt, hash, 0).is_err() {
            return false;
        }
        pkt.set_gso(Some(packet::Gso { outer, ..g }));
        st.add(Counter::GsoTunnelled, 1);
        true
    }

    /// Output of super-packet `pkt` to a tunnel: an encapsulated copy kept whole where the
    /// underlay's kernel cuts it ([`Executor::tunnel_whole`]), else its encapsulated segments
    /// ([`Executor::tunnel_segments`]). `pkt` is left as it was; the 64 KiB copy is made only
    /// when it can go whole.
    #[cold]
    fn tunnel_super(&mut self, pkt: &Packet, out: &TunnelOutput, port: u16, st: &mut LocalStats) {
        if self.whole_outer(pkt, out, port).is_some() {
            if let Some(mut c) = self.copy(pkt, usize::MAX) {
                if self.tunnel_whole(&mut c, tunnel_hash(pkt), out, port, st) {
                    let inner = c.len() - out.template.overhead();
                    out.counts.tx(self.thread, 1, inner as u64);
                    self.enqueue(port, c, st);
                    return;
                }
                self.cache.free(c);
            }
        }
        self.tunnel_segments(pkt, out, port, st);
    }

    /// Where the packet leaves the batch after [`Executor::tunnel_rare`]: a super-packet cut
    /// first, a frame too big, or too little headroom.
    fn tunnel_leaves(
        &mut self,
        pkt: &Packet,
        hash: u32,
        out: &TunnelOutput,
        port: u16,
        st: &mut LocalStats,
    ) {
        if pkt.is_gso() {
            return self.tunnel_segments(pkt, out, port, st);
        }
        if !self.tunnel_fits(pkt, out, st) {
            return;
        }
        match self.copy(pkt, usize::MAX) {
            Some(c) => self.tunnel_send(c, hash, out, port, st),
            None => st.add(Counter::DropPoolEmpty, 1),
        }
    }

    /// A copy of the first `max` bytes of `pkt` with its metadata, in a new frame (a
    /// super-packet frame for a whole super-packet, which stays one).
    fn copy(&mut self, pkt: &Packet, max: usize) -> Option<Packet> {
        let d = pkt.data();
        let mut c = self.cache.alloc_copy(&d[..d.len().min(max)])?;
        c.meta = pkt.meta;
        if max >= d.len() && pkt.is_gso() {
            c.set_gso(pkt.gso());
        }
        Some(c)
    }

    fn packet_in(
        &mut self,
        pkt: &Packet,
        reason: PacketInReason,
        max_len: u16,
        table_id: u8,
        cookie: u64,
        st: &mut LocalStats,
    ) {
        if pkt.is_gso() {
            return self.packet_in_segments(pkt, reason, max_len, table_id, cookie, st);
        }
        if self.packet_in_allow == 0 {
            st.add(Counter::DropPacketInBudget, 1);
            return;
        }
        let max = if max_len == u16::MAX {
            usize::MAX
        } else {
            max_len as usize
        };
        let Some(copy) = self.copy(pkt, max) else {
            st.add(Counter::DropPoolEmpty, 1);
            return;
        };
        let pi = PacketIn {
            packet: copy,
            total_len: pkt.len() as u16,
            in_port: pkt.meta.in_port,
            reason,
            table_id,
            cookie,
        };
        match self.packet_ins.try_send(pi) {
            Ok(()) => {
                st.add(Counter::PacketIns, 1);
                self.packet_in_allow = self.packet_in_allow.saturating_sub(1);
            }
            Err(TrySendError::Full(pi)) | Err(TrySendError::Disconnected(pi)) => {
                st.add(Counter::DropPacketInFull, 1);
                self.cache.free(pi.packet);
            }
        }
    }

    /// Sends a super-packet to the controller as the segments a wire would have carried
    /// (the controller may send them back out with packet-outs).
    #[cold]
    fn packet_in_segments(
        &mut self,
        pkt: &Packet,
        reason: PacketInReason,
        max_len: u16,
        table_id: u8,
        cookie: u64,
        st: &mut LocalStats,
    ) {
        self.each_segment(pkt, st, |ex, seg, st| {
            ex.packet_in(&seg, reason, max_len, table_id, cookie, st);
            ex.cache.free(seg);
        });
    }

    /// Buffers `pkt` for tx table entry `port`, sending the buffer first when it is full.
    #[inline(always)]
    pub fn enqueue(&mut self, port: u16, pkt: Packet, st: &mut LocalStats) {
        let i = port as usize;
        let Some(t) = self.tx.get_mut(i) else {
            st.add(Counter::DropTxFull, 1);
            self.cache.free(pkt);
            return;
        };
        if t.buf.is_empty() {
            self.pending.push(port);
        }
        if let Err(pkt) = t.buf.push(pkt) {
            self.send(i, st);
            let t = &mut self.tx[i];
            if let Err(pkt) = t.buf.push(pkt) {
                st.add(Counter::DropTxFull, 1);
                self.cache.free(pkt);
            }
        }
    }

    fn send(&mut self, i: usize, st: &mut LocalStats) {
        let t = &mut self.tx[i];
        let (s, now) = (t.shaper.as_deref(), self.now_ns);
        self.held |= shape_batch(s, &mut t.backlog, now, &mut t.buf, &mut self.cache);
        if t.buf.is_empty() {
            return;
        }
        if self.tap.active() {
            self.tap
                .offer(t.ofport, false, t.buf.as_slice(), self.now_ns);
        }
        send_counted(
            &mut t.slot,
            t.supers,
            t.tunnel_gso,
            &mut t.buf,
            &mut self.cache,
            st,
        );
    }

    /// Sends a whole batch whose packets all go to tx table entry `port` unchanged (a megaflow
    /// with [`Plan::Forward`]), leaving `batch` empty. When nothing is buffered for that port
    /// the batch goes to the tx queue as it is, without moving a packet; otherwise its packets
    /// are appended to the port's buffer behind the ones already there (order is kept).
    #[inline]
    pub fn forward_batch(&mut self, port: u16, batch: &mut Batch, st: &mut LocalStats) {
        let i = port as usize;
        let Some(t) = self.tx.get_mut(i) else {
            st.add(Counter::DropTxFull, batch.len() as u64);
            batch.free_into(&mut self.cache);
            return;
        };
        if t.buf.is_empty() {
            let (s, now) = (t.shaper.as_deref(), self.now_ns);
            self.held |= shape_batch(s, &mut t.backlog, now, batch, &mut self.cache);
            if batch.is_empty() {
                return;
            }
            if self.tap.active() {
                self.tap
                    .offer(t.ofport, false, batch.as_slice(), self.now_ns);
            }
            send_counted(
                &mut t.slot,
                t.supers,
                t.tunnel_gso,
                batch,
                &mut self.cache,
                st,
            );
            return;
        }
        for pkt in batch.drain() {
            self.enqueue(port, pkt, st);
        }
    }

    /// Sends every buffered packet (end of an rx batch).
    #[inline]
    pub fn flush(&mut self, st: &mut LocalStats) {
        while let Some(p) = self.pending.pop() {
            if !self.tx[p as usize].buf.is_empty() {
                self.send(p as usize, st);
            }
        }
    }

    /// Whether shaped queues may hold packets: the thread must poll again soon, not sleep.
    #[inline(always)]
    pub fn holds_packets(&self) -> bool {
        self.held
    }

    /// Sends what shaped queues may send by now (`now_ns`); call on every poll.
    #[inline]
    pub fn release_held(&mut self, st: &mut LocalStats) {
        if std::mem::take(&mut self.held) {
            for i in 0..self.tx.len() {
                if !self.tx[i].backlog.is_empty() {
                    self.send(i, st);
                }
            }
        }
    }

    /// The tx table as a map from OpenFlow port to entry index (for compiling actions).
    pub fn port_map(&self) -> PortMap {
        PortMap::new(
            self.tx
                .iter()
                .enumerate()
                .map(|(i, t)| (t.ofport, i as u16))
                .collect(),
        )
    }

    /// Appends `port` to the tx table (a port plugged in while running; [`crate::plug`]).
    pub(crate) fn add_port(&mut self, port: TxPort) {
        self.tx.push(port);
    }

    /// Takes `ofport` out of the tx table after sending what is buffered; the entries after
    /// it move down by one, so megaflows compiled before must go. Returns its slot.
    pub(crate) fn remove_port(&mut self, ofport: u32, st: &mut LocalStats) -> Option<TxSlot> {
        self.flush(st);
        let i = self.tx.iter().position(|t| t.ofport == ofport)?;
        let mut t = self.tx.remove(i);
        t.buf.free_into(&mut self.cache);
        t.backlog.discard(t.shaper.as_deref(), &mut self.cache);
        Some(t.slot)
    }

    /// Judges every tx entry's output by its port's egress queues in `shapers`.
    pub(crate) fn attach_shapers(&mut self, shapers: &Shapers) {
        for t in self.tx.iter_mut() {
            t.shaper = Some(shapers.port(t.ofport));
        }
    }

    /// Cuts super-packets before they reach `ofport` (a port with virtio-net headers joined).
    pub(crate) fn set_segmenting(&mut self, ofport: u32) {
        for t in self.tx.iter_mut().filter(|t| t.ofport == ofport) {
            t.supers = Supers::Cut;
        }
    }

    /// Frees every buffered packet without sending it (shutdown).
    pub fn discard(&mut self) {
        self.pending.clear();
        for t in &mut self.tx {
            t.buf.free_into(&mut self.cache);
            t.backlog.discard(t.shaper.as_deref(), &mut self.cache);
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.discard();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::builder::{Ipv4Spec, L3Spec, PacketSpec};
    use packet::{FlowKey, Pool};
    use std::net::Ipv4Addr;

    fn ipv4_with_tos(tos: u8) -> Vec<u8> {
        let mut s = PacketSpec::udp4(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            1,
            2,
            64,
        );
        if let L3Spec::Ipv4(ip) = &mut s.l3 {
            *ip = Ipv4Spec { tos, ..ip.clone() };
        }
        s.build()
    }

    fn remarked(tos: u8, prec: u8) -> Vec<u8> {
        let pool = Pool::with_frames(4);
        let mut cache = pool.cache();
        let mut p = cache.alloc_from(&ipv4_with_tos(tos)).unwrap();
        let mut key = FlowKey::ZERO;
        packet::extract_packet(&mut p, &mut key);
        assert!(remark_dscp(&mut p, prec));
        let out = p.data().to_vec();
        cache.free(p);
        out
    }

    #[test]
    fn remark_raises_af_drop_precedence_with_checksums() {
        // AF11 (DSCP 10) + 1 → AF12 (DSCP 12); ECN bits kept.
        assert_eq!(remarked(10 << 2 | 1, 1), ipv4_with_tos(12 << 2 | 1));
        // AF12 + 5 caps at AF13 (DSCP 14).
        assert_eq!(remarked(12 << 2, 5), ipv4_with_tos(14 << 2));
        // EF (46) and best effort (0) have no drop precedence: unchanged.
        assert_eq!(remarked(46 << 2, 1), ipv4_with_tos(46 << 2));
        assert_eq!(remarked(0, 2), ipv4_with_tos(0));
    }
}

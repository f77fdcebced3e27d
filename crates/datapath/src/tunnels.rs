//! Tunnels on the datapath's underlay ports (issue 18; the design is in the `tunnel` crate's
//! `lib.rs`): termination right after receive, and the outer headers of output to a tunnel
//! port.
//!
//! Size and owner: one [`Tunnels`] per datapath, shared by every poll-mode thread. The
//! control side publishes which underlay port terminates which tunnel ports (a
//! [`tunnel::Terminator`] per underlay port) by swapping the whole table (arc-swap) when tunnel
//! ports or local addresses change; a thread loads it once per batch received on a port and
//! does nothing more when the port terminates no tunnel. Drops are counted per port by reason
//! ([`crate::tunnel_drops`]) in atomics reached through those entries, touched only when a
//! frame is dropped. What each tunnel port carried ([`crate::tunnel_counts`]) is counted per
//! thread through the same entries: a terminator's entry holds its tunnel ports' counts
//! (in the terminator's order, indexed by a terminated frame's port index), a tunnel output
//! its port's.
//!
//! Output: a fixed tunnel's headers per port ([`Tunnels::set_output`]); a per-flow tunnel's
//! per (port, remote, VNI) ([`crate::tunnel_flows`], [`Tunnels::send`]): a destination with
//! no headers yet is queued for the control side and wakes it
//! ([`Tunnels::request_signal`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use packet::Packet;
use tunnel::{EncapTemplate, RxKind, Terminator, Train, TunMeta, Via};

use crate::tunnel_counts::{CountBook, TunnelCounts, TunnelPortCounts};
use crate::tunnel_drops::{DropBook, SendCounter, SendDrop, Side, TunnelDrops};

use crate::tunnel_flows::{FlowDest, PerFlowPort, RequestSignal, Requests, TunFields};

/// Where output to a tunnel port goes, in which outer headers.
#[derive(Debug, Clone)]
pub struct TunnelOutput {
    /// The outer headers.
    pub template: Arc<EncapTemplate>,
    /// The underlay port.
    pub underlay: u32,
    /// The underlay's IP MTU.
    pub mtu: u16,
    /// What the tunnel port sent ([`TunnelCounts::tx`]) and its send-side drops
    /// ([`TunnelCounts::drops`]); one pointer, so that a compiled output stays small.
    pub counts: Arc<TunnelCounts>,
}

/// An underlay port that terminates tunnels.
#[derive(Debug, Clone)]
struct Terminating {
    /// The underlay's OpenFlow port.
    port: u32,
    /// What it terminates.
    terminator: Arc<Terminator>,
    /// Termination's drops, on the underlay port.
    drops: Arc<TunnelDrops>,
    /// The counts of the tunnel ports it terminates into, in the terminator's order (a
    /// terminated frame's [`tunnel::TunMeta::index`]).
    counts: Arc<[Arc<TunnelCounts>]>,
}

impl Terminating {
    /// Adds `packets` frames of `bytes` to the rx counts of the tunnel port at `index` of
    /// the terminator's ports, in thread `thread`'s slot.
    #[inline]
    fn add_rx(&self, index: u32, thread: usize, packets: u64, bytes: u64) {
        if let Some(c) = self.counts.get(index as usize) {
            c.rx(thread, packets, bytes);
        }
    }
}

/// The terminating ports as one batch sees them: the table, loaded once for the batch
/// ([`Tunnels::rx_table`]).
pub(crate) struct RxTable(arc_swap::Guard<Arc<Vec<Terminating>>>);

impl RxTable {
    /// What underlay port `in_port` terminates, ready to take one batch's frames; `None`
    /// when it terminates nothing.
    #[inline]
    pub(crate) fn port(&self, in_port: u32) -> Option<BatchRx<'_>> {
        let entry = self.0.iter().find(|e| e.port == in_port)?;
        Some(BatchRx {
            entry,
            train: Train::new(),
            index: 0,
            packets: 0,
            bytes: 0,
        })
    }
}

/// Termination of one batch's frames on one underlay port, frame by frame inside the
/// thread's extraction loop (one pass over the batch): each frame is judged, a tunnel
/// packet loses its outer headers, a drop is counted by reason. The tunnel ports' rx counts
/// of the fast path's frames are kept as a run (port, frames, bytes) and added when the
/// train's port changes and at [`BatchRx::finish`]: once per batch when its frames went to
/// one port, and with no search when they alternate (a host with a port per remote VTEP):
/// the run's port is its index among the terminator's ports, which indexes their counts.
/// A frame the general path decides is counted at once.
pub(crate) struct BatchRx<'a> {
    entry: &'a Terminating,
    /// The batch's train of frames from one remote ([`tunnel::rx_train`]).
    train: Train,
    /// The tunnel port of the current run (its index), its frames and (inner) bytes.
    index: u32,
    packets: u64,
    bytes: u64,
}

/// What one frame of a batch is, as [`BatchRx::receive`] judged it.
pub(crate) enum Rx<'a> {
    /// Not for a local tunnel endpoint: switched as it is.
    NotTunnel,
    /// A tunnel packet, now holding its inner frame, with the outer headers' metadata.
    Tunnel(&'a TunMeta),
    /// Dropped by termination (counted on the underlay port): take it out of the batch.
    Drop,
}

impl BatchRx<'_> {
    /// The metadata of `pkt` when it is in the batch's train ([`Train::carries`]): it now
    /// holds its inner frame and counts on the current run with no port check (only the fast
    /// path changes the train's port, and only it starts a run). The receive loop's path for
    /// a train's frames, apart from [`BatchRx::receive`] so that nothing else is on it.
    #[inline(always)]
    pub(crate) fn follow(&mut self, pkt: &mut Packet) -> Option<&TunMeta> {
        if !self.train.carries(pkt) {
            return None;
        }
        self.packets += 1;
        self.bytes += pkt.len() as u64;
        Some(self.train.meta())
    }

    /// What `pkt`, which [`BatchRx::follow`] did not take, is
    /// ([`Terminator::receive_off_train`]): a tunnel packet now holds its inner frame and is
    /// counted on its tunnel port; a drop is counted on the underlay port (the caller takes
    /// the frame out of the batch). A frame the general path decides is counted at once.
    #[inline(always)]
    pub(crate) fn receive(&mut self, thread: usize, pkt: &mut Packet) -> Rx<'_> {
        match self
            .entry
            .terminator
            .receive_off_train(pkt, &mut self.train)
        {
            RxKind::Tunnel(Via::Fast | Via::Train) => {
                let index = self.train.meta().index;
                if index != self.index {
                    self.next_run(thread, index);
                }
                self.packets += 1;
                self.bytes += pkt.len() as u64;
                Rx::Tunnel(self.train.meta())
            }
            RxKind::Tunnel(Via::General) => {
                let m = self.train.meta_of(Via::General);
                self.entry.add_rx(m.index, thread, 1, pkt.len() as u64);
                Rx::Tunnel(m)
            }
            RxKind::Drop(d) => {
                self.entry.drops.rx(d);
                Rx::Drop
            }
            RxKind::NotTunnel => Rx::NotTunnel,
        }
    }

    /// Adds the current run's counts and starts one for the tunnel port at `index`, whose
    /// counts are asked for now: they are added when the run ends, a frame or more later
    /// (with a port per remote VTEP, hundreds of counts that do not all stay in L1).
    #[inline(never)]
    fn next_run(&mut self, thread: usize, index: u32) {
        if self.packets != 0 {
            self.entry
                .add_rx(self.index, thread, self.packets, self.bytes);
        }
        if let Some(c) = self.entry.counts.get(index as usize) {
            c.prefetch(thread);
        }
        (self.index, self.packets, self.bytes) = (index, 0, 0);
    }

    /// Adds what is left to count, at the end of the batch.
    #[inline]
    pub(crate) fn finish(self, thread: usize) {
        if self.packets != 0 {
            self.entry
                .add_rx(self.index, thread, self.packets, self.bytes);
        }
    }
}

/// The datapath's table of terminating underlay ports, the outer headers of its tunnel
/// ports, and the drops of termination.
#[derive(Debug, Default)]
pub struct Tunnels {
    table: ArcSwap<Vec<Terminating>>,
    /// `(tunnel ofport, its output)`.
    outputs: ArcSwap<Vec<(u32, TunnelOutput)>>,
    /// Tunnel ports with a fixed remote that cannot be reached now: their outputs compile to
    /// a counted drop ([`SendDrop::Unreachable`]).
    down: ArcSwap<Vec<u32>>,
    /// Every port's drops.
    book: DropBook,
    /// Every tunnel port's counts.
    counts: CountBook,
    /// The tunnel ports whose remote or VNI comes from the flow.
    per_flow: ArcSwap<Vec<(u32, PerFlowPort)>>,
    /// Their outputs, per destination.
    flow_outputs: ArcSwap<HashMap<FlowDest, TunnelOutput>>,
    /// Destinations with no output yet, for the control side (taken at compile time only).
    requests: Mutex<Requests>,
    /// Raised when `requests` changed.
    signal: Arc<RequestSignal>,
}

/// What output to a tunnel port compiles to.
#[derive(Debug, Clone)]
pub enum TunnelSend {
    /// Encapsulate and send.
    Out(TunnelOutput),
    /// Drop the packet and count it on the tunnel port (no headers for its destination yet:
    /// `tunnel_unresolved`, or the flow names none: `tunnel_flow_unset`).
    Drop(SendCounter),
}

impl Tunnels {
    /// No underlay port terminates anything.
    pub fn new() -> Tunnels {
        Tunnels::default()
    }

    /// Makes underlay port `ofport` terminate what `t` says (`None` or an empty terminator:
    /// nothing). Control side; the threads see it from their next batch.
    pub fn set(&self, ofport: u32, t: Option<Terminator>) {
        let mut next: Vec<_> = self
            .table
            .load()
            .iter()
            .filter(|e| e.port != ofport)
            .cloned()
            .collect();
        if let Some(t) = t.filter(|t| !t.is_empty()) {
            let counts: Vec<_> = t
                .ports()
                .iter()
                .map(|p| self.port_counter(p.ofport))
                .collect();
            next.push(Terminating {
                port: ofport,
                terminator: Arc::new(t),
                drops: self.book.of(ofport, Side::Underlay),
                counts: counts.into(),
            });
        }
        self.table.store(Arc::new(next));
    }

    /// Makes output to tunnel port `ofport` encapsulate with `template` and send to underlay
    /// port `underlay`, whose IP MTU is `mtu` (`None`: the port has no next hop; its outputs
    /// are left out). Megaflows compiled before keep the old headers: the caller makes the
    /// threads drop their caches (a pipeline generation bump) after a change.
    pub fn set_output(&self, ofport: u32, out: Option<(u32, EncapTemplate, u16)>) {
        let mut next: Vec<_> = self
            .outputs
            .load()
            .iter()
            .filter(|o| o.0 != ofport)
            .cloned()
            .collect();
        if let Some((underlay, t, mtu)) = out {
            let o = TunnelOutput {
                template: Arc::new(t),
                underlay,
                mtu,
                counts: self.port_counter(ofport),
            };
            next.push((ofport, o));
        }
        self.outputs.store(Arc::new(next));
    }

    /// Marks tunnel port `ofport` as unable to reach its fixed remote (`true`; its outputs are
    /// counted drops) or not. Control side; the caller drops the cached megaflows after a
    /// change, as for [`Tunnels::set_output`].
    pub fn set_down(&self, ofport: u32, down: bool) {
        let cur = self.down.load();
        if cur.contains(&ofport) == down {
            return;
        }
        let mut next: Vec<u32> = cur.iter().copied().filter(|p| *p != ofport).collect();
        if down {
            next.push(ofport);
        }
        self.down.store(Arc::new(next));
    }

    /// The output of tunnel port `ofport` (when a megaflow is compiled, not per packet).
    pub fn output(&self, ofport: u32) -> Option<TunnelOutput> {
        let outputs = self.outputs.load();
        outputs.iter().find(|o| o.0 == ofport).map(|o| o.1.clone())
    }

    /// Makes tunnel ports `ports` (`(ofport, what is fixed)`) take their remote or VNI from
    /// each flow, replacing the previous list. Control side.
    pub fn set_per_flow(&self, ports: Vec<(u32, PerFlowPort)>) {
        if **self.per_flow.load() != ports {
            self.per_flow.store(Arc::new(ports));
        }
    }

    /// Replaces the outputs of per-flow destinations: `(destination, (underlay port, outer
    /// headers, underlay IP MTU))`. Control side; as with [`Tunnels::set_output`], the caller
    /// drops the cached megaflows after a change.
    pub fn set_flow_outputs(&self, outs: Vec<(FlowDest, (u32, EncapTemplate, u16))>) {
        let map = outs
            .into_iter()
            .map(|(d, (underlay, t, mtu))| {
                let o = TunnelOutput {
                    template: Arc::new(t),
                    underlay,
                    mtu,
                    counts: self.port_counter(d.ofport),
                };
                (d, o)
            })
            .collect();
        self.flow_outputs.store(Arc::new(map));
    }

    /// Which per-flow destinations a compiled megaflow still sends to (their headers are
    /// held beyond this table). Control side: it forgets the others after a while.
    pub fn flow_outputs_in_use(&self) -> Vec<FlowDest> {
        let map = self.flow_outputs.load();
        map.iter()
            .filter(|(_, o)| Arc::strong_count(&o.template) > 1)
            .map(|(d, _)| *d)
            .collect()
    }

    /// Takes the destinations translation found no headers for: the list, and whether some
    /// were not queued (the queue was full). Control side.
    pub fn take_requests(&self) -> (Vec<FlowDest>, bool) {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The signal raised when a destination is queued for [`Tunnels::take_requests`]: the
    /// control side's thread waits for it between its periodic passes.
    pub fn request_signal(&self) -> Arc<RequestSignal> {
        self.signal.clone()
    }

    /// What output to tunnel port `ofport` compiles to when the flow's actions set `fields`
    /// before it: `None` when the port is not a tunnel (the output is left out); a counted
    /// drop when it is one marked down ([`Tunnels::set_down`]). A per-flow destination with no
    /// headers yet is queued for the control side, and the control side woken
    /// ([`Tunnels::request_signal`]). When a megaflow is compiled, not per packet.
    pub fn send(&self, ofport: u32, fields: &TunFields) -> Option<TunnelSend> {
        let per_flow = self.per_flow.load();
        let Some((_, port)) = per_flow.iter().find(|p| p.0 == ofport) else {
            return match self.output(ofport) {
                Some(o) => Some(TunnelSend::Out(o)),
                None if self.down.load().contains(&ofport) => Some(TunnelSend::Drop(
                    self.send_counter(ofport, SendDrop::Unreachable),
                )),
                None => None,
            };
        };
        let Some(dest) = fields.dest(ofport, port) else {
            return Some(TunnelSend::Drop(
                self.send_counter(ofport, SendDrop::FlowUnset),
            ));
        };
        if let Some(o) = self.flow_outputs.load().get(&dest) {
            return Some(TunnelSend::Out(o.clone()));
        }
        let news = self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dest);
        if news {
            self.signal.raise();
        }
        Some(TunnelSend::Drop(
            self.send_counter(ofport, SendDrop::Unresolved),
        ))
    }

    /// `(reason, count)` for every drop reason summed over the ports: termination's
    /// (`tunnel_no_port` last of them), then the send side's
    /// ([`crate::tunnel_drops::SendDrop`]).
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        self.book.total()
    }

    /// Port `ofport`'s tunnel drops by reason: termination's when it is an underlay port,
    /// the send side's when it is a tunnel port (empty for other ports).
    pub fn port_drops(&self, ofport: u32) -> Vec<(&'static str, u64)> {
        self.book.port(ofport)
    }

    /// Tunnel port `ofport`'s counter of send-side drops for `reason`, for a stage that drops
    /// its packets without a [`TunnelOutput`] (e.g. a per-flow remote with no headers yet):
    /// taken once when a megaflow is compiled, counted per dropped packet with
    /// [`SendCounter::add`].
    pub fn send_counter(&self, ofport: u32, reason: SendDrop) -> SendCounter {
        SendCounter::new(self.book.of(ofport, Side::Tunnel), reason)
    }

    /// Tunnel port `ofport`'s counts (made on first use, kept until [`Tunnels::forget`]).
    fn port_counter(&self, ofport: u32) -> Arc<TunnelCounts> {
        self.counts
            .of(ofport, || self.book.of(ofport, Side::Tunnel))
    }

    /// What tunnel port `ofport` carried: terminated into it and encapsulated out of it,
    /// summed over the threads (`None`: no tunnel port of that number was published).
    pub fn port_counts(&self, ofport: u32) -> Option<TunnelPortCounts> {
        self.counts.read(ofport)
    }

    /// Forgets port `ofport`'s drops and counts (it left the bridge).
    pub fn forget(&self, ofport: u32) {
        self.set_down(ofport, false);
        self.book.forget(ofport);
        self.counts.forget(ofport);
    }

    /// The terminating ports as they are now, for one batch.
    #[inline]
    pub(crate) fn rx_table(&self) -> RxTable {
        RxTable(self.table.load())
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use packet::pool::Pool;
    use packet::PoolCache;
    use tunnel::{Encap, EncapTemplate, OuterAddrs, TunnelKind, TunnelPort};

    use super::*;

    const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);

    /// `inner` in VXLAN with `vni`, from 192.168.0.1 to [`LOCAL`]; with a UDP checksum when
    /// `csum` (which only the general path takes).
    fn vxlan(cache: &mut PoolCache, vni: u32, csum: bool, inner: &[u8]) -> packet::Packet {
        let a = OuterAddrs {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: Ipv4Addr::new(192, 168, 0, 1).into(),
            dst: LOCAL.into(),
        };
        let t = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, vni, csum), &a).unwrap();
        let mut p = cache.alloc_from(inner).unwrap();
        t.push(&mut p, 1, 1).unwrap();
        p
    }

    /// A batch of plain, tunneled, unknown-VNI and tunneled frames (the fourth in the
    /// second's train, the last with a UDP checksum), frame by frame: the tunnel frames lose
    /// their outer headers, the unknown one
    /// is counted on the underlay port, and the terminated frames are counted on their
    /// tunnel port: the fast path's once, at the end of the batch.
    #[test]
    fn a_batch_is_terminated_and_counted() {
        let mut cache = Pool::with_frames(16).cache();
        let tunnels = Tunnels::new();
        let port = TunnelPort {
            ofport: 9,
            kind: TunnelKind::Vxlan,
            dst_port: 4789,
            vni: Some(42),
            remote: None,
            local: None,
        };
        tunnels.set(1, Some(Terminator::new(vec![port], &[IpAddr::V4(LOCAL)])));
        let inner: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60]).collect();
        let mut frames = [
            cache.alloc_from(&inner[0]).unwrap(),
            vxlan(&mut cache, 42, false, &inner[1]),
            vxlan(&mut cache, 7, false, &inner[2]),
            vxlan(&mut cache, 42, false, &inner[3]),
            vxlan(&mut cache, 42, true, &inner[4]),
        ];
        let table = tunnels.rx_table();
        assert!(table.port(2).is_none(), "another port terminates nothing");
        let mut rx = table.port(1).unwrap();
        let outcomes: Vec<_> = frames
            .iter_mut()
            .map(|p| {
                // As the receive loop does: the train's path first.
                if let Some(m) = rx.follow(p) {
                    assert_eq!((m.ofport, m.vni), (9, 42));
                    return "train";
                }
                match rx.receive(0, p) {
                    Rx::NotTunnel => "plain",
                    Rx::Drop => "drop",
                    Rx::Tunnel(m) => {
                        assert_eq!((m.ofport, m.vni), (9, 42));
                        "tunnel"
                    }
                }
            })
            .collect();
        // The fourth frame's outer headers are the second's: it follows the train.
        assert_eq!(outcomes, ["plain", "tunnel", "drop", "train", "tunnel"]);
        for i in [1, 3, 4] {
            assert_eq!(frames[i].data(), &inner[i][..]);
        }
        assert_eq!(
            frames[0].data(),
            &inner[0][..],
            "a plain frame is left alone"
        );
        // Counted as their inner frames: the general path's (the UDP checksum) at once, the
        // fast path's run when the batch ends.
        let counts = tunnels.port_counts(9).unwrap();
        assert_eq!((counts.rx_packets, counts.rx_bytes), (1, 60));
        rx.finish(0);
        let counts = tunnels.port_counts(9).unwrap();
        assert_eq!((counts.rx_packets, counts.rx_bytes), (3, 180));
        assert_eq!((counts.tx_packets, counts.tx_bytes), (0, 0));
        let drops = tunnels.drops();
        assert!(drops.contains(&("tunnel_no_port", 1)), "{drops:?}");
        assert_eq!(drops.iter().map(|d| d.1).sum::<u64>(), 1);
        assert!(tunnels.port_drops(1).contains(&("tunnel_no_port", 1)));
        assert!(tunnels.port_drops(2).is_empty());
        // A compiled output stays three words (an `Op` stays 32 bytes).
        assert_eq!(std::mem::size_of::<TunnelOutput>(), 24);
        drop(table);
        for p in frames {
            cache.free(p);
        }
        // Unset: the port switches tunnel frames as they are.
        tunnels.set(1, None);
        assert!(tunnels.rx_table().port(1).is_none());
    }

    /// Compiling an output to a per-flow destination with no headers queues it and wakes
    /// the control side, once per destination until the control side takes the queue; a
    /// destination with headers does not.
    #[test]
    fn an_unresolved_destination_wakes_the_control_side_once() {
        use std::time::Instant;

        use crate::tunnel_flows::{PerFlowPort, TunFields};

        let t = Tunnels::new();
        let signal = t.request_signal();
        let flow = PerFlowPort {
            remote: None,
            vni: None,
        };
        t.set_per_flow(vec![(9, flow)]);
        let to = |remote: [u8; 4]| TunFields {
            dst: Some(IpAddr::V4(Ipv4Addr::from(remote))),
            id: Some(42),
        };
        let now = Instant::now;
        assert!(!signal.wait_until(now()), "nothing asked yet");
        assert!(matches!(
            t.send(9, &to([10, 0, 0, 2])),
            Some(TunnelSend::Drop(_))
        ));
        assert!(signal.wait_until(now()), "asked: woken");
        assert!(matches!(
            t.send(9, &to([10, 0, 0, 2])),
            Some(TunnelSend::Drop(_))
        ));
        assert!(!signal.wait_until(now()), "asked already: no second wake");
        let (asked, _) = t.take_requests();
        assert_eq!(asked.len(), 1);
        // Resolved: its output compiles to the headers, nobody is woken.
        let a = OuterAddrs {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: LOCAL.into(),
            dst: Ipv4Addr::new(10, 0, 0, 2).into(),
        };
        let tpl = EncapTemplate::new(&Encap::new(TunnelKind::Vxlan, 42, false), &a).unwrap();
        t.set_flow_outputs(vec![(asked[0], (1, tpl, 1500))]);
        assert!(matches!(
            t.send(9, &to([10, 0, 0, 2])),
            Some(TunnelSend::Out(_))
        ));
        assert!(!signal.wait_until(now()), "resolved: no wake");
        assert!(matches!(
            t.send(9, &to([10, 0, 0, 3])),
            Some(TunnelSend::Drop(_))
        ));
        assert!(signal.wait_until(now()), "another destination: woken");
    }
}

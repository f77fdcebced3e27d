//! The receive stage of the tunnel ports on one underlay port: which tunnel port a frame
//! [`crate::terminate`] accepts belongs to, its outer headers pulled off the packet, the
//! outer metadata written into the flow key after extraction, and drops counted by reason.
//!
//! Size and owner: one [`Terminator`] per underlay port that has tunnel ports, built by the
//! control side when tunnel ports come and go and shared read-only with the poll-mode
//! threads; the caller counts the drops ([`RxDrop::index`]). No allocation or I/O per packet.
//!
//! Port choice follows Open vSwitch: among the tunnel ports of the frame's encapsulation and
//! UDP port whose fixed remote, local address and VNI (where fixed) agree with the outer
//! headers, the most specific wins (a fixed remote and a fixed VNI over `flow`); a frame no
//! port accepts (an unknown VNI, an unknown remote) is dropped and counted as
//! `tunnel_no_port`.

use std::net::IpAddr;

use packet::key::parsed;
use packet::{Field, FlowKey, Gso, Packet};

use crate::decap::{terminate, Decapped, DropReason, Locals, Termination};
use crate::endpoint::TunnelKind;
use crate::rx_fast::{FastV4, INNER_OFF};
use crate::rx_train::Train;
use crate::rx_whole::View;
use crate::spec::{PerFlow, TunnelSpec};

/// One tunnel port as its receive side sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelPort {
    /// Its OpenFlow port number (the terminated packet's `in_port`).
    pub ofport: u32,
    /// VXLAN or Geneve.
    pub kind: TunnelKind,
    /// UDP destination port it listens on.
    pub dst_port: u16,
    /// The VNI it accepts; `None`: any (`vni=flow`).
    pub vni: Option<u32>,
    /// The remote it accepts packets from; `None`: any (`remote=flow`).
    pub remote: Option<IpAddr>,
    /// The local address it accepts packets to; `None`: any of the underlay's.
    pub local: Option<IpAddr>,
}

impl TunnelPort {
    /// The receive side of the port `ofport` configured by `spec`.
    pub fn from_spec(ofport: u32, spec: &TunnelSpec) -> TunnelPort {
        TunnelPort {
            ofport,
            kind: spec.kind,
            dst_port: spec.dst_port,
            vni: fixed(spec.vni),
            remote: fixed(spec.remote),
            local: spec.local,
        }
    }

    /// How specific the port is (higher wins), or `None` when it does not accept `d`.
    fn accepts(&self, d: &Decapped, dst_port: u16) -> Option<u8> {
        let agree = |want: Option<IpAddr>, got: IpAddr| want.is_none_or(|w| w == got);
        let ok = self.kind == d.kind
            && self.dst_port == dst_port
            && self.vni.is_none_or(|v| v == d.vni)
            && agree(self.remote, d.src)
            && agree(self.local, d.dst);
        ok.then(|| self.vni.is_some() as u8 + self.remote.is_some() as u8)
    }
}

/// The value of a per-flow option when the port fixes it.
fn fixed<T>(p: PerFlow<T>) -> Option<T> {
    match p {
        PerFlow::Fixed(v) => Some(v),
        PerFlow::Flow => None,
    }
}

/// What the outer headers of a terminated packet put into its flow key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunMeta {
    /// The tunnel port it arrived on.
    pub ofport: u32,
    /// That port's place in [`Terminator::ports`] (a dense index for per-port state).
    pub index: u32,
    /// The VNI (`tun_id`).
    pub vni: u32,
    /// Outer source (`tun_src`, or `tun_ipv6_src` when `ipv6`).
    pub src: u128,
    /// Outer destination.
    pub dst: u128,
    /// The underlay is IPv6.
    pub ipv6: bool,
}

impl TunMeta {
    fn of(ofport: u32, index: usize, d: &Decapped) -> TunMeta {
        let wide = |a: IpAddr| match a {
            IpAddr::V4(a) => u32::from(a) as u128,
            IpAddr::V6(a) => u128::from(a),
        };
        TunMeta {
            ofport,
            index: index as u32,
            vni: d.vni,
            src: wide(d.src),
            dst: wide(d.dst),
            ipv6: d.src.is_ipv6(),
        }
    }

    /// Writes `tun_id`, the endpoints and the underlay's `parsed` bit into a key that
    /// extraction just filled from the inner frame, with [`TunMeta::ofport`] as the
    /// packet's `in_port` (the caller sets `pkt.meta.in_port` before extracting: writing it
    /// here again would reload the word extraction just stored).
    #[inline]
    pub fn write(&self, key: &mut FlowKey) {
        key.set(Field::TunnelId, self.vni as u128);
        key.set(Field::TunIpv6Src, self.src);
        key.set(Field::TunIpv6Dst, self.dst);
        const _: () = assert!(parsed::TUN_IPV6 == parsed::TUN_IPV4 << 1);
        let bit = parsed::TUN_IPV4 << u16::from(self.ipv6);
        key.or(Field::Parsed, u64::from(bit));
    }
}

/// Why the receive stage dropped a frame addressed to a local tunnel endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxDrop {
    /// Its outer or tunnel headers are unusable.
    Header(DropReason),
    /// No tunnel port accepts it (unknown VNI or remote).
    NoPort,
}

impl RxDrop {
    /// Number of distinct drops: every [`DropReason`], then `NoPort`.
    pub const COUNT: usize = DropReason::ALL.len() + 1;

    /// A dense index for counters, below [`RxDrop::COUNT`].
    pub fn index(self) -> usize {
        match self {
            RxDrop::Header(r) => DropReason::ALL.iter().position(|&x| x == r).unwrap_or(0),
            RxDrop::NoPort => DropReason::ALL.len(),
        }
    }

    /// The counters' names in index order (`tunnel_no_port` last).
    pub fn names() -> impl Iterator<Item = &'static str> {
        DropReason::ALL
            .iter()
            .map(|r| r.name())
            .chain(["tunnel_no_port"])
    }
}

/// What the receive stage made of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxOutcome {
    /// Not for a local tunnel endpoint: switch it as it is.
    NotTunnel,
    /// A tunnel packet, now holding the inner frame only.
    Tunnel(TunMeta),
    /// Count and drop.
    Drop(RxDrop),
}

/// [`RxOutcome`] without the metadata, which [`Terminator::receive_in`] leaves in its
/// [`Train`] ([`Train::meta_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxKind {
    /// Not for a local tunnel endpoint.
    NotTunnel,
    /// A tunnel packet, now holding the inner frame only, decided as the [`Via`] says.
    Tunnel(Via),
    /// Count and drop.
    Drop(RxDrop),
}

/// How [`Terminator::receive_in`] decided a tunnel packet, which says where its metadata is
/// and whether it is the previous train packet's: a caller that keeps state per tunnel port
/// (counts) looks the port up only when it may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// In the train: the metadata is the train's ([`Train::meta`]), as for the last packet
    /// that came [`Via::Train`] or [`Via::Fast`].
    Train,
    /// By the fast path, which made it the train's last frame: the train's metadata is now
    /// its own.
    Fast,
    /// By the general path: its metadata is held beside the train's, which is unchanged.
    General,
}

/// The tunnel ports of one underlay port and the local endpoints they terminate.
#[derive(Debug, Clone, Default)]
pub struct Terminator {
    locals: Locals,
    ports: Vec<TunnelPort>,
    fast: FastV4,
}

impl Terminator {
    /// The receive side of `ports` on an underlay port whose host owns `local_addrs` (the
    /// addresses a port without `local=` terminates on).
    pub fn new(ports: Vec<TunnelPort>, local_addrs: &[IpAddr]) -> Terminator {
        let mut locals = Locals::default();
        for a in ports
            .iter()
            .filter_map(|p| p.local)
            .chain(local_addrs.iter().copied())
        {
            if !locals.addrs.contains(&a) {
                locals.addrs.push(a);
            }
        }
        for p in &ports {
            if !locals.ports.iter().any(|q| q.0 == p.dst_port) {
                locals.ports.push((p.dst_port, p.kind));
            }
        }
        let fast = FastV4::new(&ports, &locals.addrs, &locals.ports);
        Terminator {
            locals,
            ports,
            fast,
        }
    }

    /// The tunnel ports it terminates into.
    pub fn ports(&self) -> &[TunnelPort] {
        &self.ports
    }

    /// Whether it terminates nothing (no tunnel port or no local address).
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty() || self.locals.addrs.is_empty()
    }

    /// Decides what `pkt` is; for a tunnel packet, pulls the outer headers (and any outer
    /// padding) off so that the packet holds the inner frame. The common case takes the
    /// specialised path (`rx_fast.rs`), the rest the general one.
    #[inline]
    pub fn receive(&self, pkt: &mut Packet) -> RxOutcome {
        if pkt.is_gso() {
            return self.receive_whole(pkt);
        }
        if let Some((meta, end)) = self.fast.terminate(pkt.data()) {
            pkt.truncate(end);
            pkt.pull_front(INNER_OFF);
            return RxOutcome::Tunnel(meta);
        }
        self.receive_general(pkt)
    }

    /// [`Terminator::receive`] for one of a batch's frames in order: a frame in the train of
    /// the last one the fast path took in `train` ([`crate::rx_train`]) gets its verdict
    /// with two checks ([`Train::carries`]); any other goes through
    /// [`Terminator::receive_off_train`]. Same answer as [`Terminator::receive`], frame by
    /// frame; a tunnel packet's metadata is [`Train::meta_of`] (lent, not copied: this runs
    /// inside the thread's extraction loop).
    #[inline(always)]
    pub fn receive_in(&self, pkt: &mut Packet, train: &mut Train) -> RxKind {
        if train.carries(pkt) {
            return RxKind::Tunnel(Via::Train);
        }
        self.receive_off_train(pkt, train)
    }

    /// [`Terminator::receive_in`] for a frame [`Train::carries`] did not take: through
    /// [`Terminator::receive`]'s paths, a frame the fast path takes starting a train. Never
    /// answers [`Via::Train`].
    #[inline(always)]
    pub fn receive_off_train(&self, pkt: &mut Packet, train: &mut Train) -> RxKind {
        if pkt.is_gso() {
            return train.hold(self.receive_whole(pkt));
        }
        let Some(v) = self.fast.terminate(pkt.data()) else {
            return train.hold(self.receive_general(pkt));
        };
        let end = train.take(pkt.data(), v);
        // The fast path checked that the frame holds `INNER_OFF..end`.
        let kept = pkt.keep(INNER_OFF, end);
        debug_assert!(kept);
        RxKind::Tunnel(Via::Fast)
    }

    /// [`Terminator::receive`] through the general path only (the reference).
    fn receive_general(&self, pkt: &mut Packet) -> RxOutcome {
        let (d, meta) = match self.judge(pkt.data()) {
            Ok(x) => x,
            Err(out) => return out,
        };
        pkt.truncate(d.inner.end);
        if !pkt.pull_front(d.inner.start) {
            return RxOutcome::Drop(RxDrop::Header(DropReason::InnerTooShort));
        }
        RxOutcome::Tunnel(meta)
    }

    /// [`Terminator::receive`] for a super-packet ([`packet::gso`]): one encapsulated whole
    /// (a TAP underlay's kernel hands them over) is judged on a view of its outer headers
    /// (`rx_whole.rs`) and, terminated, becomes the plain super-packet inside; a plain one is
    /// not a tunnel packet.
    #[cold]
    #[inline(never)]
    fn receive_whole(&self, pkt: &mut Packet) -> RxOutcome {
        let Some(g) = pkt.gso().filter(|g| g.outer != 0) else {
            return RxOutcome::NotTunnel;
        };
        let outer = usize::from(g.outer);
        let Some(view) = View::of(pkt.data(), outer) else {
            return RxOutcome::NotTunnel;
        };
        let (d, meta) = match self.judge(view.bytes()) {
            Ok(x) => x,
            Err(out) => return out,
        };
        let drop = |r| RxOutcome::Drop(RxDrop::Header(r));
        if d.inner.start != outer {
            return drop(DropReason::TunnelHeader);
        }
        if !pkt.pull_front(outer) || !pkt.set_gso(Some(Gso { outer: 0, ..g })) {
            return drop(DropReason::InnerTooShort);
        }
        RxOutcome::Tunnel(meta)
    }

    /// The general path's judgement of `frame`: the tunnel packet it is and the port that
    /// takes it, or what to do instead.
    fn judge(&self, frame: &[u8]) -> Result<(Decapped, TunMeta), RxOutcome> {
        let d = match terminate(frame, &self.locals) {
            Termination::NotTunnel => return Err(RxOutcome::NotTunnel),
            Termination::Drop(r) => return Err(RxOutcome::Drop(RxDrop::Header(r))),
            Termination::Decapped(d) => d,
        };
        let dst_port = self.dst_port_of(frame, &d);
        let best = self
            .ports
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.accepts(&d, dst_port).map(|s| (s, i, p)))
            .max_by_key(|(s, _, _)| *s);
        let Some((_, index, port)) = best else {
            return Err(RxOutcome::Drop(RxDrop::NoPort));
        };
        let meta = TunMeta::of(port.ofport, index, &d);
        Ok((d, meta))
    }

    /// The outer UDP destination port: the 16 bits just before the tunnel header, which
    /// `terminate` found (8 bytes of UDP header, then VXLAN's 8 or Geneve's 8 + options).
    fn dst_port_of(&self, frame: &[u8], d: &Decapped) -> u16 {
        let tunnel_hdr = 8 + d.options.len();
        let udp = d.inner.start.saturating_sub(tunnel_hdr + 8);
        packet::wire::get_be16(frame, udp + 2).unwrap_or(0)
    }
}

#[cfg(test)]
#[path = "rx_tests.rs"]
mod tests;

//! Overlay tunnels: VXLAN (RFC 7348) and Geneve (RFC 8926) between hosts, over IPv4 or IPv6.
//!
//! # Design
//!
//! A tunnel is an OpenFlow port with no queues of its own, as in Open vSwitch's userspace
//! datapath. Its packets travel through an *underlay port* of the same switch (a NIC on
//! AF_XDP or AF_PACKET) whose host owns the tunnel's local address.
//!
//! **Send.** Translation turns `output:TUNNEL` into "encapsulate with this header, then output
//! to the underlay port". The outer headers — Ethernet, IPv4 or IPv6, UDP, VXLAN or Geneve with
//! its options — are a template built once per (remote, VNI, options) when the next hop is
//! known ([`encap::EncapTemplate`]); per packet they are copied into the headroom in front of
//! the frame (no copy of the frame itself), and only the lengths, the IPv4 header checksum (an
//! incremental update of the template's), the UDP source port (from the inner flow's hash, so
//! that the underlay's ECMP and RSS spread the flows, in the kernel's port range) and, when
//! configured (always for IPv6 unless turned off), the UDP checksum are written.
//!
//! **Receive.** Frames that arrive on an underlay port addressed to one of its tunnels (IPv4
//! or IPv6 to a local address, UDP to the tunnel's port) are *terminated* right after receive,
//! before flow-key extraction ([`decap::terminate`]): the outer headers are checked (the IPv4
//! header checksum, a non-zero UDP checksum, the VXLAN I flag, the Geneve version and options)
//! and pulled off the front, and what they said — VNI, outer source and destination, TOS/TTL,
//! Geneve options — becomes the packet's tunnel metadata. The inner frame is then extracted
//! once, like any other, with the tunnel port as its in_port. A malformed outer header is
//! counted by reason and dropped; other traffic on the underlay port is switched as usual.
//!
//! **Next hop.** The template's outer MAC addresses and the underlay port come from the
//! host's routing and neighbour tables (the kernel's, read over netlink and kept current, as
//! Open vSwitch's userspace tunnels mirror them); a remote that cannot be reached has no
//! template, its packets are counted as dropped, and the port status says why.
//!
//! **Megaflows.** The tunnel metadata are fields of the flow key, so a megaflow that consulted
//! `tun_id` or `tun_src` carries them in its mask like any other field.
//!
//! **MTU.** A frame whose encapsulated length exceeds the underlay's MTU is counted and, for
//! IPv4 with DF and for IPv6, answered with ICMP "fragmentation needed" / "packet too big"
//! carrying the MTU left after [`encap::EncapTemplate::overhead`].
//!
//! # Wiring into the switch (issue 18; `docs/tunnels.md` says what works)
//!
//! 1. **Key room** (done). The key grew to 20 words: `tun_ipv6_src`/`tun_ipv6_dst` in words
//!    16–19, `tun_src`/`tun_dst` their low 32 bits, `parsed::TUN_IPV4`/`TUN_IPV6` the
//!    underlay's family.
//! 2. **OpenFlow** (done). OXM `TUNNEL_ID`, Nicira `tun_src`/`tun_dst` and the IPv6 ones in
//!    the codec and the ofctl syntax, `set_field` of them and `set_tunnel`.
//! 3. **Receive** (done). [`rx::Terminator`]
//!    per underlay port, run by the datapath's `tunnels.rs` right after receive (termination
//!    before extraction, `in_port` = the tunnel's port, drops by reason).
//! 4. **Ports** (done: config, `hayate ctl add-port`, OVSDB). `vxlan:`/`geneve:` specs ([`spec::TunnelSpec`]) make an OpenFlow
//!    port with no queues, named with its underlay port; the switch builds the underlay's
//!    [`rx::Terminator`] from them and the underlay's addresses.
//! 5. **Send** (done in the datapath). Output to a tunnel port compiles to the datapath's
//!    `Op::Tunnel` (a copy with template T pushed, to the underlay's tx entry) from templates
//!    the control side swaps (arc-swap) when a next hop changes; the MTU check and the
//!    [`pmtud`] answer there. For `remote=flow`/`vni=flow` ports the `tun_dst`/`tun_id` the
//!    flow set before the output are constants of the megaflow: they pick a template per
//!    (port, remote, VNI) (the datapath's `tunnel_flows.rs`); a destination without one
//!    compiles to a counted drop (`tunnel_unresolved`) and a request in a bounded queue,
//!    and the control side's resolution installs it and drops the megaflows. Packet-outs
//!    take the same compile. Super-packets are cut into segments, then each is encapsulated.
//! 6. **Control side** (done). Housekeeping re-resolves every remote each second
//!    ([`nexthop::Resolver`]) — the fixed ones and the per-flow destinations the datapath
//!    asked for (`hayate`'s `tunnel_flows.rs`, forgotten when unused); a tunnel port is a
//!    bridge port with no queues whose link is down while its remote is
//!    [`nexthop::Unreachable`], with the reason in its status (`hayate ctl show`, OpenFlow
//!    port state and PORT_STATUS, OVSDB `link_state`/`error`). Tunnel ports come and go with
//!    `hayate ctl add-port`/`del-port` and OVSDB `vxlan`/`geneve` Interfaces; drops are
//!    counted per port by reason (`dump-drops`, metrics).
//!
//! This crate holds the per-packet halves (encapsulate, terminate), which do no I/O, and the
//! control side's next-hop questions to the kernel (`nexthop.rs`).

pub mod decap;
pub mod encap;
pub mod encap_train;
pub mod endpoint;
pub mod fuzzing;
pub mod nexthop;
pub mod pmtud;
pub mod rx;
pub mod rx_fast;
pub mod rx_train;
mod rx_whole;
pub mod spec;

pub use decap::{terminate, Decapped, DropReason, Locals, Termination};
pub use encap::{EncapError, EncapTemplate};
pub use endpoint::{Encap, OuterAddrs, TunnelKind};
pub use nexthop::{NextHop, Resolver, Unreachable};
pub use rx::{RxDrop, RxKind, RxOutcome, Terminator, TunMeta, TunnelPort, Via};
pub use rx_train::Train;
pub use spec::{PerFlow, SpecError, TunnelSpec};

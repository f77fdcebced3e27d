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
//! # Wiring into the switch (issue 18; not done yet)
//!
//! 1. **Key room.** The flow key is full (16 words; only `tun_id` has a word). `tun_src` and
//!    `tun_dst` need 64 bits for IPv4 underlays and 256 for IPv6. Two candidates, to be
//!    decided by `hayate bench` before/after on a quiet machine: grow the key to 20 words
//!    (every cache tier compares and hashes a quarter more), or keep 16 words and intern
//!    tunnel endpoint addresses into 16-bit ids beside a 24-bit `tun_id` in word 2 (exact
//!    matches only on `tun_src`/`tun_dst`; masked ones refused with `OFPBMC_BAD_MASK`).
//! 2. **Ports.** `vxlan:`/`geneve:` specs ([`spec::TunnelSpec`]) make an OpenFlow port with no
//!    queues; the switch hands its [`decap::Locals`] to the underlay port's receive stage in
//!    the poll loop (termination before extraction, `in_port` = the tunnel's port).
//! 3. **OpenFlow.** OXM `TUNNEL_ID`, Nicira `tun_src`/`tun_dst` (NXM_NX_TUN_IPV4_SRC/DST and
//!    the IPv6 ones) in the codec and the ofctl syntax; `set_field` of them and `set_tunnel`;
//!    `output:TUNNEL` translated into "encapsulate with template T, output to the underlay".
//! 4. **Datapath.** An encapsulation op in `execute.rs` over a table of templates the control
//!    side swaps (arc-swap) when a next hop changes; the MTU check and the [`pmtud`] answer
//!    there; drop counters by [`decap::DropReason`] and for unreachable remotes.
//! 5. **Control side.** Housekeeping re-resolves every remote each second
//!    ([`nexthop::Resolver`]) and puts [`nexthop::Unreachable`] in the port's status.
//!
//! This crate holds the per-packet halves (encapsulate, terminate), which do no I/O, and the
//! control side's next-hop questions to the kernel (`nexthop.rs`).

pub mod decap;
pub mod encap;
pub mod endpoint;
pub mod fuzzing;
pub mod nexthop;
pub mod pmtud;
pub mod rx;
pub mod spec;

pub use decap::{terminate, Decapped, DropReason, Locals, Termination};
pub use encap::{EncapError, EncapTemplate};
pub use endpoint::{Encap, OuterAddrs, TunnelKind};
pub use nexthop::{NextHop, Resolver, Unreachable};
pub use rx::{RxDrop, RxDrops, RxOutcome, Terminator, TunMeta, TunnelPort};
pub use spec::{PerFlow, SpecError, TunnelSpec};

//! Hayate's benchmark lab: the switch beside its peers, each run by the `hayate` binary as a
//! child process (this crate never links the switch), on real interfaces, namespaces and
//! vhost-user "VMs". The binary's `hayate bench compare|generators|vhost|soak|churn-compare|noisy|tunnel-tcp` call
//! in here.
//!
//! - [`compare`]: two hosts in namespaces joined by Hayate, the Linux bridge, Open vSwitch
//!   (system ports, userspace TSO, AF_XDP) or dpdk-testpmd on AF_XDP (the I/O floor): rates by
//!   size, TCP, latency under load.
//! - [`generators`]: packet generators side by side on one veth pair.
//! - [`vhost`]: vhost-user PVP and VM-to-VM on one switch core, Hayate beside Open vSwitch
//!   with DPDK and DPDK's vhost library.
//! - [`soak`]: the control side under everything at once for N minutes — churn, whole-table
//!   dumps, connection floods, malformed frames, ports plugged and unplugged — and what must
//!   hold at the end.
//! - [`churn`]: the rate while a controller changes the rules and how soon a change takes
//!   effect, Hayate beside Open vSwitch with DPDK on the same frames and cores.
//! - [`tunnel_tcp`]: TCP between two hosts' VMs through a VXLAN overlay, two Hayates beside
//!   two kernel VXLAN devices in Linux bridges.
//! - [`noisy`]: a victim pair's TCP, latency and transactions while a neighbour floods, with
//!   and without ingress policing, Hayate beside the Linux bridge and Open vSwitch.
//!
//! Shared by them: [`bench`](mod@bench) (the steps of every bench's `main`: options checked, switches
//! picked by name, the work folder, cores, JSON), [`sys`] (children and host changes, always
//! undone), [`ovs_dpdk`] (a private Open vSwitch with DPDK), [`needs`] (packages), [`frame`]
//! (test frames and pcaps), [`report`] (medians, ratios, runs grouped per case and switch,
//! tables, charts).
//!
//! Every child runs on a time bound and dies with its parent; what a run changes on the host
//! (namespaces, huge pages, mounts) is undone at its end, on Ctrl-C and on failure.

#![deny(missing_docs)]

pub mod bench;
pub mod churn;
pub mod compare;
pub mod frame;
pub mod generators;
pub mod needs;
pub mod noisy;
pub mod ovs_dpdk;
pub mod report;
pub mod soak;
pub mod sys;
pub mod tunnel_tcp;
pub mod vhost;

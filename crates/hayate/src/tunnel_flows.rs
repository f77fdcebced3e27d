//! The control side of tunnel ports whose remote or VNI the flows choose (`remote=flow`,
//! `vni=flow`; issue 18): which (port, remote, VNI) destinations the datapath asked for
//! ([`datapath::Tunnels::take_requests`]), their outer headers resolved from the host's
//! routing and neighbour tables like a fixed tunnel's, and published to the datapath
//! ([`datapath::Tunnels::set_flow_outputs`]) when they change. A new destination is resolved
//! as soon as the datapath asks ([`FlowDests::resolve_requests`], on its wake); every
//! periodic pass ([`FlowDests::refresh`], each second by default) resolves them all again.
//! Destinations no megaflow has used for [`FORGET_AFTER`] periodic passes are forgotten; at
//! most [`MAX_DESTS`] are kept. The design is in the `tunnel` crate's `lib.rs`.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use datapath::{FlowDest, PerFlowPort, Tunnels};
use tunnel::{EncapTemplate, PerFlow, Resolver, TunnelSpec};

use crate::tunnels::{StaticHop, TunnelConf, Underlay};

/// Most per-flow destinations kept (a controller that names more remotes than this has the
/// rest counted as `tunnel_unresolved`, and a warning logged).
pub const MAX_DESTS: usize = 4096;

/// Resolutions of a new destination that cannot be reached yet (its next hop's MAC being
/// resolved, say) before the next periodic pass: the thread tries again after 10, 20, 40 ...
/// ms (`tunnels/thread.rs`), then leaves it to the periodic passes.
pub const EARLY_TRIES: u8 = 6;

/// Periodic passes (seconds, by default) a destination is kept after its last megaflow went.
pub const FORGET_AFTER: u32 = 60;

/// Where output to one remote goes: the underlay port, the outer headers, the local address
/// the route picked, and the underlay interface's IP MTU.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The underlay port.
    pub underlay: u32,
    /// The outer headers.
    pub template: EncapTemplate,
    /// The local tunnel endpoint.
    pub local: IpAddr,
    /// The underlay interface's IP MTU.
    pub mtu: u16,
}

/// The bridge port named `name` (port name or kernel interface) among `underlays`.
pub fn underlay_named(underlays: &[Underlay], name: &str) -> Option<u32> {
    underlays
        .iter()
        .find(|u| u.name == name || u.ifname.as_deref() == Some(name))
        .map(|u| u.ofport)
}

/// The underlay port that sends out of kernel interface `ifname` (where a route leaves; see
/// [`Underlay::routed`]).
pub fn underlay_routed(underlays: &[Underlay], ifname: &str) -> Option<u32> {
    underlays
        .iter()
        .find(|u| u.routed && u.ifname.as_deref() == Some(ifname))
        .map(|u| u.ofport)
}

/// `Err` when the named underlay port `named` is a TAP and so needs the next hop given: what
/// it sends, this host's kernel receives, so the kernel's route to the remote (which leaves by
/// another interface) says nothing about the frames Hayate must write into it.
pub fn needs_static_hop(underlays: &[Underlay], named: Option<u32>) -> Result<(), String> {
    match named.and_then(|u| underlays.iter().find(|p| p.ofport == u)) {
        Some(p) if !p.routed && p.ifname.is_some() => Err(format!(
            "underlay {} is a TAP: give the tunnel its next hop, local=IP and \
             nexthop_mac=<the TAP's kernel-side MAC> (docs/tunnels.md, \
             \"Underlay through the host's kernel\")",
            p.name
        )),
        _ => Ok(()),
    }
}

/// Resolves the output of a tunnel with `spec` towards `remote` with tunnel id `vni`: the
/// next hop from the kernel (or from `static_hop`, the spec's `nexthop_mac=`, when it has
/// `local=` and a named underlay), the underlay port (`named`, else the bridge port the route
/// leaves by), the outer headers. `Err` says why it cannot be reached.
pub fn resolve_output(
    resolver: &mut Resolver,
    underlays: &[Underlay],
    named: Option<u32>,
    spec: &TunnelSpec,
    static_hop: Option<&StaticHop>,
    remote: IpAddr,
    vni: u32,
) -> Result<Resolved, String> {
    let hop = match (static_hop, spec.local, named) {
        (Some(s), Some(local), Some(u)) => {
            let port = underlays.iter().find(|p| p.ofport == u);
            let (name, ifname) =
                port.map_or(("?", None), |p| (p.name.as_str(), p.ifname.as_deref()));
            s.next_hop(remote, local, name, ifname)?
        }
        _ => {
            needs_static_hop(underlays, named)?;
            resolver
                .resolve(remote, spec.local)
                .map_err(|e| e.to_string())?
        }
    };
    let underlay = match named.or_else(|| underlay_routed(underlays, &hop.ifname)) {
        Some(u) => u,
        None => {
            return Err(format!(
                "the route to {remote} leaves by {}, which is not a port of this bridge \
                 (add it, or name the underlay port: underlay=PORTNAME)",
                hop.ifname
            ))
        }
    };
    let template = EncapTemplate::new(&spec.encap(vni, remote.is_ipv6()), &hop.outer(remote))
        .map_err(|e| format!("{e:?}"))?;
    Ok(Resolved {
        underlay,
        template,
        local: hop.src,
        mtu: crate::tunnels::mtu_of(&hop.ifname),
    })
}

/// What the datapath is told about one destination: the headers it sends in, or why not.
type Outcome = Result<Resolved, String>;

/// One destination's state.
struct Dest {
    /// The last resolution (`None` before the first).
    found: Option<Outcome>,
    /// Passes since a megaflow last used its headers.
    idle: u32,
    /// Resolutions between periodic passes so far; [`EARLY_TRIES`] once it was reachable.
    tries: u8,
}

impl Dest {
    /// Whether it is resolved between periodic passes: never resolved yet, or not reachable
    /// and not tried early [`EARLY_TRIES`] times.
    fn early(&self) -> bool {
        match self.found {
            None => true,
            Some(Err(_)) => self.tries < EARLY_TRIES,
            Some(Ok(_)) => false,
        }
    }
}

/// The per-flow destinations of a bridge's tunnels.
#[derive(Default)]
pub struct FlowDests {
    dests: BTreeMap<FlowDest, Dest>,
    /// A request was refused for lack of room (logged once until there is room again).
    full_logged: bool,
}

/// Whether two outcomes send the same way (the same headers to the same port).
fn same(a: &Option<Outcome>, b: &Outcome) -> bool {
    match (a, b) {
        (Some(Ok(x)), Ok(y)) => {
            (x.underlay, x.template.header(), x.mtu) == (y.underlay, y.template.header(), y.mtu)
        }
        (Some(Err(x)), Err(y)) => x == y,
        _ => false,
    }
}

/// What a tunnel spec leaves to the flows, if anything.
fn per_flow(spec: &TunnelSpec) -> Option<PerFlowPort> {
    let remote = match spec.remote {
        PerFlow::Fixed(r) => Some(r),
        PerFlow::Flow => None,
    };
    let vni = match spec.vni {
        PerFlow::Fixed(v) => Some(v),
        PerFlow::Flow => None,
    };
    (remote.is_none() || vni.is_none()).then_some(PerFlowPort { remote, vni })
}

/// The tunnel ports of `tunnels` that leave their remote or VNI to the flow.
fn per_flow_ports(tunnels: &[TunnelConf]) -> Vec<(u32, PerFlowPort)> {
    tunnels
        .iter()
        .filter_map(|t| Some((t.ofport, per_flow(&t.spec)?)))
        .collect()
}

impl FlowDests {
    /// One periodic pass: tells `dp` which of `tunnels` take their remote or VNI from the
    /// flow, takes the destinations it asked for, resolves every destination kept, forgets
    /// idle ones, and publishes the headers when they changed. Returns whether the
    /// datapath's megaflows must be dropped (so that they compile, and ask, again).
    pub fn refresh(
        &mut self,
        dp: &Tunnels,
        tunnels: &[TunnelConf],
        underlays: &[Underlay],
        resolver: &mut Resolver,
    ) -> bool {
        let ports = per_flow_ports(tunnels);
        dp.set_per_flow(ports.clone());
        let mut changed = self.take_requests(dp, &ports);
        let used: HashSet<FlowDest> = dp.flow_outputs_in_use().into_iter().collect();
        let before = self.dests.len();
        self.dests.retain(|d, e| {
            e.idle = if used.contains(d) { 0 } else { e.idle + 1 };
            e.idle <= FORGET_AFTER && ports.iter().any(|p| p.0 == d.ofport)
        });
        if self.dests.len() < before {
            // Forgotten: their megaflows (if any are left) compile again and ask again.
            self.full_logged = false;
            changed = true;
        }
        changed |= self.resolve(tunnels, underlays, resolver, false);
        if changed {
            dp.set_flow_outputs(self.outputs());
        }
        changed
    }

    /// Between periodic passes, when the datapath asked (it raised its
    /// [`datapath::Tunnels::request_signal`]) or an early try is due: takes the destinations
    /// it asked for and resolves those, and those not reachable yet that have early tries
    /// left, publishing their headers. Ages and re-resolves nothing else (the periodic pass
    /// does). Returns whether the datapath's megaflows must be dropped.
    pub fn resolve_requests(
        &mut self,
        dp: &Tunnels,
        tunnels: &[TunnelConf],
        underlays: &[Underlay],
        resolver: &mut Resolver,
    ) -> bool {
        let mut changed = self.take_requests(dp, &per_flow_ports(tunnels));
        changed |= self.resolve(tunnels, underlays, resolver, true);
        if changed {
            dp.set_flow_outputs(self.outputs());
        }
        changed
    }

    /// Takes the destinations `dp` asked for and keeps those of per-flow `ports`, as room
    /// allows. Returns whether the datapath's queue overflowed (the megaflows that lost
    /// their requests must compile, and ask, again).
    fn take_requests(&mut self, dp: &Tunnels, ports: &[(u32, PerFlowPort)]) -> bool {
        let (asked, overflowed) = dp.take_requests();
        for d in asked {
            if self.dests.contains_key(&d) || !ports.iter().any(|p| p.0 == d.ofport) {
                continue;
            }
            if self.dests.len() >= MAX_DESTS {
                if !std::mem::replace(&mut self.full_logged, true) {
                    tracing::warn!(
                        "tunnel destinations: {MAX_DESTS} kept already; {} to {} (vni {}) \
                         is not resolved (its packets count as tunnel_unresolved)",
                        d.ofport,
                        d.remote,
                        d.vni
                    );
                }
                continue;
            }
            self.dests.insert(
                d,
                Dest {
                    found: None,
                    idle: 0,
                    tries: 0,
                },
            );
        }
        overflowed
    }

    /// Whether a destination is not reachable yet and has early tries left.
    pub fn waiting(&self) -> bool {
        self.dests
            .values()
            .any(|e| matches!(e.found, Some(Err(_))) && e.early())
    }

    /// Resolves the destinations kept (`only_new`: those resolved between periodic passes,
    /// [`Dest::early`]) and notes the outcomes. Returns whether what is sent changed.
    fn resolve(
        &mut self,
        tunnels: &[TunnelConf],
        underlays: &[Underlay],
        resolver: &mut Resolver,
        only_new: bool,
    ) -> bool {
        let mut changed = false;
        for (d, e) in self.dests.iter_mut() {
            if only_new {
                if !e.early() {
                    continue;
                }
                e.tries += 1;
            }
            let Some(t) = tunnels.iter().find(|t| t.ofport == d.ofport) else {
                continue;
            };
            let named = t
                .underlay
                .as_deref()
                .map(|n| underlay_named(underlays, n).ok_or(n));
            let outcome = match named {
                Some(Err(n)) => Err(format!("no bridge port named {n}")),
                Some(Ok(u)) => resolve_output(
                    resolver,
                    underlays,
                    Some(u),
                    &t.spec,
                    t.next_hop.as_ref(),
                    d.remote,
                    d.vni,
                ),
                None => resolve_output(
                    resolver,
                    underlays,
                    None,
                    &t.spec,
                    t.next_hop.as_ref(),
                    d.remote,
                    d.vni,
                ),
            };
            if outcome.is_ok() {
                e.tries = EARLY_TRIES;
            }
            if same(&e.found, &outcome) {
                continue;
            }
            match &outcome {
                Ok(r) => tracing::info!(
                    port = %t.name,
                    "tunnel to {} vni {}: via port {}, mtu {}",
                    d.remote,
                    d.vni,
                    r.underlay,
                    r.mtu
                ),
                Err(why) => tracing::warn!(
                    port = %t.name,
                    "tunnel to {} vni {} cannot be reached: {why}",
                    d.remote,
                    d.vni
                ),
            }
            // Only a change of what is sent matters to the megaflows.
            changed |= outcome.is_ok() || matches!(e.found, Some(Ok(_)));
            e.found = Some(outcome);
        }
        changed
    }

    /// The destinations that can be sent to, as the datapath takes them.
    fn outputs(&self) -> Vec<(FlowDest, (u32, EncapTemplate, u16))> {
        self.dests
            .iter()
            .filter_map(|(d, e)| match &e.found {
                Some(Ok(r)) => Some((*d, (r.underlay, r.template.clone(), r.mtu))),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(ofport: u32, spec: &str) -> TunnelConf {
        crate::tunnels::conf(ofport, &format!("t{ofport}"), spec)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn only_ports_that_leave_something_to_the_flow_are_per_flow() {
        assert_eq!(
            per_flow(&conf(1, "vxlan:remote=192.0.2.2,vni=5").spec),
            None
        );
        assert_eq!(
            per_flow(&conf(1, "vxlan:remote_ip=192.0.2.2,key=flow").spec),
            Some(PerFlowPort {
                remote: Some("192.0.2.2".parse().unwrap()),
                vni: None
            })
        );
        assert_eq!(
            per_flow(&conf(1, "geneve:remote=flow,vni=flow").spec),
            Some(PerFlowPort {
                remote: None,
                vni: None
            })
        );
    }

    /// Requests for a port that is not per-flow are ignored; a destination whose remote the
    /// kernel cannot reach is kept unresolved (nothing published, nothing to recompile), and
    /// forgotten after [`FORGET_AFTER`] passes (then the megaflows compile again).
    #[test]
    fn unreachable_destinations_are_kept_then_forgotten() {
        let Ok(mut resolver) = Resolver::new() else {
            eprintln!("skipped: no route netlink socket");
            return;
        };
        let dp = Tunnels::new();
        // TEST-NET-3 through an underlay port the bridge does not have.
        let tunnels = [
            conf(9, "vxlan:remote=flow,vni=flow,underlay=nosuchport"),
            conf(8, "vxlan:remote=192.0.2.2,vni=1"),
        ];
        let mut f = FlowDests::default();
        assert!(!f.refresh(&dp, &tunnels, &[], &mut resolver));
        let fields = datapath::tunnel_flows::TunFields {
            dst: Some("203.0.113.9".parse().unwrap()),
            id: Some(3),
        };
        assert!(matches!(
            dp.send(9, &fields),
            Some(datapath::tunnels::TunnelSend::Drop(_))
        ));
        assert!(
            dp.send(8, &fields).is_none(),
            "a fixed port with no next hop"
        );
        assert!(
            !f.refresh(&dp, &tunnels, &[], &mut resolver),
            "unreachable: no change"
        );
        assert_eq!(f.dests.len(), 1);
        for _ in 0..FORGET_AFTER - 1 {
            assert!(!f.refresh(&dp, &tunnels, &[], &mut resolver));
        }
        assert!(f.refresh(&dp, &tunnels, &[], &mut resolver), "forgotten");
        assert!(f.dests.is_empty());
    }

    /// A destination asked for that cannot be reached is tried again between periodic
    /// passes [`EARLY_TRIES`] times, then left to them; it stays kept, unpublished.
    #[test]
    fn a_destination_not_reachable_yet_is_tried_early_a_bounded_number_of_times() {
        let Ok(mut resolver) = Resolver::new() else {
            eprintln!("skipped: no route netlink socket");
            return;
        };
        let dp = Tunnels::new();
        let tunnels = [conf(9, "vxlan:remote=flow,vni=flow,underlay=nosuchport")];
        let mut f = FlowDests::default();
        f.refresh(&dp, &tunnels, &[], &mut resolver);
        let fields = datapath::tunnel_flows::TunFields {
            dst: Some("203.0.113.9".parse().unwrap()),
            id: Some(3),
        };
        dp.send(9, &fields);
        assert!(!f.waiting(), "not taken yet");
        for i in 1..=EARLY_TRIES {
            assert!(!f.resolve_requests(&dp, &tunnels, &[], &mut resolver));
            assert_eq!(f.waiting(), i < EARLY_TRIES, "after {i} tries");
        }
        assert_eq!(f.dests.len(), 1);
        assert!(f.outputs().is_empty());
    }
}

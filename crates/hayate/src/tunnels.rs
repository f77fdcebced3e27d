//! A bridge's tunnel ports (issue 18): `vxlan:`/`geneve:` port specs, which bridge port is
//! their underlay, and the housekeeping that resolves every remote's next hop each second
//! and publishes the outer headers and the underlay's termination to the datapath
//! ([`datapath::Tunnels`]). The design is in the `tunnel` crate's `lib.rs`.
//!
//! A tunnel port has no queues: it is an OpenFlow port of the pipeline only. Its underlay is
//! the bridge port named by `underlay=NAME`, else the bridge port whose kernel interface
//! (`afpacket:IF`, `afxdp:IF`) the route to the remote leaves by. A tunnel whose remote cannot
//! be reached has its outputs left out, and the reason is logged when it changes. A tunnel
//! whose spec gives its next hop (`nexthop_mac=`, [`static_hop`]) is not asked of the kernel.

mod static_hop;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use datapath::Tunnels;
use pipeline::{PipelineCell, PortInfo};
use tunnel::{EncapTemplate, PerFlow, Resolver, Terminator, TunnelKind, TunnelPort, TunnelSpec};

use crate::tunnel_flows::{resolve_output, underlay_named, FlowDests};

/// A tunnel port of a bridge.
#[derive(Debug, Clone)]
pub struct TunnelConf {
    /// OpenFlow port number.
    pub ofport: u32,
    /// Port name.
    pub name: String,
    /// Its options.
    pub spec: TunnelSpec,
    /// The bridge port named by `underlay=`, if any.
    pub underlay: Option<String>,
    /// The next hop the spec gives (`nexthop_mac=`), instead of the kernel's.
    pub next_hop: Option<StaticHop>,
}

pub use static_hop::StaticHop;

/// The tunnel port `name` (number `ofport`) that port spec `spec` makes, with its underlay
/// and static next hop; `None` when `spec` is another kind of port.
pub fn conf(ofport: u32, name: &str, spec: &str) -> Option<Result<TunnelConf, String>> {
    let (kind, opts) = spec.split_once(':')?;
    if !matches!(kind, "vxlan" | "geneve") {
        return None;
    }
    let (rest, next_hop) = match static_hop::split(opts) {
        Ok(v) => v,
        Err(e) => return Some(Err(format!("port {spec}: {e}"))),
    };
    let (spec_, underlay) = match parse(&format!("{kind}:{rest}"))? {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    if next_hop.is_some() && (spec_.local.is_none() || underlay.is_none()) {
        return Some(Err(format!(
            "port {spec}: a static next hop (nexthop_mac=) needs the tunnel's own address and \
             port: add local=IP and underlay=PORTNAME"
        )));
    }
    Some(Ok(TunnelConf {
        ofport,
        name: name.to_string(),
        spec: spec_,
        underlay,
        next_hop,
    }))
}

/// Parses `vxlan:OPTIONS` / `geneve:OPTIONS` (the `tunnel` crate's options plus
/// `underlay=PORTNAME`); `None` when `spec` is another kind of port.
pub fn parse(spec: &str) -> Option<Result<(TunnelSpec, Option<String>), String>> {
    let (kind, rest) = spec.split_once(':')?;
    let kind = match kind {
        "vxlan" => TunnelKind::Vxlan,
        "geneve" => TunnelKind::Geneve,
        _ => return None,
    };
    let mut underlay = None;
    let opts: Vec<&str> = rest
        .split(',')
        .filter(|o| match o.strip_prefix("underlay=") {
            Some(u) => {
                underlay = Some(u.to_string());
                false
            }
            None => true,
        })
        .collect();
    Some(
        TunnelSpec::parse(kind, &opts.join(","))
            .map(|s| (s, underlay))
            .map_err(|e| format!("port {spec}: {e}")),
    )
}

/// A bridge port that can carry tunnels: its number, name and kernel interface.
#[derive(Debug, Clone)]
pub struct Underlay {
    /// OpenFlow port number.
    pub ofport: u32,
    /// Port name.
    pub name: String,
    /// The kernel interface its spec opens (`afpacket:IF`, `afxdp:IF`).
    pub ifname: Option<String>,
}

impl Underlay {
    /// The underlay candidate a bridge port spec makes.
    pub fn of(ofport: u32, name: &str, spec: &str) -> Underlay {
        let ifname = ["afpacket:", "afxdp:"].iter().find_map(|k| {
            let rest = spec.strip_prefix(k)?;
            Some(rest.split(',').next().unwrap_or(rest).to_string())
        });
        Underlay {
            ofport,
            name: name.to_string(),
            ifname,
        }
    }
}

/// The pipeline's view of the tunnel ports: added to `ports` so that flows output to them
/// and floods reach them.
pub fn port_infos(tunnels: &[TunnelConf]) -> impl Iterator<Item = PortInfo> + '_ {
    tunnels.iter().map(|t| PortInfo {
        no: t.ofport,
        name: t.name.clone(),
        live: true,
        ..PortInfo::default()
    })
}

/// The IP MTU of kernel interface `ifname` (1500 when it cannot be read).
pub(crate) fn mtu_of(ifname: &str) -> u16 {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1500)
}

/// What one pass found for one tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    /// Outputs go to `underlay` in these outer headers; packets to `local` terminate.
    Ready {
        underlay: u32,
        header: Vec<u8>,
        local: IpAddr,
        /// The underlay interface's IP MTU.
        mtu: u16,
    },
    /// Received on `underlay` only (a `remote=flow` or `vni=flow` port), to `local` if known.
    ReceiveOnly {
        underlay: Option<u32>,
        local: Option<IpAddr>,
    },
    /// Not reachable: why.
    Unreachable(String),
}

/// The housekeeping state of a bridge's tunnels: what the last pass published.
pub struct Housekeeping {
    tunnels: Vec<TunnelConf>,
    underlays: Vec<Underlay>,
    resolver: Resolver,
    last: Vec<Option<Found>>,
    /// Termination drops counted so far (logged when they grow).
    drops: u64,
    /// The destinations of `remote=flow` / `vni=flow` ports.
    flows: FlowDests,
}

impl Housekeeping {
    /// The housekeeping of `tunnels` over the bridge's `underlays`.
    pub fn new(tunnels: Vec<TunnelConf>, underlays: Vec<Underlay>) -> std::io::Result<Self> {
        let last = vec![None; tunnels.len()];
        Ok(Housekeeping {
            tunnels,
            underlays,
            resolver: Resolver::new()?,
            last,
            drops: 0,
            flows: FlowDests::default(),
        })
    }

    fn underlay_named(&self, name: &str) -> Option<u32> {
        underlay_named(&self.underlays, name)
    }

    fn find(&mut self, i: usize) -> (Found, Option<EncapTemplate>) {
        let t = &self.tunnels[i];
        let named = t.underlay.as_deref().map(|n| self.underlay_named(n));
        if let Some(None) = named {
            let n = t.underlay.as_deref().unwrap_or_default();
            return (
                Found::Unreachable(format!("no bridge port named {n}")),
                None,
            );
        }
        let (PerFlow::Fixed(remote), PerFlow::Fixed(vni)) = (t.spec.remote, t.spec.vni) else {
            // A fixed remote with `vni=flow`: received where the route to the remote leaves.
            let routed = match t.spec.remote {
                PerFlow::Fixed(r) if named.is_none() || t.spec.local.is_none() => resolve_output(
                    &mut self.resolver,
                    &self.underlays,
                    named.flatten(),
                    &t.spec,
                    t.next_hop.as_ref(),
                    r,
                    0,
                )
                .ok(),
                _ => None,
            };
            let found = Found::ReceiveOnly {
                underlay: named.flatten().or(routed.as_ref().map(|r| r.underlay)),
                local: t.spec.local.or(routed.map(|r| r.local)),
            };
            return (found, None);
        };
        match resolve_output(
            &mut self.resolver,
            &self.underlays,
            named.flatten(),
            &t.spec,
            t.next_hop.as_ref(),
            remote,
            vni,
        ) {
            Ok(r) => {
                let found = Found::Ready {
                    underlay: r.underlay,
                    header: r.template.header().to_vec(),
                    local: r.local,
                    mtu: r.mtu,
                };
                (found, Some(r.template))
            }
            Err(why) => (Found::Unreachable(why), None),
        }
    }

    /// Resolves every tunnel once and publishes what changed to `dp`. Returns whether the
    /// datapath's megaflows must be dropped (an output's headers changed).
    pub fn refresh(&mut self, dp: &Tunnels) -> bool {
        let mut changed = false;
        let mut rx: BTreeMap<u32, (Vec<TunnelPort>, Vec<IpAddr>)> = BTreeMap::new();
        for i in 0..self.tunnels.len() {
            let (found, template) = self.find(i);
            let t = &self.tunnels[i];
            let (underlay, local) = match &found {
                Found::Ready {
                    underlay, local, ..
                } => (Some(*underlay), Some(*local)),
                Found::ReceiveOnly { underlay, local } => (*underlay, *local),
                Found::Unreachable(_) => (None, None),
            };
            if let Some(u) = underlay {
                let e = rx.entry(u).or_default();
                e.0.push(TunnelPort::from_spec(t.ofport, &t.spec));
                e.1.extend(local);
            }
            if self.last[i].as_ref() != Some(&found) {
                if let Found::Unreachable(why) = &found {
                    tracing::warn!(port = %t.name, "tunnel port cannot reach its remote: {why}");
                } else {
                    tracing::info!(port = %t.name, "tunnel port: {found:?}");
                }
                let out = match &found {
                    Found::Ready { underlay, mtu, .. } => {
                        template.map(|tpl| (*underlay, tpl, *mtu))
                    }
                    _ => None,
                };
                dp.set_output(t.ofport, out);
                self.last[i] = Some(found);
                changed = true;
            }
        }
        for u in &self.underlays {
            let (ports, locals) = rx.remove(&u.ofport).unwrap_or_default();
            dp.set(u.ofport, Some(Terminator::new(ports, &locals)));
        }
        let flows = self
            .flows
            .refresh(dp, &self.tunnels, &self.underlays, &mut self.resolver);
        changed || flows
    }
}

impl Housekeeping {
    /// Logs the termination drops by reason when they grew since the last call.
    pub fn report_drops(&mut self, dp: &Tunnels) {
        let drops = dp.drops();
        let total: u64 = drops.iter().map(|d| d.1).sum();
        if total > self.drops {
            self.drops = total;
            let text: Vec<String> = drops
                .iter()
                .filter(|d| d.1 > 0)
                .map(|(n, c)| format!("{n}={c}"))
                .collect();
            tracing::warn!("tunnel frames dropped on receive: {}", text.join(" "));
        }
    }
}

/// Runs `hk` once a second while the datapath's tunnel table lives, dropping the megaflows
/// of `cell`'s datapath when an output changed.
pub fn spawn(mut hk: Housekeeping, dp: Weak<Tunnels>, cell: Arc<PipelineCell>) {
    let run = move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let Some(dp) = dp.upgrade() else {
            return;
        };
        if hk.refresh(&dp) {
            cell.invalidate_megaflows();
        }
        hk.report_drops(&dp);
    };
    if let Err(e) = std::thread::Builder::new()
        .name("hayate-tunnels".into())
        .spawn(run)
    {
        eprintln!("warning: tunnel housekeeping did not start: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunnel_specs_parse_with_their_underlay_and_others_are_not_tunnels() {
        let (spec, underlay) = parse("vxlan:remote=192.0.2.2,vni=42,underlay=uplink")
            .unwrap()
            .unwrap();
        assert_eq!(spec.vni, PerFlow::Fixed(42));
        assert_eq!(underlay.as_deref(), Some("uplink"));
        assert!(parse("afpacket:eth0").is_none());
        let err = parse("geneve:remote=not-an-address").unwrap().unwrap_err();
        assert!(err.contains("geneve:remote=not-an-address"), "{err}");
        assert_eq!(
            Underlay::of(1, "p1", "afpacket:eth1,queues=2")
                .ifname
                .as_deref(),
            Some("eth1")
        );
        assert_eq!(Underlay::of(2, "p2", "null:").ifname, None);
    }
}

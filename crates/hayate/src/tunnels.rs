//! A bridge's tunnel ports (issue 18): `vxlan:`/`geneve:` port specs, which bridge port is
//! their underlay, and the housekeeping that resolves every remote's next hop each second
//! (the bridge's `tunnel_refresh_secs`) and publishes the outer headers and the underlay's
//! termination to the datapath ([`datapath::Tunnels`]). Between those passes the
//! housekeeping thread wakes as soon as the datapath asks for a per-flow destination
//! ([`datapath::Tunnels::request_signal`]) and resolves just that
//! ([`Housekeeping::resolve_requests`]). The design is in the `tunnel` crate's `lib.rs`.
//!
//! A tunnel port has no queues: it is an OpenFlow port of the bridge whose backend is a
//! [`TunnelIface`] (`tunnel_iface.rs`), added and removed like any port (`plug.rs`: at start,
//! by `hayate ctl BR add-port vxlan:...`, by OVSDB). Its underlay is the bridge port named by
//! `underlay=NAME`, else the bridge port whose kernel interface (`afpacket:IF`, `afxdp:IF`)
//! the route to the remote leaves by. A tunnel whose remote cannot be reached has its outputs
//! left out and its link down with the reason ([`tunnel::Unreachable`]'s text), which the
//! bridge's port status, `hayate ctl show` and OVSDB show; a warning is logged when it
//! changes. A tunnel whose spec gives its next hop (`nexthop_mac=`, [`static_hop`]) is not
//! asked of the kernel.

mod host_skip;
mod static_hop;
mod thread;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::Duration;

use datapath::tunnel_flows::RequestSignal;
use datapath::Tunnels;
use pipeline::{PipelineCell, PortInfo};
use tunnel::{EncapTemplate, PerFlow, Resolver, Terminator, TunnelKind, TunnelPort, TunnelSpec};

use crate::tunnel_flows::{resolve_output, underlay_named, FlowDests};
use crate::tunnel_iface::TunnelIface;

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

/// The name a tunnel port gets when add-port gives none: `vxlan42`, `geneve7`, `vxlanflow`.
pub fn default_name(s: &TunnelSpec) -> String {
    match s.vni {
        PerFlow::Fixed(v) => format!("{}{v}", s.kind.name()),
        PerFlow::Flow => format!("{}flow", s.kind.name()),
    }
}

/// A bridge port that can carry tunnels: its number, name and kernel interface.
#[derive(Debug, Clone)]
pub struct Underlay {
    /// OpenFlow port number.
    pub ofport: u32,
    /// Port name.
    pub name: String,
    /// The kernel interface its spec opens (`afpacket:IF`, `afxdp:IF`, `tap:IF`).
    pub ifname: Option<String>,
    /// Whether frames sent on it leave by that interface (AF_PACKET, AF_XDP), so that it is
    /// the underlay of a tunnel whose route leaves by the interface. A TAP is not: what the
    /// port sends, the host's kernel receives from the TAP (and routes on), so it serves
    /// only tunnels that name it (`underlay=`).
    pub routed: bool,
    /// Whether the host's stack receives what arrives on it too (AF_PACKET taps frames):
    /// the tunnel packets terminated there are then kept from it (`tunnels/host_skip.rs`).
    pub host_sees: bool,
}

impl Underlay {
    /// The underlay candidate a bridge port spec makes.
    pub fn of(ofport: u32, name: &str, spec: &str) -> Underlay {
        let iface = |kinds: &[&str]| {
            kinds.iter().find_map(|k| {
                let rest = spec.strip_prefix(k)?;
                Some(rest.split(',').next().unwrap_or(rest).to_string())
            })
        };
        let routed = iface(&["afpacket:", "afxdp:"]);
        Underlay {
            ofport,
            name: name.to_string(),
            routed: routed.is_some(),
            host_sees: spec.starts_with("afpacket:"),
            ifname: routed.or_else(|| iface(&["tap:"])),
        }
    }
}

/// The pipeline's view of the tunnel ports, for a switch run without an OpenFlow bridge (the
/// in-process benchmarks): added to `ports` so that flows output to them and floods reach
/// them. (`hayate run` adds tunnel ports to its bridge like any port: `plug.rs`.)
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

impl Found {
    /// One line on it for the log (the outer headers' bytes left out).
    fn summary(&self) -> String {
        match self {
            Found::Ready {
                underlay,
                local,
                mtu,
                ..
            } => format!("ready over underlay port {underlay} from {local}, underlay MTU {mtu}"),
            Found::ReceiveOnly { underlay, local } => format!(
                "receives only (remote or VNI per flow), underlay port {}, local {}",
                underlay.map_or("unknown".into(), |u| u.to_string()),
                local.map_or("unknown".into(), |l| l.to_string())
            ),
            Found::Unreachable(why) => format!("unreachable: {why}"),
        }
    }
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
    /// Each tunnel's link as the bridge shows it (by index, as `tunnels`).
    ifaces: Vec<Arc<TunnelIface>>,
    /// AF_PACKET underlays' programs that keep tunnel packets from the host's stack.
    skips: host_skip::HostSkips,
}

impl Housekeeping {
    /// The housekeeping of `tunnels` over the bridge's `underlays` (each tunnel's link
    /// starts down: not resolved yet).
    pub fn new(tunnels: Vec<TunnelConf>, underlays: Vec<Underlay>) -> std::io::Result<Self> {
        let last = vec![None; tunnels.len()];
        let ifaces = tunnels
            .iter()
            .map(|t| Arc::new(TunnelIface::new(&t.name)))
            .collect();
        Ok(Housekeeping {
            tunnels,
            underlays,
            resolver: Resolver::new()?,
            last,
            drops: 0,
            flows: FlowDests::default(),
            ifaces,
            skips: host_skip::HostSkips::default(),
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
                Found::Unreachable(format!("no bridge port named {n} (underlay={n})")),
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

    /// Resolves every tunnel once and publishes what changed to `dp` and to the ports'
    /// links. Returns whether the
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
                    self.ifaces[i].set(Some(why.clone()));
                } else {
                    tracing::info!(port = %t.name, "tunnel port: {}", found.summary());
                    self.ifaces[i].set(None);
                }
                let out = match &found {
                    Found::Ready { underlay, mtu, .. } => {
                        template.map(|tpl| (*underlay, tpl, *mtu))
                    }
                    _ => None,
                };
                dp.set_output(t.ofport, out);
                dp.set_down(t.ofport, matches!(found, Found::Unreachable(_)));
                self.last[i] = Some(found);
                changed = true;
            }
        }
        for u in &self.underlays {
            let (ports, locals) = rx.remove(&u.ofport).unwrap_or_default();
            self.skips.update(u, &ports, &locals);
            dp.set(u.ofport, Some(Terminator::new(ports, &locals)));
        }
        let flows = self
            .flows
            .refresh(dp, &self.tunnels, &self.underlays, &mut self.resolver);
        changed || flows
    }

    /// Resolves and publishes the per-flow destinations `dp` asked for since the last pass
    /// (and those not reachable yet that may be tried again early), nothing else. Returns
    /// whether the datapath's megaflows must be dropped.
    pub fn resolve_requests(&mut self, dp: &Tunnels) -> bool {
        self.flows
            .resolve_requests(dp, &self.tunnels, &self.underlays, &mut self.resolver)
    }

    /// Whether a per-flow destination asked for is not reachable yet and may be tried again
    /// before the next periodic pass ([`crate::tunnel_flows::EARLY_TRIES`]).
    pub fn waiting(&self) -> bool {
        self.flows.waiting()
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
            tracing::warn!("tunnel frames dropped: {}", text.join(" "));
        }
    }
}

impl Housekeeping {
    /// Adds tunnel port `conf` whose link `iface` shows (replacing one of that number).
    fn add(&mut self, conf: TunnelConf, iface: Arc<TunnelIface>) {
        self.remove(conf.ofport);
        self.tunnels.push(conf);
        self.last.push(None);
        self.ifaces.push(iface);
    }

    /// Forgets tunnel port `ofport`; whether it was one.
    fn remove(&mut self, ofport: u32) -> bool {
        let Some(i) = self.tunnels.iter().position(|t| t.ofport == ofport) else {
            return false;
        };
        self.tunnels.remove(i);
        self.last.remove(i);
        self.ifaces.remove(i);
        true
    }

    /// Makes the next pass publish every tunnel again (an underlay came or went).
    fn republish(&mut self) {
        self.last.iter_mut().for_each(|l| *l = None);
    }
}

/// What a bridge knows of its tunnels: the underlay candidates, and the housekeeping once
/// the first tunnel port came (it holds a netlink socket).
struct Tracked {
    /// Underlay candidates while there is no housekeeping (it holds them afterwards).
    underlays: Vec<Underlay>,
    hk: Option<Housekeeping>,
}

/// How often the housekeeping resolves every tunnel again, by default.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// A bridge's tunnel ports and their housekeeping, shared by the port plug (tunnel ports
/// and underlay candidates come and go with add-port / del-port) and the housekeeping
/// thread, which starts with the first tunnel port and runs while the bridge and its
/// datapath live: a pass every `interval`, and a resolution of the per-flow destinations
/// the datapath asks for as soon as it asks.
pub struct BridgeTunnels {
    state: Mutex<Tracked>,
    dp: Weak<Tunnels>,
    cell: Arc<PipelineCell>,
    started: Once,
    /// Raised by the datapath when it asks for destinations; by `drop`, to end the thread.
    signal: Arc<RequestSignal>,
    /// Between periodic passes.
    interval: Duration,
}

impl BridgeTunnels {
    /// The tunnels of the bridge whose datapath tunnel table is `dp`, whose megaflows
    /// `cell` drops, over its `underlays` so far, resolved again every `interval`.
    pub fn new(
        dp: &Arc<Tunnels>,
        cell: Arc<PipelineCell>,
        underlays: Vec<Underlay>,
        interval: Duration,
    ) -> Self {
        BridgeTunnels {
            state: Mutex::new(Tracked {
                underlays,
                hk: None,
            }),
            dp: Arc::downgrade(dp),
            cell,
            started: Once::new(),
            signal: dp.request_signal(),
            interval,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tracked> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One pass of `hk` now: resolve, publish, drop megaflows when an output changed.
    fn refresh(&self, hk: &mut Housekeeping) {
        let Some(dp) = self.dp.upgrade() else {
            return;
        };
        if hk.refresh(&dp) {
            self.cell.invalidate_megaflows();
        }
    }

    /// Adds tunnel port `conf` whose link `iface` shows, resolves it at once and starts the
    /// housekeeping thread if it is the first. Without a netlink socket for next hops the
    /// port stays down and says why.
    pub fn add_tunnel(self: &Arc<Self>, conf: TunnelConf, iface: Arc<TunnelIface>) {
        if let Some(dp) = self.dp.upgrade() {
            iface.count_from(&dp, conf.ofport);
        }
        {
            let mut st = self.lock();
            if st.hk.is_none() {
                match Housekeeping::new(Vec::new(), std::mem::take(&mut st.underlays)) {
                    Ok(hk) => st.hk = Some(hk),
                    Err(e) => {
                        let why = format!("cannot ask the kernel for next hops (rtnetlink): {e}");
                        tracing::warn!(port = %conf.name, "{why}");
                        iface.set(Some(why));
                        return;
                    }
                }
            }
            let Some(hk) = st.hk.as_mut() else {
                return;
            };
            hk.add(conf, iface);
            self.refresh(hk);
        }
        self.started
            .call_once(|| thread::spawn(Arc::downgrade(self), self.signal.clone(), self.interval));
    }

    /// Adds a bridge port that can carry tunnels.
    pub fn add_underlay(&self, u: Underlay) {
        let mut st = self.lock();
        let Some(hk) = st.hk.as_mut() else {
            st.underlays.retain(|x| x.ofport != u.ofport);
            st.underlays.push(u);
            return;
        };
        hk.underlays.retain(|x| x.ofport != u.ofport);
        hk.underlays.push(u);
        // A tunnel waiting for this port as its underlay can come up.
        hk.republish();
        self.refresh(hk);
    }

    /// Forgets port `ofport`, a tunnel port or an underlay: its outputs and termination leave
    /// the datapath, and so do its drop counters and counts. Returns whether it was a tunnel
    /// port.
    pub fn remove(&self, ofport: u32) -> bool {
        let mut st = self.lock();
        st.underlays.retain(|u| u.ofport != ofport);
        let dp = self.dp.upgrade();
        if let Some(dp) = &dp {
            dp.forget(ofport);
        }
        let Some(hk) = st.hk.as_mut() else {
            return false;
        };
        let tunnel = hk.remove(ofport);
        hk.underlays.retain(|u| u.ofport != ofport);
        hk.skips.remove(ofport);
        if let Some(dp) = dp {
            if tunnel {
                dp.set_output(ofport, None);
            } else {
                dp.set(ofport, None);
            }
            hk.republish();
            hk.refresh(&dp);
            self.cell.invalidate_megaflows();
        }
        tunnel
    }
}

impl Drop for BridgeTunnels {
    /// Wakes the housekeeping thread, which finds the bridge gone and ends.
    fn drop(&mut self) {
        self.signal.raise();
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
        let tap = Underlay::of(3, "p3", "tap:vtep0");
        assert_eq!((tap.ifname.as_deref(), tap.routed), (Some("vtep0"), false));
        assert!(Underlay::of(1, "p1", "afxdp:eth1").routed);
        let all = [Underlay::of(1, "p1", "afpacket:eth1"), tap];
        assert_eq!(crate::tunnel_flows::underlay_named(&all, "vtep0"), Some(3));
        assert_eq!(crate::tunnel_flows::underlay_routed(&all, "vtep0"), None);
        assert_eq!(crate::tunnel_flows::underlay_routed(&all, "eth1"), Some(1));
        // A tunnel over the TAP must be given its next hop; over a NIC the kernel's serves.
        let err = crate::tunnel_flows::needs_static_hop(&all, Some(3)).unwrap_err();
        assert!(
            err.contains("underlay p3 is a TAP") && err.contains("nexthop_mac="),
            "{err}"
        );
        assert!(crate::tunnel_flows::needs_static_hop(&all, Some(1)).is_ok());
        assert!(crate::tunnel_flows::needs_static_hop(&all, None).is_ok());
    }

    /// With a day between periodic passes, a per-flow destination the datapath asks for is
    /// still resolved: the request wakes the housekeeping thread, which publishes its
    /// headers (a static next hop, so the kernel's tables play no part).
    #[test]
    fn a_destination_the_datapath_asks_for_is_resolved_without_waiting_for_a_pass() {
        use datapath::tunnel_flows::TunFields;
        use datapath::tunnels::TunnelSend;

        if Resolver::new().is_err() {
            eprintln!("skipped: no route netlink socket");
            return;
        }
        let (_control, cell) = pipeline::Control::new(pipeline::PipelineConfig::default());
        let dp = Arc::new(Tunnels::new());
        let day = Duration::from_secs(86_400);
        let bt = Arc::new(BridgeTunnels::new(
            &dp,
            cell,
            vec![Underlay::of(1, "up", "null:")],
            day,
        ));
        let spec = "vxlan:remote=flow,vni=flow,local=192.0.2.1,underlay=up,\
                    nexthop_mac=02:00:00:00:00:02,local_mac=02:00:00:00:00:01";
        let conf = conf(3, "vflow", spec).unwrap().unwrap();
        bt.add_tunnel(conf, Arc::new(TunnelIface::new("vflow")));
        let fields = TunFields {
            dst: Some("192.0.2.2".parse().unwrap()),
            id: Some(42),
        };
        assert!(
            matches!(dp.send(3, &fields), Some(TunnelSend::Drop(_))),
            "not resolved before it is asked for"
        );
        // Bounded: a missing wake fails here, a day before the next pass.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let out = loop {
            if let Some(TunnelSend::Out(o)) = dp.send(3, &fields) {
                break o;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the destination was not resolved: the housekeeping was not woken"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(out.underlay, 1);
        assert_eq!(&out.template.header()[..6], &[2, 0, 0, 0, 0, 2]);
        drop(bt);
    }
}

//! The switch as it runs, brought to what the database wants: bridges started and stopped,
//! ports plugged in and out of running bridges (the live plugging of `hayate ctl add-port`,
//! [`agent::ofproto::OfBridge::add_port`]), the error of each interface that could not be
//! applied. Only the difference is applied: a port whose row did not change is not touched,
//! and one whose QoS, Queue or ingress policing changed takes its new rates where it runs
//! (`qos.rs`), without being taken out.
//!
//! A change of a bridge's controllers (or their inactivity probe) replaces its controller
//! connections, a change of its fail mode adds or removes the fail-open flow; both keep its
//! ports and flow tables. A bridge whose datapath id changes is stopped and started again
//! with its ports: its flow tables start empty, as after a restart of ovs-vswitchd.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use super::want::{Controllers, Setup, Want};
use crate::run::Running;

/// A port the switch runs for an Interface row.
#[derive(Debug, Clone, PartialEq)]
pub struct LivePort {
    /// The Interface row.
    pub uuid: String,
    /// The spec it was opened from, with the rates it runs with now.
    pub spec: String,
    /// That spec without the rates its rows add (what opened the port).
    pub base: String,
    /// `ofport_request` when it was added.
    pub request: Option<u32>,
    /// Its OpenFlow number.
    pub ofport: u32,
    /// Its MAC address (the kernel interface's, else the OpenFlow port's), read once.
    pub mac: String,
}

/// A running bridge.
pub struct LiveBridge {
    /// What it was started with.
    pub setup: Setup,
    /// Its controllers now.
    pub ctl: Controllers,
    /// The bridge.
    pub running: Running,
    /// Its ports by interface name.
    pub ports: BTreeMap<String, LivePort>,
}

/// Everything running, and what could not be applied.
#[derive(Default)]
pub struct Live {
    /// Bridges by name.
    pub bridges: BTreeMap<String, LiveBridge>,
    /// Errors by Interface row UUID.
    pub errors: BTreeMap<String, String>,
}

/// What starts bridges and changes their controllers.
pub trait Runner {
    /// Starts a bridge named `name` with `setup`, controllers `ctl` and no ports.
    fn start(&mut self, name: &str, setup: &Setup, ctl: &Controllers) -> Result<Running>;
    /// Stops a bridge `start` started (its ports already taken out).
    fn stop(&mut self, running: Running);
    /// Replaces a running bridge's controllers (`old`: what it has now) and fail mode.
    fn set_controllers(
        &mut self,
        bridge: &mut Running,
        old: &Controllers,
        ctl: &Controllers,
    ) -> Result<()>;
}

impl Live {
    /// Brings the switch to `want`.
    pub fn apply(&mut self, want: &Want, runner: &mut dyn Runner) {
        self.errors.clear();
        let mut rings = BTreeSet::new();
        // Ports taken out to be added again (their type or options changed, or a patch
        // peer's did): they keep their number unless another is asked for, as in Open
        // vSwitch.
        let mut again: BTreeMap<(String, String), u32> = BTreeMap::new();
        // Bridges that go, or whose OpenFlow settings changed.
        let gone: Vec<String> = self
            .bridges
            .iter()
            .filter(|(n, b)| want.bridges.get(*n).is_none_or(|w| w.setup != b.setup))
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            if let Some(mut b) = self.bridges.remove(&name) {
                // Ports out first, so their devices are closed before a new bridge opens them.
                let names: Vec<String> = b.ports.keys().cloned().collect();
                for n in names {
                    remove_port(&mut b, &n, &mut rings);
                }
                tracing::info!(bridge = %name, "OVSDB: bridge stopped");
                runner.stop(b.running);
            }
        }
        // Controllers that changed.
        for (name, b) in &mut self.bridges {
            let w = &want.bridges[name];
            if w.ctl != b.ctl {
                match runner.set_controllers(&mut b.running, &b.ctl, &w.ctl) {
                    Ok(()) => {
                        tracing::info!(bridge = %name, controllers = ?w.ctl.targets, "OVSDB: controllers set");
                        b.ctl = w.ctl.clone();
                    }
                    Err(e) => tracing::warn!(bridge = %name, "OVSDB: controllers: {e:#}"),
                }
            }
        }
        // Ports whose rates only changed keep running, with the new rates or, when those are
        // refused, the old ones.
        let mut kept = BTreeSet::new();
        for (name, b) in &mut self.bridges {
            for (iname, uuid, e) in retune(b, &want.bridges[name]) {
                tracing::warn!(bridge = %name, port = %iname, "OVSDB: rates refused: {e}");
                self.errors.insert(uuid, e);
                kept.insert((name.clone(), iname));
            }
        }
        // Ports that go or changed.
        for (name, b) in &mut self.bridges {
            let w = &want.bridges[name];
            let stale: Vec<String> = b
                .ports
                .iter()
                .filter(|(n, _)| !kept.contains(&(name.clone(), (*n).clone())))
                .filter(|(n, p)| match w.ifaces.get(*n) {
                    None => true,
                    Some(i) => {
                        i.uuid != p.uuid
                            || i.spec.as_deref() != Ok(p.spec.as_str())
                            || i.ofport_request.is_some_and(|r| r != p.ofport)
                    }
                })
                .map(|(n, _)| n.clone())
                .collect();
            for n in stale {
                if let Some(p) = b.ports.get(&n) {
                    again.insert((name.clone(), n.clone()), p.ofport);
                }
                remove_port(b, &n, &mut rings);
            }
        }
        // A patch end that went takes its peer with it: a ring is made anew for both.
        for r in &rings {
            for (name, b) in &mut self.bridges {
                let peers: Vec<String> = b
                    .ports
                    .iter()
                    .filter(|(_, p)| ring(&p.spec).as_ref() == Some(r))
                    .map(|(n, _)| n.clone())
                    .collect();
                for n in peers {
                    if let Some(p) = b.ports.get(&n) {
                        again.insert((name.clone(), n.clone()), p.ofport);
                    }
                    remove_port(b, &n, &mut BTreeSet::new());
                }
            }
            port::ring::Registry::global().forget(r);
        }
        // New bridges.
        for (name, w) in &want.bridges {
            if self.bridges.contains_key(name) {
                continue;
            }
            match runner.start(name, &w.setup, &w.ctl) {
                Ok(running) => {
                    tracing::info!(bridge = %name, "OVSDB: bridge started");
                    self.bridges.insert(
                        name.clone(),
                        LiveBridge {
                            setup: w.setup.clone(),
                            ctl: w.ctl.clone(),
                            running,
                            ports: BTreeMap::new(),
                        },
                    );
                }
                Err(e) => {
                    for i in w.ifaces.values() {
                        self.errors.insert(i.uuid.clone(), format!("{e:#}"));
                    }
                }
            }
        }
        // New ports.
        for (name, b) in &mut self.bridges {
            let w = &want.bridges[name];
            let of = b.running.0.bridge.clone();
            let mut added = Vec::new();
            for (iname, i) in &w.ifaces {
                if b.ports.contains_key(iname) {
                    continue;
                }
                let spec = match &i.spec {
                    Ok(s) => s,
                    Err(e) => {
                        self.errors.insert(i.uuid.clone(), e.clone());
                        continue;
                    }
                };
                // A requested number in use by another port: the lowest free one, as Open
                // vSwitch does.
                let request = i
                    .ofport_request
                    .or_else(|| again.get(&(name.clone(), iname.clone())).copied());
                let r = of
                    .add_port(spec, request, Some(iname))
                    .or_else(|e| match request {
                        Some(_) if e.contains("is in use by") => {
                            of.add_port(spec, None, Some(iname))
                        }
                        _ => Err(e),
                    });
                match r {
                    Ok(_) => added.push((iname, i, spec)),
                    Err(e) => {
                        tracing::warn!(bridge = %name, port = %iname, "OVSDB: {e}");
                        self.errors.insert(i.uuid.clone(), e);
                    }
                }
            }
            if added.is_empty() {
                continue;
            }
            // One look at the bridge's ports for the numbers of all those added.
            let ports: BTreeMap<String, (u32, [u8; 6])> = of
                .ports()
                .into_iter()
                .map(|p| (p.name, (p.no, p.hw_addr)))
                .collect();
            for (iname, i, spec) in added {
                let (ofport, hw) = ports.get(iname).copied().unwrap_or((0, [0; 6]));
                tracing::info!(bridge = %name, port = %iname, ofport, "OVSDB: port added");
                b.ports.insert(
                    iname.clone(),
                    LivePort {
                        uuid: i.uuid.clone(),
                        spec: spec.clone(),
                        base: i.base.clone().unwrap_or_else(|| spec.clone()),
                        request: i.ofport_request,
                        ofport,
                        mac: mac_in_use(iname, hw),
                    },
                );
            }
        }
    }

    /// Stops every bridge.
    pub fn stop(&mut self, runner: &mut dyn Runner) {
        for (_, mut b) in std::mem::take(&mut self.bridges) {
            let names: Vec<String> = b.ports.keys().cloned().collect();
            for n in names {
                remove_port(&mut b, &n, &mut BTreeSet::new());
            }
            runner.stop(b.running);
        }
    }
}

/// Gives the running ports of `b` whose spec in `w` differs in its rates only those rates
/// ([`super::qos::rates_change`]), and notes the spec. Returns the ports whose new rates
/// are refused, which keep running with their old ones: `(name, Interface UUID, why)`.
fn retune(b: &mut LiveBridge, w: &super::want::BridgeWant) -> Vec<(String, String, String)> {
    let mut refused = Vec::new();
    for (name, p) in &mut b.ports {
        let Some(i) = w.ifaces.get(name) else {
            continue;
        };
        let (Ok(spec), Some(base)) = (&i.spec, &i.base) else {
            continue;
        };
        if i.uuid != p.uuid || i.ofport_request.is_some_and(|r| r != p.ofport) {
            continue;
        }
        match super::qos::rates_change((&p.base, &p.spec), (base, spec)) {
            None => {}
            Some(Ok(o)) => {
                let dp = &b.running.1;
                dp.set_policing(p.ofport, o.policing);
                dp.set_egress(p.ofport, o.egress);
                tracing::info!(port = %name, ofport = p.ofport, "OVSDB: port rates set");
                p.spec = spec.clone();
            }
            Some(Err(e)) => refused.push((name.clone(), i.uuid.clone(), e)),
        }
    }
    refused
}

/// The ring a patch port's spec names.
fn ring(spec: &str) -> Option<String> {
    spec.strip_prefix("ring:").map(str::to_string)
}

fn remove_port(b: &mut LiveBridge, name: &str, rings: &mut BTreeSet<String>) {
    let Some(p) = b.ports.remove(name) else {
        return;
    };
    if let Some(r) = ring(&p.spec) {
        rings.insert(r);
    }
    match b.running.0.bridge.del_port(&p.ofport.to_string()) {
        Ok(_) => tracing::info!(port = %name, "OVSDB: port removed"),
        Err(e) => tracing::warn!(port = %name, "OVSDB: removing the port: {e}"),
    }
}

/// The MAC address a port uses: its kernel interface's when it has one, else `hw`.
fn mac_in_use(name: &str, hw: [u8; 6]) -> String {
    std::fs::read_to_string(format!("/sys/class/net/{name}/address"))
        .map(|m| m.trim().to_string())
        .unwrap_or_else(|_| {
            let m = hw;
            format!(
                "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                m[0], m[1], m[2], m[3], m[4], m[5]
            )
        })
}

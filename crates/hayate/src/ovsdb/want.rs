//! What the database asks for, read from the replica: the bridges the `Open_vSwitch` row
//! names, their ports' interfaces as port specs (or the error to report), their controllers
//! and settings. A pure function of the replica, so it is tested on golden rows.

use std::collections::BTreeMap;
use std::time::Duration;

use agent::FailMode;
use ovsdb::datum::{integer, map, string, uuids};
use ovsdb::{Replica, Row};

use super::iface::{self, Context};

/// OpenFlow's LOCAL port, the number of a bridge's own internal interface (the database
/// shows it as 65534, OpenFlow 1.0's number, as Open vSwitch does).
pub const OFPP_LOCAL: u32 = pipeline::model::ports::LOCAL;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Want {
    /// The `Open_vSwitch` row's UUID (`None`: the database has none yet).
    pub root: Option<String>,
    /// `next_cfg`: written back as `cur_cfg` once applied.
    pub next_cfg: i64,
    /// Bridges by name.
    pub bridges: BTreeMap<String, BridgeWant>,
}

/// One bridge.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeWant {
    /// Row UUID.
    pub uuid: String,
    /// What the bridge is started with; a change restarts the bridge.
    pub setup: Setup,
    /// Its controllers, their probe and its fail mode; changed while it runs.
    pub ctl: Controllers,
    /// Controller rows: UUID and target.
    pub controllers: Vec<(String, String)>,
    /// Interfaces by name.
    pub ifaces: BTreeMap<String, IfaceWant>,
}

/// A bridge's OpenFlow identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// `other_config:datapath-id` (`None`: derived from the name).
    pub datapath_id: Option<u64>,
}

/// A bridge's controllers and fail mode.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Controllers {
    /// `fail_mode` (empty: standalone, as Open vSwitch).
    pub fail_mode: FailMode,
    /// Targets, sorted.
    pub targets: Vec<String>,
    /// The smallest `inactivity_probe` of its controllers (`None`: the default 5 s).
    pub probe: Option<Duration>,
}

/// One interface.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceWant {
    /// Row UUID.
    pub uuid: String,
    /// The port spec, or the error for its `error` column.
    pub spec: Result<String, String>,
    /// The port spec without the ingress policing and egress queue options its rows add
    /// (`None` with an error): what opens the port; the rest a running port takes as is.
    pub base: Option<String>,
    /// `ofport_request` (LOCAL for the bridge's own internal interface).
    pub ofport_request: Option<u32>,
}

/// The configuration `r` describes.
pub fn want(r: &Replica, kernel_has: fn(&str) -> bool, run_dir: &str) -> Want {
    let Some((root_uuid, root)) = r.table("Open_vSwitch").next() else {
        return Want::default();
    };
    let other = col_map(root, "other_config");
    let cx = Context {
        system: other
            .get("hayate-system-ports")
            .cloned()
            .unwrap_or_else(|| "afpacket".into()),
        sock_dir: other
            .get("vhost-sock-dir")
            .map(|d| {
                if d.starts_with('/') {
                    d.clone()
                } else {
                    format!("{run_dir}/{d}")
                }
            })
            .unwrap_or_else(|| run_dir.to_string()),
        exists: kernel_has,
    };
    let mut bridges = BTreeMap::new();
    for b in root.get("bridges").map(uuids).unwrap_or_default() {
        let Some(row) = r.row("Bridge", b) else {
            continue;
        };
        let name = col_str(row, "name").to_string();
        bridges.insert(name.clone(), bridge(r, b, row, &name, &cx));
    }
    Want {
        root: Some(root_uuid.to_string()),
        next_cfg: root.get("next_cfg").and_then(integer).unwrap_or(0),
        bridges,
    }
}

fn bridge(r: &Replica, uuid: &str, row: &Row, name: &str, cx: &Context) -> BridgeWant {
    let mut controllers = Vec::new();
    let mut probe: Option<Duration> = None;
    for c in row.get("controller").map(uuids).unwrap_or_default() {
        let Some(crow) = r.row("Controller", c) else {
            continue;
        };
        controllers.push((c.to_string(), col_str(crow, "target").to_string()));
        if let Some(ms) = crow.get("inactivity_probe").and_then(integer) {
            // 0 turns the probe off in Open vSwitch; here it means the longest probe.
            let d = if ms <= 0 {
                Duration::from_secs(3600)
            } else {
                Duration::from_millis(ms.max(1000) as u64)
            };
            probe = Some(probe.map_or(d, |p| p.min(d)));
        }
    }
    let mut targets: Vec<String> = controllers.iter().map(|(_, t)| t.clone()).collect();
    targets.sort();
    let datapath_id = col_map(row, "other_config")
        .get("datapath-id")
        .and_then(|d| u64::from_str_radix(d, 16).ok());
    let fail_mode = match row.get("fail_mode").and_then(string) {
        Some("secure") => FailMode::Secure,
        _ => FailMode::Standalone,
    };
    let mut ifaces = BTreeMap::new();
    for p in row.get("ports").map(uuids).unwrap_or_default() {
        let Some(prow) = r.row("Port", p) else {
            continue;
        };
        let members = prow.get("interfaces").map(uuids).unwrap_or_default();
        for i in &members {
            let Some(irow) = r.row("Interface", i) else {
                continue;
            };
            let iname = col_str(irow, "name").to_string();
            let kind = col_str(irow, "type");
            let base = if members.len() > 1 {
                Err(format!(
                    "port {} has {} interfaces: bonds are not supported by Hayate",
                    col_str(prow, "name"),
                    members.len()
                ))
            } else {
                iface::spec(&iname, kind, &col_map(irow, "options"), cx)
            };
            let spec = base
                .clone()
                .map(|s| s + &policing(irow) + &super::qos::options(r, prow));
            let ofport_request = if iname == name && kind == "internal" {
                Some(OFPP_LOCAL)
            } else {
                irow.get("ofport_request")
                    .and_then(integer)
                    .and_then(|n| u32::try_from(n).ok())
            };
            ifaces.insert(
                iname,
                IfaceWant {
                    uuid: i.to_string(),
                    spec,
                    base: base.ok(),
                    ofport_request,
                },
            );
        }
    }
    BridgeWant {
        uuid: uuid.to_string(),
        setup: Setup { datapath_id },
        ctl: Controllers {
            fail_mode,
            targets,
            probe,
        },
        controllers,
        ifaces,
    }
}

/// An Interface's `ingress_policing_rate` (kbit/s; 0: off) and `ingress_policing_burst`
/// (kbit; 0: the default) as the port spec options of the same names (`port::policing`).
fn policing(irow: &Row) -> String {
    let col = |c: &str| irow.get(c).and_then(integer).filter(|n| *n > 0);
    match (col("ingress_policing_rate"), col("ingress_policing_burst")) {
        (Some(rate), Some(burst)) => {
            format!(",ingress_policing_rate={rate},ingress_policing_burst={burst}")
        }
        (Some(rate), None) => format!(",ingress_policing_rate={rate}"),
        _ => String::new(),
    }
}

fn col_str<'a>(row: &'a Row, col: &str) -> &'a str {
    row.get(col).and_then(string).unwrap_or("")
}

fn col_map(row: &Row, col: &str) -> BTreeMap<String, String> {
    row.get(col).map(map).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The initial rows of a monitor after `ovs-vsctl add-br br0 -- set-fail-mode br0 secure
    /// -- add-port br0 veth1 -- set interface veth1 ofport_request=7 -- set-controller br0
    /// tcp:127.0.0.1:6653 -- set bridge br0 other_config:datapath-id=0000000000000abc`
    /// (trimmed to the monitored columns).
    const ROWS: &str = r#"{
      "Open_vSwitch":{"r0":{"new":{"bridges":["uuid","b0"],"next_cfg":4,"other_config":["map",[]]}}},
      "Bridge":{"b0":{"new":{"name":"br0","ports":["set",[["uuid","p0"],["uuid","p1"]]],
          "controller":["uuid","c0"],"fail_mode":"secure","protocols":["set",[]],
          "other_config":["map",[["datapath-id","0000000000000abc"]]]}}},
      "Port":{"p0":{"new":{"name":"br0","interfaces":["uuid","i0"]}},
              "p1":{"new":{"name":"veth1","interfaces":["uuid","i1"]}}},
      "Interface":{"i0":{"new":{"name":"br0","type":"internal","options":["map",[]],"ofport_request":["set",[]]}},
                   "i1":{"new":{"name":"veth1","type":"","options":["map",[]],"ofport_request":7}}},
      "Controller":{"c0":{"new":{"target":"tcp:127.0.0.1:6653","inactivity_probe":["set",[]]}}}
    }"#;

    fn replica(text: &str) -> Replica {
        let mut r = Replica::default();
        r.apply(&ovsdb::update::parse(&serde_json::from_str(text).unwrap()).unwrap());
        r
    }

    #[test]
    fn golden_rows() {
        let w = want(&replica(ROWS), |n| n == "veth1", "/run/hayate");
        assert_eq!(w.root.as_deref(), Some("r0"));
        assert_eq!(w.next_cfg, 4);
        let b = &w.bridges["br0"];
        assert_eq!(b.uuid, "b0");
        assert_eq!(
            b.setup,
            Setup {
                datapath_id: Some(0xabc),
            }
        );
        assert_eq!(
            b.ctl,
            Controllers {
                fail_mode: FailMode::Secure,
                targets: vec!["tcp:127.0.0.1:6653".into()],
                probe: None,
            }
        );
        assert_eq!(
            b.controllers,
            [("c0".to_string(), "tcp:127.0.0.1:6653".to_string())]
        );
        assert_eq!(b.ifaces["br0"].spec.as_deref(), Ok("tap:br0"));
        assert_eq!(b.ifaces["br0"].ofport_request, Some(OFPP_LOCAL));
        assert_eq!(b.ifaces["veth1"].spec.as_deref(), Ok("afpacket:veth1"));
        assert_eq!(b.ifaces["veth1"].ofport_request, Some(7));
        assert_eq!(b.ifaces["veth1"].uuid, "i1");
    }

    #[test]
    fn ingress_policing_columns_become_spec_options() {
        let with = |cols: &str| {
            let rows = ROWS.replace(
                r#""name":"veth1","type":"","#,
                &format!(r#""name":"veth1","type":"",{cols},"#),
            );
            let w = want(&replica(&rows), |n| n == "veth1", "/run/hayate");
            let i = &w.bridges["br0"].ifaces["veth1"];
            // What opens the port does not change with its rates.
            assert_eq!(i.base.as_deref(), Some("afpacket:veth1"));
            i.spec.clone()
        };
        assert_eq!(
            with(r#""ingress_policing_rate":1000,"ingress_policing_burst":100"#).as_deref(),
            Ok("afpacket:veth1,ingress_policing_rate=1000,ingress_policing_burst=100")
        );
        assert_eq!(
            with(r#""ingress_policing_rate":1000,"ingress_policing_burst":0"#).as_deref(),
            Ok("afpacket:veth1,ingress_policing_rate=1000")
        );
        assert_eq!(
            with(r#""ingress_policing_rate":0,"ingress_policing_burst":100"#).as_deref(),
            Ok("afpacket:veth1")
        );
    }

    #[test]
    fn a_missing_device_and_a_bond_are_errors_of_their_interfaces() {
        let w = want(&replica(ROWS), |_| false, "/run/hayate");
        assert!(w.bridges["br0"].ifaces["veth1"].spec.is_err());
        let bond = ROWS.replace(
            r#""name":"veth1","interfaces":["uuid","i1"]"#,
            r#""name":"bond0","interfaces":["set",[["uuid","i1"],["uuid","i0"]]]"#,
        );
        let w = want(&replica(&bond), |_| true, "/run/hayate");
        assert!(w.bridges["br0"].ifaces["veth1"]
            .spec
            .as_ref()
            .unwrap_err()
            .contains("bonds"));
    }

    #[test]
    fn no_root_row_no_bridges() {
        assert_eq!(want(&Replica::default(), |_| true, "/x"), Want::default());
    }
}

//! What the switch writes back, as ovs-vswitchd does: per Interface `ofport` (-1 when it
//! could not be added), `error`, `link_state`, `admin_state`, `mac_in_use` and, every
//! [`STATS_EVERY`], `statistics`; per Bridge `datapath_id`; per Controller `is_connected`,
//! `role` and `status`; on the `Open_vSwitch` row `cur_cfg` (the `next_cfg` just applied: a
//! waiting `ovs-vsctl` returns), `iface_types` and `datapath_types`.
//!
//! Only columns whose value differs from the replica's are written, so a quiet switch writes
//! nothing. A value written once and still different in the replica (someone else wrote the
//! column) is written again only on a full pass, never in a loop with the notifications our
//! own writes cause.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use ovsdb::datum::{enc_map, enc_opt, enc_set};
use ovsdb::{ops, Replica};
use serde_json::{json, Map, Value};

use agent::ofproto::OfPort;

use super::iface::IFACE_TYPES;
use super::live::{Live, LiveBridge};
use super::want::{Want, OFPP_LOCAL};

/// How often `statistics` are written (Open vSwitch's default `stats-update-interval`).
pub const STATS_EVERY: Duration = Duration::from_secs(5);

/// What was last written, by (table, row, column).
#[derive(Default)]
pub struct Written(HashMap<(String, String, String), Value>);

impl Written {
    /// Forgets everything (a new connection: its replica is fresh).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// Columns to write, by (table, row).
struct Rows(BTreeMap<(&'static str, String), Map<String, Value>>);

impl Rows {
    fn set(&mut self, table: &'static str, uuid: &str, col: &str, v: Value) {
        self.0
            .entry((table, uuid.to_string()))
            .or_default()
            .insert(col.to_string(), v);
    }
}

/// How much a write-back pass looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Only what changes without a change in the database: the link state of ports whose
    /// link may change ([`agent::ofproto::OfBridge::watches_links`]) and controller state.
    Quick,
    /// Every column but the statistics (after the database or the switch changed).
    Changed,
    /// Every column, the statistics, and columns someone else changed since we wrote them.
    Full,
}

/// The `transact` operations that bring the database to what runs.
pub fn ops(want: &Want, live: &Live, r: &Replica, pass: Pass, written: &mut Written) -> Vec<Value> {
    let full = pass == Pass::Full;
    let quick = pass == Pass::Quick;
    let mut rows = Rows(BTreeMap::new());
    for (bname, bw) in &want.bridges {
        let lb = live.bridges.get(bname);
        if let (true, Some(b)) = (quick, lb) {
            if b.running.0.bridge.watches_links() {
                link_states(&mut rows, bw, b, &live.errors);
            }
            controllers(&mut rows, &bw.controllers, b);
            continue;
        }
        // One look at the bridge's ports for all its interfaces.
        let ports: HashMap<u32, OfPort> = lb
            .map(|b| {
                b.running
                    .0
                    .bridge
                    .ports()
                    .into_iter()
                    .map(|p| (p.no, p))
                    .collect()
            })
            .unwrap_or_default();
        for (iname, iw) in &bw.ifaces {
            let port = lb.and_then(|b| {
                b.ports
                    .get(iname)
                    .filter(|p| p.uuid == iw.uuid)
                    .map(|p| (b, p))
            });
            match port {
                Some((b, p)) => {
                    if let Some(of) = ports.get(&p.ofport) {
                        let refused = live.errors.get(&iw.uuid);
                        iface_up(&mut rows, &iw.uuid, (b, of, refused), &p.mac, full);
                    }
                }
                None => {
                    let e = live
                        .errors
                        .get(&iw.uuid)
                        .cloned()
                        .or_else(|| iw.spec.clone().err())
                        .unwrap_or_else(|| "not added yet".into());
                    rows.set("Interface", &iw.uuid, "ofport", json!(-1));
                    rows.set("Interface", &iw.uuid, "error", json!(e));
                    rows.set("Interface", &iw.uuid, "link_state", enc_opt(None));
                    rows.set("Interface", &iw.uuid, "admin_state", enc_opt(None));
                }
            }
        }
        if let Some(b) = lb {
            let dpid = b.running.0.bridge.config().datapath_id;
            rows.set(
                "Bridge",
                &bw.uuid,
                "datapath_id",
                json!(format!("{dpid:016x}")),
            );
            controllers(&mut rows, &bw.controllers, b);
        }
    }
    if let (false, Some(root)) = (quick, &want.root) {
        rows.set("Open_vSwitch", root, "cur_cfg", json!(want.next_cfg));
        let types = IFACE_TYPES.iter().map(|t| json!(t)).collect();
        rows.set("Open_vSwitch", root, "iface_types", enc_set(types));
        rows.set(
            "Open_vSwitch",
            root,
            "datapath_types",
            enc_set(vec![json!("netdev"), json!("system")]),
        );
    }
    changes(rows, r, full, written)
}

/// The `update` operations for the columns of `rows` that differ from the replica: a value
/// already written and not yet seen back is not written again, except on a `full` pass; rows
/// the replica does not hold (deleted meanwhile) are left alone.
fn changes(rows: Rows, r: &Replica, full: bool, written: &mut Written) -> Vec<Value> {
    let mut out = Vec::new();
    for ((table, uuid), cols) in rows.0 {
        let Some(current) = r.row(table, &uuid) else {
            continue;
        };
        let mut changed = Map::new();
        for (col, v) in cols {
            if current.get(&col) == Some(&v) {
                continue;
            }
            let key = (table.to_string(), uuid.clone(), col.clone());
            if !full && written.0.get(&key) == Some(&v) {
                continue;
            }
            written.0.insert(key, v.clone());
            changed.insert(col, v);
        }
        if !changed.is_empty() {
            out.push(ops::update(table, &uuid, changed));
        }
    }
    out
}

/// A running port's `error`: why its new rates were refused (it runs with its old ones), else
/// why its link is down (a tunnel port's remote without a next hop), else none.
fn running_error(refused: Option<&String>, link: Option<String>) -> Value {
    enc_opt(refused.cloned().or(link).map(Value::from))
}

/// The columns of running port `p` of bridge `b` (`refused`: why its new rates were not
/// taken).
fn iface_up(
    rows: &mut Rows,
    uuid: &str,
    (b, p, refused): (&LiveBridge, &OfPort, Option<&String>),
    mac: &str,
    full: bool,
) {
    let ofport = p.no;
    let db_no = if ofport == OFPP_LOCAL { 65534 } else { ofport };
    rows.set("Interface", uuid, "ofport", json!(db_no));
    let error = running_error(refused, p.port.link_status());
    rows.set("Interface", uuid, "error", error);
    let link = if p.port.link_up() { "up" } else { "down" };
    rows.set("Interface", uuid, "link_state", json!(link));
    rows.set("Interface", uuid, "admin_state", json!("up"));
    rows.set("Interface", uuid, "mac_in_use", json!(mac));
    if full {
        let drops = b.running.1.port_drops(ofport);
        let s = agent::ofproto::merged(p.port.stats(), &drops);
        let stats: BTreeMap<String, u64> = [
            ("rx_packets", s.rx_packets),
            ("rx_bytes", s.rx_bytes),
            ("rx_dropped", s.rx_dropped),
            ("rx_errors", s.rx_errors),
            ("tx_packets", s.tx_packets),
            ("tx_bytes", s.tx_bytes),
            ("tx_dropped", s.tx_dropped),
            ("tx_errors", s.tx_errors),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        rows.set("Interface", uuid, "statistics", enc_map(&stats));
    }
}

/// The link state of every port of bridge `b`.
fn link_states(
    rows: &mut Rows,
    bw: &super::want::BridgeWant,
    b: &LiveBridge,
    errors: &BTreeMap<String, String>,
) {
    let ports: HashMap<u32, (bool, Option<String>)> = b
        .running
        .0
        .bridge
        .ports()
        .into_iter()
        .map(|p| (p.no, (p.port.link_up(), p.port.link_status())))
        .collect();
    for (iname, iw) in &bw.ifaces {
        let Some(p) = b.ports.get(iname).filter(|p| p.uuid == iw.uuid) else {
            continue;
        };
        if let Some((up, why)) = ports.get(&p.ofport) {
            let link = if *up { "up" } else { "down" };
            rows.set("Interface", &iw.uuid, "link_state", json!(link));
            // A tunnel port says why its link is down (its remote's next hop).
            let error = running_error(errors.get(&iw.uuid), why.clone());
            rows.set("Interface", &iw.uuid, "error", error);
        }
    }
}

fn controllers(rows: &mut Rows, ctls: &[(String, String)], b: &LiveBridge) {
    let side = &b.running.2;
    let conns = side.agent().connections();
    let listening: Vec<String> = side
        .agent()
        .listening()
        .iter()
        .map(|t| t.to_string())
        .collect();
    for (uuid, target) in ctls {
        let norm = agent::Target::parse(target).map(|t| t.to_string()).ok();
        let passive = target.starts_with('p');
        let conn = conns.iter().find(|c| {
            let t = c.target.to_string();
            Some(&t) == norm.as_ref() || (passive && listening.contains(&t))
        });
        rows.set("Controller", uuid, "is_connected", json!(conn.is_some()));
        let role = conn.map(|c| match c.role {
            agent::Role::Master => "master",
            agent::Role::Slave => "slave",
            agent::Role::Equal => "other",
        });
        rows.set("Controller", uuid, "role", enc_opt(role.map(|r| json!(r))));
        let mut status = BTreeMap::new();
        let state = if conn.is_some() { "ACTIVE" } else { "BACKOFF" };
        status.insert("state".to_string(), state.to_string());
        rows.set("Controller", uuid, "status", enc_map(&status));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(text: &str) -> Replica {
        let mut r = Replica::default();
        r.apply(&ovsdb::update::parse(&serde_json::from_str(text).unwrap()).unwrap());
        r
    }

    fn rows(ofport: i64, link: &str) -> Rows {
        let mut rows = Rows(BTreeMap::new());
        rows.set("Interface", "i1", "ofport", json!(ofport));
        rows.set("Interface", "i1", "link_state", json!(link));
        rows.set("Interface", "gone", "ofport", json!(3));
        rows
    }

    #[test]
    fn writes_differences_once_and_again_on_full_passes() {
        let r = replica(r#"{"Interface":{"i1":{"new":{"ofport":7,"link_state":["set",[]]}}}}"#);
        let mut w = Written::default();
        let ops = changes(rows(7, "up"), &r, false, &mut w);
        // Only link_state differs; the deleted row is not written.
        assert_eq!(
            serde_json::to_string(&ops).unwrap(),
            r#"[{"op":"update","row":{"link_state":"up"},"table":"Interface","where":[["_uuid","==",["uuid","i1"]]]}]"#
        );
        // Not seen back yet: not written again (no loop with our own notifications) ...
        assert!(changes(rows(7, "up"), &r, false, &mut w).is_empty());
        // ... but a full pass writes it again (someone else may have changed it).
        assert_eq!(changes(rows(7, "up"), &r, true, &mut w).len(), 1);
        // A new value is written at once.
        assert_eq!(changes(rows(7, "down"), &r, false, &mut w).len(), 1);
        // Seen back: nothing to write.
        let r = replica(r#"{"Interface":{"i1":{"new":{"ofport":7,"link_state":"down"}}}}"#);
        assert!(changes(rows(7, "down"), &r, true, &mut w).is_empty());
    }
}

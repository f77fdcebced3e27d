//! A Port's `qos` (Open vSwitch's QoS and Queue tables) as the egress options of its port
//! spec (`port::egress`). A change to them, or to the Interface's `ingress_policing_rate` /
//! `_burst` (the spec's policing options), is applied to the running port
//! ([`datapath::Running::set_egress`], [`datapath::Running::set_policing`]; [`rates_change`]
//! tells such a change from one that needs the port opened again): its counters and its
//! traffic go on.
//!
//! | database | spec option |
//! |---|---|
//! | QoS `other_config:max-rate` (bit/s) | `qos_max_rate` (kbit/s, rounded up) |
//! | QoS `other_config:cir` (bytes/s) and `cbs` (bytes), type `egress-policer` | `qos_max_rate`, `qos_burst` |
//! | QoS `queues` key Q → Queue `other_config:min-rate`, `max-rate` (bit/s), `burst` (bits) | `queue=Q:min_rate=…:max_rate=…:burst=…` |
//! | QoS `type` `linux-htb` | `qos_type=linux-htb` |
//!
//! QoS type `linux-htb` shapes: packets above the rates wait in their queue (docs/config.md
//! "Egress queues"). Every other type (`egress-policer`, `trtcm-policer`, `linux-hfsc`, ...)
//! polices at output: rates are honoured, nothing is buffered. Bad values (a queue with no
//! rate, a minimum above the maximum) reach the Interface's `error` column through the
//! spec's check.

use ovsdb::datum::{map, string, uuid};
use ovsdb::{Replica, Row};
use port::dp_options::{split_spec, DatapathOptions};

/// The spec options of port row `prow`'s QoS, empty when it has none.
pub(super) fn options(r: &Replica, prow: &Row) -> String {
    let Some(qos) = prow.get("qos").and_then(uuid).and_then(|u| r.row("QoS", u)) else {
        return String::new();
    };
    let cfg = qos.get("other_config").map(map).unwrap_or_default();
    let num = |m: &std::collections::BTreeMap<String, String>, k: &str| -> Option<u64> {
        m.get(k).and_then(|v| v.parse::<u64>().ok())
    };
    let mut s = String::new();
    if qos.get("type").and_then(string) == Some("linux-htb") {
        s.push_str(",qos_type=linux-htb");
    }
    let cap = num(&cfg, "max-rate").or_else(|| num(&cfg, "cir").map(|c| c * 8));
    if let Some(bits) = cap {
        s.push_str(&format!(",qos_max_rate={}", kbit(bits)));
    }
    if let Some(bytes) = num(&cfg, "cbs") {
        s.push_str(&format!(",qos_burst={}", kbit(bytes * 8)));
    }
    let queues = qos.get("queues").map(map).unwrap_or_default();
    for (id, q) in &queues {
        let qcfg = r
            .row("Queue", q)
            .and_then(|row| row.get("other_config"))
            .map(map)
            .unwrap_or_default();
        s.push_str(&format!(",queue={id}"));
        for (key, opt) in [
            ("min-rate", "min_rate"),
            ("max-rate", "max_rate"),
            ("burst", "burst"),
        ] {
            if let Some(bits) = num(&qcfg, key) {
                s.push_str(&format!(":{opt}={}", kbit(bits)));
            }
        }
    }
    s
}

/// What a running port does when its spec changes from `old` to `new`, each given as `(the
/// spec without the rates its rows add, the whole spec)`: `None` when nothing changed or the
/// port must be opened again (another backend or option; a tunnel port); else the rates
/// (ingress policing, egress queues) of `new` that it takes where it runs, or why they are
/// refused (it keeps its old ones meanwhile).
pub(super) fn rates_change(
    (old_base, old): (&str, &str),
    (new_base, new): (&str, &str),
) -> Option<Result<DatapathOptions, String>> {
    if old == new || old_base != new_base || crate::tunnels::conf(0, "", old).is_some() {
        return None;
    }
    Some(split_spec(new).map(|(_, o)| o).map_err(|e| e.to_string()))
}

/// Bits (or bit/s) as kbit, rounded up; 0 stays 0 (which the spec refuses by name).
fn kbit(bits: u64) -> u64 {
    bits.div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After `ovs-vsctl set port veth1 qos=@q -- --id=@q create qos type=linux-htb
    /// other_config:max-rate=10000000 queues:1=@a queues:2=@b -- --id=@a create queue
    /// other_config:min-rate=1000000 other_config:max-rate=5000000 -- --id=@b create queue
    /// other_config:max-rate=300000` (trimmed to the monitored columns).
    const ROWS: &str = r#"{
      "Port":{"p1":{"new":{"name":"veth1","interfaces":["uuid","i1"],"qos":["uuid","q0"]}},
              "p2":{"new":{"name":"veth2","interfaces":["uuid","i2"],"qos":["set",[]]}}},
      "QoS":{"q0":{"new":{"type":"linux-htb","other_config":["map",[["max-rate","10000000"]]],
          "queues":["map",[[1,["uuid","qa"]],[2,["uuid","qb"]]]]}}},
      "Queue":{"qa":{"new":{"other_config":["map",[["max-rate","5000000"],["min-rate","1000000"]]]}},
               "qb":{"new":{"other_config":["map",[["max-rate","300000"]]]}}}
    }"#;

    #[test]
    fn qos_and_queue_rows_become_egress_options_the_spec_accepts() {
        let mut r = Replica::default();
        r.apply(&ovsdb::update::parse(&serde_json::from_str(ROWS).unwrap()).unwrap());
        let opts = options(&r, r.row("Port", "p1").unwrap());
        assert_eq!(
            opts,
            ",qos_type=linux-htb,qos_max_rate=10000,queue=1:min_rate=1000:max_rate=5000,\
             queue=2:max_rate=300"
        );
        let (_, o) = port::dp_options::split_spec(&format!("null:sink{opts}")).unwrap();
        assert_eq!(o.egress.max_kbps, 10_000);
        assert_eq!(o.egress.queues[&1].min_kbps, 1000);
        assert!(o.egress.qos_type.shapes());
        assert_eq!(options(&r, r.row("Port", "p2").unwrap()), "");
    }

    #[test]
    fn a_change_of_rates_only_is_told_from_one_that_reopens_the_port() {
        let base = "afpacket:veth1";
        let old = (
            base,
            "afpacket:veth1,qos_max_rate=10000,queue=1:max_rate=5000",
        );
        let change = |new: &str| rates_change(old, (base, new));
        let o = change("afpacket:veth1,qos_max_rate=20000,ingress_policing_rate=100")
            .expect("rates only")
            .unwrap();
        assert_eq!(o.egress.max_kbps, 20_000);
        assert!(o.egress.queues.is_empty(), "queue 1 went");
        assert_eq!(o.policing.rate_kbps, 100);
        let o = change(base).expect("rates off").unwrap();
        assert!(!o.egress.is_on() && !o.policing.is_on());
        assert!(change(old.1).is_none(), "no change");
        let e = change("afpacket:veth1,queue=1:min_rate=9:max_rate=5")
            .expect("rates only")
            .unwrap_err();
        assert!(e.contains("raise max_rate"), "refused, and why: {e}");
        let other = rates_change(old, ("afpacket:veth2", "afpacket:veth2,qos_max_rate=10000"));
        assert!(other.is_none(), "another backend: opened again");
        let vx = "vxlan:remote=192.0.2.2,vni=1";
        assert!(rates_change((vx, vx), (vx, &format!("{vx},qos_max_rate=5"))).is_none());
    }
}

//! OVSDB values in JSON (RFC 7047 §5.1): an atom is a string, number, boolean or
//! `["uuid", "…"]`; a set is `["set", [atoms]]` or, with one element, the bare atom; a map is
//! `["map", [[key, value], …]]`. Readers accept every legal form; writers produce the form
//! `ovsdb-server` itself sends (a one-element set bare, map keys in order), so a value written
//! compares equal to the same value read back.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// The elements of a set (a bare atom is a set of one).
pub fn set(v: &Value) -> Vec<&Value> {
    match v.as_array() {
        Some(a) if a.len() == 2 && a[0] == "set" => a[1]
            .as_array()
            .map(|e| e.iter().collect())
            .unwrap_or_default(),
        _ => vec![v],
    }
}

/// The UUID of a `["uuid", "…"]` atom.
pub fn uuid(v: &Value) -> Option<&str> {
    match v.as_array() {
        Some(a) if a.len() == 2 && a[0] == "uuid" => a[1].as_str(),
        _ => None,
    }
}

/// The UUIDs of a set of references (anything else in it is skipped).
pub fn uuids(v: &Value) -> Vec<&str> {
    set(v).into_iter().filter_map(uuid).collect()
}

/// A string, or an optional string column's value (`None` for the empty set).
pub fn string(v: &Value) -> Option<&str> {
    set(v).first().and_then(|a| a.as_str())
}

/// An integer, or an optional integer column's value (`None` for the empty set).
pub fn integer(v: &Value) -> Option<i64> {
    set(v).first().and_then(|a| a.as_i64())
}

/// A map's pairs with atoms as text (numbers and booleans printed); not a map: empty.
pub fn map(v: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(a) = v.as_array() else {
        return out;
    };
    if a.len() != 2 || a[0] != "map" {
        return out;
    }
    for pair in a[1].as_array().into_iter().flatten() {
        if let Some([k, v]) = pair.as_array().map(Vec::as_slice) {
            if let (Some(k), Some(v)) = (atom_text(k), atom_text(v)) {
                out.insert(k, v);
            }
        }
    }
    out
}

fn atom_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => uuid(v).map(str::to_string),
    }
}

/// A `["uuid", …]` reference.
pub fn enc_uuid(u: &str) -> Value {
    json!(["uuid", u])
}

/// A set of atoms as the server writes it: one element bare, else `["set", […]]`.
pub fn enc_set(mut atoms: Vec<Value>) -> Value {
    if atoms.len() == 1 {
        atoms.pop().unwrap_or(Value::Null)
    } else {
        json!(["set", atoms])
    }
}

/// An optional column: the atom, or the empty set.
pub fn enc_opt(v: Option<Value>) -> Value {
    enc_set(v.into_iter().collect())
}

/// A map with keys in order (any `Into<Value>` atoms).
pub fn enc_map<V: Into<Value> + Clone>(m: &BTreeMap<String, V>) -> Value {
    let pairs: Vec<Value> = m
        .iter()
        .map(|(k, v)| json!([k, v.clone().into()]))
        .collect();
    json!(["map", pairs])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_form_the_server_sends() {
        let one: Value = serde_json::from_str(r#"["uuid","a1"]"#).unwrap();
        let many: Value = serde_json::from_str(r#"["set",[["uuid","a1"],["uuid","b2"]]]"#).unwrap();
        let empty: Value = serde_json::from_str(r#"["set",[]]"#).unwrap();
        assert_eq!(uuids(&one), ["a1"]);
        assert_eq!(uuids(&many), ["a1", "b2"]);
        assert!(uuids(&empty).is_empty());
        assert_eq!(string(&json!("secure")), Some("secure"));
        assert_eq!(string(&empty), None);
        assert_eq!(integer(&json!(7)), Some(7));
        assert_eq!(integer(&empty), None);
        let m: Value =
            serde_json::from_str(r#"["map",[["vhost-server-path","/tmp/v.sock"],["n",3]]]"#)
                .unwrap();
        let m = map(&m);
        assert_eq!(m["vhost-server-path"], "/tmp/v.sock");
        assert_eq!(m["n"], "3");
        assert!(map(&json!("x")).is_empty());
    }

    #[test]
    fn writes_what_the_server_would_send_back() {
        assert_eq!(enc_opt(Some(json!(3))).to_string(), "3");
        assert_eq!(enc_opt(None).to_string(), r#"["set",[]]"#);
        let mut m = BTreeMap::new();
        m.insert("tx_packets".to_string(), 5);
        m.insert("rx_packets".to_string(), 9);
        assert_eq!(
            enc_map(&m).to_string(),
            r#"["map",[["rx_packets",9],["tx_packets",5]]]"#
        );
        assert_eq!(enc_uuid("u").to_string(), r#"["uuid","u"]"#);
    }
}

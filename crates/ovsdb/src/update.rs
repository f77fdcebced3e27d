//! `<table-updates>` (RFC 7047 §4.1.6): what a `monitor` reply and each `update`
//! notification carry — per table, per row UUID, the row's `old` and `new` columns.
//! Insert: `new` only; delete: `old` only; modify: both (`old` holds the changed columns'
//! previous values, `new` every monitored column).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One row's change.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RowUpdate {
    /// Previous values (delete, modify).
    pub old: Option<Map<String, Value>>,
    /// New values (insert, modify, a monitor's initial rows).
    pub new: Option<Map<String, Value>>,
}

/// Changes by table name, then by row UUID.
pub type TableUpdates = BTreeMap<String, BTreeMap<String, RowUpdate>>;

/// What is wrong with a `<table-updates>`.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("bad table-updates: {0}")]
pub struct UpdateError(pub &'static str);

/// Reads a `<table-updates>` object.
pub fn parse(v: &Value) -> Result<TableUpdates, UpdateError> {
    let tables = v.as_object().ok_or(UpdateError("not an object"))?;
    let mut out = TableUpdates::new();
    for (table, rows) in tables {
        let rows = rows
            .as_object()
            .ok_or(UpdateError("a table's updates are not an object"))?;
        let mut parsed = BTreeMap::new();
        for (uuid, u) in rows {
            let u = u
                .as_object()
                .ok_or(UpdateError("a row update is not an object"))?;
            let part = |k: &str| -> Result<Option<Map<String, Value>>, UpdateError> {
                match u.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Object(o)) => Ok(Some(o.clone())),
                    Some(_) => Err(UpdateError("old/new is not an object")),
                }
            };
            let ru = RowUpdate {
                old: part("old")?,
                new: part("new")?,
            };
            if ru.old.is_none() && ru.new.is_none() {
                return Err(UpdateError("a row update with neither old nor new"));
            }
            parsed.insert(uuid.clone(), ru);
        }
        out.insert(table.clone(), parsed);
    }
    Ok(out)
}

/// Reads the parameters of an `update` notification: `[monitor-id, <table-updates>]`.
pub fn parse_notification(params: &Value) -> Result<(Value, TableUpdates), UpdateError> {
    match params.as_array().map(Vec::as_slice) {
        Some([id, updates]) => Ok((id.clone(), parse(updates)?)),
        _ => Err(UpdateError("update params are not [monitor-id, updates]")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn insert_modify_delete() {
        // As ovsdb-server sent them for `ovs-vsctl add-port br0 p1` and a later del-port.
        let v: Value = serde_json::from_str(
            r#"{"Interface":{"0f1e":{"new":{"name":"p1","type":"","ofport_request":["set",[]]}}},
                "Port":{"77aa":{"old":{"name":"p1"}},
                        "1234":{"old":{"interfaces":["set",[]]},"new":{"name":"p2","interfaces":["uuid","0f1e"]}}}}"#,
        )
        .unwrap();
        let u = parse(&v).unwrap();
        let i = &u["Interface"]["0f1e"];
        assert!(i.old.is_none());
        assert_eq!(i.new.as_ref().unwrap()["name"], "p1");
        assert!(u["Port"]["77aa"].new.is_none());
        assert_eq!(u["Port"]["1234"].new.as_ref().unwrap()["name"], "p2");
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(parse(&json!([])).is_err());
        assert!(parse(&json!({"T": 1})).is_err());
        assert!(parse(&json!({"T": {"u": {}}})).is_err());
        assert!(parse(&json!({"T": {"u": {"new": 3}}})).is_err());
        assert!(parse_notification(&json!(["m"])).is_err());
        let (id, u) = parse_notification(&json!(["m", {}])).unwrap();
        assert_eq!(id, json!("m"));
        assert!(u.is_empty());
    }
}

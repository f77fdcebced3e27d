//! Request parameters: the `monitor` request and the `transact` operations the switch
//! writes (RFC 7047 §4.1.5, §5.2). Only what a switch needs: `update` a row's columns,
//! `mutate` one (e.g. nothing yet), `comment` for the server's log.

use serde_json::{json, Map, Value};

use crate::datum::enc_uuid;

/// `monitor` parameters: `[db, monitor-id, {table: {"columns": [...]}}]`; an empty column
/// list means every column.
pub fn monitor(db: &str, id: &Value, tables: &[(&str, &[&str])]) -> Value {
    let mut reqs = Map::new();
    for (t, cols) in tables {
        let req = if cols.is_empty() {
            json!({})
        } else {
            json!({ "columns": cols })
        };
        reqs.insert((*t).to_string(), req);
    }
    json!([db, id, reqs])
}

/// An `update` of the row `uuid` of `table` with the columns in `row`.
pub fn update(table: &str, uuid: &str, row: Map<String, Value>) -> Value {
    json!({
        "op": "update",
        "table": table,
        "where": [["_uuid", "==", enc_uuid(uuid)]],
        "row": row,
    })
}

/// A `comment` operation (the server logs it).
pub fn comment(text: &str) -> Value {
    json!({"op": "comment", "comment": text})
}

/// `transact` parameters: `[db, op, op, …]`.
pub fn transact(db: &str, ops: Vec<Value>) -> Value {
    let mut p = vec![Value::String(db.to_string())];
    p.extend(ops);
    Value::Array(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_requests() {
        assert_eq!(
            monitor(
                "Open_vSwitch",
                &json!("m"),
                &[
                    ("Bridge", &["name", "ports"][..]),
                    ("Open_vSwitch", &[][..])
                ]
            )
            .to_string(),
            r#"["Open_vSwitch","m",{"Bridge":{"columns":["name","ports"]},"Open_vSwitch":{}}]"#
        );
        let mut row = Map::new();
        row.insert("ofport".into(), json!(3));
        assert_eq!(
            transact("Open_vSwitch", vec![update("Interface", "u1", row)]).to_string(),
            r#"["Open_vSwitch",{"op":"update","row":{"ofport":3},"table":"Interface","where":[["_uuid","==",["uuid","u1"]]]}]"#
        );
    }
}

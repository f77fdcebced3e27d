//! The local copy of the monitored tables: every row by table and UUID, kept by applying
//! each [`TableUpdates`] in order (the monitor's initial rows first).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::update::TableUpdates;

/// A row: its columns by name.
pub type Row = Map<String, Value>;

/// Rows by table name, then by UUID.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Replica {
    tables: BTreeMap<String, BTreeMap<String, Row>>,
}

impl Replica {
    /// Applies one set of changes: `new` columns are merged into the row (inserting it), a
    /// change without `new` deletes the row.
    pub fn apply(&mut self, updates: &TableUpdates) {
        for (table, rows) in updates {
            let t = self.tables.entry(table.clone()).or_default();
            for (uuid, u) in rows {
                match &u.new {
                    Some(new) => {
                        let row = t.entry(uuid.clone()).or_default();
                        for (k, v) in new {
                            row.insert(k.clone(), v.clone());
                        }
                    }
                    None => {
                        t.remove(uuid);
                    }
                }
            }
        }
    }

    /// Every row of `table`, by UUID.
    pub fn table(&self, table: &str) -> impl Iterator<Item = (&str, &Row)> {
        self.tables
            .get(table)
            .into_iter()
            .flatten()
            .map(|(u, r)| (u.as_str(), r))
    }

    /// One row.
    pub fn row(&self, table: &str, uuid: &str) -> Option<&Row> {
        self.tables.get(table)?.get(uuid)
    }

    /// Forgets every row (before a new monitor's initial rows).
    pub fn clear(&mut self) {
        self.tables.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update::parse;

    fn apply(r: &mut Replica, text: &str) {
        r.apply(&parse(&serde_json::from_str(text).unwrap()).unwrap());
    }

    #[test]
    fn follows_inserts_modifies_and_deletes() {
        let mut r = Replica::default();
        apply(
            &mut r,
            r#"{"Bridge":{"b1":{"new":{"name":"br0","fail_mode":["set",[]]}}}}"#,
        );
        apply(
            &mut r,
            r#"{"Bridge":{"b1":{"old":{"fail_mode":["set",[]]},"new":{"name":"br0","fail_mode":"secure"}}}}"#,
        );
        let b = r.row("Bridge", "b1").unwrap();
        assert_eq!(b["fail_mode"], "secure");
        assert_eq!(r.table("Bridge").count(), 1);
        apply(&mut r, r#"{"Bridge":{"b1":{"old":{"name":"br0"}}}}"#);
        assert!(r.row("Bridge", "b1").is_none());
        assert_eq!(r.table("Port").count(), 0);
    }
}

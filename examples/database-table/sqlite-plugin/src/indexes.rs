//! The indexes the extension asks for, and the ones this plugin keeps.

use std::collections::{BTreeMap, BTreeSet};

use database_table_model::Table;
use kplug_sidecar::Object;
use rusqlite::Connection;
use serde_json::Value;

use crate::EXTENSION;

/// The columns `extension` asks to index (none without an extension).
///
/// # Errors
/// What is wrong with `spec.indexes`, naming the extension: not a list of
/// strings, or a column the table does not have.
pub fn indexes(extension: Option<&Object>, table: &Table) -> Result<BTreeSet<String>, String> {
    let Some(extension) = extension else {
        return Ok(BTreeSet::new());
    };
    let what = format!("{EXTENSION} {}", extension.name());
    let list = match extension.spec().get("indexes") {
        None | Some(Value::Null) => return Ok(BTreeSet::new()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(format!(
                "{what}: spec.indexes must be a list of column names, not {other}"
            ));
        }
    };
    let mut wanted = BTreeSet::new();
    for item in list {
        let Some(column) = item.as_str() else {
            return Err(format!(
                "{what}: spec.indexes must be a list of column names, not {item}"
            ));
        };
        if !table.columns.iter().any(|(name, _)| name == column) {
            return Err(format!(
                "{what}: spec.indexes names column {column:?}, which table {} does not have; index one of its columns or remove the entry",
                table.name
            ));
        }
        wanted.insert(column.to_owned());
    }
    Ok(wanted)
}

/// The name of the index this plugin keeps on `table`'s `column`. The
/// length prefix keeps names unique across the database's tables (index
/// names share one namespace; `a`+`b_c` and `a_b`+`c` must differ).
pub fn index_name(table: &str, column: &str) -> String {
    format!("{INDEX_PREFIX}{}_{table}_{column}", table.len())
}

const INDEX_PREFIX: &str = "kplug_ix_";

/// This plugin's indexes on `table`: index name → the column it indexes.
///
/// # Errors
/// SQLite's error.
pub fn managed_indexes(
    conn: &Connection,
    table: &str,
) -> rusqlite::Result<BTreeMap<String, String>> {
    let mut stmt = conn.prepare(
        "SELECT l.name, i.name FROM pragma_index_list(?1) AS l, pragma_index_info(l.name) AS i \
         WHERE l.origin = 'c' AND l.name LIKE 'kplug\\_ix\\_%' ESCAPE '\\'",
    )?;
    let rows = stmt.query_map([table], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    rows.collect()
}

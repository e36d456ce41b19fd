//! A table brought to its spec in SQLite, in one transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use database_table_model::{ColumnType, Plan, Table, plan};
use rusqlite::{Connection, TransactionBehavior};

use crate::indexes::{index_name, managed_indexes};

fn declared(t: ColumnType) -> &'static str {
    match t {
        ColumnType::Int32 => "INTEGER",
        ColumnType::Int64 => "BIGINT",
        ColumnType::Uint64 => "UNSIGNED BIGINT",
        ColumnType::String => "TEXT",
        ColumnType::Bool => "BOOLEAN",
        ColumnType::Float64 => "DOUBLE",
        ColumnType::Timestamp => "TIMESTAMP",
    }
}

fn quote(ident: &str) -> String {
    // Identifiers are validated; quoting keeps keywords (e.g. "order") safe.
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn columns_sql(columns: &[(String, ColumnType)]) -> String {
    columns
        .iter()
        .map(|(n, t)| format!("{} {}", quote(n), declared(*t)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn existing_columns(conn: &Connection, table: &str) -> rusqlite::Result<BTreeMap<String, String>> {
    let mut stmt = conn.prepare("SELECT name, type FROM pragma_table_info(?1)")?;
    let rows = stmt.query_map([table], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    rows.collect()
}

/// What one reconcile did.
#[derive(Debug)]
pub struct Applied {
    /// Whether the table was created.
    pub created: bool,
    /// The changes made to an existing table.
    pub plan: Plan,
    /// Rows in the table afterwards.
    pub rows: i64,
    /// Columns whose index was created.
    pub indexed: Vec<String>,
    /// Columns whose index was dropped.
    pub unindexed: Vec<String>,
    /// The indexed columns afterwards.
    pub indexes: BTreeSet<String>,
}

impl Applied {
    /// What changed, in words ("created", "added 1 (email); indexed name").
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.created {
            parts.push("created".to_owned());
        } else if !self.plan.is_empty() {
            parts.push(self.plan.summary());
        }
        if !self.indexed.is_empty() {
            parts.push(format!("indexed {}", self.indexed.join(", ")));
        }
        if !self.unindexed.is_empty() {
            parts.push(format!("unindexed {}", self.unindexed.join(", ")));
        }
        if parts.is_empty() {
            self.plan.summary()
        } else {
            parts.join("; ")
        }
    }

    /// Whether the table or its indexes changed.
    pub fn changed(&self) -> bool {
        self.created
            || !self.plan.is_empty()
            || !self.indexed.is_empty()
            || !self.unindexed.is_empty()
    }
}

/// Brings `table` in the database at `path` to the spec, with an index on
/// each column of `indexes` (see [`crate::indexes()`]), in one transaction.
///
/// # Errors
/// SQLite's error; the transaction is rolled back, nothing changed.
pub fn apply(path: &Path, table: &Table, indexes: &BTreeSet<String>) -> rusqlite::Result<Applied> {
    let mut conn = Connection::open(path)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let existing = existing_columns(&tx, &table.name)?;
    let name = quote(&table.name);
    // Unwanted indexes go first: SQLite refuses to drop an indexed column.
    let mut before = BTreeSet::new();
    for (index, column) in managed_indexes(&tx, &table.name)? {
        if !indexes.contains(&column) || index != index_name(&table.name, &column) {
            tx.execute_batch(&format!("DROP INDEX {}", quote(&index)))?;
        }
        before.insert(column);
    }
    let (created, plan) = if existing.is_empty() {
        tx.execute_batch(&format!(
            "CREATE TABLE {name} ({})",
            columns_sql(&table.columns)
        ))?;
        (true, Plan::default())
    } else {
        (false, alter(&tx, table, &existing)?)
    };
    // A rebuild dropped the old table's indexes with it: create whatever
    // is missing now.
    let present: BTreeSet<String> = managed_indexes(&tx, &table.name)?.into_keys().collect();
    for column in indexes {
        let index = index_name(&table.name, column);
        if !present.contains(&index) {
            tx.execute_batch(&format!(
                "CREATE INDEX {} ON {name} ({})",
                quote(&index),
                quote(column)
            ))?;
        }
    }
    let after: BTreeSet<String> = managed_indexes(&tx, &table.name)?.into_values().collect();
    let indexed = after.difference(&before).cloned().collect();
    let unindexed = before.difference(&after).cloned().collect();
    let rows: i64 = tx.query_row(&format!("SELECT COUNT(*) FROM {name}"), [], |r| r.get(0))?;
    tx.commit()?;
    Ok(Applied {
        created,
        plan,
        rows,
        indexed,
        unindexed,
        indexes: after,
    })
}

/// Brings the existing `table` (its columns `existing`) to the spec: the
/// changes made.
fn alter(
    conn: &Connection,
    table: &Table,
    existing: &BTreeMap<String, String>,
) -> rusqlite::Result<Plan> {
    let name = quote(&table.name);
    let plan = plan(existing, table, |db, t| {
        db.eq_ignore_ascii_case(declared(t))
    });
    if !plan.retype.is_empty() {
        rebuild(conn, table, existing)?;
    } else {
        for (column, t) in &plan.add {
            conn.execute_batch(&format!(
                "ALTER TABLE {name} ADD COLUMN {} {}",
                quote(column),
                declared(*t)
            ))?;
        }
        for column in &plan.drop {
            conn.execute_batch(&format!("ALTER TABLE {name} DROP COLUMN {}", quote(column)))?;
        }
    }
    Ok(plan)
}

/// Rebuilds `table`, as SQLite cannot change a column's type in place: the
/// new table has the spec's columns; existing data is copied with CAST for
/// retyped columns; dropped columns go away.
fn rebuild(
    conn: &Connection,
    table: &Table,
    existing: &BTreeMap<String, String>,
) -> rusqlite::Result<()> {
    let name = quote(&table.name);
    let tmp = quote(&format!("{}__kplug_rebuild", table.name));
    conn.execute_batch(&format!(
        "CREATE TABLE {tmp} ({})",
        columns_sql(&table.columns)
    ))?;
    let kept: Vec<&(String, ColumnType)> = table
        .columns
        .iter()
        .filter(|(n, _)| existing.contains_key(n))
        .collect();
    let targets = kept
        .iter()
        .map(|(n, _)| quote(n))
        .collect::<Vec<_>>()
        .join(", ");
    let sources = kept
        .iter()
        .map(|(n, t)| format!("CAST({} AS {})", quote(n), declared(*t)))
        .collect::<Vec<_>>()
        .join(", ");
    conn.execute_batch(&format!(
        "INSERT INTO {tmp} ({targets}) SELECT {sources} FROM {name}; DROP TABLE {name}; ALTER TABLE {tmp} RENAME TO {name};"
    ))
}

/// Drops `table` from the database at `path` (if both exist).
///
/// # Errors
/// SQLite's error.
pub fn drop_table(path: &Path, table: &str) -> rusqlite::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    Connection::open(path)?.execute_batch(&format!("DROP TABLE IF EXISTS {}", quote(table)))
}

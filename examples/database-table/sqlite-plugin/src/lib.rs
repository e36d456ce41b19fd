//! A kplug plugin that keeps `DatabaseTable` resources as tables in
//! embedded SQLite files: `<data dir>/<spec.serverName>.db`. It needs no
//! database server, which makes it the demo's plugin.
//!
//! Column types are declared with distinct SQLite type names so a mistyped
//! column can be recognised later:
//!
//! | spec type | declared as | SQLite affinity |
//! |---|---|---|
//! | int32 | `INTEGER` | INTEGER |
//! | int64 | `BIGINT` | INTEGER |
//! | uint64 | `UNSIGNED BIGINT` | INTEGER (SQLite stores at most 2^63-1) |
//! | string | `TEXT` | TEXT |
//! | bool | `BOOLEAN` | NUMERIC |
//! | float64 | `DOUBLE` | REAL |
//! | timestamp | `TIMESTAMP` | NUMERIC |
//!
//! The extension `DatabaseTableSqliteExtension` carries the SQLite-specific
//! settings: `spec.indexes` names the columns that get an index. The plugin
//! owns the indexes it creates (named `kplug_ix_<len>_<table>_<column>`) and
//! leaves any other index alone.
//!
//! At admission (`Validate`), a `DatabaseTable` whose spec the reconcile
//! would refuse is refused before it is stored, with a field error per
//! problem (`spec.columns[1].type`), by the same checks
//! ([`database_table_model::validate`]): `kubectl apply` says what is wrong
//! instead of the object failing later in its status.
//!
//! Every change runs in one transaction: a spec is applied completely or not
//! at all. SQLite cannot change a column's type in place, so a retype
//! rebuilds the table (create, copy with CAST, drop, rename) inside that
//! transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use database_table_model::{
    ColumnType, DeletionPolicy, Plan, SpecError, Table, TableSpec, is_identifier, plan, validate,
};
use kplug_sidecar::{
    AdmissionRequest, BoxError, Object, Offer, Plugin, PluginInfo, Request, Response, Validation,
};
use rusqlite::{Connection, TransactionBehavior};
use serde_json::{Value, json};

/// The extension kind this plugin reads.
pub const EXTENSION: &str = "DatabaseTableSqliteExtension";

/// The plugin.
#[derive(Debug)]
pub struct SqlitePlugin {
    data_dir: PathBuf,
}

/// How the plugin describes itself.
pub fn info() -> PluginInfo {
    PluginInfo::new("sqlite", env!("CARGO_PKG_VERSION"))
        .description("DatabaseTable in embedded SQLite files")
        .offer(Offer::new("myorg.org", "DatabaseTable", "SQLite").extension("myorg.org", EXTENSION))
}

impl SqlitePlugin {
    /// A plugin keeping its databases in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
        }
    }

    fn database(&self, server: &str) -> Result<PathBuf, String> {
        // The server name becomes a file name: keep it boring.
        let ok = !server.is_empty()
            && server
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(format!(
                "serverName {server:?} cannot be a file name; use letters, digits, '-' and '_'"
            ));
        }
        Ok(self.data_dir.join(format!("{server}.db")))
    }
}

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
/// each column of `indexes` (see [`indexes`]), in one transaction.
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
        let plan = plan(&existing, table, |db, t| {
            db.eq_ignore_ascii_case(declared(t))
        });
        if !plan.retype.is_empty() {
            // Rebuild: the new table has the spec's columns; existing data is
            // copied with CAST for retyped columns; dropped columns go away.
            let tmp = quote(&format!("{}__kplug_rebuild", table.name));
            tx.execute_batch(&format!(
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
            tx.execute_batch(&format!(
                "INSERT INTO {tmp} ({targets}) SELECT {sources} FROM {name}; DROP TABLE {name}; ALTER TABLE {tmp} RENAME TO {name};"
            ))?;
        } else {
            for (column, t) in &plan.add {
                tx.execute_batch(&format!(
                    "ALTER TABLE {name} ADD COLUMN {} {}",
                    quote(column),
                    declared(*t)
                ))?;
            }
            for column in &plan.drop {
                tx.execute_batch(&format!("ALTER TABLE {name} DROP COLUMN {}", quote(column)))?;
            }
        }
        (false, plan)
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

/// The field errors of a `DatabaseTable` spec (as JSON, as submitted):
/// every column of an unknown type, then the first other problem the
/// reconcile would refuse the spec for, each at its field.
pub fn field_errors(name: &str, spec: &Value) -> Validation {
    let mut verdict = Validation::allowed();
    let columns = spec["columns"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // Every unknown type at once: the reconcile's check stops at the first.
    for (i, column) in columns.iter().enumerate() {
        let type_ = column["type"].as_str().unwrap_or_default();
        if ColumnType::parse(type_).is_none() {
            let error = SpecError::UnknownType {
                column: column["name"].as_str().unwrap_or_default().to_owned(),
                type_: type_.to_owned(),
            };
            verdict = verdict.error(
                &format!("spec.columns[{i}].type"),
                &column["type"],
                error.to_string(),
            );
        }
    }
    if !verdict.is_allowed() {
        return verdict;
    }
    // The schema (the CRD) has already checked the shape; a spec that
    // does not decode is left to it.
    let Ok(spec) = serde_json::from_value::<TableSpec>(spec.clone()) else {
        return verdict;
    };
    // A name still to be generated (generateName) is not checked here.
    let name = if name.is_empty() { "generated" } else { name };
    let Err(error) = validate(name, &spec) else {
        return verdict;
    };
    let column_at = |wanted: &str, nth: usize| {
        spec.columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name == wanted)
            .nth(nth)
            .map_or(0, |(i, _)| i)
    };
    match &error {
        SpecError::BadName {
            what: "table",
            name,
        } => verdict.error("metadata.name", name, error.to_string()),
        SpecError::BadName { name, .. } => verdict.error(
            &format!("spec.columns[{}].name", column_at(name, 0)),
            name,
            error.to_string(),
        ),
        SpecError::Duplicate(name) => verdict.error(
            &format!("spec.columns[{}].name", column_at(name, 1)),
            name,
            error.to_string(),
        ),
        SpecError::NoColumns | SpecError::UnknownType { .. } => {
            verdict.error_at("spec.columns", error.to_string())
        }
    }
}

impl Plugin for SqlitePlugin {
    /// Refuses a `DatabaseTable` the reconcile would refuse (see
    /// [`field_errors`]); extensions are left to the reconcile.
    async fn validate(&self, request: AdmissionRequest) -> Result<Validation, BoxError> {
        let object = request.object();
        if object.kind() != "DatabaseTable" {
            return Ok(Validation::allowed());
        }
        Ok(field_errors(object.name(), object.spec()))
    }

    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        let spec: TableSpec = request.spec()?;
        let table = match validate(request.name(), &spec) {
            Ok(table) => table,
            Err(e) => {
                return Ok(
                    Response::failed(format!("invalid spec, nothing changed: {e}")).condition(
                        "TableReady",
                        Some(false),
                        "InvalidSpec",
                        e.to_string(),
                    ),
                );
            }
        };
        let path = match self.database(&spec.server_name) {
            Ok(path) => path,
            Err(e) => return Ok(Response::failed(e)),
        };
        let extension = request.extension(EXTENSION);
        let wanted = match indexes(extension, &table) {
            Ok(wanted) => wanted,
            Err(e) => {
                return Ok(
                    Response::failed(format!("invalid extension, nothing changed: {e}")).condition(
                        "TableReady",
                        Some(false),
                        "InvalidExtension",
                        e,
                    ),
                );
            }
        };
        let (db, t) = (path.clone(), table.clone());
        let applied = tokio::task::spawn_blocking(move || apply(&db, &t, &wanted)).await??;
        let summary = applied.summary();
        // The message says how the table is, the same on every reconcile
        // of an unchanged table (it is the `Reconciled` condition's, and a
        // message that changed each time would be a status write each
        // time); what was done goes in the Event.
        let mut response = Response::ok()
            .message(format!(
                "table {} in {}: {} columns",
                table.name,
                path.display(),
                table.columns.len()
            ))
            .status(json!({
                "table": table.name,
                "database": path.display().to_string(),
                "columns": table.columns.len(),
                "rows": applied.rows,
            }))
            .condition(
                "TableReady",
                Some(true),
                "UpToDate",
                format!("{} columns", table.columns.len()),
            );
        if applied.created {
            response = response.event(
                "TableCreated",
                format!("table {} in {}: {summary}", table.name, path.display()),
            );
        } else if applied.changed() {
            response = response.event("TableAltered", format!("table {}: {summary}", table.name));
        }
        if let Some(extension) = extension {
            response = response.extension_status(
                extension,
                json!({"table": table.name, "indexes": applied.indexes}),
            );
        }
        Ok(response)
    }

    async fn finalize(&self, request: Request) -> Result<Response, BoxError> {
        let spec: TableSpec = request.spec()?;
        let table = request.name().replace('-', "_");
        if spec.deletion_policy == DeletionPolicy::Retain || !is_identifier(&table) {
            return Ok(Response::ok().message(format!("deletionPolicy Retain: table {table} kept")));
        }
        let path = self.database(&spec.server_name)?;
        tokio::task::spawn_blocking(move || drop_table(&path, &table)).await??;
        Ok(Response::ok().message("deletionPolicy Delete: table dropped"))
    }
}

#[cfg(test)]
mod tests {
    use kplug_sidecar::Operation;

    use super::*;

    fn table(name: &str, columns: Value) -> Value {
        json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"serverName": "main", "columns": columns},
        })
    }

    async fn verdict(object: Value) -> Value {
        let request =
            AdmissionRequest::from_json("SQLite", Operation::Create, object, None).unwrap();
        SqlitePlugin::new("/nonexistent")
            .validate(request)
            .await
            .unwrap()
            .to_json()
    }

    #[tokio::test]
    async fn unknown_column_types_are_refused_at_their_field_with_the_allowed_types() {
        let v = verdict(table(
            "users",
            json!([{"name": "id", "type": "int64"}, {"name": "name", "type": "varchar2"}, {"name": "x", "type": "blob"}]),
        ))
        .await;
        assert_eq!(v["allowed"], false);
        let errors = v["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 2, "{v}");
        assert_eq!(errors[0]["path"], "spec.columns[1].type");
        assert_eq!(errors[0]["value"], "\"varchar2\"");
        let message = errors[0]["message"].as_str().unwrap();
        assert!(
            message.contains("int32, int64, uint64, string, bool, float64, timestamp"),
            "{message}"
        );
        assert_eq!(errors[1]["path"], "spec.columns[2].type");
    }

    #[tokio::test]
    async fn other_problems_are_refused_at_their_field_and_good_specs_allowed() {
        let v = verdict(table(
            "users",
            json!([{"name": "id", "type": "int64"}, {"name": "id", "type": "string"}]),
        ))
        .await;
        assert_eq!(v["errors"][0]["path"], "spec.columns[1].name", "{v}");
        let v = verdict(table("users", json!([{"name": "Bad", "type": "int64"}]))).await;
        assert_eq!(v["errors"][0]["path"], "spec.columns[0].name", "{v}");
        let v = verdict(table("users", json!([]))).await;
        assert_eq!(v["errors"][0]["path"], "spec.columns", "{v}");
        let v = verdict(table("users", json!([{"name": "id", "type": "int64"}]))).await;
        assert_eq!(v["allowed"], true, "{v}");
        // Extensions are the reconcile's to check.
        let mut ext = table("users", json!([]));
        ext["kind"] = json!("DatabaseTableSqliteExtension");
        assert_eq!(verdict(ext).await["allowed"], true);
    }
}

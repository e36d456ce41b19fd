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

mod admission;
mod indexes;
mod schema;

use std::path::{Path, PathBuf};

use database_table_model::{DeletionPolicy, Table, TableSpec, is_identifier, validate};
use kplug_sidecar::{
    AdmissionRequest, BoxError, Object, Offer, Plugin, PluginInfo, Request, Response, Validation,
};
use serde_json::json;

pub use admission::field_errors;
pub use indexes::{index_name, indexes, managed_indexes};
pub use schema::{Applied, apply, drop_table};

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
        Ok(reconciled(&table, &path, &applied, extension))
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

/// The answer to a reconcile that brought `table` to its spec.
fn reconciled(
    table: &Table,
    path: &Path,
    applied: &Applied,
    extension: Option<&Object>,
) -> Response {
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
    response
}

#[cfg(test)]
mod tests {
    use kplug_sidecar::Operation;
    use serde_json::Value;

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

//! A kplug plugin that keeps `DatabaseTable` resources as MariaDB tables and
//! honours `DatabaseTableMariaDbExtension.spec.storageEngine`.
//!
//! # Configuration (no Kubernetes credentials needed)
//! `spec.serverName` is looked up in a JSON object mapping server names to
//! DSNs (`mysql://user:password@host:port/database`), read from the file in
//! `KPLUG_MARIADB_SERVERS_FILE` or from `KPLUG_MARIADB_SERVERS` itself.
//!
//! # Column types
//! | spec type | MariaDB type |
//! |---|---|
//! | int32 | `INT` |
//! | int64 | `BIGINT` |
//! | uint64 | `BIGINT UNSIGNED` |
//! | string | `TEXT` |
//! | bool | `BOOLEAN` (`TINYINT(1)`) |
//! | float64 | `DOUBLE` |
//! | timestamp | `DATETIME(6)` |
//!
//! # Defaults
//! At admission (`Default`), a `DatabaseTableMariaDbExtension` without a
//! `spec.storageEngine` gets [`DEFAULT_ENGINE`], so the object says which
//! engine its table is created with (`kubectl get` shows it in the Engine
//! column). The CRD sets no default of its own: the engine is the plugin's
//! to choose.
//!
//! # Guarantees
//! MariaDB DDL is not transactional, so the whole spec (types, names, the
//! engine being available) is checked first, and all changes to an existing
//! table go into **one** `ALTER TABLE`, which MariaDB applies completely or
//! not at all.

mod table;

use std::collections::HashMap;
use std::sync::Mutex;

use database_table_model::{ColumnType, DeletionPolicy, TableSpec, is_identifier, validate};
use kplug_sidecar::{
    AdmissionRequest, BoxError, Defaults, Object, Offer, Plugin, PluginInfo, Request, Response,
};
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, Pool};
use serde_json::{Value, json};

/// The extension kind this plugin reads.
pub const EXTENSION: &str = "DatabaseTableMariaDbExtension";

/// The storage engine of a table whose extension names none (or that has
/// no extension).
pub const DEFAULT_ENGINE: &str = "InnoDB";

/// The defaults of an object at admission: [`DEFAULT_ENGINE`] for a
/// `DatabaseTableMariaDbExtension` that names no engine; nothing for
/// anything else.
pub fn defaults_of(kind: &str, spec: &Value) -> Defaults {
    if kind != EXTENSION {
        return Defaults::none();
    }
    match spec.get("storageEngine") {
        Some(Value::String(engine)) if !engine.is_empty() => Defaults::none(),
        _ if spec.is_object() => Defaults::none().add("/spec/storageEngine", DEFAULT_ENGINE),
        // No spec at all: add one.
        _ => Defaults::none().add("/spec", json!({"storageEngine": DEFAULT_ENGINE})),
    }
}

/// How the plugin describes itself.
pub fn info() -> PluginInfo {
    PluginInfo::new("mariadb", env!("CARGO_PKG_VERSION"))
        .description(
            "DatabaseTable on MariaDB, with the storage engine from DatabaseTableMariaDbExtension",
        )
        .offer(
            Offer::new("myorg.org", "DatabaseTable", "MariaDB").extension("myorg.org", EXTENSION),
        )
}

/// The plugin: server name → DSN, and a connection pool per server.
#[derive(Debug, Default)]
pub struct MariaDbPlugin {
    servers: HashMap<String, String>,
    pools: Mutex<HashMap<String, Pool>>,
}

/// Reads the server map from `KPLUG_MARIADB_SERVERS_FILE` or
/// `KPLUG_MARIADB_SERVERS`.
///
/// # Errors
/// A message naming the variable or file and what is wrong.
pub fn servers_from_env() -> Result<HashMap<String, String>, String> {
    let (source, text) = if let Ok(path) = std::env::var("KPLUG_MARIADB_SERVERS_FILE") {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("KPLUG_MARIADB_SERVERS_FILE={path}: {e}"))?;
        (path, text)
    } else if let Ok(text) = std::env::var("KPLUG_MARIADB_SERVERS") {
        ("KPLUG_MARIADB_SERVERS".to_owned(), text)
    } else {
        return Ok(HashMap::new());
    };
    serde_json::from_str(&text)
        .map_err(|e| format!("{source}: expected a JSON object of serverName → DSN: {e}"))
}

fn quote(ident: &str) -> String {
    format!("`{}`", ident.replace('`', "``"))
}

fn sql_type(t: ColumnType) -> &'static str {
    match t {
        ColumnType::Int32 => "INT",
        ColumnType::Int64 => "BIGINT",
        ColumnType::Uint64 => "BIGINT UNSIGNED",
        ColumnType::String => "TEXT",
        ColumnType::Bool => "BOOLEAN",
        ColumnType::Float64 => "DOUBLE",
        ColumnType::Timestamp => "DATETIME(6)",
    }
}

/// Whether MariaDB's `COLUMN_TYPE` (e.g. `bigint(20) unsigned`) already is
/// the portable type `t`. Integer display widths are ignored, except for
/// `tinyint(1)`, which is how MariaDB spells BOOLEAN.
pub fn matches(column_type: &str, t: ColumnType) -> bool {
    let ct = column_type.to_ascii_lowercase();
    let without_width = |prefix: &str| -> Option<String> {
        let rest = ct.strip_prefix(prefix)?.strip_prefix('(')?;
        let close = rest.find(')')?;
        rest[..close]
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| format!("{prefix}{}", &rest[close + 1..]))
    };
    let norm = without_width("bigint")
        .or_else(|| without_width("int"))
        .unwrap_or_else(|| ct.clone());
    match t {
        ColumnType::Int32 => norm == "int",
        ColumnType::Int64 => norm == "bigint",
        ColumnType::Uint64 => norm == "bigint unsigned",
        ColumnType::String => norm == "text",
        ColumnType::Bool => ct == "tinyint(1)",
        ColumnType::Float64 => norm == "double",
        ColumnType::Timestamp => norm == "datetime(6)",
    }
}

impl MariaDbPlugin {
    /// A plugin for these servers (name → DSN).
    pub fn new(servers: HashMap<String, String>) -> Self {
        Self {
            servers,
            pools: Mutex::default(),
        }
    }

    fn pool(&self, server: &str) -> Result<Pool, String> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = pools.get(server) {
            return Ok(pool.clone());
        }
        let dsn = self.servers.get(server).ok_or_else(|| {
            let known: Vec<_> = self.servers.keys().cloned().collect();
            format!(
                "unknown serverName {server:?}: not in KPLUG_MARIADB_SERVERS(_FILE) (known: {}); add it to the plugin's configuration",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )
        })?;
        let opts = Opts::from_url(dsn).map_err(|e| format!("server {server}: bad DSN: {e}"))?;
        let pool = Pool::new(opts);
        pools.insert(server.to_owned(), pool.clone());
        Ok(pool)
    }
}

/// The storage engine `extension` asks for (else [`DEFAULT_ENGINE`]), or
/// why a name is not an engine's.
fn storage_engine(extension: Option<&Object>) -> Result<String, String> {
    let engine = extension
        .and_then(|e| e.spec().get("storageEngine"))
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
        .unwrap_or(DEFAULT_ENGINE)
        .to_owned();
    if !engine
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!(
            "storageEngine {engine:?} is not a valid engine name"
        ));
    }
    Ok(engine)
}

impl Plugin for MariaDbPlugin {
    /// Fills in the storage engine (see [`defaults_of`]).
    async fn defaults(&self, request: AdmissionRequest) -> Result<Defaults, BoxError> {
        let object = request.object();
        Ok(defaults_of(object.kind(), object.spec()))
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
        let extension = request.extension(EXTENSION);
        let engine = match storage_engine(extension) {
            Ok(engine) => engine,
            Err(message) => return Ok(Response::failed(message)),
        };
        let server = &spec.server_name;
        let pool = self.pool(server)?;
        let mut conn = pool
            .get_conn()
            .await
            .map_err(|e| format!("server {server}: cannot connect: {e}"))?;
        if let Some(refusal) = table::engine_refusal(&mut conn, &engine, server).await? {
            return Ok(refusal);
        }
        let response = table::create_or_alter(&mut conn, &table, &engine, server).await?;
        table::reconciled(&mut conn, response, &table, server, extension).await
    }

    async fn finalize(&self, request: Request) -> Result<Response, BoxError> {
        let spec: TableSpec = request.spec()?;
        let table = request.name().replace('-', "_");
        if spec.deletion_policy == DeletionPolicy::Retain || !is_identifier(&table) {
            return Ok(Response::ok().message(format!("deletionPolicy Retain: table {table} kept")));
        }
        let mut conn = self.pool(&spec.server_name)?.get_conn().await?;
        conn.query_drop(format!("DROP TABLE IF EXISTS {}", quote(&table)))
            .await?;
        Ok(Response::ok().message(format!("deletionPolicy Delete: table {table} dropped")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_types_match_what_mariadb_reports() {
        assert!(matches("int(11)", ColumnType::Int32));
        assert!(matches("int", ColumnType::Int32));
        assert!(matches("bigint(20)", ColumnType::Int64));
        assert!(matches("bigint(20) unsigned", ColumnType::Uint64));
        assert!(!matches("bigint(20) unsigned", ColumnType::Int64));
        assert!(matches("tinyint(1)", ColumnType::Bool));
        assert!(!matches("tinyint(4)", ColumnType::Bool));
        assert!(matches("text", ColumnType::String));
        assert!(matches("double", ColumnType::Float64));
        assert!(matches("datetime(6)", ColumnType::Timestamp));
        assert!(!matches("int(11)", ColumnType::String));
    }

    #[test]
    fn the_engine_is_defaulted_on_the_extension_only() {
        let patch = |kind: &str, spec: Value| defaults_of(kind, &spec).to_json()["patch"].clone();
        assert_eq!(
            patch(EXTENSION, json!({})),
            json!([{"op": "add", "path": "/spec/storageEngine", "value": "InnoDB"}])
        );
        assert_eq!(
            patch(EXTENSION, json!({"storageEngine": ""})),
            json!([{"op": "add", "path": "/spec/storageEngine", "value": "InnoDB"}])
        );
        assert_eq!(
            patch(EXTENSION, Value::Null),
            json!([{"op": "add", "path": "/spec", "value": {"storageEngine": "InnoDB"}}])
        );
        assert!(defaults_of(EXTENSION, &json!({"storageEngine": "Aria"})).is_empty());
        assert!(defaults_of("DatabaseTable", &json!({})).is_empty());
    }
}

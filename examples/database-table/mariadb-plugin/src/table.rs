//! A table brought to its spec on a MariaDB server: created, or altered in
//! one statement (see the crate's Guarantees).

use std::collections::BTreeMap;

use database_table_model::{Table, plan};
use kplug_sidecar::{BoxError, Object, Response};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use serde_json::json;

use super::{matches, quote, sql_type};

/// The answer refusing `engine` when `server` does not have it, naming the
/// engines it has; `None` when it does.
pub(crate) async fn engine_refusal(
    conn: &mut Conn,
    engine: &str,
    server: &str,
) -> Result<Option<Response>, BoxError> {
    let support: Option<String> = conn
        .exec_first(
            "SELECT SUPPORT FROM information_schema.ENGINES WHERE UPPER(ENGINE) = UPPER(?)",
            (engine,),
        )
        .await?;
    if matches!(support.as_deref(), Some("YES" | "DEFAULT")) {
        return Ok(None);
    }
    let available: Vec<String> =
        conn.query("SELECT ENGINE FROM information_schema.ENGINES WHERE SUPPORT IN ('YES', 'DEFAULT') ORDER BY ENGINE").await?;
    Ok(Some(Response::failed(format!(
        "storage engine {engine} is not available on server {server} (available: {}); nothing changed",
        available.join(", ")
    ))))
}

/// Creates `table` with `engine`, or alters the existing one to the spec:
/// an OK answer with an Event saying what changed, if anything did.
pub(crate) async fn create_or_alter(
    conn: &mut Conn,
    table: &Table,
    engine: &str,
    server: &str,
) -> Result<Response, BoxError> {
    let existing: BTreeMap<String, String> = conn
        .exec::<(String, String), _, _>(
            "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            (table.name.as_str(),),
        )
        .await?
        .into_iter()
        .collect();
    let name = quote(&table.name);
    let response = Response::ok();
    if !existing.is_empty() {
        return alter(conn, table, engine, &existing, response).await;
    }
    let columns: Vec<String> = table
        .columns
        .iter()
        .map(|(n, t)| format!("{} {}", quote(n), sql_type(*t)))
        .collect();
    conn.query_drop(format!(
        "CREATE TABLE {name} ({}) ENGINE={engine}",
        columns.join(", ")
    ))
    .await?;
    Ok(response.event(
        "TableCreated",
        format!("created table {} ({engine}) on {server}", table.name),
    ))
}

/// Alters the existing `table` (its columns `existing`) to the spec and to
/// `engine`, in one statement.
async fn alter(
    conn: &mut Conn,
    table: &Table,
    engine: &str,
    existing: &BTreeMap<String, String>,
    mut response: Response,
) -> Result<Response, BoxError> {
    let plan = plan(existing, table, matches);
    let current_engine: Option<String> = conn
        .exec_first("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", (table.name.as_str(),))
        .await?;
    let engine_changes = !current_engine
        .as_deref()
        .is_some_and(|c| c.eq_ignore_ascii_case(engine));
    let mut clauses: Vec<String> = Vec::new();
    clauses.extend(
        plan.add
            .iter()
            .map(|(n, t)| format!("ADD COLUMN {} {}", quote(n), sql_type(*t))),
    );
    clauses.extend(
        plan.retype
            .iter()
            .map(|(n, _, t)| format!("MODIFY COLUMN {} {}", quote(n), sql_type(*t))),
    );
    clauses.extend(
        plan.drop
            .iter()
            .map(|n| format!("DROP COLUMN {}", quote(n))),
    );
    if engine_changes {
        clauses.push(format!("ENGINE={engine}"));
    }
    let mut parts = vec![plan.summary()];
    if engine_changes {
        parts.push(format!(
            "engine {} → {engine}",
            current_engine.unwrap_or_default()
        ));
    }
    let summary = parts.join(", ");
    if !clauses.is_empty() {
        // One statement: MariaDB applies it completely or not at all.
        let name = quote(&table.name);
        conn.query_drop(format!("ALTER TABLE {name} {}", clauses.join(", ")))
            .await?;
        response = response.event("TableAltered", format!("table {}: {summary}", table.name));
    }
    Ok(response)
}

/// `response` with how the table is now: its message, status and
/// condition, and the extension's status.
pub(crate) async fn reconciled(
    conn: &mut Conn,
    response: Response,
    table: &Table,
    server: &str,
    extension: Option<&Object>,
) -> Result<Response, BoxError> {
    let name = quote(&table.name);
    let rows: Option<i64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {name}"))
        .await?;
    let actual_engine: Option<String> = conn
        .exec_first("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", (table.name.as_str(),))
        .await?;
    let rows = rows.unwrap_or(0);
    // The message says how the table is, not what this call did (that
    // is the Event's): the same answer on every reconcile of an
    // unchanged table is no status write.
    let state = format!(
        "table {} on {}: {} columns, engine {}",
        table.name,
        server,
        table.columns.len(),
        actual_engine.as_deref().unwrap_or_default()
    );
    let mut response = response
        .message(state)
        .status(json!({"table": table.name, "server": server, "columns": table.columns.len(), "rows": rows}))
        .condition("TableReady", Some(true), "UpToDate", format!("{} columns, engine {}", table.columns.len(), actual_engine.clone().unwrap_or_default()));
    if let Some(extension) = extension {
        response = response.extension_status(
            extension,
            json!({"storageEngine": actual_engine, "rows": rows}),
        );
    }
    Ok(response)
}

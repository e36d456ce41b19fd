//! A shell plugin with the real operator on the real control plane:
//! `examples/database-table/sqlite-shell-plugin`, shell scripts run by
//! kplug-exec, keeps a `DatabaseTable` in a SQLite file with the sqlite3
//! tool: creates it with its index, adds a column, refuses a retype on the
//! resource's conditions, and drops the table on delete; its hooks back
//! the file up before a change of columns (sync-enforce: no backup, no
//! change) and append to an audit log after each reconcile (async).
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::path::Path;
use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

const T: Duration = Duration::from_secs(60);

/// The table's columns in `db`: name and declared type, in order.
fn columns_in(db: &Path, table: &str) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, type FROM pragma_table_info(?1)")
        .unwrap();
    stmt.query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The names of the table's indexes in `db`.
fn indexes_in(db: &Path, table: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1 ORDER BY name",
        )
        .unwrap();
    stmt.query_map([table], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn pairs(columns: &[(&str, &str)]) -> Vec<(String, String)> {
    columns
        .iter()
        .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
        .collect()
}

fn spec_columns(columns: &[(&str, &str)]) -> Value {
    columns
        .iter()
        .map(|(n, t)| json!({"name": n, "type": t}))
        .collect()
}

async fn set_columns(w: &World, columns: &[(&str, &str)]) {
    set_columns_of(w, "orders", columns).await;
}

async fn set_columns_of(w: &World, table: &str, columns: &[(&str, &str)]) {
    w.tables()
        .patch(
            table,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"columns": spec_columns(columns)}})),
        )
        .await
        .unwrap();
}

/// Ready on SQLiteShell, at the table's current generation.
fn ready_on_shell(t: &DynamicObject) -> Result<(), String> {
    expect_condition(t, "Ready", "True", "Reconciled")?;
    let generation = t.metadata.generation;
    let observed = t
        .data
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    if observed != generation {
        return Err(format!(
            "observedGeneration {observed:?}, generation {generation:?}"
        ));
    }
    match t.data.pointer("/status/implementation") {
        Some(found) if found == "SQLiteShell" => Ok(()),
        found => Err(format!("implementation is {found:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_plugin_keeps_a_table_in_sqlite() {
    let w = world("sqlite-sh", &[]).await;
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("shop.db");
    let _plugin = spawn_shell_plugin(&w, data.path());

    w.create(
        &sqlite_ext_resource(),
        json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableSqliteExtension",
            "metadata": {"name": "orders"}, "spec": {"indexes": ["customer"]},
        }),
    )
    .await;
    w.create(
        &table_resource(),
        json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": "orders"},
            "spec": {
                "serverName": "shop", "preferredImplementation": "SQLiteShell", "deletionPolicy": "Delete",
                "columns": spec_columns(&[("id", "uint64"), ("customer", "string")]),
                "extensions": [{"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableSqliteExtension", "name": "orders"}],
            },
        }),
    )
    .await;

    // Created, with the index the extension asks for.
    let table = w
        .table_until("orders", "Ready on SQLiteShell", T, ready_on_shell)
        .await;
    assert_eq!(
        table.data.pointer("/status/plugin"),
        Some(&json!("sqlite-sh"))
    );
    assert_eq!(table.data.pointer("/status/columns"), Some(&json!(2)));
    assert_eq!(table.data.pointer("/status/rows"), Some(&json!(0)));
    assert_eq!(
        condition(&table, "TableReady").map(|(s, r, _)| (s, r)),
        Some(("True".into(), "UpToDate".into()))
    );
    assert_eq!(
        columns_in(&db, "orders"),
        pairs(&[("id", "UNSIGNED BIGINT"), ("customer", "TEXT")])
    );
    assert_eq!(indexes_in(&db, "orders"), ["kplug_sh_ix_orders_customer"]);
    let extension = w.api(&sqlite_ext_resource()).get("orders").await.unwrap();
    assert_eq!(
        extension.data.pointer("/status"),
        Some(&json!({"table": "orders", "indexes": ["customer"]}))
    );
    kplug_testenv::eventually("the TableCreated Event", T, || async {
        let events = w.events_for("orders").await;
        events
            .iter()
            .any(|(kind, reason, _)| kind == "Normal" && reason == "TableCreated")
            .then_some(())
            .ok_or(format!("{events:?}"))
    })
    .await;

    // A column added.
    set_columns(
        &w,
        &[
            ("id", "uint64"),
            ("customer", "string"),
            ("total", "float64"),
        ],
    )
    .await;
    w.table_until("orders", "Ready with three columns", T, ready_on_shell)
        .await;
    assert_eq!(
        columns_in(&db, "orders"),
        pairs(&[
            ("id", "UNSIGNED BIGINT"),
            ("customer", "TEXT"),
            ("total", "DOUBLE")
        ])
    );

    // A retype is refused on the resource, and nothing changes.
    set_columns(
        &w,
        &[
            ("id", "uint64"),
            ("customer", "int64"),
            ("total", "float64"),
        ],
    )
    .await;
    let refused = w
        .table_until("orders", "the retype refused", T, |t| {
            match condition(t, "TableReady") {
                Some((status, reason, _)) if status == "False" && reason == "Unsupported" => Ok(()),
                other => Err(format!("TableReady is {other:?}")),
            }
        })
        .await;
    let (_, _, message) = condition(&refused, "TableReady").unwrap();
    assert!(
        message.contains("column customer is TEXT") && message.contains("does not retype"),
        "{message}"
    );
    expect_condition(&refused, "Reconciled", "False", "PluginFailed").unwrap();
    assert_eq!(
        columns_in(&db, "orders")[1],
        pairs(&[("customer", "TEXT")])[0]
    );

    // Deleted: Finalize drops the table (deletionPolicy Delete).
    w.tables()
        .delete("orders", &DeleteParams::default())
        .await
        .unwrap();
    w.until_gone(&table_resource(), "orders", T).await;
    assert!(
        columns_in(&db, "orders").is_empty(),
        "the table was not dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_plugins_hooks_back_up_before_a_change_and_audit_after() {
    let w = world("sqlite-sh-hooks", &[]).await;
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("books.db");
    let backups = data.path().join("backups");
    let audit = data.path().join("audit.log");
    let _plugin = spawn_shell_plugin(&w, data.path());
    let two = [("id", "uint64"), ("amount", "float64")];
    w.create(
        &table_resource(),
        json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": "ledger"},
            "spec": {
                "serverName": "books", "preferredImplementation": "SQLiteShell", "deletionPolicy": "Delete",
                "columns": spec_columns(&two),
            },
        }),
    )
    .await;
    w.table_until("ledger", "Ready on SQLiteShell", T, ready_on_shell)
        .await;
    // A new table: nothing to back up.
    assert!(!backups.exists(), "a backup of a table that did not exist");

    // A change of columns: the file is backed up first, with the old ones.
    let three = [("id", "uint64"), ("amount", "float64"), ("note", "string")];
    set_columns_of(&w, "ledger", &three).await;
    let table = w
        .table_until("ledger", "Ready with three columns", T, ready_on_shell)
        .await;
    assert_eq!(columns_in(&db, "ledger").len(), 3);
    let backup = table
        .data
        .pointer("/status/hooks/sqlite-sh/backup/lastBackup")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("the backup hook's status: {}", table.data["status"]))
        .to_owned();
    assert!(
        Path::new(&backup).starts_with(backups.join("books").join("ledger")),
        "{backup}"
    );
    assert_eq!(
        columns_in(Path::new(&backup), "ledger"),
        pairs(&[("id", "UNSIGNED BIGINT"), ("amount", "DOUBLE")]),
        "the backup holds the table as it was"
    );
    // The implementation's own status is still there, next to the hook's.
    assert_eq!(table.data.pointer("/status/columns"), Some(&json!(3)));
    w.until_events("ledger", "the backup hook's Event", |events| {
        events
            .iter()
            .any(|(kind, reason, _)| kind == "Normal" && reason == "TableBackedUp")
    })
    .await;

    // No backup, no change: with the backups directory unusable (a file in
    // its place), the hook fails and the columns stay.
    std::fs::remove_dir_all(&backups).unwrap();
    std::fs::write(&backups, "not a directory").unwrap();
    let four = [
        ("id", "uint64"),
        ("amount", "float64"),
        ("note", "string"),
        ("booked", "int64"),
    ];
    set_columns_of(&w, "ledger", &four).await;
    let stopped = w
        .table_until("ledger", "the backup hook stops the change", T, |t| {
            expect_condition(t, "Reconciled", "False", "HookFailed")
        })
        .await;
    let (_, _, message) = condition(&stopped, "Reconciled").unwrap();
    assert!(
        message.contains("hook backup of plugin sqlite-sh")
            && message.contains("before-reconcile, sync-enforce")
            && message.contains("SQLiteShell was not called"),
        "{message}"
    );
    assert_eq!(columns_in(&db, "ledger").len(), 3, "the columns stayed");
    // Fixed, the retry (with backoff) backs up and changes the table.
    std::fs::remove_file(&backups).unwrap();
    w.table_until("ledger", "Ready with four columns", T, ready_on_shell)
        .await;
    assert_eq!(columns_in(&db, "ledger").len(), 4);

    // The async audit hook logged the reconciles, generation by generation.
    let ns_name = format!("{}/ledger", w.ns);
    kplug_testenv::eventually("audit lines for each generation", T, || async {
        let log = std::fs::read_to_string(&audit).unwrap_or_default();
        let generations: Vec<&str> = log
            .lines()
            .filter_map(|l| {
                let fields: Vec<&str> = l.split('\t').collect();
                (fields.get(1) == Some(&ns_name.as_str())).then(|| fields[2])
            })
            .collect();
        ["1", "2", "3"]
            .iter()
            .all(|g| generations.contains(g))
            .then_some(())
            .ok_or(log)
    })
    .await;
}

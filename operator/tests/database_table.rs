//! The walkthrough for real: the generic operator, the example plugins
//! (MariaDB in Rust, PostgreSQL in Python, SQLite in Rust) as real processes
//! on one socket dir, real MariaDB and PostgreSQL servers
//! (`examples/database-table/dev/databases.sh`), a real kube-apiserver.
//! Every database effect is checked by querying the database itself.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::process::Stdio;
use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;
use tokio::process::{Child, Command};

const T: Duration = Duration::from_secs(45);

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| {
        panic!(
            "{key} is not set: start the databases with `examples/database-table/dev/databases.sh start` and \
             `eval \"$(examples/database-table/dev/databases.sh env)\"` (make test does this)"
        )
    })
}

/// A table name no earlier run used (the databases outlive test runs).
fn unique(prefix: &str) -> String {
    use std::hash::{BuildHasher, RandomState};
    format!(
        "{prefix}-{:08x}",
        RandomState::new().hash_one(std::time::SystemTime::now()) as u32
    )
}

fn plugin_process(
    w: &World,
    program: &std::path::Path,
    args: &[&str],
    envs: &[(&str, String)],
) -> Child {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("KPLUG_SOCKET_DIR", w.sockets.path())
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", program.display()))
}

/// The SQLite plugin, keeping its files in `data`.
fn sqlite_plugin(w: &World, data: &std::path::Path) -> Child {
    plugin_process(
        w,
        &kplug_testenv::workspace_binary("sqlite-plugin"),
        &["--data-dir", data.to_str().unwrap()],
        &[],
    )
}

/// Runs one query with the database's own command-line client; one row per
/// line, tab-separated.
async fn sql(client: &str, query: &str) -> String {
    let output = match client {
        "psql" => {
            Command::new("psql")
                .arg(env("KPLUG_POSTGRES_DSN"))
                .args(["-tAX", "-F", "\t", "-c", query])
                .output()
                .await
        }
        _ => {
            // mysql://user:password@host:port/database
            let dsn = env("KPLUG_MARIADB_DSN");
            let rest = dsn.trim_start_matches("mysql://");
            let (creds, location) = rest.split_once('@').unwrap();
            let (user, password) = creds.split_once(':').unwrap();
            let (hostport, database) = location.split_once('/').unwrap();
            let (host, port) = hostport.split_once(':').unwrap();
            Command::new("mariadb")
                .args([
                    "-h",
                    host,
                    "-P",
                    port,
                    "-u",
                    user,
                    &format!("-p{password}"),
                    "-N",
                    "-B",
                    database,
                    "-e",
                    query,
                ])
                .output()
                .await
        }
    }
    .unwrap_or_else(|e| panic!("run {client}: {e}"));
    assert!(
        output.status.success(),
        "{client} {query}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

async fn table_until_db(what: &str, client: &str, query: String, want: &str) {
    kplug_testenv::eventually(what, T, || {
        let query = query.clone();
        async move {
            let got = sql(client, &query).await;
            if got == want {
                Ok(())
            } else {
                Err(format!("{query} -> {got:?}, want {want:?}"))
            }
        }
    })
    .await;
}

fn columns(c: &[(&str, &str)]) -> Value {
    c.iter()
        .map(|(n, t)| json!({"name": n, "type": t}))
        .collect()
}

async fn create_table(
    w: &World,
    name: &str,
    preferred: &str,
    policy: &str,
    cols: Value,
    ext_kind: &str,
    ext_spec: Value,
) {
    let ar = if ext_kind == "DatabaseTableMariaDbExtension" {
        maria_ext_resource()
    } else {
        pg_ext_resource()
    };
    w.create(&ar, json!({"apiVersion": "myorg.org/v1alpha1", "kind": ext_kind, "metadata": {"name": name}, "spec": ext_spec})).await;
    w.create(&table_resource(), json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
        "metadata": {"name": name},
        "spec": {
            "serverName": "authorization-cluster", "preferredImplementation": preferred, "deletionPolicy": policy,
            "columns": cols,
            "extensions": [{"apiVersion": "myorg.org/v1alpha1", "kind": ext_kind, "name": name}],
        },
    }))
    .await;
}

async fn set_columns(w: &World, name: &str, cols: Value) {
    w.tables()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"columns": cols}})),
        )
        .await
        .unwrap();
}

async fn delete_and_wait(w: &World, name: &str) {
    w.tables()
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    w.until_gone(&table_resource(), name, T).await;
}

fn ready(t: &kube::api::DynamicObject) -> Result<(), String> {
    expect_condition(t, "Ready", "True", "Reconciled")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_columns_storage_engine_status_and_deletion_policies() {
    let w = world("mariadb", &[]).await;
    let servers = json!({"authorization-cluster": env("KPLUG_MARIADB_DSN")}).to_string();
    let _plugin = plugin_process(
        &w,
        &kplug_testenv::workspace_binary("mariadb-plugin"),
        &[],
        &[("KPLUG_MARIADB_SERVERS", servers)],
    );
    let name = unique("users");
    let table = name.replace('-', "_");
    create_table(
        &w,
        &name,
        "MariaDB",
        "Delete",
        columns(&[("id", "uint64"), ("name", "string")]),
        "DatabaseTableMariaDbExtension",
        json!({"storageEngine": "InnoDB"}),
    )
    .await;

    let obj = w.table_until(&name, "Ready on MariaDB", T, ready).await;
    assert_eq!(
        obj.data.pointer("/status/implementation"),
        Some(&json!("MariaDB"))
    );
    assert_eq!(obj.data.pointer("/status/columns"), Some(&json!(2)));
    let columns_query = format!(
        "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION"
    );
    let engine_query = format!(
        "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}'"
    );
    assert_eq!(
        sql("mariadb", &columns_query).await,
        "id\tbigint(20) unsigned\nname\ttext"
    );
    assert_eq!(sql("mariadb", &engine_query).await, "InnoDB");
    let ext = w.api(&maria_ext_resource()).get(&name).await.unwrap();
    assert_eq!(
        ext.data.pointer("/status/storageEngine"),
        Some(&json!("InnoDB"))
    );

    // Add, drop and retype columns through the resource.
    set_columns(
        &w,
        &name,
        columns(&[("id", "int64"), ("email", "string"), ("active", "bool")]),
    )
    .await;
    table_until_db(
        "columns follow the spec",
        "mariadb",
        columns_query.clone(),
        "id\tbigint(20)\nemail\ttext\nactive\ttinyint(1)",
    )
    .await;

    // The storage engine follows the extension.
    w.api(&maria_ext_resource())
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageEngine": "Aria"}})),
        )
        .await
        .unwrap();
    table_until_db(
        "the engine follows the extension",
        "mariadb",
        engine_query.clone(),
        "Aria",
    )
    .await;
    kplug_testenv::eventually("the extension reports Aria", T, || async {
        let ext = w
            .api(&maria_ext_resource())
            .get(&name)
            .await
            .map_err(|e| e.to_string())?;
        (ext.data.pointer("/status/storageEngine") == Some(&json!("Aria")))
            .then_some(())
            .ok_or(format!("{:?}", ext.data.get("status")))
    })
    .await;

    // An unknown type: a clear condition, and the table is untouched.
    set_columns(&w, &name, columns(&[("id", "int64"), ("money", "decimal")])).await;
    let failed = w
        .table_until(&name, "Reconciled=False for the unknown type", T, |t| {
            expect_condition(t, "Reconciled", "False", "PluginFailed")
        })
        .await;
    let (_, _, message) = condition(&failed, "Reconciled").unwrap();
    assert!(
        message.contains("\"money\" has unknown type \"decimal\""),
        "{message}"
    );
    assert_eq!(
        sql("mariadb", &columns_query).await,
        "id\tbigint(20)\nemail\ttext\nactive\ttinyint(1)"
    );

    // deletionPolicy Delete drops the table; Retain keeps it.
    delete_and_wait(&w, &name).await;
    assert_eq!(
        sql("mariadb", &engine_query).await,
        "",
        "Delete drops the table"
    );
    let kept = unique("kept");
    create_table(
        &w,
        &kept,
        "MariaDB",
        "Retain",
        columns(&[("id", "int32")]),
        "DatabaseTableMariaDbExtension",
        json!({}),
    )
    .await;
    w.table_until(&kept, "kept is Ready", T, ready).await;
    delete_and_wait(&w, &kept).await;
    let kept_table = kept.replace('-', "_");
    assert_eq!(
        sql("mariadb", &format!("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{kept_table}'")).await,
        "1",
        "Retain keeps the table"
    );
    sql("mariadb", &format!("DROP TABLE `{kept_table}`")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_partitions_columns_status_and_deletion_policies() {
    let w = world("postgresql", &[]).await;
    let python = std::env::var("KPLUG_POSTGRES_PLUGIN_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            kplug_testenv::workspace_root()
                .join("examples/database-table/postgresql-plugin/.venv/bin/python")
        });
    assert!(
        python.exists(),
        "{} is missing: run `make -C examples/database-table/postgresql-plugin install`",
        python.display()
    );
    let servers = json!({"authorization-cluster": env("KPLUG_POSTGRES_DSN")}).to_string();
    let _plugin = plugin_process(
        &w,
        &python,
        &["-m", "kplug_postgresql_plugin"],
        &[("KPLUG_POSTGRES_SERVERS", servers)],
    );
    let name = unique("orders");
    let table = name.replace('-', "_");
    create_table(
        &w,
        &name,
        "PostgreSQL",
        "Delete",
        columns(&[("id", "int64"), ("total", "float64")]),
        "DatabaseTablePostgreSqlExtension",
        json!({"partitionBy": "hash", "partitions": 4}),
    )
    .await;

    let obj = w.table_until(&name, "Ready on PostgreSQL", T, ready).await;
    assert_eq!(
        obj.data.pointer("/status/implementation"),
        Some(&json!("PostgreSQL"))
    );
    let columns_query = format!(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '{table}' ORDER BY ordinal_position"
    );
    assert_eq!(
        sql("psql", &columns_query).await,
        "id\tbigint\ntotal\tdouble precision"
    );
    assert_eq!(sql("psql", &format!("SELECT partstrat FROM pg_partitioned_table WHERE partrelid = 'public.{table}'::regclass")).await, "h");
    assert_eq!(
        sql(
            "psql",
            &format!(
                "SELECT count(*) FROM pg_inherits WHERE inhparent = 'public.{table}'::regclass"
            )
        )
        .await,
        "4"
    );
    let ext = w.api(&pg_ext_resource()).get(&name).await.unwrap();
    assert_eq!(ext.data.pointer("/status/partitions"), Some(&json!(4)));
    assert_eq!(
        ext.data.pointer("/status/partitionBy"),
        Some(&json!("hash"))
    );

    set_columns(
        &w,
        &name,
        columns(&[
            ("id", "int64"),
            ("total", "string"),
            ("placed", "timestamp"),
        ]),
    )
    .await;
    table_until_db(
        "columns follow the spec",
        "psql",
        columns_query.clone(),
        "id\tbigint\ntotal\ttext\nplaced\ttimestamp with time zone",
    )
    .await;

    delete_and_wait(&w, &name).await;
    assert_eq!(
        sql(
            "psql",
            &format!("SELECT count(*) FROM pg_class WHERE relname = '{table}'")
        )
        .await,
        "0",
        "Delete drops the table"
    );
    let kept = unique("kept");
    create_table(
        &w,
        &kept,
        "PostgreSQL",
        "Retain",
        columns(&[("id", "int32")]),
        "DatabaseTablePostgreSqlExtension",
        json!({}),
    )
    .await;
    w.table_until(&kept, "kept is Ready", T, ready).await;
    delete_and_wait(&w, &kept).await;
    let kept_table = kept.replace('-', "_");
    assert_eq!(
        sql(
            "psql",
            &format!("SELECT count(*) FROM pg_class WHERE relname = '{kept_table}'")
        )
        .await,
        "1",
        "Retain keeps the table"
    );
    sql("psql", &format!("DROP TABLE public.{kept_table}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_for_the_demo() {
    let w = world("sqlite", &[]).await;
    let data = tempfile::tempdir().unwrap();
    let _plugin = sqlite_plugin(&w, data.path());
    // Prefers MariaDB, which is not there: SQLite it is.
    w.create_users("users", json!({})).await;
    let obj = w.table_until("users", "Ready on SQLite", T, ready).await;
    assert_eq!(
        obj.data.pointer("/status/implementation"),
        Some(&json!("SQLite"))
    );
    assert_eq!(obj.data.pointer("/status/columns"), Some(&json!(2)));
    assert!(data.path().join("authorization-cluster.db").exists());
}

/// Whether SQLite's catalog in `db` lists `table`.
fn sqlite_has_table(db: &std::path::Path, table: &str) -> bool {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        == 1
}

/// Another plugin name offering `SQLite` (sorted before the real one, so
/// it would have won every selection) is refused: the real SQLite plugin
/// keeps the object, and deleting it drops the real table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_offering_sqlite_is_refused_and_the_real_table_is_dropped() {
    let w = world("sqlite-impostor", &[]).await;
    let data = tempfile::tempdir().unwrap();
    let _plugin = sqlite_plugin(&w, data.path());
    w.until_plugin_up("sqlite", T).await;
    let _impostor = spawn_plugin(
        &w,
        &[
            ("SCRIPTED_NAME", "aaa-evil"),
            ("SCRIPTED_IMPLEMENTATION", "SQLite"),
        ],
    );
    w.until_refused("ImplementationOwned", T).await;
    w.create(
        &table_resource(),
        json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": "ledger"},
            "spec": {
                "serverName": "books",
                "preferredImplementation": "SQLite",
                "deletionPolicy": "Delete",
                "columns": [{"name": "id", "type": "int64"}, {"name": "amount", "type": "float64"}],
            },
        }),
    )
    .await;
    let obj = w.table_until("ledger", "Ready on SQLite", T, ready).await;
    assert_eq!(obj.data.pointer("/status/plugin"), Some(&json!("sqlite")));
    let db = data.path().join("books.db");
    assert!(sqlite_has_table(&db, "ledger"), "the real table exists");

    w.tables()
        .delete("ledger", &DeleteParams::default())
        .await
        .unwrap();
    w.until_gone(&table_resource(), "ledger", T).await;
    assert!(
        !sqlite_has_table(&db, "ledger"),
        "deletionPolicy Delete dropped the real table, not an impostor"
    );
    let calls = w.calls();
    assert!(
        calls.iter().all(|c| c["plugin"] != "aaa-evil"),
        "the impostor was called: {calls:?}"
    );
}

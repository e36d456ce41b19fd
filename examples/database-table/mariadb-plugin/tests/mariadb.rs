//! The MariaDB plugin against a real MariaDB server (started by
//! `examples/database-table/dev/databases.sh`), driven over the plugin's
//! real socket with the operator's calls, and checked by querying MariaDB.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::collections::HashMap;
use std::time::Duration;

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{FinalizeRequest, Outcome, ReconcileRequest, ReconcileResponse};
use mariadb_plugin::MariaDbPlugin;
use mysql_async::prelude::Queryable;
use serde_json::{Value, json};
use tonic::transport::Channel;

fn dsn() -> String {
    std::env::var("KPLUG_MARIADB_DSN").unwrap_or_else(|_| {
        panic!(
            "KPLUG_MARIADB_DSN is not set: start the databases with `examples/database-table/dev/databases.sh start` \
             and `eval \"$(examples/database-table/dev/databases.sh env)\"` (make test does this)"
        )
    })
}

struct Fixture {
    _dir: tempfile::TempDir,
    client: PluginClient<Channel>,
    db: mysql_async::Pool,
    table: String,
}

async fn fixture() -> Fixture {
    let dsn = dsn();
    let dir = tempfile::tempdir().unwrap();
    let servers = HashMap::from([("authorization-cluster".to_owned(), dsn.clone())]);
    let server = kplug_sidecar::Server::new(
        mariadb_plugin::info(),
        MariaDbPlugin::new(servers),
        dir.path(),
    );
    let socket = server.socket_path();
    tokio::spawn(server.run_until(std::future::pending()));
    while !socket.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let table = format!("t_{}", uuid_like());
    Fixture {
        client: PluginClient::new(kplug_proto::socket::channel(&socket)),
        db: mysql_async::Pool::new(dsn.as_str()),
        table,
        _dir: dir,
    }
}

fn uuid_like() -> String {
    use std::hash::{BuildHasher, RandomState};
    format!(
        "{:012x}",
        RandomState::new().hash_one(std::time::SystemTime::now()) & 0xffff_ffff_ffff
    )
}

fn object(name: &str, columns: Value, policy: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"serverName": "authorization-cluster", "columns": columns, "deletionPolicy": policy},
    }))
    .unwrap()
}

fn extension(name: &str, engine: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableMariaDbExtension",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"storageEngine": engine},
    }))
    .unwrap()
}

impl Fixture {
    async fn reconcile(&mut self, columns: Value, engine: &str) -> ReconcileResponse {
        let request = ReconcileRequest {
            children: Default::default(),
            implementation: "MariaDB".into(),
            object: object(&self.table, columns, "Delete"),
            extensions: vec![extension(&self.table, engine)],
        };
        self.client.reconcile(request).await.unwrap().into_inner()
    }

    async fn columns(&self) -> Vec<(String, String)> {
        let mut conn = self.db.get_conn().await.unwrap();
        conn.exec(
            "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (self.table.as_str(),),
        )
        .await
        .unwrap()
    }

    async fn table_info(&self) -> Option<(String, String)> {
        let mut conn = self.db.get_conn().await.unwrap();
        conn.exec_first(
            "SELECT ENGINE, CAST(CREATE_TIME AS CHAR) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            (self.table.as_str(),),
        )
        .await
        .unwrap()
    }

    async fn show_create(&self) -> String {
        let mut conn = self.db.get_conn().await.unwrap();
        let row: Option<(String, String)> = conn
            .query_first(format!("SHOW CREATE TABLE `{}`", self.table))
            .await
            .unwrap();
        row.unwrap().1
    }
}

fn cols(c: &[(&str, &str)]) -> Value {
    c.iter()
        .map(|(n, t)| json!({"name": n, "type": t}))
        .collect()
}

fn names(c: &[(String, String)]) -> Vec<(&str, &str)> {
    c.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_engine_status_idempotence_and_finalize() {
    let mut f = fixture().await;

    // Create.
    let r = f
        .reconcile(cols(&[("id", "uint64"), ("name", "string")]), "InnoDB")
        .await;
    assert_eq!(r.outcome, Outcome::Ok as i32, "{}", r.message);
    assert_eq!(
        names(&f.columns().await),
        [("id", "bigint(20) unsigned"), ("name", "text")]
    );
    assert_eq!(f.table_info().await.unwrap().0, "InnoDB");
    let status: Value = serde_json::from_slice(&r.status).unwrap();
    assert_eq!(status["columns"], 2);
    assert_eq!(status["rows"], 0);
    let ext: Value = serde_json::from_slice(&r.extension_statuses[0].status).unwrap();
    assert_eq!(ext, json!({"storageEngine": "InnoDB", "rows": 0}));
    // The message says how the table is (what the call did is the Event's).
    assert!(
        r.message.ends_with(": 2 columns, engine InnoDB"),
        "{}",
        r.message
    );
    let created = r.message.clone();

    // Idempotence: the same spec again changes nothing in the database.
    let before = (f.show_create().await, f.table_info().await);
    let r = f
        .reconcile(cols(&[("id", "uint64"), ("name", "string")]), "InnoDB")
        .await;
    assert_eq!(r.outcome, Outcome::Ok as i32);
    assert_eq!(
        r.message, created,
        "an unchanged table is described in the same words: no status write"
    );
    assert!(r.events.is_empty(), "no change, no event: {:?}", r.events);
    assert_eq!((f.show_create().await, f.table_info().await), before);

    // Rows are counted; add, drop and retype in one go.
    {
        let mut conn = f.db.get_conn().await.unwrap();
        conn.query_drop(format!(
            "INSERT INTO `{}` (id, name) VALUES (1, '7'), (2, '42')",
            f.table
        ))
        .await
        .unwrap();
    }
    let r = f
        .reconcile(
            cols(&[("id", "uint64"), ("name", "int64"), ("active", "bool")]),
            "InnoDB",
        )
        .await;
    assert_eq!(r.outcome, Outcome::Ok as i32, "{}", r.message);
    assert_eq!(
        names(&f.columns().await),
        [
            ("id", "bigint(20) unsigned"),
            ("name", "bigint(20)"),
            ("active", "tinyint(1)")
        ]
    );
    let status: Value = serde_json::from_slice(&r.status).unwrap();
    assert_eq!(status["rows"], 2);
    let r = f
        .reconcile(cols(&[("id", "uint64"), ("active", "bool")]), "InnoDB")
        .await;
    assert_eq!(
        names(&f.columns().await),
        [("id", "bigint(20) unsigned"), ("active", "tinyint(1)")],
        "{}",
        r.message
    );

    // The storage engine follows the extension.
    let r = f
        .reconcile(cols(&[("id", "uint64"), ("active", "bool")]), "Aria")
        .await;
    assert_eq!(r.outcome, Outcome::Ok as i32, "{}", r.message);
    assert_eq!(f.table_info().await.unwrap().0, "Aria");
    let ext: Value = serde_json::from_slice(&r.extension_statuses[0].status).unwrap();
    assert_eq!(ext["storageEngine"], "Aria");

    // Bad input changes nothing: an unknown type, an unavailable engine.
    let before = f.show_create().await;
    let r = f
        .reconcile(cols(&[("id", "uint64"), ("blob", "varbinary")]), "Aria")
        .await;
    assert_eq!(r.outcome, Outcome::Failed as i32);
    assert!(
        r.message
            .contains("\"blob\" has unknown type \"varbinary\""),
        "{}",
        r.message
    );
    let r = f
        .reconcile(
            cols(&[("id", "uint64"), ("extra", "string")]),
            "NoSuchEngine",
        )
        .await;
    assert_eq!(r.outcome, Outcome::Failed as i32);
    assert!(
        r.message.contains("NoSuchEngine is not available"),
        "{}",
        r.message
    );
    assert_eq!(
        f.show_create().await,
        before,
        "a refused spec must leave the table untouched"
    );

    // Finalize: Retain keeps the table, Delete drops it.
    let finalize = |policy: &str| FinalizeRequest {
        children: Default::default(),
        implementation: "MariaDB".into(),
        object: object(&f.table, cols(&[("id", "uint64")]), policy),
        extensions: vec![],
    };
    let (retain, delete) = (finalize("Retain"), finalize("Delete"));
    let r = f.client.finalize(retain).await.unwrap().into_inner();
    assert_eq!(r.outcome, Outcome::Ok as i32);
    assert!(f.table_info().await.is_some(), "Retain keeps the table");
    let r = f.client.finalize(delete).await.unwrap().into_inner();
    assert_eq!(r.outcome, Outcome::Ok as i32);
    assert!(f.table_info().await.is_none(), "Delete drops the table");
}

#[tokio::test]
async fn unknown_server_is_a_clear_failure() {
    let mut f = fixture().await;
    let request = ReconcileRequest {
        children: Default::default(),
        implementation: "MariaDB".into(),
        object: serde_json::to_vec(&json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": "x", "namespace": "default"},
            "spec": {"serverName": "elsewhere", "columns": [{"name": "id", "type": "int32"}]},
        }))
        .unwrap(),
        extensions: vec![],
    };
    let r = f.client.reconcile(request).await.unwrap().into_inner();
    assert_eq!(r.outcome, Outcome::Failed as i32);
    assert!(
        r.message.contains("unknown serverName \"elsewhere\"")
            && r.message.contains("authorization-cluster"),
        "{}",
        r.message
    );
}

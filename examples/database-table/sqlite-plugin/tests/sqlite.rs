//! The SQLite plugin's column semantics on a real SQLite file, checked by
//! reading SQLite's own catalog.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use database_table_model::{ColumnSpec, DeletionPolicy, TableSpec, validate};
use rusqlite::Connection;
use std::collections::BTreeSet;

use kplug_sidecar::Object;
use serde_json::json;
use sqlite_plugin::{apply, drop_table, index_name, indexes};

fn spec(columns: &[(&str, &str)]) -> TableSpec {
    TableSpec {
        server_name: "main".into(),
        columns: columns
            .iter()
            .map(|(n, t)| ColumnSpec {
                name: (*n).into(),
                type_: (*t).into(),
            })
            .collect(),
        deletion_policy: DeletionPolicy::Delete,
    }
}

fn catalog(path: &std::path::Path) -> Vec<(String, String)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, type FROM pragma_table_info('users')")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn schema_sql(path: &std::path::Path) -> String {
    Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'users'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

fn none() -> BTreeSet<String> {
    BTreeSet::new()
}

fn set(columns: &[&str]) -> BTreeSet<String> {
    columns.iter().map(|c| (*c).to_owned()).collect()
}

/// The indexes on `table` as SQLite lists them: (index, column).
fn index_catalog(path: &std::path::Path, table: &str) -> Vec<(String, String)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT l.name, i.name FROM pragma_index_list(?1) AS l, pragma_index_info(l.name) AS i ORDER BY l.name",
        )
        .unwrap();
    stmt.query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn create_add_drop_retype_idempotent_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("main.db");
    let table = |c: &[(&str, &str)]| validate("users", &spec(c)).unwrap();

    let applied = apply(
        &db,
        &table(&[("id", "uint64"), ("name", "string")]),
        &none(),
    )
    .unwrap();
    assert!(applied.created);
    let pairs = |v: Vec<(String, String)>| {
        v.into_iter()
            .map(|(a, b)| format!("{a} {b}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(pairs(catalog(&db)), ["id UNSIGNED BIGINT", "name TEXT"]);

    // The same spec twice: nothing changes.
    let before = schema_sql(&db);
    let again = apply(
        &db,
        &table(&[("id", "uint64"), ("name", "string")]),
        &none(),
    )
    .unwrap();
    assert!(!again.created && again.plan.is_empty());
    assert_eq!(schema_sql(&db), before);

    Connection::open(&db)
        .unwrap()
        .execute_batch("INSERT INTO users VALUES (1, '7'), (2, '42')")
        .unwrap();
    // Add and drop.
    let applied = apply(
        &db,
        &table(&[("id", "uint64"), ("name", "string"), ("active", "bool")]),
        &none(),
    )
    .unwrap();
    assert_eq!(applied.plan.summary(), "added 1 (active)");
    let applied = apply(
        &db,
        &table(&[("id", "uint64"), ("active", "bool")]),
        &none(),
    )
    .unwrap();
    assert_eq!(applied.plan.summary(), "dropped 1 (name)");
    assert_eq!(
        pairs(catalog(&db)),
        ["id UNSIGNED BIGINT", "active BOOLEAN"]
    );
    // Retype keeps the data (rebuild with CAST).
    let applied = apply(
        &db,
        &table(&[("id", "string"), ("active", "bool")]),
        &none(),
    )
    .unwrap();
    assert_eq!(applied.plan.summary(), "retyped 1 (id)");
    assert_eq!(applied.rows, 2);
    assert_eq!(pairs(catalog(&db)), ["id TEXT", "active BOOLEAN"]);
    let ids: Vec<String> = {
        let conn = Connection::open(&db).unwrap();
        let mut stmt = conn.prepare("SELECT id FROM users ORDER BY id").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(ids, ["1", "2"]);

    drop_table(&db, "users").unwrap();
    let count: i64 = Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'users'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(count, 0);
}

#[test]
fn an_unknown_type_is_refused_before_anything_changes() {
    let err = validate("users", &spec(&[("id", "uint64"), ("x", "decimal")])).unwrap_err();
    assert!(
        err.to_string()
            .contains("\"x\" has unknown type \"decimal\""),
        "{err}"
    );
}

#[test]
fn indexes_follow_the_extension_through_adds_drops_and_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("main.db");
    let table = |c: &[(&str, &str)]| validate("users", &spec(c)).unwrap();
    let two = table(&[("id", "uint64"), ("name", "string")]);

    let applied = apply(&db, &two, &set(&["name"])).unwrap();
    assert!(applied.created);
    assert_eq!(applied.summary(), "created; indexed name");
    assert_eq!(
        index_catalog(&db, "users"),
        [(index_name("users", "name"), "name".to_owned())]
    );
    // Unchanged: no change reported, nothing touched.
    let again = apply(&db, &two, &set(&["name"])).unwrap();
    assert!(!again.changed(), "{}", again.summary());

    // Another index, and the first one gone; a foreign index stays.
    Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE INDEX mine ON users (id, name)")
        .unwrap();
    let applied = apply(&db, &two, &set(&["id"])).unwrap();
    assert_eq!(applied.summary(), "indexed id; unindexed name");
    assert_eq!(applied.indexes, set(&["id"]));
    let catalog = index_catalog(&db, "users");
    assert!(catalog.contains(&(index_name("users", "id"), "id".to_owned())));
    assert!(
        catalog.iter().any(|(index, _)| index == "mine"),
        "{catalog:?}"
    );
    assert!(
        !catalog.contains(&(index_name("users", "name"), "name".to_owned())),
        "{catalog:?}"
    );
    Connection::open(&db)
        .unwrap()
        .execute_batch("DROP INDEX mine")
        .unwrap();

    // Dropping an indexed column that is no longer indexed works (SQLite
    // refuses DROP COLUMN on an indexed column: the index goes first).
    apply(&db, &two, &set(&["id", "name"])).unwrap();
    let applied = apply(&db, &table(&[("id", "uint64")]), &set(&["id"])).unwrap();
    assert_eq!(applied.summary(), "dropped 1 (name); unindexed name");
    // A rebuild (retype) keeps the index: no index change reported.
    let applied = apply(&db, &table(&[("id", "string")]), &set(&["id"])).unwrap();
    assert_eq!(applied.summary(), "retyped 1 (id)");
    assert_eq!(
        index_catalog(&db, "users"),
        [(index_name("users", "id"), "id".to_owned())]
    );
}

#[test]
fn index_names_are_unique_across_tables() {
    assert_ne!(index_name("a", "b_c"), index_name("a_b", "c"));
}

#[test]
fn an_index_on_a_column_the_table_lacks_is_refused_naming_the_extension() {
    let table = validate("users", &spec(&[("id", "uint64")])).unwrap();
    let extension = |spec| {
        Object::new(json!({
            "apiVersion": "myorg.org/v1alpha1",
            "kind": "DatabaseTableSqliteExtension",
            "metadata": {"name": "users", "namespace": "default"},
            "spec": spec,
        }))
        .unwrap()
    };
    assert_eq!(indexes(None, &table).unwrap(), none());
    assert_eq!(
        indexes(Some(&extension(json!({}))), &table).unwrap(),
        none()
    );
    assert_eq!(
        indexes(Some(&extension(json!({"indexes": ["id"]}))), &table).unwrap(),
        set(&["id"])
    );
    let err = indexes(Some(&extension(json!({"indexes": ["email"]}))), &table).unwrap_err();
    assert!(
        err.contains("DatabaseTableSqliteExtension users") && err.contains("\"email\""),
        "{err}"
    );
    let err = indexes(Some(&extension(json!({"indexes": "id"}))), &table).unwrap_err();
    assert!(err.contains("must be a list of column names"), "{err}");
}

//! The SQLite plugin's column semantics on a real SQLite file, checked by
//! reading SQLite's own catalog.

use database_table_model::{ColumnSpec, DeletionPolicy, TableSpec, validate};
use rusqlite::Connection;
use sqlite_plugin::{apply, drop_table};

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

#[test]
fn create_add_drop_retype_idempotent_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("main.db");
    let table = |c: &[(&str, &str)]| validate("users", &spec(c)).unwrap();

    let applied = apply(&db, &table(&[("id", "uint64"), ("name", "string")])).unwrap();
    assert!(applied.created);
    let pairs = |v: Vec<(String, String)>| {
        v.into_iter()
            .map(|(a, b)| format!("{a} {b}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(pairs(catalog(&db)), ["id UNSIGNED BIGINT", "name TEXT"]);

    // The same spec twice: nothing changes.
    let before = schema_sql(&db);
    let again = apply(&db, &table(&[("id", "uint64"), ("name", "string")])).unwrap();
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
    )
    .unwrap();
    assert_eq!(applied.plan.summary(), "added 1 (active)");
    let applied = apply(&db, &table(&[("id", "uint64"), ("active", "bool")])).unwrap();
    assert_eq!(applied.plan.summary(), "dropped 1 (name)");
    assert_eq!(
        pairs(catalog(&db)),
        ["id UNSIGNED BIGINT", "active BOOLEAN"]
    );
    // Retype keeps the data (rebuild with CAST).
    let applied = apply(&db, &table(&[("id", "string"), ("active", "bool")])).unwrap();
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

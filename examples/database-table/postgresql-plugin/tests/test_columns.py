"""Creating tables and reconciling their columns, checked in PostgreSQL's own catalogs."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from kplug_postgresql_plugin.column_types import COLUMN_TYPES

from .conftest import (
    NAMESPACE,
    PluginProcess,
    catalog_snapshot,
    columns,
    table_exists,
    table_object,
)

USERS = [("id", "int64"), ("email", "string"), ("age", "int32")]


def insert(db: psycopg.Connection, table: str, row: dict[str, object]) -> None:
    db.execute(
        sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            sql.Identifier(table),
            sql.SQL(", ").join(map(sql.Identifier, row)),
            sql.SQL(", ").join(sql.Placeholder() * len(row)),
        ),
        list(row.values()),
    )


def test_get_info_offers_postgresql_with_its_extension(plugin: PluginProcess) -> None:
    from kplug._proto import plugin_pb2, types_pb2

    info = plugin.stub.GetInfo(plugin_pb2.GetInfoRequest(), timeout=5)
    assert (info.name, info.protocol) == ("postgresql", "kplug.v1")
    [offer] = info.offers
    assert (offer.base.group, offer.base.kind, offer.implementation) == (
        "myorg.org",
        "DatabaseTable",
        "PostgreSQL",
    )
    assert [(e.group, e.kind) for e in offer.extensions] == [
        ("myorg.org", "DatabaseTablePostgreSqlExtension")
    ]
    assert types_pb2.CAPABILITY_FINALIZE in info.capabilities


def test_creates_the_table_with_every_type(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    spec = [(f"c_{t}", t) for t in COLUMN_TYPES]
    result = plugin.reconcile(*table_object(name, spec))

    assert result.outcome == "OK", result.message
    assert columns(db, name) == [
        ("c_int32", "integer"),
        ("c_int64", "bigint"),
        ("c_uint64", "numeric(20,0)"),
        ("c_string", "text"),
        ("c_bool", "boolean"),
        ("c_float64", "double precision"),
        ("c_timestamp", "timestamp with time zone"),
    ]
    # A plain table, in schema public, marked as this DatabaseTable's.
    relkind, comment = db.execute(
        "SELECT relkind::text, obj_description(oid, 'pg_class') FROM pg_class "
        "WHERE oid = to_regclass(%s)",
        (f"public.{name}",),
    ).fetchone() or (None, None)
    assert relkind == "r"
    assert comment == f"managed by kplug: DatabaseTable {NAMESPACE}/{name}"
    assert result.status == {"table": f"public.{name}", "columns": 7, "server": "main"}
    assert result.conditions["TableReady"][:2] == ("TRUE", "UpToDate")
    assert result.event_reasons == ["TableCreated"]
    assert name in result.events[0][1]
    # The largest uint64 fits.
    insert(db, name, {"c_uint64": 18446744073709551615})


def test_adds_drops_and_retypes_columns_keeping_data(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    assert plugin.reconcile(*table_object(name, USERS)).outcome == "OK"
    insert(db, name, {"id": 1, "email": "ada@example.org", "age": 36})
    insert(db, name, {"id": 2, "email": "bob@example.org", "age": 41})

    # email goes, age becomes int64, active and created_at come.
    spec = [("id", "int64"), ("age", "int64"), ("active", "bool"), ("created_at", "timestamp")]
    result = plugin.reconcile(*table_object(name, spec))

    assert result.outcome == "OK", result.message
    assert columns(db, name) == [
        ("id", "bigint"),
        ("age", "bigint"),
        ("active", "boolean"),
        ("created_at", "timestamp with time zone"),
    ]
    assert db.execute(
        sql.SQL("SELECT id, age, active FROM {} ORDER BY id").format(sql.Identifier(name))
    ).fetchall() == [(1, 36, None), (2, 41, None)]
    assert result.event_reasons == ["ColumnsDropped", "ColumnsRetyped", "ColumnsAdded"]
    events = dict(result.events)
    assert "email" in events["ColumnsDropped"]
    assert "age integer -> bigint" in events["ColumnsRetyped"]
    assert "active (boolean)" in events["ColumnsAdded"]
    assert "created_at (timestamptz)" in events["ColumnsAdded"]
    assert result.status["columns"] == 4


def test_reconciling_twice_changes_nothing(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    obj, extensions = table_object(name, USERS)
    first = plugin.reconcile(obj, extensions)
    assert first.outcome == "OK", first.message
    assert first.event_reasons == ["TableCreated"]
    before = catalog_snapshot(db, name)

    second = plugin.reconcile(obj, extensions)

    assert second.outcome == "OK", second.message
    assert second.events == []
    # It says how the table is, in the same words: no status write.
    assert second.message == first.message
    assert f"table public.{name} on server main: 3 columns" in second.message
    assert second.conditions["TableReady"][:2] == ("TRUE", "UpToDate")
    assert second.status == first.status
    # The catalog rows were not rewritten: no DDL ran at all.
    assert catalog_snapshot(db, name) == before


def test_every_type_converts_to_every_other_on_an_empty_column(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    types = list(COLUMN_TYPES)
    # Column i starts as type i and moves one type along per reconcile, so
    # after len(types) - 1 reconciles every ordered pair was converted.
    for shift in range(len(types)):
        spec = [(f"c{i}", types[(i + shift) % len(types)]) for i in range(len(types))]
        result = plugin.reconcile(*table_object(name, spec))
        assert result.outcome == "OK", f"shift {shift}: {result.message}"
        expected = [COLUMN_TYPES[t].catalog for _, t in spec]
        assert [t for _, t in columns(db, name)] == expected


@pytest.mark.parametrize(
    ("before", "value", "after", "converted"),
    [
        ("int32", 7, "uint64", 7),
        ("string", "42", "int32", 42),
        ("bool", True, "int64", 1),
        ("int32", 0, "bool", False),
        ("float64", 2.0, "int32", 2),
        ("string", "2024-05-06T07:08:09Z", "timestamp", "2024-05-06 07:08:09+00"),
    ],
)
def test_retype_converts_values(
    plugin: PluginProcess,
    db: psycopg.Connection,
    name: str,
    before: str,
    value: object,
    after: str,
    converted: object,
) -> None:
    assert plugin.reconcile(*table_object(name, [("v", before)])).outcome == "OK"
    insert(db, name, {"v": value})

    result = plugin.reconcile(*table_object(name, [("v", after)]))

    assert result.outcome == "OK", result.message
    query = sql.SQL("SELECT v{} FROM {}").format(
        sql.SQL("::text") if after == "timestamp" else sql.SQL(""), sql.Identifier(name)
    )
    db.execute("SET TIME ZONE 'UTC'")
    assert db.execute(query).fetchone() == (converted,)


def test_a_value_that_does_not_convert_fails_and_changes_nothing(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    assert plugin.reconcile(*table_object(name, USERS)).outcome == "OK"
    insert(db, name, {"id": 1, "email": "not a number", "age": 3})
    before = catalog_snapshot(db, name)

    # The add and the drop would work; the retype of email cannot.
    spec = [("id", "int64"), ("email", "int32"), ("extra", "string")]
    result = plugin.reconcile(*table_object(name, spec))

    assert result.outcome == "FAILED"
    assert f"public.{name}" in result.message
    assert "email" in result.message
    assert "not a number" in result.message  # PostgreSQL's own words
    assert "nothing was changed" in result.message
    assert result.conditions["TableReady"][:2] == ("FALSE", "DDLFailed")
    assert catalog_snapshot(db, name) == before
    assert db.execute(sql.SQL("SELECT email FROM {}").format(sql.Identifier(name))).fetchall() == [
        ("not a number",)
    ]


def test_an_unknown_type_fails_before_touching_the_table(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    assert plugin.reconcile(*table_object(name, USERS)).outcome == "OK"
    before = catalog_snapshot(db, name)

    spec = [("id", "int64"), ("nickname", "string"), ("ip", "inet"), ("age", "int64")]
    result = plugin.reconcile(*table_object(name, spec))

    assert result.outcome == "FAILED"
    assert 'column "ip" has unknown type "inet"' in result.message
    assert "int32, int64, uint64, string, bool, float64, timestamp" in result.message
    assert result.conditions["TableReady"][:2] == ("FALSE", "InvalidSpec")
    assert result.events == []
    # Neither the new column nor the drop of email nor the retype of age happened.
    assert catalog_snapshot(db, name) == before


def test_an_unknown_type_creates_no_table(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    result = plugin.reconcile(*table_object(name, [("id", "int64"), ("blob", "bytes")]))
    assert result.outcome == "FAILED"
    assert '"blob" has unknown type "bytes"' in result.message
    assert not table_exists(db, name)


def test_dashes_in_the_name_become_underscores(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    # As in the MariaDB and SQLite plugins; Kubernetes names cannot contain '_'.
    dashed = name.replace("_", "-")
    result = plugin.reconcile(*table_object(dashed, USERS))
    assert result.outcome == "OK", result.message
    assert result.status["table"] == f"public.{name}"
    assert columns(db, name)[0] == ("id", "bigint")


def test_every_problem_of_a_spec_is_reported_at_once(plugin: PluginProcess) -> None:
    obj, extensions = table_object(
        "bad.name", [("ok", "int32"), ("Bad", "int32"), ("ok", "string"), ("xmin", "bool")]
    )
    result = plugin.reconcile(obj, extensions)
    assert result.outcome == "FAILED"
    message = result.message
    assert f"DatabaseTable {NAMESPACE}/bad.name" in message
    assert '"bad.name" (metadata.name) does not make a PostgreSQL table name' in message
    assert '"bad_name"' in message  # the suggestion
    assert 'column "Bad": the name must be lowercase' in message
    assert 'column "ok" is listed twice' in message
    assert 'column "xmin": the name is a PostgreSQL system column' in message


def test_a_table_owned_by_another_databasetable_is_left_alone(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    assert plugin.reconcile(*table_object(name, USERS)).outcome == "OK"
    before = catalog_snapshot(db, name)
    obj, extensions = table_object(name, [("id", "int64")])
    obj["metadata"]["namespace"] = "other"

    result = plugin.reconcile(obj, extensions)

    assert result.outcome == "FAILED"
    assert f"belongs to DatabaseTable {NAMESPACE}/{name}, not other/{name}" in result.message
    assert f"COMMENT ON TABLE public.{name} IS NULL" in result.message
    assert result.conditions["TableReady"][1] == "OwnedByAnother"
    assert catalog_snapshot(db, name) == before


def test_an_existing_unmarked_table_is_adopted(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    db.execute(sql.SQL("CREATE TABLE {} (id bigint, legacy text)").format(sql.Identifier(name)))

    result = plugin.reconcile(*table_object(name, [("id", "int64"), ("email", "string")]))

    assert result.outcome == "OK", result.message
    assert columns(db, name) == [("id", "bigint"), ("email", "text")]
    assert result.event_reasons == ["ColumnsDropped", "ColumnsAdded"]


def test_a_view_of_the_same_name_is_not_touched(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    db.execute(sql.SQL("CREATE VIEW {} AS SELECT 1 AS one").format(sql.Identifier(name)))

    result = plugin.reconcile(*table_object(name, USERS))

    assert result.outcome == "FAILED"
    assert f"public.{name} on server main is a view, not a table" in result.message
    assert columns(db, name) == [("one", "integer")]

"""The DatabaseTablePostgreSqlExtension's partitionBy, checked in pg_partitioned_table and
pg_inherits."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from .conftest import PluginProcess, catalog_snapshot, columns, table_exists, table_object

COLUMNS = [("id", "int64"), ("email", "string")]


def partitioning(db: psycopg.Connection, table: str) -> dict[str, Any]:
    """Strategy, key columns and partitions (name -> bound) as PostgreSQL records them."""
    row = db.execute(
        """
        SELECT p.partstrat::text,
               array(SELECT a.attname::text FROM unnest(p.partattrs::int2[]) k(n)
                     JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.n)
        FROM pg_partitioned_table p WHERE p.partrelid = to_regclass(%s)
        """,
        (f"public.{table}",),
    ).fetchone()
    partitions = db.execute(
        """
        SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid)
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = to_regclass(%s)
        """,
        (f"public.{table}",),
    ).fetchall()
    return {
        "strategy": row[0] if row else None,
        "key": row[1] if row else None,
        "partitions": dict(partitions),
    }


def hash_bounds(table: str, n: int) -> dict[str, str]:
    return {f"{table}_p{i}": f"FOR VALUES WITH (modulus {n}, remainder {i})" for i in range(n)}


def fill(db: psycopg.Connection, table: str, rows: int) -> None:
    db.execute(
        sql.SQL(
            "INSERT INTO {} (id, email) SELECT g, 'u' || g FROM generate_series(1, %s) g"
        ).format(sql.Identifier(table)),
        (rows,),
    )


def test_hash_partitions_and_rows_per_partition(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    obj, extensions = table_object(name, COLUMNS, partition_by="hash", partitions=3)
    result = plugin.reconcile(obj, extensions)
    assert result.outcome == "OK", result.message
    assert partitioning(db, name) == {
        "strategy": "h",
        "key": ["id"],
        "partitions": hash_bounds(name, 3),
    }
    assert result.event_reasons == ["TableCreated"]
    assert "hash-partitioned by id into 3 partitions" in result.events[0][1]

    fill(db, name, 100)
    result = plugin.reconcile(obj, extensions)

    assert result.outcome == "OK", result.message
    assert result.events == []
    actual: dict[str, int] = dict(
        db.execute(
            sql.SQL("SELECT tableoid::regclass::text, count(*) FROM {} GROUP BY 1").format(
                sql.Identifier(name)
            )
        ).fetchall()
    )
    status = result.extension_statuses[f"{name}-pg"]
    assert status["partitionBy"] == "hash"
    assert status["partitions"] == 3
    assert status["rows"] == 100
    assert status["rowsPerPartition"] == {
        f"{name}_p{i}": actual.get(f"{name}_p{i}", 0) for i in range(3)
    }
    assert sum(status["rowsPerPartition"].values()) == 100
    # Hashing spreads 100 ids over all three partitions.
    assert all(n > 0 for n in status["rowsPerPartition"].values())
    assert result.status == {"table": f"public.{name}", "columns": 2, "server": "main"}


def test_the_default_partition_count_is_four(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    result = plugin.reconcile(*table_object(name, COLUMNS, partition_by="hash"))
    assert result.outcome == "OK", result.message
    assert partitioning(db, name)["partitions"] == hash_bounds(name, 4)


def test_no_extension_or_none_is_a_plain_table(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    result = plugin.reconcile(*table_object(name, COLUMNS, partition_by="none"))
    assert result.outcome == "OK", result.message
    assert partitioning(db, name)["strategy"] is None
    assert result.extension_statuses[f"{name}-pg"] == {
        "partitionBy": "none",
        "partitions": 0,
        "rowsPerPartition": {},
        "rows": 0,
    }


def test_column_changes_on_a_partitioned_table_reach_every_partition(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    spec = [*COLUMNS, ("rank", "int32")]
    result = plugin.reconcile(*table_object(name, spec, partition_by="hash", partitions=2))
    assert result.outcome == "OK", result.message
    fill(db, name, 10)
    before = partitioning(db, name)

    # Everything but the key (id) may change in place, rows and all.
    spec = [("id", "int64"), ("rank", "int64"), ("score", "float64")]
    result = plugin.reconcile(*table_object(name, spec, partition_by="hash", partitions=2))

    assert result.outcome == "OK", result.message
    assert result.event_reasons == ["ColumnsDropped", "ColumnsRetyped", "ColumnsAdded"]
    assert partitioning(db, name) == before
    for table in (name, f"{name}_p0", f"{name}_p1"):
        assert columns(db, table) == [
            ("id", "bigint"),
            ("rank", "bigint"),
            ("score", "double precision"),
        ]
    count = db.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name))).fetchone()
    assert count == (10,)


def test_partitioning_an_empty_table_recreates_it(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    assert plugin.reconcile(*table_object(name, COLUMNS)).outcome == "OK"

    result = plugin.reconcile(*table_object(name, COLUMNS, partition_by="hash", partitions=2))

    assert result.outcome == "OK", result.message
    assert result.event_reasons == ["TableRecreated"]
    assert partitioning(db, name)["partitions"] == hash_bounds(name, 2)

    # ... and back to a plain table, and to another partition count.
    result = plugin.reconcile(*table_object(name, COLUMNS, partition_by="none"))
    assert result.outcome == "OK", result.message
    assert partitioning(db, name)["strategy"] is None
    result = plugin.reconcile(*table_object(name, COLUMNS, partition_by="hash", partitions=5))
    assert result.outcome == "OK", result.message
    assert partitioning(db, name)["partitions"] == hash_bounds(name, 5)
    assert columns(db, name) == [("id", "bigint"), ("email", "text")]


@pytest.mark.parametrize(
    ("start", "change"),
    [
        ({}, {"partition_by": "hash", "partitions": 2}),
        ({"partition_by": "hash", "partitions": 2}, {"partition_by": "none"}),
        ({"partition_by": "hash", "partitions": 2}, {"partition_by": "hash", "partitions": 3}),
    ],
    ids=["plain-to-hash", "hash-to-plain", "two-to-three"],
)
def test_repartitioning_a_table_with_rows_fails_and_keeps_them(
    plugin: PluginProcess,
    db: psycopg.Connection,
    name: str,
    start: dict[str, Any],
    change: dict[str, Any],
) -> None:
    assert plugin.reconcile(*table_object(name, COLUMNS, **start)).outcome == "OK"
    fill(db, name, 7)
    before = catalog_snapshot(db, name)

    # A column change in the same spec is not applied either.
    spec = [*COLUMNS, ("extra", "bool")]
    result = plugin.reconcile(*table_object(name, spec, **change))

    assert result.outcome == "FAILED"
    assert f"table public.{name} on server main" in result.message
    assert "holds rows" in result.message
    assert "nothing was changed" in result.message
    assert result.conditions["TableReady"][:2] == ("FALSE", "PartitioningChangeRefused")
    assert catalog_snapshot(db, name) == before
    count = db.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name))).fetchone()
    assert count == (7,)


def test_changing_the_key_column_of_an_empty_partitioned_table_recreates_it(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    assert (
        plugin.reconcile(*table_object(name, COLUMNS, partition_by="hash", partitions=2)).outcome
        == "OK"
    )
    # The first column is the key: a new first column, and a retype of the key.
    for spec, key in (
        ([("email", "string"), ("id", "int64")], "email"),
        ([("email", "int64")], "email"),
    ):
        result = plugin.reconcile(*table_object(name, spec, partition_by="hash", partitions=2))
        assert result.outcome == "OK", result.message
        assert result.event_reasons == ["TableRecreated"]
        assert partitioning(db, name)["key"] == [key]
        assert columns(db, name)[0][0] == key


@pytest.mark.parametrize("strategy", ["range", "list"])
def test_range_and_list_are_not_supported_yet(
    plugin: PluginProcess, db: psycopg.Connection, name: str, strategy: str
) -> None:
    result = plugin.reconcile(*table_object(name, COLUMNS, partition_by=strategy))
    assert result.outcome == "FAILED"
    assert f'partitionBy "{strategy}" is not supported by this plugin yet' in result.message
    assert f"DatabaseTablePostgreSqlExtension {name}-pg" in result.message
    assert not table_exists(db, name)


def test_too_many_partitions_is_refused(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    result = plugin.reconcile(*table_object(name, COLUMNS, partition_by="hash", partitions=5000))
    assert result.outcome == "FAILED"
    assert "partitions must be between 1 and 1024" in result.message
    assert not table_exists(db, name)

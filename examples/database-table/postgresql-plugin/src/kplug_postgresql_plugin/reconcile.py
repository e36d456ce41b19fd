"""Bring a PostgreSQL table in line with a TableSpec, all or nothing.

PostgreSQL's DDL is transactional: every statement of a reconcile runs in one
transaction, so a failure (a value that does not convert, a lock timeout, the
plugin killed half-way) leaves the table exactly as it was, and the next
reconcile starts again from the catalog.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from kplug_postgresql_plugin.catalog import (
    OWNER_PREFIX,
    Table,
    count_rows,
    has_rows,
    read_table,
)
from kplug_postgresql_plugin.column_types import using_expression
from kplug_postgresql_plugin.spec import Column, TableRef, TableSpec

logger = logging.getLogger(__name__)

# Test-only: seconds to sleep after the first DDL statement of a reconcile,
# inside its transaction, so a test can kill the plugin half-way.
TEST_DELAY_ENV = "KPLUG_PG_TEST_DELAY_AFTER_FIRST_DDL"

# Never wait forever behind another session's lock on the table; the
# operator retries a failed reconcile with backoff.
LOCK_TIMEOUT = "10s"
STATEMENT_TIMEOUT = "5min"


class ReconcileError(Exception):
    """The table cannot be brought in line; ``reason`` is a CamelCase condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Change:
    """A notable change, reported as a Kubernetes Event."""

    reason: str  # TableCreated, TableRecreated, ColumnsAdded, ColumnsDropped, ColumnsRetyped
    message: str


@dataclass
class Stats:
    """The table after the reconcile, for the statuses."""

    columns: int
    strategy: str
    # Partition name -> exact row count; empty for a plain table.
    rows_per_partition: dict[str, int] = field(default_factory=dict)
    rows: int = 0


@dataclass
class Outcome:
    changes: list[Change]
    stats: Stats


def connect(dsn: str, server: str) -> psycopg.Connection:
    """Open a connection to ``server``; ReconcileError naming it if that fails."""
    try:
        # autocommit: every unit of work below is an explicit conn.transaction().
        return psycopg.connect(
            dsn, autocommit=True, connect_timeout=10, application_name="kplug-postgresql-plugin"
        )
    except psycopg.Error as e:
        raise ReconcileError(
            "ServerUnavailable",
            f'cannot connect to PostgreSQL server "{server}": {_one_line(e)}; check that it runs '
            "and that its connection string in the plugin's configuration is right",
        ) from e


def reconcile(conn: psycopg.Connection, spec: TableSpec) -> Outcome:
    """Make the table match ``spec`` in one transaction; return what changed and the stats."""
    try:
        with conn.transaction():
            changes = _apply(conn, spec)
    except psycopg.Error as e:
        raise ReconcileError(
            "DDLFailed",
            f"changing table {spec.qualified} on server {spec.server} failed, and nothing was "
            f"changed: {_one_line(e)}",
        ) from e
    return Outcome(changes, stats(conn, spec))


def drop(conn: psycopg.Connection, spec: TableRef) -> bool:
    """Drop the table (with its partitions); False if it did not exist.

    A table recorded as another DatabaseTable's is left alone: ReconcileError.
    """
    with conn.transaction():
        _lock(conn, spec)
        table = read_table(conn, spec.schema, spec.name)
        if table is None:
            return False
        if not table.is_table:
            # Not ours to drop; and nothing of ours is left.
            return False
        _check_owned(table, spec)
        conn.execute(sql.SQL("DROP TABLE {}").format(_ident(spec)))
        return True


def stats(conn: psycopg.Connection, spec: TableRef) -> Stats:
    """Column count and exact row counts (per partition when partitioned)."""
    with conn.transaction():
        table = read_table(conn, spec.schema, spec.name)
        if table is None or not table.is_table:
            return Stats(columns=0, strategy="none")
        per_partition = {p.name: count_rows(conn, p.schema, p.name) for p in table.partitions}
        total = count_rows(conn, spec.schema, spec.name)
    return Stats(len(table.columns), table.strategy, per_partition, total)


def _apply(conn: psycopg.Connection, spec: TableSpec) -> list[Change]:
    _lock(conn, spec)
    table = read_table(conn, spec.schema, spec.name)
    statements: list[sql.Composed] = []
    changes: list[Change] = []
    if table is None:
        statements += _create(spec)
        changes.append(
            Change(
                "TableCreated",
                f"created table {spec.qualified} with {len(spec.columns)} columns "
                f"({spec.partitioning.describe()})",
            )
        )
    else:
        if not table.is_table:
            raise ReconcileError(
                "NotATable",
                f"{spec.qualified} on server {spec.server} is a {table.kind}, not a table; "
                "rename or drop it, or give the DatabaseTable another name",
            )
        _check_owned(table, spec)
        if not _partitioning_matches(spec, table):
            statements += _recreate(conn, spec, table)
            changes.append(
                Change(
                    "TableRecreated",
                    f"recreated empty table {spec.qualified}: {_describe(table)} -> "
                    f"{spec.partitioning.describe()}",
                )
            )
        else:
            column_statements, column_changes = _alter_columns(spec, table)
            statements += column_statements
            changes += column_changes
    if table is None or statements or table.comment != _owner_comment(spec):
        statements.append(
            sql.SQL("COMMENT ON TABLE {} IS {}").format(
                _ident(spec), sql.Literal(_owner_comment(spec))
            )
        )
    _execute(conn, spec, statements)
    return changes


def _lock(conn: psycopg.Connection, spec: TableRef) -> None:
    # Two reconciles of the same table (two plugin instances during an
    # upgrade) take turns instead of planning from the same catalog state.
    conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
    conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(STATEMENT_TIMEOUT)))
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"kplug-postgresql:{spec.qualified}",)
    )


def _check_owned(table: Table, spec: TableRef) -> None:
    if table.owner is not None and table.owner != spec.owner:
        raise ReconcileError(
            "OwnedByAnother",
            f"table {spec.qualified} on server {spec.server} belongs to DatabaseTable "
            f"{table.owner}, not {spec.owner}; give this DatabaseTable another name, or release "
            f"the table with: COMMENT ON TABLE {spec.qualified} IS NULL",
        )


def _owner_comment(spec: TableRef) -> str:
    return f"{OWNER_PREFIX}{spec.owner}"


def _ident(spec: TableRef) -> sql.Identifier:
    return sql.Identifier(spec.schema, spec.name)


def _create(spec: TableSpec) -> list[sql.Composed]:
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.pg.ddl)) for c in spec.columns
    )
    part = spec.partitioning
    if part.strategy == "none":
        return [sql.SQL("CREATE TABLE {} ({})").format(_ident(spec), columns)]
    assert part.key is not None  # spec.parse sets it for hash
    statements: list[sql.Composed] = [
        sql.SQL("CREATE TABLE {} ({}) PARTITION BY HASH ({})").format(
            _ident(spec), columns, sql.Identifier(part.key)
        )
    ]
    for i in range(part.partitions):
        statements.append(
            sql.SQL(
                "CREATE TABLE {} PARTITION OF {} FOR VALUES WITH (MODULUS {}, REMAINDER {})"
            ).format(
                sql.Identifier(spec.schema, spec.partition_name(i)),
                _ident(spec),
                sql.Literal(part.partitions),
                sql.Literal(i),
            )
        )
    return statements


def _partitioning_matches(spec: TableSpec, table: Table) -> bool:
    part = spec.partitioning
    if part.strategy == "none":
        return table.relkind == "r"
    key = spec.columns[0]
    expected = {
        spec.partition_name(i): f"FOR VALUES WITH (modulus {part.partitions}, remainder {i})"
        for i in range(part.partitions)
    }
    return (
        table.strategy == part.strategy
        and table.key == [key.name]
        # The key column cannot change type in place (PostgreSQL refuses).
        and table.columns.get(key.name) == key.pg.catalog
        and {p.name: p.bound for p in table.partitions} == expected
        and all(p.schema == spec.schema for p in table.partitions)
    )


def _recreate(conn: psycopg.Connection, spec: TableSpec, table: Table) -> list[sql.Composed]:
    # Moving rows between partition layouts is not something to do behind a
    # user's back: only an empty table is recreated. The lock keeps it empty
    # until the transaction commits.
    conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(_ident(spec)))
    if has_rows(conn, spec.schema, spec.name):
        raise ReconcileError(
            "PartitioningChangeRefused",
            f"table {spec.qualified} on server {spec.server} is {_describe(table)} and holds "
            f"rows; making it {spec.partitioning.describe()} means recreating it, which this "
            "plugin only does for an empty table, so nothing was changed. Move the rows out "
            "(or delete them), or set the extension back",
        )
    return [sql.SQL("DROP TABLE {}").format(_ident(spec)), *_create(spec)]


def _alter_columns(spec: TableSpec, table: Table) -> tuple[list[sql.Composed], list[Change]]:
    wanted = {c.name: c for c in spec.columns}
    dropped = [name for name in table.columns if name not in wanted]
    retyped: list[tuple[Column, str]] = [
        (c, table.columns[c.name])
        for c in spec.columns
        if c.name in table.columns and table.columns[c.name] != c.pg.catalog
    ]
    added = [c for c in spec.columns if c.name not in table.columns]
    ident = _ident(spec)
    statements: list[sql.Composed] = []
    changes: list[Change] = []
    # Drop first: a column dropped and another added under a new name never
    # coexist, and retyping has less to rewrite.
    for name in dropped:
        statements.append(
            sql.SQL("ALTER TABLE {} DROP COLUMN {}").format(ident, sql.Identifier(name))
        )
    for column, current in retyped:
        statements.append(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {} USING {}").format(
                ident,
                sql.Identifier(column.name),
                sql.SQL(column.pg.ddl),
                using_expression(column.name, current, column.pg),
            )
        )
    # On a partitioned table, ADD COLUMN on the parent reaches every partition.
    for column in added:
        statements.append(
            sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                ident, sql.Identifier(column.name), sql.SQL(column.pg.ddl)
            )
        )
    if dropped:
        changes.append(
            Change("ColumnsDropped", f"dropped from {spec.qualified}: {', '.join(dropped)}")
        )
    if retyped:
        changes.append(
            Change(
                "ColumnsRetyped",
                f"changed types in {spec.qualified}: "
                + ", ".join(f"{c.name} {current} -> {c.pg.ddl}" for c, current in retyped),
            )
        )
    if added:
        changes.append(
            Change(
                "ColumnsAdded",
                f"added to {spec.qualified}: " + ", ".join(f"{c.name} ({c.pg.ddl})" for c in added),
            )
        )
    return statements, changes


def _execute(conn: psycopg.Connection, spec: TableRef, statements: list[sql.Composed]) -> None:
    delay = float(os.environ.get(TEST_DELAY_ENV) or 0)
    for i, statement in enumerate(statements):
        text = statement.as_string(conn)
        logger.info("executing: %s", text)
        try:
            conn.execute(statement)
        except psycopg.Error as e:
            raise ReconcileError(
                "DDLFailed",
                f"changing table {spec.qualified} on server {spec.server} failed at "
                f"`{text}`: {_one_line(e)}; nothing was changed (the whole reconcile is one "
                "transaction). Fix the spec or the data, and it is tried again",
            ) from e
        if i == 0 and delay > 0:
            logger.warning(
                "%s: sleeping %gs after the first DDL statement, inside its transaction",
                TEST_DELAY_ENV,
                delay,
            )
            time.sleep(delay)


def _describe(table: Table) -> str:
    if table.strategy == "none":
        return "not partitioned"
    return (
        f"{table.strategy}-partitioned by {', '.join(table.key) or 'an expression'} "
        f"into {len(table.partitions)} partitions"
    )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())

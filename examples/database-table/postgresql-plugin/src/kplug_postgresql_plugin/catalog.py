"""What a table looks like now, read from PostgreSQL's catalogs.

The plugin keeps no state of its own: every reconcile compares the spec with
the catalog, so a reconcile that was interrupted (the plugin killed, the
connection lost) is simply done again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg import sql

# What a relation of this name is, for messages about ones that are not tables.
RELKINDS = {
    "r": "table",
    "p": "partitioned table",
    "v": "view",
    "m": "materialized view",
    "f": "foreign table",
    "S": "sequence",
    "i": "index",
    "I": "partitioned index",
    "c": "composite type",
    "t": "TOAST table",
}
# pg_partitioned_table.partstrat
STRATEGIES = {"h": "hash", "r": "range", "l": "list"}

OWNER_PREFIX = "managed by kplug: DatabaseTable "
"""Table comments that start with this name the DatabaseTable that owns the table."""


@dataclass
class Partition:
    schema: str
    name: str
    bound: str  # pg_get_expr(relpartbound), e.g. "FOR VALUES WITH (modulus 4, remainder 0)"


@dataclass
class Table:
    oid: int
    relkind: str
    comment: str | None
    # Column name -> format_type(), in column order.
    columns: dict[str, str] = field(default_factory=dict)
    strategy: str = "none"  # none, hash, range, list
    key: list[str] = field(default_factory=list)  # partition key columns ("" for expressions)
    partitions: list[Partition] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return RELKINDS.get(self.relkind, f"relation of kind {self.relkind!r}")

    @property
    def is_table(self) -> bool:
        return self.relkind in ("r", "p")

    @property
    def owner(self) -> str | None:
        """The DatabaseTable recorded as the owner (``namespace/name``), if any."""
        if self.comment and self.comment.startswith(OWNER_PREFIX):
            return self.comment.removeprefix(OWNER_PREFIX).strip()
        return None


def read_table(conn: psycopg.Connection, schema: str, name: str) -> Table | None:
    """The relation ``schema.name`` as the catalog describes it, or None if there is none."""
    row = conn.execute(
        """
        SELECT c.oid, c.relkind::text, obj_description(c.oid, 'pg_class')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %s AND c.relname = %s
        """,
        (schema, name),
    ).fetchone()
    if row is None:
        return None
    table = Table(oid=row[0], relkind=row[1], comment=row[2])
    if not table.is_table:
        return table
    table.columns = dict(
        conn.execute(
            """
            SELECT attname::text, format_type(atttypid, atttypmod)
            FROM pg_attribute
            WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped
            ORDER BY attnum
            """,
            (table.oid,),
        ).fetchall()
    )
    if table.relkind == "p":
        strategy = conn.execute(
            "SELECT partstrat::text FROM pg_partitioned_table WHERE partrelid = %s", (table.oid,)
        ).fetchone()
        code = str(strategy[0]) if strategy else "?"
        table.strategy = STRATEGIES.get(code, f"unknown ({code})")
        # partattrs holds 0 for an expression key; it then matches no column.
        table.key = [
            name or ""
            for (name,) in conn.execute(
                """
                SELECT a.attname::text
                FROM pg_partitioned_table p
                CROSS JOIN LATERAL unnest(p.partattrs::int2[]) WITH ORDINALITY AS k(attnum, ord)
                LEFT JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.attnum
                WHERE p.partrelid = %s
                ORDER BY k.ord
                """,
                (table.oid,),
            ).fetchall()
        ]
        table.partitions = [
            Partition(schema, name, bound)
            for schema, name, bound in conn.execute(
                """
                SELECT n.nspname::text, c.relname::text, pg_get_expr(c.relpartbound, c.oid)
                FROM pg_inherits i
                JOIN pg_class c ON c.oid = i.inhrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE i.inhparent = %s
                ORDER BY length(c.relname), c.relname
                """,
                (table.oid,),
            ).fetchall()
        ]
    return table


def has_rows(conn: psycopg.Connection, schema: str, name: str) -> bool:
    """Whether the table (with its partitions) holds at least one row."""
    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.Identifier(schema, name))
    row = conn.execute(query).fetchone()
    return bool(row and row[0])


def count_rows(conn: psycopg.Connection, schema: str, name: str) -> int:
    """Exact row count. A full scan: fine for the tables of a walkthrough, not for huge ones."""
    query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, name))
    row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0

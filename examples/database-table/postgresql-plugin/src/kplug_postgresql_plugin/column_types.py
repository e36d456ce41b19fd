"""The DatabaseTable column types and the PostgreSQL types they map to.

The same small set of portable type names is used by every database-table
plugin (MariaDB, SQLite, PostgreSQL); each maps it to its own database.
Keep this table and the one in README.md in step.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql


@dataclass(frozen=True)
class PgType:
    """A PostgreSQL type: how DDL spells it, and how the catalog reports it.

    ``ddl`` goes into CREATE/ALTER statements; ``catalog`` is what
    ``format_type(atttypid, atttypmod)`` returns for a column of that type,
    which is what an existing column is compared with.
    """

    ddl: str
    catalog: str


COLUMN_TYPES: dict[str, PgType] = {
    "int32": PgType("integer", "integer"),
    "int64": PgType("bigint", "bigint"),
    # PostgreSQL has no unsigned integers. numeric(20,0) holds every uint64
    # (0 .. 18446744073709551615, 20 digits) exactly; it does not reject
    # negative numbers, and is slower than bigint.
    "uint64": PgType("numeric(20,0)", "numeric(20,0)"),
    "string": PgType("text", "text"),
    "bool": PgType("boolean", "boolean"),
    "float64": PgType("double precision", "double precision"),
    # An instant: stored in UTC, shown in the session's time zone.
    "timestamp": PgType("timestamptz", "timestamp with time zone"),
}

ALLOWED_TYPES = ", ".join(COLUMN_TYPES)
"""The allowed type names, for error messages."""

_NUMERIC = {"integer", "bigint", "numeric(20,0)", "double precision", "smallint", "real"}


def pg_type(column_type: str) -> PgType | None:
    """The PostgreSQL type for a DatabaseTable column type, or None if it is not one."""
    return COLUMN_TYPES.get(column_type)


def using_expression(column: str, from_catalog: str, to: PgType) -> sql.Composable:
    """The ``USING`` expression that converts ``column`` from its current type to ``to``.

    Direct casts are missing or surprising between some pairs, so:
    - boolean to a number goes through integer (true = 1, false = 0);
    - a number to boolean is ``<> 0``;
    - anything else goes through text, which works for every pair of our
      types and fails, rather than silently truncating, when a value does not
      fit (e.g. 1.5 into an integer column, 'abc' into a boolean one).
      Such a failure rolls the whole reconcile back; the column keeps its data.
    """
    ident = sql.Identifier(column)
    target = sql.SQL(to.ddl)
    if from_catalog == "boolean" and to.catalog in _NUMERIC:
        return sql.SQL("{}::integer::{}").format(ident, target)
    if from_catalog in _NUMERIC and to.catalog == "boolean":
        return sql.SQL("({} <> 0)").format(ident)
    return sql.SQL("{}::text::{}").format(ident, target)

"""The desired table, read and validated from a DatabaseTable and its extension.

Everything is checked here, before the plugin connects to the database, and
all problems are reported at once: a spec that fails validation changes
nothing anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kplug

from kplug_postgresql_plugin.column_types import ALLOWED_TYPES, PgType, pg_type

EXTENSION_KIND = "DatabaseTablePostgreSqlExtension"
SCHEMA = "public"

# Unquoted-safe PostgreSQL identifiers: lowercase, so the names users see in
# psql are the names in the spec (no quoting surprises). PostgreSQL truncates
# identifiers beyond NAMEDATALEN - 1 = 63 bytes; we refuse them instead.
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
MAX_IDENTIFIER = 63
# Columns every PostgreSQL table already has; a user column cannot take these names.
SYSTEM_COLUMNS = frozenset({"tableoid", "xmin", "cmin", "xmax", "cmax", "ctid", "oid"})
MAX_PARTITIONS = 1024
DEFAULT_PARTITIONS = 4
PARTITION_STRATEGIES = ("none", "hash", "range", "list")


class SpecError(Exception):
    """The DatabaseTable (or its extension) asks for something this plugin cannot do."""


@dataclass(frozen=True)
class Column:
    name: str
    type_name: str  # the DatabaseTable type, e.g. "int64"
    pg: PgType


@dataclass(frozen=True)
class Partitioning:
    """``strategy`` "none" or "hash"; ``partitions`` is 0 for "none"."""

    strategy: str
    partitions: int
    key: str | None  # the partition key column (hash: the first column)

    def describe(self) -> str:
        if self.strategy == "none":
            return "not partitioned"
        return f"{self.strategy}-partitioned by {self.key} into {self.partitions} partitions"


@dataclass(frozen=True)
class TableRef:
    """Which table a DatabaseTable is about, and where: enough to find or drop it."""

    owner: str  # "<namespace>/<name>" of the DatabaseTable, recorded on the table
    server: str
    schema: str
    name: str

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class TableSpec(TableRef):
    """The table a DatabaseTable asks for."""

    columns: tuple[Column, ...]
    partitioning: Partitioning
    delete_on_finalize: bool

    def partition_name(self, index: int) -> str:
        return f"{self.name}_p{index}"


def table_ref(request: kplug.Request) -> TableRef:
    """The table the request is about (name and server only); SpecError if unusable."""
    return TableRef(
        owner=owner(request),
        server=server_name(request),
        schema=SCHEMA,
        name=table_name(request),
    )


def owner(request: kplug.Request) -> str:
    """How the table records the DatabaseTable that owns it: ``namespace/name``."""
    return f"{request.namespace}/{request.name}"


def server_name(request: kplug.Request) -> str:
    """``spec.serverName``; SpecError if missing."""
    server = request.spec.get("serverName")
    if not isinstance(server, str) or not server:
        raise SpecError(f"DatabaseTable {request.name}: spec.serverName is missing or empty")
    return server


def table_name(request: kplug.Request) -> str:
    """The table name: metadata.name with '-' turned into '_' (as every database-table
    plugin does, see examples/database-table/model); SpecError if still unusable.

    Kubernetes names never contain '_', so two DatabaseTables never map to one name.
    """
    name = request.name.replace("-", "_")
    if not _IDENTIFIER.fullmatch(name) or len(name) > MAX_IDENTIFIER:
        raise SpecError(
            f'DatabaseTable {request.name}: "{request.name}" (metadata.name) does not make a '
            "PostgreSQL table name: the name, with '-' turned into '_', must be lowercase "
            "letters, digits and underscores, starting with a letter or underscore, at most "
            f'{MAX_IDENTIFIER} characters (e.g. "{_suggest(name)}")'
        )
    return name


def deletion_policy(request: kplug.Request) -> str:
    """``spec.deletionPolicy``: "Retain" (the default) or "Delete"."""
    policy = request.spec.get("deletionPolicy") or "Retain"
    if policy not in ("Retain", "Delete"):
        raise SpecError(
            f'DatabaseTable {request.name}: spec.deletionPolicy "{policy}" is not one of '
            "Retain, Delete"
        )
    return str(policy)


def parse(request: kplug.Request) -> TableSpec:
    """Validate the whole request; SpecError listing every problem found."""
    problems: list[str] = []
    name = _collect(table_name, request, problems)
    server = _collect(server_name, request, problems)
    policy = _collect(deletion_policy, request, problems)
    columns = _columns(request.spec.get("columns"), problems)
    partitioning = _partitioning(request, columns, problems)
    if name and partitioning.strategy != "none":
        longest = f"{name}_p{partitioning.partitions - 1}"
        if len(longest) > MAX_IDENTIFIER:
            problems.append(
                f'partition name "{longest}" would be longer than {MAX_IDENTIFIER} characters; '
                "use a shorter metadata.name"
            )
    if problems:
        raise SpecError(f"DatabaseTable {request.namespace}/{request.name}: " + "; ".join(problems))
    return TableSpec(
        owner=owner(request),
        server=server,
        schema=SCHEMA,
        name=name,
        columns=tuple(columns),
        partitioning=partitioning,
        delete_on_finalize=policy == "Delete",
    )


def _collect(
    check: Callable[[kplug.Request], str], request: kplug.Request, problems: list[str]
) -> str:
    """Run one check; on SpecError record its problem (without the object prefix) and return ""."""
    try:
        return check(request)
    except SpecError as e:
        problems.append(str(e).removeprefix(f"DatabaseTable {request.name}: "))
        return ""


def _columns(raw: Any, problems: list[str]) -> list[Column]:
    if not isinstance(raw, list) or not raw:
        problems.append("spec.columns must list at least one column ({name, type})")
        return []
    columns: list[Column] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            problems.append(f"spec.columns[{i}] is not an object with name and type")
            continue
        col_name, type_name = item.get("name"), item.get("type")
        where = f'column "{col_name}"' if isinstance(col_name, str) else f"spec.columns[{i}]"
        ok = True
        if not isinstance(col_name, str) or not _IDENTIFIER.fullmatch(col_name):
            problems.append(
                f"{where}: the name must be lowercase letters, digits and underscores, "
                "starting with a letter or underscore"
            )
            ok = False
        elif len(col_name) > MAX_IDENTIFIER:
            problems.append(f"{where}: the name is longer than {MAX_IDENTIFIER} characters")
            ok = False
        elif col_name in SYSTEM_COLUMNS:
            problems.append(f"{where}: the name is a PostgreSQL system column; choose another")
            ok = False
        elif col_name in seen:
            problems.append(f"{where} is listed twice")
            ok = False
        mapped = pg_type(type_name) if isinstance(type_name, str) else None
        if mapped is None:
            problems.append(
                f'{where} has unknown type "{type_name}"; the allowed types are {ALLOWED_TYPES}'
            )
            ok = False
        if ok and isinstance(col_name, str) and isinstance(type_name, str) and mapped:
            seen.add(col_name)
            columns.append(Column(col_name, type_name, mapped))
    return columns


def _partitioning(
    request: kplug.Request, columns: list[Column], problems: list[str]
) -> Partitioning:
    extension = request.extension(EXTENSION_KIND)
    # No extension: the defaults (a plain table).
    spec = (extension or {}).get("spec") or {}
    where = f"{EXTENSION_KIND} {(extension or {}).get('metadata', {}).get('name', '')}".strip()
    strategy = spec.get("partitionBy") or "none"
    partitions = spec.get("partitions", DEFAULT_PARTITIONS)
    if strategy not in PARTITION_STRATEGIES:
        problems.append(
            f'{where}: partitionBy "{strategy}" is not one of {", ".join(PARTITION_STRATEGIES)}'
        )
        return Partitioning("none", 0, None)
    if strategy in ("range", "list"):
        problems.append(
            f'{where}: partitionBy "{strategy}" is not supported by this plugin yet (it needs '
            "partition bounds the extension cannot express); use hash or none"
        )
        return Partitioning("none", 0, None)
    if strategy == "none":
        return Partitioning("none", 0, None)
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        problems.append(f"{where}: partitions must be an integer, got {partitions!r}")
        return Partitioning("none", 0, None)
    if not 1 <= partitions <= MAX_PARTITIONS:
        problems.append(f"{where}: partitions must be between 1 and {MAX_PARTITIONS}")
        return Partitioning("none", 0, None)
    key = columns[0].name if columns else None
    return Partitioning("hash", partitions, key)


def _suggest(name: str) -> str:
    suggestion = re.sub(r"[^a-z0-9_]", "_", name.lower())[:MAX_IDENTIFIER]
    return suggestion if _IDENTIFIER.fullmatch(suggestion) else f"t_{suggestion}"[:MAX_IDENTIFIER]

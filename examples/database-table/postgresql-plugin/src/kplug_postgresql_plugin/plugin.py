"""The kplug plugin: Reconcile and Finalize for myorg.org DatabaseTable in PostgreSQL."""

from __future__ import annotations

import logging

import kplug
import psycopg

from kplug_postgresql_plugin import reconcile as db
from kplug_postgresql_plugin.config import ConfigError, UnknownServerError, load_servers
from kplug_postgresql_plugin.spec import (
    EXTENSION_KIND,
    SpecError,
    TableSpec,
    deletion_policy,
    parse,
    table_ref,
)

logger = logging.getLogger(__name__)

GROUP = "myorg.org"
CONDITION = "TableReady"

INFO = kplug.PluginInfo(
    name="postgresql",
    version="0.1.0",
    description="DatabaseTable in PostgreSQL: columns, hash partitioning, deletion policy",
    offers=[
        kplug.Offer(
            base=kplug.GroupKind(GROUP, "DatabaseTable"),
            implementation="PostgreSQL",
            extensions=[kplug.GroupKind(GROUP, EXTENSION_KIND)],
        )
    ],
    finalize=True,
)


class PostgreSQLPlugin(kplug.Plugin):
    """Plain ``def`` handlers: the SDK runs them in worker threads, so the blocking
    psycopg driver does not stall the event loop."""

    def reconcile(self, request: kplug.Request) -> kplug.Response:
        try:
            spec = parse(request)
        except SpecError as e:
            return _failed("InvalidSpec", str(e))
        try:
            dsn = load_servers().dsn(spec.server)
        except UnknownServerError as e:
            return _failed("UnknownServer", f"DatabaseTable {spec.owner}: {e}")
        except ConfigError as e:
            return _failed("InvalidPluginConfig", f"DatabaseTable {spec.owner}: {e}")
        try:
            with db.connect(dsn, spec.server) as conn:
                outcome = db.reconcile(conn, spec)
        except db.ReconcileError as e:
            return _failed(e.reason, str(e))
        except psycopg.Error as e:
            # e.g. the connection dropped while reading the row counts.
            return _failed(
                "DatabaseError",
                f"table {spec.qualified} on server {spec.server}: {' '.join(str(e).split())}",
            )
        return _ok(request, spec, outcome)

    def finalize(self, request: kplug.Request) -> kplug.Response:
        try:
            policy = deletion_policy(request)
        except SpecError as e:
            return kplug.Response.failed(f"{e}; set it to Retain or Delete to let the object go")
        try:
            ref = table_ref(request)
        except SpecError as e:
            # Without a valid name or server no table was ever created for it.
            return kplug.Response.ok(f"nothing to clean up: {e}")
        if policy == "Retain":
            return kplug.Response.ok(
                f"deletionPolicy is Retain: table {ref.qualified} on server {ref.server} is kept"
            )
        retain_hint = (
            "; or set spec.deletionPolicy to Retain to keep the table and let the object go"
        )
        try:
            dsn = load_servers().dsn(ref.server)
            with db.connect(dsn, ref.server) as conn:
                dropped = db.drop(conn, ref)
        except (ConfigError, db.ReconcileError) as e:
            return kplug.Response.failed(
                f"cannot drop table {ref.qualified} (deletionPolicy: Delete): {e}{retain_hint}"
            )
        except psycopg.Error as e:
            return kplug.Response.failed(
                f"dropping table {ref.qualified} on server {ref.server} failed: "
                f"{' '.join(str(e).split())}{retain_hint}"
            )
        if not dropped:
            return kplug.Response.ok(
                f"deletionPolicy is Delete: table {ref.qualified} on server {ref.server} "
                "does not exist; nothing to drop"
            )
        message = f"deletionPolicy is Delete: dropped table {ref.qualified} on server {ref.server}"
        return kplug.Response.ok(message).event("TableDropped", message)


def _failed(reason: str, message: str) -> kplug.Response:
    logger.warning("%s: %s", reason, message)
    return kplug.Response.failed(message).condition(CONDITION, False, reason, message)


def _ok(request: kplug.Request, spec: TableSpec, outcome: db.Outcome) -> kplug.Response:
    stats = outcome.stats
    summary = (
        f"table {spec.qualified} on server {spec.server}: {stats.columns} columns, "
        f"{spec.partitioning.describe()}"
    )
    # The message and the condition say how the table is, not what this call
    # did (the Events do): the same answer for an unchanged table on every
    # reconcile is no status write (docs/plugin-authors.md, "What an answer
    # costs").
    response = kplug.Response.ok(
        summary,
        status={"table": spec.qualified, "columns": stats.columns, "server": spec.server},
    ).condition(CONDITION, True, "UpToDate", summary)
    # Every extension of our kind gets the status (normally there is one).
    for extension in request.extensions_of(EXTENSION_KIND):
        response.extension_status(
            extension,
            {
                "partitionBy": spec.partitioning.strategy,
                "partitions": len(stats.rows_per_partition),
                "rowsPerPartition": stats.rows_per_partition,
                "rows": stats.rows,
            },
        )
    for change in outcome.changes:
        response.event(change.reason, change.message)
    return response

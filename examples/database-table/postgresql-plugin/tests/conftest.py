"""Fixtures: a real PostgreSQL database, the plugin as a real process on a real socket.

Nothing here is mocked. The tests need the PostgreSQL server that
``examples/database-table/dev/databases.sh start`` runs, found through
``KPLUG_POSTGRES_DSN``; without it they fail (they never skip). Each test
session works in a database of its own, created here and dropped at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from kplug._proto import plugin_pb2, plugin_pb2_grpc, types_pb2
from psycopg import conninfo, sql

DSN_ENV = "KPLUG_POSTGRES_DSN"
HOW_TO_START = (
    "start the test databases with `examples/database-table/dev/databases.sh install && "
    "examples/database-table/dev/databases.sh start`, then "
    '`eval "$(examples/database-table/dev/databases.sh env)"` (from the repository root)'
)
SERVER = "main"
# A configured server nothing listens on (port 1 on loopback refuses at once).
DOWN_SERVER = "down"
DOWN_DSN = "postgresql://kplug:kplug@127.0.0.1:1/kplug?connect_timeout=2"
GROUP_VERSION = "myorg.org/v1alpha1"
NAMESPACE = "shop"


# ----------------------------------------------------------- the database ---


@pytest.fixture(scope="session")
def admin_dsn() -> str:
    """The DSN of the kplug database on the test server; fails (never skips) without one."""
    dsn = os.environ.get(DSN_ENV)
    if not dsn:
        pytest.fail(f"{DSN_ENV} is not set: {HOW_TO_START}", pytrace=False)
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as e:
        pytest.fail(f"cannot connect to {DSN_ENV}={dsn}: {e}\n{HOW_TO_START}", pytrace=False)
    return dsn


@pytest.fixture(scope="session")
def test_dsn(admin_dsn: str) -> Iterator[str]:
    """A database of this test session's own (the kplug user may create kplug_* ones)."""
    name = f"kplug_pgplugin_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield conninfo.make_conninfo(admin_dsn, dbname=name)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def db(test_dsn: str) -> Iterator[psycopg.Connection]:
    """A connection to the test database, to look at what the plugin did."""
    with psycopg.connect(test_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A table name unique to the test, readable in failures: t_<test>_<random>."""
    base = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower()).removeprefix("test_")
    return f"t_{base[:40]}_{uuid.uuid4().hex[:6]}"


# ------------------------------------------------------- the plugin process ---


@dataclass
class Result:
    """A Reconcile/Finalize answer, decoded."""

    outcome: str  # OK, RETRY, FAILED
    message: str
    status: dict[str, Any]
    extension_statuses: dict[str, dict[str, Any]]  # by extension name
    conditions: dict[str, tuple[str, str, str]]  # type -> (status, reason, message)
    events: list[tuple[str, str]]  # (reason, message)

    @property
    def event_reasons(self) -> list[str]:
        return [reason for reason, _ in self.events]


def _decode(
    response: plugin_pb2.ReconcileResponse | plugin_pb2.FinalizeResponse,
) -> Result:
    outcome = types_pb2.Outcome.Name(response.outcome).removeprefix("OUTCOME_")
    status: dict[str, Any] = {}
    extension_statuses: dict[str, dict[str, Any]] = {}
    conditions: dict[str, tuple[str, str, str]] = {}
    if isinstance(response, plugin_pb2.ReconcileResponse):
        status = json.loads(response.status) if response.status else {}
        extension_statuses = {
            s.target.name: json.loads(s.status) for s in response.extension_statuses
        }
        conditions = {
            c.type: (
                types_pb2.ConditionStatus.Name(c.status).removeprefix("CONDITION_STATUS_"),
                c.reason,
                c.message,
            )
            for c in response.conditions
        }
    events = [(e.reason, e.message) for e in response.events]
    return Result(outcome, response.message, status, extension_statuses, conditions, events)


def table_object(
    name: str,
    columns: list[tuple[str, str]],
    *,
    deletion_policy: str | None = None,
    server: str = SERVER,
    partition_by: str | None = None,
    partitions: int | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A DatabaseTable (and its PostgreSQL extension when partitioning is given), as the
    operator would send them."""
    spec: dict[str, Any] = {
        "serverName": server,
        "columns": [{"name": n, "type": t} for n, t in columns],
    }
    if deletion_policy is not None:
        spec["deletionPolicy"] = deletion_policy
    extensions: list[dict[str, Any]] = []
    if partition_by is not None or partitions is not None:
        ext_spec: dict[str, Any] = {}
        if partition_by is not None:
            ext_spec["partitionBy"] = partition_by
        if partitions is not None:
            ext_spec["partitions"] = partitions
        extensions.append(
            {
                "apiVersion": GROUP_VERSION,
                "kind": "DatabaseTablePostgreSqlExtension",
                "metadata": {"name": f"{name}-pg", "namespace": NAMESPACE},
                "spec": ext_spec,
            }
        )
        spec["extensions"] = [
            {
                "apiVersion": GROUP_VERSION,
                "kind": "DatabaseTablePostgreSqlExtension",
                "name": f"{name}-pg",
            }
        ]
    obj = {
        "apiVersion": GROUP_VERSION,
        "kind": "DatabaseTable",
        "metadata": {"name": name, "namespace": NAMESPACE, "generation": 1},
        "spec": spec,
    }
    return obj, extensions


def reconcile_request(
    obj: dict[str, Any], extensions: Sequence[dict[str, Any]] = ()
) -> plugin_pb2.ReconcileRequest:
    """The Reconcile call the operator makes for ``obj``."""
    return plugin_pb2.ReconcileRequest(
        implementation="PostgreSQL",
        object=json.dumps(obj).encode(),
        extensions=[json.dumps(e).encode() for e in extensions],
    )


@dataclass
class PluginProcess:
    """``python -m kplug_postgresql_plugin`` serving on
    ``<socket_dir>/plugins/postgresql/plugin.sock``."""

    socket_dir: Path
    env: dict[str, str]
    process: subprocess.Popen[str] | None = None
    lines: list[str] = field(default_factory=list)
    _channel: grpc.Channel | None = None
    _new_line: threading.Condition = field(default_factory=threading.Condition)

    @property
    def socket(self) -> Path:
        return self.socket_dir / "plugins" / "postgresql" / "plugin.sock"

    def start(self, timeout: float = 20) -> PluginProcess:
        self.lines.clear()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kplug_postgresql_plugin"],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._read_log, args=(self.process,), daemon=True).start()
        self._channel = grpc.insecure_channel(f"unix:{self.socket}")
        self.wait_for_log("serving on", timeout)
        # The handshake the operator does first.
        info = self.stub.GetInfo(plugin_pb2.GetInfoRequest(), timeout=5)
        assert info.name == "postgresql"
        return self

    @property
    def stub(self) -> plugin_pb2_grpc.PluginStub:
        assert self._channel is not None, "the plugin is not started"
        return plugin_pb2_grpc.PluginStub(self._channel)

    def _read_log(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            with self._new_line:
                self.lines.append(line.rstrip("\n"))
                self._new_line.notify_all()

    def wait_for_log(self, text: str, timeout: float = 20) -> str:
        """Wait for a log line containing ``text``; fail with the log if it does not come."""
        deadline = time.monotonic() + timeout
        with self._new_line:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                assert self.process is not None
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    log = "\n".join(self.lines)
                    raise AssertionError(
                        f"the plugin did not log {text!r} (exit status {self.process.poll()}); "
                        f"its log:\n{log}"
                    )
                self._new_line.wait(min(remaining, 0.2))

    def reconcile(self, obj: dict[str, Any], extensions: Sequence[dict[str, Any]] = ()) -> Result:
        return _decode(self.stub.Reconcile(reconcile_request(obj, extensions), timeout=60))

    def finalize(self, obj: dict[str, Any], extensions: Sequence[dict[str, Any]] = ()) -> Result:
        deleting = {
            **obj,
            "metadata": {**obj["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
        }
        request = plugin_pb2.FinalizeRequest(
            implementation="PostgreSQL",
            object=json.dumps(deleting).encode(),
            extensions=[json.dumps(e).encode() for e in extensions],
        )
        return _decode(self.stub.Finalize(request, timeout=60))

    def kill(self) -> None:
        """SIGKILL, as a crash. The channel stays open: calls in flight must end
        because the transport drops (UNAVAILABLE), as the operator sees it, not
        because this client closed its own channel (CANCELLED). Call
        :meth:`close` when done with it."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> int:
        """SIGTERM, as Kubernetes stops a container; returns the exit status."""
        assert self.process is not None
        self.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def close(self) -> None:
        """Close this client's channel to the plugin (calls in flight are cancelled)."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None


@pytest.fixture(scope="session")
def plugin_env(test_dsn: str) -> Iterator[dict[str, str]]:
    """The plugin's environment: "main" from a servers file, "down" inline."""
    work = Path(tempfile.mkdtemp(prefix="kplug-pg-", dir="/tmp"))
    servers_file = work / "servers.json"
    servers_file.write_text(json.dumps({SERVER: test_dsn}))
    env = {
        **os.environ,
        "KPLUG_POSTGRES_SERVERS_FILE": str(servers_file),
        "KPLUG_POSTGRES_SERVERS": json.dumps({DOWN_SERVER: DOWN_DSN}),
        # No operator in these tests: the heartbeats fail and retry quietly.
        "KPLUG_HEARTBEAT_INTERVAL": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("KPLUG_PG_TEST_DELAY_AFTER_FIRST_DDL", None)
    yield env
    shutil.rmtree(work, ignore_errors=True)


def new_socket_dir() -> Path:
    # Not pytest's tmp_path: Unix socket paths must stay under 108 bytes.
    return Path(tempfile.mkdtemp(prefix="kplug-pg-sock-", dir="/tmp"))


@pytest.fixture(scope="session")
def plugin(plugin_env: dict[str, str]) -> Iterator[PluginProcess]:
    """The plugin, one process for the session; stopped with SIGTERM at the end."""
    socket_dir = new_socket_dir()
    process = PluginProcess(socket_dir, {**plugin_env, "KPLUG_SOCKET_DIR": str(socket_dir)})
    process.start()
    yield process
    status = process.stop()
    shutil.rmtree(socket_dir, ignore_errors=True)
    assert status == 0, "the plugin did not exit cleanly on SIGTERM:\n" + "\n".join(process.lines)


# ------------------------------------------------------ looking at the table ---


def columns(db: psycopg.Connection, table: str) -> list[tuple[str, str]]:
    """(column, type) from information_schema, in column order; uint64 shows as
    numeric(20,0)."""
    rows = db.execute(
        """
        SELECT column_name::text,
               CASE WHEN data_type = 'numeric'
                    THEN format('numeric(%%s,%%s)', numeric_precision, numeric_scale)
                    ELSE data_type::text END
        FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name = %s
        ORDER BY ordinal_position
        """,
        (table,),
    ).fetchall()
    return [(str(n), str(t)) for n, t in rows]


def table_exists(db: psycopg.Connection, table: str) -> bool:
    row = db.execute("SELECT to_regclass(%s) IS NOT NULL", (f"public.{table}",)).fetchone()
    return bool(row and row[0])


def catalog_snapshot(db: psycopg.Connection, table: str) -> dict[str, Any]:
    """Everything DDL on the table would change, down to the catalog rows' xmin (the
    transaction that last wrote them): equal snapshots mean no DDL touched the table."""
    rows = db.execute(
        """
        SELECT c.oid::int, c.relfilenode::int, c.xmin::text, c.relkind::text,
               obj_description(c.oid, 'pg_class')
        FROM pg_class c
        WHERE c.oid = to_regclass(%s)
           OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(%s))
        ORDER BY c.relname
        """,
        (f"public.{table}", f"public.{table}"),
    ).fetchall()
    attributes = db.execute(
        """
        SELECT attrelid::int, attnum::int, attname::text, atttypid::int, atttypmod,
               attisdropped, xmin::text
        FROM pg_attribute
        WHERE attnum > 0 AND (attrelid = to_regclass(%s)
           OR attrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(%s)))
        ORDER BY attrelid, attnum
        """,
        (f"public.{table}", f"public.{table}"),
    ).fetchall()
    comments = db.execute(
        """
        SELECT objoid::int, description, xmin::text FROM pg_description
        WHERE classoid = 'pg_class'::regclass AND objsubid = 0
          AND (objoid = to_regclass(%s)
           OR objoid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(%s)))
        ORDER BY objoid
        """,
        (f"public.{table}", f"public.{table}"),
    ).fetchall()
    return {"relations": rows, "attributes": attributes, "comments": comments}

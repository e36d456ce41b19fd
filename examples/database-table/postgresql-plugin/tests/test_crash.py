"""A plugin killed (SIGKILL) in the middle of a reconcile leaves nothing half-applied, and a
restarted plugin converges."""

from __future__ import annotations

import shutil
import time

import grpc
import psycopg
import pytest
from psycopg import sql

from .conftest import (
    PluginProcess,
    catalog_snapshot,
    columns,
    new_socket_dir,
    reconcile_request,
    table_object,
)

BEFORE = [("id", "int64"), ("email", "string"), ("age", "int32")]
AFTER = [("id", "int64"), ("age", "int64"), ("active", "bool"), ("created_at", "timestamp")]


def plugin_backends(db: psycopg.Connection) -> int:
    row = db.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE application_name = 'kplug-postgresql-plugin' AND datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def test_killed_mid_reconcile_then_restarted_converges(
    plugin: PluginProcess, plugin_env: dict[str, str], db: psycopg.Connection, name: str
) -> None:
    assert plugin.reconcile(*table_object(name, BEFORE)).outcome == "OK"
    db.execute(
        sql.SQL("INSERT INTO {} VALUES (1, 'ada@example.org', 36)").format(sql.Identifier(name))
    )
    before = catalog_snapshot(db, name)
    socket_dir = new_socket_dir()
    env = {**plugin_env, "KPLUG_SOCKET_DIR": str(socket_dir)}
    slow = PluginProcess(socket_dir, {**env, "KPLUG_PG_TEST_DELAY_AFTER_FIRST_DDL": "60"}).start()
    try:
        # Four statements to run (drop email, retype age, add two); stop after the first.
        call = slow.stub.Reconcile.future(reconcile_request(*table_object(name, AFTER)), timeout=60)
        slow.wait_for_log("sleeping 60s after the first DDL statement")
        assert plugin_backends(db) == 1
        slow.kill()
        with pytest.raises(grpc.RpcError) as error:
            call.result(timeout=10)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE

        # PostgreSQL notices the dead client and rolls its transaction back.
        deadline = time.monotonic() + 10
        while plugin_backends(db) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert plugin_backends(db) == 0
        assert catalog_snapshot(db, name) == before  # not even the first statement stayed

        # The restarted plugin finds the dead instance's socket file, takes it over,
        # and the operator's retry converges.
        assert slow.socket.exists()
        restarted = PluginProcess(socket_dir, env).start()
        try:
            result = restarted.reconcile(*table_object(name, AFTER))
            assert result.outcome == "OK", result.message
            assert result.event_reasons == ["ColumnsDropped", "ColumnsRetyped", "ColumnsAdded"]
            assert columns(db, name) == [
                ("id", "bigint"),
                ("age", "bigint"),
                ("active", "boolean"),
                ("created_at", "timestamp with time zone"),
            ]
            assert db.execute(
                sql.SQL("SELECT id, age FROM {}").format(sql.Identifier(name))
            ).fetchall() == [(1, 36)]
            again = restarted.reconcile(*table_object(name, AFTER))
            assert again.events == []
        finally:
            assert restarted.stop() == 0
    finally:
        if slow.process is not None and slow.process.poll() is None:
            slow.kill()
        slow.close()
        shutil.rmtree(socket_dir, ignore_errors=True)

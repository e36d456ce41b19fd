"""Finalize honours spec.deletionPolicy; checked by looking for the table in PostgreSQL."""

from __future__ import annotations

import psycopg

from .conftest import NAMESPACE, PluginProcess, table_exists, table_object

COLUMNS = [("id", "int64"), ("email", "string")]


def test_retain_keeps_the_table(plugin: PluginProcess, db: psycopg.Connection, name: str) -> None:
    for policy in (None, "Retain"):  # Retain is the default
        obj, extensions = table_object(name, COLUMNS, deletion_policy=policy)
        assert plugin.reconcile(obj, extensions).outcome == "OK"

        result = plugin.finalize(obj, extensions)

        assert result.outcome == "OK", result.message
        assert result.message == (
            f"deletionPolicy is Retain: table public.{name} on server main is kept"
        )
        assert table_exists(db, name)


def test_delete_drops_the_table_and_its_partitions(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    obj, extensions = table_object(
        name, COLUMNS, deletion_policy="Delete", partition_by="hash", partitions=2
    )
    assert plugin.reconcile(obj, extensions).outcome == "OK"
    assert table_exists(db, f"{name}_p1")

    result = plugin.finalize(obj, extensions)

    assert result.outcome == "OK", result.message
    assert f"dropped table public.{name} on server main" in result.message
    assert result.event_reasons == ["TableDropped"]
    assert not table_exists(db, name)
    assert not table_exists(db, f"{name}_p0")
    assert not table_exists(db, f"{name}_p1")

    # Finalize again (the operator retries when unsure): done, nothing to drop.
    again = plugin.finalize(obj, extensions)
    assert again.outcome == "OK", again.message
    assert "does not exist; nothing to drop" in again.message


def test_delete_leaves_another_databasetables_table(
    plugin: PluginProcess, db: psycopg.Connection, name: str
) -> None:
    assert plugin.reconcile(*table_object(name, COLUMNS)).outcome == "OK"
    obj, extensions = table_object(name, COLUMNS, deletion_policy="Delete")
    obj["metadata"]["namespace"] = "other"

    result = plugin.finalize(obj, extensions)

    assert result.outcome == "FAILED"
    assert f"belongs to DatabaseTable {NAMESPACE}/{name}, not other/{name}" in result.message
    assert "set spec.deletionPolicy to Retain" in result.message
    assert table_exists(db, name)


def test_delete_on_an_unknown_server_keeps_the_finalizer(plugin: PluginProcess, name: str) -> None:
    obj, extensions = table_object(name, COLUMNS, deletion_policy="Delete", server="nowhere")
    result = plugin.finalize(obj, extensions)
    assert result.outcome == "FAILED"
    assert 'server "nowhere" is not configured' in result.message
    assert "set spec.deletionPolicy to Retain" in result.message


def test_retain_needs_no_server(plugin: PluginProcess, name: str) -> None:
    # Retain never connects: an object whose server is gone can still be deleted.
    obj, extensions = table_object(name, COLUMNS, server="nowhere")
    result = plugin.finalize(obj, extensions)
    assert result.outcome == "OK", result.message
    assert "is kept" in result.message

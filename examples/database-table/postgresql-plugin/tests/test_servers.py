"""How the plugin finds the server behind spec.serverName."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kplug_postgresql_plugin.config import (
    SERVERS_ENV,
    SERVERS_FILE_ENV,
    ConfigError,
    UnknownServerError,
    load_servers,
)

from .conftest import PluginProcess, table_object


def test_an_unknown_server_fails_naming_it_and_where_the_plugin_looked(
    plugin: PluginProcess, name: str
) -> None:
    result = plugin.reconcile(*table_object(name, [("id", "int64")], server="analytics"))
    assert result.outcome == "FAILED"
    assert 'server "analytics" is not configured for the PostgreSQL plugin' in result.message
    assert SERVERS_FILE_ENV in result.message
    assert SERVERS_ENV in result.message
    assert "found down, main" in result.message  # what it knows, never their DSNs
    assert "kplug:kplug" not in result.message
    assert result.conditions["TableReady"][:2] == ("FALSE", "UnknownServer")


def test_a_server_that_is_down_fails_with_the_reason(plugin: PluginProcess, name: str) -> None:
    result = plugin.reconcile(*table_object(name, [("id", "int64")], server="down"))
    assert result.outcome == "FAILED"
    assert 'cannot connect to PostgreSQL server "down"' in result.message
    assert "refused" in result.message.lower()
    assert result.conditions["TableReady"][:2] == ("FALSE", "ServerUnavailable")


def test_the_inline_map_wins_over_the_file(tmp_path: Path) -> None:
    servers_file = tmp_path / "servers.json"
    servers_file.write_text(json.dumps({"a": "postgresql://file/a", "b": "postgresql://file/b"}))
    servers = load_servers(
        {SERVERS_FILE_ENV: str(servers_file), SERVERS_ENV: '{"b": "postgresql://env/b"}'}
    )
    assert servers.dsn("a") == "postgresql://file/a"
    assert servers.dsn("b") == "postgresql://env/b"
    with pytest.raises(UnknownServerError, match=r'server "c" is not configured.*found a, b'):
        servers.dsn("c")


def test_nothing_configured_says_so() -> None:
    with pytest.raises(UnknownServerError) as error:
        load_servers({}).dsn("main")
    assert f"{SERVERS_FILE_ENV} (not set) and {SERVERS_ENV} (not set)" in str(error.value)
    assert "found none" in str(error.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "is not valid JSON"),
        ('["postgresql://x"]', "must be a JSON object mapping server names"),
        ('{"main": 5432}', "must be a JSON object mapping server names"),
    ],
)
def test_a_malformed_map_is_an_error_naming_its_source(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=f"{SERVERS_ENV} {problem}"):
        load_servers({SERVERS_ENV: text})


def test_an_unreadable_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match=f"cannot read {SERVERS_FILE_ENV}={missing}"):
        load_servers({SERVERS_FILE_ENV: str(missing)})

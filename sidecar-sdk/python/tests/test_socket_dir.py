"""The socket dir, as a new user meets it.

A plugin started before its operator (or beside the wrong directory) says once, at warning
level, where it looks for the registry and where that came from; a socket dir that does not
exist is a start-up error, and is never created; a plugin that stops cleanly leaves no socket
and no empty directory behind.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

import kplug
from kplug.protocol import registry_waiting_message, socket_dir_missing_message

from .conftest import FakeRegistry

INFO = kplug.PluginInfo(
    name="quiet",
    version="1.0.0",
    offers=[kplug.Offer(kplug.GroupKind("example.com", "Greeting"), "Quiet")],
)


class Quiet(kplug.Plugin):
    def reconcile(self, request: kplug.Request) -> kplug.Response:
        return kplug.Response.ok()


def records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


@pytest.mark.parametrize("origin", ["environment", "program"])
async def test_without_a_registry_it_warns_once_where_it_looks_then_retries_at_debug(
    origin: str,
    socket_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="kplug")
    if origin == "environment":
        monkeypatch.setenv("KPLUG_SOCKET_DIR", str(socket_dir))
        server = kplug.PluginServer(Quiet(), INFO, heartbeat_interval=0.2)
    else:
        monkeypatch.delenv("KPLUG_SOCKET_DIR", raising=False)
        server = kplug.PluginServer(Quiet(), INFO, socket_dir=socket_dir, heartbeat_interval=0.2)
    await server.start()
    try:
        await asyncio.sleep(1.2)  # retries after 0.1, 0.2, 0.2, 0.2... s
    finally:
        await server.stop(grace=0)

    want = registry_waiting_message(
        socket_dir, "environment" if origin == "environment" else "program"
    )
    warned = records(caplog, want)
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    assert warned[0].levelno == logging.WARNING
    assert str(socket_dir / "registry.sock") in want
    if origin == "environment":
        assert "(from KPLUG_SOCKET_DIR)" in want
    else:
        assert "set by the program" in want
    retries = records(caplog, "heartbeat failed")
    assert len(retries) >= 3
    assert all(r.levelno == logging.DEBUG for r in retries)
    assert not [
        r for r in caplog.records if r.levelno == logging.INFO and "registry" in r.getMessage()
    ]


async def test_the_warning_is_only_for_a_missing_registry_before_the_operator_answered(
    socket_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = await FakeRegistry(socket_dir).start()
    server = kplug.PluginServer(Quiet(), INFO, socket_dir=socket_dir, heartbeat_interval=0.1)
    await server.start()
    try:
        await registry.wait_for("heartbeats", timeout=3)
        await registry.stop()
        await asyncio.sleep(0.5)
    finally:
        await server.stop(grace=0)
    assert not records(caplog, "no operator registry")
    lost = records(caplog, "lost the operator")
    assert len(lost) == 1
    assert lost[0].levelno == logging.WARNING


async def test_a_missing_socket_dir_is_a_start_up_error_and_is_not_created(
    socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = socket_dir / "sockets"
    monkeypatch.setenv("KPLUG_SOCKET_DIR", str(missing))
    server = kplug.PluginServer(Quiet(), INFO, heartbeat_interval=60)
    with pytest.raises(kplug.StartupError) as raised:
        await server.start()
    want = socket_dir_missing_message(missing, "environment")
    assert str(raised.value) == f"plugin quiet: {want}"
    assert "KPLUG_SOCKET_DIR" in want
    assert not missing.exists(), "neither the socket dir nor plugins/ is made"

    server = kplug.PluginServer(Quiet(), INFO, socket_dir=missing, heartbeat_interval=60)
    with pytest.raises(kplug.StartupError, match="set by the program"):
        await server.start()
    assert not missing.exists()

    # plugins/ in an existing socket dir is the plugin's to create.
    server = kplug.PluginServer(Quiet(), INFO, socket_dir=socket_dir, heartbeat_interval=60)
    await server.start()
    await server.stop(grace=0)
    assert (socket_dir / "plugins").is_dir()


async def test_a_clean_stop_removes_the_socket_and_the_emptied_plugin_directory(
    socket_dir: Path,
) -> None:
    own = socket_dir / "plugins" / "quiet"
    server = kplug.PluginServer(Quiet(), INFO, socket_dir=socket_dir, heartbeat_interval=60)
    await server.start()
    assert server.socket_path.is_socket()
    await server.stop(grace=0)
    assert not own.exists()
    assert (socket_dir / "plugins").is_dir(), "plugins/ is shared: it stays"

    # A directory that holds anything else stays, with what it holds.
    server = kplug.PluginServer(Quiet(), INFO, socket_dir=socket_dir, heartbeat_interval=60)
    await server.start()
    (own / "notes").write_text("kept")
    await server.stop(grace=0)
    assert (own / "notes").read_text() == "kept"
    assert not server.socket_path.exists()

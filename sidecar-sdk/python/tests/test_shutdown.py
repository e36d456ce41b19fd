"""SIGTERM on a real plugin process: Unregister, drain the calls in flight, clean up, exit 0."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from kplug._proto import plugin_pb2, types_pb2

from .conftest import DialFn, FakeRegistry

SCRIPT = Path(__file__).with_name("slow_plugin.py")


@pytest.fixture
async def plugin_process(socket_dir: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {**os.environ, "KPLUG_SOCKET_DIR": str(socket_dir), "KPLUG_HEARTBEAT_INTERVAL": "0.2"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), env=env, stderr=asyncio.subprocess.PIPE
    )
    yield process
    if process.returncode is None:
        process.kill()
        await process.wait()


def nap(seconds: float) -> plugin_pb2.ReconcileRequest:
    obj = {
        "apiVersion": "test.kplug.dev/v1",
        "kind": "Nap",
        "metadata": {"name": "n", "namespace": "default"},
        "spec": {"sleepSeconds": seconds},
    }
    return plugin_pb2.ReconcileRequest(implementation="Slow", object=json.dumps(obj).encode())


async def test_sigterm_drains_and_exits_cleanly(
    registry: FakeRegistry,
    plugin_process: asyncio.subprocess.Process,
    socket_dir: Path,
    dial: DialFn,
) -> None:
    await registry.wait_for("heartbeats", timeout=10)  # the interpreter takes a moment
    socket_path = socket_dir / "plugins" / "slow" / "plugin.sock"
    stub = dial(socket_path)

    in_flight = asyncio.ensure_future(stub.Reconcile(nap(2.0), timeout=10))
    await asyncio.sleep(0.3)  # the call is running in the plugin
    assert not in_flight.done()
    sigterm_at = time.monotonic()
    plugin_process.send_signal(signal.SIGTERM)

    await registry.wait_for("unregisters", timeout=3)
    [(unregistered_at, unregister)] = registry.unregisters
    assert unregister.name == "slow"
    assert unregister.instance_id == registry.heartbeats[0][1].instance_id
    assert unregistered_at - sigterm_at < 1.5
    assert not in_flight.done(), "Unregister comes first, while the call is still running"

    # New calls are turned away while the old one drains.
    await asyncio.sleep(0.2)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await dial(socket_path).Reconcile(nap(0), timeout=2)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

    response = await in_flight
    assert (response.outcome, response.message) == (types_pb2.OUTCOME_OK, "slept")

    assert await asyncio.wait_for(plugin_process.wait(), 10) == 0
    assert not socket_path.exists()
    assert plugin_process.stderr is not None
    log = (await plugin_process.stderr.read()).decode()
    assert "SIGTERM received" in log
    assert "unregistered from the operator" in log
    assert "Traceback" not in log
    heartbeats = len(registry.heartbeats)
    await asyncio.sleep(0.4)
    assert len(registry.heartbeats) == heartbeats, "heartbeats stop at SIGTERM"


async def test_second_sigterm_stops_at_once(
    registry: FakeRegistry,
    plugin_process: asyncio.subprocess.Process,
    socket_dir: Path,
    dial: DialFn,
) -> None:
    await registry.wait_for("heartbeats", timeout=10)
    socket_path = socket_dir / "plugins" / "slow" / "plugin.sock"
    in_flight = asyncio.ensure_future(dial(socket_path).Reconcile(nap(30), timeout=40))
    await asyncio.sleep(0.3)
    plugin_process.send_signal(signal.SIGTERM)
    await registry.wait_for("unregisters", timeout=3)
    plugin_process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(plugin_process.wait(), 5) == 1
    assert not socket_path.exists()
    with pytest.raises(grpc.aio.AioRpcError):
        await in_flight


async def test_startup_error_exits_1_with_a_message(socket_dir: Path) -> None:
    (socket_dir / "plugins" / "slow").mkdir(parents=True)
    (socket_dir / "plugins" / "slow" / "plugin.sock").write_text("not a socket")
    env = {**os.environ, "KPLUG_SOCKET_DIR": str(socket_dir)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), env=env, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 10)
    assert process.returncode == 1
    log = stderr.decode()
    assert f"plugin slow: {socket_dir}/plugins/slow/plugin.sock exists and is not a socket" in log
    assert "Traceback" not in log

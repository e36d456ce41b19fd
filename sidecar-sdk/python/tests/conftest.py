"""Shared fixtures: short socket dirs and a fake operator registry (real gRPC, real sockets)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from kplug._proto import plugin_pb2, plugin_pb2_grpc, registry_pb2, registry_pb2_grpc
from kplug.response import seconds_to_duration

DialFn = Callable[[Path], plugin_pb2_grpc.PluginStub]


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: Unix socket paths must stay under 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="kplug-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class Handshake:
    """What the fake operator learned by dialing a new instance back."""

    info: plugin_pb2.GetInfoResponse | None = None
    probe: plugin_pb2.ProbeResponse | None = None
    error: str | None = None


@dataclass
class FakeRegistry(registry_pb2_grpc.RegistryServicer):
    """A kplug.v1.Registry on ``<socket_dir>/registry.sock`` that records what plugins send.

    Like the operator, it dials a new instance back during its first heartbeat
    (GetInfo, then Probe) before answering, so a plugin that heartbeats before
    it serves shows up as a failed handshake.
    """

    socket_dir: Path
    accepted: bool = True
    reason: str = ""
    interval: float | None = None
    heartbeats: list[tuple[float, registry_pb2.HeartbeatRequest]] = field(default_factory=list)
    unregisters: list[tuple[float, registry_pb2.UnregisterRequest]] = field(default_factory=list)
    handshakes: dict[str, Handshake] = field(default_factory=dict)
    _server: grpc.aio.Server | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def path(self) -> Path:
        return self.socket_dir / "registry.sock"

    async def start(self) -> FakeRegistry:
        server = grpc.aio.server()
        registry_pb2_grpc.add_RegistryServicer_to_server(self, server)
        server.add_insecure_port(f"unix:{self.path}")
        await server.start()
        self._server = server
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(None)
            self._server = None

    async def Heartbeat(  # noqa: N802
        self, request: registry_pb2.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.HeartbeatResponse:
        if request.instance_id not in self.handshakes:
            self.handshakes[request.instance_id] = await self._handshake(request)
        self.heartbeats.append((time.monotonic(), request))
        self._changed.set()
        response = registry_pb2.HeartbeatResponse(
            accepted=self.accepted, reason=self.reason, ttl=seconds_to_duration(15)
        )
        if self.interval is not None:
            response.interval.CopyFrom(seconds_to_duration(self.interval))
        return response

    async def Unregister(  # noqa: N802
        self, request: registry_pb2.UnregisterRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.UnregisterResponse:
        self.unregisters.append((time.monotonic(), request))
        self._changed.set()
        return registry_pb2.UnregisterResponse(removed=request.instance_id in self.handshakes)

    async def _handshake(self, request: registry_pb2.HeartbeatRequest) -> Handshake:
        async with grpc.aio.insecure_channel(f"unix:{self.socket_dir / request.socket}") as ch:
            stub = plugin_pb2_grpc.PluginStub(ch)
            try:
                info = await stub.GetInfo(plugin_pb2.GetInfoRequest(), timeout=1)
                probe = await stub.Probe(plugin_pb2.ProbeRequest(), timeout=1)
            except grpc.aio.AioRpcError as e:
                return Handshake(error=f"{e.code().name}: {e.details()}")
        return Handshake(info=info, probe=probe)

    async def wait_for(self, what: str, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until ``count`` heartbeats (what="heartbeats") or unregisters arrived."""
        records = self.heartbeats if what == "heartbeats" else self.unregisters
        deadline = time.monotonic() + timeout
        while len(records) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{len(records)} {what} after {timeout}s, wanted {count}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)


@pytest.fixture
async def registry(socket_dir: Path) -> AsyncIterator[FakeRegistry]:
    fake = await FakeRegistry(socket_dir).start()
    yield fake
    await fake.stop()


@pytest.fixture
async def dial() -> AsyncIterator[DialFn]:
    """Open a Plugin stub on a socket path, as the operator does; closed after the test."""
    channels: list[grpc.aio.Channel] = []

    def open_stub(path: Path) -> plugin_pb2_grpc.PluginStub:
        channel = grpc.aio.insecure_channel(f"unix:{path}")
        channels.append(channel)
        return plugin_pb2_grpc.PluginStub(channel)

    yield open_stub
    for channel in channels:
        await channel.close()

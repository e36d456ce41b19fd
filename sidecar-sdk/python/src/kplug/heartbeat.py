"""Registration with the operator: heartbeats with backoff, and Unregister on shutdown.

Every heartbeat carries the plugin's full description, so an operator that
restarted (and forgot the instance) simply registers it again: there is no
separate "register" step to redo.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from pathlib import Path

import grpc

from kplug._proto import registry_pb2, registry_pb2_grpc
from kplug.errors import StartupError
from kplug.protocol import (
    HEARTBEAT_TIMEOUT_SECONDS,
    UNREGISTER_TIMEOUT_SECONDS,
    SocketDirOrigin,
    backoff_delay,
    registry_waiting_message,
)
from kplug.socket import is_live

logger = logging.getLogger(__name__)


class _State(enum.Enum):
    STARTING = "starting"
    REGISTERED = "registered"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"


class Heartbeat:
    """Heartbeats ``request`` to the registry socket until cancelled.

    ``origin`` says where the socket dir came from, for the warning logged while the
    registry socket is missing before the operator ever answered.
    """

    def __init__(
        self,
        registry_socket: Path,
        origin: SocketDirOrigin,
        request: registry_pb2.HeartbeatRequest,
        interval: float,
    ) -> None:
        self._target = f"unix:{registry_socket}"
        self._registry_socket = registry_socket
        self._origin = origin
        self._request = request
        self._interval = interval
        self._channel: grpc.aio.Channel | None = None
        self._state = _State.STARTING
        self._refusal = ""
        self.registered = asyncio.Event()
        """Set while the operator accepts the heartbeats."""

    @property
    def interval(self) -> float:
        """The current interval: configured, then the one the operator asks for."""
        return self._interval

    async def run(self) -> None:
        """Heartbeat forever (until the task is cancelled)."""
        failures = 0
        try:
            while True:
                try:
                    response = await self._stub().Heartbeat(
                        self._request, timeout=HEARTBEAT_TIMEOUT_SECONDS
                    )
                except grpc.aio.AioRpcError as e:
                    failures += 1
                    # The protocol's backoff: 100 ms doubling, capped at the
                    # interval, up to 10 % shorter at random.
                    delay = backoff_delay(failures, self._interval, random.random())
                    self._failed(e, failures, delay)
                    # A fresh channel next time: grpc's own reconnect backoff
                    # (1 s growing to 2 min) must not override ours.
                    await self._close_channel()
                else:
                    failures = 0
                    self._succeeded(response)
                    delay = self._interval
                await asyncio.sleep(delay)
        finally:
            await self._close_channel()

    async def unregister(self) -> None:
        """Tell the operator this instance is going away; errors are logged and ignored.

        The operator answers once the calls in flight to this instance are
        done, so this can take a while (bounded by a 10 s deadline).
        """
        request = registry_pb2.UnregisterRequest(
            name=self._request.name, instance_id=self._request.instance_id
        )
        try:
            response = await self._stub().Unregister(request, timeout=UNREGISTER_TIMEOUT_SECONDS)
        except grpc.aio.AioRpcError as e:
            logger.warning(
                "plugin %s: Unregister at %s failed (%s: %s); exiting anyway, the operator "
                "will notice the socket is gone",
                self._request.name,
                self._registry_socket,
                e.code().name,
                e.details(),
            )
        else:
            logger.info(
                "plugin %s: unregistered from the operator%s",
                self._request.name,
                "" if response.removed else " (it did not know this instance)",
            )
        finally:
            self.registered.clear()
            await self._close_channel()

    def _stub(self) -> registry_pb2_grpc.RegistryStub:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(
                self._target,
                options=[
                    # grpc-core puts the socket path into :authority for unix:
                    # targets; HTTP/2 servers that validate it (the operator's
                    # hyper/tonic server) reset such streams. A plain host
                    # name is what any server accepts.
                    ("grpc.default_authority", "localhost"),
                    # Our own channel per attempt, not one shared through grpc's
                    # global subchannel pool (which keeps its reconnect backoff).
                    ("grpc.use_local_subchannel_pool", 1),
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.min_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", max(100, int(self._interval * 1000))),
                ],
            )
        return registry_pb2_grpc.RegistryStub(self._channel)  # type: ignore[no-untyped-call]

    async def _close_channel(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()

    def _succeeded(self, response: registry_pb2.HeartbeatResponse) -> None:
        if response.HasField("interval") and response.interval.ToTimedelta().total_seconds() > 0:
            self._interval = response.interval.ToTimedelta().total_seconds()
        name = self._request.name
        if response.accepted:
            if self._state is not _State.REGISTERED:
                ttl = response.ttl.ToTimedelta().total_seconds() if response.HasField("ttl") else 0
                logger.info(
                    "plugin %s: registered with the operator at %s (heartbeat every %gs, ttl %gs)",
                    name,
                    self._registry_socket,
                    self._interval,
                    ttl,
                )
            self._state = _State.REGISTERED
            self.registered.set()
            return
        self.registered.clear()
        if self._state is not _State.REFUSED or response.reason != self._refusal:
            logger.error(
                "plugin %s: the operator refused the registration: %s (heartbeats go on, an "
                "upgraded operator may accept it)",
                name,
                response.reason or "no reason given",
            )
        self._state, self._refusal = _State.REFUSED, response.reason

    def _failed(self, error: grpc.aio.AioRpcError, failures: int, delay: float) -> None:
        # The first failure of a run at warning level, the retries at debug level.
        self.registered.clear()
        if self._state is _State.STARTING and self._registry_absent():
            logger.warning(
                "plugin %s: %s",
                self._request.name,
                registry_waiting_message(self._registry_socket.parent, self._origin),
            )
        elif self._state is not _State.UNREACHABLE:
            logger.warning(
                "plugin %s: %s at %s (%s: %s); retrying with backoff",
                self._request.name,
                "cannot reach the operator's registry"
                if self._state is _State.STARTING
                else "lost the operator",
                self._registry_socket,
                error.code().name,
                error.details(),
            )
        self._state = _State.UNREACHABLE
        logger.debug(
            "plugin %s: heartbeat failed %d time(s) in a row; next try in %.3fs",
            self._request.name,
            failures,
            delay,
        )

    def _registry_absent(self) -> bool:
        """Whether registry.sock is missing or refuses connections (not merely slow)."""
        try:
            return not is_live(self._registry_socket, self._request.name)
        except StartupError:
            return False  # cannot be told (e.g. no permission): not "absent"

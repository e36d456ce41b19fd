"""Running a plugin: start-up, serving, heartbeats and the SIGTERM drain.

The order is the protocol's (docs/protocol.md): validate the name, claim the
socket (in a socket dir that must exist), serve, and only then heartbeat,
because the operator dials back on the first heartbeat. On SIGTERM:
Unregister, stop taking calls and let the ones in flight finish (10 s grace),
remove our socket and then our directory if that left it empty, return.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import sys
import uuid
from pathlib import Path

import grpc

from kplug import tracing
from kplug._proto import plugin_pb2_grpc, registry_pb2
from kplug.errors import StartupError
from kplug.heartbeat import Heartbeat
from kplug.info import PluginInfo
from kplug.plugin import Plugin, overrides
from kplug.protocol import (
    DEFAULT_SOCKET_DIR,
    HEARTBEAT_INTERVAL_ENV,
    MAX_MESSAGE_BYTES,
    PROTOCOL,
    REGISTRY_SOCKET,
    SOCKET_DIR_ENV,
    SocketDirOrigin,
    parse_heartbeat_interval,
)
from kplug.service import PluginService, capabilities
from kplug.socket import SocketFile, claim, plugin_socket, remove_plugin_dir

logger = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 10.0


class PluginServer:
    """One running plugin instance: its socket server and its heartbeats.

    :func:`serve` is what plugins use; this class is for embedding a plugin in
    a larger asyncio program, or a test, that decides itself when to stop.
    """

    def __init__(
        self,
        plugin: Plugin,
        info: PluginInfo,
        *,
        socket_dir: str | os.PathLike[str] | None = None,
        heartbeat_interval: float | None = None,
        grace: float = DEFAULT_GRACE_SECONDS,
    ) -> None:
        info.validate()
        if info.hooks and not overrides(plugin, "hook"):
            raise StartupError(
                f"plugin {info.name} cannot start: it declares hooks but does not implement "
                "Plugin.hook"
            )
        if info.mutations and not overrides(plugin, "mutate"):
            raise StartupError(
                f"plugin {info.name} cannot start: it declares mutations but does not implement "
                "Plugin.mutate"
            )
        if overrides(plugin, "mutate") and not info.mutations:
            raise StartupError(
                f"plugin {info.name} cannot start: it implements Plugin.mutate but declares no "
                "kind to mutate (PluginInfo.mutations)"
            )
        self.plugin = plugin
        self.info = info
        self.socket_dir_origin: SocketDirOrigin = (
            "program"
            if socket_dir
            else "environment"
            if os.environ.get(SOCKET_DIR_ENV)
            else "default"
        )
        """Where the socket dir came from: the messages about it say so."""
        self.socket_dir = Path(socket_dir or os.environ.get(SOCKET_DIR_ENV) or DEFAULT_SOCKET_DIR)
        self.socket_dir = self.socket_dir.absolute()
        self.socket_path = plugin_socket(self.socket_dir, info.name)
        self.instance_id = str(uuid.uuid4())
        self.grace = grace
        self.heartbeat = Heartbeat(
            self.socket_dir / REGISTRY_SOCKET,
            self.socket_dir_origin,
            registry_pb2.HeartbeatRequest(
                name=info.name,
                version=info.version,
                instance_id=self.instance_id,
                protocol=PROTOCOL,
                socket=str(self.socket_path.relative_to(self.socket_dir)),
                offers=[offer.to_proto() for offer in info.offers],
                capabilities=capabilities(plugin, info),
                hooks=info.hooks_proto(),
                call_policies=info.call_policies_proto(),
                mutations=info.mutations_proto(),
            ),
            _interval(info.name, heartbeat_interval),
        )
        self._server: grpc.aio.Server | None = None
        self._socket_file: SocketFile | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Claim the socket, serve on it, then start heartbeating."""
        name = self.info.name
        claim(self.socket_path, name, self.socket_dir_origin)
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ]
        )
        plugin_pb2_grpc.add_PluginServicer_to_server(  # type: ignore[no-untyped-call]
            PluginService(self.plugin, self.info), server
        )
        try:
            server.add_insecure_port(f"unix:{self.socket_path}")
        except RuntimeError as e:
            raise StartupError(
                f"plugin {name}: cannot listen on {self.socket_path}: {e}; check that the "
                "socket directory is writable"
            ) from e
        # The operator runs as another UID: anyone in the pod may connect, and
        # the operator tells callers apart by their credentials (SO_PEERCRED).
        os.chmod(self.socket_path, 0o666)
        await server.start()
        self._server = server
        self._socket_file = SocketFile.bound_at(self.socket_path)
        logger.info(
            "plugin %s %s: serving on %s (instance %s)",
            name,
            self.info.version,
            self.socket_path,
            self.instance_id,
        )
        self._heartbeat_task = asyncio.create_task(
            self.heartbeat.run(), name=f"kplug heartbeat {name}"
        )

    async def stop(self, grace: float | None = None) -> None:
        """Unregister, drain the calls in flight (up to ``grace`` seconds), remove the socket.

        Then the plugin's own directory, ``plugins/<name>/``, is removed too if that left it
        empty (never one holding anything else).
        """
        grace = self.grace if grace is None else grace
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            await asyncio.gather(self._heartbeat_task, return_exceptions=True)
            self._heartbeat_task = None
            await self.heartbeat.unregister()
        if self._server is not None:
            logger.info(
                "plugin %s: stopped taking calls; draining those in flight (up to %gs)",
                self.info.name,
                grace,
            )
            await self._server.stop(grace)
            self._server = None
        if self._socket_file is not None:
            self._socket_file.remove()
            self._socket_file = None
            remove_plugin_dir(self.socket_path)
        logger.info("plugin %s: stopped", self.info.name)


async def serve(
    plugin: Plugin,
    info: PluginInfo,
    *,
    socket_dir: str | os.PathLike[str] | None = None,
    heartbeat_interval: float | None = None,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> None:
    """Serve ``plugin`` until SIGTERM or SIGINT, then drain and return.

    ``socket_dir`` defaults to ``$KPLUG_SOCKET_DIR``, then ``/var/run/kplug``;
    ``heartbeat_interval`` (seconds) to ``$KPLUG_HEARTBEAT_INTERVAL``, then 5.
    Raises :class:`kplug.StartupError` when the plugin cannot start. A second
    signal during the drain abandons the calls in flight, removes the socket
    and exits the process with status 1 at once.
    """
    server = PluginServer(
        plugin, info, socket_dir=socket_dir, heartbeat_interval=heartbeat_interval, grace=grace
    )
    stop_tracing = tracing.export(info.name)
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    hurry = asyncio.Event()

    def on_signal(signum: signal.Signals) -> None:
        if not stop_requested.is_set():
            logger.info("plugin %s: %s received; shutting down", info.name, signum.name)
            stop_requested.set()
        else:
            logger.warning("plugin %s: %s received again; stopping now", info.name, signum.name)
            hurry.set()

    signals = (signal.SIGTERM, signal.SIGINT)
    for signum in signals:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await server.start()
        await stop_requested.wait()
        graceful = asyncio.create_task(server.stop())
        hurried = asyncio.create_task(hurry.wait())
        await asyncio.wait({graceful, hurried}, return_when=asyncio.FIRST_COMPLETED)
        hurried.cancel()
        if not graceful.done():
            graceful.cancel()
            await asyncio.gather(graceful, return_exceptions=True)
            await server.stop(grace=0)
            # Handler threads cannot be interrupted, and the interpreter waits
            # for them at exit: leave now, as the user asked twice.
            logging.shutdown()
            os._exit(1)
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
        if stop_tracing is not None:
            stop_tracing()


def run(
    plugin: Plugin,
    info: PluginInfo,
    *,
    socket_dir: str | os.PathLike[str] | None = None,
    heartbeat_interval: float | None = None,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> None:
    """Run :func:`serve` in a new event loop: the body of a plugin's ``__main__``.

    Sets up logging at INFO on stderr if the program has not configured
    logging, and exits with status 1 and a one-line message if the plugin
    cannot start.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    try:
        asyncio.run(
            serve(
                plugin,
                info,
                socket_dir=socket_dir,
                heartbeat_interval=heartbeat_interval,
                grace=grace,
            )
        )
    except StartupError as e:
        logger.error("%s", e)
        sys.exit(1)


def _interval(plugin: str, configured: float | None) -> float:
    if configured is None:
        text = os.environ.get(HEARTBEAT_INTERVAL_ENV)
        seconds = parse_heartbeat_interval(text)
        what = f"{HEARTBEAT_INTERVAL_ENV}={text!r}"
    else:
        seconds = configured if math.isfinite(configured) and configured > 0 else None
        what = f"heartbeat_interval={configured!r}"
    if seconds is None:
        raise StartupError(
            f"plugin {plugin}: invalid {what}: the heartbeat interval is a positive number "
            "of seconds, e.g. 5 or 0.5"
        )
    return seconds

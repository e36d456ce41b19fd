"""The second baseline of the Python SDK in the polyglot benchmark
(sidecar-sdk/benches/polyglot.rs): the kplug.v1.Plugin service in bare grpcio
(grpc.aio, as the SDK uses) with the same generated messages and the standard
``json`` module, what a plugin author would write without the SDK. Reconcile
decodes the object with ``json.loads`` and answers the status
``{"echo": spec}``, encoded with ``json.dumps`` (compact, as the SDK sends
it), as the SDK's echo plugin does. It serves on the Unix socket
$KPLUG_BENCH_SOCKET until SIGTERM or SIGINT.

    KPLUG_BENCH_SOCKET=/tmp/bare.sock .venv/bin/python bench/bare_json_echo.py
"""

import asyncio
import json
import os
import signal
import sys

import grpc

from kplug._proto import plugin_pb2, plugin_pb2_grpc, types_pb2


class BareJson(plugin_pb2_grpc.PluginServicer):
    async def GetInfo(  # noqa: N802 (the gRPC method name)
        self, request: plugin_pb2.GetInfoRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.GetInfoResponse:
        return plugin_pb2.GetInfoResponse()

    async def Probe(  # noqa: N802
        self, request: plugin_pb2.ProbeRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.ProbeResponse:
        return plugin_pb2.ProbeResponse(ready=True)

    async def Reconcile(  # noqa: N802
        self, request: plugin_pb2.ReconcileRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.ReconcileResponse:
        try:
            obj = json.loads(request.object)
        except ValueError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the object is not JSON: {e}")
        status = json.dumps({"echo": obj.get("spec")}, separators=(",", ":")).encode()
        return plugin_pb2.ReconcileResponse(outcome=types_pb2.OUTCOME_OK, status=status)


async def main(socket: str) -> None:
    server = grpc.aio.server()
    plugin_pb2_grpc.add_PluginServicer_to_server(BareJson(), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.stop(0)


if __name__ == "__main__":
    socket = os.environ.get("KPLUG_BENCH_SOCKET")
    if not socket:
        sys.exit("bare_json_echo: set KPLUG_BENCH_SOCKET to the Unix socket to serve on")
    asyncio.run(main(socket))

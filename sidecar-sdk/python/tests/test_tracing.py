"""A plugin continues the operator's trace: a real OTLP/gRPC receiver, a real plugin server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

import kplug
from kplug import tracing
from kplug._proto import plugin_pb2, types_pb2

from .conftest import DialFn

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
INFO = kplug.PluginInfo(
    name="greeter",
    version="1.0.0",
    offers=[kplug.Offer(base=kplug.GroupKind("example.com", "Greeting"), implementation="Hi")],
)
GREETING = {
    "apiVersion": "example.com/v1",
    "kind": "Greeting",
    "metadata": {"name": "world", "namespace": "default"},
    "spec": {},
}

# (service.name, trace id, parent span id, span name) of every span received.
Received = list[tuple[str, str, str, str]]


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: Received = []

    async def Export(  # noqa: N802 (the gRPC method name)
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.aio.ServicerContext,
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource in request.resource_spans:
            service = next(
                a.value.string_value
                for a in resource.resource.attributes
                if a.key == "service.name"
            )
            for scope in resource.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        (service, span.trace_id.hex(), span.parent_span_id.hex(), span.name)
                    )
        return trace_service_pb2.ExportTraceServiceResponse()


class Greeter(kplug.Plugin):
    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        # A span the handler opens itself is a child of the SDK's.
        with trace.get_tracer("greeter").start_as_current_span("say hello"):
            return kplug.Response.ok("hello")


async def test_the_handler_span_continues_the_operators_trace(
    socket_dir: Path, dial: DialFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = Receiver()
    collector = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, collector)
    port = collector.add_insecure_port("127.0.0.1:0")
    await collector.start()
    monkeypatch.setenv(tracing.OTLP_ENDPOINT_ENV, f"http://127.0.0.1:{port}")
    stop = tracing.export("greeter")
    assert stop is not None
    server = kplug.PluginServer(Greeter(), INFO, socket_dir=socket_dir, heartbeat_interval=0.1)
    await server.start()
    try:
        stub = dial(socket_dir / "plugins" / "greeter" / "plugin.sock")
        answer = await stub.Reconcile(
            plugin_pb2.ReconcileRequest(implementation="Hi", object=json.dumps(GREETING).encode()),
            metadata=[("traceparent", f"00-{TRACE}-{PARENT}-01")],
        )
        assert answer.outcome == types_pb2.OUTCOME_OK
    finally:
        await server.stop(grace=0)
        # Flushing exports synchronously: not on the loop the receiver runs on.
        await asyncio.to_thread(stop)
        await collector.stop(grace=None)
    handler = [s for s in receiver.spans if s[3] == "plugin handler"]
    assert handler == [("greeter", TRACE, PARENT, "plugin handler")], receiver.spans
    assert any(s[1] == TRACE and s[3] == "say hello" for s in receiver.spans), receiver.spans


def test_without_an_endpoint_nothing_is_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tracing.OTLP_ENDPOINT_ENV, raising=False)
    assert tracing.export("greeter") is None

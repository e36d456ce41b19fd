"""Continuing the operator's trace in a plugin (OpenTelemetry, optional).

The operator sends the W3C ``traceparent`` of its ``plugin call`` span in
each call's gRPC metadata. With the ``otel`` extra installed
(``pip install 'kplug[otel]'``) and ``OTEL_EXPORTER_OTLP_ENDPOINT`` set,
:func:`export` exports this plugin's spans over OTLP/gRPC, and each
Reconcile or Finalize runs in a ``plugin handler`` span that continues the
operator's trace; spans a handler opens with the OpenTelemetry API are its
children. Without either, nothing is traced.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

try:  # the `otel` extra
    from opentelemetry import propagate, trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    _INSTALLED = True
except ImportError:
    _INSTALLED = False

logger = logging.getLogger(__name__)

#: The standard variable naming the OTLP endpoint, e.g. ``http://collector:4317``.
OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"

_tracer: Any = None


def export(service_name: str) -> Callable[[], None] | None:
    """Export spans to ``$OTEL_EXPORTER_OTLP_ENDPOINT`` as ``service_name``.

    Returns the function that flushes and stops the exporter, or ``None``
    when the variable is unset (or OpenTelemetry is not installed, which is
    logged).
    """
    endpoint = os.environ.get(OTLP_ENDPOINT_ENV, "")
    if not endpoint:
        return None
    if not _INSTALLED:
        logger.warning(
            "%s is set but OpenTelemetry is not installed: pip install 'kplug[otel]' to export "
            "this plugin's spans",
            OTLP_ENDPOINT_ENV,
        )
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=_insecure(endpoint)))
    )
    # Global, so that spans the plugin's own code opens with the
    # OpenTelemetry API are exported too (a process has one provider).
    trace.set_tracer_provider(provider)
    global _tracer
    _tracer = provider.get_tracer("kplug")
    logger.info("plugin %s: exporting spans to %s", service_name, endpoint)

    def stop() -> None:
        global _tracer
        _tracer = None
        provider.shutdown()

    return stop


def _insecure(endpoint: str) -> bool:
    return not endpoint.startswith("https://")


class _Invocation(Protocol):
    def invocation_metadata(self) -> Sequence[tuple[str, str | bytes]] | None: ...


# What handler_span returns when nothing is traced: one object for every call, so that an
# untraced call builds no span, no generator and no copy of its metadata.
_UNTRACED: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def handler_span(
    plugin: str, call: str, context: _Invocation
) -> contextlib.AbstractContextManager[None]:
    """Run the body in a ``plugin handler`` span continuing the trace in ``context``'s
    metadata (a ``grpc.aio.ServicerContext``), or in nothing at all when not exporting."""
    if _tracer is None:
        return _UNTRACED
    return _span(_tracer, plugin, call, context.invocation_metadata())


@contextlib.contextmanager
def _span(
    tracer: Any, plugin: str, call: str, metadata: Sequence[tuple[str, str | bytes]] | None
) -> Iterator[None]:
    carrier = {k: v for k, v in metadata or () if isinstance(v, str)}
    parent = propagate.extract(carrier)
    with tracer.start_as_current_span(
        "plugin handler", context=parent, attributes={"plugin": plugin, "call": call}
    ):
        yield

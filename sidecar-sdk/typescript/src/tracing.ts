/**
 * Continuing the operator's trace in a plugin (OpenTelemetry).
 *
 * The operator sends the W3C `traceparent` of its `plugin call` span in each
 * call's gRPC metadata. With `OTEL_EXPORTER_OTLP_ENDPOINT` set (e.g.
 * `http://collector:4317`), {@link exportSpans} exports this plugin's spans
 * over OTLP/gRPC, and each Reconcile or Finalize runs in a `plugin handler`
 * span that continues the operator's trace; spans a handler starts with the
 * OpenTelemetry API (`trace.getTracer(...)`) are its children. Unset,
 * nothing is traced.
 */

import type { Metadata } from "@grpc/grpc-js";
import { context, defaultTextMapGetter, trace, type Tracer } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";

/** The standard variable naming the OTLP endpoint. */
export const OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT";

const propagator = new W3CTraceContextPropagator();
let tracer: Tracer | undefined;

/**
 * Exports spans to `$OTEL_EXPORTER_OTLP_ENDPOINT` as `service`, and installs
 * the provider globally (so the handler's own spans are exported too).
 * Returns the function that flushes and stops the exporter, or `undefined`
 * when the variable is unset.
 */
export function exportSpans(
  service: string,
  env: NodeJS.ProcessEnv = process.env,
): (() => Promise<void>) | undefined {
  const endpoint = env[OTLP_ENDPOINT_ENV];
  if (!endpoint) {
    return undefined;
  }
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": service }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }))],
  });
  // Without a context manager a span would not be current across awaits.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  tracer = provider.getTracer("@kplug/sidecar");
  return async () => {
    tracer = undefined;
    await provider.shutdown();
  };
}

/**
 * Runs `fn` in a `plugin handler` span continuing the trace the caller sent.
 * Not traced (no exporter), it is `fn()`: no span, no metadata read, and no
 * promise of its own wrapped around `fn`'s.
 */
export function inHandlerSpan<T>(
  plugin: string,
  call: string,
  metadata: Metadata,
  fn: () => Promise<T>,
): Promise<T> {
  const current = tracer;
  return current === undefined ? fn() : inSpan(current, plugin, call, metadata, fn);
}

/** {@link inHandlerSpan} when traced; async, so that what throws rejects. */
async function inSpan<T>(
  current: Tracer,
  plugin: string,
  call: string,
  metadata: Metadata,
  fn: () => Promise<T>,
): Promise<T> {
  const carrier: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata.getMap())) {
    if (typeof value === "string") {
      carrier[key] = value;
    }
  }
  const parent = propagator.extract(context.active(), carrier, defaultTextMapGetter);
  return current.startActiveSpan("plugin handler", { attributes: { plugin, call } }, parent, async (span) => {
    try {
      return await fn();
    } finally {
      span.end();
    }
  });
}

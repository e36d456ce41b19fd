package io.kplug.sidecar;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.TextMapGetter;

/**
 * Continues the operator's trace: every call carries W3C {@code traceparent} in its gRPC metadata,
 * and each handler runs in a "plugin handler" span that is its child, current while the handler
 * runs ({@code Span.current()}), so that spans the handler starts with the OpenTelemetry API are
 * its children.
 *
 * <p>Only OpenTelemetry's API is used: spans are recorded and exported by whatever implementation
 * the program installs (the OpenTelemetry Java agent, or the SDK's autoconfiguration); without one,
 * the span only carries the operator's trace context to the handler.
 */
final class Tracing {
  private Tracing() {}

  /** The operator's trace context of the call being handled. */
  private static final Context.Key<io.opentelemetry.context.Context> PARENT =
      Context.key("kplug-trace-parent");

  private static final TextMapGetter<Metadata> METADATA =
      new TextMapGetter<>() {
        @Override
        public String get(Metadata carrier, String key) {
          return carrier == null
              ? null
              : carrier.get(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER));
        }
      };

  /** Reads the W3C trace context from each call's metadata into the call's gRPC context. */
  static final ServerInterceptor INTERCEPTOR =
      new ServerInterceptor() {
        @Override
        public <Q, R> ServerCall.Listener<Q> interceptCall(
            ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
          io.opentelemetry.context.Context parent =
              W3CTraceContextPropagator.getInstance()
                  .extract(io.opentelemetry.context.Context.root(), headers, METADATA);
          return Contexts.interceptCall(
              Context.current().withValue(PARENT, parent), call, headers, next);
        }
      };

  /**
   * Starts the span of one call as a child of the trace context the caller sent (none: a new trace,
   * or nothing at all without an OpenTelemetry implementation). Make it current and end it.
   */
  static Span handlerSpan(String plugin, String call) {
    io.opentelemetry.context.Context parent = PARENT.get();
    return GlobalOpenTelemetry.getTracer("io.kplug.sidecar")
        .spanBuilder("plugin handler")
        .setParent(parent != null ? parent : io.opentelemetry.context.Context.root())
        .setAttribute("plugin", plugin)
        .setAttribute("call", call)
        .startSpan();
  }
}

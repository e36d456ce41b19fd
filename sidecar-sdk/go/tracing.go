package kplug

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// OTLPEndpointEnv is the standard variable naming the OTLP endpoint (e.g.
// http://collector:4317). When it is set, [Main] exports the plugin's spans
// there, and each Reconcile or Finalize runs in a "plugin handler" span that
// continues the operator's trace (the W3C traceparent it sends with every
// call). The handler's context carries that span: spans the handler starts
// with the OpenTelemetry API are its children.
const OTLPEndpointEnv = "OTEL_EXPORTER_OTLP_ENDPOINT"

// traceContext is the W3C trace context propagator the operator speaks.
var traceContext = propagation.TraceContext{}

// startTracing exports spans to $OTEL_EXPORTER_OTLP_ENDPOINT as service and
// installs the provider globally. It returns the function that flushes and
// stops the exporter, or nil when the variable is unset.
func startTracing(ctx context.Context, service string) (func(context.Context) error, error) {
	endpoint := os.Getenv(OTLPEndpointEnv)
	if endpoint == "" {
		return nil, nil
	}
	exporter, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("plugin %s cannot start: %s %q: %w", service, OTLPEndpointEnv, endpoint, err)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	)
	otel.SetTracerProvider(provider)
	return provider.Shutdown, nil
}

// handlerSpan starts the span of one call as a child of the trace context
// the caller sent in the gRPC metadata (none: a new trace, or nothing at
// all without a provider).
func handlerSpan(ctx context.Context, plugin, call string) (context.Context, trace.Span) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = traceContext.Extract(ctx, metadataCarrier(md))
	}
	return otel.Tracer("github.com/kplug/kplug/sidecar-sdk/go").Start(ctx, "plugin handler",
		trace.WithAttributes(attribute.String("plugin", plugin), attribute.String("call", call)))
}

// metadataCarrier reads gRPC metadata (lower-case keys) as a TextMapCarrier.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

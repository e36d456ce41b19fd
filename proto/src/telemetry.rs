//! Tracing across the plugin call (feature `telemetry`): the W3C
//! `traceparent` in gRPC metadata, and spans exported over OTLP/gRPC.
//!
//! The operator injects the context of its span for a call into the
//! request's metadata ([`inject`]); a plugin continues that trace by making
//! the span of its handler a child of [`extract`]ed context. Both export
//! their spans to the same OTLP endpoint ([`Exporter`]), so one reconcile is
//! one trace with the operator's and the plugin's spans. With no exporter
//! set up, nothing is injected and nothing is exported.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The standard variable naming the OTLP endpoint (e.g.
/// `http://collector:4317`); the SDKs export spans when it is set.
pub const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// Spans exported over OTLP/gRPC as `service_name`. Keep it for the life
/// of the process; [`Exporter::shutdown`] sends what is still buffered.
#[derive(Debug)]
pub struct Exporter {
    provider: SdkTracerProvider,
}

/// The OTLP exporter could not be built (a malformed endpoint).
#[derive(Debug, thiserror::Error)]
#[error("OTLP endpoint {endpoint}: {message}; expected e.g. http://collector:4317")]
pub struct ExporterError {
    endpoint: String,
    message: String,
}

impl Exporter {
    /// Exports spans to `endpoint` (OTLP over gRPC) as `service_name`, in
    /// batches.
    ///
    /// # Errors
    /// [`ExporterError`] when the endpoint is not a URL the exporter takes.
    pub fn new(service_name: &str, endpoint: &str) -> Result<Self, ExporterError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| ExporterError {
                endpoint: endpoint.to_owned(),
                message: e.to_string(),
            })?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(service_name.to_owned())
                    .build(),
            )
            .build();
        Ok(Self { provider })
    }

    /// The tracer, for `tracing_opentelemetry::layer().with_tracer(..)`.
    pub fn tracer(&self, name: &'static str) -> SdkTracer {
        self.provider.tracer(name)
    }

    /// Sends the spans still buffered and stops.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "exporting the last spans failed");
        }
    }
}

/// Installs the process's `tracing` subscriber: logs on stdout filtered by
/// `RUST_LOG` (default `info`), in colour only for a person at a terminal
/// (never in files or log collectors), and, with `exporter`, spans exported
/// as `tracer`.
///
/// Each has its own filter: `RUST_LOG` chooses the logs only. Production
/// runs often log at `warn`, and one filter for the whole subscriber would
/// turn off the `info` spans a trace is made of (and the `traceparent` sent
/// to plugins with them). The exported spans are those at `info` and above.
///
/// # Errors
/// When a subscriber is installed already (the first one stays).
pub fn init_subscriber(
    exporter: Option<&Exporter>,
    tracer: &'static str,
) -> Result<(), tracing_subscriber::util::TryInitError> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let logs = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                .with_filter(logs),
        )
        .with(exporter.map(|e| {
            tracing_opentelemetry::layer()
                .with_tracer(e.tracer(tracer))
                .with_filter(LevelFilter::INFO)
        }))
        .try_init()
}

/// Adds the W3C trace context of `span` (`traceparent`, `tracestate`) to
/// `metadata`. Nothing when `span` is not traced.
pub fn inject(span: &tracing::Span, metadata: &mut MetadataMap) {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return;
    }
    TraceContextPropagator::new().inject_context(&context, &mut MetadataInjector(metadata));
}

/// The trace context a caller sent in `metadata`; empty when it sent none.
pub fn extract(metadata: &MetadataMap) -> opentelemetry::Context {
    TraceContextPropagator::new().extract(&MetadataExtractor(metadata))
}

/// The trace id of `span` as 32 hex digits, when it is traced.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct MetadataExtractor<'a>(&'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_goes_through_metadata() {
        let mut metadata = MetadataMap::new();
        metadata.insert(
            "traceparent",
            MetadataValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        let context = extract(&metadata);
        let span = context.span();
        let span_context = span.span_context();
        assert!(span_context.is_remote());
        assert_eq!(
            span_context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let mut out = MetadataMap::new();
        TraceContextPropagator::new().inject_context(&context, &mut MetadataInjector(&mut out));
        assert_eq!(
            out.get("traceparent").unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
    }

    #[test]
    fn an_untraced_span_injects_nothing() {
        let mut metadata = MetadataMap::new();
        inject(&tracing::Span::none(), &mut metadata);
        assert!(metadata.is_empty());
        assert_eq!(trace_id(&tracing::Span::none()), None);
    }
}

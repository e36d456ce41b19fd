//! Tracing across the plugin call, with a real OTLP/gRPC receiver: one
//! reconcile is one trace holding the operator's spans and the plugin's
//! (which continues it from the W3C traceparent the operator sends), and
//! the object's Ready condition names that trace (Reconciled does while it is not True).
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use serde_json::json;
use support::*;

const T: Duration = Duration::from_secs(30);

/// One span received: (service.name, trace id in hex, span name).
type Received = (String, String, String);

/// An OTLP trace receiver that keeps every span it is sent.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Received>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.0.lock().unwrap();
        for resource in request.into_inner().resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| a.value.as_ref()?.value.as_ref())
                .map(|v| match v {
                    AnyValue::StringValue(s) => s.clone(),
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    let trace: String = span.trace_id.iter().map(|b| format!("{b:02x}")).collect();
                    spans.push((service.clone(), trace, span.name));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Receiver {
    /// The (service, span name) pairs of trace `trace`.
    fn trace(&self, trace: &str) -> BTreeSet<(String, String)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, t, _)| t == trace)
            .map(|(service, _, name)| (service.clone(), name.clone()))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_reconcile_is_one_trace_across_operator_and_plugin() {
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let w = world("trace", &["--otlp-endpoint", &endpoint]).await;
    // Logging at `warn`, as production often does, turns off logs only:
    // the plugin's spans are still exported (one `init_subscriber` for the
    // operator and every Rust plugin, with a filter per layer).
    let _pg = spawn_plugin(
        &w,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("RUST_LOG", "warn"),
        ],
    );
    w.create_table("traced", "PostgreSQL", json!({}), false)
        .await;
    let table = w
        .table_until("traced", "Ready", T, |t| {
            expect_condition(t, "Ready", "True", "Reconciled")
        })
        .await;

    // From the object to its trace: the Ready condition names it (with
    // Reconciled, which is written only while it is not True).
    let (_, _, message) = condition(&table, "Ready").unwrap();
    let trace = message
        .rsplit_once("(trace ")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no trace id in: {message}"))
        .to_owned();
    assert_eq!(trace.len(), 32, "{message}");
    let why = tokio::process::Command::new(kplug_testenv::workspace_binary("kubectl-kplug"))
        .args(["why", "databasetable/traced", "-n", &w.ns])
        .args([
            "--operator",
            &format!("http://127.0.0.1:{}", w.metrics_port),
        ])
        .env(
            "KUBECONFIG",
            kplug_testenv::control_plane().kubeconfig_path(),
        )
        .output()
        .await
        .unwrap();
    let why = String::from_utf8(why.stdout).unwrap();
    assert!(why.contains(&format!("Trace:          {trace}")), "{why}");

    // The trace holds the operator's reconcile and call, and the plugin's
    // handler (exported in batches: wait for them).
    let want: BTreeSet<(String, String)> = [
        ("kplug-operator", "reconcile"),
        ("kplug-operator", "plugin call"),
        ("postgresql", "plugin handler"),
    ]
    .into_iter()
    .map(|(s, n)| (s.to_owned(), n.to_owned()))
    .collect();
    kplug_testenv::eventually("the trace's spans", T, || async {
        let got = receiver.trace(&trace);
        want.is_subset(&got).then_some(()).ok_or_else(|| {
            format!(
                "trace {trace} has {got:?}; all received: {:?}",
                receiver.0.lock().unwrap()
            )
        })
    })
    .await;
}

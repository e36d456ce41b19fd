//! `kplug-operator`: the generic operator binary. See `--help`.
//!
//! The command line (`args`, with the parsers of its values in `parse`)
//! becomes the library's configuration (`config`), which
//! `kplug_operator::run` runs.

mod args;
mod config;
mod parse;

use std::process::ExitCode;

use clap::Parser;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::Reporter;

use args::Args;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Spans go to an OTLP endpoint only when one is given.
    let exporter = match args
        .otlp_endpoint
        .as_deref()
        .map(|endpoint| kplug_proto::telemetry::Exporter::new("kplug-operator", endpoint))
        .transpose()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("kplug-operator: --otlp-endpoint: {error}");
            return ExitCode::from(2);
        }
    };
    // The first subscriber of the process: it cannot be taken.
    let _ = kplug_proto::telemetry::init_subscriber(exporter.as_ref(), "kplug-operator");
    let code = run(args).await;
    if let Some(exporter) = exporter {
        exporter.shutdown();
    }
    code
}

async fn run(mut args: Args) -> ExitCode {
    if let Err(error) = args.merge_env(&std::env::vars().collect::<Vec<_>>()) {
        eprintln!("kplug-operator: {error}");
        return ExitCode::from(2);
    }
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            eprintln!(
                "kplug-operator: cannot reach the Kubernetes API: {error}\nRun in-cluster, or set KUBECONFIG."
            );
            return ExitCode::from(2);
        }
    };
    let reporter = Reporter {
        controller: "kplug-operator".into(),
        instance: pod_env("POD_NAME"),
    };
    let config = args.into_config(reporter, operator_pod(), pod_env("POD_NAMESPACE"));
    match kplug_operator::run(client, config, kplug_proto::shutdown::termination()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kplug-operator: {error}");
            ExitCode::from(2)
        }
    }
}

/// A non-empty environment variable (set by the Deployment with the
/// downward API).
fn pod_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The operator's own Pod, from `POD_NAME` and `POD_NAMESPACE`: where
/// registry Events are recorded.
fn operator_pod() -> Option<ObjectReference> {
    Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod_env("POD_NAME")?),
        namespace: Some(pod_env("POD_NAMESPACE")?),
        ..ObjectReference::default()
    })
}

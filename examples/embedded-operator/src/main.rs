//! `greeting-operator`: a typed kube-rs operator for `Greeting`
//! (`examples/hello/crd.yaml`) that embeds kplug. Its own step fills in a
//! default salutation; kplug then delegates the rest to whichever plugin
//! serves `Greeting` (e.g. the Rust SDK's hello example):
//!
//! ```sh
//! KPLUG_SOCKET_DIR=/tmp/kplug cargo run -p kplug-embedded-operator-example &
//! KPLUG_SOCKET_DIR=/tmp/kplug cargo run -p kplug-sidecar --example hello
//! ```

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use kplug_operator::{Delegate, ReconcileError, Registry, RegistryConfig};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Your own kind, typed. kplug reads `preferredImplementation` and
/// `extensions`, and owns part of the status.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize)]
#[kube(group = "example.com", version = "v1", kind = "Greeting", namespaced)]
#[kube(schema = "disabled", status = "serde_json::Value")]
#[serde(rename_all = "camelCase")]
pub struct GreetingSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    salutation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    preferred_implementation: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    extensions: Vec<serde_json::Value>,
}

/// What the reconcile needs.
struct Context {
    client: Client,
    kplug: Delegate<Greeting>,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("setting the default salutation of {0}: {1}")]
    Default(String, #[source] kube::Error),
    #[error(transparent)]
    Kplug(#[from] ReconcileError),
}

/// The operator's own step, then kplug's.
async fn reconcile(greeting: Arc<Greeting>, ctx: Arc<Context>) -> Result<Action, Error> {
    if greeting.spec.salutation.is_none() && greeting.metadata.deletion_timestamp.is_none() {
        // A spec change: the next reconcile (with the default) delegates.
        let api: Api<Greeting> = Api::namespaced(
            ctx.client.clone(),
            &greeting.namespace().unwrap_or_default(),
        );
        let patch = json!({"spec": {"salutation": "hello"}});
        api.patch(
            &greeting.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .map_err(|e| Error::Default(greeting.name_any(), e))?;
        return Ok(Action::await_change());
    }
    Ok(ctx.kplug.reconcile(greeting).await?)
}

fn error_policy(greeting: Arc<Greeting>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconcile failed");
    match error {
        Error::Kplug(error) => ctx.kplug.error_policy(greeting, error),
        Error::Default(..) => Action::requeue(std::time::Duration::from_secs(5)),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let client = Client::try_default().await?;

    // kplug: a registry for the plugin sidecars, and a delegate for Greeting.
    let mut metrics = prometheus_client::registry::Registry::default();
    let registry = Registry::new(RegistryConfig::from_env(), &mut metrics);
    let kplug = Delegate::<Greeting>::builder(client.clone(), &registry)
        .reporter(Reporter::from("greeting-operator"))
        .metrics(&mut metrics)
        .build()
        .await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(registry.serve(async {
        let _ = stopped.await;
    }));

    // Your controller, as usual; kplug's wake-ups join its triggers, and
    // kplug's own status writes do not wake it.
    let (store, writer) = reflector::store();
    let wakeups = kplug.wakeups(store.clone());
    let ctx = Arc::new(Context {
        client: client.clone(),
        kplug,
    });
    let filter = Arc::clone(&ctx);
    let greetings = watcher(Api::<Greeting>::all(client), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .try_filter(move |greeting| std::future::ready(filter.kplug.wants(greeting)));
    Controller::for_stream(greetings, store)
        .reconcile_on(wakeups)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
    // The controller stopped on SIGTERM or Ctrl-C: so does the registry.
    let _ = stop.send(());
    serving.await??;
    Ok(())
}

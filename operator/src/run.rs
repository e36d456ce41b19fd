//! Wiring: registry, controller, extension watches and HTTP endpoints, run
//! together until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::store::Writer;
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, predicates, watcher};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::{UnboundedReceiverStream, WatchStream};

use crate::backoff::{Backoff, FailureTracker};
use crate::controller::{self, Context, Settings};
use crate::events::Events;
use crate::extensions::Extensions;
use crate::http::{self, Readiness};
use crate::metrics::Metrics;
use crate::registry::{Registry, RegistryConfig};
use crate::target::Target;

/// Everything [`run`] needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The managed kind, `<group>/<version>/<Kind>`.
    pub resource: String,
    /// Only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// Registry settings (socket dir, TTL, deadlines, bounds).
    pub registry: RegistryConfig,
    /// Controller settings (selection, fields, finalizer, resync).
    pub settings: Settings,
    /// Where to serve `/metrics`, `/healthz`, `/readyz` (none when `None`).
    pub metrics_addr: Option<SocketAddr>,
    /// Name reported on Events.
    pub controller_name: String,
    /// Objects reconciled at once.
    pub concurrency: u16,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            resource: String::new(),
            namespace: None,
            registry: RegistryConfig::default(),
            settings: Settings::default(),
            metrics_addr: None,
            controller_name: "kplug-operator".into(),
            concurrency: 8,
        }
    }
}

/// Runs the operator until `shutdown` resolves.
///
/// # Errors
/// [`crate::Error`] when the kind is not served, a socket or port cannot be
/// bound, or the registry stops.
pub async fn run(
    client: kube::Client,
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), crate::Error> {
    let target = Target::discover(&client, &config.resource).await?;
    tracing::info!(
        kind = %target.display(),
        namespace = config.namespace.as_deref().unwrap_or("(all)"),
        socket_dir = %config.registry.socket_dir.display(),
        "managing"
    );
    let metrics = Metrics::new();
    let events = Events::new(client.clone(), &config.controller_name);
    let registry = Registry::new(
        config.registry.clone(),
        metrics.clone(),
        Some(events.clone()),
    );

    let (stop, stopped) = watch::channel(false);
    let until_stopped = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    let mut registry_task = tokio::spawn(registry.clone().serve(until_stopped()));
    let readiness = Readiness::default();
    let http_task = config.metrics_addr.map(|addr| {
        tokio::spawn(http::serve(
            addr,
            metrics.clone(),
            registry.clone(),
            readiness.clone(),
            until_stopped(),
        ))
    });

    let (trigger, triggered) = mpsc::unbounded_channel();
    let extensions = Extensions::new(
        client.clone(),
        target.api_resource.clone(),
        config.namespace.clone(),
        trigger,
    );
    let api: Api<DynamicObject> = match &config.namespace {
        Some(ns) if target.namespaced => {
            Api::namespaced_with(client.clone(), ns, &target.api_resource)
        }
        _ => Api::all_with(client.clone(), &target.api_resource),
    };
    let writer = Writer::new(target.api_resource.clone());
    let store = writer.as_reader();
    // Our own status writes must not trigger reconciles (that would loop):
    // only spec changes (generation) do, and deletion marks bump generation.
    let objects = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(predicates::generation, PredicateConfig::default());
    // Any registry change (a plugin registered, became ready, went away)
    // reconciles every object, so waiting ones converge at once.
    let registry_changes = WatchStream::from_changes(registry.changes()).map(|_| ());

    let ctx = Arc::new(Context {
        client: client.clone(),
        target: target.clone(),
        registry: registry.clone(),
        extensions,
        events,
        metrics: metrics.clone(),
        settings: config.settings.clone(),
        failures: FailureTracker::new(Backoff::new(
            Duration::from_millis(500),
            Duration::from_secs(300),
        )),
    });

    {
        let store = store.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            if store.wait_until_ready().await.is_ok() {
                readiness.set_ready();
                tracing::info!("controller cache synced; ready");
            }
        });
    }

    let controller = Controller::for_stream_with(objects, store, target.api_resource.clone())
        .with_config(kube::runtime::Config::default().concurrency(config.concurrency))
        .reconcile_all_on(registry_changes)
        .reconcile_on(UnboundedReceiverStream::new(triggered))
        .graceful_shutdown_on(until_stopped())
        .run(controller::reconcile, controller::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
        });
    let mut controller = std::pin::pin!(controller);

    let mut shutdown = std::pin::pin!(shutdown);
    let result = tokio::select! {
        () = &mut shutdown => Ok(()),
        joined = &mut registry_task => match joined {
            Ok(result) => result,
            Err(e) => Err(crate::Error::Resource { resource: config.resource.clone(), message: format!("registry task failed: {e}") }),
        },
        () = &mut controller => Ok(()),
    };
    tracing::info!("shutting down");
    let _ = stop.send(true);
    // Let in-flight reconciles finish (bounded), then stop serving.
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut controller).await;
    if !registry_task.is_finished() {
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut registry_task).await;
    }
    if let Some(task) = http_task {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    result
}

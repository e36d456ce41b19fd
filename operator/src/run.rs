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
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::backoff::{Backoff, FailureTracker};
use crate::controller::{self, Context, Settings};
use crate::events::Events;
use crate::extensions::Extensions;
use crate::http::{self, Readiness};
use crate::metrics::Metrics;
use crate::registry::{Registry, RegistryConfig};
use crate::share::Shares;
use crate::target::Target;
use crate::waiting::{Waiting, Wakeups, wake_on_changes};

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
    /// Objects reconciled at once (the controller's workers).
    pub concurrency: u16,
    /// Reconciles one plugin may have in progress; fewer than
    /// `concurrency`, so that a plugin that hangs cannot take every worker.
    pub max_reconciles_per_plugin: u16,
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
            max_reconciles_per_plugin: 6,
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
    config.registry.validate()?;
    if config.concurrency > 1 && config.max_reconciles_per_plugin >= config.concurrency {
        return Err(crate::Error::Config(format!(
            "--max-reconciles-per-plugin {} must be below --workers {}: a plugin that hangs would take every worker",
            config.max_reconciles_per_plugin, config.concurrency
        )));
    }
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
    // Bind everything before serving anything: a taken port or socket
    // stops the operator with a clear error instead of a dropped task.
    let registry_socket = registry.bind().await?;
    let http_listener = match config.metrics_addr {
        Some(addr) => Some(http::bind(addr).await?),
        None => None,
    };
    let mut registry_task =
        tokio::spawn(registry.clone().serve_on(registry_socket, until_stopped()));
    let readiness = Readiness::default();
    let http_task = http_listener.map(|listener| {
        tokio::spawn(http::serve(
            listener,
            metrics.clone(),
            registry.clone(),
            readiness.clone(),
            until_stopped(),
        ))
    });

    // Objects to reconcile now: their extensions changed, or the registry
    // has what they wait for.
    let (wake, woken) = mpsc::unbounded_channel();
    let extensions = Extensions::new(
        client.clone(),
        target.api_resource.clone(),
        config.namespace.clone(),
        wake.clone(),
    );
    let api: Api<DynamicObject> = match &config.namespace {
        Some(ns) if target.namespaced => {
            Api::namespaced_with(client.clone(), ns, &target.api_resource)
        }
        _ => Api::all_with(client.clone(), &target.api_resource),
    };
    let writer = Writer::new(target.api_resource.clone());
    let store = writer.as_reader();
    // Ready once the first list is in the cache. This is read off the
    // stream rather than from `store.wait_until_ready()`: that future keeps
    // only the waker of its last poller, and the controller polls it too, so
    // a second waiter is never woken (and /readyz stayed 503 forever).
    let synced = readiness.clone();
    // Our own status writes must not trigger reconciles (that would loop):
    // only spec changes (generation) do, and deletion marks bump generation.
    let objects = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .inspect(move |event| {
            if matches!(event, Ok(watcher::Event::InitDone)) && synced.set_ready() {
                tracing::info!("controller cache synced; ready");
            }
        })
        .applied_objects()
        .predicate_filter(predicates::generation, PredicateConfig::default());
    // A registry change (a plugin registered, became ready, went away)
    // reconciles only the objects it concerns (crate::waiting).
    let waiting = Arc::new(Waiting::default());
    let wakeups = tokio::spawn(wake_on_changes(Wakeups {
        registry: registry.clone(),
        waiting: Arc::clone(&waiting),
        kind: target.group_kind(),
        api_resource: target.api_resource.clone(),
        store: store.clone(),
        grace: config.registry.heartbeat_ttl,
        wake: wake.clone(),
    }));

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
        waiting,
        shares: Shares::new(config.max_reconciles_per_plugin.into()),
    });

    let controller = Controller::for_stream_with(objects, store, target.api_resource.clone())
        .with_config(kube::runtime::Config::default().concurrency(config.concurrency))
        .reconcile_on(UnboundedReceiverStream::new(woken))
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
    wakeups.abort();
    if let Some(task) = http_task {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    result
}

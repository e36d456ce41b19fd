//! Wiring: registry, controller, extension watches and HTTP endpoints, run
//! together until shutdown.
//!
//! [`run`] checks the settings, finds the kinds, builds a delegate per
//! kind, binds every socket and port before serving anything, then leads
//! (or waits to) and runs a [`term::Term`] while leading. On shutdown the
//! controllers finish their in-flight reconciles (bounded), the Lease is
//! released, and the registry stops last, once the plugins have
//! unregistered.

mod config;
mod term;

pub use config::Config;

use std::sync::Arc;
use std::time::Duration;

use kube::api::DynamicObject;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry as Metrics;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admission::{self, Webhooks};
use crate::advert;
use crate::delegate::Delegate;
use crate::http::{self, Readiness};
use crate::leader::Elector;
use crate::metrics::ReconcileMetrics;
use crate::reconcile::LastCalls;
use crate::registry::Registry;
use crate::target::Target;
use term::Term;

/// How long the registry keeps answering after shutdown began, for the
/// plugins' Unregister calls (they are stopped together with the operator).
const UNREGISTER_WAIT: Duration = Duration::from_secs(5);

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
    let (config, targets) = prepare(&client, config).await?;
    let kinds: Vec<String> = targets.iter().map(Target::display).collect();
    let mut metrics = Metrics::default();
    let leader = crate::metrics::register_leader(&mut metrics);
    let registry = Registry::new(config.registry.clone(), &mut metrics).record_events(
        client.clone(),
        config.reporter.clone(),
        config.operator_pod.clone(),
    );
    let last_calls = Arc::new(LastCalls::default());
    let parts = Parts {
        client: &client,
        config: &config,
        registry: &registry,
        last_calls: &last_calls,
    };
    let delegates = parts.delegates(&targets, &mut metrics).await?;
    // Bound and registered before anything is served: a taken port, a bad
    // certificate or missing RBAC stops the operator with a clear error.
    let webhooks = parts.webhooks(&targets, &mut metrics).await?;
    let (stop, stopped) = watch::channel(false);
    let (serving, mut registry_task) = parts
        .serve(Arc::new(metrics), webhooks, &kinds, &stopped)
        .await?;
    let term = Term {
        kinds: delegates.into_iter().zip(targets).collect(),
        client: client.clone(),
        config: config.clone(),
        readiness: serving.readiness.clone(),
    };
    let mut elector = match &config.leader_election {
        Some(election) => {
            serving.readiness.set_following(true);
            Some(Elector::start(client.clone(), election).await?)
        }
        None => None,
    };
    let terms = lead(
        &term,
        elector.as_mut(),
        &serving.readiness,
        &leader,
        &stopped,
    );
    let result = until_shutdown(
        shutdown,
        &mut registry_task,
        terms,
        &stop,
        &config.resources,
    )
    .await;
    if let Some(elector) = elector {
        elector.release().await;
    }
    serving.stop(&registry, registry_task).await;
    result
}

/// Runs `terms` until `shutdown`, or until the registry stops; then tells
/// everything to stop and lets in-flight reconciles finish (bounded).
async fn until_shutdown(
    shutdown: impl std::future::Future<Output = ()>,
    registry_task: &mut JoinHandle<Result<(), crate::Error>>,
    terms: impl std::future::Future<Output = ()>,
    stop: &watch::Sender<bool>,
    resources: &[String],
) -> Result<(), crate::Error> {
    let mut terms = std::pin::pin!(terms);
    let mut shutdown = std::pin::pin!(shutdown);
    let result = tokio::select! {
        () = &mut shutdown => Ok(()),
        joined = registry_task => match joined {
            Ok(result) => result,
            Err(e) => Err(crate::Error::Resource { resource: resources.join(","), message: format!("registry task failed: {e}") }),
        },
        () = &mut terms => Ok(()),
    };
    tracing::info!("shutting down");
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut terms).await;
    result
}

/// Checks `config`, finds the kinds it names and settles how the caches
/// fill.
async fn prepare(
    client: &kube::Client,
    mut config: Config,
) -> Result<(Config, Vec<Target>), crate::Error> {
    config.validate()?;
    let targets = discover(client, &config.resources).await?;
    if config.webhook.is_some() && targets.len() > 1 {
        return Err(crate::Error::Config(
            "the admission webhooks serve one kind in this version; run them with one --resource, or without --webhook-addr".into(),
        ));
    }
    config.initial_list = config.initial_list.resolve(client).await;
    let kinds: Vec<String> = targets.iter().map(Target::display).collect();
    tracing::info!(
        kinds = %kinds.join(", "),
        namespace = config.namespace.as_deref().unwrap_or("(all)"),
        socket_dir = %config.registry.socket_dir.display(),
        initial_list = %config.initial_list,
        "managing"
    );
    Ok((config, targets))
}

/// What the pieces of [`run`] share.
struct Parts<'a> {
    client: &'a kube::Client,
    config: &'a Config,
    registry: &'a Registry,
    last_calls: &'a Arc<LastCalls>,
}

/// The tasks that serve while the operator runs, and what they need to
/// stop.
struct Serving {
    /// Stops the registry, last (see [`Serving::stop`]).
    stop_registry: watch::Sender<bool>,
    http_task: Option<JoinHandle<Result<(), crate::Error>>>,
    webhook_task: Option<JoinHandle<()>>,
    readiness: Readiness,
    /// Where `kubectl kplug` finds this process, until it stops.
    advert: Option<advert::Published>,
}

impl Parts<'_> {
    /// A delegate per managed kind, sharing the registry and the metrics.
    async fn delegates(
        &self,
        targets: &[Target],
        metrics: &mut Metrics,
    ) -> Result<Vec<Arc<Delegate<DynamicObject>>>, crate::Error> {
        let reconcile_metrics = ReconcileMetrics::register(metrics);
        let config = self.config;
        let mut delegates = Vec::with_capacity(targets.len());
        for target in targets {
            let delegate = Delegate::<DynamicObject>::builder_with(
                self.client.clone(),
                self.registry,
                target.api_resource.clone(),
            )
            .reporter(config.reporter.clone())
            .reconcile_metrics(reconcile_metrics.clone())
            .last_calls(Arc::clone(self.last_calls))
            .settings(config.settings.clone())
            .extension_kinds(config.extension_kinds.clone())
            .child_kinds(config.child_kinds.clone())
            .mutators(config.mutators.clone())
            .namespace(config.namespace.clone())
            .max_reconciles_per_plugin(config.max_reconciles_per_plugin)
            .initial_list(config.initial_list)
            .build()
            .await?;
            delegates.push(Arc::new(delegate));
        }
        Ok(delegates)
    }

    /// The admission webhooks, bound and registered (none when off).
    async fn webhooks(
        &self,
        targets: &[Target],
        metrics: &mut Metrics,
    ) -> Result<Option<Webhooks>, crate::Error> {
        let Some(webhook) = &self.config.webhook else {
            return Ok(None);
        };
        let parts = admission::Parts {
            client: self.client,
            target: &targets[0],
            namespace: self.config.namespace.as_deref(),
            registry: self.registry,
            settings: &self.config.settings,
            extension_kinds: &self.config.extension_kinds,
            metrics,
        };
        Ok(Some(admission::start(webhook, parts).await?))
    }

    /// Binds the registry socket and the HTTP port, then serves them and
    /// the webhooks: a taken port or socket stops the operator with a
    /// clear error instead of a dropped task.
    async fn serve(
        &self,
        metrics: Arc<Metrics>,
        webhooks: Option<Webhooks>,
        kinds: &[String],
        stopped: &watch::Receiver<bool>,
    ) -> Result<(Serving, JoinHandle<Result<(), crate::Error>>), crate::Error> {
        let registry_socket = self.registry.bind().await?;
        let http_listener = match self.config.metrics_addr {
            Some(addr) => Some(http::bind(addr).await?),
            None => None,
        };
        let advert = match http_listener
            .as_ref()
            .map(tokio::net::TcpListener::local_addr)
        {
            Some(Ok(addr)) => advert::publish(self.client, addr, kinds.join(",")).await,
            _ => None,
        };
        // The registry stops last, on a signal of its own.
        let (stop_registry, mut registry_stopped) = watch::channel(false);
        let registry_task =
            tokio::spawn(self.registry.clone().serve_on(registry_socket, async move {
                let _ = registry_stopped.wait_for(|s| *s).await;
            }));
        let webhook_task = webhooks.map(|w| tokio::spawn(w.serve(until(stopped))));
        let readiness = Readiness::default();
        let http_task = http_listener.map(|listener| {
            tokio::spawn(http::serve(
                listener,
                metrics,
                self.registry.clone(),
                Arc::clone(self.last_calls),
                readiness.clone(),
                until(stopped),
            ))
        });
        let serving = Serving {
            stop_registry,
            http_task,
            webhook_task,
            readiness,
            advert,
        };
        Ok((serving, registry_task))
    }
}

/// Resolves once `stopped` turns true.
fn until(
    stopped: &watch::Receiver<bool>,
) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
    let mut stopped = stopped.clone();
    async move {
        let _ = stopped.wait_for(|s| *s).await;
    }
}

/// Leads (or waits to), runs a term while leading, and starts again when
/// leadership is lost; returns when a term ends because `stopped`.
async fn lead(
    term: &Term,
    mut elector: Option<&mut Elector>,
    readiness: &Readiness,
    leader: &Gauge,
    stopped: &watch::Receiver<bool>,
) {
    loop {
        let Some(elector) = elector.as_deref_mut() else {
            term.run(until(stopped)).await;
            return;
        };
        elector.until_leading().await;
        readiness.set_following(false);
        leader.set(1);
        tokio::select! {
            () = term.run(until(stopped)) => return,
            () = elector.until_lost() => {}
        }
        leader.set(0);
        readiness.set_following(true);
    }
}

impl Serving {
    /// Stops serving: the registry once the plugins have unregistered,
    /// then the HTTP endpoints and the webhooks (bounded), then the advert.
    ///
    /// In a pod the kubelet sends SIGTERM to the operator and to its plugin
    /// sidecars at once. Each plugin then unregisters; a registry that had
    /// stopped with the controller would refuse that (the plugin logs
    /// "Unregister failed"). So it keeps serving until every plugin has
    /// gone or [`UNREGISTER_WAIT`] has passed.
    async fn stop(self, registry: &Registry, mut task: JoinHandle<Result<(), crate::Error>>) {
        if !task.is_finished() {
            let mut changes = registry.changes();
            let _ = tokio::time::timeout(UNREGISTER_WAIT, async {
                while !registry.ready().is_empty() {
                    if changes.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
            let _ = self.stop_registry.send(true);
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut task).await;
        }
        if let Some(task) = self.http_task {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
        if let Some(task) = self.webhook_task {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
        drop(self.advert);
    }
}

/// Finds each managed kind on the API server.
///
/// # Errors
/// [`crate::Error::Resource`] for a malformed, unserved or repeated kind.
async fn discover(
    client: &kube::Client,
    resources: &[String],
) -> Result<Vec<Target>, crate::Error> {
    if resources.is_empty() {
        return Err(crate::Error::Resource {
            resource: String::new(),
            message: "no kind to manage; give --resource <group>/<version>/<Kind> at least once"
                .into(),
        });
    }
    let mut targets: Vec<Target> = Vec::with_capacity(resources.len());
    for resource in resources {
        let gvk = crate::target::parse(resource)?;
        let target = Target::discover(client, &gvk).await?;
        if targets
            .iter()
            .any(|t| t.group_kind() == target.group_kind())
        {
            return Err(crate::Error::Resource {
                resource: resource.clone(),
                message: "given twice; each kind is managed once".into(),
            });
        }
        targets.push(target);
    }
    Ok(targets)
}

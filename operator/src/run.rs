//! Wiring: registry, controller, extension watches and HTTP endpoints, run
//! together until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{Controller, WatchStreamExt, watcher};
use tokio::sync::watch;

use crate::admission::{self, WebhookConfig};
use crate::advert;
use crate::children::{ChildKinds, Mutators};
use crate::delegate::Delegate;
use crate::extensions::AllowList;
use crate::http::{self, Readiness};
use crate::initial_list::InitialList;
use crate::leader::{Elector, LeaderElection};
use crate::metrics::ReconcileMetrics;
use crate::reconcile::{LastCalls, Settings};
use crate::registry::{Registry, RegistryConfig};
use crate::relist;
use crate::target::Target;

/// Everything [`run`] needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The managed kinds, each `<group>/<version>/<Kind>`: one controller
    /// each, with one registry and one set of plugin connections.
    pub resources: Vec<String>,
    /// Only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// Registry settings (socket dir, TTL, deadlines, bounds).
    pub registry: RegistryConfig,
    /// Controller settings (selection, fields, finalizer, resync).
    pub settings: Settings,
    /// Where to serve `/metrics`, `/healthz`, `/readyz` (none when `None`).
    pub metrics_addr: Option<SocketAddr>,
    /// Who reports Events (`controller`, and `instance`: the Pod's name).
    pub reporter: Reporter,
    /// The operator's own Pod, where registry Events (plugin registered,
    /// gone, refused) are recorded; only logged when `None`.
    pub operator_pod: Option<ObjectReference>,
    /// Objects reconciled at once (the controller's workers).
    pub concurrency: u16,
    /// Reconciles one plugin may have in progress; fewer than
    /// `concurrency`, so that a plugin that hangs cannot take every worker.
    pub max_reconciles_per_plugin: u16,
    /// Reconcile only while holding this Lease (none: always).
    pub leader_election: Option<LeaderElection>,
    /// The extension kinds objects may reference (none by default).
    pub extension_kinds: AllowList,
    /// The kinds of children plugins may have applied (none by default).
    pub child_kinds: ChildKinds,
    /// Which plugins patch which child kinds, in order (none by default).
    pub mutators: Mutators,
    /// Serve the admission webhooks (none: off).
    pub webhook: Option<WebhookConfig>,
    /// How the watches fill their caches (crate::initial_list).
    pub initial_list: InitialList,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            resources: Vec::new(),
            namespace: None,
            registry: RegistryConfig::default(),
            settings: Settings::default(),
            metrics_addr: None,
            reporter: Reporter::from("kplug-operator"),
            operator_pod: None,
            concurrency: 8,
            max_reconciles_per_plugin: 6,
            leader_election: None,
            extension_kinds: AllowList::default(),
            child_kinds: ChildKinds::default(),
            mutators: Mutators::default(),
            webhook: None,
            initial_list: InitialList::Auto,
        }
    }
}

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
    config.registry.validate()?;
    if config.concurrency > 1 && config.max_reconciles_per_plugin >= config.concurrency {
        return Err(crate::Error::Config(format!(
            "--max-reconciles-per-plugin {} must be below --workers {}: a plugin that hangs would take every worker",
            config.max_reconciles_per_plugin, config.concurrency
        )));
    }
    if let Some(election) = &config.leader_election
        && election.grace >= election.duration
    {
        return Err(crate::Error::Config(format!(
            "--lease-duration {:?} is too short: the leader renews {:?} before expiry; use at least 2s",
            election.duration, election.grace
        )));
    }
    if let Some(webhook) = &config.webhook {
        webhook.validate(config.registry.admission_call_timeout)?;
    }
    let targets = discover(&client, &config.resources).await?;
    if config.webhook.is_some() && targets.len() > 1 {
        return Err(crate::Error::Config(
            "the admission webhooks serve one kind in this version; run them with one --resource, or without --webhook-addr".into(),
        ));
    }
    let mut config = config;
    config.initial_list = config.initial_list.resolve(&client).await;
    let kinds: Vec<String> = targets.iter().map(Target::display).collect();
    tracing::info!(
        kinds = %kinds.join(", "),
        namespace = config.namespace.as_deref().unwrap_or("(all)"),
        socket_dir = %config.registry.socket_dir.display(),
        initial_list = %config.initial_list,
        "managing"
    );
    let mut metrics = prometheus_client::registry::Registry::default();
    let leader = crate::metrics::register_leader(&mut metrics);
    let registry = Registry::new(config.registry.clone(), &mut metrics).record_events(
        client.clone(),
        config.reporter.clone(),
        config.operator_pod.clone(),
    );
    let last_calls = Arc::new(LastCalls::default());
    let reconcile_metrics = ReconcileMetrics::register(&mut metrics);
    let mut delegates = Vec::with_capacity(targets.len());
    for target in &targets {
        let delegate = Delegate::<DynamicObject>::builder_with(
            client.clone(),
            &registry,
            target.api_resource.clone(),
        )
        .reporter(config.reporter.clone())
        .reconcile_metrics(reconcile_metrics.clone())
        .last_calls(Arc::clone(&last_calls))
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
    // Bound and registered before anything is served: a taken port, a bad
    // certificate or missing RBAC stops the operator with a clear error.
    let webhooks = match &config.webhook {
        Some(webhook) => Some(
            admission::start(
                webhook,
                admission::Parts {
                    client: &client,
                    target: &targets[0],
                    namespace: config.namespace.as_deref(),
                    registry: &registry,
                    settings: &config.settings,
                    extension_kinds: &config.extension_kinds,
                    metrics: &mut metrics,
                },
            )
            .await?,
        ),
        None => None,
    };
    let metrics = Arc::new(metrics);

    let (stop, stopped) = watch::channel(false);
    // The registry stops last, on a signal of its own (see the shutdown).
    let (stop_registry, mut registry_stopped) = watch::channel(false);
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
    // Where `kubectl kplug` finds this process, until it stops.
    let _advert = match http_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
    {
        Some(Ok(addr)) => advert::publish(&client, addr, kinds.join(",")).await,
        _ => None,
    };
    let mut registry_task = tokio::spawn(registry.clone().serve_on(registry_socket, async move {
        let _ = registry_stopped.wait_for(|s| *s).await;
    }));
    let webhook_task = webhooks.map(|webhooks| tokio::spawn(webhooks.serve(until_stopped())));
    let readiness = Readiness::default();
    let http_task = http_listener.map(|listener| {
        tokio::spawn(http::serve(
            listener,
            Arc::clone(&metrics),
            registry.clone(),
            Arc::clone(&last_calls),
            readiness.clone(),
            until_stopped(),
        ))
    });
    let term = Term {
        kinds: delegates.into_iter().zip(targets).collect(),
        client: client.clone(),
        config: config.clone(),
        readiness: readiness.clone(),
    };
    let mut elector = match &config.leader_election {
        Some(election) => {
            readiness.set_following(true);
            Some(Elector::start(client.clone(), election).await?)
        }
        None => None,
    };
    // Lead (or wait to), run the controller while leading, and start again
    // when leadership is lost.
    let terms = async {
        loop {
            let Some(elector) = elector.as_mut() else {
                term.run(until_stopped()).await;
                return;
            };
            elector.until_leading().await;
            readiness.set_following(false);
            leader.set(1);
            tokio::select! {
                () = term.run(until_stopped()) => return,
                () = elector.until_lost() => {}
            }
            leader.set(0);
            readiness.set_following(true);
        }
    };
    let mut terms = Box::pin(terms);

    let mut shutdown = std::pin::pin!(shutdown);
    let result = tokio::select! {
        () = &mut shutdown => Ok(()),
        joined = &mut registry_task => match joined {
            Ok(result) => result,
            Err(e) => Err(crate::Error::Resource { resource: config.resources.join(","), message: format!("registry task failed: {e}") }),
        },
        () = &mut terms => Ok(()),
    };
    tracing::info!("shutting down");
    let _ = stop.send(true);
    // Let in-flight reconciles finish (bounded), then stop serving.
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut terms).await;
    drop(terms);
    if let Some(elector) = elector {
        elector.release().await;
    }
    if !registry_task.is_finished() {
        // In a pod the kubelet sends SIGTERM to the operator and to its
        // plugin sidecars at once. Each plugin then unregisters; a registry
        // that had stopped with the controller would refuse that (the
        // plugin logs "Unregister failed"). So it keeps serving until every
        // plugin has gone or UNREGISTER_WAIT has passed.
        let mut changes = registry.changes();
        let _ = tokio::time::timeout(UNREGISTER_WAIT, async {
            while !registry.ready().is_empty() {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        let _ = stop_registry.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut registry_task).await;
    }
    if let Some(task) = http_task {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    if let Some(task) = webhook_task {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    result
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

/// What one term as leader needs: the controllers are built anew each time
/// (a fresh list, so a new leader reconciles every object once).
struct Term {
    /// Each managed kind's delegate.
    kinds: Vec<(Arc<Delegate<DynamicObject>>, Target)>,
    client: kube::Client,
    config: Config,
    readiness: Readiness,
}

impl Term {
    /// Runs a controller per kind until `stopped` (gracefully) or until
    /// dropped. Ready once every kind's cache holds its first list.
    async fn run(&self, stopped: impl std::future::Future<Output = ()> + Send + Sync + 'static) {
        let stopped = futures::FutureExt::shared(Box::pin(stopped));
        let synced = Arc::new(AtomicUsize::new(0));
        let controllers = self.kinds.iter().map(|(delegate, target)| {
            let stopped = stopped.clone();
            let synced = Arc::clone(&synced);
            let all = self.kinds.len();
            let readiness = self.readiness.clone();
            let on_synced = move || {
                if synced.fetch_add(1, Ordering::AcqRel) + 1 == all && readiness.set_ready() {
                    tracing::info!("controller caches synced; ready");
                }
            };
            self.run_kind(delegate, target, stopped, on_synced)
        });
        futures::future::join_all(controllers).await;
    }

    /// Runs the controller of one kind until `stopped`.
    async fn run_kind(
        &self,
        delegate: &Arc<Delegate<DynamicObject>>,
        target: &Target,
        stopped: impl std::future::Future<Output = ()> + Send + Sync + 'static,
        on_synced: impl Fn() + Send + Sync + 'static,
    ) {
        let namespace = self
            .config
            .namespace
            .as_deref()
            .filter(|_| target.namespaced);
        let api = crate::target::api_in(&self.client, &target.api_resource, namespace);
        // A new term reconciles every object once. What the last term knew
        // is not enough: its requeues (backoffs, retries after an API
        // error) ended with it, and an object whose status is still what
        // this process last wrote would otherwise not wake at all (the
        // chaos soak found 9 objects left waiting for a plugin that was
        // back, after a term lost while the API server restarted).
        delegate.new_term();
        let writer = Writer::new(target.api_resource.clone());
        let store = writer.as_reader();
        // Ready once the first list is in the cache. This is read off the
        // stream rather than from `store.wait_until_ready()`: that future
        // keeps only the waker of its last poller, and the controller polls
        // it too, so a second waiter is never woken (/readyz stayed 503).
        let once = std::sync::Once::new();
        // Spec changes wake an object, and so does a change by anyone else
        // to the status the operator owns (crate::written); its own status
        // writes do not (they would loop).
        let wants = Arc::clone(delegate);
        let objects = watcher(api, self.config.initial_list.watcher_config())
            .default_backoff()
            .reflect(writer);
        // A relist's wake-ups once the cache holds it (crate::relist).
        let objects = relist::after_the_swap(objects, store.clone(), target.api_resource.clone())
            .inspect(move |event| {
                if matches!(event, Ok(watcher::Event::InitDone)) {
                    once.call_once(&on_synced);
                }
            })
            .applied_objects()
            .try_filter(move |obj| std::future::ready(wants.wants(obj)));
        // A registry change (a plugin registered, became ready, went away)
        // reconciles only the objects it concerns (crate::waiting), and a
        // child's change its base. The stream stops following them when
        // this term ends, however it ends.
        let wakeups = delegate.wakeups(store.clone());
        Controller::for_stream_with(objects, store, target.api_resource.clone())
            .with_config(kube::runtime::Config::default().concurrency(self.config.concurrency))
            .reconcile_on(wakeups)
            .graceful_shutdown_on(stopped)
            .run(
                |obj, delegate| async move { delegate.reconcile(obj).await },
                |obj, error, delegate| delegate.error_policy(obj, error),
                Arc::clone(delegate),
            )
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(%error, "controller event");
                }
            })
            .await;
    }
}

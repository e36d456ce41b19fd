//! Wiring: registry, controller, extension watches and HTTP endpoints, run
//! together until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{Controller, WatchStreamExt, watcher};
use tokio::sync::{mpsc, watch};

use crate::backoff::{Backoff, FailureTracker};
use crate::controller::{self, Context, Settings};
use crate::events::Events;
use crate::extensions::{AllowList, Extensions};
use crate::http::{self, Readiness};
use crate::leader::{Elector, LeaderElection};
use crate::metrics::Metrics;
use crate::registry::{Registry, RegistryConfig};
use crate::share::Shares;
use crate::target::Target;
use crate::waiting::{Waiting, Wakeups, wake_on_changes};
use crate::written::Written;

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
    /// Reconcile only while holding this Lease (none: always).
    pub leader_election: Option<LeaderElection>,
    /// The extension kinds objects may reference (none by default).
    pub extension_kinds: AllowList,
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
            leader_election: None,
            extension_kinds: AllowList::default(),
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
    let target = Target::discover(&client, &config.resource).await?;
    config.extension_kinds.check_served(&client).await?;
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
    let mut registry_task = tokio::spawn(registry.clone().serve_on(registry_socket, async move {
        let _ = registry_stopped.wait_for(|s| *s).await;
    }));
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
        config.extension_kinds.clone(),
        metrics.clone(),
        wake.clone(),
    );
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
        waiting: Arc::new(Waiting::default()),
        shares: Shares::new(config.max_reconciles_per_plugin.into()),
        written: Arc::new(Written::default()),
    });
    let term = Term {
        ctx,
        config: config.clone(),
        readiness: readiness.clone(),
        wake,
        woken: Arc::new(tokio::sync::Mutex::new(woken)),
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
            metrics.set_leader(true);
            tokio::select! {
                () = term.run(until_stopped()) => return,
                () = elector.until_lost() => {}
            }
            metrics.set_leader(false);
            readiness.set_following(true);
        }
    };
    let mut terms = Box::pin(terms);

    let mut shutdown = std::pin::pin!(shutdown);
    let result = tokio::select! {
        () = &mut shutdown => Ok(()),
        joined = &mut registry_task => match joined {
            Ok(result) => result,
            Err(e) => Err(crate::Error::Resource { resource: config.resource.clone(), message: format!("registry task failed: {e}") }),
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
    result
}

/// What one term as leader needs: the controller is built anew each time
/// (a fresh list, so a new leader reconciles every object once).
struct Term {
    ctx: Arc<Context>,
    config: Config,
    readiness: Readiness,
    wake: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
    woken: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<ObjectRef<DynamicObject>>>>,
}

impl Term {
    /// Runs the controller until `stopped` (gracefully) or until dropped.
    async fn run(&self, stopped: impl std::future::Future<Output = ()> + Send + Sync + 'static) {
        let ctx = &self.ctx;
        let target = &ctx.target;
        let api: Api<DynamicObject> = match &self.config.namespace {
            Some(ns) if target.namespaced => {
                Api::namespaced_with(ctx.client.clone(), ns, &target.api_resource)
            }
            _ => Api::all_with(ctx.client.clone(), &target.api_resource),
        };
        // A new term reconciles every object once. What the last term knew
        // is not enough: its requeues (backoffs, retries after an API
        // error) ended with it, and an object whose status is still what
        // this process last wrote would otherwise not wake at all (the
        // chaos soak found 9 objects left waiting for a plugin that was
        // back, after a term lost while the API server restarted).
        ctx.written.clear();
        ctx.waiting.clear();
        let writer = Writer::new(target.api_resource.clone());
        let store = writer.as_reader();
        // Ready once the first list is in the cache. This is read off the
        // stream rather than from `store.wait_until_ready()`: that future
        // keeps only the waker of its last poller, and the controller polls
        // it too, so a second waiter is never woken (/readyz stayed 503).
        let synced = self.readiness.clone();
        // Spec changes wake an object, and so does a change by anyone else
        // to the status the operator owns (crate::written); its own status
        // writes do not (they would loop).
        let written = Arc::clone(&ctx.written);
        let objects = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .inspect(move |event| {
                if matches!(event, Ok(watcher::Event::InitDone)) && synced.set_ready() {
                    tracing::info!("controller cache synced; ready");
                }
            })
            .applied_objects()
            .try_filter(move |obj| {
                std::future::ready(written.wakes(obj) || controller::reselect_requested(obj))
            });
        // A registry change (a plugin registered, became ready, went away)
        // reconciles only the objects it concerns (crate::waiting).
        // Aborted when this term ends, however it ends: a term that loses
        // the lease is dropped, not finished, and a JoinHandle dropped does
        // not stop its task (each lost term used to leave one running).
        let _wakeups = AbortOnDrop(tokio::spawn(wake_on_changes(Wakeups {
            registry: ctx.registry.clone(),
            waiting: Arc::clone(&ctx.waiting),
            kind: target.group_kind(),
            api_resource: target.api_resource.clone(),
            store: store.clone(),
            grace: self.config.registry.heartbeat_ttl,
            wake: self.wake.clone(),
        })));
        let woken = futures::stream::unfold(Arc::clone(&self.woken), |woken| async move {
            let next = woken.lock().await.recv().await;
            next.map(|object| (object, woken))
        });
        Controller::for_stream_with(objects, store, target.api_resource.clone())
            .with_config(kube::runtime::Config::default().concurrency(self.config.concurrency))
            .reconcile_on(woken)
            .graceful_shutdown_on(stopped)
            .run(
                controller::reconcile,
                controller::error_policy,
                Arc::clone(ctx),
            )
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(%error, "controller event");
                }
            })
            .await;
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

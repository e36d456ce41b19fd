//! [`DelegateBuilder`]: a [`Delegate`]'s settings, checked against the API
//! server when it is built.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kube::core::GroupVersionKind;
use kube::runtime::events::Reporter;
use serde::Serialize;
use tokio::sync::mpsc;

use super::Delegate;
use crate::backoff::{Backoff, FailureTracker};
use crate::children::{ChildKinds, Children, Mutators};
use crate::events::Events;
use crate::extensions::{AllowList, Extensions};
use crate::initial_list::InitialList;
use crate::metrics::ReconcileMetrics;
use crate::reconcile::{Core, HookQueue, LastCalls, Live, Settings};
use crate::registry::Registry;
use crate::share::Shares;
use crate::target::Target;

/// Builds a [`Delegate`]; see [`Delegate::builder`].
#[must_use = "a builder does nothing until .build()"]
pub struct DelegateBuilder<K: Resource> {
    client: kube::Client,
    registry: Registry,
    dyntype: K::DynamicType,
    reporter: Reporter,
    metrics: Option<ReconcileMetrics>,
    settings: Settings,
    extension_kinds: AllowList,
    namespace: Option<String>,
    max_reconciles_per_plugin: u16,
    initial_list: InitialList,
    child_kinds: ChildKinds,
    mutators: Mutators,
    last_calls: Option<Arc<LastCalls>>,
}

impl<K> DelegateBuilder<K>
where
    K: Resource + Clone + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    /// The defaults: reported as `kplug-operator`, no metrics registered,
    /// default settings, no extension kinds, every namespace.
    pub(super) fn new(client: kube::Client, registry: Registry, dyntype: K::DynamicType) -> Self {
        Self {
            client,
            registry,
            dyntype,
            reporter: Reporter::from("kplug-operator"),
            metrics: None,
            settings: Settings::default(),
            extension_kinds: AllowList::default(),
            namespace: None,
            max_reconciles_per_plugin: 6,
            initial_list: InitialList::Auto,
            child_kinds: ChildKinds::default(),
            mutators: Mutators::default(),
            last_calls: None,
        }
    }

    /// Which plugins patch which child kinds before they are applied, in
    /// order (`--mutators`; none by default). The same mutators serve your
    /// own objects through [`Delegate::mutate`].
    pub fn mutators(mut self, mutators: Mutators) -> Self {
        self.mutators = mutators;
        self
    }

    /// Where the last plugin call of each object is kept (`/calls`,
    /// `kubectl kplug why`): one place for every kind of a process.
    pub(crate) fn last_calls(mut self, last_calls: Arc<LastCalls>) -> Self {
        self.last_calls = Some(last_calls);
        self
    }

    /// The kinds of children plugins may have applied (none by default):
    /// the allow-list of `--child-kinds`. Each is watched, filtered to
    /// kplug's label, while [`Delegate::wakeups`] runs.
    pub fn child_kinds(mut self, kinds: ChildKinds) -> Self {
        self.child_kinds = kinds;
        self
    }

    /// How the extension watches fill their caches (default
    /// [`InitialList::Auto`]: streaming lists from Kubernetes 1.32 on).
    /// Your own controller's watch of `K` is yours to configure:
    /// [`InitialList::watcher_config`] gives the same settings.
    pub fn initial_list(mut self, initial_list: InitialList) -> Self {
        self.initial_list = initial_list;
        self
    }

    /// Who reports the Events (default `kplug-operator`); a plugin's own
    /// Events are reported as `<controller>/<plugin>`.
    pub fn reporter(mut self, reporter: Reporter) -> Self {
        self.reporter = reporter;
        self
    }

    /// Registers the delegate's metrics (`kplug_reconcile_total`,
    /// `kplug_extension_watches`) in `registry`.
    pub fn metrics(mut self, registry: &mut prometheus_client::registry::Registry) -> Self {
        self.metrics = Some(ReconcileMetrics::register(registry));
        self
    }

    /// The metrics of every kind of a process, registered once.
    pub(crate) fn reconcile_metrics(mut self, metrics: ReconcileMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Selection, fields, finalizer, field manager and resync period.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// The extension kinds objects may reference (none by default).
    pub fn extension_kinds(mut self, kinds: AllowList) -> Self {
        self.extension_kinds = kinds;
        self
    }

    /// Watch extensions in this namespace only (all by default); match the
    /// namespace your `Controller` watches.
    pub fn namespace(mut self, namespace: Option<String>) -> Self {
        self.namespace = namespace;
        self
    }

    /// Reconciles one plugin may have in progress (default 6). Keep it
    /// below your `Controller`'s concurrency, so that a plugin that hangs
    /// cannot take every worker.
    pub fn max_reconciles_per_plugin(mut self, max: u16) -> Self {
        self.max_reconciles_per_plugin = max;
        self
    }

    /// Checks the kind and the extension kinds on the API server, and
    /// builds the delegate.
    ///
    /// # Errors
    /// [`crate::Error::Resource`] when `K` is not served or has no
    /// `/status` subresource, and [`crate::Error::Config`] when an
    /// extension kind is not served.
    pub async fn build(self) -> Result<Delegate<K>, crate::Error> {
        let gvk = GroupVersionKind::gvk(
            &K::group(&self.dyntype),
            &K::version(&self.dyntype),
            &K::kind(&self.dyntype),
        );
        let target = Target::discover(&self.client, &gvk).await?;
        self.extension_kinds.check_served(&self.client).await?;
        let children = self.children(&target).await?;
        // Without a registry the metrics are kept but exported nowhere.
        let metrics = self.metrics.unwrap_or_default();
        let (wake, woken) = mpsc::unbounded_channel();
        let initial_list = self.initial_list.resolve(&self.client).await;
        let extensions = Extensions::new(
            self.client.clone(),
            target.api_resource.clone(),
            self.namespace,
            initial_list,
            self.extension_kinds,
            metrics.clone(),
            wake.clone(),
        );
        let hook_queue = HookQueue::new(
            self.settings.async_hook_queue,
            metrics.hooks().queue().clone(),
        );
        let core = Core {
            events: Events::new(self.client.clone(), self.reporter, None),
            client: self.client,
            target,
            backend: Live {
                registry: self.registry.clone(),
                extensions,
            },
            metrics,
            settings: self.settings,
            failures: FailureTracker::new(Backoff::new(
                Duration::from_millis(500),
                Duration::from_secs(300),
            )),
            waiting: Arc::default(),
            shares: Shares::new(self.max_reconciles_per_plugin.into(), wake.clone()),
            written: Arc::default(),
            last_calls: self.last_calls.unwrap_or_default(),
            recent: Arc::default(),
            hook_queue,
            children,
        };
        Ok(Delegate {
            core: Arc::new(core),
            dyntype: self.dyntype,
            wake,
            woken: Arc::new(tokio::sync::Mutex::new(woken)),
            registry: self.registry,
            mutators: self.mutators,
        })
    }
}

impl<K: Resource> DelegateBuilder<K> {
    /// The children's watches, when `--child-kinds` allows any kind.
    async fn children(&self, target: &Target) -> Result<Option<Arc<Children>>, crate::Error> {
        if self.child_kinds.is_empty() {
            return Ok(None);
        }
        let children = Children::discover(
            &self.client,
            &target.api_resource,
            self.child_kinds.clone(),
            (self.mutators.clone(), self.registry.clone()),
            self.namespace.clone(),
        )
        .await?;
        Ok(Some(Arc::new(children)))
    }
}

impl<K: Resource> Debug for DelegateBuilder<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegateBuilder")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

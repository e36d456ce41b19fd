//! The reconcile of one object: plan → record → call → write.
//!
//! # Expected flow for one object
//! 1. [`plan`]: from the cached object and the ready candidates, decide
//!    (purely, no request) whether to wait for a plugin, or which
//!    implementations to call, whether the choice is new and must be
//!    recorded, and which Events are news.
//! 2. Waiting for a plugin ([`wait`]): `PluginAvailable=False` with the
//!    reason, a Warning Event; the registry wakes the object up when a
//!    plugin that meets its need is ready (`crate::waiting`).
//! 3. [`record`]: at most one write before any plugin call, sent only when
//!    something is missing: the finalizer and a new choice, in one JSON
//!    patch of the metadata (the choice in the annotations
//!    `kplug.io/implementation` and `kplug.io/plugin`).
//! 4. The extensions are resolved from their watches (a missing one is
//!    `ExtensionsResolved=False` naming it, and the plugin is not called
//!    until it exists; a new object waits quietly for a few seconds first,
//!    since extensions usually come with it), and the cache is checked
//!    against this process's own writes, without a read ([`recent`]).
//! 5. [`call`]: each target (concurrently under `--selection all`, each in
//!    its own plugin's share), with its hooks ([`hooks`]). The call writes
//!    nothing; each ends in an [`Outcome`] ([`outcome`]), the one place
//!    that says what it means: the `Reconciled` condition, the Warning
//!    Event, the metric label and when to look again. A hook's answer
//!    (its status under `status.hooks`, its Events) is written by the
//!    write module's `HookWriter`, as an async hook's comes after the
//!    reconcile returned.
//! 6. [`write`](mod@write): at most one status apply (the plugin's fields,
//!    the operator's conditions, `status.implementation` and
//!    `observedGeneration`, under the operator's field manager; skipped
//!    when it would change nothing), then the Events. The status is a
//!    typed value built in one place (`status::OperatorStatus`).
//!
//! Only [`record`] and [`write`](mod@write) send requests to the API
//! server; the wait, finalize and reselect steps go through them too.
//!
//! A new object costs three requests: the record, the status, and the
//! plugin's Event when it has one; four with an extension whose status
//! the plugin writes (`docs/performance.md`). An unchanged object costs
//! none.
//!
//! # Guarantees
//! - The choice is durable before the first call (the record), and sticky
//!   from then on.
//! - A status field the plugin stops reporting is removed: under
//!   `--selection preferred` the operator applies exactly what the plugin
//!   answered; under `--selection all` each plugin's fields are applied
//!   under its own field manager, and one plugin's answer never removes
//!   another's.
//!
//! An object annotated `kplug.io/reselect` is moved ([`reselect`]); a
//! deleted one is finalized ([`finalize`]).

mod apply;
mod call;
mod finalize;
mod hooks;
mod last_call;
mod outcome;
mod plan;
mod recent;
mod record;
mod reselect;
mod settings;
mod wait;
mod write;

#[cfg(test)]
mod tests;

pub(crate) use hooks::{
    HookQueue, behaviour_name as hook_behaviour_name, phase_name as hook_phase_name,
};
pub(crate) use last_call::{LastCall, LastCalls};
pub(crate) use outcome::Outcome;
pub(crate) use recent::Recent;
pub use reselect::RESELECT;
pub(crate) use reselect::requested as reselect_requested;
pub use settings::{SelectionMode, Settings};

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kplug_proto::v1::{
    FinalizeRequest, FinalizeResponse, GroupKind, HookPhase, ReconcileRequest, ReconcileResponse,
};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tracing::Instrument;

use crate::backoff::FailureTracker;
use crate::children::Children;
use crate::events::Events;
use crate::extensions::{ExtensionRef, Extensions, Resolution};
use crate::metrics::ReconcileMetrics;
use crate::plugin::{CallError, PluginInstance};
use crate::registry::Registry;
use crate::selection::Candidate;
use crate::share::Shares;
use crate::target::Target;
use crate::waiting::Waiting;
use crate::written::Written;

/// A reconcile that failed as a whole: the API server refused a read or a
/// write. Everything else ends in conditions (an outcome of the reconcile).
#[derive(Debug, thiserror::Error)]
#[error("{what} for {object}: {source}")]
pub struct ReconcileError {
    /// What was being read or written.
    what: &'static str,
    /// `namespace/name` of the object.
    object: String,
    /// The API server's answer.
    #[source]
    source: kube::Error,
}

impl ReconcileError {
    pub(crate) fn new(what: &'static str, obj: &DynamicObject, source: kube::Error) -> Self {
        Self::of(what, object_key(obj), source)
    }

    pub(crate) fn of(what: &'static str, object: String, source: kube::Error) -> Self {
        Self {
            what,
            object,
            source,
        }
    }

    /// What was being read or written, e.g. `writing the operator's status`.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// A CamelCase reason, for a condition or an Event.
    pub fn reason(&self) -> &'static str {
        "ApiRequestFailed"
    }

    /// The API server's own message when it refused the request (what a
    /// person can act on), else the error.
    pub fn api_message(&self) -> String {
        match &self.source {
            kube::Error::Api(response) => response.message.clone(),
            other => other.to_string(),
        }
    }
}

/// What the reconcile needs of the plugins and of the extensions: the
/// registry and the extension watches in production, fakes in unit tests.
pub(crate) trait Backend: Send + Sync + 'static {
    /// Implementations offered for `base` by ready plugins.
    fn candidates(&self, base: &GroupKind) -> Vec<Candidate>;
    /// Implementations offered for `base` since start, ready now or not.
    fn ever_offered(&self, base: &GroupKind) -> Vec<String>;
    /// What is left of the registry's start-up grace.
    fn start_up_grace_left(&self) -> Option<Duration>;
    /// Where plugins register, for messages.
    fn registry_socket(&self) -> PathBuf;
    /// The ready instance of `plugin`.
    fn plugin(&self, plugin: &str) -> Option<Arc<PluginInstance>>;
    /// Calls `Reconcile` on `plugin`.
    fn reconcile(
        &self,
        plugin: &str,
        request: ReconcileRequest,
    ) -> impl Future<Output = Result<ReconcileResponse, CallError>> + Send;
    /// Calls `Finalize` on `plugin`.
    fn finalize(
        &self,
        plugin: &str,
        request: FinalizeRequest,
    ) -> impl Future<Output = Result<FinalizeResponse, CallError>> + Send;
    /// The hooks ready plugins declared for `base` at `phase`, in calling
    /// order.
    fn hooks(&self, base: &GroupKind, phase: HookPhase) -> Vec<hooks::Declared>;
    /// Reads the extensions `base` references.
    fn resolve(
        &self,
        base: &DynamicObject,
        refs: &[ExtensionRef],
    ) -> impl Future<Output = Resolution> + Send;
    /// Forgets a deleted base.
    fn forget(&self, base: &DynamicObject);
    /// How to reach an extension that was resolved.
    fn extension_api(&self, ext: &DynamicObject) -> ApiResource;
}

/// The production [`Backend`]: the registry and the extension watches.
#[derive(Clone, Debug)]
pub(crate) struct Live {
    pub(crate) registry: Registry,
    pub(crate) extensions: Arc<Extensions>,
}

impl Backend for Live {
    fn candidates(&self, base: &GroupKind) -> Vec<Candidate> {
        self.registry.candidates(base)
    }

    fn ever_offered(&self, base: &GroupKind) -> Vec<String> {
        self.registry.ever_offered(base)
    }

    fn start_up_grace_left(&self) -> Option<Duration> {
        self.registry.start_up_grace_left()
    }

    fn registry_socket(&self) -> PathBuf {
        self.registry.socket_path()
    }

    fn plugin(&self, plugin: &str) -> Option<Arc<PluginInstance>> {
        self.registry.get(plugin)
    }

    async fn reconcile(
        &self,
        plugin: &str,
        request: ReconcileRequest,
    ) -> Result<ReconcileResponse, CallError> {
        self.registry
            .call(plugin, |instance| {
                let request = request.clone();
                async move { instance.reconcile(request).await }
            })
            .await
    }

    async fn finalize(
        &self,
        plugin: &str,
        request: FinalizeRequest,
    ) -> Result<FinalizeResponse, CallError> {
        self.registry
            .call(plugin, |instance| {
                let request = request.clone();
                async move { instance.finalize(request).await }
            })
            .await
    }

    fn hooks(&self, base: &GroupKind, phase: HookPhase) -> Vec<hooks::Declared> {
        hooks::ordered(self.registry.ready(), base, phase)
    }

    async fn resolve(&self, base: &DynamicObject, refs: &[ExtensionRef]) -> Resolution {
        self.extensions.resolve(base, refs).await
    }

    fn forget(&self, base: &DynamicObject) {
        self.extensions.forget(base);
    }

    fn extension_api(&self, ext: &DynamicObject) -> ApiResource {
        self.extensions.api_resource(ext)
    }
}

/// Everything a reconcile needs; shared by every reconcile of one kind.
pub(crate) struct Core<B> {
    pub(crate) client: Client,
    pub(crate) target: Target,
    pub(crate) backend: B,
    pub(crate) events: Events,
    pub(crate) metrics: ReconcileMetrics,
    pub(crate) settings: Settings,
    /// Per-object backoff.
    pub(crate) failures: FailureTracker,
    /// Objects waiting for a plugin; registry changes wake only these.
    pub(crate) waiting: Arc<Waiting>,
    /// Each plugin's share of the workers.
    pub(crate) shares: Shares,
    /// What the operator last wrote to each status (repairs, no loops).
    pub(crate) written: Arc<Written>,
    /// The last plugin call of each object (`kubectl kplug why`).
    pub(crate) last_calls: Arc<LastCalls>,
    /// What this reconcile's process finalized and chose, which the cache
    /// may not show yet (instead of a read before each call).
    pub(crate) recent: Arc<Recent>,
    /// Async hook calls waiting to run.
    pub(crate) hook_queue: HookQueue,
    /// The children plugins manage (none without `--child-kinds`).
    pub(crate) children: Option<Arc<Children>>,
}

impl<B> Core<B> {
    pub(crate) fn object_ref(&self, obj: &DynamicObject) -> ObjectRef<DynamicObject> {
        ObjectRef::from_obj_with(obj, self.target.api_resource.clone())
    }

    pub(crate) fn api(&self, obj: &DynamicObject) -> Api<DynamicObject> {
        api_of(
            &self.client,
            &self.target.api_resource,
            self.target.namespaced,
            obj,
        )
    }

    pub(crate) fn kind(&self) -> GroupKind {
        self.target.group_kind()
    }
}

impl<B: Backend> Core<B> {
    /// Whether `plugin` is the only ready plugin serving the kind: its
    /// share is then every worker (`crate::share`).
    pub(crate) fn serves_alone(&self, plugin: &str) -> bool {
        self.backend
            .candidates(&self.kind())
            .iter()
            .all(|c| c.plugin == plugin)
    }
}

/// The API of `obj` (of kind `api_resource`): in its namespace when the kind
/// is namespaced.
fn api_of(
    client: &Client,
    api_resource: &ApiResource,
    namespaced: bool,
    obj: &DynamicObject,
) -> Api<DynamicObject> {
    let namespace = obj.namespace().filter(|_| namespaced);
    crate::target::api_in(client, api_resource, namespace.as_deref())
}

/// `namespace/name`, for messages and logs.
pub(crate) fn object_key(obj: &DynamicObject) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

/// Reconciles one object. Returns when to look at it again.
///
/// # Errors
/// [`ReconcileError`] when the API server refuses a read or a write; the
/// controller then retries with [`Delegate::error_policy`](crate::Delegate::error_policy)'s backoff.
pub(crate) async fn reconcile<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> Result<Action, ReconcileError> {
    // One reconcile, one trace: the plugin calls are its children, and the
    // plugins continue it.
    let span = tracing::info_span!("reconcile", object = object_key(obj), kind = %core.kind().kind);
    let result = async {
        if obj.metadata.deletion_timestamp.is_some() {
            finalize::finalize(obj, core).await
        } else if reselect::requested(obj) {
            match reselect::reselect(obj, core).await {
                Ok(Some(outcome)) => Ok(outcome),
                Ok(None) => apply::apply(obj, core).await,
                Err(error) => Err(error),
            }
        } else {
            apply::apply(obj, core).await
        }
    }
    .instrument(span)
    .await;
    let uid = obj.uid().unwrap_or_default();
    match result {
        Ok(outcome) => {
            for (label, plugin) in outcome.metrics() {
                core.metrics.count_reconcile(label, plugin);
            }
            let requeue = outcome.requeue(&core.failures, &uid, core.settings.resync);
            tracing::debug!(object = object_key(obj), outcome = ?outcome.metrics(), ?requeue, "reconciled");
            Ok(requeue.map_or_else(Action::await_change, Action::requeue))
        }
        Err(error) => {
            core.metrics.count_reconcile("error", "");
            tracing::warn!(object = object_key(obj), %error, "reconcile failed");
            Err(error)
        }
    }
}

//! The reconcile loop: select an implementation, resolve extensions, call
//! the plugin, write what it returns.
//!
//! # Expected flow for one object
//! 1. Read the extension references; find the candidates (ready plugins
//!    offering the object's kind) and [select](crate::selection) one.
//! 2. No candidate (or the recorded one is gone): write
//!    `PluginAvailable=False` with the reason, record a Warning Event, and
//!    wait; the registry wakes the object up when a plugin registers.
//! 3. Record the choice in `status.implementation` **before** calling the
//!    plugin, and add the finalizer.
//! 4. Resolve the extensions; a missing one is `ExtensionsResolved=False`
//!    naming it, and the plugin is not called until it exists.
//! 5. Call `Reconcile` with the base object and the extensions the plugin
//!    declared, check the response, write the plugin's status to the base
//!    and the extensions and the operator's conditions, record the plugin's
//!    Events.
//! 6. OK: requeue after the resync period. RETRY: after the plugin's delay.
//!    FAILED / invalid / unreachable / timeout: exponential backoff, with a
//!    condition and a Warning Event saying why.
//!
//! An object annotated `kplug.io/reselect` is moved: Finalize on its
//! recorded implementation, then a new choice (see `reselect.rs`).
//!
//! On deletion, when the finalizer is present, `Finalize` is called on the
//! recorded implementation's plugin and the finalizer is removed once it
//! answers OK (at once when the plugin does not advertise Finalize).

mod reselect;

pub use reselect::{RESELECT, requested as reselect_requested};

use std::sync::Arc;
use std::time::Duration;

use kplug_proto::v1::{Capability, FinalizeRequest, GroupKind, Outcome, ReconcileRequest};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::backoff::FailureTracker;
use crate::events::{Events, Severity};
use crate::extensions::{Extensions, Resolution, references};
use crate::metrics::Metrics;
use crate::plugin::{CallError, PluginInstance, same_kind};
use crate::preference::Preference;
use crate::registry::Registry;
use crate::selection::{self, Candidate, Reason, Recorded, Selection};
use crate::share::{BUSY_REQUEUE, Shares};
use crate::status::{self, Checked, Condition, OperatorConditions, types};
use crate::target::Target;
use crate::waiting::{Need, Waiting};
use crate::written::Written;

/// How implementations are chosen (`--selection`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SelectionMode {
    /// One implementation per object: recorded, else preferred, else the
    /// first in a stable order.
    Preferred,
    /// Every plugin that serves the kind, in a stable order.
    All,
}

/// Controller settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Selection mode.
    pub selection: SelectionMode,
    /// Path of the extensions list, e.g. `["spec", "extensions"]`.
    pub extensions_field: Vec<String>,
    /// Path of the preferred implementation, e.g. `["spec", "preferredImplementation"]`.
    pub preferred_field: Vec<String>,
    /// Finalizer name.
    pub finalizer: String,
    /// The operator's field manager.
    pub field_manager: String,
    /// Requeue after a successful reconcile, to catch drift.
    pub resync: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            selection: SelectionMode::Preferred,
            extensions_field: vec!["spec".into(), "extensions".into()],
            preferred_field: vec!["spec".into(), "preferredImplementation".into()],
            finalizer: "kplug.io/finalizer".into(),
            field_manager: "kplug-operator".into(),
            resync: Duration::from_secs(600),
        }
    }
}

/// Errors that make a reconcile fail as a whole (the API server refused a
/// write); everything else ends up in conditions.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Writing to the API server failed.
    #[error("{what} for {object}: {source}")]
    Write {
        /// What was written.
        what: &'static str,
        /// `namespace/name`.
        object: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError {
    /// What was being written.
    pub fn what(&self) -> &'static str {
        match self {
            Self::Write { what, .. } => what,
        }
    }

    /// The API server's own message when it refused the request (what a
    /// person can act on), else the error.
    pub fn api_message(&self) -> String {
        match self {
            Self::Write {
                source: kube::Error::Api(response),
                ..
            } => response.message.clone(),
            Self::Write { source, .. } => source.to_string(),
        }
    }
}

/// Everything a reconcile needs.
pub struct Context {
    /// API client.
    pub client: Client,
    /// The managed kind.
    pub target: Target,
    /// Registered plugins.
    pub registry: Registry,
    /// Extension resolution and watches.
    pub extensions: Arc<Extensions>,
    /// Event recorder.
    pub events: Events,
    /// Metrics.
    pub metrics: Metrics,
    /// Settings.
    pub settings: Settings,
    /// Per-object backoff.
    pub failures: FailureTracker,
    /// Objects waiting for a plugin; registry changes wake only these.
    pub waiting: Arc<Waiting>,
    /// Each plugin's share of the workers.
    pub shares: Shares,
    /// What the operator last wrote to each status (repairs, no loops).
    pub written: Arc<Written>,
}

impl Context {
    fn object_ref(&self, obj: &DynamicObject) -> ObjectRef<DynamicObject> {
        ObjectRef::from_obj_with(obj, self.target.api_resource.clone())
    }

    fn api(&self, obj: &DynamicObject) -> Api<DynamicObject> {
        match obj.namespace() {
            Some(ns) if self.target.namespaced => {
                Api::namespaced_with(self.client.clone(), &ns, &self.target.api_resource)
            }
            _ => Api::all_with(self.client.clone(), &self.target.api_resource),
        }
    }
}

/// How soon an object whose cached copy is behind the API server is looked
/// at again.
const STALE_REQUEUE: Duration = Duration::from_millis(200);

fn object_key(obj: &DynamicObject) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

/// The object's preferred implementation, unless empty.
fn preferred<'a>(obj: &'a DynamicObject, ctx: &Context) -> Option<&'a str> {
    field(obj, &ctx.settings.preferred_field).filter(|p| !p.is_empty())
}

fn field<'a>(obj: &'a DynamicObject, path: &[String]) -> Option<&'a str> {
    let mut value = &obj.data;
    for key in path {
        value = value.get(key)?;
    }
    value.as_str()
}

/// Reconciles one object. Returns when to look at it again.
///
/// # Errors
/// [`ReconcileError`] when the API server refuses a write; the controller
/// then retries with backoff.
pub async fn reconcile(
    obj: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let result = if obj.metadata.deletion_timestamp.is_some() {
        finalize(&obj, &ctx).await
    } else if reselect::requested(&obj) {
        match reselect::reselect(&obj, &ctx).await {
            Ok(Some(action)) => Ok(action),
            Ok(None) => apply(&obj, &ctx).await,
            Err(error) => Err(error),
        }
    } else {
        apply(&obj, &ctx).await
    };
    if let Err(error) = &result {
        ctx.metrics.count_reconcile("error");
        tracing::warn!(object = object_key(&obj), %error, "reconcile failed");
    }
    result
}

/// What the controller does after a reconcile error.
pub fn error_policy(obj: Arc<DynamicObject>, _error: &ReconcileError, ctx: Arc<Context>) -> Action {
    Action::requeue(ctx.failures.failed(&obj.uid().unwrap_or_default()))
}

/// The result of calling one plugin.
struct PluginRun {
    reconciled: Condition,
    requeue: Duration,
    metric: &'static str,
    plugin_conditions: Vec<Condition>,
}

async fn apply(obj: &DynamicObject, ctx: &Context) -> Result<Action, ReconcileError> {
    let uid = obj.uid().unwrap_or_default();
    let refs = references(obj, &ctx.settings.extensions_field);
    let candidates = ctx.registry.candidates(&ctx.target.group_kind());
    let chosen: Vec<(Candidate, Option<Reason>)> = match ctx.settings.selection {
        SelectionMode::All => selection::select_all(&candidates)
            .into_iter()
            .map(|c| (c, None))
            .collect(),
        SelectionMode::Preferred => {
            let preferred = preferred(obj, ctx);
            let selection = selection::select(Recorded::of(obj).as_ref(), preferred, &candidates);
            // Just after start-up the preferred plugin may not have
            // registered yet, and a fallback would stick for good.
            if let (
                Some(preferred),
                Selection::Chosen {
                    reason: Reason::Fallback,
                    ..
                },
            ) = (preferred, &selection)
                && let Some(left) = ctx.registry.start_up_grace_left()
            {
                let message = format!(
                    "the preferred implementation {preferred} has no ready plugin yet; plugins may still be registering after the operator's start, so another is chosen only if none offers it within {}s",
                    left.as_secs().max(1)
                );
                let need = Need::Preferred(preferred.to_owned());
                return wait_for_plugin(obj, ctx, need, "WaitingForPreferred", message).await;
            }
            match selection {
                Selection::Chosen { candidate, reason } => vec![(candidate, Some(reason))],
                Selection::RecordedUnavailable { recorded } => {
                    let message = format!(
                        "implementation {}{} (recorded in status) has no ready plugin; waiting for it to come back. The choice is sticky: the object is not moved to another implementation or plugin",
                        recorded.implementation,
                        recorded
                            .plugin
                            .as_deref()
                            .map(|p| format!(" of plugin {p}"))
                            .unwrap_or_default()
                    );
                    let need = Need::Recorded(recorded);
                    return wait_for_plugin(obj, ctx, need, "PluginUnavailable", message).await;
                }
                Selection::NoCandidates => vec![],
            }
        }
    };
    if chosen.is_empty() {
        let message = format!(
            "no ready plugin serves {}; waiting for one to register on {}",
            ctx.target.display(),
            ctx.registry.socket_path().display()
        );
        return wait_for_plugin(obj, ctx, Need::AnyPlugin, "NoPlugin", message).await;
    }
    // With one implementation per object, reaching it ends the wait; with
    // every plugin, the object waits on for plugins that have not served it.
    match ctx.settings.selection {
        SelectionMode::Preferred => {
            ctx.waiting.done(&ctx.object_ref(obj));
        }
        SelectionMode::All => ctx.waiting.wait(
            ctx.object_ref(obj),
            Need::PluginBeyond(chosen.iter().map(|(c, _)| c.plugin.clone()).collect()),
        ),
    }

    let plugins: Vec<Arc<PluginInstance>> = chosen
        .iter()
        .filter_map(|(c, _)| ctx.registry.get(&c.plugin))
        .collect();
    let labels = plugins
        .iter()
        .map(|p| p.label())
        .collect::<Vec<_>>()
        .join(", ");
    // With one implementation chosen, say so when it is not the preferred.
    let notice = match chosen.as_slice() {
        [(candidate, Some(_))] => {
            let ever_offered = ctx.registry.ever_offered(&ctx.target.group_kind());
            Preference::of(preferred(obj, ctx), candidate, &ever_offered).notice(candidate)
        }
        _ => None,
    };
    let available = match notice {
        Some((reason, notice)) => {
            // Once per change of reason, not once per reconcile.
            if previous_reason(obj, types::PLUGIN_AVAILABLE) != Some(reason) {
                ctx.events
                    .publish(
                        &status::reference(obj),
                        Severity::Warning,
                        reason,
                        "Select",
                        notice.clone(),
                    )
                    .await;
            }
            Condition::new(
                types::PLUGIN_AVAILABLE,
                true,
                reason,
                format!("{labels}; {notice}"),
            )
        }
        None => Condition::new(types::PLUGIN_AVAILABLE, true, "PluginReady", labels),
    };

    // Record the choice before the plugin is called.
    if let [(candidate, Some(reason))] = chosen.as_slice()
        && Recorded::of(obj) != Some(Recorded::from(candidate))
    {
        let why = match reason {
            Reason::Preferred => "it is the preferred implementation".to_owned(),
            Reason::Fallback => match preferred(obj, ctx) {
                Some(p) => format!("the preferred implementation {p} has no ready plugin"),
                None => "no implementation is preferred".to_owned(),
            },
            Reason::Recorded => "it was recorded".to_owned(),
        };
        let message = format!(
            "chose {} (plugin {}): {why}",
            candidate.implementation, candidate.plugin
        );
        let conditions = OperatorConditions {
            plugin_available: available.clone(),
            extensions_resolved: Condition::unknown(
                types::EXTENSIONS_RESOLVED,
                "Pending",
                "not resolved yet",
            ),
            reconciled: Condition::unknown(
                types::RECONCILED,
                "Pending",
                format!("calling plugin {}", candidate.plugin),
            ),
        };
        let choice = Recorded::from(candidate);
        write_operator_status(obj, ctx, Some(&choice), &conditions, &[]).await?;
        ctx.events
            .publish(
                &status::reference(obj),
                Severity::Normal,
                "ImplementationSelected",
                "Select",
                message,
            )
            .await;
    }
    ensure_finalizer(obj, ctx).await?;

    let (resolution, resolved) = match &refs {
        Ok(refs) => {
            let resolution = ctx.extensions.resolve(obj, refs).await;
            let condition = resolution.condition();
            (resolution, condition)
        }
        Err(message) => (
            Resolution::default(),
            Condition::new(
                types::EXTENSIONS_RESOLVED,
                false,
                "InvalidReference",
                message.clone(),
            ),
        ),
    };
    let choice = chosen
        .first()
        .map(|(c, _)| Recorded::from(c))
        .filter(|_| ctx.settings.selection == SelectionMode::Preferred);
    let choice = choice.as_ref();

    if !resolved.is_true() {
        let conditions = OperatorConditions {
            plugin_available: available,
            reconciled: Condition::new(
                types::RECONCILED,
                false,
                "WaitingForExtensions",
                "the plugin is not called until every referenced extension exists",
            ),
            extensions_resolved: resolved.clone(),
        };
        write_operator_status(obj, ctx, choice, &conditions, &[]).await?;
        // Waiting for a watch's first list is routine and short; a missing
        // or malformed extension is something a person has to fix.
        if resolution.waiting.is_empty() {
            ctx.events
                .publish(
                    &status::reference(obj),
                    Severity::Warning,
                    &resolved.reason,
                    "ResolveExtensions",
                    resolved.message.clone(),
                )
                .await;
        }
        ctx.metrics.count_reconcile("waiting");
        // The extension watch wakes us up when the extension appears or its
        // first list is in; the backoff is a safety net (e.g. for a kind
        // whose CRD is missing, or a watch the API server refuses).
        return Ok(Action::requeue(ctx.failures.failed(&uid)));
    }

    // Hold a place in each plugin's share for the calls; if one is taken,
    // look again shortly instead of waiting here in a worker.
    let mut places = Vec::with_capacity(chosen.len());
    for (candidate, _) in &chosen {
        match ctx.shares.try_take(&candidate.plugin) {
            Some(place) => places.push(place),
            None => {
                ctx.metrics.count_reconcile("busy");
                return Ok(Action::requeue(BUSY_REQUEUE));
            }
        }
    }
    // The cache can lag behind a deletion: under load, a queued wake-up
    // reconciled an object whose Finalize had already run, and the plugin
    // created its table again (the chaos suite's "lost" delete). Ask the API
    // server before the plugin is called. If the object is still there and
    // not being deleted, a Finalize can only come after this reconcile
    // (reconciles of one object never overlap).
    let current = read_live(obj, ctx, "reading the object before calling its plugin").await?;
    match current {
        // The cache can also lag behind a choice that changed: after a
        // reselect, a stale copy still names the old implementation, and
        // its plugin would create the table again. Look again shortly.
        Some(current) if choice.is_some() && Recorded::of(&current).as_ref() != choice => {
            return Ok(Action::requeue(STALE_REQUEUE));
        }
        Some(current)
            if current.metadata.deletion_timestamp.is_none() && current.uid() == obj.uid() => {}
        // Gone, being deleted, or replaced: its own event reconciles it.
        _ => return Ok(Action::await_change()),
    }
    let mut outcomes = Vec::new();
    for (candidate, _) in &chosen {
        outcomes.push(call_reconcile(obj, ctx, candidate, &resolution.found).await?);
    }
    let reconciled = combine(outcomes.iter().map(|o| o.reconciled.clone()).collect());
    let plugin_conditions: Vec<Condition> = outcomes
        .iter()
        .flat_map(|o| o.plugin_conditions.clone())
        .collect();
    let conditions = OperatorConditions {
        plugin_available: available,
        extensions_resolved: resolved,
        reconciled,
    };
    write_operator_status(obj, ctx, choice, &conditions, &plugin_conditions).await?;

    // The soonest requested requeue wins; a failure anywhere backs off.
    let metric = outcomes
        .iter()
        .map(|o| o.metric)
        .find(|m| *m != "ok")
        .unwrap_or("ok");
    ctx.metrics.count_reconcile(metric);
    if metric == "ok" {
        ctx.failures.reset(&uid);
    }
    let requeue = outcomes
        .iter()
        .map(|o| o.requeue)
        .min()
        .unwrap_or(ctx.settings.resync);
    Ok(Action::requeue(requeue))
}

fn combine(reconciled: Vec<Condition>) -> Condition {
    if reconciled.len() == 1 {
        return reconciled
            .into_iter()
            .next()
            .unwrap_or_else(|| Condition::unknown(types::RECONCILED, "Pending", ""));
    }
    match reconciled.iter().find(|c| !c.is_true()) {
        Some(failing) => failing.clone(),
        None => Condition::new(
            types::RECONCILED,
            true,
            "ReconcileSucceeded",
            reconciled
                .iter()
                .map(|c| c.message.as_str())
                .filter(|m| !m.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

/// The base object and the extensions as the JSON the API server serves
/// (serializing a `DynamicObject` cannot fail).
fn encode(obj: &DynamicObject, sent: &[DynamicObject]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let json = |o: &DynamicObject| serde_json::to_vec(o).unwrap_or_default();
    (json(obj), sent.iter().map(json).collect())
}

fn extensions_for(
    instance: &PluginInstance,
    base: &GroupKind,
    implementation: &str,
    found: &[DynamicObject],
) -> Vec<DynamicObject> {
    let Some(offer) = instance.offer(base, implementation) else {
        return Vec::new();
    };
    found
        .iter()
        .filter(|o| {
            let types = o.types.clone().unwrap_or_default();
            let group = types
                .api_version
                .rsplit_once('/')
                .map_or("", |(g, _)| g)
                .to_owned();
            let gk = GroupKind {
                group,
                kind: types.kind,
            };
            offer.extensions.iter().any(|e| same_kind(e, &gk))
        })
        .cloned()
        .collect()
}

async fn call_reconcile(
    obj: &DynamicObject,
    ctx: &Context,
    candidate: &Candidate,
    found: &[DynamicObject],
) -> Result<PluginRun, ReconcileError> {
    let uid = obj.uid().unwrap_or_default();
    let plugin = &candidate.plugin;
    let fail = |reason: &str, message: String, delay: Duration| PluginRun {
        reconciled: Condition::new(types::RECONCILED, false, reason, message),
        requeue: delay,
        metric: "failed",
        plugin_conditions: Vec::new(),
    };
    let Some(instance) = ctx.registry.get(plugin) else {
        return Ok(fail(
            "PluginUnreachable",
            format!("plugin {plugin} went away"),
            ctx.failures.failed(&uid),
        ));
    };
    if !instance.has(Capability::Reconcile) {
        return Ok(fail(
            "NotSupported",
            format!("plugin {} does not advertise Reconcile", instance.label()),
            ctx.settings.resync,
        ));
    }
    let base_gk = ctx.target.group_kind();
    let sent = extensions_for(&instance, &base_gk, &candidate.implementation, found);
    let (object, extensions) = encode(obj, &sent);
    let request = ReconcileRequest {
        implementation: candidate.implementation.clone(),
        object,
        extensions,
    };
    let response = ctx
        .registry
        .call(plugin, |instance| {
            let request = request.clone();
            async move { instance.reconcile(request).await }
        })
        .await;
    let reference = status::reference(obj);
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            let message = error.to_string();
            ctx.events
                .publish(
                    &reference,
                    Severity::Warning,
                    error.reason(),
                    "Reconcile",
                    message.clone(),
                )
                .await;
            return Ok(fail(error.reason(), message, ctx.failures.failed(&uid)));
        }
    };
    let checked = match status::check_reconcile(response, obj, &sent) {
        Ok(checked) => checked,
        Err(problem) => {
            let message = format!(
                "plugin {} returned an invalid response, nothing of it was written: {problem}",
                instance.label()
            );
            ctx.events
                .publish(
                    &reference,
                    Severity::Warning,
                    "InvalidPluginResponse",
                    "Reconcile",
                    message.clone(),
                )
                .await;
            return Ok(fail(
                "InvalidPluginResponse",
                message,
                ctx.failures.failed(&uid),
            ));
        }
    };
    // The API server has the last word on the plugin's part (its schema,
    // etcd's size limit). If it refuses, the operator's own conditions still
    // go out below, at this generation, saying why.
    if let Err(error) = write_plugin_status(obj, ctx, plugin, &checked).await {
        let message = format!(
            "the API server refused plugin {}'s status ({}): {}; nothing else of its answer was applied",
            instance.label(),
            error.what(),
            error.api_message()
        );
        ctx.events
            .publish(
                &reference,
                Severity::Warning,
                "StatusWriteFailed",
                "Reconcile",
                message.clone(),
            )
            .await;
        return Ok(fail(
            "StatusWriteFailed",
            message,
            ctx.failures.failed(&uid),
        ));
    }
    publish_plugin_events(ctx, &instance.name, &checked.events, "Reconcile").await;
    let label = instance.label();
    Ok(match checked.outcome {
        Outcome::Ok => PluginRun {
            reconciled: Condition::new(
                types::RECONCILED,
                true,
                "ReconcileSucceeded",
                with_plugin(&label, &checked.message),
            ),
            requeue: ctx.settings.resync,
            metric: "ok",
            plugin_conditions: checked.conditions,
        },
        Outcome::Retry => PluginRun {
            reconciled: Condition::new(
                types::RECONCILED,
                false,
                "Retrying",
                with_plugin(&label, &checked.message),
            ),
            requeue: checked.retry_after.unwrap_or(Duration::from_secs(10)),
            metric: "retry",
            plugin_conditions: checked.conditions,
        },
        Outcome::Failed | Outcome::Unspecified => {
            let message = with_plugin(&label, &checked.message);
            ctx.events
                .publish(
                    &reference,
                    Severity::Warning,
                    "ReconcileFailed",
                    "Reconcile",
                    message.clone(),
                )
                .await;
            PluginRun {
                reconciled: Condition::new(types::RECONCILED, false, "PluginFailed", message),
                requeue: ctx.failures.failed(&uid),
                metric: "failed",
                plugin_conditions: checked.conditions,
            }
        }
    })
}

/// The reason of the condition `type_` in `obj`'s status, if it has one.
fn previous_reason<'a>(obj: &'a DynamicObject, type_: &str) -> Option<&'a str> {
    status::find_condition(obj.data.pointer("/status/conditions"), type_)?
        .get("reason")?
        .as_str()
}

/// Reads `obj` from the API server, past the controller's cache (which can
/// lag behind a deletion or a change of choice). `what` names the read in
/// an error.
async fn read_live(
    obj: &DynamicObject,
    ctx: &Context,
    what: &'static str,
) -> Result<Option<DynamicObject>, ReconcileError> {
    ctx.api(obj)
        .get_opt(&obj.name_any())
        .await
        .map_err(|source| ReconcileError::Write {
            what,
            object: object_key(obj),
            source,
        })
}

/// Records the Events plugin `plugin` returned from `call`, as
/// `<controller>/<plugin>`.
async fn publish_plugin_events(
    ctx: &Context,
    plugin: &str,
    events: &[status::PluginEvent],
    call: &str,
) {
    for event in events {
        ctx.events
            .publish_from_plugin(
                plugin,
                &event.regarding,
                event.severity,
                &event.reason,
                call,
                event.message.clone(),
            )
            .await;
    }
}

fn with_plugin(label: &str, message: &str) -> String {
    if message.is_empty() {
        format!("plugin {label}")
    } else {
        format!("plugin {label}: {message}")
    }
}

async fn wait_for_plugin(
    obj: &DynamicObject,
    ctx: &Context,
    need: Need,
    reason: &str,
    message: String,
) -> Result<Action, ReconcileError> {
    let object = ctx.object_ref(obj);
    ctx.waiting.wait(object.clone(), need.clone());
    // A plugin that became ready (or a start-up grace that ended) after the
    // candidates were read, and before the wait was recorded, has woken
    // nobody: look once more. Unless a wake took the object in between: it
    // has asked for the reconcile already, and a second request could run
    // the plugin twice.
    let grace_over =
        matches!(need, Need::Preferred(_)) && ctx.registry.start_up_grace_left().is_none();
    if grace_over || need.met_by(&ctx.registry.candidates(&ctx.target.group_kind())) {
        let requeue = if ctx.waiting.done(&object) {
            Action::requeue(Duration::ZERO)
        } else {
            Action::await_change()
        };
        return Ok(requeue);
    }
    let conditions = OperatorConditions {
        plugin_available: Condition::new(types::PLUGIN_AVAILABLE, false, reason, message.clone()),
        extensions_resolved: Condition::unknown(
            types::EXTENSIONS_RESOLVED,
            "Pending",
            "resolved once a plugin is available",
        ),
        reconciled: Condition::new(
            types::RECONCILED,
            false,
            "WaitingForPlugin",
            "the plugin is called once it is available",
        ),
    };
    write_operator_status(obj, ctx, Recorded::of(obj).as_ref(), &conditions, &[]).await?;
    // Waiting out the start-up grace is routine and ends by itself; the
    // other waits need a plugin that someone has to start.
    if !matches!(need, Need::Preferred(_)) {
        ctx.events
            .publish(
                &status::reference(obj),
                Severity::Warning,
                reason,
                "Select",
                message,
            )
            .await;
    }
    ctx.metrics.count_reconcile("waiting");
    // The registry wakes the object when a plugin that meets its need is
    // ready (crate::waiting); no polling needed.
    Ok(Action::await_change())
}

/// Applies the operator's part of the status. `choice` must be what is
/// recorded (or is to be): a field the operator's manager stops applying
/// is removed by server-side apply.
async fn write_operator_status(
    obj: &DynamicObject,
    ctx: &Context,
    choice: Option<&Recorded>,
    conditions: &OperatorConditions,
    plugin_conditions: &[Condition],
) -> Result<(), ReconcileError> {
    let previous = obj.data.get("status").and_then(|s| s.get("conditions"));
    let mut all = conditions.all();
    all.extend(plugin_conditions.iter().cloned());
    let mut status = json!({
        "observedGeneration": obj.metadata.generation,
        "conditions": status::render_conditions(previous, &all, obj.metadata.generation),
    });
    if let Some(choice) = choice {
        status["implementation"] = json!(choice.implementation);
        if let Some(plugin) = &choice.plugin {
            status["plugin"] = json!(plugin);
        }
    }
    // Remembered before it is sent: its echo on the watch must already
    // match, or it would wake the object again.
    ctx.written.record(obj, &status);
    let params = PatchParams::apply(&ctx.settings.field_manager).force();
    ctx.api(obj)
        .patch_status(
            &obj.name_any(),
            &params,
            &Patch::Apply(status::apply_body(obj, status)),
        )
        .await
        .map(drop)
        .map_err(|source| ReconcileError::Write {
            what: "writing the operator's status",
            object: object_key(obj),
            source,
        })
}

async fn write_plugin_status(
    obj: &DynamicObject,
    ctx: &Context,
    plugin: &str,
    checked: &Checked,
) -> Result<(), ReconcileError> {
    let params = PatchParams::apply(&status::plugin_manager(plugin)).force();
    let base_status = checked
        .status
        .clone()
        .map(Value::Object)
        .unwrap_or_else(|| json!({}));
    ctx.api(obj)
        .patch_status(
            &obj.name_any(),
            &params,
            &Patch::Apply(status::apply_body(obj, base_status)),
        )
        .await
        .map_err(|source| ReconcileError::Write {
            what: "writing the plugin's status",
            object: object_key(obj),
            source,
        })?;
    for (ext, ext_status) in &checked.extension_statuses {
        let ar = ctx.extensions.api_resource(ext);
        let api: Api<DynamicObject> = match ext.namespace() {
            Some(ns) => Api::namespaced_with(ctx.client.clone(), &ns, &ar),
            None => Api::all_with(ctx.client.clone(), &ar),
        };
        api.patch_status(
            &ext.name_any(),
            &params,
            &Patch::Apply(status::apply_body(ext, Value::Object(ext_status.clone()))),
        )
        .await
        .map_err(|source| ReconcileError::Write {
            what: "writing an extension's status (does its CRD have a status subresource?)",
            object: object_key(ext),
            source,
        })?;
    }
    Ok(())
}

async fn ensure_finalizer(obj: &DynamicObject, ctx: &Context) -> Result<(), ReconcileError> {
    let finalizer = &ctx.settings.finalizer;
    if obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let patch = if obj.finalizers().is_empty() {
        json!([{ "op": "add", "path": "/metadata/finalizers", "value": [finalizer] }])
    } else {
        json!([{ "op": "add", "path": "/metadata/finalizers/-", "value": finalizer }])
    };
    patch_json(obj, ctx, patch, "adding the finalizer").await
}

async fn remove_finalizer(obj: &DynamicObject, ctx: &Context) -> Result<(), ReconcileError> {
    let Some(index) = obj
        .finalizers()
        .iter()
        .position(|f| f == &ctx.settings.finalizer)
    else {
        return Ok(());
    };
    // The test makes the removal safe against a concurrent change of the list.
    let path = format!("/metadata/finalizers/{index}");
    let patch = json!([
        { "op": "test", "path": path, "value": ctx.settings.finalizer },
        { "op": "remove", "path": path },
    ]);
    patch_json(obj, ctx, patch, "removing the finalizer").await
}

async fn patch_json(
    obj: &DynamicObject,
    ctx: &Context,
    patch: Value,
    what: &'static str,
) -> Result<(), ReconcileError> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| ReconcileError::Write {
            what,
            object: object_key(obj),
            source: kube::Error::SerdeError(e),
        })?;
    ctx.api(obj)
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .map(drop)
        .map_err(|source| ReconcileError::Write {
            what,
            object: object_key(obj),
            source,
        })
}

async fn finalize(obj: &DynamicObject, ctx: &Context) -> Result<Action, ReconcileError> {
    if !obj
        .finalizers()
        .iter()
        .any(|f| f == &ctx.settings.finalizer)
    {
        ctx.extensions.forget(obj);
        ctx.waiting.done(&ctx.object_ref(obj));
        ctx.written.forget(obj);
        return Ok(Action::await_change());
    }
    let uid = obj.uid().unwrap_or_default();
    let reference = status::reference(obj);
    let candidates = ctx.registry.candidates(&ctx.target.group_kind());
    let targets: Vec<Candidate> = match ctx.settings.selection {
        SelectionMode::All => selection::select_all(&candidates),
        SelectionMode::Preferred => match Recorded::of(obj) {
            None => vec![],
            Some(recorded) => match selection::select(Some(&recorded), None, &candidates) {
                Selection::Chosen { candidate, .. } => vec![candidate],
                _ => {
                    let message = format!(
                        "cannot finalize: implementation {} has no ready plugin; the object stays until it is back (to skip clean-up, remove the finalizer {} by hand)",
                        recorded.implementation, ctx.settings.finalizer
                    );
                    let need = Need::Recorded(recorded);
                    return wait_for_plugin(obj, ctx, need, "PluginUnavailable", message).await;
                }
            },
        },
    };
    if let Some(action) = finalize_on(obj, ctx, &targets).await? {
        return Ok(action);
    }
    remove_finalizer(obj, ctx).await?;
    ctx.failures.reset(&uid);
    ctx.extensions.forget(obj);
    ctx.waiting.done(&ctx.object_ref(obj));
    ctx.events
        .publish(
            &reference,
            Severity::Normal,
            "Finalized",
            "Finalize",
            "clean-up done; the object can go",
        )
        .await;
    Ok(Action::await_change())
}

/// Calls Finalize on each of `targets` that has the capability. `None`
/// when every one is done; else what to do meanwhile (retry, backoff,
/// wait for a place), with the conditions already written.
async fn finalize_on(
    obj: &DynamicObject,
    ctx: &Context,
    targets: &[Candidate],
) -> Result<Option<Action>, ReconcileError> {
    let uid = obj.uid().unwrap_or_default();
    let found = match references(obj, &ctx.settings.extensions_field) {
        Ok(refs) => {
            let resolution = ctx.extensions.resolve(obj, &refs).await;
            if !resolution.waiting.is_empty() {
                // Finalize gets the same extensions Reconcile would; the
                // end of the watch's first list wakes us up.
                return Ok(Some(Action::requeue(ctx.failures.failed(&uid))));
            }
            resolution.found
        }
        Err(_) => Vec::new(),
    };
    for candidate in targets {
        let Some(instance) = ctx.registry.get(&candidate.plugin) else {
            continue;
        };
        let Some(_place) = ctx.shares.try_take(&candidate.plugin) else {
            ctx.metrics.count_reconcile("busy");
            return Ok(Some(Action::requeue(BUSY_REQUEUE)));
        };
        if !instance.has(Capability::Finalize) {
            continue;
        }
        let sent = extensions_for(
            &instance,
            &ctx.target.group_kind(),
            &candidate.implementation,
            &found,
        );
        let (object, extensions) = encode(obj, &sent);
        let request = FinalizeRequest {
            implementation: candidate.implementation.clone(),
            object,
            extensions,
        };
        let result = ctx
            .registry
            .call(&candidate.plugin, |instance| {
                let request = request.clone();
                async move { instance.finalize(request).await }
            })
            .await
            .map_err(|e: CallError| (e.reason(), e.to_string()))
            .and_then(|r| {
                status::check_finalize(r, obj, &sent).map_err(|p| {
                    (
                        "InvalidPluginResponse",
                        format!(
                            "plugin {} returned an invalid Finalize response: {p}",
                            instance.label()
                        ),
                    )
                })
            });
        let checked = match result {
            Ok(checked) => checked,
            Err((reason, message)) => {
                return finalize_failed(obj, ctx, reason, message).await.map(Some);
            }
        };
        publish_plugin_events(ctx, &instance.name, &checked.events, "Finalize").await;
        match checked.outcome {
            Outcome::Ok => {}
            Outcome::Retry => {
                let conditions = finalize_conditions(Condition::new(
                    types::RECONCILED,
                    false,
                    "Finalizing",
                    with_plugin(&instance.label(), &checked.message),
                ));
                write_operator_status(obj, ctx, Recorded::of(obj).as_ref(), &conditions, &[])
                    .await?;
                return Ok(Some(Action::requeue(
                    checked.retry_after.unwrap_or(Duration::from_secs(10)),
                )));
            }
            Outcome::Failed | Outcome::Unspecified => {
                return finalize_failed(
                    obj,
                    ctx,
                    "FinalizeFailed",
                    with_plugin(&instance.label(), &checked.message),
                )
                .await
                .map(Some);
            }
        }
    }
    Ok(None)
}

fn finalize_conditions(reconciled: Condition) -> OperatorConditions {
    OperatorConditions {
        plugin_available: Condition::new(
            types::PLUGIN_AVAILABLE,
            true,
            "PluginReady",
            "finalizing",
        ),
        extensions_resolved: Condition::new(
            types::EXTENSIONS_RESOLVED,
            true,
            "Resolved",
            "finalizing",
        ),
        reconciled,
    }
}

async fn finalize_failed(
    obj: &DynamicObject,
    ctx: &Context,
    reason: &str,
    message: String,
) -> Result<Action, ReconcileError> {
    ctx.events
        .publish(
            &status::reference(obj),
            Severity::Warning,
            reason,
            "Finalize",
            message.clone(),
        )
        .await;
    let conditions = finalize_conditions(Condition::new(types::RECONCILED, false, reason, message));
    write_operator_status(obj, ctx, Recorded::of(obj).as_ref(), &conditions, &[]).await?;
    ctx.metrics.count_reconcile("failed");
    Ok(Action::requeue(
        ctx.failures.failed(&obj.uid().unwrap_or_default()),
    ))
}

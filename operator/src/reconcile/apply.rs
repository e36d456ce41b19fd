//! Reconciling an object that is not being deleted, top to bottom:
//! [`plan`] (decide from the cache, no writes), [`record`]
//! (at most one write before any plugin call: the finalizer and a new
//! choice), [`call`] (the plugins, concurrently under `--selection all`;
//! nothing written), [`write`](mod@write) (at most one status write, then the
//! Events).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kplug_proto::v1::HookPhase;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;

use super::call::Called;
use super::plan::{self, Calls, Known, Plan};
use super::recent::Behind;
use super::wait::wait_for_plugin;
use super::write::PluginFields;
use super::{Backend, Core, Outcome, ReconcileError, call, hooks, record, write};
use crate::extensions::{Problem, Resolution, references};
use crate::selection::{Candidate, Recorded};
use crate::share::Place;
use crate::status::{Condition, OperatorConditions, types};

/// Reconciles `obj` (see the [module docs](super) for the flow).
pub(super) async fn apply<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> Result<Outcome, ReconcileError> {
    let known = Known::read(core);
    let calls = match plan::apply(&known.inputs(obj, &core.settings)) {
        Plan::Wait(wait) => return wait_for_plugin(obj, core, wait).await,
        Plan::Call(calls) => calls,
    };
    // Behind this process's own writes: nothing to do from this copy (its
    // record would fail its tests, its call would be from the past).
    if let Some(outcome) = remembered_behind(obj, core) {
        return Ok(outcome);
    }
    let Some(_places) = take_places(obj, core, &calls) else {
        return Ok(Outcome::Busy);
    };
    let written = record::record(obj, core, &calls).await?;
    let (resolution, resolved) = resolve(obj, core).await;
    if !resolved.is_true() {
        return waiting_for_extensions(obj, core, &calls, &resolution, resolved).await;
    }
    if let Some(outcome) = behind(obj, core, calls.choice.as_ref(), written) {
        return Ok(outcome);
    }
    let called = call_each(obj, core, &calls.targets, &resolution.found).await;
    write::after_calls(obj, core, &calls, resolved, called).await
}

/// Records whether the object waits on for more plugins, and holds a place
/// in each plugin's share for the calls before anything is written. `None`
/// when a share is full: the object is woken when a place comes back,
/// instead of waiting here in a worker (crate::share).
fn take_places<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    calls: &Calls,
) -> Option<Vec<Place>> {
    let object = core.object_ref(obj);
    match &calls.waits_for {
        Some(need) => core.waiting.wait(object.clone(), need.clone()),
        None => {
            core.waiting.done(&object);
        }
    }
    calls
        .targets
        .iter()
        .map(|candidate| {
            let plugin = &candidate.plugin;
            core.shares
                .try_take(plugin, &object, core.serves_alone(plugin))
        })
        .collect()
}

/// The extensions are not all there: say so (unless it is the routine wait
/// for a watch's first list on an object served at this generation), and
/// wait for their watches to wake the object.
async fn waiting_for_extensions<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    calls: &Calls,
    resolution: &Resolution,
    resolved: Condition,
) -> Result<Outcome, ReconcileError> {
    // A new object's extensions usually come with it (one `kubectl apply`),
    // but through another watch, which may be a moment behind or not have
    // listed yet: writing "waiting" and then "ready" would cost a write
    // and show a failure that never was. It waits quietly for the grace;
    // the watches wake it, and the end of the grace writes the wait.
    if let Some(after) = grace_left(obj, resolution, Timestamp::now()) {
        return Ok(Outcome::ExtensionsExpected { after });
    }
    // Waiting for a watch's first list is routine and short: an object
    // served at this generation keeps its status meanwhile (after an
    // operator's start every object would otherwise flip to waiting and
    // back). A new or changed object says what it waits for.
    let routine = resolution.problems.is_empty() && served_at_this_generation(obj);
    if !routine {
        let conditions = OperatorConditions {
            plugin_available: calls.available.clone(),
            reconciled: Outcome::WaitingForExtensions.condition(),
            extensions_resolved: resolved.clone(),
        };
        let plugin = (PluginFields::Kept, &[][..]);
        write::operator_status(obj, core, calls.choice.as_ref(), &conditions, plugin).await?;
    }
    // A missing or malformed extension is something a person has to fix.
    if resolution.waiting.is_empty() {
        let (reason, note) = (&resolved.reason, resolved.message.clone());
        write::event(
            core,
            obj,
            EventType::Warning,
            reason,
            "ResolveExtensions",
            note,
        )
        .await;
    }
    // The extension watch wakes the object when the extension appears or
    // its first list is in; the backoff is a safety net (e.g. for a kind
    // whose CRD is missing, or a watch the API server refuses).
    Ok(Outcome::WaitingForExtensions)
}

/// How long a new object waits for its extensions before the wait is
/// written ([`waiting_for_extensions`]).
pub(super) const EXTENSION_GRACE: Duration = Duration::from_secs(5);

/// What is left at `now` of `obj`'s [`EXTENSION_GRACE`], when its
/// extensions are only missing (not malformed or refused) or unlisted, and
/// it was created less than the grace ago (by this machine's clock: a clock
/// ahead of the API server's shortens the grace, one behind it is capped at
/// the grace).
pub(super) fn grace_left(
    obj: &DynamicObject,
    resolution: &Resolution,
    now: Timestamp,
) -> Option<Duration> {
    let expected = resolution
        .problems
        .iter()
        .all(|(p, _)| *p == Problem::NotFound);
    if !expected || served_at_this_generation(obj) {
        return None;
    }
    let created = obj.metadata.creation_timestamp.as_ref()?.0;
    let age = Duration::try_from(now.duration_since(created)).unwrap_or_default();
    EXTENSION_GRACE
        .checked_sub(age)
        .filter(|left| !left.is_zero())
}

/// Calls each target (concurrently, under `--selection all`: each holds a
/// place in its own plugin's share), with its hooks before and after.
/// Nothing is written to the object here but by hooks that patch it.
async fn call_each<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    targets: &[Candidate],
    found: &[DynamicObject],
) -> Vec<(Candidate, Called)> {
    let calls = targets.iter().map(|candidate| async move {
        let before = HookPhase::BeforeReconcile;
        if let Some(stopped) = hooks::run(obj, core, before, candidate, found, None).await {
            return (candidate.clone(), Called::from(stopped));
        }
        let mut called = call::reconcile(obj, core, candidate, found).await;
        let after = Some(hooks::After(&called.outcome));
        let phase = HookPhase::AfterReconcile;
        if let Some(stopped) = hooks::run(obj, core, phase, candidate, found, after).await {
            called.outcome = stopped;
        }
        (candidate.clone(), called)
    });
    futures::future::join_all(calls).await
}

/// Whether `obj`'s status is from a reconcile of its current generation
/// with a recorded choice.
fn served_at_this_generation(obj: &DynamicObject) -> bool {
    let observed = obj
        .data
        .pointer("/status/observedGeneration")
        .and_then(serde_json::Value::as_i64);
    Recorded::of(obj).is_some() && observed.is_some() && observed == obj.metadata.generation
}

/// The extensions `obj` references, and the `ExtensionsResolved` condition.
pub(super) async fn resolve<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> (Resolution, Condition) {
    match references(obj, &core.settings.extensions_field) {
        Ok(refs) => {
            let resolution = core.backend.resolve(obj, &refs).await;
            let condition = resolution.condition();
            (resolution, condition)
        }
        Err(message) => (
            Resolution::default(),
            Condition::new(
                types::EXTENSIONS_RESOLVED,
                false,
                "InvalidReference",
                message,
            ),
        ),
    }
}

/// Whether the cache is behind the API server, checked just before the
/// plugin is called, without a read: `written`, the object as this
/// reconcile's record returned it, when it made one (a write's answer is
/// the API server's object at that moment, as a read would be); else what
/// this process remembers of its own writes ([`super::recent`],
/// [`crate::written`]).
///
/// The cache can lag behind a deletion: under load, a queued wake-up
/// reconciled an object whose Finalize had already run, and the plugin
/// created its table again (the chaos suite's "lost" delete). It can also
/// lag behind a choice that changed: after a move, a stale copy still names
/// the old implementation, and its plugin would create the table again.
/// And behind a status the operator has replaced since. Reading every
/// object before its call guarded against these at one GET per reconcile
/// (10,000 for an operator's start over 10,000 objects, `kplug-bench` P4).
fn behind<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    choice: Option<&Recorded>,
    written: Option<DynamicObject>,
) -> Option<Outcome> {
    if let Some(live) = written {
        return if live.metadata.deletion_timestamp.is_some() || live.uid() != obj.uid() {
            Some(Outcome::Vanished)
        } else if choice.is_some() && Recorded::of(&live).as_ref() != choice {
            Some(Outcome::Stale)
        } else {
            None
        };
    }
    remembered_behind(obj, core)
}

/// Whether the cached `obj` is behind what this process wrote to it.
fn remembered_behind<B: Backend>(obj: &DynamicObject, core: &Core<B>) -> Option<Outcome> {
    match core.recent.behind(obj) {
        Some(Behind::Finalized) => Some(Outcome::Vanished),
        Some(Behind::Choice) => Some(Outcome::Stale),
        None if core.written.behind(obj) => Some(Outcome::Stale),
        None => None,
    }
}

//! Reconciling an object that is not being deleted: plan, record the
//! choice, resolve the extensions, call the plugins, write the outcome.

use kplug_proto::v1::HookPhase;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;

use super::plan::{self, Calls, Known, Plan};
use super::wait::wait_for_plugin;
use super::{Backend, Core, Outcome, ReconcileError, call, hooks, write};
use crate::extensions::{Resolution, references};
use crate::selection::Recorded;
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
    let object = core.object_ref(obj);
    match &calls.waits_for {
        Some(need) => core.waiting.wait(object.clone(), need.clone()),
        None => {
            core.waiting.done(&object);
        }
    }
    // Hold a place in each plugin's share for the calls before anything is
    // written; if one is taken, the object is woken when a place comes
    // back, instead of waiting here in a worker (crate::share).
    let mut places = Vec::with_capacity(calls.targets.len());
    for candidate in &calls.targets {
        match core.shares.try_take(&candidate.plugin, &object) {
            Some(place) => places.push(place),
            None => return Ok(Outcome::Busy),
        }
    }
    if let Some((reason, notice)) = &calls.notice {
        write::event(
            core,
            obj,
            EventType::Warning,
            reason,
            "Select",
            notice.clone(),
        )
        .await;
    }
    // The object as the API server returned it from this reconcile's
    // last write, if it made one: as fresh as a read (see `behind`).
    let recorded = record_choice(obj, core, &calls).await?;
    let finalizer = write::ensure_finalizer(obj, core);
    let (finalizer, ()) = match (&calls.newly_chosen, &recorded) {
        // The Event of a choice recorded goes out with the finalizer.
        (Some(note), Some(_)) => {
            let selected = write::event(
                core,
                obj,
                EventType::Normal,
                "ImplementationSelected",
                "Select",
                note.clone(),
            );
            futures::join!(finalizer, selected)
        }
        _ => (finalizer.await, ()),
    };
    let written = finalizer?.or(recorded);

    let (resolution, resolved) = resolve(obj, core).await;
    if !resolved.is_true() {
        // Waiting for a watch's first list is routine and short: an object
        // served at this generation keeps its status meanwhile (after an
        // operator's start every object would otherwise flip to waiting
        // and back). A new or changed object says what it waits for.
        let routine = resolution.problems.is_empty() && served_at_this_generation(obj);
        if !routine {
            let conditions = OperatorConditions {
                plugin_available: calls.available,
                reconciled: Outcome::WaitingForExtensions.condition(),
                extensions_resolved: resolved.clone(),
            };
            write::operator_status(obj, core, calls.choice.as_ref(), &conditions, &[]).await?;
        }
        // Waiting for a watch's first list is routine and short; a missing
        // or malformed extension is something a person has to fix.
        if resolution.waiting.is_empty() {
            let message = resolved.message.clone();
            write::event(
                core,
                obj,
                EventType::Warning,
                &resolved.reason,
                "ResolveExtensions",
                message,
            )
            .await;
        }
        // The extension watch wakes the object when the extension appears
        // or its first list is in; the backoff is a safety net (e.g. for a
        // kind whose CRD is missing, or a watch the API server refuses).
        return Ok(Outcome::WaitingForExtensions);
    }

    if let Some(outcome) = behind(obj, core, calls.choice.as_ref(), written).await? {
        return Ok(outcome);
    }
    let mut outcomes = Vec::with_capacity(calls.targets.len());
    let mut plugin_conditions = Vec::new();
    for candidate in &calls.targets {
        let found = &resolution.found;
        let before = HookPhase::BeforeReconcile;
        let outcome = match hooks::run(obj, core, before, candidate, found, None).await {
            Some(stopped) => stopped,
            None => {
                let called = call::reconcile(obj, core, candidate, found).await;
                if let Some((type_, reason, action, note)) = called.outcome.event() {
                    write::event(core, obj, type_, reason, action, note).await;
                }
                plugin_conditions.extend(called.conditions);
                let after = Some(hooks::After(&called.outcome));
                let phase = HookPhase::AfterReconcile;
                match hooks::run(obj, core, phase, candidate, found, after).await {
                    Some(stopped) => stopped,
                    None => called.outcome,
                }
            }
        };
        if let Outcome::HookStopped { .. } = outcome
            && let Some((type_, reason, action, note)) = outcome.event()
        {
            write::event(core, obj, type_, reason, action, note).await;
        }
        outcomes.push(outcome);
    }
    let outcome = match <[Outcome; 1]>::try_from(outcomes) {
        Ok([one]) => one,
        Err(all) => Outcome::All(all),
    };
    let conditions = OperatorConditions {
        plugin_available: calls.available,
        extensions_resolved: resolved,
        reconciled: outcome.condition(),
    };
    write::operator_status(
        obj,
        core,
        calls.choice.as_ref(),
        &conditions,
        &plugin_conditions,
    )
    .await?;
    Ok(outcome)
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

/// Records a new choice before the plugin is called, so that a crash or a
/// lost write cannot leave an object served by a plugin it does not name.
/// Returns the object as written, if there was a choice to record (its
/// `ImplementationSelected` Event is then the caller's to publish).
async fn record_choice<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    calls: &Calls,
) -> Result<Option<DynamicObject>, ReconcileError> {
    let (Some(_), Some(choice)) = (&calls.newly_chosen, &calls.choice) else {
        return Ok(None);
    };
    let plugin = choice.plugin.as_deref().unwrap_or_default();
    let conditions = OperatorConditions {
        plugin_available: calls.available.clone(),
        extensions_resolved: Condition::unknown(
            types::EXTENSIONS_RESOLVED,
            "Pending",
            "not resolved yet",
        ),
        reconciled: Condition::unknown(
            types::RECONCILED,
            "Pending",
            format!("calling plugin {plugin}"),
        ),
    };
    let written = write::operator_status(obj, core, Some(choice), &conditions, &[]).await?;
    Ok(Some(written))
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

/// Whether the cache is behind the API server, read past it just before
/// the plugin is called: `written`, the object as this reconcile's last
/// write returned it, or else a read. A write's answer is the API server's
/// object at that moment, as a read would be, and saves the read: each new
/// object records its choice and its finalizer before its first call, so
/// converging many new objects made one GET each for nothing
/// (`kplug-bench` P2).
///
/// The cache can lag behind a deletion: under load, a queued wake-up
/// reconciled an object whose Finalize had already run, and the plugin
/// created its table again (the chaos suite's "lost" delete). If the object
/// is still there and not being deleted, a Finalize can only come after
/// this reconcile (reconciles of one object never overlap). The cache can
/// also lag behind a choice that changed: after a reselect, a stale copy
/// still names the old implementation, and its plugin would create the
/// table again.
async fn behind<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    choice: Option<&Recorded>,
    written: Option<DynamicObject>,
) -> Result<Option<Outcome>, ReconcileError> {
    let live = match written {
        Some(written) => Some(written),
        None => write::read_live(obj, core, "reading the object before calling its plugin").await?,
    };
    Ok(match live {
        Some(live) if choice.is_some() && Recorded::of(&live).as_ref() != choice => {
            Some(Outcome::Stale)
        }
        Some(live) if live.metadata.deletion_timestamp.is_none() && live.uid() == obj.uid() => None,
        // Gone, being deleted, or replaced: its own event reconciles it.
        _ => Some(Outcome::Vanished),
    })
}

//! Cleaning up before an object goes: `Finalize` on the recorded
//! implementation's plugin, then the finalizer is removed. Also the first
//! half of a move to another implementation ([`super::reselect`]).
//!
//! The finalizer is kube-runtime's protocol, written the way its
//! `finalizer` helper writes it (JSON patches with `test` operations, so
//! that a concurrent change of the list fails the write instead of being
//! overwritten), but not with the helper itself: the helper adds the
//! finalizer in a write of its own and ends the reconcile there, and kplug
//! records the choice of implementation in the same write
//! ([`super::record`]), before the first call, one request per new object
//! instead of two and a second reconcile.

use kplug_proto::v1::{Capability, HookPhase};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;

use super::apply::resolve;
use super::outcome::{Call, ChildProblem};
use super::plan::{self, FinalizePlan, Known};
use super::wait::wait_for_plugin;
use super::write::PluginFields;
use super::{Backend, Core, Outcome, ReconcileError, call, hooks, write};
use crate::plugin::PluginInstance;
use crate::selection::{Candidate, Recorded};
use crate::status::OperatorConditions;

/// Finalizes `obj`, which is being deleted.
pub(super) async fn finalize<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> Result<Outcome, ReconcileError> {
    let known = Known::read(core);
    let targets = match plan::finalize(&known.inputs(obj, &core.settings)) {
        FinalizePlan::Release => {
            forget(obj, core);
            core.written.forget(obj);
            return Ok(Outcome::Vanished);
        }
        FinalizePlan::Wait(wait) => return wait_for_plugin(obj, core, wait).await,
        FinalizePlan::Call(targets) => targets,
    };
    if let Some(outcome) = finalize_on(obj, core, &targets).await? {
        return Ok(outcome);
    }
    // The children go with their base, before its finalizer: owner
    // references would have the garbage collector delete them too, but
    // only where a controller manager runs.
    if let Some(children) = &core.children
        && let Err(message) = children.delete_all(obj).await
    {
        let plugin = targets
            .first()
            .map(|t| t.plugin.clone())
            .unwrap_or_default();
        let outcome = Outcome::Children {
            plugin,
            problem: ChildProblem::ApplyFailed(message),
        };
        if let Some((type_, reason, action, note)) = outcome.event() {
            write::event(core, obj, type_, reason, action, note).await;
        }
        return Ok(outcome);
    }
    write::remove_finalizer(obj, core).await?;
    core.recent.finalized(obj);
    forget(obj, core);
    let note = "clean-up done; the object can go";
    write::event(core, obj, EventType::Normal, "Finalized", "Finalize", note).await;
    Ok(Outcome::Finalized)
}

fn forget<B: Backend>(obj: &DynamicObject, core: &Core<B>) {
    core.backend.forget(obj);
    core.last_calls.forget(&obj.uid().unwrap_or_default());
    core.waiting.done(&core.object_ref(obj));
}

/// Calls Finalize on each of `targets` that has the capability. `None`
/// when every one is done; else the outcome to wait on (retry, backoff,
/// a place in a plugin's share), with the conditions already written.
pub(super) async fn finalize_on<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    targets: &[Candidate],
) -> Result<Option<Outcome>, ReconcileError> {
    // Finalize gets the same extensions Reconcile would; the end of a
    // watch's first list wakes the object. A malformed reference sends none.
    let (resolution, _) = resolve(obj, core).await;
    if !resolution.waiting.is_empty() {
        return Ok(Some(Outcome::WaitingForExtensions));
    }
    for candidate in targets {
        let Some(instance) = core.backend.plugin(&candidate.plugin) else {
            continue;
        };
        let alone = core.serves_alone(&candidate.plugin);
        let Some(_place) = core
            .shares
            .try_take(&candidate.plugin, &core.object_ref(obj), alone)
        else {
            return Ok(Some(Outcome::Busy));
        };
        let outcome = finalize_one(obj, core, &instance, candidate, &resolution.found).await;
        if let Outcome::Done { .. } = outcome {
            continue;
        }
        if let Some((type_, reason, action, note)) = outcome.event() {
            write::event(core, obj, type_, reason, action, note).await;
        }
        let conditions = OperatorConditions::finalizing(outcome.condition());
        let plugin = (PluginFields::Kept, &[][..]);
        write::operator_status(obj, core, Recorded::of(obj).as_ref(), &conditions, plugin).await?;
        return Ok(Some(outcome));
    }
    Ok(None)
}

/// Calls Finalize on `candidate` (served by `instance`), with the hooks
/// before and after it: what it came to.
async fn finalize_one<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    instance: &PluginInstance,
    candidate: &Candidate,
    found: &[DynamicObject],
) -> Outcome {
    let before = HookPhase::BeforeFinalize;
    if let Some(stopped) = hooks::run(obj, core, before, candidate, found, None).await {
        return stopped;
    }
    let outcome = if instance.has(Capability::Finalize) {
        let called = call::finalize(obj, core, instance, candidate, found).await;
        if let Some(answer) = &called.answer {
            let events = &answer.events;
            let call = Call::Finalize.name();
            write::plugin_events(core, &instance.name, events, call).await;
        }
        called.outcome
    } else {
        Outcome::Done {
            call: Call::Finalize,
            plugin: instance.label(),
            message: "no Finalize: nothing to clean up".into(),
        }
    };
    let after = Some(hooks::After(&outcome));
    let phase = HookPhase::AfterFinalize;
    hooks::run(obj, core, phase, candidate, found, after)
        .await
        .unwrap_or(outcome)
}

//! Waiting for a plugin: the object says why, and the registry wakes it.

use kube::api::DynamicObject;
use kube::runtime::events::EventType;

use super::plan::Wait;
use super::write::PluginFields;
use super::{Backend, Core, Outcome, ReconcileError, write};
use crate::selection::Recorded;
use crate::status::OperatorConditions;
use crate::waiting::Need;

/// Records that `obj` waits, writes why, and tells a person when someone
/// has to start a plugin.
pub(super) async fn wait_for_plugin<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    wait: Wait,
) -> Result<Outcome, ReconcileError> {
    let Wait {
        need,
        reason,
        message,
    } = wait;
    let object = core.object_ref(obj);
    core.waiting.wait(object.clone(), need.clone());
    // A plugin that became ready (or a start-up grace that ended) after the
    // candidates were read, and before the wait was recorded, has woken
    // nobody: look once more. Unless a wake took the object in between: it
    // has asked for the reconcile already, and a second request could run
    // the plugin twice.
    let grace_over =
        matches!(need, Need::Preferred(_)) && core.backend.start_up_grace_left().is_none();
    if grace_over || need.met_by(&core.backend.candidates(&core.kind())) {
        return Ok(if core.waiting.done(&object) {
            Outcome::Woken
        } else {
            Outcome::Queued
        });
    }
    // An object served before keeps its status while the operator's
    // plugins register after its start: they are back within a heartbeat,
    // and writing "waiting" meanwhile would flip every object on every
    // restart. The end of the grace wakes it if its plugin did not come.
    if matches!(need, Need::Recorded(_)) && core.backend.start_up_grace_left().is_some() {
        tracing::debug!("waiting for the recorded plugin to register after the start");
        return Ok(Outcome::WaitingForPlugin);
    }
    let reconciled = Outcome::WaitingForPlugin.condition();
    let conditions = OperatorConditions::waiting_for_plugin(reason, &message, reconciled);
    let plugin = (PluginFields::Kept, &[][..]);
    write::operator_status(obj, core, Recorded::of(obj).as_ref(), &conditions, plugin).await?;
    // Waiting out the start-up grace is routine and ends by itself; the
    // other waits need a plugin that someone has to start.
    if !matches!(need, Need::Preferred(_)) {
        write::event(core, obj, EventType::Warning, reason, "Select", message).await;
    }
    Ok(Outcome::WaitingForPlugin)
}

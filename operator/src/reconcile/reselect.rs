//! Moving an object to another implementation, on request.
//!
//! The choice of implementation is sticky: once recorded, an object stays
//! on it even when its preference changes. A person moves it by annotating
//! it with [`RESELECT`] (any value):
//!
//! ```sh
//! kubectl annotate databasetable users kplug.io/reselect=now
//! ```
//!
//! # Expected flow
//! 1. The annotation wakes the object (crate::written), and the live object
//!    is read: a reconcile woken by an older version must not move it twice.
//! 2. The recorded implementation's plugin is called with `Finalize`, as
//!    for a deletion, when it advertises the capability: the old
//!    implementation cleans up first. If its plugin is not ready, the
//!    object waits for it, and says so.
//! 3. Once Finalize is done: the old plugin's status fields are removed,
//!    the operator's status forgets the choice, the annotation is removed
//!    with the recorded choice's annotations (one JSON patch) and a Normal
//!    Event says so.
//! 4. The next reconcile chooses again: the preference if a ready plugin
//!    offers it, else the first in the stable order.
//!
//! # Caveats
//! - The status the old plugin wrote on the extensions is left as it is.
//! - With `--selection all` nothing is recorded: the annotation is removed
//!   with a Warning Event that says it has no effect.

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;

use super::finalize::finalize_on;
use super::settings::SelectionMode;
use super::wait::wait_for_plugin;
use super::write::PluginFields;
use super::{Backend, Core, Outcome, ReconcileError, plan, write};
use crate::selection::{self, Recorded, Selection};
use crate::status::OperatorConditions;
use crate::waiting::Need;

/// The annotation that asks for a new choice of implementation.
pub const RESELECT: &str = "kplug.io/reselect";

/// Whether `obj` asks to be moved.
pub(crate) fn requested(obj: &DynamicObject) -> bool {
    obj.annotations().contains_key(RESELECT)
}

/// Moves `obj` off its recorded implementation (see the module docs).
/// `None` when the live object no longer asks for it: reconcile as usual.
pub(super) async fn reselect<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> Result<Option<Outcome>, ReconcileError> {
    let live = write::read_live(obj, core, "reading the object before moving it").await?;
    let Some(live) = live.filter(|l| l.uid() == obj.uid() && requested(l)) else {
        return Ok(None);
    };
    let recorded = Recorded::of(&live);
    let (recorded, all) = match (core.settings.selection, recorded) {
        (SelectionMode::All, _) => (None, true),
        (SelectionMode::Preferred, recorded) => (recorded, false),
    };
    if let Some(recorded) = &recorded {
        let candidates = core.backend.candidates(&core.kind());
        let Selection::Chosen {
            candidate: target, ..
        } = selection::select(Some(recorded), None, &candidates)
        else {
            return wait_for_old_plugin(&live, core, recorded).await.map(Some);
        };
        if let Some(outcome) = finalize_on(&live, core, std::slice::from_ref(&target)).await? {
            return Ok(Some(outcome));
        }
        // The old plugin's fields go with its field manager's empty apply.
        write::clear_plugin_status(&live, core, &target.plugin).await?;
        let conditions = OperatorConditions::reselecting(&recorded.implementation);
        let plugin = (PluginFields::Dropped, &[][..]);
        write::operator_status(&live, core, None, &conditions, plugin).await?;
    }
    write::remove_reselect(&live, core).await?;
    if recorded.is_some() {
        core.recent.chose(&live, None);
    }
    let (severity, reason, message) = reselected(recorded.as_ref(), all);
    write::event(core, &live, severity, reason, "Reselect", message).await;
    Ok(Some(Outcome::Reselected))
}

/// The old implementation has no ready plugin to clean up with: wait for
/// it, and say so.
async fn wait_for_old_plugin<B: Backend>(
    live: &DynamicObject,
    core: &Core<B>,
    recorded: &Recorded,
) -> Result<Outcome, ReconcileError> {
    let message = format!(
        "cannot move to another implementation yet: {} has no ready plugin to clean up with Finalize first; waiting for it (to give up the move, remove the annotation {RESELECT})",
        recorded.implementation
    );
    let wait = plan::Wait {
        need: Need::Recorded(recorded.clone()),
        reason: "PluginUnavailable",
        message,
    };
    wait_for_plugin(live, core, wait).await
}

/// The Event that says the move is done (or, under `--selection all`, that
/// it had no effect).
fn reselected(recorded: Option<&Recorded>, all: bool) -> (EventType, &'static str, String) {
    match (recorded, all) {
        (_, true) => (
            EventType::Warning,
            "ReselectIgnored",
            format!(
                "{RESELECT} has no effect with --selection all (every plugin is called); removed"
            ),
        ),
        (Some(recorded), false) => (
            EventType::Normal,
            "Reselected",
            format!(
                "left {}{} after its clean-up; choosing the implementation again",
                recorded.implementation,
                recorded
                    .plugin
                    .as_deref()
                    .map(|p| format!(" (plugin {p})"))
                    .unwrap_or_default()
            ),
        ),
        (None, false) => (
            EventType::Normal,
            "Reselected",
            "no implementation was recorded yet; choosing one".to_owned(),
        ),
    }
}

//! The record step: what must be durable before the first plugin call,
//! in at most one write.
//!
//! # Expected flow
//! 1. A Warning Event when the plan says the preference is not honoured
//!    (once per change of reason).
//! 2. One JSON patch of the object's metadata ([`write::record`]), sent only
//!    when something is missing: the operator's finalizer, so that a
//!    deletion waits for the plugin's Finalize, and a new choice, in the
//!    annotations `kplug.io/implementation` and `kplug.io/plugin`.
//! 3. An `ImplementationSelected` Event when the new choice is news (not
//!    the object's preference).
//!
//! # Guarantees
//! - The choice is durable before its plugin is first called: a crash
//!   between the call and the status write cannot let this or another
//!   replica pick another implementation, since every later reconcile reads
//!   the annotations first. The status shows the choice from the write
//!   after the call on.
//! - The write returns the object as the API server has it: it stands for
//!   a read before the call ([`super::apply`]).

use kube::api::DynamicObject;
use kube::runtime::events::EventType;

use super::plan::Calls;
use super::{Backend, Core, ReconcileError, write};

/// Records the finalizer and a new choice (see the module docs). Returns
/// the object as written, if a write was made.
pub(super) async fn record<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    calls: &Calls,
) -> Result<Option<DynamicObject>, ReconcileError> {
    if let Some((reason, notice)) = &calls.notice {
        let note = notice.clone();
        write::event(core, obj, EventType::Warning, reason, "Select", note).await;
    }
    let written = write::record(obj, core, calls.record.as_ref()).await?;
    if written.is_some()
        && let Some(choice) = &calls.record
    {
        core.recent.chose(obj, Some(choice.clone()));
        if let Some(note) = &calls.selected {
            let reason = "ImplementationSelected";
            write::event(core, obj, EventType::Normal, reason, "Select", note.clone()).await;
        }
    }
    Ok(written)
}

//! Every write of a reconcile to the API server, and its Events.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::{Backend, Core, RESELECT, ReconcileError};
use crate::selection::Recorded;
use crate::status::{self, Checked, Condition, OperatorConditions, PluginEvent};

/// Applies the operator's part of the status. `choice` must be what is
/// recorded (or is to be): a field the operator's manager stops applying
/// is removed by server-side apply. Returns the object as the API server
/// has it after the write.
pub(super) async fn operator_status<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    choice: Option<&Recorded>,
    conditions: &OperatorConditions,
    plugin_conditions: &[Condition],
) -> Result<DynamicObject, ReconcileError> {
    let previous = obj.data.get("status").and_then(|s| s.get("conditions"));
    let mut all = conditions.all();
    all.extend(plugin_conditions.iter().cloned());
    if let Some(trace) = kplug_proto::telemetry::trace_id(&tracing::Span::current()) {
        status::mark_trace(previous, &mut all, &trace);
    }
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
    // match, or it would wake the object again. Remembered also when it is
    // not sent: the next version seen carries it.
    core.written.record(obj, &status);
    if status::holds_operator_part(obj, &status) {
        tracing::debug!("the operator's status is unchanged; not written");
        return Ok(obj.clone());
    }
    let params = PatchParams::apply(&core.settings.field_manager).force();
    core.api(obj)
        .patch_status(
            &obj.name_any(),
            &params,
            &Patch::Apply(status::apply_body(obj, status)),
        )
        .await
        .map_err(|e| ReconcileError::new("writing the operator's status", obj, e))
}

/// Applies `plugin`'s part of the status of the base and of the extensions
/// it answered for, as the plugin's own field manager. The writes go out
/// together: they are independent, and one after the other they were
/// most of a reconcile's time when the API server is the bottleneck. A
/// write that would change nothing is not sent (an operator's start
/// reconciles every object; most answers are what is already stored).
/// `obj` and the extensions must be as read before the call.
pub(super) async fn plugin_status<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    plugin: &str,
    checked: &Checked,
) -> Result<(), ReconcileError> {
    let manager = status::plugin_manager(plugin);
    let params = PatchParams::apply(&manager).force();
    let base_status = checked.status.clone().unwrap_or_default();
    let base_unchanged = status::holds_manager_part(obj, &manager, &base_status);
    let base = async {
        if base_unchanged {
            tracing::debug!(%plugin, "the plugin's status is unchanged; not written");
            return Ok(());
        }
        let base_status = Value::Object(base_status);
        core.api(obj)
            .patch_status(
                &obj.name_any(),
                &params,
                &Patch::Apply(status::apply_body(obj, base_status)),
            )
            .await
            .map(drop)
            .map_err(|e| ReconcileError::new("writing the plugin's status", obj, e))
    };
    let extensions = checked.extension_statuses.iter().map(|(ext, ext_status)| {
        let ar = core.backend.extension_api(ext);
        let api: Api<DynamicObject> = match ext.namespace() {
            Some(ns) => Api::namespaced_with(core.client.clone(), &ns, &ar),
            None => Api::all_with(core.client.clone(), &ar),
        };
        let params = &params;
        let unchanged = status::holds_manager_part(ext, &manager, ext_status);
        async move {
            if unchanged {
                return Ok(());
            }
            api.patch_status(
                &ext.name_any(),
                params,
                &Patch::Apply(status::apply_body(ext, Value::Object(ext_status.clone()))),
            )
            .await
            .map(drop)
            .map_err(|e| {
                ReconcileError::new(
                    "writing an extension's status (does its CRD have a status subresource?)",
                    ext,
                    e,
                )
            })
        }
    });
    // The base's error first when both fail: it is the object reconciled.
    let (base, extensions) = futures::join!(base, futures::future::join_all(extensions));
    base?;
    extensions.into_iter().collect()
}

/// Removes what `plugin` wrote to the base's status (its field manager's
/// empty apply).
pub(super) async fn clear_plugin_status<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    plugin: &str,
) -> Result<(), ReconcileError> {
    core.api(obj)
        .patch_status(
            &obj.name_any(),
            &PatchParams::apply(&status::plugin_manager(plugin)).force(),
            &Patch::Apply(status::apply_body(obj, json!({}))),
        )
        .await
        .map(drop)
        .map_err(|e| ReconcileError::new("removing the old plugin's status", obj, e))
}

/// Reads `obj` from the API server, past the controller's cache (which can
/// lag behind a deletion or a change of choice). `what` names the read in
/// an error.
pub(super) async fn read_live<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    what: &'static str,
) -> Result<Option<DynamicObject>, ReconcileError> {
    core.api(obj)
        .get_opt(&obj.name_any())
        .await
        .map_err(|e| ReconcileError::new(what, obj, e))
}

/// Adds the operator's finalizer unless `obj` has it; returns the object as
/// the API server has it after the write, if one was made.
pub(super) async fn ensure_finalizer<B>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> Result<Option<DynamicObject>, ReconcileError> {
    let finalizer = &core.settings.finalizer;
    if obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(None);
    }
    let patch = if obj.finalizers().is_empty() {
        json!([{ "op": "add", "path": "/metadata/finalizers", "value": [finalizer] }])
    } else {
        json!([{ "op": "add", "path": "/metadata/finalizers/-", "value": finalizer }])
    };
    patch_json(obj, core, patch, "adding the finalizer")
        .await
        .map(Some)
}

pub(super) async fn remove_finalizer<B>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> Result<(), ReconcileError> {
    let Some(index) = obj
        .finalizers()
        .iter()
        .position(|f| f == &core.settings.finalizer)
    else {
        return Ok(());
    };
    // The test makes the removal safe against a concurrent change of the list.
    let path = format!("/metadata/finalizers/{index}");
    let patch = json!([
        { "op": "test", "path": path, "value": core.settings.finalizer },
        { "op": "remove", "path": path },
    ]);
    patch_json(obj, core, patch, "removing the finalizer")
        .await
        .map(drop)
}

/// Removes the reselect annotation, only if it is still there (a `test`
/// first).
pub(super) async fn remove_reselect<B>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> Result<(), ReconcileError> {
    let path = format!("/metadata/annotations/{}", RESELECT.replace('/', "~1"));
    let value = obj.annotations().get(RESELECT).cloned().unwrap_or_default();
    let patch = json!([
        { "op": "test", "path": path, "value": value },
        { "op": "remove", "path": path },
    ]);
    patch_json(obj, core, patch, "removing the reselect annotation")
        .await
        .map(drop)
}

async fn patch_json<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    patch: Value,
    what: &'static str,
) -> Result<DynamicObject, ReconcileError> {
    let patch: json_patch::Patch = serde_json::from_value(patch)
        .map_err(|e| ReconcileError::new(what, obj, kube::Error::SerdeError(e)))?;
    core.api(obj)
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .map_err(|e| ReconcileError::new(what, obj, e))
}

/// Records an Event about `obj`.
pub(super) async fn event<B>(
    core: &Core<B>,
    obj: &DynamicObject,
    type_: EventType,
    reason: &str,
    action: &str,
    note: impl Into<String>,
) {
    let reference = obj.object_ref(&core.target.api_resource);
    core.events
        .publish(&reference, type_, reason, action, note)
        .await;
}

/// Records the Events plugin `plugin` returned from `call`, as
/// `<controller>/<plugin>`.
pub(super) async fn plugin_events<B>(
    core: &Core<B>,
    plugin: &str,
    events: &[PluginEvent],
    call: &str,
) {
    for event in events {
        core.events
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

//! The writes to the object's metadata: the record of a choice and the
//! finalizer before the first call, and their removal.

use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::super::{Core, RESELECT, ReconcileError};
use crate::selection::{IMPLEMENTATION_ANNOTATION, PLUGIN_ANNOTATION, Recorded};

/// Reads `obj` from the API server, past the controller's cache (which can
/// lag behind a deletion or a change of choice). `what` names the read in
/// an error.
pub(in crate::reconcile) async fn read_live<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    what: &'static str,
) -> Result<Option<DynamicObject>, ReconcileError> {
    core.api(obj)
        .get_opt(&obj.name_any())
        .await
        .map_err(|e| ReconcileError::new(what, obj, e))
}

/// Records what must be durable before the first plugin call, in one
/// write: the operator's finalizer, unless `obj` has it, and `choice`, the
/// implementation and plugin chosen, unless `obj` records it already
/// (annotations, [`crate::selection::IMPLEMENTATION_ANNOTATION`]). `None`
/// when nothing is missing; else the object as the API server has it after
/// the write.
///
/// One JSON patch, whose `test` operations make it fail rather than
/// overwrite a change the cache has not seen yet: the finalizers as the
/// cache has them (Kubernetes does not deduplicate finalizers), and each
/// annotation absent as the cache says (another replica's choice is never
/// overwritten). A failed test is a [`ReconcileError`]; the retry sees the
/// newer object. It is sent with the operator's field manager, by which
/// admission knows the operator's own edits of the choice.
///
/// Not kube-runtime's `finalizer` helper: it writes the finalizer alone and
/// ends the reconcile there, and the choice would be a second write.
pub(in crate::reconcile) async fn record<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    choice: Option<&Recorded>,
) -> Result<Option<DynamicObject>, ReconcileError> {
    // Never the object of another uid, replaced under the same name.
    let mut ops = vec![json!({ "op": "test", "path": "/metadata/uid", "value": obj.uid() })];
    let finalizer = &core.settings.finalizer;
    if !obj.finalizers().iter().any(|f| f == finalizer) {
        ops.extend(add_finalizer(obj.finalizers(), finalizer));
    }
    if let Some(choice) = choice.filter(|c| Recorded::annotated(obj).as_ref() != Some(*c)) {
        ops.extend(annotate_choice(obj, choice));
    }
    if ops.len() == 1 {
        return Ok(None);
    }
    let what = if choice.is_some() {
        "recording the finalizer and the choice of implementation"
    } else {
        "adding the finalizer"
    };
    // Its echo on the watch carries the status as it is now, and may come
    // after the status write that follows the call: remembered as the
    // operator's own, it wakes nothing (crate::written).
    let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
    core.written.expect_echo(obj, &status);
    patch_json(obj, core, Value::Array(ops), what)
        .await
        .map(Some)
}

/// The JSON patch operations that add `finalizer` to `current`, as
/// kube-runtime's finalizer helper writes them.
fn add_finalizer(current: &[String], finalizer: &str) -> Vec<Value> {
    if current.is_empty() {
        vec![
            json!({ "op": "test", "path": "/metadata/finalizers", "value": null }),
            json!({ "op": "add", "path": "/metadata/finalizers", "value": [finalizer] }),
        ]
    } else {
        vec![
            json!({ "op": "test", "path": "/metadata/finalizers", "value": current }),
            json!({ "op": "add", "path": "/metadata/finalizers/-", "value": finalizer }),
        ]
    }
}

/// The JSON patch operations that record `choice` in `obj`'s annotations,
/// each tested to be as the cache has it first.
fn annotate_choice(obj: &DynamicObject, choice: &Recorded) -> Vec<Value> {
    let mut wanted = vec![(IMPLEMENTATION_ANNOTATION, choice.implementation.as_str())];
    if let Some(plugin) = &choice.plugin {
        wanted.push((PLUGIN_ANNOTATION, plugin));
    }
    let Some(annotations) = obj.metadata.annotations.as_ref() else {
        let all: serde_json::Map<String, Value> = wanted
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        return vec![
            json!({ "op": "test", "path": "/metadata/annotations", "value": null }),
            json!({ "op": "add", "path": "/metadata/annotations", "value": all }),
        ];
    };
    let mut ops = Vec::new();
    for (key, value) in wanted {
        let path = format!("/metadata/annotations/{}", key.replace('/', "~1"));
        let cached = annotations.get(key);
        if cached.map(String::as_str) == Some(value) {
            continue;
        }
        ops.push(json!({ "op": "test", "path": path, "value": cached }));
        ops.push(json!({ "op": "add", "path": path, "value": value }));
    }
    ops
}

pub(in crate::reconcile) async fn remove_finalizer<B>(
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
/// first), and the recorded choice's annotations with it: the next
/// reconcile chooses again.
pub(in crate::reconcile) async fn remove_reselect<B>(
    obj: &DynamicObject,
    core: &Core<B>,
) -> Result<(), ReconcileError> {
    let annotations = obj.annotations();
    let mut ops = Vec::new();
    for key in [RESELECT, IMPLEMENTATION_ANNOTATION, PLUGIN_ANNOTATION] {
        let Some(value) = annotations.get(key) else {
            continue;
        };
        let path = format!("/metadata/annotations/{}", key.replace('/', "~1"));
        ops.push(json!({ "op": "test", "path": path, "value": value }));
        ops.push(json!({ "op": "remove", "path": path }));
    }
    if ops.is_empty() {
        return Ok(());
    }
    patch_json(
        obj,
        core,
        Value::Array(ops),
        "removing the reselect annotation",
    )
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
    // The operator's field manager: admission tells the operator's own
    // edits of the recorded choice by it.
    let params = PatchParams {
        field_manager: Some(core.settings.field_manager.clone()),
        ..PatchParams::default()
    };
    core.api(obj)
        .patch(&obj.name_any(), &params, &Patch::<()>::Json(patch))
        .await
        .map_err(|e| ReconcileError::new(what, obj, e))
}

//! Status: the operator's conditions, checking what plugins return, and the
//! server-side apply bodies that write it.
//!
//! # Expected flow
//! Status is written with server-side apply on the `/status` subresource:
//! - the plugin's part (its `status` object; the extensions' statuses) under
//!   the field manager `kplug-plugin-<plugin>`;
//! - the operator's part (`implementation`, `observedGeneration`,
//!   `conditions`) under the operator's field manager (`kplug-operator`).
//!
//! Because each writer applies only its own fields, neither removes the
//! other's, and a field a plugin stops reporting disappears.
//!
//! # Guarantees
//! - A plugin response is checked completely before anything is written
//!   ([`check_reconcile`]): bad JSON, a status that is not an object, a key
//!   the operator owns, a status for an object the plugin was not sent, or a
//!   reserved condition type make the whole response invalid, and nothing
//!   of it is applied.
//! - `lastTransitionTime` changes only when a condition's status changes.
//!
//! # Assumptions
//! - The CRD has a status subresource, and its status schema accepts the
//!   plugin's fields (e.g. `x-kubernetes-preserve-unknown-fields: true`).
//!
//! The conditions the operator writes are in `conditions`, the status it
//! applies in `operator`; the checks of what a plugin returns in
//! `response`.

mod children;
mod conditions;
mod operator;
mod response;
mod unchanged;

pub use children::{ChildKey, Intent};
pub use conditions::{Condition, OperatorConditions, find_condition};
pub use operator::{Choice, OperatorStatus};
pub use response::{Checked, PluginEvent, check_finalize, check_hook, check_reconcile};
pub use unchanged::{holds_applied, holds_manager_part, kept_plugin_fields, owned_status_keys};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

/// Condition types the operator owns.
pub mod types {
    /// All of the below are true.
    pub const READY: &str = "Ready";
    /// A ready plugin serves the chosen implementation.
    pub const PLUGIN_AVAILABLE: &str = "PluginAvailable";
    /// Every referenced extension exists.
    pub const EXTENSIONS_RESOLVED: &str = "ExtensionsResolved";
    /// The last plugin call succeeded.
    pub const RECONCILED: &str = "Reconciled";
}

/// Status keys the operator owns; plugins may not write them.
pub const OPERATOR_KEYS: [&str; 4] = kplug_proto::RESERVED_STATUS_KEYS;

/// The field manager for a plugin's status writes.
pub fn plugin_manager(plugin: &str) -> String {
    format!("kplug-plugin-{plugin}")
}

/// The body of a server-side apply of `status` to `obj`'s `/status`.
pub fn apply_body(obj: &DynamicObject, status: Value) -> Value {
    let types = obj.types.clone().unwrap_or_default();
    let mut metadata = json!({ "name": obj.name_any() });
    if let Some(ns) = obj.namespace() {
        metadata["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": types.api_version,
        "kind": types.kind,
        "metadata": metadata,
        "status": status,
    })
}

/// A reference to `obj` for Events.
pub fn reference(obj: &DynamicObject) -> ObjectReference {
    let types = obj.types.clone().unwrap_or_default();
    ObjectReference {
        api_version: Some(types.api_version),
        kind: Some(types.kind),
        name: obj.meta().name.clone(),
        namespace: obj.namespace(),
        uid: obj.uid(),
        resource_version: obj.resource_version(),
        ..ObjectReference::default()
    }
}

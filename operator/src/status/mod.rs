//! Status: the operator's conditions, what plugins return (checked by
//! `kplug_checks::response`), and the server-side apply bodies that write
//! it.
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
//!   ([`check_reconcile`], from `kplug-checks`): bad JSON, a status that is not an object, a key
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
//! applies in `operator`; the checks of what a plugin returns are
//! `kplug_checks::response`, re-exported here with the types they make.

mod conditions;
mod operator;
mod unchanged;

pub(crate) use conditions::{OperatorConditions, find_condition};
pub(crate) use kplug_checks::response::{
    Checked, ChildKey, Condition, Intent, PluginEvent, check_finalize, check_hook, check_reconcile,
};
pub(crate) use operator::{Choice, OperatorStatus};
pub(crate) use unchanged::{
    holds_applied, holds_manager_part, kept_plugin_fields, owned_status_keys,
};

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::{Value, json};

/// Condition types the operator owns.
pub(crate) mod types {
    /// All of the below are true.
    pub(crate) const READY: &str = "Ready";
    /// A ready plugin serves the chosen implementation.
    pub(crate) const PLUGIN_AVAILABLE: &str = "PluginAvailable";
    /// Every referenced extension exists.
    pub(crate) const EXTENSIONS_RESOLVED: &str = "ExtensionsResolved";
    /// The last plugin call succeeded.
    pub(crate) const RECONCILED: &str = "Reconciled";
}

/// Status keys the operator owns; plugins may not write them.
pub(crate) const OPERATOR_KEYS: [&str; 4] = kplug_proto::RESERVED_STATUS_KEYS;

/// The field manager for a plugin's status writes.
pub(crate) fn plugin_manager(plugin: &str) -> String {
    format!("kplug-plugin-{plugin}")
}

/// The body of a server-side apply of `status` to `obj`'s `/status`.
pub(crate) fn apply_body(obj: &DynamicObject, status: Value) -> Value {
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

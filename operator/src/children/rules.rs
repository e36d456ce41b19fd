//! The rules a desired child must meet before it is applied: declared by
//! the offer, never one of the kinds kplug refuses, allowed by the admin,
//! in the base's namespace, within the size and count limits; and, once
//! read, not someone else's object.

use kplug_proto::limits;
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use super::sync::Sync;
use super::{Children, Scope};
use crate::status::Intent;

impl Children {
    /// Why `intent` (the `index`th child of the answer) may not be
    /// applied, if it may not: the first rule it breaks.
    pub(super) async fn refusal(
        &self,
        sync: &Sync<'_>,
        intent: &Intent,
        index: usize,
    ) -> Option<String> {
        if sync.base.namespace().is_none() {
            return Some("the base object is cluster-scoped, and children of cluster-scoped objects are not supported".into());
        }
        if let Some(rule) = self.kind_refusal(sync, intent).await {
            return Some(rule);
        }
        let namespace = intent
            .object
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str);
        if let Some(ns) = namespace.filter(|ns| Some(*ns) != sync.base.namespace().as_deref()) {
            return Some(format!(
                "it is aimed at namespace {ns}; children live in their base object's namespace ({})",
                sync.base.namespace().unwrap_or_default()
            ));
        }
        if intent.bytes > limits::MAX_CHILD_BYTES {
            return Some(format!(
                "it is {} bytes as JSON; at most {} are applied",
                intent.bytes,
                limits::MAX_CHILD_BYTES
            ));
        }
        (index >= limits::MAX_CHILDREN).then(|| {
            format!(
                "the answer desires {} children; at most {} per base object are applied",
                sync.intents.len(),
                limits::MAX_CHILDREN
            )
        })
    }

    /// Why the intent's kind may not be applied for this plugin, if it may
    /// not: not declared by its offer, never allowed, or not allowed by the
    /// admin (a cluster-scoped kind said as such).
    async fn kind_refusal(&self, sync: &Sync<'_>, intent: &Intent) -> Option<String> {
        let key = &intent.key;
        if !sync
            .declared
            .iter()
            .any(|d| d.group == key.group && d.kind == key.kind)
        {
            return Some(format!(
                "the plugin's offer does not declare kind {} (Offer.children)",
                kind_name(&key.group, &key.kind)
            ));
        }
        if let Some(why) = super::allow::never_allowed(&key.group, &key.kind) {
            return Some(why.into());
        }
        if self.allowed.allows(sync.plugin, &key.group, &key.kind) {
            return None;
        }
        if let Scope::Cluster = self.scope(&key.group, &intent.version, &key.kind).await {
            return Some(format!(
                "{} is cluster-scoped; children live in their base object's namespace",
                kind_name(&key.group, &key.kind)
            ));
        }
        let listed = format!("{}={}/{}", sync.plugin, intent.api_version(), key.kind);
        Some(if key.group.is_empty() && key.kind == "Secret" {
            format!(
                "Secrets are applied only when --child-kinds lists them (--child-kinds {listed})"
            )
        } else {
            format!(
                "kind {} is not in the operator's --child-kinds (an admin allows it with --child-kinds {listed})",
                kind_name(&key.group, &key.kind)
            )
        })
    }
}

/// Why `live` is not `base`'s to apply, if it is not.
pub(super) fn not_ours(live: &DynamicObject, base: &DynamicObject) -> Option<String> {
    let controller = live
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    match controller {
        Some(c) if Some(&c.uid) == base.uid().as_ref() => None,
        Some(c) => Some(format!(
            "it exists and is controlled by {} {}; kplug never takes over another controller's object",
            c.kind, c.name
        )),
        None => Some(
            "it exists and no controller owns it; kplug never adopts an object it did not create (delete it, or rename the child)"
                .into(),
        ),
    }
}

/// `Kind.group`, or `Kind` for the core group.
fn kind_name(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

//! Bringing one base's children to what its plugin desires: the rules,
//! then server-side apply of each allowed child, then pruning.

use std::collections::BTreeSet;

use kplug_proto::limits;
use kplug_proto::v1;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions,
    PropagationPolicy,
};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::drift::{INTENT_HASH, covers, intent_hash};
use super::mutate::{Mutated, Mutation, mutate};
use super::observed::Child;
use super::{BASE_UID_LABEL, Children, PLUGIN_LABEL, Scope, field_manager};
use crate::status::{ChildKey, Intent};

/// A child as the base's status lists it (`status.children`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildState {
    /// `apiVersion`.
    pub(crate) api_version: String,
    /// Kind.
    pub(crate) kind: String,
    /// Name.
    pub(crate) name: String,
    /// The plugin that desires it.
    pub(crate) plugin: String,
    /// `Applied`, `Refused`, `Waiting` (for a mutator), `Failed` or
    /// `Deleting`.
    pub(crate) state: &'static str,
    /// Why it is not applied, for `Refused` and `Failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
}

/// What one sync of a plugin's children came to.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Each desired child's state.
    pub(crate) states: Vec<ChildState>,
    /// Refused children, each `<child>: <rule>`.
    pub(crate) refused: Vec<String>,
    /// Children held for a mutator, each `<child>: <why>`.
    pub(crate) held: Vec<String>,
    /// The mutators' warnings, for the base's Events.
    pub(crate) warnings: Vec<String>,
    /// The API server's refusal of an apply or a delete.
    pub(crate) failed: Option<String>,
}

/// What is asked of one sync.
pub(crate) struct Sync<'a> {
    /// The base object.
    pub(crate) base: &'a DynamicObject,
    /// How to reach the base's kind (for its owner reference).
    pub(crate) base_ar: &'a ApiResource,
    /// The plugin that desires the children.
    pub(crate) plugin: &'a str,
    /// The implementation that desires them.
    pub(crate) implementation: &'a str,
    /// The child kinds the plugin's offer declares.
    pub(crate) declared: &'a [v1::GroupVersionKind],
    /// The children it desires.
    pub(crate) intents: &'a [Intent],
    /// Whether the children no longer desired go (an OK answer).
    pub(crate) prune: bool,
    /// Whether other plugins' children of the base go first (one plugin
    /// serves a base under `--selection preferred`: theirs are left from
    /// before a reselect).
    pub(crate) prune_others: bool,
}

impl Children {
    /// Applies `sync.intents` (those the rules allow), then prunes.
    pub(crate) async fn sync(&self, sync: Sync<'_>) -> Report {
        let mut report = Report::default();
        let uid = sync.base.uid().unwrap_or_default();
        let observed = self.observed.of(&uid);
        if sync.prune_others {
            let others = observed.iter().filter(|(_, c)| {
                c.labels().get(PLUGIN_LABEL).map(String::as_str) != Some(sync.plugin)
            });
            for (key, child) in others {
                if let Err(e) = self.delete(key, child).await {
                    report.failed.get_or_insert(e);
                }
            }
        }
        let mut kept: BTreeSet<ChildKey> = BTreeSet::new();
        for (i, intent) in sync.intents.iter().enumerate() {
            kept.insert(intent.key.clone());
            let state = match self.refusal(&sync, intent, i).await {
                Some(rule) => {
                    report.refused.push(format!("{}: {rule}", intent.key));
                    state(&sync, intent, "Refused", Some(rule))
                }
                None => match self
                    .apply(&sync, intent, observed.get(&intent.key), &mut report)
                    .await
                {
                    Ok(Applied::Done) => state(&sync, intent, "Applied", None),
                    Ok(Applied::Deleting) => state(&sync, intent, "Deleting", None),
                    Ok(Applied::Refused(rule)) => {
                        report.refused.push(format!("{}: {rule}", intent.key));
                        state(&sync, intent, "Refused", Some(rule))
                    }
                    Ok(Applied::Held(why)) => {
                        report.held.push(format!("{}: {why}", intent.key));
                        state(&sync, intent, "Waiting", Some(why))
                    }
                    Err(message) => {
                        report.failed.get_or_insert_with(|| message.clone());
                        state(&sync, intent, "Failed", Some(message))
                    }
                },
            };
            report.states.push(state);
        }
        if sync.prune {
            let stale = observed.iter().filter(|(key, c)| {
                !kept.contains(key)
                    && c.labels().get(PLUGIN_LABEL).map(String::as_str) == Some(sync.plugin)
            });
            for (key, child) in stale {
                if let Err(e) = self.delete(key, child).await {
                    report.failed.get_or_insert(e);
                }
            }
            if let Err(e) = self
                .sweep_unwatched(sync.base, Some(sync.plugin), &kept)
                .await
            {
                report.failed.get_or_insert(e);
            }
        }
        report
    }

    /// Why `intent` (the `index`th child of the answer) may not be
    /// applied, if it may not: the first rule it breaks.
    async fn refusal(&self, sync: &Sync<'_>, intent: &Intent, index: usize) -> Option<String> {
        let key = &intent.key;
        if sync.base.namespace().is_none() {
            return Some("the base object is cluster-scoped, and children of cluster-scoped objects are not supported".into());
        }
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
        if !self.allowed.allows(sync.plugin, &key.group, &key.kind) {
            if let Scope::Cluster = self.scope(&key.group, &intent.version, &key.kind).await {
                return Some(format!(
                    "{} is cluster-scoped; children live in their base object's namespace",
                    kind_name(&key.group, &key.kind)
                ));
            }
            let listed = format!("{}={}/{}", sync.plugin, intent.api_version(), key.kind);
            return Some(if key.group.is_empty() && key.kind == "Secret" {
                format!(
                    "Secrets are applied only when --child-kinds lists them (--child-kinds {listed})"
                )
            } else {
                format!(
                    "kind {} is not in the operator's --child-kinds (an admin allows it with --child-kinds {listed})",
                    kind_name(&key.group, &key.kind)
                )
            });
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
        if index >= limits::MAX_CHILDREN {
            return Some(format!(
                "the answer desires {} children; at most {} per base object are applied",
                sync.intents.len(),
                limits::MAX_CHILDREN
            ));
        }
        None
    }

    /// Applies one allowed child, after its mutators, unless it is
    /// unchanged: the same intent hash and every applied field still the
    /// operator's.
    async fn apply(
        &self,
        sync: &Sync<'_>,
        intent: &Intent,
        cached: Option<&Child>,
        report: &mut Report,
    ) -> Result<Applied, String> {
        let Some(ar) = self.watched(&intent.key) else {
            return Err(format!("{}: kind not watched", intent.key));
        };
        let namespace = sync.base.namespace().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &namespace, &ar);
        let manager = field_manager(sync.plugin, &sync.base.uid().unwrap_or_default());
        let live = match cached {
            Some(child) => Some(DynamicObject::clone(child)),
            // Never seen: read it first, uncached, and take nothing that
            // is someone else's.
            None => api
                .get_opt(&intent.key.name)
                .await
                .map_err(|e| format!("reading {}: {}", intent.key, api_message(&e)))?,
        };
        if let Some(live) = &live {
            if let Some(rule) = not_ours(live, sync.base) {
                return Ok(Applied::Refused(rule));
            }
            if live.metadata.deletion_timestamp.is_some() {
                return Ok(Applied::Deleting);
            }
        }
        let mut body = desired(sync, intent, &namespace);
        let mutators = self.mutators.of(&intent.key.group, &intent.key.kind);
        if !mutators.is_empty() {
            let mutation = Mutation {
                registry: &self.registry,
                mutators,
                key: &intent.key,
                live: live.as_ref(),
                base: Some(sync.base),
                implementation: sync.implementation,
            };
            body = match mutate(mutation, body).await {
                Mutated::Object(object, warnings) => {
                    report.warnings.extend(warnings);
                    object
                }
                Mutated::Held(why) => return Ok(Applied::Held(why)),
                Mutated::Refused(rule) => return Ok(Applied::Refused(rule)),
            };
            let bytes = serde_json::to_vec(&body).map_or(0, |b| b.len());
            if bytes > limits::MAX_CHILD_BYTES {
                return Ok(Applied::Refused(format!(
                    "it is {bytes} bytes as JSON once mutated; at most {} are applied",
                    limits::MAX_CHILD_BYTES
                )));
            }
        }
        let hash = intent_hash(&body);
        annotate(&mut body, &hash);
        if let Some(live) = &live {
            if unchanged(live, &manager, &hash, &body) {
                return Ok(Applied::Done);
            }
            // Proven this base's: a field someone else took is taken back,
            // on the object as it was read.
            if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("resourceVersion".into(), json!(live.resource_version()));
            }
        }
        let mut params = PatchParams::apply(&manager);
        if live.is_some() {
            params = params.force();
        }
        let applied = api
            .patch(
                &intent.key.name,
                &params,
                &Patch::Apply(Value::Object(body)),
            )
            .await
            .map_err(|e| format!("applying {}: {}", intent.key, api_message(&e)))?;
        self.observed.note_own(
            applied.uid().unwrap_or_default(),
            applied.resource_version(),
        );
        Ok(Applied::Done)
    }

    /// Deletes one child of a watched kind (see [`Children::delete_with`]).
    pub(super) async fn delete(&self, key: &ChildKey, child: &Child) -> Result<(), String> {
        match self.watched(key) {
            Some(ar) => self.delete_with(&ar, key, child).await,
            None => Ok(()),
        }
    }

    /// Deletes one child, only that object (its UID precondition: a new
    /// object by the same name is not touched), its dependents in the
    /// background.
    pub(super) async fn delete_with(
        &self,
        ar: &ApiResource,
        key: &ChildKey,
        child: &DynamicObject,
    ) -> Result<(), String> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &child.namespace().unwrap_or_default(),
            ar,
        );
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: child.uid(),
                resource_version: None,
            }),
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        match api.delete(&key.name, &params).await {
            Ok(_) => {
                self.observed
                    .note_own(child.uid().unwrap_or_default(), None);
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(format!("deleting {key}: {}", api_message(&e))),
        }
    }
}

/// How an apply ended.
enum Applied {
    /// Applied, or unchanged.
    Done,
    /// Being deleted: never applied again (it would come back as a new
    /// object once gone; the next reconcile after it is gone makes it).
    Deleting,
    /// Not applied: it exists and is not this base's, or a mutator's patch
    /// breaks a rule. The rule it breaks.
    Refused(String),
    /// Not applied now: a mutator it needs is missing or failed (why).
    Held(String),
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

/// Whether `live` holds what would be applied: the intent's hash, and
/// every field of it still under `manager`.
fn unchanged(live: &DynamicObject, manager: &str, hash: &str, body: &Map<String, Value>) -> bool {
    if live.annotations().get(INTENT_HASH).map(String::as_str) != Some(hash) {
        return false;
    }
    let fields = live
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| {
            f.manager.as_deref() == Some(manager) && f.operation.as_deref() == Some("Apply")
        })
        .filter(|f| f.subresource.as_deref().unwrap_or("").is_empty())
        .find_map(|f| f.fields_v1.as_ref());
    fields.is_some_and(|f| covers(&f.0, body))
}

/// The object to apply: the plugin's intent, in the base's namespace, with
/// the base as its controller and kplug's labels.
fn desired(sync: &Sync<'_>, intent: &Intent, namespace: &str) -> Map<String, Value> {
    let mut body = intent.object.clone();
    let meta = body.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let meta = meta.as_object_mut().expect("made an object above");
    meta.insert("namespace".into(), json!(namespace));
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(
            BASE_UID_LABEL.into(),
            json!(sync.base.uid().unwrap_or_default()),
        );
        labels.insert(PLUGIN_LABEL.into(), json!(sync.plugin));
    }
    // There for a mutator to add to (a JSON Patch `add` needs the map).
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    let mut owner = sync.base.controller_owner_ref(sync.base_ar);
    if let Some(owner) = owner.as_mut() {
        owner.block_owner_deletion = Some(true);
    }
    meta.insert(
        "ownerReferences".into(),
        json!(owner.into_iter().collect::<Vec<_>>()),
    );
    body
}

fn annotate(body: &mut Map<String, Value>, hash: &str) {
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(INTENT_HASH.into(), json!(hash));
        }
    }
}

fn state(
    sync: &Sync<'_>,
    intent: &Intent,
    state: &'static str,
    message: Option<String>,
) -> ChildState {
    ChildState {
        api_version: intent.api_version(),
        kind: intent.key.kind.clone(),
        name: intent.key.name.clone(),
        plugin: sync.plugin.to_owned(),
        state,
        message,
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

/// The API server's message, which a person can act on.
pub(super) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(response) => response.message.clone(),
        other => other.to_string(),
    }
}

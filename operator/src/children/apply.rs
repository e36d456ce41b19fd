//! Server-side apply of one allowed child (after its mutators, and only
//! when it drifted), and the deletion of one child.

use kplug_proto::limits;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions,
    PropagationPolicy,
};
use kube::{Resource, ResourceExt};
use serde_json::{Map, Value, json};

use super::drift::{INTENT_HASH, covers, intent_hash};
use super::mutate::{Mutated, Mutation, mutate};
use super::observed::Child;
use super::rules::not_ours;
use super::sync::{Report, Sync};
use super::{BASE_UID_LABEL, Children, PLUGIN_LABEL, field_manager};
use crate::status::{ChildKey, Intent};

impl Children {
    /// Applies one allowed child, after its mutators, unless it is
    /// unchanged: the same intent hash and every applied field still the
    /// operator's.
    pub(super) async fn apply(
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
        let body = desired(sync, intent, &namespace);
        let body = match self
            .mutated(sync, intent, live.as_ref(), body, report)
            .await
        {
            Ok(body) => body,
            Err(not_now) => return Ok(not_now),
        };
        self.write(&api, sync, &intent.key, live.as_ref(), body)
            .await
    }

    /// `body` as the mutators of its kind patch it; or why it is not
    /// applied now.
    async fn mutated(
        &self,
        sync: &Sync<'_>,
        intent: &Intent,
        live: Option<&DynamicObject>,
        body: Map<String, Value>,
        report: &mut Report,
    ) -> Result<Map<String, Value>, Applied> {
        let mutators = self.mutators.of(&intent.key.group, &intent.key.kind);
        if mutators.is_empty() {
            return Ok(body);
        }
        let mutation = Mutation {
            registry: &self.registry,
            mutators,
            key: &intent.key,
            live,
            base: Some(sync.base),
            implementation: sync.implementation,
        };
        let body = match mutate(mutation, body).await {
            Mutated::Object(object, warnings) => {
                report.warnings.extend(warnings);
                object
            }
            Mutated::Held(why) => return Err(Applied::Held(why)),
            Mutated::Refused(rule) => return Err(Applied::Refused(rule)),
        };
        let bytes = serde_json::to_vec(&body).map_or(0, |b| b.len());
        if bytes > limits::MAX_CHILD_BYTES {
            return Err(Applied::Refused(format!(
                "it is {bytes} bytes as JSON once mutated; at most {} are applied",
                limits::MAX_CHILD_BYTES
            )));
        }
        Ok(body)
    }

    /// Server-side applies `body` under the plugin's field manager for this
    /// base, unless `live` already holds it.
    async fn write(
        &self,
        api: &Api<DynamicObject>,
        sync: &Sync<'_>,
        key: &ChildKey,
        live: Option<&DynamicObject>,
        mut body: Map<String, Value>,
    ) -> Result<Applied, String> {
        let manager = field_manager(sync.plugin, &sync.base.uid().unwrap_or_default());
        let hash = intent_hash(&body);
        annotate(&mut body, &hash);
        if let Some(live) = live {
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
            .patch(&key.name, &params, &Patch::Apply(Value::Object(body)))
            .await
            .map_err(|e| format!("applying {key}: {}", api_message(&e)))?;
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
pub(super) enum Applied {
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

/// The API server's message, which a person can act on.
pub(super) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(response) => response.message.clone(),
        other => other.to_string(),
    }
}

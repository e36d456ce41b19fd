//! Extensions: resolving a base object's references, and reconciling the
//! base when an extension changes.
//!
//! A base object lists extensions as object references in a field
//! (`spec.extensions` by default):
//!
//! ```yaml
//! extensions:
//! - apiVersion: myorg.org/v1alpha1
//!   kind: DatabaseTablePostgreSqlExtension
//!   name: users
//! ```
//!
//! # Expected flow
//! - [`references`] reads the list; a malformed entry is a problem named in
//!   the `ExtensionsResolved` condition, not a crash.
//! - [`Extensions::resolve`] finds each kind with API discovery (any group,
//!   any CRD) and gets the object from the base object's namespace.
//! - [`Extensions::track`] remembers which base references which extension
//!   and starts one watch per extension kind. When an extension's spec
//!   changes (its `metadata.generation`), or it appears or disappears, the
//!   bases that reference it are reconciled. Status-only changes of an
//!   extension (the plugin's own writes) do not trigger anything.
//!
//! # Caveats
//! - References must stay in the base object's namespace (like most
//!   Kubernetes references); a different `namespace` is refused.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::Value;
use tokio::sync::mpsc;

/// One entry of the extensions list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExtensionRef {
    /// `group/version`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

impl ExtensionRef {
    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }

    fn gvk(&self) -> GroupVersionKind {
        let (group, version) = self
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &self.api_version));
        GroupVersionKind::gvk(group, version, &self.kind)
    }
}

impl std::fmt::Display for ExtensionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.api_version, self.kind, self.name)
    }
}

/// Reads the references at `path` (e.g. `["spec", "extensions"]`) of `obj`.
/// A missing field means no extensions.
///
/// # Errors
/// A message naming the field and the entry when the list is malformed.
pub fn references(obj: &DynamicObject, path: &[String]) -> Result<Vec<ExtensionRef>, String> {
    let field = path.join(".");
    let mut value = &obj.data;
    for key in path {
        match value.get(key) {
            Some(v) => value = v,
            None => return Ok(Vec::new()),
        }
    }
    let Some(items) = value.as_array() else {
        if value.is_null() {
            return Ok(Vec::new());
        }
        return Err(format!("{field} must be a list of object references"));
    };
    let base_ns = obj.namespace();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let get = |key: &str| item.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
            let (Some(api_version), Some(kind), Some(name)) =
                (get("apiVersion"), get("kind"), get("name"))
            else {
                return Err(format!(
                    "{field}[{i}] needs apiVersion, kind and name"
                ));
            };
            if let Some(ns) = get("namespace")
                && Some(ns) != base_ns.as_deref()
            {
                return Err(format!(
                    "{field}[{i}] ({kind} {name}) is in namespace {ns}; extensions must be in the base object's namespace"
                ));
            }
            Ok(ExtensionRef {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                name: name.to_owned(),
            })
        })
        .collect()
}

/// What [`Extensions::resolve`] found.
#[derive(Debug, Default)]
pub struct Resolution {
    /// Extensions that exist, in reference order.
    pub found: Vec<DynamicObject>,
    /// One message per reference that could not be resolved.
    pub problems: Vec<String>,
}

type ExtKey = (String, String, Option<String>, String); // group, kind, namespace, name

/// Resolves and watches extensions. Shared by all reconciles.
pub struct Extensions {
    client: Client,
    namespace: Option<String>,
    base: ApiResource,
    kinds: Mutex<HashMap<GroupVersionKind, (ApiResource, Scope)>>,
    watched: Mutex<HashSet<(String, String)>>,
    referenced_by: Mutex<HashMap<ExtKey, HashSet<ObjectRef<DynamicObject>>>>,
    references_of: Mutex<HashMap<ObjectRef<DynamicObject>, Vec<ExtKey>>>,
    trigger: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Extensions {
    /// Resolves extensions for bases of kind `base`, watching in `namespace`
    /// (all namespaces when `None`). Base objects to reconcile are sent to
    /// `trigger`.
    pub fn new(
        client: Client,
        base: ApiResource,
        namespace: Option<String>,
        trigger: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            namespace,
            base,
            kinds: Mutex::default(),
            watched: Mutex::default(),
            referenced_by: Mutex::default(),
            references_of: Mutex::default(),
            trigger,
        })
    }

    /// Gets every referenced extension of `base`.
    pub async fn resolve(
        self: &Arc<Self>,
        base: &DynamicObject,
        refs: &[ExtensionRef],
    ) -> Resolution {
        let mut resolution = Resolution::default();
        let namespace = base.namespace();
        for r in refs {
            let (ar, scope) = match self.kind(r).await {
                Ok(found) => found,
                Err(message) => {
                    resolution.problems.push(message);
                    continue;
                }
            };
            self.watch(&ar, &scope);
            let api: Api<DynamicObject> = match (&scope, &namespace) {
                (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
                _ => Api::all_with(self.client.clone(), &ar),
            };
            match api.get_opt(&r.name).await {
                Ok(Some(obj)) => resolution.found.push(obj),
                Ok(None) => resolution.problems.push(format!(
                    "extension {} {} not found{}",
                    r.kind,
                    r.name,
                    namespace
                        .as_deref()
                        .map(|n| format!(" in namespace {n}"))
                        .unwrap_or_default()
                )),
                Err(e) => resolution
                    .problems
                    .push(format!("extension {} {}: {e}", r.kind, r.name)),
            }
        }
        resolution
    }

    /// How to reach `ext` (as discovered when it was resolved).
    pub fn api_resource(&self, ext: &DynamicObject) -> ApiResource {
        let types = ext.types.clone().unwrap_or_default();
        let (group, version) = types
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &types.api_version));
        let gvk = GroupVersionKind::gvk(group, version, &types.kind);
        self.kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&gvk)
            .map(|(ar, _)| ar.clone())
            .unwrap_or_else(|| ApiResource::from_gvk(&gvk))
    }

    /// Records that `base` references `refs`, so changes to them reconcile it.
    pub fn track(&self, base: &DynamicObject, refs: &[ExtensionRef]) {
        let base_ref = ObjectRef::from_obj_with(base, self.base.clone());
        let keys: Vec<ExtKey> = refs
            .iter()
            .map(|r| {
                (
                    r.group().to_owned(),
                    r.kind.clone(),
                    base.namespace(),
                    r.name.clone(),
                )
            })
            .collect();
        self.forget_ref(&base_ref);
        let mut by = self.referenced_by.lock().unwrap_or_else(|e| e.into_inner());
        for key in &keys {
            by.entry(key.clone()).or_default().insert(base_ref.clone());
        }
        self.references_of
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(base_ref, keys);
    }

    /// Forgets a deleted base.
    pub fn forget(&self, base: &DynamicObject) {
        self.forget_ref(&ObjectRef::from_obj_with(base, self.base.clone()));
    }

    fn forget_ref(&self, base_ref: &ObjectRef<DynamicObject>) {
        let old = self
            .references_of
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(base_ref);
        let mut by = self.referenced_by.lock().unwrap_or_else(|e| e.into_inner());
        for key in old.into_iter().flatten() {
            if let Some(bases) = by.get_mut(&key) {
                bases.remove(base_ref);
                if bases.is_empty() {
                    by.remove(&key);
                }
            }
        }
    }

    async fn kind(&self, r: &ExtensionRef) -> Result<(ApiResource, Scope), String> {
        let gvk = r.gvk();
        if let Some(found) = self
            .kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&gvk)
        {
            return Ok(found.clone());
        }
        let (ar, caps) = pinned_kind(&self.client, &gvk).await.map_err(|e| {
            format!(
                "extension {} {}: the API server does not serve {} {} ({e}); is its CRD installed?",
                r.kind, r.name, r.api_version, r.kind
            )
        })?;
        let found = (ar, caps.scope);
        self.kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(gvk, found.clone());
        Ok(found)
    }

    /// Starts watching the kind once.
    fn watch(self: &Arc<Self>, ar: &ApiResource, scope: &Scope) {
        let kind = (ar.group.clone(), ar.kind.clone());
        if !self
            .watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(kind)
        {
            return;
        }
        let api: Api<DynamicObject> = match (scope, &self.namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, ar),
            _ => Api::all_with(self.client.clone(), ar),
        };
        let this = Arc::downgrade(self);
        let ar = ar.clone();
        tracing::info!(kind = %ar.kind, group = %ar.group, "watching extension kind");
        tokio::spawn(async move {
            let mut generations: HashMap<(Option<String>, String), Option<i64>> = HashMap::new();
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
            let mut initialising = false;
            while let Some(event) = stream.next().await {
                let Some(this) = this.upgrade() else { return };
                let changed = match event {
                    Ok(watcher::Event::Init) => {
                        initialising = true;
                        None
                    }
                    Ok(watcher::Event::InitDone) => {
                        initialising = false;
                        None
                    }
                    Ok(watcher::Event::InitApply(obj) | watcher::Event::Apply(obj)) => {
                        let key = (obj.namespace(), obj.name_any());
                        let generation = obj.metadata.generation;
                        let previous = generations.insert(key, generation);
                        // On (re)list we only learn the state; bases are
                        // reconciled anyway when the controller starts.
                        (!initialising && previous != Some(generation)).then_some(obj)
                    }
                    Ok(watcher::Event::Delete(obj)) => {
                        generations.remove(&(obj.namespace(), obj.name_any()));
                        Some(obj)
                    }
                    Err(error) => {
                        tracing::warn!(kind = %ar.kind, %error, "extension watch error; retrying");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        None
                    }
                };
                if let Some(obj) = changed {
                    this.notify(&ar, &obj);
                }
            }
        });
    }

    fn notify(&self, ar: &ApiResource, obj: &DynamicObject) {
        let key = (
            ar.group.clone(),
            ar.kind.clone(),
            obj.namespace(),
            obj.name_any(),
        );
        let bases: Vec<_> = self
            .referenced_by
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .map(|b| b.iter().cloned().collect())
            .unwrap_or_default();
        for base in bases {
            tracing::debug!(extension = %obj.name_any(), base = %base, "extension changed; reconciling its base");
            let _ = self.trigger.send(base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(data: Value) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": "users", "namespace": "ns"},
        }))
        .unwrap();
        o.data = data;
        o
    }

    fn path() -> Vec<String> {
        vec!["spec".into(), "extensions".into()]
    }

    #[test]
    fn reads_references() {
        let o = obj(json!({"spec": {"extensions": [
            {"apiVersion": "myorg.org/v1alpha1", "kind": "PgExt", "name": "users"},
            {"apiVersion": "myorg.org/v1alpha1", "kind": "MariaExt", "name": "users", "namespace": "ns"},
        ]}}));
        let refs = references(&o, &path()).unwrap();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].group(), "myorg.org");
        assert_eq!(refs[1].kind, "MariaExt");
    }

    #[test]
    fn missing_field_means_none() {
        assert!(
            references(&obj(json!({"spec": {}})), &path())
                .unwrap()
                .is_empty()
        );
        assert!(references(&obj(json!({})), &path()).unwrap().is_empty());
    }

    #[test]
    fn malformed_entries_are_named() {
        let err = references(
            &obj(json!({"spec": {"extensions": [{"kind": "X"}]}})),
            &path(),
        )
        .unwrap_err();
        assert!(err.contains("spec.extensions[0]"), "{err}");
        let err = references(&obj(json!({"spec": {"extensions": "users"}})), &path()).unwrap_err();
        assert!(err.contains("must be a list"), "{err}");
        let err = references(
            &obj(json!({"spec": {"extensions": [{"apiVersion": "a/v1", "kind": "X", "name": "n", "namespace": "other"}]}})),
            &path(),
        )
        .unwrap_err();
        assert!(err.contains("namespace other"), "{err}");
    }

    #[test]
    fn core_group_api_version() {
        let r = ExtensionRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "x".into(),
        };
        assert_eq!(r.group(), "");
        assert_eq!(r.gvk(), GroupVersionKind::gvk("", "v1", "ConfigMap"));
    }
}

//! The observed children: one label-filtered watch per allowed child
//! kind, indexed by the base object they belong to.
//!
//! Only objects labelled `kplug.io/base-uid` are listed and watched, so the
//! cache holds kplug's children and nothing else of the kind (a cluster's
//! every Pod or Secret would take gigabytes: Metacontroller #423). Of
//! those, only an object whose controller owner reference carries the
//! label's UID counts as that base's child: a label alone proves nothing.
//! Each object is kept without the `managedFields` of other managers (the
//! operator's own entry is how drift is seen, `super::drift`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use tokio::sync::{mpsc, watch};

use super::{BASE_UID_LABEL, FIELD_MANAGER_PREFIX};
use crate::status::ChildKey;

/// Own writes remembered at most (see [`Observed::note_own`]).
const MAX_OWN_WRITES: usize = 10_000;

/// A child as the watch last saw it.
pub(crate) type Child = Arc<DynamicObject>;

/// The children of every base of one kind, by base UID, then by identity.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// The base kind, `(group, kind)`: children of other kinds' objects
    /// are another controller's.
    base: (String, String),
    by_base: Mutex<HashMap<String, BTreeMap<ChildKey, Child>>>,
    /// Writes of this process, by child UID and resourceVersion (or
    /// deletions, with none): their watch events wake no base (the write
    /// came from that base's own reconcile).
    own: Mutex<HashSet<(String, Option<String>)>>,
}

impl Observed {
    /// The children of the objects of the base kind `group`/`kind`.
    pub(crate) fn new(group: &str, kind: &str) -> Self {
        Self {
            base: (group.to_owned(), kind.to_owned()),
            ..Self::default()
        }
    }

    /// The children of the base with `uid`.
    pub(crate) fn of(&self, uid: &str) -> BTreeMap<ChildKey, Child> {
        self.lock().get(uid).cloned().unwrap_or_default()
    }

    /// Notes a write of this process to a child (`None`: a deletion), so
    /// that its watch event does not wake the base again.
    pub(crate) fn note_own(&self, uid: String, resource_version: Option<String>) {
        let mut own = self.own.lock().unwrap_or_else(|e| e.into_inner());
        // A write that changed nothing has no event to remove its entry;
        // forgetting them all now and then costs at most a spare reconcile.
        if own.len() >= MAX_OWN_WRITES {
            own.clear();
        }
        own.insert((uid, resource_version));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BTreeMap<ChildKey, Child>>> {
        self.by_base.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the event for `obj` is this process's own write (and
    /// forgets it: one event per write).
    fn is_own(&self, obj: &DynamicObject, deleted: bool) -> bool {
        let uid = obj.uid().unwrap_or_default();
        let version = if deleted {
            None
        } else {
            obj.resource_version()
        };
        self.own
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(uid, version))
    }

    /// Stores `obj` (of kind `ar`); returns the UID of its base, if it is
    /// one's child.
    fn apply(&self, ar: &ApiResource, obj: DynamicObject) -> Option<String> {
        let (base, key) = identity(&self.base, ar, &obj)?;
        let obj = Arc::new(trimmed(obj));
        let mut by_base = self.lock();
        by_base.entry(base.clone()).or_default().insert(key, obj);
        Some(base)
    }

    fn delete(&self, ar: &ApiResource, obj: &DynamicObject) -> Option<String> {
        let (base, key) = identity(&self.base, ar, obj)?;
        let mut by_base = self.lock();
        if let Some(children) = by_base.get_mut(&base) {
            children.remove(&key);
            if children.is_empty() {
                by_base.remove(&base);
            }
        }
        Some(base)
    }

    /// Replaces every child of kind `ar` with `listed` (a relist).
    fn replace(&self, ar: &ApiResource, listed: Vec<DynamicObject>) {
        let mut by_base = self.lock();
        for children in by_base.values_mut() {
            children.retain(|key, _| !(key.group == ar.group && key.kind == ar.kind));
        }
        by_base.retain(|_, children| !children.is_empty());
        for obj in listed {
            if let Some((base, key)) = identity(&self.base, ar, &obj) {
                by_base
                    .entry(base)
                    .or_default()
                    .insert(key, Arc::new(trimmed(obj)));
            }
        }
    }
}

/// The base UID and identity of `obj`, when it is the child of an object
/// of kind `base_kind`: its label and its controller owner reference agree.
fn identity(
    base_kind: &(String, String),
    ar: &ApiResource,
    obj: &DynamicObject,
) -> Option<(String, ChildKey)> {
    let base = obj.labels().get(BASE_UID_LABEL)?;
    let controller = obj
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))?;
    let group = controller
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    let of_kind = controller.kind == base_kind.1 && group == base_kind.0;
    (of_kind && controller.uid == *base).then(|| {
        (
            base.clone(),
            ChildKey {
                group: ar.group.clone(),
                kind: ar.kind.clone(),
                name: obj.name_any(),
            },
        )
    })
}

/// `obj` without the managed fields of managers other than the
/// operator's: they are only read for drift.
fn trimmed(mut obj: DynamicObject) -> DynamicObject {
    if let Some(fields) = obj.metadata.managed_fields.as_mut() {
        fields.retain(|f| {
            f.manager
                .as_deref()
                .is_some_and(|m| m.starts_with(FIELD_MANAGER_PREFIX))
        });
    }
    obj
}

/// The base a child change wakes: its namespace and name (the controller
/// owner reference's), to be mapped to the base kind.
#[derive(Clone, Debug)]
pub(crate) struct Wake {
    /// The child's namespace, the base's too.
    pub(crate) namespace: Option<String>,
    /// The base's name.
    pub(crate) name: String,
}

/// Watches the children of kind `ar` (in `namespace`, or all) into
/// `observed` until the stream ends (never, but for the task being
/// dropped). Sends `true` on `synced` once the first list is in, and a
/// [`Wake`] for each change that is not this process's own write.
pub(crate) async fn watch_kind(
    client: kube::Client,
    ar: ApiResource,
    namespace: Option<String>,
    observed: Arc<Observed>,
    synced: watch::Sender<bool>,
    wake: mpsc::UnboundedSender<Wake>,
) {
    let api = crate::target::api_in(&client, &ar, namespace.as_deref());
    let config = watcher::Config::default().labels(BASE_UID_LABEL);
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut listing: Vec<DynamicObject> = Vec::new();
    while let Some(event) = events.next().await {
        let (obj, deleted) = match event {
            Ok(Event::Init) => {
                listing.clear();
                continue;
            }
            Ok(Event::InitApply(obj)) => {
                listing.push(obj);
                continue;
            }
            Ok(Event::InitDone) => {
                // A relist wakes every base whose children it holds: one
                // may have changed while the watch was down.
                let listed = std::mem::take(&mut listing);
                let wakes: Vec<Wake> = listed
                    .iter()
                    .filter(|o| identity(&observed.base, &ar, o).is_some())
                    .filter_map(wake_for)
                    .collect();
                observed.replace(&ar, listed);
                synced.send_replace(true);
                for w in wakes {
                    let _ = wake.send(w);
                }
                continue;
            }
            Ok(Event::Apply(obj)) => (obj, false),
            Ok(Event::Delete(obj)) => (obj, true),
            Err(error) => {
                tracing::warn!(kind = %ar.kind, %error, "child watch failed; retrying");
                continue;
            }
        };
        let own = observed.is_own(&obj, deleted);
        let woken = wake_for(&obj);
        let stored = if deleted {
            observed.delete(&ar, &obj)
        } else {
            observed.apply(&ar, obj)
        };
        if let Some(w) = woken.filter(|_| stored.is_some() && !own) {
            let _ = wake.send(w);
        }
    }
}

fn wake_for(obj: &DynamicObject) -> Option<Wake> {
    let controller = obj
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))?;
    Some(Wake {
        namespace: obj.namespace(),
        name: controller.name.clone(),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::GroupVersionKind;
    use serde_json::json;

    use super::*;

    fn child(name: &str, base_label: &str, controller_uid: &str) -> DynamicObject {
        let mut obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                         "labels": {BASE_UID_LABEL: base_label}},
        }))
        .unwrap();
        obj.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "x/v1".into(),
            kind: "Base".into(),
            name: "base".into(),
            uid: controller_uid.into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        obj
    }

    #[test]
    fn only_a_controlled_child_counts_and_a_relist_replaces_its_kind() {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let observed = Observed::new("x", "Base");
        assert_eq!(
            observed.apply(&ar, child("a", "b1", "b1")),
            Some("b1".into())
        );
        // A label that names a base whose controller reference it lacks.
        assert_eq!(observed.apply(&ar, child("forged", "b1", "other")), None);
        // Another kind's child.
        let other_kind = Observed::new("y", "Base");
        assert_eq!(other_kind.apply(&ar, child("a", "b1", "b1")), None);
        assert_eq!(observed.of("b1").len(), 1);
        observed.replace(&ar, vec![child("c", "b1", "b1")]);
        let names: Vec<String> = observed.of("b1").keys().map(|k| k.name.clone()).collect();
        assert_eq!(names, ["c"]);
        observed.delete(&ar, &child("c", "b1", "b1"));
        assert!(observed.of("b1").is_empty());
    }

    #[test]
    fn an_own_write_is_recognised_once() {
        let observed = Observed::new("x", "Base");
        let mut obj = child("a", "b1", "b1");
        obj.metadata.resource_version = Some("7".into());
        observed.note_own("uid-a".into(), Some("7".into()));
        assert!(observed.is_own(&obj, false));
        assert!(!observed.is_own(&obj, false));
    }
}

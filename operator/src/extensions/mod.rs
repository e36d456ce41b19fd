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
//! - [`references`](fn@references) reads the list; a malformed entry is a problem named in
//!   the `ExtensionsResolved` condition, not a crash.
//! - [`Extensions::resolve`] finds each kind with API discovery (any group,
//!   any CRD), starts one watch per kind, and reads the objects from that
//!   watch's cache, in the base object's namespace. It records which version
//!   of each extension the base was given.
//! - Whenever a watch learns the state of an extension (an event, or the end
//!   of a list or relist), every base that was given another version, or
//!   that found it missing, is reconciled. Status-only changes of an
//!   extension (the plugin's own writes) change no version and wake nobody.
//!
//! # Guarantees
//! - No edit is lost: the comparison is with what each base saw, not with
//!   the previous event, so an edit made before the first list or while the
//!   watch relists is found when the list completes.
//! - A base is never given extensions from a watch that has not listed yet:
//!   [`Resolution::waiting`] says so, and the end of the first list
//!   reconciles it.
//!
//! - Only allow-listed kinds are read ([`AllowList`], `--extension-kind`):
//!   never the base kind itself, never a cluster-scoped kind, never core
//!   Secrets or ConfigMaps unless listed, and always from the base object's
//!   namespace. A reference to anything else is a problem named in the
//!   condition (`ExtensionNotAllowed`), and no watch is started for it: a
//!   tenant who may create base objects cannot make the operator read (or a
//!   plugin write) anything else.
//!
//! # Caveats
//! - References must stay in the base object's namespace (like most
//!   Kubernetes references); a different `namespace` is refused.
//! - The cache holds every object of each referenced kind in the watched
//!   namespace(s), like any kube-rs reflector.

mod allow;
mod references;
mod resolution;
mod seen;
mod watch;

pub use allow::AllowList;
pub(crate) use references::{ExtensionRef, references};
pub(crate) use resolution::{Problem, Resolution};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio::sync::mpsc;

use crate::initial_list::InitialList;
use crate::metrics::ReconcileMetrics;
use seen::{ExtKey, Seen, SeenTable};
use watch::KindWatch;

type BaseRef = ObjectRef<DynamicObject>;

/// Resolves and watches extensions. Shared by all reconciles.
pub(crate) struct Extensions {
    client: Client,
    namespace: Option<String>,
    /// How each kind's watch fills its cache.
    initial_list: InitialList,
    base: ApiResource,
    allowed: AllowList,
    metrics: ReconcileMetrics,
    kinds: Mutex<HashMap<GroupVersionKind, (ApiResource, Scope)>>,
    watches: Mutex<HashMap<(String, String), Arc<KindWatch>>>,
    seen: Mutex<SeenTable<BaseRef>>,
    trigger: mpsc::UnboundedSender<BaseRef>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Extensions {
    /// Resolves extensions of the `allowed` kinds for bases of kind `base`,
    /// watching in `namespace` (all namespaces when `None`). Base objects to
    /// reconcile are sent to `trigger`.
    pub(crate) fn new(
        client: Client,
        base: ApiResource,
        namespace: Option<String>,
        initial_list: InitialList,
        allowed: AllowList,
        metrics: ReconcileMetrics,
        trigger: mpsc::UnboundedSender<BaseRef>,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            namespace,
            initial_list,
            base,
            allowed,
            metrics,
            kinds: Mutex::default(),
            watches: Mutex::default(),
            seen: Mutex::default(),
            trigger,
        })
    }

    /// Reads every referenced extension of `base` from the watch caches,
    /// and records what `base` was given, so that any other version of them
    /// reconciles it.
    pub(crate) async fn resolve(
        self: &Arc<Self>,
        base: &DynamicObject,
        refs: &[ExtensionRef],
    ) -> Resolution {
        let mut resolution = Resolution::default();
        let namespace = base.namespace();
        let mut seen = Vec::with_capacity(refs.len());
        for r in refs {
            let watch = match self.watch_for(r).await {
                Ok(watch) => watch,
                Err(problem) => {
                    resolution.problems.push(problem);
                    continue;
                }
            };
            let key = ExtKey {
                group: r.group().to_owned(),
                kind: r.kind.clone(),
                namespace: namespace.clone(),
                name: r.name.clone(),
            };
            let current = match watch.get(namespace.as_deref(), &r.name) {
                Ok(Some(obj)) => {
                    let version = seen::Version::of(&obj);
                    resolution.found.push(obj.as_ref().clone());
                    Seen::At(version)
                }
                Ok(None) => {
                    resolution.problems.push((
                        Problem::NotFound,
                        format!(
                            "extension {} {} not found{}",
                            r.kind,
                            r.name,
                            namespace
                                .as_deref()
                                .map(|n| format!(" in namespace {n}"))
                                .unwrap_or_default()
                        ),
                    ));
                    Seen::Absent
                }
                Err(waiting) => {
                    if !resolution.waiting.contains(&waiting) {
                        resolution.waiting.push(waiting);
                    }
                    Seen::Unsynced
                }
            };
            seen.push((key, current, watch));
        }
        self.record(base, seen);
        resolution
    }

    /// Records what `base` saw. Under the same lock as the watches' checks,
    /// what it saw is compared with the caches once more: a change that
    /// landed between the read and now wakes it here, and a later one wakes
    /// it from the watch.
    fn record(&self, base: &DynamicObject, seen: Vec<(ExtKey, Seen, Arc<KindWatch>)>) {
        let base_ref = ObjectRef::from_obj_with(base, self.base.clone());
        let mut table = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let entries: Vec<(ExtKey, Seen)> = seen
            .iter()
            .map(|(key, version, _)| (key.clone(), version.clone()))
            .collect();
        table.record(&base_ref, &entries);
        let stale = seen.iter().any(|(key, version, watch)| {
            let current = watch.current(key);
            current != Seen::Unsynced && current != *version
        });
        drop(table);
        if stale {
            tracing::debug!(base = %base_ref, "an extension changed while it was resolved; reconciling again");
            let _ = self.trigger.send(base_ref);
        }
    }

    /// Forgets a deleted base.
    pub(crate) fn forget(&self, base: &DynamicObject) {
        let base_ref = ObjectRef::from_obj_with(base, self.base.clone());
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(&base_ref);
    }

    /// How to reach `ext` (as discovered when it was resolved).
    pub(crate) fn api_resource(&self, ext: &DynamicObject) -> ApiResource {
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

    /// Wakes the bases that saw another version of `keys` than `watch` has.
    fn wake_stale(&self, watch: &KindWatch, keys: &[ExtKey]) {
        let table = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let stale: Vec<BaseRef> = keys
            .iter()
            .flat_map(|key| table.stale(key, &watch.current(key)))
            .collect();
        drop(table);
        for base in stale {
            tracing::debug!(%base, kind = watch.kind().1, "extension changed; reconciling its base");
            let _ = self.trigger.send(base);
        }
    }

    /// [`Self::wake_stale`] for every referenced extension of the kind.
    fn wake_stale_kind(&self, watch: &KindWatch) {
        let (group, kind) = watch.kind();
        let keys = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys_of_kind(group, kind);
        self.wake_stale(watch, &keys);
    }

    /// Whether `r` may be read at all, before anything is asked of the API
    /// server about it.
    fn admit(&self, r: &ExtensionRef) -> Result<(), (Problem, String)> {
        let not_allowed = |why: String| Err((Problem::NotAllowed, why));
        if r.group().eq_ignore_ascii_case(&self.base.group) && r.kind == self.base.kind {
            return not_allowed(format!(
                "extension {} {}: a {} cannot be an extension of another one",
                r.kind, r.name, self.base.kind
            ));
        }
        if !self.allowed.allows(r.group(), &r.kind) {
            let group = if r.group().is_empty() {
                "core"
            } else {
                r.group()
            };
            return not_allowed(format!(
                "extension {} {} ({}): the operator reads only the extension kinds it is configured with; to allow this one, start it with --extension-kind {group}/{}",
                r.kind, r.name, r.api_version, r.kind
            ));
        }
        Ok(())
    }

    /// The watch of `r`'s kind, started on first use (allowed kinds only).
    async fn watch_for(
        self: &Arc<Self>,
        r: &ExtensionRef,
    ) -> Result<Arc<KindWatch>, (Problem, String)> {
        self.admit(r)?;
        let (ar, scope) = self
            .kind(r)
            .await
            .map_err(|message| (Problem::KindNotServed, message))?;
        if matches!(scope, Scope::Cluster) {
            return Err((
                Problem::NotAllowed,
                format!(
                    "extension {} {}: {} is cluster-scoped; extensions live in the base object's namespace",
                    r.kind, r.name, r.kind
                ),
            ));
        }
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        let watch = watches
            .entry((ar.group.clone(), ar.kind.clone()))
            .or_insert_with(|| {
                KindWatch::start(
                    &self.client,
                    self.namespace.as_deref(),
                    self.initial_list,
                    &ar,
                    matches!(scope, Scope::Namespaced),
                    Arc::downgrade(self),
                )
            })
            .clone();
        self.metrics
            .set_extension_watches(&self.base.kind, watches.len());
        Ok(watch)
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
}

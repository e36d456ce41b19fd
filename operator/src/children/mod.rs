//! Children: Kubernetes objects a plugin manages without credentials. The
//! plugin answers with the objects it desires for a base object; the
//! operator applies, owns, watches and prunes them on its behalf, within
//! the limits the admin sets (`--child-kinds`).
//!
//! # Expected flow
//! 1. At start, each kind `--child-kinds` allows is found by discovery
//!    (a cluster-scoped or unserved kind stops the operator) and watched,
//!    filtered to kplug's label ([`observed`]).
//! 2. A Reconcile request carries the base's observed children of the
//!    plugin ([`Children::observed_json`]).
//! 3. On an OK or RETRY answer with a children message, [`Children::sync`]:
//!    the rules first (declared by the offer, never-allowed kinds, the
//!    allow-list, the namespace, the size and count bounds); then each
//!    allowed child is applied with server-side apply under a field
//!    manager of the plugin and the base ([`field_manager`]), with the base
//!    as its controller and the labels [`BASE_UID_LABEL`] and
//!    [`PLUGIN_LABEL`]; on OK, the children no longer desired are deleted.
//! 4. A change to a child by anyone but this process wakes its base.
//!    Children of a kind `--mutators` names pass through those plugins'
//!    `Mutate` first, in the flag's order ([`mod@mutate`]).
//! 5. When the base's clean-up is done, [`Children::delete_all`] deletes
//!    what is left before the finalizer goes.
//!
//! # Guarantees
//! - Nothing is taken over or adopted: a name never seen is read first,
//!   uncached, and refused if the object is someone else's or no one's.
//!   Conflicts are forced only on an object proven to be this base's.
//! - An unchanged child is not written ([`drift`]): a resync or a restart
//!   over converged children makes no request.
//! - A refused child is kept, not pruned; a FAILED or invalid answer
//!   changes nothing; an answer without children changes no child.
//! - Deletions carry the child's UID as a precondition.
//!
//! # Caveats
//! - Between the uncached read that finds no object and the create, a
//!   third party creating the same name is not seen: the apply merges
//!   into it. The window is one round trip.
//! - Children of a kind later removed from `--child-kinds` are not
//!   watched: they are found by label through the base's `status.children`
//!   when the base goes.

mod allow;
mod apply;
mod drift;
mod mutate;
mod observed;
mod rules;
mod sweep;
mod sync;

pub use allow::{ChildKind, ChildKinds};
pub use mutate::Mutators;
pub(crate) use mutate::{Mutated, Mutation, mutate};
pub(crate) use observed::Wake;
pub(crate) use sync::{ChildState, Sync};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::api::ApiResource;
use kube::core::GroupVersionKind;
use kube::discovery::{Scope as KubeScope, pinned_kind};
use tokio::sync::{mpsc, watch};

use crate::registry::Registry;
use crate::status::ChildKey;
use observed::Observed;

/// The label on a child naming its base object's UID.
pub const BASE_UID_LABEL: &str = "kplug.io/base-uid";
/// The label on a child naming the plugin that desires it.
pub const PLUGIN_LABEL: &str = "kplug.io/plugin";
/// How every children field manager starts.
pub(crate) const FIELD_MANAGER_PREFIX: &str = "kplug/";

/// The field manager of `plugin`'s children of the base with `uid`:
/// `kplug/<plugin>/<hash of the uid>`, so that one base can never take
/// another's child through server-side apply.
pub(crate) fn field_manager(plugin: &str, uid: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, uid.as_bytes());
    let short: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{FIELD_MANAGER_PREFIX}{plugin}/{short}")
}

/// Where a kind's objects live, as discovery says.
#[derive(Clone, Debug)]
pub(crate) enum Scope {
    /// In namespaces.
    Namespaced(ApiResource),
    /// Cluster-wide.
    Cluster,
    /// Not served, or discovery failed.
    Unknown,
}

/// The children of every base of one operator: the allow-list, the
/// watched kinds and what their watches saw.
pub(crate) struct Children {
    client: kube::Client,
    /// Where the watches look (all namespaces when `None`).
    namespace: Option<String>,
    /// Whether every watch has listed since the last start.
    synced: Arc<AtomicBool>,
    allowed: ChildKinds,
    /// The allowed kinds, by group and kind.
    watched: HashMap<(String, String), ApiResource>,
    /// Kinds looked up for a refusal's reason or a sweep.
    scopes: Mutex<HashMap<(String, String, String), Scope>>,
    observed: Arc<Observed>,
    /// Who patches which child kinds, in order (`--mutators`).
    mutators: Mutators,
    /// Where the mutators are.
    registry: Registry,
}

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Children")
            .field("allowed", &self.allowed)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Children {
    /// Finds each allowed kind.
    ///
    /// # Errors
    /// [`crate::Error::Config`] when a kind is not served or is
    /// cluster-scoped.
    pub(crate) async fn discover(
        client: &kube::Client,
        base: &ApiResource,
        allowed: ChildKinds,
        (mutators, registry): (Mutators, Registry),
        namespace: Option<String>,
    ) -> Result<Self, crate::Error> {
        let mut watched = HashMap::new();
        for gvk in allowed.kinds() {
            let shown = format!("{}/{}", api_version(&gvk), gvk.kind);
            let (ar, caps) = pinned_kind(client, &gvk).await.map_err(|e| {
                crate::Error::Config(format!(
                    "--child-kinds {shown}: the API server does not serve it ({e}); check the spelling (kinds are CamelCase) and the version"
                ))
            })?;
            if caps.scope != KubeScope::Namespaced {
                return Err(crate::Error::Config(format!(
                    "--child-kinds {shown}: the kind is cluster-scoped; children live in their base object's namespace"
                )));
            }
            watched.insert((gvk.group.clone(), gvk.kind.clone()), ar);
        }
        Ok(Self {
            client: client.clone(),
            namespace,
            synced: Arc::default(),
            allowed,
            watched,
            scopes: Mutex::default(),
            observed: Arc::new(Observed::new(&base.group, &base.kind)),
            mutators,
            registry,
        })
    }

    /// Whether every child watch has listed: until then the children of a
    /// base are not known, and its plugin is not called.
    pub(crate) fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn watched(&self, key: &ChildKey) -> Option<ApiResource> {
        self.watched
            .get(&(key.group.clone(), key.kind.clone()))
            .cloned()
    }

    /// The scope of a kind, looked up once per process.
    async fn scope(&self, group: &str, version: &str, kind: &str) -> Scope {
        let id = (group.to_owned(), version.to_owned(), kind.to_owned());
        if let Some(known) = self
            .scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
        {
            return known.clone();
        }
        let scope =
            match pinned_kind(&self.client, &GroupVersionKind::gvk(group, version, kind)).await {
                Ok((ar, caps)) if caps.scope == KubeScope::Namespaced => Scope::Namespaced(ar),
                Ok(_) => Scope::Cluster,
                Err(_) => Scope::Unknown,
            };
        self.scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, scope.clone());
        scope
    }

    /// The children of the base with `uid` that `plugin` manages, as JSON
    /// for a request: without managed fields, at most
    /// `MAX_OBSERVED_CHILDREN_BYTES` in all.
    pub(crate) fn observed_json(&self, uid: &str, plugin: &str) -> Vec<Vec<u8>> {
        let mut total = 0;
        let mut sent = Vec::new();
        for child in self.observed.of(uid).into_values() {
            if child.labels().get(PLUGIN_LABEL).map(String::as_str) != Some(plugin) {
                continue;
            }
            let mut child = kube::api::DynamicObject::clone(&child);
            child.metadata.managed_fields = None;
            // Serializing a DynamicObject cannot fail.
            let json = serde_json::to_vec(&child).unwrap_or_default();
            total += json.len();
            if total > kplug_proto::limits::MAX_OBSERVED_CHILDREN_BYTES {
                tracing::warn!(
                    uid,
                    plugin,
                    "observed children past the request bound; the rest are not sent"
                );
                break;
            }
            sent.push(json);
        }
        sent
    }

    /// Starts a watch per allowed kind. Returns their tasks, and the bases
    /// their changes wake. [`Children::synced`] turns true once every
    /// watch has listed.
    pub(crate) fn watch(
        &self,
    ) -> (
        Vec<tokio::task::JoinHandle<()>>,
        mpsc::UnboundedReceiver<Wake>,
    ) {
        let (wake, woken) = mpsc::unbounded_channel();
        self.synced
            .store(self.watched.is_empty(), Ordering::Release);
        let namespace = self.namespace.clone();
        let mut receivers = Vec::new();
        let mut tasks = Vec::new();
        for ar in self.watched.values() {
            let (tx, rx) = watch::channel(false);
            receivers.push(rx);
            tasks.push(tokio::spawn(observed::watch_kind(
                self.client.clone(),
                ar.clone(),
                namespace.clone(),
                Arc::clone(&self.observed),
                tx,
                wake.clone(),
            )));
        }
        if !receivers.is_empty() {
            let synced = Arc::clone(&self.synced);
            tasks.push(tokio::spawn(async move {
                for mut rx in receivers {
                    let _ = rx.wait_for(|s| *s).await;
                }
                synced.store(true, Ordering::Release);
            }));
        }
        (tasks, woken)
    }
}

/// `group/version`, or `version` for the core group.
fn api_version(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        gvk.version.clone()
    } else {
        format!("{}/{}", gvk.group, gvk.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_manager_is_per_plugin_and_base() {
        let a = field_manager("pg", "uid-1");
        assert!(a.starts_with("kplug/pg/"), "{a}");
        assert_ne!(a, field_manager("pg", "uid-2"));
        assert_ne!(a, field_manager("other", "uid-1"));
        assert!(a.len() <= 128);
    }
}

//! [`Delegate`]: the reconcile of one kind, delegated to plugins, for a
//! kube-runtime [`Controller`](kube::runtime::Controller) of your own.

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use futures::Stream;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use tokio::sync::mpsc;

mod builder;

pub use builder::DelegateBuilder;

use crate::children::{Mutated, Mutation, Mutators, mutate};
use crate::metrics::ReadyCounts;
use crate::reconcile::{self, Core, Live, ReconcileError};
use crate::registry::Registry;
use crate::waiting::{Wakeups, wake_on_changes};

type Wake = ObjectRef<DynamicObject>;

/// Reconciles objects of one kind `K` by delegating to the plugins of a
/// [`Registry`]: picks an implementation, resolves the extensions, calls the
/// plugin and writes its answer to the status. Build it with
/// [`Delegate::builder`] and run it in a kube-runtime `Controller`, around
/// steps of your own.
///
/// # Expected flow
/// 1. [`Delegate::builder`] … [`DelegateBuilder::build`] checks that the
///    API server serves `K` with a `/status` subresource, and the
///    extension kinds.
/// 2. Your `Controller` calls your reconcile function, which calls
///    [`Delegate::reconcile`] (after steps of your own, or instead of it
///    for objects you handle yourself), and [`Delegate::error_policy`] on
///    its errors.
/// 3. [`Delegate::wakeups`] goes to `Controller::reconcile_on`: objects
///    waiting for a plugin that registered, or whose extensions changed.
///
/// # Guarantees
/// - The choice of implementation is recorded in `status.implementation`
///   before a plugin is first called, and sticks.
/// - The finalizer is added before a plugin is first called; `Finalize`
///   runs on the recorded implementation before the object goes.
/// - Every failure ends in the object's conditions (`Ready`,
///   `PluginAvailable`, `ExtensionsResolved`, `Reconciled`), and the ones a
///   person must act on in a Warning Event.
/// - A plugin's share of concurrent reconciles is bounded, so a hung plugin
///   cannot take every worker.
///
/// # Caveats
/// - `Controller::new` reconciles on every change, including the status
///   the delegate writes; the plugin is then called once more per change.
///   [`Delegate::wants`] tells which changes matter (see `run.rs`, which
///   filters with it).
/// - One `Delegate` per kind and per process: the status it writes is
///   owned by its field manager ([`Settings::field_manager`](crate::Settings::field_manager)).
///
/// # Errors
/// [`Delegate::reconcile`] fails only when the API server refuses a read or
/// a write ([`ReconcileError`]); a plugin's failure is an outcome, written
/// to the object, not an error.
pub struct Delegate<K: Resource> {
    core: Arc<Core<Live>>,
    dyntype: K::DynamicType,
    wake: mpsc::UnboundedSender<Wake>,
    woken: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Wake>>>,
    registry: Registry,
    mutators: Mutators,
}

impl<K: Resource> Debug for Delegate<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegate")
            .field("kind", &self.core.target.display())
            .finish_non_exhaustive()
    }
}

impl<K> Delegate<K>
where
    K: Resource + Clone + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash + Send + Sync + 'static,
{
    /// A builder for a delegate of the typed kind `K`, e.g. your own
    /// `#[derive(CustomResource)]` type.
    pub fn builder(client: kube::Client, registry: &Registry) -> DelegateBuilder<K> {
        Self::builder_with(client, registry, K::DynamicType::default())
    }
}

impl<K> Delegate<K>
where
    K: Resource + Clone + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    /// A builder for a delegate of `K` described by `dyntype` (for
    /// [`DynamicObject`], the kind's [`ApiResource`](kube::api::ApiResource)).
    pub fn builder_with(
        client: kube::Client,
        registry: &Registry,
        dyntype: K::DynamicType,
    ) -> DelegateBuilder<K> {
        DelegateBuilder::new(client, registry.clone(), dyntype)
    }

    /// Reconciles `obj`: see the type's docs. Returns when to look again.
    ///
    /// # Errors
    /// [`ReconcileError`] when the API server refuses a read or a write.
    pub async fn reconcile(&self, obj: Arc<K>) -> Result<Action, ReconcileError> {
        let obj = self.to_dynamic(&obj)?;
        reconcile::reconcile(&obj, &self.core).await
    }

    /// What to do after a [`ReconcileError`]: back off, per object.
    pub fn error_policy(&self, obj: Arc<K>, _error: &ReconcileError) -> Action {
        let uid = obj.uid().unwrap_or_default();
        Action::requeue(self.core.failures.failed(&uid))
    }

    /// Whether a change of `obj` seen on a watch needs a reconcile: a
    /// change of anything but the status the delegate wrote last (its own
    /// writes would otherwise wake the object again), or a request to move
    /// it to another implementation.
    pub fn wants(&self, obj: &K) -> bool {
        self.to_dynamic(obj)
            .is_ok_and(|obj| self.core.written.wakes(&obj) || reconcile::reselect_requested(&obj))
    }

    /// The objects to reconcile because of a plugin or an extension, for
    /// `Controller::reconcile_on`: objects waiting for a plugin that is now
    /// ready, recorded on a plugin that left for good, or whose extensions
    /// changed. `store` is the controller's cache (`Controller::store`).
    ///
    /// Follows the registry while the stream lives; call it once per
    /// `Controller`.
    pub fn wakeups(&self, store: Store<K>) -> impl Stream<Item = ObjectRef<K>> + Send + 'static {
        let core = Arc::clone(&self.core);
        let dyntype = self.dyntype.clone();
        let snapshot = {
            let dyntype = self.dyntype.clone();
            let store = store.clone();
            move || {
                store
                    .state()
                    .iter()
                    .filter_map(|obj| to_dynamic(obj.as_ref(), &dyntype).ok())
                    .collect()
            }
        };
        self.count_objects(store.clone());
        let follower = tokio::spawn(wake_on_changes(Wakeups {
            registry: self.registry.clone(),
            waiting: Arc::clone(&core.waiting),
            kind: core.target.group_kind(),
            api_resource: core.target.api_resource.clone(),
            snapshot: Arc::new(snapshot),
            grace: self.registry.config().heartbeat_ttl,
            wake: self.wake.clone(),
        }));
        // Stops following the registry, and watching the children, when
        // the stream is dropped (a Controller that stops, a lost leader
        // term).
        let mut guard = vec![AbortOnDrop(follower)];
        guard.extend(self.watch_children());
        futures::stream::unfold(
            (guard, Arc::clone(&self.woken), dyntype),
            |(guard, woken, dyntype)| async move {
                let next = woken.lock().await.recv().await?;
                let mut object = ObjectRef::<K>::new_with(&next.name, dyntype.clone());
                if let Some(namespace) = &next.namespace {
                    object = object.within(namespace);
                }
                Some((object, (guard, woken, dyntype)))
            },
        )
    }

    /// Exports the count of objects by Ready status, read off `store`.
    fn count_objects(&self, store: Store<K>) {
        self.core
            .metrics
            .count_objects_with(&self.core.target.display(), move || {
                let mut counts = ReadyCounts::default();
                for obj in store.state() {
                    counts.add(ready_status(obj.as_ref()).as_deref());
                }
                counts
            });
    }

    /// Watches the children (when any kind is allowed), and wakes a base
    /// when one of its children changes; the tasks stop when dropped.
    fn watch_children(&self) -> Vec<AbortOnDrop> {
        let Some(children) = &self.core.children else {
            return Vec::new();
        };
        let (watches, mut woken) = children.watch();
        let mut tasks: Vec<AbortOnDrop> = watches.into_iter().map(AbortOnDrop).collect();
        let wake = self.wake.clone();
        let ar = self.core.target.api_resource.clone();
        tasks.push(AbortOnDrop(tokio::spawn(async move {
            while let Some(child) = woken.recv().await {
                let mut base = ObjectRef::new_with(&child.name, ar.clone());
                if let Some(namespace) = child.namespace {
                    base = base.within(&namespace);
                }
                if wake.send(base).is_err() {
                    return;
                }
            }
        })));
        tasks
    }

    /// Passes `object`, an object of your own about to be written, through
    /// the mutators [`DelegateBuilder::mutators`] allows for its kind, in
    /// order, as the children of plugins are: a backup plugin adds its
    /// sidecar to your Deployment the way it adds it to a plugin's. `live`
    /// is the object as it is now, if it exists; `base` the object of
    /// kind `K` it is for, if any. Without a mutator for its kind, `object`
    /// comes back as it is.
    ///
    /// ```no_run
    /// # async fn example(kplug: &kplug_operator::Delegate<kube::api::DynamicObject>) -> Result<(), Box<dyn std::error::Error>> {
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// let mine: Deployment = serde_json::from_value(serde_json::json!({
    ///     "apiVersion": "apps/v1", "kind": "Deployment",
    ///     "metadata": {"name": "server", "namespace": "default"},
    ///     "spec": {"selector": {}, "template": {"spec": {"containers": []}}},
    /// }))?;
    /// let patched = kplug.mutate(&mine, None, None).await?;
    /// // ... apply `patched` as you would have applied `mine`.
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`MutateError`]: a mutator is down (apply nothing now and try again:
    /// applying without it would roll the workload twice), or its patch
    /// breaks the rules, or `object` is not a Kubernetes object.
    pub async fn mutate<T>(
        &self,
        object: &T,
        live: Option<&T>,
        base: Option<&K>,
    ) -> Result<T, MutateError>
    where
        T: Serialize + serde::de::DeserializeOwned,
    {
        let encode = |o: &T| -> Result<DynamicObject, MutateError> {
            serde_json::to_value(o)
                .and_then(serde_json::from_value)
                .map_err(|e| MutateError::Object(e.to_string()))
        };
        let dynamic = encode(object)?;
        let Some(types) = dynamic.types.clone() else {
            return Err(MutateError::Object("it has no apiVersion and kind".into()));
        };
        let (group, _) = types.api_version.rsplit_once('/').unwrap_or(("", ""));
        let key = crate::status::ChildKey {
            group: group.to_owned(),
            kind: types.kind.clone(),
            name: dynamic.name_any(),
        };
        let mutators = self.mutators.of(&key.group, &key.kind);
        if mutators.is_empty() {
            return serde_json::to_value(object)
                .and_then(serde_json::from_value)
                .map_err(|e| MutateError::Object(e.to_string()));
        }
        let live = live.map(encode).transpose()?;
        let base = base
            .map(|b| self.to_dynamic(b))
            .transpose()
            .map_err(|e| MutateError::Object(e.to_string()))?;
        let Ok(serde_json::Value::Object(map)) = serde_json::to_value(object) else {
            return Err(MutateError::Object("it is not a JSON object".into()));
        };
        let mutation = Mutation {
            registry: &self.registry,
            mutators,
            key: &key,
            live: live.as_ref(),
            base: base.as_ref(),
            implementation: "",
        };
        match mutate(mutation, map).await {
            Mutated::Object(map, warnings) => {
                for warning in warnings {
                    tracing::warn!(object = %key, warning, "mutator warning");
                }
                serde_json::from_value(serde_json::Value::Object(map))
                    .map_err(|e| MutateError::Object(format!("the mutated object: {e}")))
            }
            Mutated::Held(why) => Err(MutateError::Held(why)),
            Mutated::Refused(why) => Err(MutateError::Refused(why)),
        }
    }

    /// Forgets what the last term knew: a new leader reconciles every
    /// object once, and each records its needs again.
    pub(crate) fn new_term(&self) {
        self.core.written.clear();
        self.core.waiting.clear();
    }

    fn to_dynamic(&self, obj: &K) -> Result<DynamicObject, ReconcileError> {
        to_dynamic(obj, &self.dyntype)
    }
}

/// The status of `obj`'s `Ready` condition, if it has one.
fn ready_status<K: Serialize + 'static>(obj: &K) -> Option<String> {
    let ready = |conditions: Option<&serde_json::Value>| {
        crate::status::find_condition(conditions, crate::status::types::READY)
            .and_then(|c| c.get("status"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    // A DynamicObject is read in place; a typed object goes through JSON, as
    // in reconcile (once per object and scrape).
    if let Some(obj) = (obj as &dyn Any).downcast_ref::<DynamicObject>() {
        return ready(obj.data.pointer("/status/conditions"));
    }
    let value = serde_json::to_value(obj).ok()?;
    ready(value.pointer("/status/conditions"))
}

/// `obj` as a [`DynamicObject`] with its `apiVersion` and `kind`.
fn to_dynamic<K>(obj: &K, dyntype: &K::DynamicType) -> Result<DynamicObject, ReconcileError>
where
    K: Resource + Serialize + 'static,
{
    if let Some(obj) = (obj as &dyn Any).downcast_ref::<DynamicObject>() {
        return Ok(obj.clone());
    }
    let mut dynamic: DynamicObject = serde_json::to_value(obj)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            ReconcileError::of(
                "encoding the object",
                obj.name_any(),
                kube::Error::SerdeError(e),
            )
        })?;
    if dynamic.types.is_none() {
        dynamic.types = Some(kube::api::TypeMeta {
            api_version: K::api_version(dyntype).into_owned(),
            kind: K::kind(dyntype).into_owned(),
        });
    }
    Ok(dynamic)
}

/// Why [`Delegate::mutate`] gave no object to write.
#[derive(Debug, thiserror::Error)]
pub enum MutateError {
    /// A mutator is not registered, not ready, or its call failed: write
    /// nothing now, and try again.
    #[error("held: {0}")]
    Held(String),
    /// A mutator's patch breaks the rules (paths, kplug's labels) or does
    /// not apply.
    #[error("refused: {0}")]
    Refused(String),
    /// The object is not a Kubernetes object (JSON with apiVersion, kind
    /// and metadata).
    #[error("not a Kubernetes object: {0}")]
    Object(String),
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

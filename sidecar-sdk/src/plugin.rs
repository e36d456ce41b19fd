//! The trait a plugin implements, and how it describes itself.

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use kplug_proto::v1::{self, Capability, GroupKind, GroupVersionKind};

use crate::admission::{AdmissionRequest, Defaults, Validation};
use crate::hooks::{CallPolicy, Hook, HookCall};
use crate::mutate::{MutateCall, Mutation};
use crate::request::Request;
use crate::response::Response;

/// Any error a handler returns; it becomes a FAILED response carrying its
/// message, shown on the resource.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Whether the plugin can take work now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Route work here.
    Ready,
    /// Do not route work here yet; the message says why.
    NotReady(String),
}

/// Your plugin's logic. Implement [`Plugin::reconcile`]; the rest has
/// defaults. Handlers may run concurrently (up to the operator's in-flight
/// bound) and must be idempotent: the same request can come again.
pub trait Plugin: Send + Sync + 'static {
    /// Drive the real world towards the base object's spec.
    fn reconcile(
        &self,
        request: Request,
    ) -> impl Future<Output = Result<Response, BoxError>> + Send;

    /// Clean up before the base object is deleted, or moved to another
    /// implementation (`kplug.io/reselect`); [`Response::ok`] lets it go,
    /// anything else keeps it.
    ///
    /// Overriding this method is all it takes: the SDK then advertises the
    /// FINALIZE capability, so the operator adds its finalizer to the
    /// objects this plugin reconciles and calls this before they go. A
    /// plugin that keeps the default is never called for it, and deleting
    /// its objects does not wait for it.
    ///
    /// ```
    /// use kplug_sidecar::{BoxError, Plugin, Request, Response};
    ///
    /// struct Tables;
    ///
    /// impl Plugin for Tables {
    ///     async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
    ///         Ok(Response::ok().message(format!("table {} exists", request.name())))
    ///     }
    ///
    ///     async fn finalize(&self, request: Request) -> Result<Response, BoxError> {
    ///         Ok(Response::ok().message(format!("dropped table {}", request.name())))
    ///     }
    /// }
    /// ```
    ///
    /// A wrapper plugin that forwards to another's `finalize` (returning its
    /// future as it is) has the capability exactly when the wrapped plugin
    /// has it.
    fn finalize(
        &self,
        request: Request,
    ) -> impl Future<Output = Result<Response, BoxError>> + Send {
        let _ = request;
        NoFinalize
    }

    /// Decide, at admission, whether an object may be created or changed:
    /// an object of a base kind this plugin offers (that its implementation
    /// reconciles, or would be chosen for), or an extension of a kind one
    /// of its offers declares ([`AdmissionRequest::implementation`] says
    /// which offer). Field errors refuse it, and `kubectl apply` prints
    /// them.
    ///
    /// Overriding this method makes the SDK advertise the VALIDATE
    /// capability, as for [`Plugin::finalize`]. An error returned here
    /// means the plugin could not decide: the SDK answers with a gRPC
    /// error carrying its message, and the plugin's failure policy
    /// ([`crate::CallPolicy::failure_policy`], else the operator's)
    /// refuses or admits the object. To refuse, return field errors.
    ///
    /// ```
    /// use kplug_sidecar::{AdmissionRequest, BoxError, Plugin, Request, Response, Validation};
    ///
    /// struct Tables;
    ///
    /// impl Plugin for Tables {
    ///     async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
    ///         Ok(Response::ok())
    ///     }
    ///
    ///     async fn validate(&self, request: AdmissionRequest) -> Result<Validation, BoxError> {
    ///         let mut verdict = Validation::allowed();
    ///         let columns = request.object().spec()["columns"].as_array().cloned().unwrap_or_default();
    ///         for (i, column) in columns.iter().enumerate() {
    ///             let type_ = &column["type"];
    ///             if !["text", "integer"].contains(&type_.as_str().unwrap_or("")) {
    ///                 verdict = verdict.error(&format!("spec.columns[{i}].type"), type_, "use text or integer");
    ///             }
    ///         }
    ///         Ok(verdict)
    ///     }
    /// }
    /// ```
    fn validate(
        &self,
        request: AdmissionRequest,
    ) -> impl Future<Output = Result<Validation, BoxError>> + Send {
        let _ = request;
        NoValidate
    }

    /// Fill in defaults, at admission, of the same objects as
    /// [`Plugin::validate`] (which then sees the defaulted object): a JSON
    /// Patch limited to `/spec`, `/metadata/labels` and
    /// `/metadata/annotations`, built with [`Defaults`].
    ///
    /// This is the protocol's `Default` call; the method is named
    /// `defaults` so that it never clashes with [`Default::default`] on a
    /// plugin type that derives `Default` (`Tables::default()` would be
    /// ambiguous). Overriding it makes the SDK advertise the DEFAULT
    /// capability. An error returned here, or a patch outside the allowed
    /// paths, is answered with a gRPC error carrying its message, so the
    /// failure policy decides.
    ///
    /// ```
    /// use kplug_sidecar::{AdmissionRequest, BoxError, Defaults, Plugin, Request, Response};
    ///
    /// struct MariaDb;
    ///
    /// impl Plugin for MariaDb {
    ///     async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
    ///         Ok(Response::ok())
    ///     }
    ///
    ///     async fn defaults(&self, request: AdmissionRequest) -> Result<Defaults, BoxError> {
    ///         let spec = request.object().spec();
    ///         Ok(if spec.get("storageEngine").is_none() {
    ///             Defaults::none().add("/spec/storageEngine", "InnoDB")
    ///         } else {
    ///             Defaults::none()
    ///         })
    ///     }
    /// }
    /// ```
    fn defaults(
        &self,
        request: AdmissionRequest,
    ) -> impl Future<Output = Result<Defaults, BoxError>> + Send {
        let _ = request;
        NoDefaults
    }

    /// Run one of the hooks declared with [`PluginInfo::hook`]
    /// ([`HookCall::hook`] names it). The answer's outcome, message, retry
    /// delay, status (written under `status.hooks.<plugin>`) and events
    /// count; conditions and extension statuses are not a hook's to set,
    /// and make the answer FAILED. An error becomes FAILED with its
    /// message, as for [`Plugin::reconcile`].
    ///
    /// Overriding this method makes the SDK advertise the HOOKS
    /// capability; declaring hooks without overriding it is a start-up
    /// error.
    fn hook(&self, call: HookCall) -> impl Future<Output = Result<Response, BoxError>> + Send {
        let _ = call;
        NoHook
    }

    /// Patch an object of a kind declared with [`PluginInfo::mutation`]
    /// before the operator applies it: a child another plugin desires
    /// (when the operator's `--mutators` allows this plugin for its kind),
    /// or an embedding operator's own object. The answer must be
    /// deterministic: the same call, the same [`Mutation`].
    ///
    /// Overriding this method makes the SDK advertise the MUTATE
    /// capability; declaring mutations without overriding it is a
    /// start-up error. An error returned here is answered with a gRPC
    /// error carrying its message, and the operator holds the object until
    /// a call succeeds.
    ///
    /// ```
    /// use kplug_sidecar::{BoxError, MutateCall, Mutation, Plugin, Request, Response};
    /// use serde_json::json;
    ///
    /// struct Backup;
    ///
    /// impl Plugin for Backup {
    ///     async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
    ///         Ok(Response::ok())
    ///     }
    ///
    ///     async fn mutate(&self, call: MutateCall) -> Result<Mutation, BoxError> {
    ///         Ok(Mutation::none().add(
    ///             "/spec/template/spec/containers/-",
    ///             json!({"name": "backup", "image": "backup:1"}),
    ///         ))
    ///     }
    /// }
    /// ```
    fn mutate(&self, call: MutateCall) -> impl Future<Output = Result<Mutation, BoxError>> + Send {
        let _ = call;
        NoMutate
    }

    /// Whether the plugin can take work (e.g. its database is reachable).
    fn ready(&self) -> impl Future<Output = Readiness> + Send {
        async { Readiness::Ready }
    }
}

/// The future of the default [`Plugin::finalize`]. Its type is how the SDK
/// knows that a plugin did not override the method: nothing outside this
/// module can name or build it.
struct NoFinalize;

impl Future for NoFinalize {
    type Output = Result<Response, BoxError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(Response::ok()))
    }
}

/// The future of the default [`Plugin::validate`] (see [`NoFinalize`]).
/// The SDK answers UNIMPLEMENTED instead of polling it.
struct NoValidate;

impl Future for NoValidate {
    type Output = Result<Validation, BoxError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(Validation::allowed()))
    }
}

/// The future of the default [`Plugin::defaults`] (see [`NoFinalize`]).
struct NoDefaults;

impl Future for NoDefaults {
    type Output = Result<Defaults, BoxError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(Defaults::none()))
    }
}

/// The future of the default [`Plugin::hook`] (see [`NoFinalize`]).
struct NoHook;

impl Future for NoHook {
    type Output = Result<Response, BoxError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(Response::ok()))
    }
}

/// The future of the default [`Plugin::mutate`] (see [`NoFinalize`]).
struct NoMutate;

impl Future for NoMutate {
    type Output = Result<Mutation, BoxError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(Mutation::none()))
    }
}

/// The type of the future a method returns, from the method itself;
/// nothing is called.
fn future_type<P, A, F: 'static>(_: fn(&'static P, A) -> F) -> TypeId {
    TypeId::of::<F>()
}

/// Whether `P` overrides [`Plugin::finalize`], decided at compile time from
/// the type of the future its `finalize` returns: the default's is
/// [`NoFinalize`]. Nothing is called.
pub(crate) fn implements_finalize<P: Plugin>() -> bool {
    future_type(P::finalize) != TypeId::of::<NoFinalize>()
}

/// Whether `P` overrides [`Plugin::validate`] (as [`implements_finalize`]).
pub(crate) fn implements_validate<P: Plugin>() -> bool {
    future_type(P::validate) != TypeId::of::<NoValidate>()
}

/// Whether `P` overrides [`Plugin::defaults`] (as [`implements_finalize`]).
pub(crate) fn implements_defaults<P: Plugin>() -> bool {
    future_type(P::defaults) != TypeId::of::<NoDefaults>()
}

/// Whether `P` overrides [`Plugin::hook`] (as [`implements_finalize`]).
pub(crate) fn implements_hook<P: Plugin>() -> bool {
    future_type(P::hook) != TypeId::of::<NoHook>()
}

/// Whether `P` overrides [`Plugin::mutate`] (as [`implements_finalize`]).
pub(crate) fn implements_mutate<P: Plugin>() -> bool {
    future_type(P::mutate) != TypeId::of::<NoMutate>()
}

/// The capabilities `P` advertises: RECONCILE, FINALIZE, VALIDATE,
/// DEFAULT and HOOKS for the methods it overrides, and CHILDREN when an
/// offer of `info` declares child kinds.
pub(crate) fn capabilities<P: Plugin>(info: &PluginInfo) -> Vec<i32> {
    let mut caps = vec![Capability::Reconcile as i32];
    let optional = [
        (implements_finalize::<P>(), Capability::Finalize),
        (implements_validate::<P>(), Capability::Validate),
        (implements_defaults::<P>(), Capability::Default),
        (implements_hook::<P>(), Capability::Hooks),
        (
            info.offers.iter().any(|o| !o.children.is_empty()),
            Capability::Children,
        ),
        (implements_mutate::<P>(), Capability::Mutate),
    ];
    caps.extend(
        optional
            .into_iter()
            .filter(|(implemented, _)| *implemented)
            .map(|(_, capability)| capability as i32),
    );
    caps
}

/// One implementation the plugin offers for one base kind.
#[derive(Clone, Debug)]
pub struct Offer {
    base: GroupKind,
    implementation: String,
    extensions: Vec<GroupKind>,
    children: Vec<GroupVersionKind>,
}

impl Offer {
    /// Offers `implementation` (e.g. `PostgreSQL`) for the base kind `kind`
    /// of API group `group`.
    pub fn new(group: &str, kind: &str, implementation: &str) -> Self {
        Self {
            base: GroupKind {
                group: group.to_owned(),
                kind: kind.to_owned(),
            },
            implementation: implementation.to_owned(),
            extensions: Vec::new(),
            children: Vec::new(),
        }
    }

    /// An extension kind this implementation understands; only extensions
    /// of declared kinds are sent.
    pub fn extension(mut self, group: &str, kind: &str) -> Self {
        self.extensions.push(GroupKind {
            group: group.to_owned(),
            kind: kind.to_owned(),
        });
        self
    }

    /// A kind of Kubernetes object this implementation manages for each
    /// base object (its children), by `apiVersion` and kind, e.g.
    /// `("apps/v1", "Deployment")` or `("v1", "ConfigMap")`. Declaring one
    /// makes the SDK advertise the CHILDREN capability; the answers then
    /// carry the desired children ([`crate::Response::child`]) and the
    /// requests the observed ones ([`crate::Request::children`]). The
    /// operator applies only the kinds its `--child-kinds` allows.
    ///
    /// ```
    /// use kplug_sidecar::Offer;
    /// let offer = Offer::new("myorg.org", "DatabaseServer", "PostgreSQL")
    ///     .child("apps/v1", "Deployment")
    ///     .child("v1", "Service");
    /// ```
    pub fn child(mut self, api_version: &str, kind: &str) -> Self {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.children.push(GroupVersionKind {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        });
        self
    }

    pub(crate) fn to_proto(&self) -> v1::Offer {
        v1::Offer {
            base: Some(self.base.clone()),
            implementation: self.implementation.clone(),
            extensions: self.extensions.clone(),
            children: self.children.clone(),
        }
    }
}

/// What the plugin is: name, version, offers, and the hooks and call
/// policies it declares. (What it can do, its capabilities, follows from
/// the methods of [`Plugin`] it implements.) `GetInfo` and every heartbeat
/// carry all of it.
///
/// ```
/// use kplug_sidecar::{Offer, PluginInfo};
/// let info = PluginInfo::new("postgresql", "1.0.0")
///     .offer(Offer::new("myorg.org", "DatabaseTable", "PostgreSQL")
///         .extension("myorg.org", "DatabaseTablePostgreSqlExtension"));
/// ```
#[derive(Clone, Debug)]
pub struct PluginInfo {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) description: String,
    pub(crate) offers: Vec<Offer>,
    pub(crate) hooks: Vec<Hook>,
    pub(crate) call_policies: Vec<CallPolicy>,
    pub(crate) mutations: Vec<GroupVersionKind>,
}

impl PluginInfo {
    /// A plugin called `name` at `version`. The name is a DNS label
    /// ([`kplug_proto::rules::validate_plugin_name`], e.g. `postgresql`),
    /// checked when the plugin starts.
    pub fn new(name: &str, version: &str) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            description: String::new(),
            offers: Vec::new(),
            hooks: Vec::new(),
            call_policies: Vec::new(),
            mutations: Vec::new(),
        }
    }

    /// Declares a kind of object the plugin patches, by `apiVersion` and
    /// kind (e.g. `("apps/v1", "Deployment")`); the plugin must override
    /// [`Plugin::mutate`]. The operator sends it only the kinds its admin
    /// allows for it (`--mutators`).
    pub fn mutation(mut self, api_version: &str, kind: &str) -> Self {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.mutations.push(GroupVersionKind {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        });
        self
    }

    pub(crate) fn mutations(&self) -> Vec<v1::Mutation> {
        self.mutations
            .iter()
            .map(|kind| v1::Mutation {
                kind: Some(kind.clone()),
            })
            .collect()
    }

    /// One line for humans.
    pub fn description(mut self, description: &str) -> Self {
        self.description = description.to_owned();
        self
    }

    /// Adds an offer.
    pub fn offer(mut self, offer: Offer) -> Self {
        self.offers.push(offer);
        self
    }

    /// Declares a hook; the plugin must override [`Plugin::hook`]. Names
    /// are checked (DNS labels, unique) when the plugin starts.
    pub fn hook(mut self, hook: Hook) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Declares how the plugin asks to be called for one call (deadline,
    /// failure policy); one policy per call, checked when the plugin
    /// starts.
    pub fn call_policy(mut self, policy: CallPolicy) -> Self {
        self.call_policies.push(policy);
        self
    }

    /// The plugin name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn offers(&self) -> Vec<v1::Offer> {
        self.offers.iter().map(Offer::to_proto).collect()
    }

    pub(crate) fn hooks(&self) -> Vec<v1::Hook> {
        self.hooks.iter().map(Hook::to_proto).collect()
    }

    pub(crate) fn call_policies(&self) -> Vec<v1::CallPolicy> {
        self.call_policies
            .iter()
            .map(CallPolicy::to_proto)
            .collect()
    }

    /// The checks the operator makes on this description, made at start-up
    /// (for `P`, the plugin's type) so that a mistake stops the plugin with
    /// a message, instead of every heartbeat being refused.
    pub(crate) fn validate<P: Plugin>(&self) -> Result<(), crate::Error> {
        kplug_proto::rules::validate_plugin_name(&self.name).map_err(crate::Error::InvalidName)?;
        let declaration = |problem: String| {
            crate::Error::Declaration(format!("plugin {} cannot start: {problem}", self.name))
        };
        if self.hooks.len() > kplug_proto::limits::MAX_HOOKS {
            return Err(declaration(format!(
                "{} hooks are declared; at most {} are accepted",
                self.hooks.len(),
                kplug_proto::limits::MAX_HOOKS
            )));
        }
        for (i, hook) in self.hooks.iter().enumerate() {
            hook.validate(&self.name, &self.hooks[..i])?;
        }
        if !self.hooks.is_empty() && !implements_hook::<P>() {
            return Err(declaration(
                "it declares hooks but does not implement Plugin::hook".into(),
            ));
        }
        for (i, policy) in self.call_policies.iter().enumerate() {
            policy.validate(&self.name, &self.call_policies[..i])?;
        }
        if !self.mutations.is_empty() && !implements_mutate::<P>() {
            return Err(declaration(
                "it declares mutations but does not implement Plugin::mutate".into(),
            ));
        }
        if implements_mutate::<P>() && self.mutations.is_empty() {
            return Err(declaration(
                "it implements Plugin::mutate but declares no kind to mutate (PluginInfo::mutation)".into(),
            ));
        }
        Ok(())
    }
}

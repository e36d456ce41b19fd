//! The trait a plugin implements, and the capabilities that follow from
//! the methods it overrides. What it describes of itself is in
//! [`crate::info`].

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use kplug_proto::v1::Capability;

use crate::admission::{AdmissionRequest, Defaults, Validation};
use crate::hooks::HookCall;
pub use crate::info::{Offer, PluginInfo};
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

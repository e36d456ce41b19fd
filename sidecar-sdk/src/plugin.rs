//! The trait a plugin implements, and how it describes itself.

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use kplug_proto::v1::{self, Capability, GroupKind};

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

/// Whether `P` overrides [`Plugin::finalize`], decided at compile time from
/// the type of the future its `finalize` returns: the default's is
/// [`NoFinalize`]. Nothing is called.
pub(crate) fn implements_finalize<P: Plugin>() -> bool {
    fn future_type<P, F: 'static>(_: fn(&'static P, Request) -> F) -> TypeId {
        TypeId::of::<F>()
    }
    future_type(P::finalize) != TypeId::of::<NoFinalize>()
}

/// The capabilities `P` advertises: RECONCILE, and FINALIZE when it
/// overrides [`Plugin::finalize`].
pub(crate) fn capabilities<P: Plugin>() -> Vec<i32> {
    let mut caps = vec![Capability::Reconcile as i32];
    if implements_finalize::<P>() {
        caps.push(Capability::Finalize as i32);
    }
    caps
}

/// One implementation the plugin offers for one base kind.
#[derive(Clone, Debug)]
pub struct Offer {
    base: GroupKind,
    implementation: String,
    extensions: Vec<GroupKind>,
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

    pub(crate) fn to_proto(&self) -> v1::Offer {
        v1::Offer {
            base: Some(self.base.clone()),
            implementation: self.implementation.clone(),
            extensions: self.extensions.clone(),
        }
    }
}

/// What the plugin is: name, version, offers. (What it can do, its
/// capabilities, follows from the methods of [`Plugin`] it implements.)
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
        }
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

    /// The plugin name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn offers(&self) -> Vec<v1::Offer> {
        self.offers.iter().map(Offer::to_proto).collect()
    }

    pub(crate) fn validate(&self) -> Result<(), crate::Error> {
        kplug_proto::rules::validate_plugin_name(&self.name).map_err(crate::Error::InvalidName)
    }
}

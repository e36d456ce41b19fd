//! The trait a plugin implements, and how it describes itself.

use std::future::Future;

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
    /// implementation (`kplug.io/reselect`). Called only when the
    /// plugin's [`PluginInfo`] has [`PluginInfo::with_finalize`].
    fn finalize(
        &self,
        request: Request,
    ) -> impl Future<Output = Result<Response, BoxError>> + Send {
        let _ = request;
        async { Ok(Response::ok()) }
    }

    /// Whether the plugin can take work (e.g. its database is reachable).
    fn ready(&self) -> impl Future<Output = Readiness> + Send {
        async { Readiness::Ready }
    }
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

/// What the plugin is: name, version, offers.
///
/// ```
/// use kplug_sidecar::{Offer, PluginInfo};
/// let info = PluginInfo::new("postgresql", "1.0.0")
///     .offer(Offer::new("myorg.org", "DatabaseTable", "PostgreSQL")
///         .extension("myorg.org", "DatabaseTablePostgreSqlExtension"))
///     .with_finalize();
/// ```
#[derive(Clone, Debug)]
pub struct PluginInfo {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) description: String,
    pub(crate) offers: Vec<Offer>,
    pub(crate) finalize: bool,
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
            finalize: false,
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

    /// The plugin implements [`Plugin::finalize`] and must be called before
    /// objects it reconciled are deleted.
    pub fn with_finalize(mut self) -> Self {
        self.finalize = true;
        self
    }

    /// The plugin name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn capabilities(&self) -> Vec<i32> {
        let mut caps = vec![Capability::Reconcile as i32];
        if self.finalize {
            caps.push(Capability::Finalize as i32);
        }
        caps
    }

    pub(crate) fn offers(&self) -> Vec<v1::Offer> {
        self.offers.iter().map(Offer::to_proto).collect()
    }

    pub(crate) fn validate(&self) -> Result<(), crate::Error> {
        kplug_proto::rules::validate_plugin_name(&self.name).map_err(crate::Error::InvalidName)
    }
}

//! How a plugin describes itself: its offers, and the hooks, call policies
//! and mutations it declares.

use kplug_proto::v1::{self, GroupKind, GroupVersionKind};

use crate::hooks::{CallPolicy, Hook};
use crate::plugin::{Plugin, implements_hook, implements_mutate};

/// One implementation the plugin offers for one base kind.
#[derive(Clone, Debug)]
pub struct Offer {
    base: GroupKind,
    implementation: String,
    extensions: Vec<GroupKind>,
    pub(crate) children: Vec<GroupVersionKind>,
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

//! What [`run`](super::run) is given, and its checks.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::Reporter;

use crate::admission::WebhookConfig;
use crate::children::{ChildKinds, Mutators};
use crate::extensions::AllowList;
use crate::initial_list::InitialList;
use crate::leader::LeaderElection;
use crate::reconcile::Settings;
use crate::registry::RegistryConfig;

/// Everything [`run`](super::run) needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The managed kinds, each `<group>/<version>/<Kind>`: one controller
    /// each, with one registry and one set of plugin connections.
    pub resources: Vec<String>,
    /// Only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// Registry settings (socket dir, TTL, deadlines, bounds).
    pub registry: RegistryConfig,
    /// Controller settings (selection, fields, finalizer, resync).
    pub settings: Settings,
    /// Where to serve `/metrics`, `/healthz`, `/readyz` (none when `None`).
    pub metrics_addr: Option<SocketAddr>,
    /// Who reports Events (`controller`, and `instance`: the Pod's name).
    pub reporter: Reporter,
    /// The operator's own Pod, where registry Events (plugin registered,
    /// gone, refused) are recorded; only logged when `None`.
    pub operator_pod: Option<ObjectReference>,
    /// Objects reconciled at once (the controller's workers).
    pub concurrency: u16,
    /// Reconciles one plugin may have in progress; fewer than
    /// `concurrency`, so that a plugin that hangs cannot take every worker.
    pub max_reconciles_per_plugin: u16,
    /// Reconcile only while holding this Lease (none: always).
    pub leader_election: Option<LeaderElection>,
    /// The extension kinds objects may reference (none by default).
    pub extension_kinds: AllowList,
    /// The kinds of children plugins may have applied (none by default).
    pub child_kinds: ChildKinds,
    /// Which plugins patch which child kinds, in order (none by default).
    pub mutators: Mutators,
    /// Serve the admission webhooks (none: off).
    pub webhook: Option<WebhookConfig>,
    /// How the watches fill their caches (crate::initial_list).
    pub initial_list: InitialList,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            resources: Vec::new(),
            namespace: None,
            registry: RegistryConfig::default(),
            settings: Settings::default(),
            metrics_addr: None,
            reporter: Reporter::from("kplug-operator"),
            operator_pod: None,
            concurrency: 8,
            max_reconciles_per_plugin: 6,
            leader_election: None,
            extension_kinds: AllowList::default(),
            child_kinds: ChildKinds::default(),
            mutators: Mutators::default(),
            webhook: None,
            initial_list: InitialList::Auto,
        }
    }
}

impl Config {
    /// The settings that contradict each other, before anything starts.
    pub(super) fn validate(&self) -> Result<(), crate::Error> {
        self.registry.validate()?;
        if self.concurrency > 1 && self.max_reconciles_per_plugin >= self.concurrency {
            return Err(crate::Error::Config(format!(
                "--max-reconciles-per-plugin {} must be below --workers {}: a plugin that hangs would take every worker",
                self.max_reconciles_per_plugin, self.concurrency
            )));
        }
        if let Some(election) = &self.leader_election
            && election.grace >= election.duration
        {
            return Err(crate::Error::Config(format!(
                "--lease-duration {:?} is too short: the leader renews {:?} before expiry; use at least 2s",
                election.duration, election.grace
            )));
        }
        if let Some(webhook) = &self.webhook {
            webhook.validate(self.registry.admission_call_timeout)?;
        }
        Ok(())
    }
}

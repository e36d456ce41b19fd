//! One registered plugin instance, and calls to it.
//!
//! Every call has a deadline, takes a permit from the instance's in-flight
//! bound (so one slow plugin cannot pile up unbounded work), and is timed
//! into `kplug_plugin_call_duration_seconds`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kplug_proto::v1::{Capability, GroupKind, Hook, HookBehaviour, HookPhase, Mutation, Offer};
use tokio::sync::{Notify, Semaphore};
use tonic::transport::Channel;

mod call_error;
mod calls;
mod policy;

pub use call_error::CallError;
pub use policy::CallPolicies;
pub(crate) use policy::Defaults;

use crate::metrics::PluginMetrics;
use crate::selection::Candidate;

/// A plugin process that registered by heartbeat and passed the handshake.
#[derive(Debug)]
pub struct PluginInstance {
    /// Plugin name (stable across restarts).
    pub(crate) name: String,
    /// Plugin version.
    pub(crate) version: String,
    /// Process instance id (new on every start).
    pub(crate) instance_id: String,
    /// One line describing the plugin.
    pub(crate) description: String,
    /// The (confined, canonical) socket path.
    pub(crate) socket: PathBuf,
    /// What the plugin serves.
    pub(crate) offers: Vec<Offer>,
    /// Optional calls it implements.
    pub(crate) capabilities: Vec<Capability>,
    /// The hooks it declared, as declared (see [`Self::hooks`]).
    pub(crate) hooks: Vec<Hook>,
    /// The kinds it patches (`CAPABILITY_MUTATE`).
    pub(crate) mutations: Vec<Mutation>,
    /// Its deadlines and admission failure policies.
    pub(crate) policies: CallPolicies,
    pub(crate) ready: AtomicBool,
    pub(crate) last_seen: Mutex<Instant>,
    pub(crate) channel: Channel,
    pub(crate) in_flight: Arc<Semaphore>,
    pub(crate) max_in_flight: u32,
    pub(crate) closed: Arc<Notify>,
    pub(crate) probe_timeout: Duration,
    pub(crate) max_response_bytes: usize,
    /// The UID that registered it; its socket must be served by it.
    pub(crate) uid: u32,
    pub(crate) metrics: PluginMetrics,
}

impl PluginInstance {
    /// The plugin's name (stable across restarts).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version it reported in `GetInfo`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// This process's instance id (new on every start of the plugin).
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// The one-line description it reported in `GetInfo`.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Its socket: confined to the socket dir, canonical.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// What it serves: a base kind, an implementation, extension kinds.
    pub fn offers(&self) -> &[Offer] {
        &self.offers
    }

    /// The optional calls it implements (Finalize, ...).
    pub fn capabilities(&self) -> &[Capability] {
        &self.capabilities
    }

    /// The hooks the operator calls: those declared with a phase and a
    /// behaviour it knows, by a plugin advertising `CAPABILITY_HOOKS`.
    /// Others (a newer plugin's) are registered and never called.
    pub fn hooks(&self) -> impl Iterator<Item = &Hook> {
        let callable = self.has(Capability::Hooks);
        self.hooks.iter().filter(move |h| {
            callable
                && HookPhase::try_from(h.phase).is_ok_and(|p| p != HookPhase::Unspecified)
                && HookBehaviour::try_from(h.behaviour)
                    .is_ok_and(|b| b != HookBehaviour::Unspecified)
        })
    }

    /// Its deadlines and admission failure policies.
    pub fn policies(&self) -> &CallPolicies {
        &self.policies
    }

    /// Whether work may be routed to it (its last Probe said ready).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Whether it advertised `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    /// The offer for `implementation` of `base`, if it makes one.
    pub fn offer(&self, base: &GroupKind, implementation: &str) -> Option<&Offer> {
        self.offers.iter().find(|o| {
            o.base.as_ref().is_some_and(|b| same_kind(b, base))
                && o.implementation.eq_ignore_ascii_case(implementation)
        })
    }

    /// The implementations it offers for `base`, as selection candidates.
    pub(crate) fn candidates<'a>(
        &'a self,
        base: &'a GroupKind,
    ) -> impl Iterator<Item = Candidate> + 'a {
        self.offers
            .iter()
            .filter(move |o| o.base.as_ref().is_some_and(|b| same_kind(b, base)))
            .map(|o| Candidate {
                implementation: o.implementation.clone(),
                plugin: self.name.clone(),
            })
    }

    /// `name version`, for conditions, Events and logs. The instance id is
    /// left out on purpose: objects and Events are readable by every plugin
    /// they are sent to, and an instance id is what Unregister names.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }

    pub(crate) fn touch(&self) {
        *self.last_seen.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    pub(crate) fn silent_for(&self) -> Duration {
        self.last_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }
}

#[cfg(test)]
mod fake;

/// Kinds compare by group and kind, ignoring ASCII case in the group.
pub(crate) fn same_kind(a: &GroupKind, b: &GroupKind) -> bool {
    a.kind == b.kind && a.group.eq_ignore_ascii_case(&b.group)
}

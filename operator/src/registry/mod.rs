//! The plugin registry (see [`Registry`]): its settings (`config`), the
//! `Registry` gRPC service a plugin heartbeats to (`heartbeat`), the
//! handshake that lists a new instance (`handshake`), serving
//! `registry.sock` (`serve`) and removing instances that went away (`gc`).

mod config;
mod gc;
mod handshake;
mod heartbeat;
mod serve;
mod unregistered;

pub use config::RegistryConfig;

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kplug_proto::v1::GroupKind;
use kube::runtime::events::{EventType, Reporter};
use tokio::sync::watch;

use crate::backoff::Backoff;
use crate::events::Events;
use crate::metrics::PluginMetrics;
use crate::ownership::{NameOwners, Ownership};
use crate::plugin::{CallError, PluginInstance};
use crate::selection::Candidate;
use crate::throttle::Throttle;
use unregistered::Unregistered;

/// The plugin registry: the table of registered plugin instances, the
/// `registry.sock` they heartbeat to, and their garbage collection.
///
/// Cheap to clone; clones share the table. Build one with [`Registry::new`],
/// give it to [`crate::Delegate::builder`], and run [`Registry::serve`] (or
/// [`Registry::bind`] early, then [`Registry::serve_on`]) until shutdown.
///
/// # Expected flow
/// 1. A plugin binds `plugins/<name>/plugin.sock`, serves `kplug.v1.Plugin`
///    and calls `Registry.Heartbeat` on `registry.sock` every interval.
/// 2. On the first heartbeat of an instance the registry checks the request
///    (name, protocol, socket confined to the socket dir, and the
///    ownership rules of [`RegistryConfig`]), dials the socket, calls
///    `GetInfo` and `Probe`, and only then lists the instance. A new instance
///    of a known name replaces the old one atomically.
/// 3. Work is routed only to instances whose last `Probe` said ready; a
///    not-ready instance is probed again on each heartbeat.
/// 4. An instance is removed when: its heartbeats stop for the TTL (a frozen
///    process), its connection drops and a dial to its socket is refused (a
///    dead process: noticed within milliseconds), or it calls `Unregister`
///    (it stops getting new calls at once, and the answer waits until its
///    calls in flight are done).
///
/// # Guarantees
/// - Every change (registered, ready, replaced, removed) bumps the counter
///   of [`Registry::changes`]; a [`crate::Delegate`]'s wake-ups use it so that
///   waiting resources are reconciled as soon as a plugin arrives, not at the
///   next resync.
/// - Calls in flight keep the instance they started on; transport failures
///   are retried on whatever instance is current.
/// - A refused heartbeat is answered with the reason (and, with
///   [`Registry::record_events`], a `PluginRefused` Event on the operator's
///   Pod), throttled per name and reason.
///
/// # Caveats
/// - Registrations live in memory: after an operator restart, plugins
///   register again with their next heartbeat (within one interval). For one
///   heartbeat TTL after serving starts, a resource whose plugin is not back
///   yet waits instead of failing.
/// - Everything in the socket dir's pod can reach `registry.sock`; connections,
///   streams and message sizes are bounded, and socket ownership is checked
///   with the caller's UID (`SO_PEERCRED`).
///
/// # Errors
/// [`Registry::serve`] fails with [`crate::Error::Bind`] when `registry.sock`
/// is served by another live process or the socket dir is not writable, and
/// with [`crate::Error::Serve`] when serving fails.
#[derive(Clone, Debug)]
pub struct Registry {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: RegistryConfig,
    plugins: RwLock<HashMap<String, Arc<PluginInstance>>>,
    changes: watch::Sender<u64>,
    metrics: PluginMetrics,
    events: OnceLock<Events>,
    // Serialises handshakes per name, so two heartbeats of one new instance
    // do not both dial it, while a plugin whose handshake hangs delays no
    // other plugin (the lock is per name, never global).
    handshakes: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    backoff: Backoff,
    started: Mutex<Option<Instant>>,
    ownership: Ownership,
    names: NameOwners,
    // Which refusals are worth an Event and a warning (crate::throttle).
    refusal_notices: Throttle,
    // Every (base kind, implementation) offered since start, so that a
    // preference nobody ever offered (a typo) can be told from one whose
    // plugin is only away.
    offered: Mutex<BTreeSet<(String, String, String)>>,
    // Instance ids that unregistered: their late heartbeats are refused.
    unregistered: Unregistered,
}

impl Registry {
    /// A registry with `config`, registering its metrics (`kplug_plugin_*`,
    /// `kplug_heartbeats_total`, `kplug_registrations_refused_total`) in
    /// `metrics`. It serves nothing until [`Self::serve`].
    pub fn new(
        config: RegistryConfig,
        metrics: &mut prometheus_client::registry::Registry,
    ) -> Self {
        let metrics = PluginMetrics::register(metrics, config.call_timeout);
        let (changes, _) = watch::channel(0);
        let ownership = Ownership::new(config.implementation_owners.clone(), config.heartbeat_ttl);
        let names = NameOwners::new(config.plugin_uids.clone(), config.heartbeat_ttl);
        let config_ttl = config.heartbeat_ttl;
        Self {
            shared: Arc::new(Shared {
                config,
                plugins: RwLock::default(),
                changes,
                metrics,
                events: OnceLock::new(),
                handshakes: Mutex::default(),
                backoff: Backoff::new(Duration::from_millis(100), Duration::from_secs(2)),
                started: Mutex::new(None),
                ownership,
                names,
                refusal_notices: Throttle::new(REFUSAL_NOTICE_PERIOD, REFUSAL_NOTICES_PER_PERIOD),
                offered: Mutex::default(),
                unregistered: Unregistered::new(config_ttl),
            }),
        }
    }

    /// Records the registry's Events (plugin registered, replaced, gone,
    /// refused) on `operator_pod`, reported as `reporter`. Without it (or
    /// without a Pod), they are only logged. The first call wins.
    pub fn record_events(
        self,
        client: kube::Client,
        reporter: Reporter,
        operator_pod: Option<ObjectReference>,
    ) -> Self {
        let _ = self
            .shared
            .events
            .set(Events::new(client, reporter, operator_pod));
        self
    }

    /// The settings.
    pub fn config(&self) -> &RegistryConfig {
        &self.shared.config
    }

    /// Path of the registry socket.
    pub fn socket_path(&self) -> PathBuf {
        self.shared
            .config
            .socket_dir
            .join(kplug_proto::REGISTRY_SOCKET)
    }

    /// A counter bumped on every change of the ready set.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// The current ready instance of `plugin`.
    pub fn get(&self, plugin: &str) -> Option<Arc<PluginInstance>> {
        self.read().get(plugin).filter(|p| p.is_ready()).cloned()
    }

    /// Every registered instance, ready or not, by name.
    pub(crate) fn instances(&self) -> Vec<Arc<PluginInstance>> {
        let mut all: Vec<_> = self.read().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Every ready instance, by name.
    pub fn ready(&self) -> Vec<Arc<PluginInstance>> {
        let mut ready = self.instances();
        ready.retain(|p| p.is_ready());
        ready
    }

    /// Implementations offered for `base` by ready plugins.
    pub(crate) fn candidates(&self, base: &GroupKind) -> Vec<Candidate> {
        self.ready()
            .iter()
            .flat_map(|p| p.candidates(base))
            .collect()
    }

    /// The implementations offered for `base` by any plugin registered
    /// since the registry started, ready now or not, in the plugins'
    /// spelling, sorted.
    pub(crate) fn ever_offered(&self, base: &GroupKind) -> Vec<String> {
        let offered = self
            .shared
            .offered
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        offered
            .iter()
            .filter(|(group, kind, _)| {
                *kind == base.kind && group.eq_ignore_ascii_case(&base.group)
            })
            .map(|(_, _, implementation)| implementation.clone())
            .collect()
    }

    /// Runs `f` on the current instance of `plugin`, retrying transport
    /// failures with exponential backoff (on a newer instance if the plugin
    /// was replaced meanwhile). Timeouts and plugin errors are not retried
    /// here: they go back to the resource as conditions.
    pub(crate) async fn call<T, F, Fut>(&self, plugin: &str, f: F) -> Result<T, CallError>
    where
        F: Fn(Arc<PluginInstance>) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        let attempts = self.shared.config.call_attempts.max(1);
        let mut attempt = 0;
        loop {
            let result = match self.get(plugin) {
                Some(instance) => f(instance).await,
                None => Err(CallError::Gone {
                    plugin: plugin.to_owned(),
                }),
            };
            match result {
                Err(e) if e.is_retryable() && attempt + 1 < attempts => {
                    tracing::debug!(plugin, attempt, error = %e, "retrying plugin call");
                    tokio::time::sleep(self.shared.backoff.delay(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// How much is left of the start-up grace: for one heartbeat TTL after
    /// the registry starts serving, live plugins may still be on their way
    /// (a sidecar retries with a backoff capped at its heartbeat interval,
    /// at most half the TTL). `None` once it is over. Before serving, the
    /// whole TTL is left.
    pub(crate) fn start_up_grace_left(&self) -> Option<Duration> {
        let ttl = self.shared.config.heartbeat_ttl;
        let started = *self
            .shared
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match started {
            None => Some(ttl),
            Some(started) => ttl.checked_sub(started.elapsed()).filter(|d| !d.is_zero()),
        }
    }

    /// Whether the registry socket is being served.
    pub(crate) fn is_serving(&self) -> bool {
        self.shared
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The registered instance `instance_id` of `name`, ready or not.
    fn current(&self, name: &str, instance_id: &str) -> Option<Arc<PluginInstance>> {
        self.read()
            .get(name)
            .filter(|p| p.instance_id == instance_id)
            .cloned()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<PluginInstance>>> {
        self.shared
            .plugins
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<PluginInstance>>> {
        self.shared
            .plugins
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        let ready = self.read().values().filter(|p| p.is_ready()).count();
        self.shared.metrics.set_plugins_registered(ready);
        self.shared.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    async fn note(&self, severity: EventType, reason: &str, message: String) {
        match severity {
            EventType::Normal => tracing::info!(reason, "{message}"),
            EventType::Warning => tracing::warn!(reason, "{message}"),
        }
        if let Some(events) = self.shared.events.get() {
            events.publish_operator(severity, reason, message).await;
        }
    }

    /// Removes `name` if `instance_id` is still its current instance.
    async fn remove(&self, name: &str, instance_id: &str, why: &str, severity: EventType) -> bool {
        let removed = {
            let mut plugins = self.write();
            match plugins.get(name) {
                Some(p) if p.instance_id == instance_id => plugins.remove(name),
                _ => None,
            }
        };
        let Some(instance) = removed else {
            return false;
        };
        self.shared.metrics.set_plugin_up(name, false);
        self.shared.ownership.release(name);
        self.shared.names.release(name);
        self.changed();
        // `plugin_up 0` stays for the TTL, for alerts; then the name's
        // series go, unless it came back.
        let registry = self.clone();
        let name_gone = name.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(registry.shared.config.heartbeat_ttl).await;
            if !registry.read().contains_key(&name_gone) {
                registry.shared.metrics.forget_plugin(&name_gone);
            }
        });
        let reason = if severity == EventType::Warning {
            "PluginGone"
        } else {
            "PluginUnregistered"
        };
        self.note(
            severity,
            reason,
            format!("plugin {} removed: {why}", instance.label()),
        )
        .await;
        true
    }
}

/// A refused heartbeat is noted (a warning and a `PluginRefused` Event) at
/// most once per plugin name and reason per period, and at most this many
/// times per period in all.
const REFUSAL_NOTICE_PERIOD: Duration = Duration::from_secs(60);
const REFUSAL_NOTICES_PER_PERIOD: usize = 20;

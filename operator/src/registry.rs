//! The plugin registry: who is registered, how they got there, and when they
//! are removed.
//!
//! # Expected flow
//! 1. A plugin binds `plugins/<name>/plugin.sock`, serves `kplug.v1.Plugin` and calls
//!    `Registry.Heartbeat` on `registry.sock` every interval.
//! 2. On the first heartbeat of an instance the registry checks the request
//!    (name, protocol, socket confined to the socket dir), dials the socket,
//!    calls `GetInfo` and `Probe`, and only then lists the instance. A new
//!    instance of a known name replaces the old one atomically.
//! 3. Work is routed only to instances whose last `Probe` said ready; a
//!    not-ready instance is probed again on each heartbeat.
//! 4. An instance is removed when: its heartbeats stop for the TTL (a
//!    frozen process), its connection drops and a dial to its socket is
//!    refused (a dead process: noticed within milliseconds), or it calls
//!    `Unregister` (it stops getting new calls at once, and the answer waits
//!    until its calls in flight are done).
//!
//! # Guarantees
//! - Every change (registered, ready, replaced, removed) bumps the counter
//!   returned by [`Registry::changes`], so waiting resources are reconciled
//!   as soon as a plugin arrives, not at the next resync
//!   ([`crate::waiting`] decides which).
//! - Calls in flight keep the instance they started on; [`Registry::call`]
//!   retries transport failures on whatever instance is current.
//!
//! # Caveats
//! - Registrations live in memory: after an operator restart, plugins
//!   re-register with their next heartbeat (within one interval).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kplug_proto::limits;
use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::registry_server::{Registry as RegistryApi, RegistryServer};
use kplug_proto::v1::{
    GetInfoRequest, GroupKind, HeartbeatRequest, HeartbeatResponse, UnregisterRequest,
    UnregisterResponse,
};
use kube::runtime::events::{EventType, Reporter};
use tokio::sync::{Notify, Semaphore, watch};
use tonic::{Request, Response, Status};

use crate::backoff::Backoff;
use crate::confinement::confine;
use crate::connection::{Liveness, dial, liveness};
use crate::events::Events;
use crate::metrics::PluginMetrics;
use crate::ownership::{NameOwners, Ownership};
use crate::plugin::{CallError, PluginInstance};
use crate::refusal::{Refusal, check_heartbeat, check_sizes};
use crate::selection::Candidate;
use crate::throttle::Throttle;

/// Registry settings.
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// The shared socket dir; `registry.sock` is created in it.
    pub socket_dir: PathBuf,
    /// A plugin not heard from for this long is removed.
    pub heartbeat_ttl: Duration,
    /// How often plugins are asked to heartbeat.
    pub heartbeat_interval: Duration,
    /// Deadline of `Reconcile` and `Finalize` calls.
    pub call_timeout: Duration,
    /// Deadline of the handshake calls (`GetInfo`, `Probe`).
    pub handshake_timeout: Duration,
    /// Calls in flight per plugin instance.
    pub max_in_flight: u32,
    /// Attempts of a call that fails in transport (including the first).
    pub call_attempts: u32,
    /// Largest `Reconcile`/`Finalize` response decoded; larger ones are
    /// refused before decoding.
    pub max_response_bytes: usize,
    /// Plugin names registered at once; more are refused.
    pub max_plugins: usize,
    /// Connections open on `registry.sock` at once; more are closed.
    pub max_connections: usize,
    /// Implementation names and the plugin that owns each
    /// (`--implementation-owner`); others are first come, first served.
    pub implementation_owners: Vec<(String, String)>,
    /// Plugin names and the UID that may register each (`--plugin-uid`);
    /// others belong to the first UID that registers them.
    pub plugin_uids: Vec<(String, u32)>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            socket_dir: PathBuf::from(kplug_proto::DEFAULT_SOCKET_DIR),
            heartbeat_ttl: Duration::from_secs(15),
            heartbeat_interval: Duration::from_secs(5),
            call_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(2),
            max_in_flight: 16,
            call_attempts: 4,
            max_response_bytes: kplug_proto::limits::DEFAULT_MAX_RESPONSE_BYTES,
            max_plugins: 64,
            max_connections: 256,
            implementation_owners: Vec::new(),
            plugin_uids: Vec::new(),
        }
    }
}

impl RegistryConfig {
    /// The defaults, with the socket dir from `KPLUG_SOCKET_DIR` when it is
    /// set (as the plugins read it), else `/var/run/kplug`.
    pub fn from_env() -> Self {
        Self {
            socket_dir: std::env::var_os(kplug_proto::SOCKET_DIR_ENV)
                .filter(|dir| !dir.is_empty())
                .map_or_else(
                    || PathBuf::from(kplug_proto::DEFAULT_SOCKET_DIR),
                    PathBuf::from,
                ),
            ..Self::default()
        }
    }

    /// Checks settings that cannot work together.
    ///
    /// # Errors
    /// [`crate::Error::Config`] naming the flags and what to change.
    pub fn validate(&self) -> Result<(), crate::Error> {
        if self.heartbeat_ttl < 2 * self.heartbeat_interval {
            return Err(crate::Error::Config(format!(
                "--heartbeat-ttl {:?} is shorter than twice --heartbeat-interval {:?}: every plugin would be removed between two heartbeats. Raise the TTL or shorten the interval",
                self.heartbeat_ttl, self.heartbeat_interval
            )));
        }
        Ok(())
    }
}

/// The registry. Cheap to clone; clones share the table.
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
}

impl Registry {
    /// A registry with `config`, registering its metrics (`kplug_plugin_*`,
    /// `kplug_heartbeats_total`, `kplug_registrations_refused_total`) in
    /// `metrics`. It serves nothing until [`Self::serve`].
    pub fn new(
        config: RegistryConfig,
        metrics: &mut prometheus_client::registry::Registry,
    ) -> Self {
        let metrics = PluginMetrics::register(metrics);
        let (changes, _) = watch::channel(0);
        let ownership = Ownership::new(config.implementation_owners.clone(), config.heartbeat_ttl);
        let names = NameOwners::new(config.plugin_uids.clone(), config.heartbeat_ttl);
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

    /// Every ready instance, by name.
    pub fn ready(&self) -> Vec<Arc<PluginInstance>> {
        let mut ready: Vec<_> = self
            .read()
            .values()
            .filter(|p| p.is_ready())
            .cloned()
            .collect();
        ready.sort_by(|a, b| a.name.cmp(&b.name));
        ready
    }

    /// Implementations offered for `base` by ready plugins.
    pub fn candidates(&self, base: &GroupKind) -> Vec<Candidate> {
        self.ready()
            .iter()
            .flat_map(|p| p.candidates(base))
            .collect()
    }

    /// The implementations offered for `base` by any plugin registered
    /// since the registry started, ready now or not, in the plugins'
    /// spelling, sorted.
    pub fn ever_offered(&self, base: &GroupKind) -> Vec<String> {
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
    pub async fn call<T, F, Fut>(&self, plugin: &str, f: F) -> Result<T, CallError>
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

    /// The gRPC service, to serve on a socket of your choice.
    pub fn service(&self) -> RegistryServer<Self> {
        RegistryServer::new(self.clone())
    }

    /// Binds `registry.sock` (replacing a stale one), serves the Registry
    /// service and runs garbage collection until `shutdown` resolves.
    ///
    /// # Errors
    /// [`crate::Error::Bind`] when the socket cannot be bound (a live
    /// registry serves it, or the directory is not writable), and
    /// [`crate::Error::Serve`] when serving fails.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), crate::Error> {
        let listener = self.bind().await?;
        self.serve_on(listener, shutdown).await
    }

    /// Binds `registry.sock`, replacing a stale one. Binding before anything
    /// else starts makes a taken socket a start-up error, not a log line.
    ///
    /// # Errors
    /// [`crate::Error::Bind`] with the path and what to do.
    pub async fn bind(&self) -> Result<tokio::net::UnixListener, crate::Error> {
        Ok(kplug_proto::socket::bind(&self.socket_path()).await?)
    }

    /// [`Self::serve`] on a socket from [`Self::bind`].
    ///
    /// # Errors
    /// [`crate::Error::Serve`] when serving fails.
    pub async fn serve_on(
        self,
        listener: tokio::net::UnixListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), crate::Error> {
        let path = self.socket_path();
        *self
            .shared
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        tracing::info!(socket = %path.display(), "registry listening");
        let gc = tokio::spawn(self.clone().collect_garbage());
        let config = &self.shared.config;
        // Every container in the pod can reach this socket: bound what one
        // connection, one message and one request may hold. A heartbeat may
        // include a handshake (three short calls); Unregister waits for the
        // plugin's calls in flight (at most the call timeout).
        let request_timeout = config.call_timeout + 4 * config.handshake_timeout;
        let service = self
            .service()
            .max_decoding_message_size(limits::MAX_REGISTRY_MESSAGE_BYTES);
        let result = tonic::transport::Server::builder()
            .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
            .timeout(request_timeout)
            .http2_keepalive_interval(Some(Duration::from_secs(10)))
            .http2_keepalive_timeout(Some(Duration::from_secs(5)))
            .max_connection_age(MAX_CONNECTION_AGE)
            .add_service(service)
            .serve_with_incoming_shutdown(
                crate::listener::incoming(
                    listener,
                    config.max_connections,
                    config.handshake_timeout.max(FIRST_BYTE_TIMEOUT),
                ),
                shutdown,
            )
            .await;
        gc.abort();
        let _ = std::fs::remove_file(&path);
        result.map_err(crate::Error::Serve)
    }

    /// How much is left of the start-up grace: for one heartbeat TTL after
    /// the registry starts serving, live plugins may still be on their way
    /// (a sidecar retries with a backoff capped at its heartbeat interval,
    /// at most half the TTL). `None` once it is over. Before serving, the
    /// whole TTL is left.
    pub fn start_up_grace_left(&self) -> Option<Duration> {
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
    pub fn is_serving(&self) -> bool {
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

    async fn collect_garbage(self) {
        let ttl = self.shared.config.heartbeat_ttl;
        let tick = (ttl / 5).clamp(Duration::from_millis(100), Duration::from_secs(1));
        let mut interval = tokio::time::interval(tick);
        loop {
            interval.tick().await;
            let expired: Vec<_> = self
                .read()
                .values()
                .filter(|p| p.silent_for() > ttl)
                .map(|p| (p.name.clone(), p.instance_id.clone(), p.silent_for()))
                .collect();
            for (name, instance_id, silent) in expired {
                let why = format!(
                    "no heartbeat for {:.1}s (TTL {ttl:?})",
                    silent.as_secs_f64()
                );
                self.remove(&name, &instance_id, &why, EventType::Warning)
                    .await;
            }
            // Handshake locks of names nobody is handshaking as: a client
            // sending many names must not grow this table for ever.
            self.shared
                .handshakes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, lock| Arc::strong_count(lock) > 1);
        }
    }

    /// Waits for the connection-closed signal of `instance` and removes it
    /// when its socket refuses a dial; a live socket means the connection
    /// dropped for another reason and the channel will reconnect.
    fn watch_liveness(&self, instance: &Arc<PluginInstance>) {
        let registry = self.clone();
        let instance = Arc::downgrade(instance);
        tokio::spawn(async move {
            loop {
                let Some(current) = instance.upgrade() else {
                    return;
                };
                let closed = current.closed.clone();
                let (socket, uid) = (current.socket.clone(), current.uid);
                let (name, id) = (current.name.clone(), current.instance_id.clone());
                drop(current);
                let gone = |why: String| format!("its connection dropped and {why}");
                closed.notified().await;
                if registry.current(&name, &id).is_none() {
                    return;
                }
                if let Liveness::Gone(why) = liveness(&socket, uid).await {
                    registry
                        .remove(&name, &id, &gone(why), EventType::Warning)
                        .await;
                    return;
                }
                // A dial can still succeed while a killed process is being
                // torn down (its listening socket may close after the
                // connection did), and the channel only reconnects on the
                // next call. So call: a Probe either re-arms this watch on a
                // fresh connection or shows the plugin is gone.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let Some(current) = instance.upgrade() else {
                    return;
                };
                let probed = current.probe().await;
                drop(current);
                if probed.is_err()
                    && let Liveness::Gone(why) = liveness(&socket, uid).await
                {
                    registry
                        .remove(&name, &id, &gone(why), EventType::Warning)
                        .await;
                    return;
                }
            }
        });
    }

    async fn handle_heartbeat(
        &self,
        req: HeartbeatRequest,
        uid: Option<u32>,
    ) -> Result<String, Refusal> {
        check_heartbeat(&req)?;
        // A plugin acts only as itself: its name belongs to one UID, and
        // an instance is renewed only by the UID that registered it.
        let Some(uid) = uid else {
            return Err(Refusal::NoCredentials(req.name));
        };
        self.shared.names.check(&req.name, uid)?;
        let known = self.current(&req.name, &req.instance_id);
        if let Some(known) = known {
            known.touch();
            if !known.is_ready() {
                self.update_readiness(&known).await;
            }
            return Ok(String::new());
        }

        let name_lock = Arc::clone(
            self.shared
                .handshakes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(req.name.clone())
                .or_default(),
        );
        let _one_at_a_time = name_lock.lock().await;
        // Another heartbeat of the same instance may have finished the
        // handshake while we waited.
        if let Some(known) = self.current(&req.name, &req.instance_id) {
            known.touch();
            return Ok(String::new());
        }
        let registered = self.read().len();
        if registered >= self.shared.config.max_plugins && self.read().get(&req.name).is_none() {
            return Err(Refusal::TooMany {
                name: req.name,
                registered,
            });
        }
        let instance = Arc::new(self.handshake(&req, uid).await?);
        self.shared.names.claim(&req.name, uid)?;
        let replaced = {
            let mut plugins = self.write();
            // Handshakes of other names run at the same time: they may have
            // filled the room since the check above (measured: 65
            // registered of 64). The check that counts is this one, made
            // with the insert.
            if plugins.len() >= self.shared.config.max_plugins && !plugins.contains_key(&req.name) {
                let registered = plugins.len();
                drop(plugins);
                self.shared.ownership.release(&req.name);
                self.shared.names.release(&req.name);
                return Err(Refusal::TooMany {
                    name: req.name,
                    registered,
                });
            }
            plugins.insert(req.name.clone(), instance.clone())
        };
        {
            let mut offered = self
                .shared
                .offered
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for offer in &instance.offers {
                if let Some(base) = &offer.base {
                    offered.insert((
                        base.group.clone(),
                        base.kind.clone(),
                        offer.implementation.clone(),
                    ));
                }
            }
        }
        self.watch_liveness(&instance);
        self.shared
            .metrics
            .set_plugin_up(&instance.name, instance.is_ready());
        self.changed();
        let offers = describe_offers(&instance);
        match replaced {
            Some(old) => {
                // In-flight calls on the old instance keep their channel and
                // finish; new calls go to the new one from now on.
                self.note(
                    EventType::Normal,
                    "PluginReplaced",
                    format!(
                        "plugin {} replaced its running instance (version {}); serves {offers}",
                        instance.label(),
                        old.version,
                    ),
                )
                .await;
                tracing::info!(plugin = %instance.name, old = %old.instance_id, new = %instance.instance_id, "instance replaced");
            }
            None => {
                self.note(
                    EventType::Normal,
                    "PluginRegistered",
                    format!("plugin {} registered; serves {offers}", instance.label()),
                )
                .await;
            }
        }
        Ok(if instance.is_ready() {
            String::new()
        } else {
            "registered, but Probe says not ready: no work is routed until it is".into()
        })
    }

    async fn handshake(&self, req: &HeartbeatRequest, uid: u32) -> Result<PluginInstance, Refusal> {
        let config = &self.shared.config;
        let socket =
            confine(&config.socket_dir, &req.socket).map_err(|source| Refusal::Socket {
                name: req.name.clone(),
                source,
            })?;
        let closed = Arc::new(Notify::new());
        let channel = dial(&socket, uid, config.handshake_timeout, closed.clone())
            .await
            .map_err(|e| Refusal::Dial {
                name: req.name.clone(),
                socket: socket.clone(),
                message: error_chain(&e),
            })?;
        let get_info = async {
            let mut request = Request::new(GetInfoRequest {});
            request.set_timeout(config.handshake_timeout);
            PluginClient::new(channel.clone())
                .max_decoding_message_size(limits::MAX_REGISTRY_MESSAGE_BYTES)
                .get_info(request)
                .await
        };
        let info = match tokio::time::timeout(config.handshake_timeout, get_info).await {
            Ok(Ok(info)) => info.into_inner(),
            Ok(Err(status)) => {
                return Err(Refusal::GetInfo {
                    name: req.name.clone(),
                    source: CallError::Status {
                        plugin: req.name.clone(),
                        call: "GetInfo",
                        code: status.code(),
                        message: status.message().to_owned(),
                    },
                });
            }
            Err(_) => {
                return Err(Refusal::GetInfo {
                    name: req.name.clone(),
                    source: CallError::Timeout {
                        plugin: req.name.clone(),
                        call: "GetInfo",
                        after: config.handshake_timeout,
                    },
                });
            }
        };
        if info.name != req.name || info.protocol != kplug_proto::PROTOCOL {
            return Err(Refusal::Mismatch {
                name: req.name.clone(),
                got: info.name,
                protocol: info.protocol,
                want: kplug_proto::PROTOCOL,
            });
        }
        check_sizes(&info.name, &info.version, &info.description, &info.offers)?;
        self.shared.ownership.claim(
            &info.name,
            info.offers.iter().map(|o| o.implementation.as_str()),
        )?;
        let max_in_flight = config.max_in_flight.max(1);
        let instance = PluginInstance {
            name: info.name,
            version: info.version,
            instance_id: req.instance_id.clone(),
            description: info.description,
            socket,
            offers: info.offers,
            capabilities: info
                .capabilities
                .into_iter()
                .filter_map(|c| kplug_proto::v1::Capability::try_from(c).ok())
                .collect(),
            ready: false.into(),
            last_seen: Mutex::new(Instant::now()),
            channel,
            in_flight: Arc::new(Semaphore::new(max_in_flight as usize)),
            max_in_flight,
            closed,
            call_timeout: config.call_timeout,
            probe_timeout: config.handshake_timeout,
            max_response_bytes: config.max_response_bytes,
            uid,
            metrics: self.shared.metrics.clone(),
        };
        match instance.probe().await {
            Ok(probe) => {
                instance.ready.store(probe.ready, Ordering::Release);
                if !probe.ready {
                    tracing::info!(plugin = %instance.label(), message = probe.message, "plugin registered but not ready");
                }
            }
            Err(error) => {
                tracing::warn!(plugin = %instance.label(), %error, "Probe failed; not routing work yet")
            }
        }
        Ok(instance)
    }

    async fn update_readiness(&self, instance: &Arc<PluginInstance>) {
        let ready = instance.probe().await.is_ok_and(|p| p.ready);
        if ready && !instance.ready.swap(true, Ordering::AcqRel) {
            self.shared.metrics.set_plugin_up(&instance.name, true);
            self.changed();
            self.note(
                EventType::Normal,
                "PluginReady",
                format!("plugin {} is ready", instance.label()),
            )
            .await;
        }
    }

    async fn handle_unregister(&self, req: UnregisterRequest, uid: Option<u32>) -> bool {
        let Some(instance) = self.current(&req.name, &req.instance_id) else {
            return false;
        };
        if uid != Some(instance.uid) {
            tracing::warn!(plugin = %req.name, caller_uid = ?uid, "Unregister from another UID refused");
            self.shared.metrics.count_refusal("WrongUid");
            return false;
        }
        self.remove(
            &req.name,
            &req.instance_id,
            "it unregistered (shutting down)",
            EventType::Normal,
        )
        .await;
        // Drain: wait until every permit is back, i.e. no call is in flight,
        // then close the semaphore so late callers fail fast (and retry on a
        // newer instance) instead of reaching a process that is exiting.
        let drained = tokio::time::timeout(
            self.shared.config.call_timeout,
            instance.in_flight.acquire_many(instance.max_in_flight),
        )
        .await;
        if drained.is_err() {
            tracing::warn!(plugin = %instance.label(), "calls still in flight after the call timeout; letting it go anyway");
        }
        instance.in_flight.close();
        true
    }
}

#[tonic::async_trait]
impl RegistryApi for Registry {
    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let uid = peer_uid(&request);
        let req = request.into_inner();
        let name = req.name.clone();
        let result = self.handle_heartbeat(req, uid).await;
        self.shared.metrics.count_heartbeat(result.is_ok());
        let config = &self.shared.config;
        let (accepted, reason) = match result {
            Ok(note) => (true, note),
            Err(refusal) => {
                self.shared.metrics.count_refusal(refusal.reason());
                // Refusals are answered, not raised: the plugin logs the
                // reason and keeps trying (a fixed plugin or a newer operator
                // may accept it). The same refusal, or a flood of them, is
                // noted once per period; the metric counts every one.
                let message = refusal.to_string();
                let key = format!("{name}/{}", refusal.reason());
                if self
                    .shared
                    .refusal_notices
                    .admit(&key, std::time::Instant::now())
                {
                    self.note(
                        EventType::Warning,
                        "PluginRefused",
                        format!("heartbeat refused: {message}"),
                    )
                    .await;
                } else {
                    tracing::debug!(plugin = name, %message, "heartbeat refused (noted already)");
                }
                (false, message)
            }
        };
        Ok(Response::new(HeartbeatResponse {
            accepted,
            reason,
            ttl: prost_types::Duration::try_from(config.heartbeat_ttl).ok(),
            interval: prost_types::Duration::try_from(config.heartbeat_interval).ok(),
        }))
    }

    async fn unregister(
        &self,
        request: Request<UnregisterRequest>,
    ) -> Result<Response<UnregisterResponse>, Status> {
        let uid = peer_uid(&request);
        let removed = self.handle_unregister(request.into_inner(), uid).await;
        Ok(Response::new(UnregisterResponse { removed }))
    }
}

/// The caller's UID, from the registry connection's `SO_PEERCRED`.
fn peer_uid<T>(request: &Request<T>) -> Option<u32> {
    request
        .extensions()
        .get::<tonic::transport::server::UdsConnectInfo>()
        .and_then(|info| info.peer_cred)
        .map(|cred| cred.uid())
}

/// A refused heartbeat is noted (a warning and a `PluginRefused` Event) at
/// most once per plugin name and reason per period, and at most this many
/// times per period in all.
const REFUSAL_NOTICE_PERIOD: Duration = Duration::from_secs(60);
const REFUSAL_NOTICES_PER_PERIOD: usize = 20;

/// Streams one registry connection may have open at once (a plugin needs
/// one or two: heartbeat and Unregister).
const MAX_STREAMS_PER_CONNECTION: u32 = 8;

/// A connection whose client sends nothing for this long after connecting
/// is closed (see `crate::listener::incoming`); a gRPC client sends its
/// preface at once.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections are closed (gracefully) after this long, so one that is
/// idle or half-open gives its permit back; gRPC clients reconnect.
const MAX_CONNECTION_AGE: Duration = Duration::from_secs(300);

fn describe_offers(instance: &PluginInstance) -> String {
    let offers: Vec<_> = instance
        .offers
        .iter()
        .map(|o| {
            let base = o.base.clone().unwrap_or_default();
            format!("{}.{} as {}", base.kind, base.group, o.implementation)
        })
        .collect();
    if offers.is_empty() {
        "nothing".into()
    } else {
        offers.join(", ")
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

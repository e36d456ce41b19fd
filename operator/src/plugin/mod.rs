//! One registered plugin instance, and calls to it.
//!
//! Every call has a deadline, takes a permit from the instance's in-flight
//! bound (so one slow plugin cannot pile up unbounded work), and is timed
//! into `kplug_plugin_call_duration_seconds`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{
    Call, Capability, DefaultRequest, DefaultResponse, FinalizeRequest, FinalizeResponse,
    GroupKind, Hook, HookBehaviour, HookPhase, HookRequest, HookResponse, MutateRequest,
    MutateResponse, Mutation, Offer, ProbeRequest, ProbeResponse, ReconcileRequest,
    ReconcileResponse, ValidateRequest, ValidateResponse,
};
use tokio::sync::{Notify, Semaphore};
use tonic::transport::Channel;
use tracing::Instrument;

mod call_error;
mod policy;

pub use call_error::CallError;
pub use policy::CallPolicies;
pub(crate) use policy::Defaults;

use crate::metrics::{CallOutcome, PluginMetrics};
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

    /// Calls `Probe` (short deadline).
    pub async fn probe(&self) -> Result<ProbeResponse, CallError> {
        let timeout = self.probe_timeout;
        let probed = self
            .call(
                "Probe",
                timeout,
                |mut c, r| async move { c.probe(r).await },
                ProbeRequest {},
            )
            .await;
        if probed.is_ok() {
            self.count_answer("Probe", CallOutcome::Ok);
        }
        probed
    }

    /// Calls `Reconcile` with its deadline. An answer is counted in
    /// `kplug_plugin_calls_total` by whoever checks it (the reconcile: ok,
    /// retry, failed or invalid); a call without one is counted here.
    pub async fn reconcile(&self, req: ReconcileRequest) -> Result<ReconcileResponse, CallError> {
        let timeout = self.policies.deadline(Call::Reconcile);
        self.call(
            "Reconcile",
            timeout,
            |mut c, r| async move { c.reconcile(r).await },
            req,
        )
        .await
    }

    /// Calls `Finalize` with its deadline; counted like [`Self::reconcile`].
    pub async fn finalize(&self, req: FinalizeRequest) -> Result<FinalizeResponse, CallError> {
        let timeout = self.policies.deadline(Call::Finalize);
        self.call(
            "Finalize",
            timeout,
            |mut c, r| async move { c.finalize(r).await },
            req,
        )
        .await
    }

    /// Calls `Validate` with its deadline; counted like [`Self::reconcile`].
    pub async fn validate(&self, req: ValidateRequest) -> Result<ValidateResponse, CallError> {
        let timeout = self.policies.deadline(Call::Validate);
        self.call(
            "Validate",
            timeout,
            |mut c, r| async move { c.validate(r).await },
            req,
        )
        .await
    }

    /// Calls `Default` with its deadline; counted like [`Self::reconcile`].
    pub async fn default(&self, req: DefaultRequest) -> Result<DefaultResponse, CallError> {
        let timeout = self.policies.deadline(Call::Default);
        self.call(
            "Default",
            timeout,
            |mut c, r| async move { c.default(r).await },
            req,
        )
        .await
    }

    /// Calls `Hook` with its deadline; counted like [`Self::reconcile`].
    pub async fn hook(&self, req: HookRequest) -> Result<HookResponse, CallError> {
        let timeout = self.policies.deadline(Call::Hook);
        self.call(
            "Hook",
            timeout,
            |mut c, r| async move { c.hook(r).await },
            req,
        )
        .await
    }

    /// Calls `Mutate` with its deadline; counted like [`Self::reconcile`].
    pub async fn mutate(&self, req: MutateRequest) -> Result<MutateResponse, CallError> {
        let timeout = self.policies.deadline(Call::Mutate);
        self.call(
            "Mutate",
            timeout,
            |mut c, r| async move { c.mutate(r).await },
            req,
        )
        .await
    }

    /// Whether it patches objects of `group`/`kind` (it declared the kind
    /// and `CAPABILITY_MUTATE`).
    pub fn mutates(&self, group: &str, kind: &str) -> bool {
        self.has(Capability::Mutate)
            && self.mutations.iter().any(|m| {
                m.kind
                    .as_ref()
                    .is_some_and(|k| k.group == group && k.kind == kind)
            })
    }

    /// Counts an answer of the plugin to `call` by what it came to.
    pub(crate) fn count_answer(&self, call: &'static str, outcome: CallOutcome) {
        self.metrics.count_call(&self.name, call, outcome);
    }

    async fn call<Req, Resp, F, Fut>(
        &self,
        call: &'static str,
        deadline: Duration,
        f: F,
        req: Req,
    ) -> Result<Resp, CallError>
    where
        F: FnOnce(PluginClient<Channel>, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let started = Instant::now();
        let timeout = || CallError::Timeout {
            plugin: self.name.clone(),
            call,
            after: deadline,
        };
        // Waiting for a permit counts against the deadline: a caller should
        // not wait longer because the plugin is busy.
        let queued = self.metrics.queued(&self.name);
        let permit = tokio::time::timeout(deadline, self.in_flight.acquire()).await;
        drop(queued);
        let _permit = match permit {
            Ok(Ok(permit)) => permit,
            Ok(Err(_closed)) => {
                return Err(self.count_failure(
                    call,
                    CallError::Unavailable {
                        plugin: self.name.clone(),
                        call,
                        message: "the instance is draining after Unregister".into(),
                    },
                ));
            }
            Err(_) => return Err(self.count_failure(call, timeout())),
        };
        let _in_flight = self.metrics.in_flight(&self.name);
        let remaining = deadline.saturating_sub(started.elapsed());
        let mut request = tonic::Request::new(req);
        request.set_timeout(remaining);
        // The plugin continues the trace from this span (W3C traceparent).
        let span = tracing::info_span!("plugin call", plugin = %self.name, call);
        kplug_proto::telemetry::inject(&span, request.metadata_mut());
        // A larger answer is refused by the decoder before it is read, so a
        // plugin cannot make the operator hold it in memory.
        let client = PluginClient::new(self.channel.clone())
            .max_decoding_message_size(self.max_response_bytes);
        let result = tokio::time::timeout(remaining, f(client, request))
            .instrument(span)
            .await;
        let outcome = match result {
            Err(_) => Err(timeout()),
            Ok(Ok(resp)) => Ok(resp.into_inner()),
            // tonic enforces the grpc-timeout it sends, too, and reports it
            // as Cancelled; whichever timer fires first, it is a timeout.
            // Both timers end at `started + deadline` and never fire early,
            // so the elapsed time tells, whatever the code and message.
            Ok(Err(_)) if started.elapsed() >= deadline => Err(timeout()),
            Ok(Err(status)) => Err(self.classify(call, status, deadline)),
        };
        self.metrics
            .observe_call(&self.name, call, started.elapsed());
        outcome.map_err(|error| self.count_failure(call, error))
    }

    /// Counts a call that produced no answer, by why.
    fn count_failure(&self, call: &'static str, error: CallError) -> CallError {
        self.metrics.count_call(&self.name, call, error.metric());
        error
    }

    fn classify(&self, call: &'static str, status: tonic::Status, deadline: Duration) -> CallError {
        match status.code() {
            tonic::Code::DeadlineExceeded => CallError::Timeout {
                plugin: self.name.clone(),
                call,
                after: deadline,
            },
            // Transport failures (connection refused or reset, the process
            // went away mid-call) surface as Unavailable, or Unknown with a
            // transport message; both are worth a retry on a newer instance.
            tonic::Code::Unavailable | tonic::Code::Cancelled => CallError::Unavailable {
                plugin: self.name.clone(),
                call,
                message: status.message().to_owned(),
            },
            tonic::Code::Unknown if status.message().contains("transport") => {
                CallError::Unavailable {
                    plugin: self.name.clone(),
                    call,
                    message: status.message().to_owned(),
                }
            }
            // tonic's decoder refuses a message over the bound with this
            // code, before reading it.
            tonic::Code::OutOfRange => CallError::TooLarge {
                plugin: self.name.clone(),
                call,
                limit: self.max_response_bytes,
            },
            code => CallError::Status {
                plugin: self.name.clone(),
                call,
                code,
                message: status.message().to_owned(),
            },
        }
    }
}

#[cfg(test)]
impl PluginInstance {
    /// A ready instance that is never dialled: for unit tests of the
    /// reconcile, whose calls go through a fake backend.
    pub(crate) fn fake(
        name: &str,
        version: &str,
        offers: Vec<Offer>,
        capabilities: Vec<Capability>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            instance_id: format!("{name}-1"),
            description: String::new(),
            socket: PathBuf::from(format!("/nonexistent/{name}.sock")),
            offers,
            capabilities,
            hooks: Vec::new(),
            mutations: Vec::new(),
            policies: CallPolicies::resolve(
                &[],
                Defaults {
                    call: Duration::from_secs(1),
                    admission: Duration::from_secs(1),
                },
            ),
            ready: true.into(),
            last_seen: Mutex::new(Instant::now()),
            channel: tonic::transport::Endpoint::from_static("http://[::1]:1").connect_lazy(),
            in_flight: Arc::new(Semaphore::new(1)),
            max_in_flight: 1,
            closed: Arc::default(),
            probe_timeout: Duration::from_secs(1),
            max_response_bytes: 1024,
            uid: 0,
            metrics: PluginMetrics::register(
                &mut prometheus_client::registry::Registry::default(),
                Duration::from_secs(1),
            ),
        }
    }
}

/// Kinds compare by group and kind, ignoring ASCII case in the group.
pub(crate) fn same_kind(a: &GroupKind, b: &GroupKind) -> bool {
    a.kind == b.kind && a.group.eq_ignore_ascii_case(&b.group)
}

//! The calls to a plugin instance: each with its deadline, a permit of
//! the instance's in-flight bound, its span, and its metrics.

use std::future::Future;
use std::time::{Duration, Instant};

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{
    Call, Capability, DefaultRequest, DefaultResponse, FinalizeRequest, FinalizeResponse,
    HookRequest, HookResponse, MutateRequest, MutateResponse, ProbeRequest, ProbeResponse,
    ReconcileRequest, ReconcileResponse, ValidateRequest, ValidateResponse,
};
use tonic::transport::Channel;
use tracing::Instrument;

use super::{CallError, PluginInstance};
use crate::metrics::CallOutcome;

impl PluginInstance {
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

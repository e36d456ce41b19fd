//! The gRPC adapter: the `kplug.v1.Plugin` service that turns each call
//! into a call of the [`Plugin`] trait, on the call's own task, and every
//! failure of the plugin's (bad JSON, a handler's error, a panic) into the
//! answer the protocol gives it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures::FutureExt as _;
use kplug_proto::v1::plugin_server::{Plugin as PluginApi, PluginServer};
use kplug_proto::v1::{
    DefaultRequest, DefaultResponse, FinalizeRequest, FinalizeResponse, GetInfoRequest,
    GetInfoResponse, HookRequest, HookResponse, MutateRequest, MutateResponse, ProbeRequest,
    ProbeResponse, ReconcileRequest, ReconcileResponse, ValidateRequest, ValidateResponse,
};
use kplug_proto::{limits, telemetry};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::admission::AdmissionRequest;
use crate::hooks::HookCall;
use crate::mutate::MutateCall;
use crate::plugin::{
    Plugin, PluginInfo, Readiness, capabilities, implements_defaults, implements_hook,
    implements_mutate, implements_validate,
};
use crate::request::Request;
use crate::response::Response;

/// The service for `plugin`, with the protocol's message size bounds.
pub(super) fn service<P: Plugin>(info: PluginInfo, plugin: Arc<P>) -> PluginServer<Service<P>> {
    PluginServer::new(Service { info, plugin })
        .max_decoding_message_size(limits::MAX_PLUGIN_MESSAGE_BYTES)
        .max_encoding_message_size(limits::MAX_PLUGIN_MESSAGE_BYTES)
}

/// The `kplug.v1.Plugin` service around a [`Plugin`].
pub(super) struct Service<P> {
    info: PluginInfo,
    plugin: Arc<P>,
}

type Handler = fn(
    Arc<dyn DynPlugin>,
    Request,
) -> Pin<Box<dyn Future<Output = Result<Response, crate::BoxError>> + Send>>;

/// Object-safe view of [`Plugin`], so handlers can run on their own task
/// (a panic then fails one call, not the server).
trait DynPlugin: Send + Sync {
    fn reconcile(
        &self,
        request: Request,
    ) -> Pin<Box<dyn Future<Output = Result<Response, crate::BoxError>> + Send + '_>>;
    fn finalize(
        &self,
        request: Request,
    ) -> Pin<Box<dyn Future<Output = Result<Response, crate::BoxError>> + Send + '_>>;
}

impl<P: Plugin> DynPlugin for P {
    fn reconcile(
        &self,
        request: Request,
    ) -> Pin<Box<dyn Future<Output = Result<Response, crate::BoxError>> + Send + '_>> {
        Box::pin(Plugin::reconcile(self, request))
    }
    fn finalize(
        &self,
        request: Request,
    ) -> Pin<Box<dyn Future<Output = Result<Response, crate::BoxError>> + Send + '_>> {
        Box::pin(Plugin::finalize(self, request))
    }
}

fn reconcile_handler(
    p: Arc<dyn DynPlugin>,
    r: Request,
) -> Pin<Box<dyn Future<Output = Result<Response, crate::BoxError>> + Send>> {
    Box::pin(async move { p.reconcile(r).await })
}

fn finalize_handler(
    p: Arc<dyn DynPlugin>,
    r: Request,
) -> Pin<Box<dyn Future<Output = Result<Response, crate::BoxError>> + Send>> {
    Box::pin(async move { p.finalize(r).await })
}

impl<P: Plugin> Service<P> {
    /// The span of one call, continuing the operator's trace when it sent
    /// one (W3C traceparent); the handler's own spans are its children.
    fn span(&self, call: &'static str, metadata: &tonic::metadata::MetadataMap) -> tracing::Span {
        let span = tracing::info_span!("plugin handler", plugin = %self.info.name, call);
        // Without a subscriber that exports spans this does nothing.
        let _ = span.set_parent(telemetry::extract(metadata));
        span
    }

    /// Decodes, runs the handler, and turns every failure (bad JSON,
    /// handler error, panic) into a FAILED response.
    async fn handle(
        &self,
        call: &'static str,
        handler: Handler,
        implementation: String,
        object: &[u8],
        extensions: &[Vec<u8>],
        children: &[Vec<u8>],
    ) -> Response {
        let request = match Request::decode(implementation, object, extensions, children) {
            Ok(request) => request,
            Err(e) => return Response::failed(format!("kplug: {e}")),
        };
        let plugin: Arc<dyn DynPlugin> = self.plugin.clone();
        self.run(call, handler(plugin, request))
            .await
            .unwrap_or_else(Response::failed)
    }
}

impl<P: Plugin> Service<P> {
    /// Runs a handler's future in the call's own task; a handler error or
    /// panic becomes its message (a panic fails one call, not the server).
    ///
    /// Not a task of its own: tonic already runs each call on one, and a
    /// second one cost a wake-up across threads per call (kplug-bench P1).
    /// So when the operator abandons a call (its deadline passed, the
    /// connection closed) the handler's future is dropped, as a Go
    /// handler's context is cancelled.
    async fn run<T>(
        &self,
        call: &'static str,
        handler: impl Future<Output = Result<T, crate::BoxError>>,
    ) -> Result<T, String> {
        // Unwind safety: a panicking handler's state is the plugin's, and
        // the SDK keeps nothing of this call's after it.
        match AssertUnwindSafe(handler).catch_unwind().await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => {
                tracing::warn!(plugin = self.info.name, call, %error, "handler failed");
                Err(error.to_string())
            }
            Err(panic) => {
                let why = panic_message(panic.as_ref());
                tracing::error!(
                    plugin = self.info.name,
                    call,
                    error = why,
                    "handler panicked"
                );
                Err(format!("the plugin's {call} handler panicked: {why}"))
            }
        }
    }

    /// The answer to a call whose capability the plugin does not advertise
    /// (the operator only calls what is advertised, so this is a client's
    /// mistake).
    fn unimplemented(&self, call: &str) -> tonic::Status {
        tonic::Status::unimplemented(format!(
            "plugin {} does not implement {call}",
            self.info.name
        ))
    }
}

/// What a panic said (`panic!` with a message carries a `&str` or a
/// `String`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

#[tonic::async_trait]
impl<P: Plugin> PluginApi for Service<P> {
    async fn get_info(
        &self,
        _: tonic::Request<GetInfoRequest>,
    ) -> Result<tonic::Response<GetInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(GetInfoResponse {
            name: self.info.name.clone(),
            version: self.info.version.clone(),
            protocol: kplug_proto::PROTOCOL.into(),
            offers: self.info.offers(),
            capabilities: capabilities::<P>(&self.info),
            description: self.info.description.clone(),
            hooks: self.info.hooks(),
            call_policies: self.info.call_policies(),
            mutations: self.info.mutations(),
        }))
    }

    async fn probe(
        &self,
        _: tonic::Request<ProbeRequest>,
    ) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        let (ready, message) = match self.plugin.ready().await {
            Readiness::Ready => (true, String::new()),
            Readiness::NotReady(why) => (false, why),
        };
        Ok(tonic::Response::new(ProbeResponse { ready, message }))
    }

    async fn reconcile(
        &self,
        request: tonic::Request<ReconcileRequest>,
    ) -> Result<tonic::Response<ReconcileResponse>, tonic::Status> {
        let span = self.span("Reconcile", request.metadata());
        let r = request.into_inner();
        let response = self
            .handle(
                "Reconcile",
                reconcile_handler,
                r.implementation,
                &r.object,
                &r.extensions,
                &r.children,
            )
            .instrument(span)
            .await;
        Ok(tonic::Response::new(response.into_reconcile()))
    }

    async fn finalize(
        &self,
        request: tonic::Request<FinalizeRequest>,
    ) -> Result<tonic::Response<FinalizeResponse>, tonic::Status> {
        let span = self.span("Finalize", request.metadata());
        let r = request.into_inner();
        let response = self
            .handle(
                "Finalize",
                finalize_handler,
                r.implementation,
                &r.object,
                &r.extensions,
                &r.children,
            )
            .instrument(span)
            .await;
        Ok(tonic::Response::new(response.into_finalize()))
    }

    async fn validate(
        &self,
        request: tonic::Request<ValidateRequest>,
    ) -> Result<tonic::Response<ValidateResponse>, tonic::Status> {
        if !implements_validate::<P>() {
            return Err(self.unimplemented("Validate"));
        }
        let span = self.span("Validate", request.metadata());
        let r = request.into_inner();
        let request =
            AdmissionRequest::decode(r.implementation, r.operation, &r.object, &r.old_object)
                .map_err(|e| tonic::Status::invalid_argument(format!("kplug: {e}")))?;
        let plugin = self.plugin.clone();
        let verdict = self
            .run("Validate", async move { plugin.validate(request).await })
            .instrument(span)
            .await
            .map_err(tonic::Status::internal)?;
        Ok(tonic::Response::new(verdict.into_proto()))
    }

    async fn default(
        &self,
        request: tonic::Request<DefaultRequest>,
    ) -> Result<tonic::Response<DefaultResponse>, tonic::Status> {
        if !implements_defaults::<P>() {
            return Err(self.unimplemented("Default"));
        }
        let span = self.span("Default", request.metadata());
        let r = request.into_inner();
        let request =
            AdmissionRequest::decode(r.implementation, r.operation, &r.object, &r.old_object)
                .map_err(|e| tonic::Status::invalid_argument(format!("kplug: {e}")))?;
        let plugin = self.plugin.clone();
        let defaults = self
            .run("Default", async move { plugin.defaults(request).await })
            .instrument(span)
            .await
            .map_err(tonic::Status::internal)?;
        let response = defaults.into_proto().map_err(|problem| {
            tracing::warn!(
                plugin = self.info.name,
                call = "Default",
                problem,
                "invalid defaults"
            );
            tonic::Status::internal(problem)
        })?;
        Ok(tonic::Response::new(response))
    }

    async fn hook(
        &self,
        request: tonic::Request<HookRequest>,
    ) -> Result<tonic::Response<HookResponse>, tonic::Status> {
        if !implements_hook::<P>() {
            return Err(self.unimplemented("Hook"));
        }
        let span = self.span("Hook", request.metadata());
        let call = match HookCall::decode(request.into_inner()) {
            Ok(call) => call,
            Err(e) => {
                return Ok(tonic::Response::new(
                    Response::failed(format!("kplug: {e}")).into_hook(),
                ));
            }
        };
        let plugin = self.plugin.clone();
        let response = self
            .run("Hook", async move { plugin.hook(call).await })
            .instrument(span)
            .await
            .unwrap_or_else(Response::failed);
        Ok(tonic::Response::new(response.into_hook()))
    }

    async fn mutate(
        &self,
        request: tonic::Request<MutateRequest>,
    ) -> Result<tonic::Response<MutateResponse>, tonic::Status> {
        if !implements_mutate::<P>() {
            return Err(self.unimplemented("Mutate"));
        }
        let span = self.span("Mutate", request.metadata());
        let call = MutateCall::decode(&request.into_inner())
            .map_err(|e| tonic::Status::invalid_argument(format!("kplug: {e}")))?;
        let plugin = self.plugin.clone();
        let mutation = self
            .run("Mutate", async move { plugin.mutate(call).await })
            .instrument(span)
            .await
            .map_err(tonic::Status::internal)?;
        let response = mutation.into_proto().map_err(|problem| {
            tracing::warn!(
                plugin = self.info.name,
                call = "Mutate",
                problem,
                "invalid mutation"
            );
            tonic::Status::internal(problem)
        })?;
        Ok(tonic::Response::new(response))
    }
}

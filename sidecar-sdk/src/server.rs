//! Serving a plugin: the socket, the gRPC service, heartbeats and the
//! SIGTERM drain, in the order `docs/protocol.md` fixes.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use kplug_proto::v1::plugin_server::{Plugin as PluginApi, PluginServer};
use kplug_proto::v1::registry_client::RegistryClient;
use kplug_proto::v1::{
    DefaultRequest, DefaultResponse, FinalizeRequest, FinalizeResponse, GetInfoRequest,
    GetInfoResponse, HeartbeatRequest, HookRequest, HookResponse, MutateRequest, MutateResponse,
    ProbeRequest, ProbeResponse, ReconcileRequest, ReconcileResponse, UnregisterRequest,
    ValidateRequest, ValidateResponse,
};
use kplug_proto::{limits, rules, telemetry};
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
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
use crate::{Error, heartbeat};

/// Serves `plugin` with settings from the environment
/// (`KPLUG_SOCKET_DIR`, default `/var/run/kplug`; `KPLUG_HEARTBEAT_INTERVAL`
/// in seconds, default 5) until SIGTERM or Ctrl-C, then drains and returns.
///
/// # Errors
/// [`Error`] when the name or a setting is invalid, the socket cannot be
/// bound, or the server fails. Its message (`Display`, and `Debug` too)
/// names the plugin and says what to do, so `main` can simply return it.
pub async fn serve<P: Plugin>(info: PluginInfo, plugin: P) -> Result<(), Error> {
    // With OTEL_EXPORTER_OTLP_ENDPOINT set, the handlers' spans continue the
    // operator's trace and are exported there, as the plugin's name.
    let exporter = match std::env::var(telemetry::OTLP_ENDPOINT_ENV)
        .ok()
        .filter(|e| !e.is_empty())
    {
        Some(endpoint) => Some(telemetry::Exporter::new(&info.name, &endpoint).map_err(
            |error| Error::Telemetry {
                plugin: info.name.clone(),
                error,
            },
        )?),
        None => None,
    };
    // A program that installed its own subscriber keeps it.
    let _ = telemetry::init_subscriber(exporter.as_ref(), "kplug-sidecar");
    // The handlers are installed here, before the socket is bound: a
    // SIGTERM that comes as soon as the plugin answers must not find the
    // default action (death) still in place.
    let shutdown = kplug_proto::shutdown::termination();
    let served = Server::from_env(info, plugin)?.run_until(shutdown).await;
    if let Some(exporter) = exporter {
        exporter.shutdown();
    }
    served
}

/// A plugin server with explicit settings (for tests and embedding);
/// [`serve`] is the usual entry point.
pub struct Server<P> {
    info: PluginInfo,
    plugin: Arc<P>,
    socket_dir: PathBuf,
    heartbeat_interval: Duration,
    grace: Duration,
}

impl<P: Plugin> Server<P> {
    /// Settings from the environment (see [`serve`]). An empty variable
    /// counts as unset.
    ///
    /// # Errors
    /// [`Error::Environment`] when `KPLUG_HEARTBEAT_INTERVAL` is not a
    /// positive number of seconds
    /// ([`kplug_proto::rules::parse_heartbeat_interval`]).
    pub fn from_env(info: PluginInfo, plugin: P) -> Result<Self, Error> {
        let socket_dir = std::env::var_os(kplug_proto::SOCKET_DIR_ENV)
            .filter(|dir| !dir.is_empty())
            .map_or_else(
                || PathBuf::from(kplug_proto::DEFAULT_SOCKET_DIR),
                PathBuf::from,
            );
        let interval = std::env::var(rules::HEARTBEAT_INTERVAL_ENV).ok();
        let interval = rules::parse_heartbeat_interval(interval.as_deref()).map_err(|error| {
            Error::Environment {
                plugin: info.name.clone(),
                error,
            }
        })?;
        Ok(Self::new(info, plugin, socket_dir).heartbeat_interval(interval))
    }

    /// A server for `plugin` in `socket_dir`.
    pub fn new(info: PluginInfo, plugin: P, socket_dir: impl Into<PathBuf>) -> Self {
        Self {
            info,
            plugin: Arc::new(plugin),
            socket_dir: socket_dir.into(),
            heartbeat_interval: rules::DEFAULT_HEARTBEAT_INTERVAL,
            grace: Duration::from_secs(10),
        }
    }

    /// Heartbeat interval until the operator asks for another.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// The heartbeat interval the server starts with (until the operator
    /// asks for another): set with [`Server::heartbeat_interval`] or read
    /// from `KPLUG_HEARTBEAT_INTERVAL` by [`Server::from_env`].
    pub fn configured_interval(&self) -> Duration {
        self.heartbeat_interval
    }

    /// How long calls in flight may take to finish at shutdown.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The socket this plugin serves: `<socket dir>/plugins/<name>/plugin.sock`.
    pub fn socket_path(&self) -> PathBuf {
        self.socket_dir
            .join(kplug_proto::plugin_socket(&self.info.name))
    }

    /// Binds, serves and heartbeats until `shutdown` resolves; then
    /// unregisters, drains and removes the socket.
    ///
    /// # Errors
    /// [`Error`] when the name is invalid, the socket cannot be bound, or the
    /// server fails.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        self.info.validate::<P>()?;
        let socket = self.socket_path();
        let listener = kplug_proto::socket::bind_plugin(&self.socket_dir, &self.info.name)
            .await
            .map_err(|error| Error::Bind {
                plugin: self.info.name.clone(),
                error,
            })?;
        let instance_id = uuid::Uuid::new_v4().to_string();
        let name = self.info.name.clone();
        tracing::info!(plugin = name, version = self.info.version, socket = %socket.display(), instance_id, "serving");

        // Serve first: the operator dials back on the first heartbeat.
        let (stop_serving, serving_stopped) = watch::channel(false);
        let service = Service {
            info: self.info.clone(),
            plugin: self.plugin.clone(),
        };
        let mut server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(
                    PluginServer::new(service)
                        .max_decoding_message_size(limits::MAX_PLUGIN_MESSAGE_BYTES)
                        .max_encoding_message_size(limits::MAX_PLUGIN_MESSAGE_BYTES),
                )
                .serve_with_incoming_shutdown(
                    UnixListenerStream::new(listener),
                    wait_true(serving_stopped),
                ),
        );

        let registry_path = self.socket_dir.join(kplug_proto::REGISTRY_SOCKET);
        // Lazy and reconnecting: an operator restart is picked up by the next
        // heartbeat.
        let registry = kplug_proto::socket::channel(&registry_path);
        let heartbeat = HeartbeatRequest {
            name: name.clone(),
            version: self.info.version.clone(),
            instance_id: instance_id.clone(),
            protocol: kplug_proto::PROTOCOL.into(),
            socket: kplug_proto::plugin_socket(&name),
            offers: self.info.offers(),
            capabilities: capabilities::<P>(&self.info),
            hooks: self.info.hooks(),
            call_policies: self.info.call_policies(),
            mutations: self.info.mutations(),
        };
        let (stop_heartbeat, heartbeat_stopped) = watch::channel(false);
        let heartbeats = tokio::spawn(heartbeat::run(
            registry.clone(),
            registry_path,
            heartbeat,
            self.heartbeat_interval,
            heartbeat_stopped,
        ));

        let server_failed = tokio::select! {
            () = shutdown => None,
            result = &mut server => Some(result),
        };
        if let Some(result) = server_failed {
            heartbeats.abort();
            remove_own_socket(&socket).await;
            let failed = |message| Error::Serve {
                plugin: name.clone(),
                socket: socket.clone(),
                message,
            };
            return match result {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(failed(error_chain(&e))),
                Err(e) => Err(failed(format!("the server task ended: {e}"))),
            };
        }

        tracing::info!(
            plugin = name,
            "shutting down: unregistering, then draining calls in flight"
        );
        let _ = stop_heartbeat.send(true);
        let _ = heartbeats.await;
        let mut unregister = tonic::Request::new(UnregisterRequest {
            name: name.clone(),
            instance_id,
        });
        unregister.set_timeout(rules::UNREGISTER_DEADLINE);
        match tokio::time::timeout(
            rules::UNREGISTER_DEADLINE,
            RegistryClient::new(registry).unregister(unregister),
        )
        .await
        {
            Ok(Ok(_)) => tracing::info!(plugin = name, "unregistered"),
            Ok(Err(status)) => tracing::warn!(
                plugin = name,
                error = status.message(),
                "Unregister failed; exiting anyway"
            ),
            Err(_) => tracing::warn!(plugin = name, "Unregister timed out; exiting anyway"),
        }
        let _ = stop_serving.send(true);
        match tokio::time::timeout(self.grace, &mut server).await {
            Ok(Ok(Err(e))) => {
                tracing::warn!(plugin = name, error = %e, "server error while draining")
            }
            Err(_) => {
                tracing::warn!(plugin = name, grace = ?self.grace, "calls still in flight after the grace period; exiting");
                server.abort();
            }
            _ => {}
        }
        remove_own_socket(&socket).await;
        tracing::info!(plugin = name, "stopped");
        Ok(())
    }
}

/// `e` and its causes, on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// Removes our socket file, unless a newer instance already replaced it
/// (then it is live and not ours).
async fn remove_own_socket(socket: &Path) {
    if !kplug_proto::socket::is_live(socket).await {
        let _ = tokio::fs::remove_file(socket).await;
    }
}

/// The `kplug.v1.Plugin` service around a [`Plugin`].
struct Service<P> {
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

//! Serving a plugin: the lifecycle (the socket, whose stale file
//! `kplug_proto::socket::bind_plugin` removes, in a socket dir that must
//! exist; the heartbeats; the SIGTERM drain and the shutdown, which removes
//! the socket and the plugin's emptied directory), in the order
//! `docs/protocol.md` fixes. The gRPC adapter, which turns calls into
//! [`Plugin`] calls, is [`service`].

mod service;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kplug_proto::rules::SocketDirOrigin;
use kplug_proto::socket::BindError;
use kplug_proto::v1::registry_client::RegistryClient;
use kplug_proto::v1::{HeartbeatRequest, UnregisterRequest};
use kplug_proto::{rules, telemetry};
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Channel;

use crate::plugin::{Plugin, PluginInfo, capabilities};
use crate::{Error, heartbeat};

/// Serves `plugin` with settings from the environment
/// (`KPLUG_SOCKET_DIR`, default `/var/run/kplug`; `KPLUG_HEARTBEAT_INTERVAL`
/// in seconds, default 5) until SIGTERM or Ctrl-C, then drains and returns.
/// The socket dir must exist (it is the volume shared with the operator);
/// while the operator's `registry.sock` is not there, the plugin says once,
/// at warning level, where it looks and where that came from.
///
/// # Errors
/// [`Error`] when the name or a setting is invalid, the socket dir does not
/// exist, the socket cannot be bound, or the server fails. Its message (`Display`, and `Debug` too)
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
    /// Where `socket_dir` came from, for the messages about it.
    origin: SocketDirOrigin,
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
        let variable = std::env::var_os(kplug_proto::SOCKET_DIR_ENV);
        let origin = SocketDirOrigin::of_variable(variable.as_deref());
        let socket_dir = variable.filter(|dir| !dir.is_empty()).map_or_else(
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
        let server = Self::new(info, plugin, socket_dir).heartbeat_interval(interval);
        Ok(Self { origin, ..server })
    }

    /// A server for `plugin` in `socket_dir`, which must exist when it runs
    /// (the plugin creates `plugins/<name>/` in it, not the directory
    /// itself). Messages about it say the program set it.
    pub fn new(info: PluginInfo, plugin: P, socket_dir: impl Into<PathBuf>) -> Self {
        Self {
            info,
            plugin: Arc::new(plugin),
            socket_dir: socket_dir.into(),
            origin: SocketDirOrigin::Program,
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
    /// unregisters, drains, removes the socket and then the plugin's own
    /// directory, `plugins/<name>/`, if that left it empty.
    ///
    /// # Errors
    /// [`Error`] when the name is invalid, the socket dir does not exist, the
    /// socket cannot be bound, or the server fails.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        self.info.validate::<P>()?;
        let socket = self.socket_path();
        let listener = self.bind().await?;
        let instance_id = uuid::Uuid::new_v4().to_string();
        let name = self.info.name.clone();
        tracing::info!(plugin = name, version = self.info.version, socket = %socket.display(), instance_id, "serving");

        // Serve first: the operator dials back on the first heartbeat.
        let (stop_serving, serving_stopped) = watch::channel(false);
        let mut server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service::service(self.info.clone(), self.plugin.clone()))
                .serve_with_incoming_shutdown(
                    UnixListenerStream::new(listener),
                    wait_true(serving_stopped),
                ),
        );

        let place = heartbeat::Registry {
            socket_dir: self.socket_dir.clone(),
            origin: self.origin,
        };
        // Lazy and reconnecting: an operator restart is picked up by the next
        // heartbeat.
        let registry = kplug_proto::socket::channel(&place.path());
        let (stop_heartbeat, heartbeat_stopped) = watch::channel(false);
        let heartbeats = tokio::spawn(heartbeat::run(
            registry.clone(),
            place,
            self.heartbeat(&instance_id),
            self.heartbeat_interval,
            heartbeat_stopped,
        ));

        let server_failed = tokio::select! {
            () = shutdown => None,
            result = &mut server => Some(result),
        };
        if let Some(result) = server_failed {
            heartbeats.abort();
            self.remove_own_socket().await;
            return self.ended(result, socket);
        }

        tracing::info!(
            plugin = name,
            "shutting down: unregistering, then draining calls in flight"
        );
        let _ = stop_heartbeat.send(true);
        let _ = heartbeats.await;
        unregister(registry, &name, instance_id).await;
        let _ = stop_serving.send(true);
        self.drain(server).await;
        self.remove_own_socket().await;
        tracing::info!(plugin = name, "stopped");
        Ok(())
    }

    /// Binds the plugin's socket, in a socket dir that must exist.
    async fn bind(&self) -> Result<UnixListener, Error> {
        let plugin = self.info.name.clone();
        kplug_proto::socket::bind_plugin(&self.socket_dir, &self.info.name)
            .await
            .map_err(|error| match error {
                BindError::NoSocketDir { dir } => Error::SocketDir {
                    plugin,
                    message: rules::socket_dir_missing_message(&dir, self.origin),
                },
                error => Error::Bind { plugin, error },
            })
    }

    /// Removes our socket file, unless a newer instance already replaced it
    /// (then it is live and not ours), and then our directory,
    /// `plugins/<name>/`, if that left it empty.
    async fn remove_own_socket(&self) {
        let socket = self.socket_path();
        if !kplug_proto::socket::is_live(&socket).await {
            let _ = tokio::fs::remove_file(&socket).await;
            kplug_proto::socket::remove_plugin_dir(&self.socket_dir, &self.info.name);
        }
    }

    /// What every heartbeat of this instance carries.
    fn heartbeat(&self, instance_id: &str) -> HeartbeatRequest {
        HeartbeatRequest {
            name: self.info.name.clone(),
            version: self.info.version.clone(),
            instance_id: instance_id.to_owned(),
            protocol: kplug_proto::PROTOCOL.into(),
            socket: kplug_proto::plugin_socket(&self.info.name),
            offers: self.info.offers(),
            capabilities: capabilities::<P>(&self.info),
            hooks: self.info.hooks(),
            call_policies: self.info.call_policies(),
            mutations: self.info.mutations(),
        }
    }

    /// The result of a server that ended before the shutdown was asked for.
    fn ended(&self, result: Result<Served, JoinError>, socket: PathBuf) -> Result<(), Error> {
        let failed = |message| Error::Serve {
            plugin: self.info.name.clone(),
            socket,
            message,
        };
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(failed(error_chain(&e))),
            Err(e) => Err(failed(format!("the server task ended: {e}"))),
        }
    }

    /// Waits up to the grace period for the calls in flight, once the
    /// server stopped taking new ones.
    async fn drain(&self, mut server: JoinHandle<Served>) {
        let name = &self.info.name;
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
    }
}

/// What the gRPC server's task ends with.
type Served = Result<(), tonic::transport::Error>;

/// Tells the operator this instance is going (`Unregister`), so that it
/// stops routing calls to it before the TTL; a failure only delays that.
async fn unregister(registry: Channel, name: &str, instance_id: String) {
    let mut unregister = tonic::Request::new(UnregisterRequest {
        name: name.to_owned(),
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

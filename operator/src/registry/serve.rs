//! Serving `registry.sock`: binding it, the bounds on what one connection
//! may hold, and the start-up grace while plugins register again.

use std::future::Future;
use std::time::{Duration, Instant};

use kplug_proto::limits;
use kplug_proto::v1::registry_server::RegistryServer;

use super::Registry;

impl Registry {
    /// The gRPC service (garbage collection runs only in [`Self::serve_on`]).
    pub(crate) fn service(&self) -> RegistryServer<Self> {
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
}

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

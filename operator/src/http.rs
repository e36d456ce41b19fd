//! `/metrics`, `/healthz` and `/readyz` on `--metrics-addr`.
//!
//! - `/healthz`: 200 while the process serves HTTP (liveness).
//! - `/readyz`: 200 once the registry socket is served and the controller's
//!   cache is synced; 503 with the reason before (readiness).
//! - `/metrics`: Prometheus text exposition (see [`crate::metrics`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;
use crate::registry::Registry;

/// Shared readiness of the controller (set once its cache is synced).
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the controller ready.
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    registry: Registry,
    readiness: Readiness,
}

/// Serves the endpoints on `addr` until `shutdown` resolves.
///
/// # Errors
/// [`crate::Error::Http`] when `addr` cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    registry: Registry,
    readiness: Readiness,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), crate::Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| crate::Error::Http { addr, source })?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(AppState {
            metrics,
            registry,
            readiness,
        });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| crate::Error::Http { addr, source })
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

async fn ready(State(state): State<AppState>) -> impl IntoResponse {
    if !state.registry.is_serving() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "registry socket not served yet\n",
        )
    } else if !state.readiness.is_ready() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "controller cache not synced yet\n",
        )
    } else {
        (StatusCode::OK, "ok\n")
    }
}

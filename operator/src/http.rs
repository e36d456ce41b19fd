//! `/metrics`, `/healthz` and `/readyz` on `--metrics-addr`.
//!
//! - `/healthz`: 200 while the process serves HTTP (liveness).
//! - `/readyz`: 200 once the registry socket is served and, on the leader,
//!   the controller's cache is synced; 503 with the reason before
//!   (readiness). A follower (leader election on, another replica leads) is
//!   ready once its registry is served: its plugin sidecars can register,
//!   and it can take over. The body says which.
//! - `/metrics`: Prometheus text exposition (see [`crate::metrics`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use kplug_proto::v1::Call;

type Metrics = Arc<prometheus_client::registry::Registry>;
use crate::plugin::CallPolicies;
use crate::reconcile::LastCalls;
use crate::registry::Registry;

/// Shared readiness of the controller.
#[derive(Clone, Debug, Default)]
pub(crate) struct Readiness {
    synced: Arc<AtomicBool>,
    following: Arc<AtomicBool>,
}

impl Readiness {
    /// Marks the controller's cache synced; true the first time.
    pub(crate) fn set_ready(&self) -> bool {
        !self.synced.swap(true, Ordering::AcqRel)
    }

    /// Whether another replica leads (this one waits to take over). A new
    /// term as leader starts unsynced.
    pub(crate) fn set_following(&self, following: bool) {
        self.following.store(following, Ordering::Release);
        if !following {
            self.synced.store(false, Ordering::Release);
        }
    }

    fn is_ready(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn is_following(&self) -> bool {
        self.following.load(Ordering::Acquire)
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    registry: Registry,
    last_calls: Arc<LastCalls>,
    readiness: Readiness,
}

/// Binds `addr` for [`serve`]. Binding first makes a taken port a start-up
/// error, not a log line.
///
/// # Errors
/// [`crate::Error::Http`] when `addr` cannot be bound.
pub(crate) async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, crate::Error> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| crate::Error::Http { addr, source })
}

/// Serves the endpoints on `listener` until `shutdown` resolves.
///
/// # Errors
/// [`crate::Error::Http`] when serving fails.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    registry: Registry,
    last_calls: Arc<LastCalls>,
    readiness: Readiness,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), crate::Error> {
    let addr = listener.local_addr().map_err(|source| crate::Error::Http {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        source,
    })?;
    tracing::info!(%addr, "serving /metrics, /healthz, /readyz, /plugins and /calls");
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/plugins", get(plugins))
        .route("/calls/{uid}", get(last_call))
        .with_state(AppState {
            metrics,
            registry,
            last_calls,
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
        crate::metrics::encode(&state.metrics),
    )
}

/// The plugins registered with this replica, as JSON, for `kubectl kplug
/// plugins` and `why`: read-only, and current to the last heartbeat (a
/// ConfigMap or Lease would need a write per heartbeat to say as much).
async fn plugins(State(state): State<AppState>) -> impl IntoResponse {
    let plugins: Vec<serde_json::Value> = state
        .registry
        .instances()
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name(),
                "version": p.version(),
                "instanceId": p.instance_id(),
                "description": p.description(),
                "ready": p.is_ready(),
                "lastHeartbeatSecondsAgo": p.silent_for().as_secs_f64(),
                "capabilities": p.capabilities().iter().map(|c| c.as_str_name()).collect::<Vec<_>>(),
                "offers": p.offers().iter().map(|o| {
                    let kind = |k: &kplug_proto::v1::GroupKind| serde_json::json!({"group": k.group, "kind": k.kind});
                    serde_json::json!({
                        "base": o.base.as_ref().map(kind),
                        "implementation": o.implementation,
                        "extensions": o.extensions.iter().map(kind).collect::<Vec<_>>(),
                    })
                }).collect::<Vec<_>>(),
                // The hooks the operator calls (those it can: a known phase
                // and behaviour), in declaration order.
                "hooks": p.hooks().map(|h| serde_json::json!({
                    "name": h.name,
                    "base": h.base.as_ref().map(|k| serde_json::json!({"group": k.group, "kind": k.kind})),
                    "phase": crate::reconcile::hook_phase_name(h.phase),
                    "behaviour": crate::reconcile::hook_behaviour_name(h.behaviour),
                    "order": h.order,
                })).collect::<Vec<_>>(),
                // Each call's deadline, in seconds, as resolved from the
                // plugin's call policies and the operator's bounds.
                "deadlines": deadlines(p.policies()),
            })
        })
        .collect();
    let body = serde_json::json!({
        "socketDir": state.registry.config().socket_dir,
        "plugins": plugins,
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
}

/// Each call's deadline in seconds, by call (`reconcile`, `hook`, ...).
fn deadlines(policies: &CallPolicies) -> serde_json::Map<String, serde_json::Value> {
    [
        Call::Reconcile,
        Call::Finalize,
        Call::Hook,
        Call::Validate,
        Call::Default,
    ]
    .into_iter()
    .map(|call| {
        let name = call.as_str_name().trim_start_matches("CALL_");
        let seconds = policies.deadline(call).as_secs_f64();
        (name.to_ascii_lowercase(), serde_json::json!(seconds))
    })
    .collect()
}

/// The last plugin call of the object with `uid` this replica made, as
/// JSON; 404 when it made none (a follower, or not called since start).
async fn last_call(State(state): State<AppState>, Path(uid): Path<String>) -> impl IntoResponse {
    match state.last_calls.get(&uid) {
        Some(call) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            call.to_json().to_string(),
        ),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("no call for object {uid} on this replica\n"),
        ),
    }
}

async fn ready(State(state): State<AppState>) -> impl IntoResponse {
    if !state.registry.is_serving() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "registry socket not served yet\n",
        )
    } else if state.readiness.is_following() {
        (
            StatusCode::OK,
            "ok (follower: another replica leads; plugins register here, and this replica takes over if the leader goes)\n",
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

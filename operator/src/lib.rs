//! The operator side of kplug: a registry of sidecar plugins, and a
//! controller that delegates the reconciliation of a custom resource to
//! them.
//!
//! Use it as the generic `kplug-operator` binary (no code), or as a library
//! inside your own kube-rs operator:
//!
//! ```no_run
//! # async fn example() -> Result<(), kplug_operator::Error> {
//! let client = kube::Client::try_default().await?;
//! let config = kplug_operator::Config {
//!     resource: "myorg.org/v1alpha1/DatabaseTable".into(),
//!     ..kplug_operator::Config::default()
//! };
//! kplug_operator::run(client, config, async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```
//!
//! The parts, one module each: [`registry`] (heartbeats, handshake, garbage
//! collection), [`selection`] (which implementation), [`extensions`],
//! [`controller`] (the reconcile loop), [`status`] (conditions and
//! server-side apply), [`events`], [`metrics`], [`http`].

pub mod backoff;
pub mod confinement;
pub mod connection;
pub mod controller;
pub mod events;
pub mod extensions;
pub mod http;
pub mod leader;
mod listener;
pub mod metrics;
pub mod ownership;
pub mod plugin;
mod preference;
pub mod refusal;
pub mod registry;
pub mod selection;
pub mod share;
pub mod status;
pub mod target;
mod throttle;
pub mod waiting;
pub mod written;

mod run;

pub use run::{Config, run};

/// Errors that stop the operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--resource` is malformed or not served by the API server.
    #[error("--resource {resource}: {message}")]
    Resource {
        /// What was given.
        resource: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// The registry socket could not be bound.
    #[error("registry: {0}")]
    Bind(#[from] kplug_proto::socket::BindError),
    /// Serving the registry failed.
    #[error("registry: {0}")]
    Serve(#[source] tonic::transport::Error),
    /// The metrics/health endpoint could not be bound or failed.
    #[error(
        "--metrics-addr {addr}: {source}; is another process (another kplug-operator?) using it? Choose another address with --metrics-addr"
    )]
    Http {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Leader election could not start.
    #[error(
        "leader election on Lease {lease}: {source}; check that the operator may get, create and patch Leases there (RBAC), or run with --leader-election=false"
    )]
    Leader {
        /// `namespace/name` of the Lease.
        lease: String,
        /// The cause.
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
    /// Settings that cannot work together.
    #[error("{0}")]
    Config(String),
    /// Talking to the Kubernetes API failed at start-up.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

//! The operator side of kplug: a registry of sidecar plugins, and the
//! delegation of a custom resource's reconcile to them.
//!
//! Use it as the generic `kplug-operator` binary (no code; package
//! `kplug-operator-bin`, in `operator/cli/`), or as a library inside your
//! own kube-rs operator. Embedding takes a [`Registry`] (where
//! plugins register), a [`Delegate`] for your kind, and a kube-runtime
//! `Controller` that calls it, around steps of your own:
//!
//! ```no_run
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use kube::runtime::{Controller, controller::Action, watcher};
//! use kube::{Api, Client, api::DynamicObject};
//! use kplug_operator::{Delegate, ReconcileError, Registry, RegistryConfig};
//! # #[derive(Clone, Debug, serde::Serialize, serde::Deserialize, kube::CustomResource)]
//! # #[kube(group = "example.com", version = "v1", kind = "Greeting", namespaced, schema = "disabled")]
//! # struct GreetingSpec {}
//!
//! async fn reconcile(obj: Arc<Greeting>, kplug: Arc<Delegate<Greeting>>) -> Result<Action, ReconcileError> {
//!     // ... a step of your own ...
//!     kplug.reconcile(obj).await
//! }
//!
//! # async fn example() -> Result<(), kplug_operator::Error> {
//! let client = Client::try_default().await?;
//! let mut metrics = prometheus_client::registry::Registry::default();
//! let registry = Registry::new(RegistryConfig::default(), &mut metrics);
//! let kplug = Arc::new(Delegate::<Greeting>::builder(client.clone(), &registry).metrics(&mut metrics).build().await?);
//! tokio::spawn(registry.clone().serve(std::future::pending()));
//! let controller = Controller::new(Api::<Greeting>::all(client), watcher::Config::default());
//! let wakeups = kplug.wakeups(controller.store());
//! controller
//!     .reconcile_on(wakeups)
//!     .run(reconcile, |obj, error, kplug| kplug.error_policy(obj, error), kplug)
//!     .for_each(|_| async {})
//!     .await;
//! # Ok(()) }
//! ```
//!
//! Or run everything the binary runs (registry, controller, `/metrics`,
//! `/healthz`, `/readyz`, leader election, and the admission webhooks with
//! [`Config::webhook`]) with [`run`](fn@run).
//!
//! `examples/embedded-operator` in the repository is a whole operator built
//! this way.

mod admission;
pub mod advert;
mod backoff;
mod children;
mod connection;
mod delegate;
mod events;
mod extensions;
mod http;
mod initial_list;
mod leader;
mod listener;
mod metrics;
mod ownership;
mod plugin;
mod preference;
mod reconcile;
mod refusal;
mod registry;
mod relist;
mod run;
mod selection;
mod share;
mod status;
mod target;
mod throttle;
mod waiting;
mod written;

pub use admission::{ClientConfig, FailurePolicy, NoPlugin, WebhookConfig};
pub use children::{BASE_UID_LABEL, ChildKind, ChildKinds, Mutators, PLUGIN_LABEL};
pub use delegate::{Delegate, DelegateBuilder, MutateError};
pub use extensions::AllowList;
pub use initial_list::InitialList;
pub use leader::LeaderElection;
pub use plugin::{CallError, CallPolicies, PluginInstance};
pub use reconcile::{RESELECT, ReconcileError, SelectionMode, Settings};
pub use registry::{Registry, RegistryConfig};
pub use run::{Config, run};
pub use selection::{IMPLEMENTATION_ANNOTATION, PLUGIN_ANNOTATION};

/// Errors that stop the operator, or keep a [`Delegate`] or [`Registry`]
/// from starting.
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

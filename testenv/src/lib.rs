//! Test support for kplug: a **real** Kubernetes control plane per test binary.
//!
//! The control plane is `kube-testenv` (built from the Go module next to this
//! crate by `make testenv`): a real kube-apiserver with an embedded etcd, on
//! loopback, with self-signed certificates and all its state in a temporary
//! directory. It is started once per test binary, on first use, and goes away
//! with the test binary (it watches its parent process and its stdin).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let client = kplug_testenv::client().await;
//! let ns = kplug_testenv::namespace(&client, "my-test").await?;
//! kplug_testenv::install_crd_yaml(&client, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n...").await?;
//! # Ok(()) }
//! ```
//!
//! # A control plane that restarts
//!
//! To test what happens when the API server goes away and comes back (an
//! operator riding through it, a chaos suite), a test starts a control plane
//! of its own with [`ControlPlane::start_with`]. Its etcd data, certificates
//! and service-account signing key live in a data directory
//! (kube-testenv's `--data-dir`), so it can be stopped ([`ControlPlane::stop`]:
//! SIGTERM, the API server closes every connection and watch; or
//! [`ControlPlane::kill`]: SIGKILL, like a crash) and started again
//! ([`ControlPlane::start_again`]), or both at once ([`ControlPlane::restart`]).
//! It comes back on the same port with the same objects, and its kubeconfig is
//! the same file, byte for byte: clients built before the restart, processes
//! started with that kubeconfig and service-account tokens keep working once it
//! is back. Requests while it is down fail (connection refused); a
//! `kube::runtime::watcher` retries (give it a backoff, e.g.
//! `WatchStreamExt::default_backoff`) and, as after any API server restart,
//! usually starts over with a relist (`Init`, `InitApply`..., `InitDone`)
//! because its resource version is older than the new server's watch cache.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use kplug_testenv::{ControlPlane, StartOptions};
//! // The data directory and the port are chosen here; both can be given.
//! let mut control_plane = ControlPlane::start_with(StartOptions::default())?;
//! let client = control_plane.client().await?;
//! // ... run the operator with control_plane.kubeconfig_path() ...
//! // Blocking (seconds): keep the test's other tasks running meanwhile
//! // (this needs #[tokio::test(flavor = "multi_thread")]).
//! let timing = tokio::task::block_in_place(|| control_plane.restart())?;
//! println!("the API server was away for {:?}", timing.total());
//! # Ok(()) }
//! ```
//!
//! A restart takes about 3–6 s on 2 cores: about 1 s to stop and 2–4 s until
//! `/readyz` is ok again. A data directory serves one running kube-testenv at a
//! time; a second one on it fails at once, naming the first one's pid. One made
//! by the crate (no `data_dir` given) is removed when the [`ControlPlane`] is
//! dropped; a given one is kept, and a later [`ControlPlane::start_with`] on it
//! and the same port serves its data again. The shared [`control_plane`](fn@control_plane) cannot
//! be stopped.
//!
//! What it is not: only the API server and etcd run. No kube-controller-manager,
//! scheduler or kubelet, so Deployments create no Pods, deleted namespaces stay
//! `Terminating`, there is no garbage collection of owned objects, and no
//! `default` ServiceAccount is created in new namespaces. Give every test its
//! own namespace ([`namespace`]) instead of cleaning up.
//!
//! # A real node
//!
//! With [`StartOptions::node`] (root only), kube-testenv also runs
//! kube-controller-manager, kube-scheduler and a kubelet with containerd, a
//! CNI bridge and a locally built pause image: Deployments get real pods, which
//! reach the API server at the `kubernetes` Service like in any cluster.
//! Images come from the local Docker engine ([`StartOptions::load_images`]);
//! nothing is pulled. Stopping removes every pod and restores what the node
//! changed on the machine; [`HostSnapshot`] checks that.
//!
//! ```no_run
//! # fn demo() -> anyhow::Result<()> {
//! use kplug_testenv::{ControlPlane, HostSnapshot, StartOptions};
//! let before = HostSnapshot::take();
//! let node = ControlPlane::start_with(StartOptions {
//!     node: true,
//!     load_images: vec!["ghcr.io/kplug/kplug-operator:0.1.0".into()],
//!     ..StartOptions::default()
//! })?;
//! println!("node {} is Ready", node.node().unwrap_or_default());
//! drop(node);
//! assert!(before.leaks(&HostSnapshot::take()).is_empty());
//! # Ok(()) }
//! ```

mod control_plane;
mod egress;
mod eventually;
mod host_state;
mod kube_support;
mod paths;

pub use control_plane::{ControlPlane, RestartTiming, StartError, StartOptions, control_plane};
pub use egress::Egress;
pub use eventually::eventually;
pub use host_state::HostSnapshot;
pub use kube_support::{
    FIELD_MANAGER, client, client_from_kubeconfig, install_crd_yaml, install_crds, namespace,
    parse_crd_yaml,
};
pub use paths::{target_dir, testenv_binary, workspace_binary, workspace_root};

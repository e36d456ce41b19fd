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
//! What it is not: only the API server and etcd run. No kube-controller-manager,
//! scheduler or kubelet, so Deployments create no Pods, deleted namespaces stay
//! `Terminating`, there is no garbage collection of owned objects, and no
//! `default` ServiceAccount is created in new namespaces. Give every test its
//! own namespace ([`namespace`]) instead of cleaning up.

mod control_plane;
mod eventually;
mod kube_support;
mod paths;

pub use control_plane::{ControlPlane, StartError, control_plane};
pub use eventually::eventually;
pub use kube_support::{
    FIELD_MANAGER, client, install_crd_yaml, install_crds, namespace, parse_crd_yaml,
};
pub use paths::{target_dir, testenv_binary, workspace_binary, workspace_root};

//! What a plugin says, checked: heartbeats, answers, socket paths.
//!
//! These are the kplug operator's rules for what it accepts from a plugin,
//! as pure functions of what the plugin sent (and, for a socket path, of
//! the socket dir on disk):
//! - [`heartbeat`]: what a plugin declares in its heartbeat, and again in
//!   `GetInfo` (name, instance id, sizes, protocol, capabilities, hooks,
//!   call policies, mutations), and why it is refused;
//! - [`confinement`]: a registered socket path must be a Unix socket
//!   inside the socket dir;
//! - [`response`]: a plugin's Reconcile, Finalize and Hook answers (their
//!   outcome, JSON statuses, conditions, Events, children and retry delay),
//!   checked as a whole before anything of them is written.
//!
//! Three users share them, so that each applies the same rules: the
//! operator (`kplug-operator`), which applies them; the conformance kit
//! (`kplug-conformance`), which refuses a plugin's answer exactly when the
//! operator would; and the fuzz targets (`fuzz/`), which feed them
//! arbitrary input. It is a crate of its own, the way kube splits
//! kube-core (types, no I/O) from kube-runtime, so that the kit and the
//! fuzz targets need neither the operator's internals nor its dependencies
//! (kube's client and runtime, the webhooks' TLS, leader election, clap).
//!
//! Not in `kplug-proto`: that crate is the contract every plugin builds
//! against (the Rust SDK depends on it), and what an operator accepts is
//! not part of it. A plugin needs none of these checks, and the answers'
//! checks need Kubernetes' object types (`kube-core`, `k8s-openapi`), which
//! the protocol crate and the SDK do without. The bounds and name rules
//! that plugins and SDKs share stay in `kplug_proto::limits` and
//! `kplug_proto::rules`; these checks apply them.

pub mod confinement;
pub mod heartbeat;
pub mod response;

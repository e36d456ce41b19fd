//! The command line: every flag, its `--help` text and environment
//! variable. The parsers of its values are in `parse`, the library
//! configuration built from it in `config`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use kplug_operator::{
    AllowList, ChildKind, ChildKinds, ClientConfig, FailurePolicy, InitialList, Mutators, NoPlugin,
    SelectionMode,
};

use crate::parse::{parse_duration, parse_owner, parse_plugin_uid, parse_size};

/// Delegates the reconciliation of custom resource kinds to plugins
/// running as sidecar containers next to this operator.
///
/// Plugins register by heartbeat on <socket-dir>/registry.sock and serve
/// <socket-dir>/plugins/<name>/plugin.sock. For each object of the managed kind the
/// operator picks an implementation (spec.preferredImplementation, sticky in
/// status.implementation), sends the plugin the object and its extensions,
/// and writes back the status it returns.
///
/// Example:
///   kplug-operator --resource myorg.org/v1alpha1/DatabaseTable --socket-dir /var/run/kplug
///
/// The kubeconfig is found the usual way: in-cluster service account,
/// $KUBECONFIG, or ~/.kube/config. Logs: RUST_LOG (default info).
#[derive(Debug, Parser)]
#[command(name = "kplug-operator", version, verbatim_doc_comment)]
pub(crate) struct Args {
    /// A kind to manage, as <group>/<version>/<Kind> (e.g.
    /// myorg.org/v1alpha1/DatabaseTable; v1/ConfigMap for the core group).
    /// Repeat it to manage several kinds in one process, with one registry
    /// and one set of plugin connections: a plugin offers implementations
    /// per kind
    #[arg(long, env = "KPLUG_RESOURCE", value_delimiter = ',', required = true)]
    pub(crate) resource: Vec<String>,

    /// Directory shared with the plugin containers (an emptyDir)
    #[arg(long, env = kplug_proto::SOCKET_DIR_ENV, default_value = kplug_proto::DEFAULT_SOCKET_DIR)]
    pub(crate) socket_dir: PathBuf,

    /// Watch only this namespace (default: all namespaces)
    #[arg(long, env = "KPLUG_NAMESPACE")]
    pub(crate) namespace: Option<String>,

    /// preferred: one implementation per object (recorded, else preferred,
    /// else the first ready one); all: every plugin serving the kind
    #[arg(
        long,
        default_value = "preferred",
        value_parser = PossibleValuesParser::new(SelectionMode::NAMES).try_map(|s| s.parse::<SelectionMode>()),
    )]
    pub(crate) selection: SelectionMode,

    /// Remove a plugin not heard from for this long (e.g. 15s, 1m). Also the
    /// start-up grace: for this long after start, an object whose preferred
    /// implementation is not offered yet waits for it instead of falling back
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub(crate) heartbeat_ttl: Duration,

    /// Heartbeat interval asked of plugins. Default: a third of
    /// --heartbeat-ttl (5s for the default 15s), so that a plugin is removed
    /// only after two heartbeats in a row were lost
    #[arg(long, value_parser = parse_duration)]
    pub(crate) heartbeat_interval: Option<Duration>,

    /// Deadline of each Reconcile, Finalize and Hook call, unless the plugin
    /// declares its own (a call policy, kept within [1s, 10m]). A call past
    /// its deadline is a timeout of that call; the plugin stays registered
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub(crate) call_timeout: Duration,

    /// Async hook calls that may wait to run (4 run at once); when the
    /// queue is full a call is dropped, with a HookDropped Warning Event
    #[arg(long, default_value_t = 256)]
    pub(crate) async_hook_queue: usize,

    /// Deadline of each Validate and Default call (admission), unless the
    /// plugin declares its own (kept within [1s, 10s]). Keep it below the
    /// webhook's timeout: the API server waits for the whole admission
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub(crate) admission_call_timeout: Duration,

    /// Calls in flight per plugin
    #[arg(long, default_value_t = 16)]
    pub(crate) max_in_flight: u32,

    /// Largest Reconcile/Finalize response read from a plugin (e.g. 2MiB,
    /// 512KiB); a larger one is refused before it is decoded
    #[arg(long, default_value = "2MiB", value_parser = parse_size)]
    pub(crate) max_response_size: usize,

    /// Plugin names registered at once; more are refused
    #[arg(long, default_value_t = 64)]
    pub(crate) max_plugins: usize,

    /// IMPLEMENTATION=PLUGIN: only PLUGIN may offer IMPLEMENTATION
    /// (repeatable; also one per variable KPLUG_IMPLEMENTATION_OWNER_<ANY>).
    /// Other implementations belong to the first plugin that registers with
    /// them
    #[arg(long, value_name = "IMPLEMENTATION=PLUGIN", value_parser = parse_owner)]
    pub(crate) implementation_owner: Vec<(String, String)>,

    /// NAME=UID: only processes of UID may register, renew or unregister the
    /// plugin NAME (repeatable; also one per variable KPLUG_PLUGIN_UID_<ANY>).
    /// Other names belong to the first UID that registers them, until they
    /// have been gone for the heartbeat TTL
    #[arg(long, value_name = "NAME=UID", value_parser = parse_plugin_uid)]
    pub(crate) plugin_uid: Vec<(String, u32)>,

    /// Objects reconciled at once
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) workers: u16,

    /// Reconciles one plugin may have in progress (below --workers, so that
    /// a plugin that hangs cannot hold every worker)
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) max_reconciles_per_plugin: u16,

    /// Field of the base object holding the extension references
    #[arg(long, default_value = "spec.extensions")]
    pub(crate) extensions_field: String,

    /// GROUP/KIND of an extension kind objects may reference (repeatable;
    /// core/ConfigMap for the core group). Nothing else is ever read as an
    /// extension: not the managed kind, not cluster-scoped kinds, not
    /// Secrets unless listed here. Each must be served by the API server
    /// when the operator starts (its CRD installed), or the operator exits
    /// naming it
    #[arg(
        long,
        env = "KPLUG_EXTENSION_KINDS",
        value_delimiter = ',',
        value_name = "GROUP/KIND",
        value_parser = AllowList::parse_kind
    )]
    pub(crate) extension_kind: Vec<(String, String)>,

    /// [PLUGIN=]APIVERSION/KIND of the children plugins may have the
    /// operator apply (repeatable, comma-separated; without PLUGIN= for
    /// every plugin), e.g. v1/ConfigMap,apps/v1/Deployment or
    /// postgresql=v1/Secret. Nothing else is ever applied for a plugin:
    /// Secrets only when listed, never RBAC, admission, ServiceAccount,
    /// Namespace or CRD kinds, never a cluster-scoped kind. Each is watched
    /// (only objects labelled kplug.io/base-uid) and must be served when
    /// the operator starts
    #[arg(
        long,
        env = "KPLUG_CHILD_KINDS",
        value_name = "[PLUGIN=]APIVERSION/KIND,...",
        value_parser = ChildKinds::parse
    )]
    pub(crate) child_kinds: Vec<Vec<ChildKind>>,

    /// PLUGIN=APIVERSION/KIND: a plugin that patches the children of that
    /// kind before they are applied (its Mutate), e.g.
    /// backup=apps/v1/Deployment (repeatable, comma-separated). Mutators
    /// run in the order given; a mutator that is down holds the applies it
    /// would change. Secrets are never sent to a mutator unless listed
    #[arg(
        long,
        env = "KPLUG_MUTATORS",
        value_name = "PLUGIN=APIVERSION/KIND,...",
        value_parser = Mutators::parse
    )]
    pub(crate) mutators: Vec<Vec<(String, kube::core::GroupVersionKind)>>,

    /// Field of the base object naming the preferred implementation
    #[arg(long, default_value = "spec.preferredImplementation")]
    pub(crate) preferred_field: String,

    /// Finalizer added once an implementation is chosen
    #[arg(long, default_value = "kplug.io/finalizer")]
    pub(crate) finalizer: String,

    /// How the watches fill their caches at start: streaming (one WATCH per
    /// kind, answered from the API server's watch cache), paged (a LIST in
    /// pages of 500, then a WATCH), or auto: streaming from Kubernetes 1.32
    /// on, where the WatchList feature is on by default (paged on an API
    /// server that turned it off)
    #[arg(
        long,
        default_value = "auto",
        value_parser = PossibleValuesParser::new(InitialList::NAMES).try_map(|s| s.parse::<InitialList>()),
    )]
    pub(crate) initial_list: InitialList,

    /// Requeue successfully reconciled objects after this long (drift checks)
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub(crate) resync: Duration,

    /// Reconcile only while holding a coordination.k8s.io Lease, so that
    /// several replicas (each with its own plugin sidecars) can run and one
    /// leads; --leader-election=false to reconcile unconditionally
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub(crate) leader_election: bool,

    /// The leader Lease's name (default: kplug-<kind>-<group>, lowercase)
    #[arg(long)]
    pub(crate) lease_name: Option<String>,

    /// The leader Lease's namespace (default: $POD_NAMESPACE, else
    /// --namespace, else default)
    #[arg(long)]
    pub(crate) lease_namespace: Option<String>,

    /// How long the leader's Lease stays valid without renewal: a leader
    /// that dies is replaced within this time
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub(crate) lease_duration: Duration,

    /// Export OpenTelemetry spans to this OTLP/gRPC endpoint (e.g.
    /// http://collector:4317): a reconcile and its plugin calls are one
    /// trace, which the plugins continue (W3C traceparent), and the
    /// Ready condition (Reconciled, after a failed call) names its trace
    /// id. Off when unset
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub(crate) otlp_endpoint: Option<String>,

    /// Serve /metrics, /healthz, /readyz and /plugins (for kubectl kplug) here
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub(crate) metrics_addr: SocketAddr,

    /// Serve the admission webhooks over HTTPS here (e.g. 0.0.0.0:9443):
    /// /mutate asks plugins for defaults (Default), /validate whether an
    /// object is valid (Validate), as objects of the managed kind and its
    /// extension kinds are created or changed. Off when unset
    #[arg(
        long,
        env = "KPLUG_WEBHOOK_ADDR",
        value_name = "ADDR",
        help_heading = "Admission webhooks"
    )]
    pub(crate) webhook_addr: Option<SocketAddr>,

    /// Directory with the webhooks' certificate: tls.crt and tls.key (and
    /// ca.crt, for the caBundle), as a kubernetes.io/tls Secret mounts them;
    /// reread when they change. Unset: the operator makes a CA and a
    /// certificate for the --webhook-url host or the --webhook-service
    /// names at every start
    #[arg(
        long,
        env = "KPLUG_WEBHOOK_CERT_DIR",
        requires = "webhook_addr",
        value_name = "DIR",
        help_heading = "Admission webhooks"
    )]
    pub(crate) webhook_cert_dir: Option<PathBuf>,

    /// Create or update the ValidatingWebhookConfiguration and
    /// MutatingWebhookConfiguration (named kplug.<plural>.<group>, plus
    /// .<namespace> with --namespace) by server-side apply, with the CA
    /// bundle; needs RBAC on both kinds. Off: register them yourself
    #[arg(
        long,
        env = "KPLUG_WEBHOOK_SELF_REGISTER",
        requires = "webhook_addr",
        help_heading = "Admission webhooks"
    )]
    pub(crate) webhook_self_register: bool,

    /// How the API server reaches the webhooks, as a URL (outside a
    /// cluster, e.g. https://127.0.0.1:9443); without --webhook-cert-dir,
    /// the certificate the operator makes is for its host
    #[arg(
        long,
        env = "KPLUG_WEBHOOK_URL",
        requires = "webhook_addr",
        value_name = "URL",
        conflicts_with = "webhook_service",
        value_parser = ClientConfig::parse_url,
        help_heading = "Admission webhooks"
    )]
    pub(crate) webhook_url: Option<ClientConfig>,

    /// How the API server reaches the webhooks, as the Service in front of
    /// the operator (in a cluster): NAMESPACE/NAME[:PORT], port 443 by
    /// default; without --webhook-cert-dir, the certificate the operator
    /// makes is for the Service's DNS names
    #[arg(
        long,
        env = "KPLUG_WEBHOOK_SERVICE",
        requires = "webhook_addr",
        value_name = "NAMESPACE/NAME[:PORT]",
        value_parser = ClientConfig::parse_service,
        help_heading = "Admission webhooks"
    )]
    pub(crate) webhook_service: Option<ClientConfig>,

    /// When a plugin's Validate or Default call fails (error, timeout,
    /// invalid answer, plugin down) and the plugin declared no failure
    /// policy: Fail refuses the object naming the plugin, Ignore admits it
    /// with a warning. Also the configurations' failurePolicy (the operator
    /// itself unreachable)
    #[arg(
        long,
        default_value = "Fail",
        value_parser = PossibleValuesParser::new(FailurePolicy::NAMES).try_map(|s| s.parse::<FailurePolicy>()),
        help_heading = "Admission webhooks"
    )]
    pub(crate) webhook_failure_policy: FailurePolicy,

    /// When no plugin can be asked about an object (none ready serves its
    /// kind): allow admits it with a warning saying so, deny refuses it
    #[arg(
        long,
        default_value = "allow",
        value_parser = PossibleValuesParser::new(NoPlugin::NAMES).try_map(|s| s.parse::<NoPlugin>()),
        help_heading = "Admission webhooks"
    )]
    pub(crate) webhook_no_plugin: NoPlugin,

    /// How long the API server waits for a webhook (the configurations'
    /// timeoutSeconds, whole seconds from 1s to 30s); keep
    /// --admission-call-timeout below it
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Admission webhooks")]
    pub(crate) webhook_timeout: Duration,

    /// The webhook configurations' name (default: kplug.<plural>.<group>,
    /// plus .<namespace> with --namespace)
    #[arg(long, value_name = "NAME", help_heading = "Admission webhooks")]
    pub(crate) webhook_name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}

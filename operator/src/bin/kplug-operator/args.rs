//! The command line: every flag, its `--help` text and environment
//! variable, the parsers of its values, and the library configuration built
//! from it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use k8s_openapi::api::core::v1::ObjectReference;
use kplug_operator::{
    AllowList, ChildKind, ChildKinds, ClientConfig, FailurePolicy, InitialList, LeaderElection,
    Mutators, NoPlugin, RegistryConfig, SelectionMode, Settings, WebhookConfig,
};
use kube::runtime::events::Reporter;

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
    resource: Vec<String>,

    /// Directory shared with the plugin containers (an emptyDir)
    #[arg(long, env = kplug_proto::SOCKET_DIR_ENV, default_value = kplug_proto::DEFAULT_SOCKET_DIR)]
    socket_dir: PathBuf,

    /// Watch only this namespace (default: all namespaces)
    #[arg(long, env = "KPLUG_NAMESPACE")]
    namespace: Option<String>,

    /// preferred: one implementation per object (recorded, else preferred,
    /// else the first ready one); all: every plugin serving the kind
    #[arg(
        long,
        default_value = "preferred",
        value_parser = PossibleValuesParser::new(SelectionMode::NAMES).try_map(|s| s.parse::<SelectionMode>()),
    )]
    selection: SelectionMode,

    /// Remove a plugin not heard from for this long (e.g. 15s, 1m). Also the
    /// start-up grace: for this long after start, an object whose preferred
    /// implementation is not offered yet waits for it instead of falling back
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    heartbeat_ttl: Duration,

    /// Heartbeat interval asked of plugins. Default: a third of
    /// --heartbeat-ttl (5s for the default 15s), so that a plugin is removed
    /// only after two heartbeats in a row were lost
    #[arg(long, value_parser = parse_duration)]
    heartbeat_interval: Option<Duration>,

    /// Deadline of each Reconcile, Finalize and Hook call, unless the plugin
    /// declares its own (a call policy, kept within [1s, 10m]). A call past
    /// its deadline is a timeout of that call; the plugin stays registered
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    call_timeout: Duration,

    /// Async hook calls that may wait to run (4 run at once); when the
    /// queue is full a call is dropped, with a HookDropped Warning Event
    #[arg(long, default_value_t = 256)]
    async_hook_queue: usize,

    /// Deadline of each Validate and Default call (admission), unless the
    /// plugin declares its own (kept within [1s, 10s]). Keep it below the
    /// webhook's timeout: the API server waits for the whole admission
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    admission_call_timeout: Duration,

    /// Calls in flight per plugin
    #[arg(long, default_value_t = 16)]
    max_in_flight: u32,

    /// Largest Reconcile/Finalize response read from a plugin (e.g. 2MiB,
    /// 512KiB); a larger one is refused before it is decoded
    #[arg(long, default_value = "2MiB", value_parser = parse_size)]
    max_response_size: usize,

    /// Plugin names registered at once; more are refused
    #[arg(long, default_value_t = 64)]
    max_plugins: usize,

    /// IMPLEMENTATION=PLUGIN: only PLUGIN may offer IMPLEMENTATION
    /// (repeatable; also one per variable KPLUG_IMPLEMENTATION_OWNER_<ANY>).
    /// Other implementations belong to the first plugin that registers with
    /// them
    #[arg(long, value_name = "IMPLEMENTATION=PLUGIN", value_parser = parse_owner)]
    implementation_owner: Vec<(String, String)>,

    /// NAME=UID: only processes of UID may register, renew or unregister the
    /// plugin NAME (repeatable; also one per variable KPLUG_PLUGIN_UID_<ANY>).
    /// Other names belong to the first UID that registers them, until they
    /// have been gone for the heartbeat TTL
    #[arg(long, value_name = "NAME=UID", value_parser = parse_plugin_uid)]
    plugin_uid: Vec<(String, u32)>,

    /// Objects reconciled at once
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    workers: u16,

    /// Reconciles one plugin may have in progress (below --workers, so that
    /// a plugin that hangs cannot hold every worker)
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u16).range(1..))]
    max_reconciles_per_plugin: u16,

    /// Field of the base object holding the extension references
    #[arg(long, default_value = "spec.extensions")]
    extensions_field: String,

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
    extension_kind: Vec<(String, String)>,

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
    child_kinds: Vec<Vec<ChildKind>>,

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
    mutators: Vec<Vec<(String, kube::core::GroupVersionKind)>>,

    /// Field of the base object naming the preferred implementation
    #[arg(long, default_value = "spec.preferredImplementation")]
    preferred_field: String,

    /// Finalizer added once an implementation is chosen
    #[arg(long, default_value = "kplug.io/finalizer")]
    finalizer: String,

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
    initial_list: InitialList,

    /// Requeue successfully reconciled objects after this long (drift checks)
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    resync: Duration,

    /// Reconcile only while holding a coordination.k8s.io Lease, so that
    /// several replicas (each with its own plugin sidecars) can run and one
    /// leads; --leader-election=false to reconcile unconditionally
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    leader_election: bool,

    /// The leader Lease's name (default: kplug-<kind>-<group>, lowercase)
    #[arg(long)]
    lease_name: Option<String>,

    /// The leader Lease's namespace (default: $POD_NAMESPACE, else
    /// --namespace, else default)
    #[arg(long)]
    lease_namespace: Option<String>,

    /// How long the leader's Lease stays valid without renewal: a leader
    /// that dies is replaced within this time
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    lease_duration: Duration,

    /// Export OpenTelemetry spans to this OTLP/gRPC endpoint (e.g.
    /// http://collector:4317): a reconcile and its plugin calls are one
    /// trace, which the plugins continue (W3C traceparent), and the
    /// Ready condition (Reconciled, after a failed call) names its trace
    /// id. Off when unset
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub(crate) otlp_endpoint: Option<String>,

    /// Serve /metrics, /healthz, /readyz and /plugins (for kubectl kplug) here
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,

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
    webhook_addr: Option<SocketAddr>,

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
    webhook_cert_dir: Option<PathBuf>,

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
    webhook_self_register: bool,

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
    webhook_url: Option<ClientConfig>,

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
    webhook_service: Option<ClientConfig>,

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
    webhook_failure_policy: FailurePolicy,

    /// When no plugin can be asked about an object (none ready serves its
    /// kind): allow admits it with a warning saying so, deny refuses it
    #[arg(
        long,
        default_value = "allow",
        value_parser = PossibleValuesParser::new(NoPlugin::NAMES).try_map(|s| s.parse::<NoPlugin>()),
        help_heading = "Admission webhooks"
    )]
    webhook_no_plugin: NoPlugin,

    /// How long the API server waits for a webhook (the configurations'
    /// timeoutSeconds, whole seconds from 1s to 30s); keep
    /// --admission-call-timeout below it
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Admission webhooks")]
    webhook_timeout: Duration,

    /// The webhook configurations' name (default: kplug.<plural>.<group>,
    /// plus .<namespace> with --namespace)
    #[arg(long, value_name = "NAME", help_heading = "Admission webhooks")]
    webhook_name: Option<String>,
}

/// Parses `500ms`, `15s`, `2m`, `1h` (a bare number means seconds).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; use e.g. 500ms, 15s, 2m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// Parses `sqlite=65533`.
fn parse_plugin_uid(s: &str) -> Result<(String, u32), String> {
    match s.split_once('=') {
        Some((name, uid)) if !name.is_empty() => uid
            .parse()
            .map(|uid| (name.to_owned(), uid))
            .map_err(|_| format!("{s:?}: {uid:?} is not a UID (a number)")),
        _ => Err(format!("{s:?}: expected NAME=UID, e.g. sqlite=65533")),
    }
}

/// Entries of a repeatable flag from the environment: each variable whose
/// name starts with `prefix` holds one, parsed with `parse`. One variable
/// per plugin lets each kustomize component add its own mapping to the
/// operator container (env entries merge by name; args cannot be merged).
fn entries_from_env<T>(
    vars: impl Iterator<Item = (String, String)>,
    prefix: &str,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut vars: Vec<(String, String)> = vars.filter(|(key, _)| key.starts_with(prefix)).collect();
    vars.sort();
    vars.into_iter()
        .map(|(key, value)| parse(&value).map_err(|e| format!("environment variable {key}: {e}")))
        .collect()
}

/// Parses `SQLite=sqlite`.
fn parse_owner(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((implementation, plugin)) if !implementation.is_empty() && !plugin.is_empty() => {
            Ok((implementation.to_owned(), plugin.to_owned()))
        }
        _ => Err(format!(
            "{s:?}: expected IMPLEMENTATION=PLUGIN, e.g. SQLite=sqlite"
        )),
    }
}

/// Parses `2MiB`, `512KiB`, `1048576` (bytes).
fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("{s:?} is not a size; use e.g. 2MiB, 512KiB or bytes"))?;
    let unit = match unit {
        "" | "B" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use KiB or MiB")),
    };
    n.checked_mul(unit)
        .filter(|&bytes| bytes > 0)
        .ok_or_else(|| format!("{s:?} must be more than 0 and fit in memory"))
}

fn path(field: &str) -> Vec<String> {
    field.split('.').map(str::to_owned).collect()
}

impl Args {
    /// Adds the entries of the repeatable mapping flags that come from the
    /// environment (`KPLUG_PLUGIN_UID_*`, `KPLUG_IMPLEMENTATION_OWNER_*`).
    ///
    /// # Errors
    /// A message naming the variable and what is wrong with its value.
    pub(crate) fn merge_env(&mut self, vars: &[(String, String)]) -> Result<(), String> {
        let uids = entries_from_env(vars.iter().cloned(), "KPLUG_PLUGIN_UID_", parse_plugin_uid)?;
        let owners = entries_from_env(
            vars.iter().cloned(),
            "KPLUG_IMPLEMENTATION_OWNER_",
            parse_owner,
        )?;
        self.plugin_uid.extend(uids);
        self.implementation_owner.extend(owners);
        Ok(())
    }

    /// The library's configuration. Events are reported as `reporter`, the
    /// registry's on `operator_pod`; the Lease lives in `--lease-namespace`,
    /// else the Pod's namespace, else `--namespace`, else `default`.
    pub(crate) fn into_config(
        self,
        reporter: Reporter,
        operator_pod: Option<ObjectReference>,
        pod_namespace: Option<String>,
    ) -> kplug_operator::Config {
        let leader_election = self.leader_election.then(|| {
            // <group>/<version>/<Kind>; a malformed one is reported by run().
            let first = self.resource.first().cloned().unwrap_or_default();
            let mut parts = first.rsplit('/');
            let (kind, group) = (parts.next(), parts.nth(1));
            LeaderElection {
                lease_name: self.lease_name.clone().unwrap_or_else(|| match kind {
                    Some(kind) => {
                        LeaderElection::default_lease_name(kind, group.unwrap_or_default())
                    }
                    None => "kplug-operator".to_owned(),
                }),
                lease_namespace: self
                    .lease_namespace
                    .clone()
                    .or(pod_namespace)
                    .or_else(|| self.namespace.clone())
                    .unwrap_or_else(|| "default".to_owned()),
                identity: LeaderElection::default_identity(),
                duration: self.lease_duration,
                // Renew a third of the way before expiry (at least 1 s).
                grace: (self.lease_duration / 3).max(Duration::from_secs(1)),
            }
        });
        let webhook = self.webhook_addr.map(|addr| WebhookConfig {
            cert_dir: self.webhook_cert_dir.clone(),
            self_register: self.webhook_self_register,
            client: self.webhook_url.clone().or(self.webhook_service.clone()),
            failure_policy: self.webhook_failure_policy,
            no_plugin: self.webhook_no_plugin,
            timeout: self.webhook_timeout,
            name: self.webhook_name.clone(),
            ..WebhookConfig::new(addr)
        });
        kplug_operator::Config {
            webhook,
            resources: self.resource,
            namespace: self.namespace,
            registry: RegistryConfig {
                socket_dir: self.socket_dir,
                heartbeat_ttl: self.heartbeat_ttl,
                heartbeat_interval: self.heartbeat_interval.unwrap_or(self.heartbeat_ttl / 3),
                call_timeout: self.call_timeout,
                admission_call_timeout: self.admission_call_timeout,
                max_in_flight: self.max_in_flight,
                max_response_bytes: self.max_response_size,
                max_plugins: self.max_plugins,
                implementation_owners: self.implementation_owner,
                plugin_uids: self.plugin_uid,
                ..RegistryConfig::default()
            },
            settings: Settings {
                selection: self.selection,
                extensions_field: path(&self.extensions_field),
                preferred_field: path(&self.preferred_field),
                finalizer: self.finalizer,
                resync: self.resync,
                async_hook_queue: self.async_hook_queue,
                ..Settings::default()
            },
            metrics_addr: Some(self.metrics_addr),
            concurrency: self.workers,
            leader_election,
            extension_kinds: AllowList::new(self.extension_kind),
            child_kinds: ChildKinds::new(self.child_kinds.into_iter().flatten().collect()),
            mutators: Mutators::new(self.mutators.into_iter().flatten().collect()),
            max_reconciles_per_plugin: self.max_reconciles_per_plugin,
            initial_list: self.initial_list,
            reporter,
            operator_pod,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2MiB").unwrap(), 2 * 1024 * 1024);
        assert_eq!(parse_size("512KiB").unwrap(), 512 * 1024);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("0").is_err());
        assert!(parse_size("2MB").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn mappings_come_from_one_variable_each() {
        let vars = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<Vec<_>>()
                .into_iter()
        };
        let uids = entries_from_env(
            vars(&[
                ("KPLUG_PLUGIN_UID_SQLITE", "sqlite=10001"),
                ("HOME", "/root"),
                ("KPLUG_PLUGIN_UID_MARIADB", "mariadb=10002"),
            ]),
            "KPLUG_PLUGIN_UID_",
            parse_plugin_uid,
        )
        .unwrap();
        assert_eq!(
            uids,
            [("mariadb".to_owned(), 10002), ("sqlite".to_owned(), 10001)]
        );
        let err = entries_from_env(
            vars(&[("KPLUG_PLUGIN_UID_SQLITE", "sqlite=root")]),
            "KPLUG_PLUGIN_UID_",
            parse_plugin_uid,
        )
        .unwrap_err();
        assert!(
            err.contains("KPLUG_PLUGIN_UID_SQLITE") && err.contains("not a UID"),
            "{err}"
        );
    }

    #[test]
    fn webhook_flags_need_an_address() {
        let parse = |args: &[&str]| {
            Args::try_parse_from(
                ["kplug-operator", "--resource", "a.b/v1/C"]
                    .iter()
                    .chain(args),
            )
        };
        assert!(parse(&["--webhook-self-register"]).is_err());
        assert!(parse(&["--webhook-url", "https://127.0.0.1:1"]).is_err());
        assert!(
            parse(&[
                "--webhook-url",
                "http://127.0.0.1:1",
                "--webhook-addr",
                "127.0.0.1:1"
            ])
            .is_err()
        );
        let args = parse(&[
            "--webhook-addr",
            "127.0.0.1:9443",
            "--webhook-service",
            "kplug-system/kplug-webhook",
            "--webhook-self-register",
            "--webhook-failure-policy",
            "Ignore",
            "--webhook-no-plugin",
            "deny",
        ])
        .unwrap();
        let config = args.into_config(Reporter::from("t"), None, None);
        let webhook = config.webhook.unwrap();
        assert!(webhook.self_register);
        assert_eq!(webhook.failure_policy, FailurePolicy::Ignore);
        assert_eq!(webhook.no_plugin, NoPlugin::Deny);
        assert_eq!(webhook.timeout, Duration::from_secs(10));
        assert!(
            parse(&[])
                .unwrap()
                .into_config(Reporter::from("t"), None, None)
                .webhook
                .is_none()
        );
    }

    #[test]
    fn the_heartbeat_interval_follows_the_ttl_unless_given() {
        let registry = |args: &[&str]| {
            Args::try_parse_from(
                ["kplug-operator", "--resource", "a.b/v1/C"]
                    .iter()
                    .chain(args),
            )
            .unwrap()
            .into_config(Reporter::from("t"), None, None)
            .registry
        };
        let defaults = registry(&[]);
        assert_eq!(
            (defaults.heartbeat_ttl, defaults.heartbeat_interval),
            (Duration::from_secs(15), Duration::from_secs(5))
        );
        // A TTL alone is enough: it used to need --heartbeat-interval too.
        let short = registry(&["--heartbeat-ttl", "3s"]);
        assert_eq!(short.heartbeat_interval, Duration::from_secs(1));
        short.validate().unwrap();
        let both = registry(&["--heartbeat-ttl", "3s", "--heartbeat-interval", "500ms"]);
        assert_eq!(both.heartbeat_interval, Duration::from_millis(500));
        assert!(
            registry(&["--heartbeat-ttl", "3s", "--heartbeat-interval", "2s"])
                .validate()
                .is_err()
        );
    }

    #[test]
    fn help_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}

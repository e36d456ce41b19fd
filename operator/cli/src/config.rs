//! The library's configuration, built from the command line and the
//! environment.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kplug_operator::{
    AllowList, ChildKinds, LeaderElection, Mutators, RegistryConfig, Settings, WebhookConfig,
};
use kube::runtime::events::Reporter;

use crate::args::Args;
use crate::parse::{entries_from_env, parse_owner, parse_plugin_uid};

/// A dotted field path (`spec.extensions`) as its segments.
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
        let leader_election = self.leader_election_config(pod_namespace);
        let webhook = self.webhook_config();
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

    /// Leader election, unless `--leader-election=false`: the Lease in
    /// `--lease-namespace`, else `pod_namespace`, else `--namespace`, else
    /// `default`.
    fn leader_election_config(&self, pod_namespace: Option<String>) -> Option<LeaderElection> {
        self.leader_election.then(|| {
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
        })
    }

    /// The admission webhooks, with `--webhook-addr`.
    fn webhook_config(&self) -> Option<WebhookConfig> {
        self.webhook_addr.map(|addr| WebhookConfig {
            cert_dir: self.webhook_cert_dir.clone(),
            self_register: self.webhook_self_register,
            client: self.webhook_url.clone().or(self.webhook_service.clone()),
            failure_policy: self.webhook_failure_policy,
            no_plugin: self.webhook_no_plugin,
            timeout: self.webhook_timeout,
            name: self.webhook_name.clone(),
            ..WebhookConfig::new(addr)
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use kplug_operator::{FailurePolicy, NoPlugin};

    use super::*;

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
}

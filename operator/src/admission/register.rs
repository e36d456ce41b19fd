//! `--webhook-self-register`: the operator writes its own
//! ValidatingWebhookConfiguration and MutatingWebhookConfiguration, by
//! server-side apply with its field manager, and writes them again when its
//! CA bundle changes (a reloaded certificate).
//!
//! Both are named `kplug.<plural>.<group>` (with `.<namespace>` when the
//! operator watches one namespace, so that operators of the same kind in
//! different namespaces do not overwrite each other's), and cover CREATE and
//! UPDATE of the managed kind and of every allowed extension kind.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::config::{ClientConfig, WebhookConfig};

/// A kind the webhooks are called for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resource {
    /// API group (`""` for the core group).
    pub(crate) group: String,
    /// Plural resource name.
    pub(crate) plural: String,
}

/// What the configurations are made of.
#[derive(Clone, Debug)]
pub(crate) struct Registration {
    /// Both configurations' name.
    pub(crate) name: String,
    /// The managed kind first, then the extension kinds.
    pub(crate) resources: Vec<Resource>,
    /// Only objects in this namespace (none: all).
    pub(crate) namespace: Option<String>,
    /// Where the API server sends the reviews.
    pub(crate) client: ClientConfig,
    /// `failurePolicy`.
    pub(crate) failure_policy: &'static str,
    /// `timeoutSeconds`.
    pub(crate) timeout_seconds: u64,
}

impl Registration {
    /// The registration for `config`, serving `resources` (the managed
    /// kind first).
    pub(crate) fn new(
        config: &WebhookConfig,
        client: ClientConfig,
        resources: Vec<Resource>,
        namespace: Option<String>,
    ) -> Self {
        let name = config.name.clone().unwrap_or_else(|| {
            let base = &resources[0];
            let mut name = format!("kplug.{}.{}", base.plural, base.group);
            if base.group.is_empty() {
                name = format!("kplug.{}.core", base.plural);
            }
            if let Some(ns) = &namespace {
                name = format!("{name}.{ns}");
            }
            name
        });
        Self {
            name,
            resources,
            namespace,
            client,
            failure_policy: config.failure_policy.as_str(),
            timeout_seconds: config.timeout.as_secs(),
        }
    }

    /// One webhook of a configuration, named `<prefix>.<name>` and served
    /// on `path`.
    fn webhook(&self, prefix: &str, path: &str, ca_bundle: &[u8]) -> Value {
        let client_config = match &self.client {
            ClientConfig::Url(url) => json!({"url": format!("{url}{path}")}),
            ClientConfig::Service {
                namespace,
                name,
                port,
            } => json!({"service": {
                "namespace": namespace, "name": name, "port": port, "path": path,
            }}),
        };
        let mut client_config = client_config;
        client_config["caBundle"] = json!(base64(ca_bundle));
        let rules: Vec<Value> = self
            .resources
            .iter()
            .map(|r| {
                json!({
                    "apiGroups": [r.group], "apiVersions": ["*"], "resources": [r.plural],
                    "operations": ["CREATE", "UPDATE"], "scope": "*",
                })
            })
            .collect();
        let mut webhook = json!({
            "name": format!("{prefix}.{}", self.name),
            "clientConfig": client_config,
            "rules": rules,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": self.failure_policy,
            "timeoutSeconds": self.timeout_seconds,
            "matchPolicy": "Equivalent",
        });
        if let Some(ns) = &self.namespace {
            webhook["namespaceSelector"] =
                json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
        }
        webhook
    }

    /// The ValidatingWebhookConfiguration, as applied.
    pub(crate) fn validating(&self, ca_bundle: &[u8]) -> Value {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.name, "labels": {"app.kubernetes.io/managed-by": "kplug-operator"}},
            "webhooks": [self.webhook("validate", "/validate", ca_bundle)],
        })
    }

    /// The MutatingWebhookConfiguration, as applied.
    pub(crate) fn mutating(&self, ca_bundle: &[u8]) -> Value {
        let mut webhook = self.webhook("default", "/mutate", ca_bundle);
        // Plugins default once; another webhook's change after them is
        // validated, not defaulted again.
        webhook["reinvocationPolicy"] = json!("Never");
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": self.name, "labels": {"app.kubernetes.io/managed-by": "kplug-operator"}},
            "webhooks": [webhook],
        })
    }

    /// Applies both configurations with `ca_bundle`.
    ///
    /// # Errors
    /// [`crate::Error::Config`] naming the configuration, the API's answer
    /// and what the operator needs (RBAC).
    pub(crate) async fn apply(
        &self,
        client: &kube::Client,
        ca_bundle: &[u8],
        field_manager: &str,
    ) -> Result<(), crate::Error> {
        let params = PatchParams::apply(field_manager).force();
        let fail = |kind: &str, e: kube::Error| {
            crate::Error::Config(format!(
                "--webhook-self-register: cannot apply {kind} {}: {e}; the operator needs get, create, update and patch on {}s (admissionregistration.k8s.io) in its ClusterRole, or register the webhooks yourself and drop the flag",
                self.name,
                kind.to_ascii_lowercase()
            ))
        };
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .patch(
                &self.name,
                &params,
                &Patch::Apply(self.validating(ca_bundle)),
            )
            .await
            .map_err(|e| fail("ValidatingWebhookConfiguration", e))?;
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .patch(&self.name, &params, &Patch::Apply(self.mutating(ca_bundle)))
            .await
            .map_err(|e| fail("MutatingWebhookConfiguration", e))?;
        Ok(())
    }
}

/// Standard base64 with padding (the API's encoding of bytes).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::admission::config::FailurePolicy;

    fn registration(client: ClientConfig, namespace: Option<&str>) -> Registration {
        let mut config = WebhookConfig::new("127.0.0.1:0".parse().unwrap());
        config.failure_policy = FailurePolicy::Ignore;
        config.timeout = Duration::from_secs(7);
        Registration::new(
            &config,
            client,
            vec![
                Resource {
                    group: "myorg.org".into(),
                    plural: "databasetables".into(),
                },
                Resource {
                    group: "myorg.org".into(),
                    plural: "databasetablemariadbextensions".into(),
                },
            ],
            namespace.map(str::to_owned),
        )
    }

    #[test]
    fn configurations_cover_the_kinds_with_the_flags_settings() {
        let r = registration(
            ClientConfig::Url("https://127.0.0.1:9443".into()),
            Some("team-a"),
        );
        assert_eq!(r.name, "kplug.databasetables.myorg.org.team-a");
        let v = r.validating(b"CA");
        assert_eq!(v["kind"], "ValidatingWebhookConfiguration");
        let w = &v["webhooks"][0];
        assert_eq!(w["name"], "validate.kplug.databasetables.myorg.org.team-a");
        assert_eq!(w["clientConfig"]["url"], "https://127.0.0.1:9443/validate");
        assert_eq!(w["clientConfig"]["caBundle"], "Q0E=");
        assert_eq!(w["failurePolicy"], "Ignore");
        assert_eq!(w["timeoutSeconds"], 7);
        assert_eq!(w["sideEffects"], "None");
        assert_eq!(w["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(
            w["rules"][1]["resources"],
            json!(["databasetablemariadbextensions"])
        );
        assert_eq!(w["rules"][0]["operations"], json!(["CREATE", "UPDATE"]));
        assert_eq!(
            w["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "team-a"
        );
        let m = r.mutating(b"CA");
        assert_eq!(
            m["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:9443/mutate"
        );
        assert_eq!(
            m["webhooks"][0]["name"],
            "default.kplug.databasetables.myorg.org.team-a"
        );

        let s = registration(
            ClientConfig::Service {
                namespace: "kplug-system".into(),
                name: "kplug-webhook".into(),
                port: 443,
            },
            None,
        );
        assert_eq!(s.name, "kplug.databasetables.myorg.org");
        let w = &s.mutating(b"CA")["webhooks"][0];
        assert_eq!(w["clientConfig"]["service"]["path"], "/mutate");
        assert_eq!(w["clientConfig"]["service"]["namespace"], "kplug-system");
        assert!(w.get("namespaceSelector").is_none());
    }

    #[test]
    fn base64_is_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}

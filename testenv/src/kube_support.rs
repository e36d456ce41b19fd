//! Clients, namespaces and CRDs on the test control plane.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config};

use crate::control_plane::{ControlPlane, control_plane};

/// The field manager this crate applies CRDs with.
pub const FIELD_MANAGER: &str = "kplug-testenv";

/// How long a CRD may take to become `Established` (it takes well under a
/// second on an idle control plane).
const CRD_ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);

/// A new client for the shared control plane ([`control_plane`], started on
/// first use), built from its admin kubeconfig.
///
/// Every call builds a fresh client: a `kube::Client` holds connections bound
/// to the Tokio runtime it was first used on, and every `#[tokio::test]` has
/// its own runtime, so clients must never be shared between tests.
///
/// # Panics
///
/// When the control plane cannot be started, or its kubeconfig cannot be
/// turned into a client (a broken kube-testenv: rebuild it with `make testenv`).
pub async fn client() -> Client {
    let control_plane = control_plane();
    let path = control_plane.kubeconfig_path();
    match client_from_kubeconfig(path).await {
        Ok(client) => client,
        Err(err) => panic!(
            "kplug-testenv: no client from the kubeconfig {} of the control plane at {}: {err:#} \
             (rebuild kube-testenv with `make testenv`)",
            path.display(),
            control_plane.server()
        ),
    }
}

/// A new client from the kubeconfig at `path`, with its current context.
///
/// The same rules as for [`client`] apply: a client belongs to the Tokio
/// runtime it is first used on.
pub async fn client_from_kubeconfig(path: &Path) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("the kubeconfig {}", path.display()))?;
    Ok(Client::try_from(config)?)
}

impl ControlPlane {
    /// A new client for this control plane, built from its kubeconfig (see
    /// [`client_from_kubeconfig`]).
    ///
    /// A client of a control plane from
    /// [`ControlPlane::start_with`] keeps working across its restarts: the
    /// kubeconfig (server, CA, admin credentials) stays the same. Requests
    /// while it is stopped fail (connection refused), and a watch ends with
    /// an error; `kube::runtime::watcher` retries (with a backoff: use
    /// `WatchStreamExt::default_backoff`) and resumes once it is back.
    pub async fn client(&self) -> Result<Client> {
        client_from_kubeconfig(self.kubeconfig_path()).await
    }
}

/// Creates a fresh namespace `<prefix>-<8 random hex digits>` for one test
/// and returns its name. The prefix is made a valid DNS label first
/// (lowercase; other characters than letters and digits become `-`;
/// shortened), so a test's name can be passed as it is.
///
/// Namespaces are not deleted afterwards: without a controller manager a
/// deleted namespace never finishes terminating, and the whole control plane
/// goes away with the test binary anyway.
pub async fn namespace(client: &Client, prefix: &str) -> Result<String> {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("{}-{}", dns_label_prefix(prefix), &suffix[..8]);
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([("kplug.dev/testenv".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating the test namespace {name:?}"))?;
    Ok(name)
}

/// `prefix` as the start of a DNS label (RFC 1123: lowercase letters, digits
/// and `-`, starting with a letter or digit) that leaves room for `-` and 8
/// more characters within 63.
fn dns_label_prefix(prefix: &str) -> String {
    let label: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let label: String = label.trim_start_matches('-').chars().take(63 - 9).collect();
    match label.trim_end_matches('-') {
        "" => "test".to_owned(),
        label => label.to_owned(),
    }
}

/// Installs (creates, or replaces) CRDs with server-side apply under the field
/// manager [`FIELD_MANAGER`], then waits until each is `Established`, that is
/// served by the API server.
///
/// Fails with the CRD's name when the API server refuses it or it is not
/// established within 30 s (with its last conditions).
pub async fn install_crds(client: &Client, crds: &[CustomResourceDefinition]) -> Result<()> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::with_capacity(crds.len());
    for crd in crds {
        let name = crd
            .metadata
            .name
            .clone()
            .context("a CustomResourceDefinition without metadata.name cannot be installed")?;
        // Server-side apply refuses managedFields, and a resourceVersion
        // would turn the apply into a conditional update; a CRD read back
        // from a server carries both.
        let mut crd = crd.clone();
        crd.metadata.managed_fields = None;
        crd.metadata.resource_version = None;
        crd.metadata.uid = None;
        crd.metadata.creation_timestamp = None;
        crd.metadata.generation = None;
        crd.status = None;
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("installing the CRD {name}"))?;
        names.push(name);
    }
    for name in names {
        let established = tokio::time::timeout(
            CRD_ESTABLISHED_TIMEOUT,
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await;
        match established {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => {
                return Err(err).with_context(|| format!("waiting for the CRD {name}"));
            }
            Err(_) => {
                let conditions = match api.get(&name).await {
                    Ok(crd) => format!(
                        "{:?}",
                        crd.status
                            .and_then(|status| status.conditions)
                            .unwrap_or_default()
                    ),
                    Err(err) => format!("(could not read it back: {err})"),
                };
                bail!(
                    "the CRD {name} was not Established within {}s; its conditions: {conditions}",
                    CRD_ESTABLISHED_TIMEOUT.as_secs()
                );
            }
        }
    }
    Ok(())
}

/// Installs the CRDs of a YAML text (one or more documents separated by
/// `---`) like [`install_crds`].
pub async fn install_crd_yaml(client: &Client, yaml: &str) -> Result<()> {
    install_crds(client, &parse_crd_yaml(yaml)?).await
}

/// Parses CustomResourceDefinitions from YAML (one or more documents; empty
/// documents are skipped). Fails, naming the document, on anything that is
/// not a CRD.
pub fn parse_crd_yaml(yaml: &str) -> Result<Vec<CustomResourceDefinition>> {
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(yaml).context("parsing the CRD YAML")?;
    let mut crds = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        if document.is_null() {
            continue;
        }
        let number = index + 1;
        let kind = document.get("kind").and_then(|kind| kind.as_str());
        if kind != Some("CustomResourceDefinition") {
            bail!(
                "YAML document {number} is not a CustomResourceDefinition (its kind is {kind:?})"
            );
        }
        let crd: CustomResourceDefinition = serde_json::from_value(document)
            .with_context(|| format!("YAML document {number} is not a valid CRD"))?;
        crds.push(crd);
    }
    if crds.is_empty() {
        bail!("the YAML holds no CustomResourceDefinition");
    }
    Ok(crds)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CRDS: &str = r#"
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.org
spec:
  group: example.org
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.org
spec:
  group: example.org
  names: {kind: Gadget, plural: gadgets}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object}
---
"#;

    #[test]
    fn namespace_prefixes_become_dns_labels() {
        assert_eq!(dns_label_prefix("my-test"), "my-test");
        assert_eq!(
            dns_label_prefix("Status_Is_Applied::per manager"),
            "status-is-applied--per-manager"
        );
        assert_eq!(dns_label_prefix("--x--"), "x");
        assert_eq!(dns_label_prefix("_"), "test");
        assert_eq!(dns_label_prefix(&"a".repeat(100)).len(), 54);
    }

    #[test]
    fn parses_multi_document_yaml() {
        let crds = parse_crd_yaml(TWO_CRDS).unwrap();
        let names: Vec<_> = crds
            .iter()
            .map(|crd| crd.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["widgets.example.org", "gadgets.example.org"]);
        assert_eq!(crds[1].spec.scope, "Cluster");
    }

    #[test]
    fn names_a_document_that_is_not_a_crd() {
        let yaml = format!("{TWO_CRDS}\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n");
        let err = parse_crd_yaml(&yaml).unwrap_err().to_string();
        assert!(
            err.contains("YAML document 3 is not a CustomResourceDefinition")
                && err.contains("ConfigMap"),
            "{err}"
        );
    }

    #[test]
    fn refuses_yaml_without_crds() {
        let err = parse_crd_yaml("---\n").unwrap_err().to_string();
        assert!(err.contains("no CustomResourceDefinition"), "{err}");
    }

    #[test]
    fn reports_malformed_yaml() {
        let err = parse_crd_yaml("kind: [unclosed").unwrap_err();
        assert!(
            format!("{err:#}").contains("parsing the CRD YAML"),
            "{err:#}"
        );
    }
}

//! The local control plane, the example's CRDs and its sample.

use anyhow::{Context, Result};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::{Client, Config, ResourceExt};
use serde_json::Value;

const CRDS: &str = include_str!("../../crds.yaml");
const SAMPLE: &str = include_str!("../../samples/users.yaml");

/// Starts a local control plane with the example's CRDs installed, and a
/// client of it.
pub(crate) async fn start() -> Result<(kplug_testenv::ControlPlane, Client)> {
    let control_plane = kplug_testenv::ControlPlane::start(&kplug_testenv::testenv_binary())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "    kube-apiserver {} ready in {:.1}s",
        control_plane.version(),
        control_plane.ready_in().as_secs_f64()
    );
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(control_plane.kubeconfig_path())?,
        &KubeConfigOptions::default(),
    )
    .await?;
    let client = Client::try_from(config)?;
    kplug_testenv::install_crd_yaml(&client, CRDS).await?;
    println!(
        "    installed the CRDs DatabaseTable, DatabaseTableMariaDbExtension, DatabaseTablePostgreSqlExtension, DatabaseTableSqliteExtension"
    );
    Ok((control_plane, client))
}

/// The `DatabaseTable` kind.
pub(crate) fn table_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("myorg.org", "v1alpha1", "DatabaseTable"),
        "databasetables",
    )
}

/// Creates the sample's objects in `ns`.
pub(crate) async fn apply_sample(client: &Client, ns: &str) -> Result<()> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(SAMPLE).context("parsing samples/users.yaml")?;
    // Extensions first, so the table resolves them at once.
    let mut documents: Vec<Value> = documents.into_iter().filter(|d| !d.is_null()).collect();
    documents.sort_by_key(|d| d["kind"] == "DatabaseTable");
    for doc in documents {
        let obj: DynamicObject = serde_json::from_value(doc)?;
        let types = obj
            .types
            .clone()
            .context("a sample without apiVersion/kind")?;
        let (group, version) = types
            .api_version
            .split_once('/')
            .unwrap_or(("", &types.api_version));
        let plural = format!("{}s", types.kind.to_lowercase());
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, &types.kind),
            &plural,
        );
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar)
            .create(&PostParams::default(), &obj)
            .await?;
        println!("    created {} {}", types.kind, obj.name_any());
    }
    Ok(())
}

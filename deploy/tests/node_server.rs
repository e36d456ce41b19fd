//! The `DatabaseServer` example on a real node (`kube-testenv --node`, with
//! kubelet, controller manager and scheduler), as
//! `examples/database-table/README.md`'s "DatabaseServer on a local node"
//! runs it, word for word: the `database-server` overlay's one operator
//! serves both kinds (a `DatabaseTable` converges on SQLite beside the
//! server), and for the server's plugin it applies a Deployment running
//! PostgreSQL, a Service, a Secret and a ConfigMap, passed through the
//! backup mutator. Then, looked at from the API and from the host:
//! - the server's pod runs PostgreSQL, ready, and the backup sidecar from
//!   the mutation runs beside it and writes a dump of the server into the
//!   shared volume (so the password from the Secret works);
//! - the server is Ready from the observed Deployment, with its
//!   `readyReplicas`;
//! - a settings edit rolls the Deployment (a new ReplicaSet) and the server
//!   is Ready again on the new template;
//! - deleting the server removes every child, and the ReplicaSets and pods
//!   under them;
//! - nothing is left on the machine when the node stops, and nothing left
//!   the machine meanwhile.
//!
//! Root only; needs `make images` and `make node-binaries` (the section's
//! first command).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kplug_deploy_tests::docs;
use kplug_deploy_tests::yaml::readiness;
use kplug_testenv::{Egress, HostSnapshot, eventually};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::json;

#[path = "node_server/walkthrough.rs"]
mod walkthrough;

use walkthrough::{Walkthrough, client_of, start_node, stop_node};

const README: &str = "examples/database-table/README.md";
const SECTION: &str = "DatabaseServer on a local node";
/// The sample server's name (samples/server.yaml), in `default`.
const SERVER: &str = "main";
/// Bound for a pod to start or roll on a busy machine: image unpacking,
/// initdb, probes.
const ROLLOUT: Duration = Duration::from_secs(240);

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("myorg.org", "v1alpha1", kind),
        plural,
    )
}

fn servers(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        "default",
        &resource("DatabaseServer", "databaseservers"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_database_server_example_runs_on_a_real_node() {
    let walkthrough = Walkthrough::read();
    tokio::task::block_in_place(|| {
        for command in &walkthrough.setup {
            docs::sh(command, None);
        }
    });
    let host = HostSnapshot::take();
    let egress = Egress::now();
    let started = std::time::Instant::now();
    let mut node = tokio::task::block_in_place(|| start_node(&walkthrough.node));
    let printed = tokio::task::block_in_place(|| docs::sh(&walkthrough.second.join("\n"), None));
    let row = printed
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{SERVER} ")))
        .unwrap_or_else(|| panic!("no {SERVER} row in:\n{}", printed.all));
    assert!(row.contains("PostgreSQL") && row.contains("True"), "{row}");

    let client = client_of(&walkthrough.kubeconfig()).await;
    the_pod_runs_postgresql_and_the_backup_sidecar(&client).await;
    a_table_converges_in_the_same_operator(&client).await;
    a_settings_edit_rolls_the_deployment(&client).await;
    deleting_the_server_removes_every_child(&client).await;
    drop(client);

    let exit = tokio::task::block_in_place(|| stop_node(&mut node));
    assert!(exit.success(), "the node after Ctrl-C: {exit}");
    eprintln!(
        "the DatabaseServer walkthrough on a node: {:?}",
        started.elapsed()
    );
    let leaks = host.leaks(&HostSnapshot::take());
    assert!(
        leaks.is_empty(),
        "the node left this behind:\n{}",
        leaks.join("\n")
    );
    let sent = egress.sent_since();
    assert!(
        sent.is_empty(),
        "packets left the machine through {:?}: {}",
        egress.interfaces(),
        sent.join(", ")
    );
}

/// The server's one pod, not being deleted, once it is ready.
async fn server_pod(client: &Client) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let selector = format!("app.kubernetes.io/instance={SERVER}");
    eventually("the server's pod, ready", ROLLOUT, || async {
        let list = pods.list(&ListParams::default().labels(&selector)).await;
        let live: Vec<Pod> = list
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        match live.as_slice() {
            [pod] if ready(pod) => Ok(pod.clone()),
            other => Err(format!(
                "{} pods: {:?}",
                other.len(),
                other.iter().map(|p| &p.status).collect::<Vec<_>>()
            )),
        }
    })
    .await
}

fn ready(pod: &Pod) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    statuses.is_some_and(|s| s.len() == 2 && s.iter().all(|c| c.ready))
}

/// PostgreSQL ready in the pod, the backup sidecar the mutator added running
/// beside it, its dump of the server in the shared volume; the server's
/// status from the observed Deployment.
async fn the_pod_runs_postgresql_and_the_backup_sidecar(client: &Client) {
    let pod = server_pod(client).await;
    let spec = pod.spec.as_ref().unwrap();
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["postgres", "backup"], "the mutated pod template");
    assert!(
        spec.volumes
            .iter()
            .flatten()
            .any(|v| v.name == "backup" && v.empty_dir.is_some()),
        "the shared backup volume"
    );
    let dump = eventually("the backup sidecar's dump", ROLLOUT, || async {
        let root = container_root(&pod, "backup").ok_or("the backup container's process")?;
        std::fs::read_to_string(root.join("backup/dumpall.sql")).map_err(|e| e.to_string())
    })
    .await;
    assert!(dump.contains("PostgreSQL database cluster dump"), "{dump}");

    let server = servers(client).get(SERVER).await.expect("the server");
    assert_eq!(
        server.data["status"]["readyReplicas"], 1,
        "{}",
        server.data["status"]
    );
    assert_eq!(server.data["status"]["endpoint"], "main.default.svc:5432");
    let deployment = Api::<Deployment>::namespaced(client.clone(), "default")
        .get(SERVER)
        .await
        .expect("the Deployment");
    let owner = &deployment.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("DatabaseServer", Some(true))
    );
    assert_eq!(owner.block_owner_deletion, Some(true));
    eprintln!("{SERVER}: PostgreSQL ready, the backup sidecar dumped it, the server is Ready");
}

/// The root of `container`'s filesystem, from the host: its first process
/// (the container's id is in its cgroup path).
fn container_root(pod: &Pod, container: &str) -> Option<std::path::PathBuf> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?;
    let id = status
        .iter()
        .find(|c| c.name == container)?
        .container_id
        .as_ref()?;
    let id = id.rsplit("://").next()?.to_owned();
    let pid = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
            cgroup.contains(&id).then_some(pid)
        })
        .min()?;
    Some(Path::new("/proc").join(pid.to_string()).join("root"))
}

/// The operator's other kind: a table on SQLite converges.
async fn a_table_converges_in_the_same_operator(client: &Client) {
    let tables = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &resource("DatabaseTable", "databasetables"),
    );
    let table: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
        "metadata": {"name": "beside-the-server"},
        "spec": {
            "serverName": "authorization-cluster",
            "preferredImplementation": "SQLite",
            "columns": [{"name": "id", "type": "uint64"}],
        },
    }))
    .unwrap();
    tables
        .create(&PostParams::default(), &table)
        .await
        .expect("create a table");
    eventually("the table Ready on SQLite", ROLLOUT, || async {
        let table = tables
            .get("beside-the-server")
            .await
            .map_err(|e| e.to_string())?;
        match readiness(&table.data) {
            (ready, _, chosen) if ready == "True" && chosen == "SQLite" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// The pod template's hash of the server's running pod.
fn template_hash(pod: &Pod) -> String {
    pod.labels()
        .get("pod-template-hash")
        .cloned()
        .expect("a pod-template-hash")
}

/// A settings edit: the ConfigMap changes, the Deployment rolls to a new
/// ReplicaSet, and the server is Ready again on it.
async fn a_settings_edit_rolls_the_deployment(client: &Client) {
    let before = template_hash(&server_pod(client).await);
    let servers = servers(client);
    let edit = json!({"spec": {"settings": {"max_connections": "60"}}});
    let edited = servers
        .patch(SERVER, &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("edit a setting");
    let generation = edited.metadata.generation.expect("a generation");
    eventually("the server Ready on the edited spec", ROLLOUT, || async {
        let server = servers.get(SERVER).await.map_err(|e| e.to_string())?;
        match readiness(&server.data) {
            (ready, observed, _) if ready == "True" && observed == generation => Ok(()),
            other => Err(format!("{other:?} {}", server.data["status"])),
        }
    })
    .await;
    let after = template_hash(&server_pod(client).await);
    assert_ne!(before, after, "the pod runs a new template");
    let sets = Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/instance={SERVER}")))
        .await
        .expect("the ReplicaSets");
    assert_eq!(sets.items.len(), 2, "the old ReplicaSet and the new one");
    let settings = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get(&format!("{SERVER}-settings"))
        .await
        .expect("the settings");
    let file = &settings.data.unwrap_or_default()["postgresql.conf"];
    assert!(file.contains("max_connections = '60'"), "{file}");
    eprintln!("{SERVER}: a settings edit rolled the Deployment ({before} -> {after})");
}

/// Deleting the server: every child goes, and what the Deployment made.
async fn deleting_the_server_removes_every_child(client: &Client) {
    let servers = servers(client);
    let uid = servers
        .get(SERVER)
        .await
        .expect("the server")
        .uid()
        .unwrap();
    servers
        .delete(SERVER, &Default::default())
        .await
        .expect("delete the server");
    let children = format!("kplug.io/base-uid={uid}");
    let made = format!("app.kubernetes.io/instance={SERVER}");
    eventually(
        "the server and everything under it gone",
        ROLLOUT,
        || async {
            let mut left = Vec::new();
            match servers.get_opt(SERVER).await {
                Ok(None) => {}
                Ok(Some(_)) => left.push("the server".to_owned()),
                Err(e) => left.push(format!("reading the server: {e}")),
            }
            left.extend(names::<Deployment>(client, &children).await);
            left.extend(names::<Service>(client, &children).await);
            left.extend(names::<ConfigMap>(client, &children).await);
            left.extend(names::<Secret>(client, &children).await);
            left.extend(names::<ReplicaSet>(client, &made).await);
            left.extend(names::<Pod>(client, &made).await);
            if left.is_empty() { Ok(()) } else { Err(left) }
        },
    )
    .await;
    eprintln!("{SERVER} deleted: no child, ReplicaSet or pod is left");
}

/// The `kind/name` of the objects in `default` with `selector`.
async fn names<K>(client: &Client, selector: &str) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let list = Api::<K>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(selector))
        .await;
    match list {
        Ok(list) => list
            .items
            .iter()
            .map(|o| format!("{}/{}", K::kind(&()), o.name_any()))
            .collect(),
        Err(e) => vec![format!("listing {}: {e}", K::kind(&()))],
    }
}

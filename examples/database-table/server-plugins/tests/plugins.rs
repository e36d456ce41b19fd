//! The plugins' answers, called directly (no socket, no operator): the
//! children desired, a stable password, a settings edit rolling the
//! Deployment, the status from the observed Deployment, and the backup
//! mutation.

use database_server_plugins::backup::{self, Backup};
use database_server_plugins::server::{PostgresServer, SETTINGS_HASH};
use kplug_sidecar::{MutateCall, Plugin, Request};
use serde_json::{Value, json};

fn server(spec: Value) -> Value {
    json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseServer",
        "metadata": {"name": "main", "namespace": "default", "generation": 1},
        "spec": spec,
    })
}

async fn answer(spec: Value, observed: Vec<Value>) -> Value {
    let request = Request::from_json("PostgreSQL", server(spec), [])
        .unwrap()
        .with_children(observed)
        .unwrap();
    PostgresServer.reconcile(request).await.unwrap().to_json()
}

fn child<'a>(answer: &'a Value, kind: &str) -> &'a Value {
    answer["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {answer}"))
}

/// The Deployment as its controller would report it, rolled out or not.
fn observed_deployment(desired: &Value, available: bool) -> Value {
    let mut deployment = desired.clone();
    deployment["metadata"]["generation"] = json!(2);
    deployment["status"] = json!({
        "observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
        "readyReplicas": if available { 1 } else { 0 },
        "conditions": [{"type": "Available", "status": if available { "True" } else { "False" }}],
    });
    deployment
}

#[tokio::test]
async fn a_new_server_gets_four_children_and_waits_for_its_deployment() {
    let answer = answer(json!({"settings": {"max_connections": "50"}}), vec![]).await;
    assert_eq!(answer["outcome"], "RETRY", "{answer}");
    let kinds: Vec<&str> = answer["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Secret", "ConfigMap", "Service", "Deployment"]);
    let config = child(&answer, "ConfigMap")["data"]["postgresql.conf"]
        .as_str()
        .unwrap();
    assert!(config.contains("max_connections = '50'\n"), "{config}");
    let container = &child(&answer, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "postgres:17-bookworm");
    assert!(
        !child(&answer, "Secret")["data"]["password"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert_eq!(answer["status"]["readyReplicas"], 0);
}

#[tokio::test]
async fn the_observed_password_is_kept_and_the_answer_is_the_same_every_time() {
    let first = answer(json!({}), vec![]).await;
    let secret = child(&first, "Secret").clone();
    let again = answer(json!({}), vec![secret.clone()]).await;
    let twice = answer(json!({}), vec![secret.clone()]).await;
    assert_eq!(child(&again, "Secret"), &secret);
    assert_eq!(again["children"], twice["children"]);
    assert_eq!(again["children"], first["children"]);
}

#[tokio::test]
async fn a_settings_or_image_edit_changes_the_pod_template() {
    let template = |answer: &Value| child(answer, "Deployment")["spec"]["template"].clone();
    let before = answer(json!({"settings": {"work_mem": "4MB"}}), vec![]).await;
    let setting = answer(json!({"settings": {"work_mem": "8MB"}}), vec![]).await;
    let image = answer(
        json!({"image": "postgres:18-bookworm", "settings": {"work_mem": "4MB"}}),
        vec![],
    )
    .await;
    let hash = |t: Value| t["metadata"]["annotations"][SETTINGS_HASH].clone();
    assert_ne!(hash(template(&before)), hash(template(&setting)));
    assert_ne!(template(&before), template(&image));
}

#[tokio::test]
async fn ready_only_once_the_desired_deployment_is_available() {
    let spec = json!({"settings": {"work_mem": "4MB"}});
    let desired = child(&answer(spec.clone(), vec![]).await, "Deployment").clone();
    let rolling = answer(spec.clone(), vec![observed_deployment(&desired, false)]).await;
    assert_eq!(rolling["outcome"], "RETRY", "{rolling}");
    let ready = answer(spec.clone(), vec![observed_deployment(&desired, true)]).await;
    assert_eq!(ready["outcome"], "OK", "{ready}");
    assert_eq!(ready["status"]["readyReplicas"], 1);
    assert_eq!(ready["status"]["endpoint"], "main.default.svc:5432");
    // Available, but still the old settings: not Ready.
    let edited = answer(
        json!({"settings": {"work_mem": "8MB"}}),
        vec![observed_deployment(&desired, true)],
    )
    .await;
    assert_eq!(edited["outcome"], "RETRY", "{edited}");
}

#[tokio::test]
async fn invalid_or_reserved_settings_are_refused() {
    for settings in [
        json!({"Bad-Name": "1"}),
        json!({"port": "5433"}),
        json!({"work_mem": "1\n2"}),
    ] {
        let answer = answer(json!({"settings": settings}), vec![]).await;
        assert_eq!(answer["outcome"], "FAILED", "{answer}");
        assert!(answer.get("children").is_none(), "{answer}");
    }
}

#[tokio::test]
async fn the_backup_mutation_adds_a_sidecar_and_a_shared_volume_deterministically() {
    let desired = child(&answer(json!({}), vec![]).await, "Deployment").clone();
    let call = || MutateCall::from_json("PostgreSQL", desired.clone(), None, None).unwrap();
    let first = Backup.mutate(call()).await.unwrap().to_json();
    let second = Backup.mutate(call()).await.unwrap().to_json();
    assert_eq!(first, second);
    let mut patched = desired.clone();
    let patch: json_patch::Patch = serde_json::from_value(first["patch"].clone()).unwrap();
    json_patch::patch(&mut patched, &patch).unwrap();
    let pod = &patched["spec"]["template"]["spec"];
    let sidecar = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == backup::CONTAINER)
        .unwrap();
    assert_eq!(sidecar["image"], pod["containers"][0]["image"]);
    assert_eq!(
        sidecar["env"][2]["valueFrom"]["secretKeyRef"]["name"],
        "main-credentials"
    );
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == backup::VOLUME)
    );
    assert!(
        pod["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["mountPath"] == backup::MOUNT)
    );
    // Once there, nothing more; and a Deployment without PostgreSQL is left alone.
    assert_eq!(backup::mutation(&patched).to_json()["patch"], json!([]));
    let other = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    assert_eq!(backup::mutation(&other).to_json()["patch"], json!([]));
}

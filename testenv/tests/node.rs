//! `kube-testenv --node` (`StartOptions::node`): a real kubelet with
//! containerd, kube-controller-manager and kube-scheduler on this machine.
//! A Deployment gets a real pod, with a native sidecar sharing an `emptyDir`;
//! stopping removes it and restores everything the node changed, which is
//! checked against a snapshot of the machine taken before.
//!
//! Root only, like the node itself; needs `make node-binaries` (`make test`
//! builds them). One node runs per machine, so the tests take turns.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kplug_testenv::{
    ControlPlane, HostSnapshot, StartError, StartOptions, client_from_kubeconfig, eventually,
};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

/// One node per machine: its bridge, its kubelet port and the host paths are
/// fixed. (A tokio mutex: each test has a runtime of its own, and the turn is
/// held across awaits.)
static NODE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Bound for a pod to be running (seconds on an idle machine).
const POD_UP: Duration = Duration::from_secs(120);

fn start_node() -> ControlPlane {
    ControlPlane::start_with(StartOptions {
        node: true,
        ..StartOptions::default()
    })
    .unwrap_or_else(|e| panic!("kube-testenv --node: {e}"))
}

fn assert_nothing_left(before: &HostSnapshot) {
    let leaks = before.leaks(&HostSnapshot::take());
    assert!(
        leaks.is_empty(),
        "the node left this behind:\n{}",
        leaks.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_with_a_native_sidecar_runs_and_nothing_is_left_behind() {
    let _turn = NODE.lock().await;
    let before = HostSnapshot::take();
    let control_plane = tokio::task::block_in_place(start_node);
    let name = control_plane
        .node()
        .expect("the ready line names the node")
        .to_owned();
    let client = client_from_kubeconfig(control_plane.kubeconfig_path())
        .await
        .expect("client");

    let node = Api::<Node>::all(client.clone())
        .get(&name)
        .await
        .expect("the node object");
    let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "10.88.0.1"),
        "the node's address is its bridge's, never a name to look up: {addresses:?}"
    );

    // The shape of the operator's pod: a sidecar (an init container that
    // keeps running) and the main container sharing an emptyDir.
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "sidecars"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "sidecars"}},
            "template": {
                "metadata": {"labels": {"app": "sidecars"}},
                "spec": {
                    "initContainers": [{
                        "name": "sidecar",
                        "image": "localhost/kube-testenv/pause:1",
                        "imagePullPolicy": "Never",
                        "restartPolicy": "Always",
                        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
                    }],
                    "containers": [{
                        "name": "main",
                        "image": "localhost/kube-testenv/pause:1",
                        "imagePullPolicy": "Never",
                        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
                    }],
                    "volumes": [{"name": "shared", "emptyDir": {}}],
                },
            },
        },
    }))
    .expect("a valid Deployment");
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create the Deployment");

    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let pod = eventually(
        "the Deployment's pod runs with both containers ready",
        POD_UP,
        || {
            let pods = pods.clone();
            async move {
                let list = pods
                    .list(&ListParams::default().labels("app=sidecars"))
                    .await
                    .map_err(|e| e.to_string())?;
                let pod = list
                    .items
                    .into_iter()
                    .next()
                    .ok_or_else(|| "no pod yet".to_owned())?;
                let status = pod.status.clone().unwrap_or_default();
                let ready = status
                    .conditions
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                if ready {
                    Ok(pod)
                } else {
                    Err(format!("phase {:?}", status.phase))
                }
            }
        },
    )
    .await;
    let status = pod.status.unwrap_or_default();
    let ip = status.pod_ip.unwrap_or_default();
    assert!(
        ip.starts_with("10.88."),
        "a pod address on the bridge, got {ip:?}"
    );
    let sidecar = status
        .init_container_statuses
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == "sidecar")
        .expect("the sidecar's status");
    assert!(
        sidecar.ready && sidecar.started == Some(true),
        "{sidecar:?}"
    );

    // Stopping the control plane stops the node: the pod goes with it.
    drop(client);
    tokio::task::block_in_place(|| drop(control_plane));
    assert_nothing_left(&before);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_that_is_not_there_fails_the_start_clearly_and_leaves_nothing() {
    let _turn = NODE.lock().await;
    let before = HostSnapshot::take();
    let err = tokio::task::block_in_place(|| {
        ControlPlane::start_with(StartOptions {
            node: true,
            load_images: vec!["kplug.invalid/no-such-image:0".into()],
            ..StartOptions::default()
        })
    })
    .expect_err("a start that cannot load its image");
    let StartError::Exited { stderr, .. } = &err else {
        panic!("expected kube-testenv to exit, got {err}");
    };
    assert!(
        stderr.contains("--load-image kplug.invalid/no-such-image:0") && stderr.contains("docker"),
        "the error names the image and where it was looked for: {stderr}"
    );
    assert_nothing_left(&before);
}

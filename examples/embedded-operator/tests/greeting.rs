//! The embedded operator on the real control plane, with the Rust SDK's
//! hello plugin on a real socket: its own step, then kplug's.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::process::Stdio;
use std::time::Duration;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;
use tokio::process::{Child, Command};

fn greetings() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Greeting"),
        "greetings",
    )
}

fn spawn(binary: std::path::PathBuf, sockets: &std::path::Path) -> Child {
    Command::new(binary)
        .env(
            "KUBECONFIG",
            kplug_testenv::control_plane().kubeconfig_path(),
        )
        .env("KPLUG_SOCKET_DIR", sockets)
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start")
}

#[tokio::test]
async fn its_own_step_then_the_plugin() {
    let client = kplug_testenv::client().await;
    kplug_testenv::install_crd_yaml(&client, include_str!("../../hello/crd.yaml"))
        .await
        .expect("install the Greeting CRD");
    let ns = kplug_testenv::namespace(&client, "embedded")
        .await
        .expect("namespace");
    let sockets = tempfile::tempdir().expect("socket dir");
    let _operator = spawn(
        env!("CARGO_BIN_EXE_greeting-operator").into(),
        sockets.path(),
    );
    let _plugin = spawn(
        kplug_testenv::workspace_binary("examples/hello"),
        sockets.path(),
    );

    let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &greetings());
    let greeting: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": "world"},
        "spec": {"preferredImplementation": "Hello"},
    }))
    .expect("a Greeting");
    api.create(&PostParams::default(), &greeting)
        .await
        .expect("create");

    let done = kplug_testenv::eventually(
        "the Greeting is greeted and Ready",
        Duration::from_secs(60),
        || async {
            let obj = api.get("world").await.map_err(|e| e.to_string())?;
            let ready = obj
                .data
                .pointer("/status/conditions")
                .and_then(|c| c.as_array())
                .and_then(|c| {
                    c.iter()
                        .find(|c| c["type"] == "Ready")
                        .map(|c| c["status"] == "True")
                });
            match (obj.data.pointer("/status/greeting"), ready) {
                (Some(_), Some(true)) => Ok(obj),
                _ => Err(format!("not yet: {}", obj.data["status"])),
            }
        },
    )
    .await;
    // The operator's own step defaulted the salutation; the plugin used it.
    assert_eq!(done.data["spec"]["salutation"], "hello");
    assert_eq!(done.data["status"]["greeting"], "hello, world!");
    assert_eq!(done.data["status"]["implementation"], "Hello");
    assert!(
        done.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "kplug.io/finalizer")
    );

    api.delete("world", &DeleteParams::default())
        .await
        .expect("delete");
    kplug_testenv::eventually(
        "the Greeting is gone (finalizer removed)",
        Duration::from_secs(30),
        || async {
            match api.get_opt("world").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(obj) => Err(format!(
                    "still there: finalizers {:?}",
                    obj.metadata.finalizers
                )),
            }
        },
    )
    .await;
}

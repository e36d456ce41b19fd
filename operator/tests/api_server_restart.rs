//! The API server restarts under a running operator and its plugin: a
//! control plane of this test's own (kube-testenv --data-dir), stopped and
//! started again with its data, on the same port and kubeconfig.

mod support;

use std::time::Duration;

use kplug_testenv::{ControlPlane, StartOptions};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::*;

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_and_its_plugin_ride_through_an_api_server_restart() {
    let mut control_plane =
        tokio::task::block_in_place(|| ControlPlane::start_with(StartOptions::default()))
            .expect("a control plane of this test's own");
    let w = world_on(
        control_plane.client().await.unwrap(),
        "apirestart",
        &["--resync", "1h"],
        control_plane.kubeconfig_path(),
    )
    .await;
    let _plugin = spawn_plugin(&w, &[]);
    w.create_users("users", json!({})).await;
    w.table_until("users", "Ready before the restart", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;

    let timing = tokio::task::block_in_place(|| control_plane.restart()).expect("restart");
    eprintln!("API server restarted in {:?}", timing.total());

    // A spec edit, an extension edit and a new object, all after the
    // restart, reach the plugin through the same operator process.
    w.tables()
        .patch(
            "users",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"serverName": "after-restart"}})),
        )
        .await
        .unwrap();
    w.set_partition_by("users", "range").await;
    w.create_table("orders", "PostgreSQL", json!({}), false)
        .await;
    w.table_until("users", "the spec edit reconciled", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")?;
        (t.data.pointer("/status/observedSpec/serverName") == Some(&json!("after-restart")))
            .then_some(())
            .ok_or_else(|| "not yet".into())
    })
    .await;
    w.plugin_saw_partition_by("users", "range", T).await;
    w.table_until("orders", "a new object converges", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
}

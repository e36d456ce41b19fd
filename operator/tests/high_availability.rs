//! Leader election with real replicas: two `kplug-operator` processes, each
//! with its own plugin sidecar and socket dir, one Lease.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use support::*;
use tokio::process::Child;

const T: Duration = Duration::from_secs(30);
const LEASE: &str = "3s";

/// A second replica in `w`'s namespace, as Pod `kplug-operator-1`.
struct Replica {
    sockets: tempfile::TempDir,
    metrics_port: u16,
    _operator: Child,
}

fn second_replica(w: &World, extra: &[&str]) -> Replica {
    let sockets = tempfile::tempdir().unwrap();
    let metrics_port = free_port();
    let operator = spawn_operator_as(
        "kplug-operator-1",
        &w.ns,
        sockets.path(),
        metrics_port,
        extra,
        kplug_testenv::control_plane().kubeconfig_path(),
    );
    Replica {
        sockets,
        metrics_port,
        _operator: operator,
    }
}

async fn leading(port: u16) -> Option<f64> {
    metric(&http_get(port, "/metrics").await?, "kplug_leader")
}

async fn until_leading(port: u16, who: &str) {
    kplug_testenv::eventually(&format!("{who} leads"), T, || async {
        (leading(port).await == Some(1.0))
            .then_some(())
            .ok_or(format!("kplug_leader is {:?}", leading(port).await))
    })
    .await;
}

fn reconciles_by(w: &World, version: &str) -> usize {
    w.calls()
        .iter()
        .filter(|c| c["call"] == "Reconcile" && c["version"] == version)
        .count()
}

async fn all_ready(w: &World, names: &[String]) {
    for name in names {
        w.table_until(name, "Ready", T, |t| {
            expect_condition(t, "Ready", "True", "Reconciled")
        })
        .await;
    }
}

fn plugin_for(w: &World, sockets: &Path, version: &str) -> Child {
    spawn_plugin_in(w, sockets, &[("SCRIPTED_VERSION", version)])
}

/// Killing the leader makes the follower take over within the Lease
/// duration: nothing stuck, and no call from the old leader's side after
/// it died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follower_takes_over_when_the_leader_is_killed() {
    let mut w = world("ha", &["--lease-duration", LEASE]).await;
    let _plugin_a = plugin_for(&w, w.sockets.path(), "1.0.0-a");
    until_leading(w.metrics_port, "replica 0").await;
    let b = second_replica(&w, &["--lease-duration", LEASE]);
    let _plugin_b = plugin_for(&w, b.sockets.path(), "1.0.0-b");
    // The follower is ready (its plugins register) without leading.
    kplug_testenv::eventually("the follower is ready", T, || async {
        let ready = http_get(b.metrics_port, "/readyz")
            .await
            .unwrap_or_default();
        (ready.contains(" 200 ") && ready.contains("follower"))
            .then_some(())
            .ok_or(ready)
    })
    .await;
    assert_eq!(leading(b.metrics_port).await, Some(0.0));

    let before: Vec<String> = (0..5).map(|i| format!("before-{i}")).collect();
    for name in &before {
        w.create_table(name, "PostgreSQL", json!({}), false).await;
    }
    all_ready(&w, &before).await;
    assert_eq!(
        reconciles_by(&w, "1.0.0-b"),
        0,
        "the follower called nothing"
    );

    signal(&w.operator, Signal::SIGKILL);
    let _ = w.operator.wait().await;
    let killed = Instant::now();
    let calls_a = reconciles_by(&w, "1.0.0-a");
    until_leading(b.metrics_port, "replica 1").await;
    let failover = killed.elapsed();
    eprintln!("failover after the leader's SIGKILL: {failover:?} (Lease {LEASE})");

    w.create_table("after", "PostgreSQL", json!({}), false)
        .await;
    let mut everything = before.clone();
    everything.push("after".into());
    all_ready(&w, &everything).await;
    let after = w.tables().get("after").await.unwrap();
    assert_eq!(
        after.data.pointer("/status/pluginVersion"),
        Some(&json!("1.0.0-b"))
    );
    assert_eq!(
        reconciles_by(&w, "1.0.0-a"),
        calls_a,
        "nothing reached the old leader's plugin after it died"
    );
}

/// A second operator started by mistake (same Lease, no plugins of its
/// own) changes nothing; and a status someone else writes over the
/// leader's is repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_operator_cannot_damage_objects_and_foreign_status_is_repaired() {
    let w = world("mistake", &["--lease-duration", LEASE]).await;
    let _plugin = spawn_plugin(&w, &[]);
    until_leading(w.metrics_port, "replica 0").await;
    let names: Vec<String> = (0..3).map(|i| format!("t{i}")).collect();
    for name in &names {
        w.create_table(name, "PostgreSQL", json!({}), false).await;
    }
    all_ready(&w, &names).await;
    let conditions = |t: &kube::api::DynamicObject| t.data.pointer("/status/conditions").cloned();
    let mut before = Vec::new();
    for name in &names {
        before.push(conditions(&w.tables().get(name).await.unwrap()));
    }

    let mistake = second_replica(&w, &["--lease-duration", LEASE]);
    kplug_testenv::eventually("the second operator is up", T, || async {
        leading(mistake.metrics_port)
            .await
            .map(drop)
            .ok_or("no metrics yet")
    })
    .await;
    // Long enough for it to have reconciled everything, had it led.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(leading(mistake.metrics_port).await, Some(0.0));
    for (name, before) in names.iter().zip(&before) {
        let now = conditions(&w.tables().get(name).await.unwrap());
        assert_eq!(
            &now, before,
            "{name}: the second operator changed its status"
        );
    }

    // Someone else writes over the operator's part (what an old leader
    // without plugins used to do): the leader repairs it.
    let rogue: Value = json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
        "status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "PluginUnavailable", "message": "no plugin here", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]},
    });
    w.tables()
        .patch_status(
            "t0",
            &PatchParams::apply("kplug-operator").force(),
            &Patch::Apply(&rogue),
        )
        .await
        .unwrap();
    w.table_until("t0", "repaired", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
}

/// A leader that loses its Lease and wins it back reconciles every object
/// again in its new term. Requeues of the old term (backoffs, retries after
/// an API error) end with it; before this, an object whose status was still
/// what the operator last wrote was not reconciled in the new term, and an
/// object whose retry was lost that way stayed stuck until the resync (the
/// chaos soak: 9 objects waiting for a plugin that was back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_wins_the_lease_back_reconciles_every_object_again() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    let w = world("regain", &["--lease-duration", LEASE]).await;
    let _plugin = spawn_plugin(&w, &[]);
    until_leading(w.metrics_port, "replica 0").await;
    let names: Vec<String> = (0..4).map(|i| format!("r{i}")).collect();
    for name in &names {
        w.create_table(name, "PostgreSQL", json!({}), false).await;
    }
    all_ready(&w, &names).await;
    let reconciles_of = |name: &str| {
        w.calls()
            .iter()
            .filter(|c| c["call"] == "Reconcile" && c["name"] == name)
            .count()
    };
    // Settled: no call is still on its way.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before: Vec<usize> = names.iter().map(|n| reconciles_of(n)).collect();

    // Someone else takes the Lease, and then never renews it.
    let leases: kube::Api<Lease> = kube::Api::namespaced(w.client.clone(), &w.ns);
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    leases
        .patch(
            "kplug-databasetable-myorg.org",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {
                "holderIdentity": "someone-else",
                "acquireTime": now,
                "renewTime": now,
                "leaseDurationSeconds": 3,
            }})),
        )
        .await
        .expect("take the Lease");
    kplug_testenv::eventually("replica 0 stops leading", T, || async {
        (leading(w.metrics_port).await == Some(0.0))
            .then_some(())
            .ok_or(format!(
                "kplug_leader is {:?}",
                leading(w.metrics_port).await
            ))
    })
    .await;
    until_leading(w.metrics_port, "replica 0, again").await;

    for (name, before) in names.iter().zip(&before) {
        kplug_testenv::eventually(
            &format!("{name} is reconciled in the new term"),
            T,
            || async {
                let now = reconciles_of(name);
                (now > *before)
                    .then_some(())
                    .ok_or(format!("{now} Reconcile calls, as before the term"))
            },
        )
        .await;
    }
    all_ready(&w, &names).await;
}

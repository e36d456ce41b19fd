//! End-to-end: what kplug-operator asks of the API server. The operator
//! reaches the real kube-apiserver through a proxy that lists its requests
//! (`support::api_proxy`), with real scripted plugin processes:
//! - a new object costs three writes (the record, the status, the plugin's
//!   Event), no more than an in-process controller's;
//! - a restart over converged objects costs no write and no read per
//!   object;
//! - a status field a plugin stops reporting is removed, and under
//!   `--selection all` each plugin's fields are kept apart;
//! - a crash between the record and the status write never changes the
//!   implementation.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::time::Duration;

use kube::ResourceExt;
use nix::sys::signal::Signal;
use serde_json::json;
use support::*;

const T: Duration = Duration::from_secs(30);

/// The requests the operator made since `since` (an index into the proxy's
/// list), without its Lease's (leader election renews it on its own clock).
fn requests_since(proxy: &api_proxy::ApiProxy, since: usize) -> Vec<String> {
    proxy.requests()[since..]
        .iter()
        .filter(|r| !r.contains("/leases"))
        .cloned()
        .collect()
}

/// The Reconcile calls the scripted plugins logged for table `name`.
fn calls_for(w: &World, name: &str) -> Vec<serde_json::Value> {
    w.calls()
        .into_iter()
        .filter(|c| c["call"] == "Reconcile" && c["name"] == name)
        .collect()
}

/// Leaves `kplug.test/extra-status` out of table `name`, with a new
/// generation, so that its plugins answer again without their extra field.
async fn drop_extra_status(w: &World, name: &str) {
    w.merge_table(
        name,
        json!({"metadata": {"annotations": {"kplug.test/extra-status": null}},
               "spec": {"columns": [{"name": "id", "type": "uint64"}]}}),
    )
    .await;
}

/// How many Events of the test's namespace regard an object of `kind`
/// (a series counts once).
async fn events_about(w: &World, kind: &str) -> usize {
    w.events_api()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some(kind))
        .count()
}

/// The number of Reconcile calls logged, once none has come for `quiet`.
async fn calls_when_quiet(w: &World, quiet: Duration) -> usize {
    let count = || {
        w.calls()
            .iter()
            .filter(|c| c["call"] == "Reconcile")
            .count()
    };
    let mut settled = count();
    loop {
        tokio::time::sleep(quiet).await;
        if count() == settled {
            return settled;
        }
        settled = count();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_table_costs_three_writes() {
    let proxy = api_proxy::ApiProxy::start().await;
    let w = world_with_kubeconfig("budget-new", &["--resync", "1h"], proxy.kubeconfig()).await;
    let _plugin = spawn_mariadb_plugin(&w);
    w.until_plugin_up("mariadb", T).await;
    calls_when_quiet(&w, Duration::from_millis(500)).await;
    let since = proxy.requests().len();
    w.create_table("lean", "MariaDB", json!({}), false).await;
    let table = w.ready_on("lean", "MariaDB", T).await;
    w.until_events("lean", "the plugin's Event", |events| {
        events.iter().any(|(_, reason, _)| reason == "Reconciled")
    })
    .await;
    calls_when_quiet(&w, Duration::from_secs(1)).await;

    let writes: Vec<String> = requests_since(&proxy, since)
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(
        writes.len() <= 3,
        "a new table cost {} writes, not at most 3 (the record, the status, the plugin's Event): {writes:#?}",
        writes.len()
    );
    let reads: Vec<String> = requests_since(&proxy, since)
        .into_iter()
        .filter(|r| r.starts_with("GET ") && r.ends_with("/lean"))
        .collect();
    assert!(reads.is_empty(), "the new table was read: {reads:#?}");
    // The choice is recorded in the annotations and shown in the status.
    assert_eq!(
        table
            .annotations()
            .get("kplug.io/implementation")
            .map(String::as_str),
        Some("MariaDB")
    );
    assert_eq!(
        table
            .annotations()
            .get("kplug.io/plugin")
            .map(String::as_str),
        Some("mariadb")
    );
    assert_eq!(calls_for(&w, "lean").len(), 1, "one call");
}

/// A table applied a moment before its extensions (as `kubectl apply` of
/// one file may do, and as their watches may deliver them) writes no
/// "waiting" status and no Warning on the way: a new object waits quietly
/// for its extensions for a few seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_that_come_a_moment_after_their_table_cost_no_write() {
    let proxy = api_proxy::ApiProxy::start().await;
    let w = world_with_kubeconfig("budget-late", &["--resync", "1h"], proxy.kubeconfig()).await;
    let _plugin = spawn_mariadb_plugin(&w);
    w.until_plugin_up("mariadb", T).await;
    calls_when_quiet(&w, Duration::from_millis(500)).await;
    let since = proxy.requests().len();
    w.create_table("late", "MariaDB", json!({}), true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (ar, kind) in [
        (maria_ext_resource(), "DatabaseTableMariaDbExtension"),
        (pg_ext_resource(), "DatabaseTablePostgreSqlExtension"),
    ] {
        w.create(
            &ar,
            json!({"apiVersion": "myorg.org/v1alpha1", "kind": kind,
                             "metadata": {"name": "late"}, "spec": {}}),
        )
        .await;
    }
    w.ready_on("late", "MariaDB", T).await;
    calls_when_quiet(&w, Duration::from_secs(1)).await;

    let status_writes: Vec<String> = requests_since(&proxy, since)
        .into_iter()
        .filter(|r| !r.starts_with("GET ") && r.ends_with("/databasetables/late/status"))
        .collect();
    assert_eq!(
        status_writes.len(),
        1,
        "the table's status was written more than once (a wait, then Ready?): {status_writes:#?}"
    );
    let events = w.events_for("late").await;
    assert!(
        !events
            .iter()
            .any(|(_, reason, _)| reason == "ExtensionNotFound"),
        "a Warning for extensions that were on their way: {events:#?}"
    );
    // The plugin is never called without its extension (it is sent only its
    // own; the table waited for both it references). It may be called
    // twice: each extension's watch wakes the table, and when the second
    // wake-up comes while the first reconcile runs (it saw both in the
    // cache), it reconciles again after it, as any controller does.
    let calls = calls_for(&w, "late");
    assert!(!calls.is_empty(), "the plugin was never called");
    for call in &calls {
        let mut kinds: Vec<&str> = call["extensions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["kind"].as_str())
            .collect();
        kinds.sort_unstable();
        assert_eq!(
            kinds,
            ["DatabaseTableMariaDbExtension"],
            "a call without its extension, which was on its way: {calls:#?}"
        );
    }
}

/// An operator that starts over converged tables reconciles each of them
/// (a new leader term does), and asks the API server nothing per table:
/// while its plugin registers again the tables keep their status (no flip
/// to "waiting"), the plugin's answers and the operator's conditions are
/// what is stored, so no status apply is sent, and its own writes stand for
/// the read before each call that it used to make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_over_converged_tables_costs_no_write_and_no_read_per_table() {
    const N: usize = 12;
    let args = ["--resync", "1h"];
    let proxy = api_proxy::ApiProxy::start().await;
    let mut w = world_with_kubeconfig("budget-restart", &args, proxy.kubeconfig()).await;
    let _plugin = spawn_mariadb_plugin(&w);
    let names: Vec<String> = (0..N).map(|i| format!("t{i}")).collect();
    for name in &names {
        w.create_users(name, json!({})).await;
    }
    for name in &names {
        w.ready_on(name, "MariaDB", T).await;
    }
    let before = calls_when_quiet(&w, Duration::from_secs(2)).await;
    let table_events_before = events_about(&w, "DatabaseTable").await;
    let pod_events_before = events_about(&w, "Pod").await;

    signal(&w.operator, Signal::SIGTERM);
    assert!(w.operator.wait().await.unwrap().success());
    let since = proxy.requests().len();
    w.operator = operator_command_for(
        &DATABASE_TABLE,
        "kplug-operator-0",
        &w.ns,
        w.sockets.path(),
        w.metrics_port,
        &args,
        proxy.kubeconfig(),
    )
    .spawn()
    .expect("start kplug-operator again");
    kplug_testenv::eventually(
        "every table reconciled by the new operator",
        Duration::from_secs(60),
        || async {
            let after = w
                .calls()
                .iter()
                .filter(|c| c["call"] == "Reconcile")
                .count()
                - before;
            (after >= N)
                .then_some(())
                .ok_or(format!("{after}/{N} Reconcile calls since the restart"))
        },
    )
    .await;
    // Settled again. (Each table is called at least once. Under load a
    // table that waited for the extension watches' first lists is woken
    // both by its retry and by the lists, and is called twice; that costs a
    // call, and no request either.)
    calls_when_quiet(&w, Duration::from_secs(2)).await;
    let requests = requests_since(&proxy, since);
    // The one write a restart makes is not about a table: the registry's
    // Event on the operator's Pod when the plugin registers again.
    let pod_events = events_about(&w, "Pod").await;
    let writes: Vec<&String> = requests.iter().filter(|r| !r.starts_with("GET ")).collect();
    let other_writes: Vec<&&String> = writes.iter().filter(|r| !r.ends_with("/events")).collect();
    assert!(
        other_writes.is_empty(),
        "a restart over converged tables wrote: {other_writes:#?}"
    );
    assert_eq!(
        events_about(&w, "DatabaseTable").await,
        table_events_before,
        "a restart over converged tables recorded Events about them"
    );
    assert!(
        writes.len() <= pod_events - pod_events_before,
        "Events written beyond the registry's about the operator's Pod: {writes:#?}"
    );
    let per_table: Vec<&String> = requests
        .iter()
        .filter(|r| names.iter().any(|n| r.ends_with(&format!("/{n}"))))
        .collect();
    assert!(
        per_table.is_empty(),
        "a restart over converged tables read them one by one: {per_table:#?}"
    );
    for name in &names {
        let table = w.tables().get(name).await.unwrap();
        expect_condition(&table, "Ready", "True", "Reconciled").unwrap();
    }
}

/// Under `--selection preferred` the operator applies the plugin's fields
/// with its own part, in one write: a field the plugin stops reporting is
/// removed all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_field_the_plugin_stops_reporting_is_removed() {
    let w = world("budget-drop", &["--resync", "1h"]).await;
    let _plugin = spawn_mariadb_plugin(&w);
    w.create_table(
        "dropper",
        "MariaDB",
        json!({"kplug.test/extra-status": "note"}),
        false,
    )
    .await;
    w.table_until("dropper", "the plugin's extra field", T, |t| {
        match t.data.pointer("/status/note-mariadb") {
            Some(v) if v == "scripted" => Ok(()),
            other => Err(format!("status.note-mariadb is {other:?}")),
        }
    })
    .await;
    // The annotation goes, and a new generation makes the plugin answer
    // again, without the field.
    drop_extra_status(&w, "dropper").await;
    let table = w
        .table_until("dropper", "the field removed", T, |t| {
            match t.data.pointer("/status/note-mariadb") {
                None => Ok(()),
                Some(v) => Err(format!("status.note-mariadb is still {v}")),
            }
        })
        .await;
    expect_condition(&table, "Ready", "True", "Reconciled").unwrap();
    assert_eq!(
        table.data.pointer("/status/pluginVersion"),
        Some(&json!("1.0.0")),
        "the fields the plugin still reports stay"
    );
}

/// Under `--selection all` every plugin is called and applies its own
/// fields under its own field manager: one plugin's answer never removes
/// another's fields, and each one's dropped field goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_selection_all_each_plugins_fields_are_kept_apart() {
    let w = world("budget-all", &["--selection", "all", "--resync", "1h"]).await;
    let mariadb = spawn_mariadb_plugin(&w);
    let _postgresql = spawn_plugin(&w, &[]);
    w.until_plugin_up("mariadb", T).await;
    w.until_plugin_up("postgresql", T).await;
    w.create_table(
        "shared",
        "MariaDB",
        json!({"kplug.test/extra-status": "note"}),
        false,
    )
    .await;
    w.table_until("shared", "both plugins' fields", T, |t| {
        for key in ["note-mariadb", "note-postgresql"] {
            if t.data.pointer(&format!("/status/{key}")).is_none() {
                return Err(format!("no status.{key}"));
            }
        }
        Ok(())
    })
    .await;
    // MariaDB's plugin goes; PostgreSQL's alone answers the next
    // generation, without its field.
    drop(mariadb);
    kplug_testenv::eventually("mariadb's plugin gone", T, || async {
        let plugins = w.listed_plugins().await.to_string();
        (!plugins.contains("\"mariadb\""))
            .then_some(())
            .ok_or(plugins)
    })
    .await;
    drop_extra_status(&w, "shared").await;
    let table = w
        .table_until("shared", "postgresql's field removed", T, |t| {
            match t.data.pointer("/status/note-postgresql") {
                None => Ok(()),
                Some(v) => Err(format!("status.note-postgresql is still {v}")),
            }
        })
        .await;
    assert_eq!(
        table.data.pointer("/status/note-mariadb"),
        Some(&json!("scripted")),
        "postgresql's answer removed mariadb's field: {:#?}",
        table.data.get("status")
    );
}

/// The choice is recorded before the plugin is first called. An operator
/// killed after that and before the status write comes back to the same
/// implementation, even with another one preferred and ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_record_and_the_status_write_keeps_the_implementation() {
    let args = ["--resync", "1h", "--heartbeat-ttl", "3s"];
    let mut w = world("budget-crash", &args).await;
    let mut mariadb = spawn_mariadb_plugin(&w);
    w.until_plugin_up("mariadb", T).await;
    w.create_table(
        "held",
        "MariaDB",
        json!({"kplug.test/behavior": "hang"}),
        false,
    )
    .await;
    // Recorded, and the plugin called: it hangs, so no status is written.
    let table = w
        .table_until("held", "the choice recorded", T, |t| {
            match t.annotations().get("kplug.io/implementation") {
                Some(i) if i == "MariaDB" => Ok(()),
                other => Err(format!("kplug.io/implementation is {other:?}")),
            }
        })
        .await;
    kplug_testenv::eventually("the hanging call", T, || async {
        (!calls_for(&w, "held").is_empty())
            .then_some(())
            .ok_or("no call yet")
    })
    .await;
    assert_eq!(table.data.pointer("/status/implementation"), None);

    // The crash, and a world that would choose otherwise: MariaDB's plugin
    // gone, PostgreSQL preferred and ready.
    signal(&w.operator, Signal::SIGKILL);
    w.operator.wait().await.unwrap();
    mariadb.kill().await.unwrap();
    let _postgresql = spawn_plugin(&w, &[]);
    w.merge_table(
        "held",
        json!({"metadata": {"annotations": {"kplug.test/behavior": "ok"}},
               "spec": {"preferredImplementation": "PostgreSQL"}}),
    )
    .await;
    w.operator = operator_command_for(
        &DATABASE_TABLE,
        "kplug-operator-0",
        &w.ns,
        w.sockets.path(),
        w.metrics_port,
        &args,
        kplug_testenv::control_plane().kubeconfig_path(),
    )
    .spawn()
    .expect("start kplug-operator again");
    let waiting = w
        .table_until("held", "waiting for the recorded implementation", T, |t| {
            expect_condition(t, "PluginAvailable", "False", "PluginUnavailable")
        })
        .await;
    assert_eq!(
        waiting.data.pointer("/status/implementation"),
        Some(&json!("MariaDB"))
    );
    // MariaDB's plugin is back: the table is served there.
    let _mariadb = spawn_mariadb_plugin(&w);
    w.ready_on("held", "MariaDB", T).await;
    let by: Vec<String> = calls_for(&w, "held")
        .iter()
        .map(|c| c["plugin"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        by.iter().all(|p| p == "mariadb"),
        "another implementation's plugin was called: {by:?}"
    );
}

//! End-to-end: the real kube-apiserver (kplug-testenv), the real
//! `kplug-operator` binary, real plugin processes on real Unix sockets.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Patch, PatchParams};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use support::*;

const T: Duration = Duration::from_secs(30);

/// `/readyz` (the Deployment's readiness probe) turns 200 once the
/// controller's cache has synced, and stays so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_ready_once_the_cache_has_synced() {
    let w = world("readyz", &[]).await;
    let status_line = || async {
        let response = http_get(w.metrics_port, "/readyz")
            .await
            .unwrap_or_default();
        response.lines().next().unwrap_or_default().to_owned()
    };
    kplug_testenv::eventually("/readyz answers 200", T, || async {
        let line = status_line().await;
        line.contains(" 200 ").then_some(()).ok_or(line)
    })
    .await;
    assert!(status_line().await.contains(" 200 "));
    assert!(
        http_get(w.metrics_port, "/healthz")
            .await
            .unwrap_or_default()
            .contains(" 200 ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walkthrough_prefers_mariadb_gets_postgresql() {
    let w = world("walkthrough", &[]).await;
    let _pg = spawn_plugin(&w, &[]);
    w.create_users("users", json!({})).await;

    let table = w.ready_on("users", "PostgreSQL", T).await;
    // The plugin's status in the base resource, the operator's next to it.
    assert_eq!(
        table.data.pointer("/status/observedSpec/serverName"),
        Some(&json!("authorization-cluster"))
    );
    assert_eq!(
        table.data.pointer("/status/pluginVersion"),
        Some(&json!("1.0.0"))
    );
    assert_eq!(
        table.data.pointer("/status/observedGeneration"),
        Some(&json!(1))
    );
    // No plugin ever offered MariaDB: the object is served, and says why
    // not by the implementation it prefers.
    expect_condition(&table, "PluginAvailable", "True", "PreferenceNotOffered").unwrap();
    // Its extensions are all there: nothing to say.
    assert!(
        condition(&table, "ExtensionsResolved").is_none(),
        "{table:?}"
    );
    expect_condition(&table, "TableReady", "True", "Scripted").unwrap();
    assert!(
        table.finalizers().iter().any(|f| f == "kplug.io/finalizer"),
        "finalizer added once chosen"
    );

    // The plugin's status in the extension it understands, and only there.
    let pg = w.api(&pg_ext_resource()).get("users").await.unwrap();
    assert_eq!(
        pg.data.pointer("/status/seenBy"),
        Some(&json!("postgresql"))
    );
    assert_eq!(
        pg.data.pointer("/status/specSeen/partitionBy"),
        Some(&json!("hash"))
    );
    let maria = w.api(&maria_ext_resource()).get("users").await.unwrap();
    assert_eq!(
        maria.data.pointer("/status/seenBy"),
        None,
        "the MariaDB extension was not sent to the PostgreSQL plugin"
    );

    // Field managers: the table's status is applied by the operator, the
    // plugin's fields with its own part, in one write; the extension's by
    // the plugin's own field manager.
    let status_managers = |obj: &kube::api::DynamicObject| -> Vec<String> {
        obj.metadata
            .managed_fields
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.subresource.as_deref() == Some("status"))
            .filter_map(|m| m.manager)
            .collect()
    };
    assert_eq!(status_managers(&table), ["kplug-operator"]);
    assert_eq!(status_managers(&pg), ["kplug-plugin-postgresql"]);

    w.until_events(
        "users",
        "ImplementationSelected and the plugin's Event",
        |events| {
            events
            .iter()
            .any(|(_, r, n)| r == "ImplementationSelected" && n.contains("MariaDB"))
            // The plugin's Events are recorded too.
            && events.iter().any(|(_, r, _)| r == "Reconciled")
        },
    )
    .await;
    // Each Event says who reported it: the plugin's as the operator on its
    // behalf (`kubectl describe` shows it as From), the operator's own as
    // the operator.
    let from: Vec<(String, String)> = w
        .events_api()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("users"))
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.reporting_controller.unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        from.iter()
            .any(|(r, c)| r == "Reconciled" && c == "kplug-operator/postgresql"),
        "{from:?}"
    );
    assert!(
        from.iter()
            .any(|(r, c)| r == "ImplementationSelected" && c == "kplug-operator"),
        "{from:?}"
    );
    let calls = w.calls();
    let kinds: Vec<_> = calls[0]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["DatabaseTablePostgreSqlExtension"]);
}

/// Just after the operator starts, its sidecars register one after
/// another. A table preferring an implementation whose plugin is a moment
/// late waits for it (the choice is sticky: a fallback would be for good);
/// a preference nobody offers falls back (to the first implementation in
/// the stable order) once the start-up grace, one heartbeat TTL, is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_start_up_a_preference_waits_for_its_late_plugin() {
    // Long enough that the late plugin is surely up within it, even on a
    // loaded machine; the fallback at its end is what the test waits for.
    let ttl = Duration::from_secs(30);
    let w = world("startup", &["--heartbeat-ttl", "30s"]).await;
    let started = Instant::now();
    let _pg = spawn_plugin(&w, &[]);
    w.until_plugin_up("postgresql", T).await;
    w.create_table("late", "MariaDB", json!({}), false).await;
    w.create_table("nobody", "Oracle", json!({}), false).await;
    for name in ["late", "nobody"] {
        let table = w
            .table_until(name, "it waits for its preference", T, |t| {
                expect_condition(t, "PluginAvailable", "False", "WaitingForPreferred")
            })
            .await;
        let (_, _, message) = condition(&table, "PluginAvailable").unwrap();
        assert!(
            message.contains("preferred implementation") && message.contains("registering"),
            "{message}"
        );
        assert_eq!(table.data.pointer("/status/implementation"), None);
    }
    assert!(
        started.elapsed() < ttl / 2,
        "the checks above ran well within the grace ({:?}), or the rest proves nothing",
        started.elapsed()
    );

    let _maria = spawn_mariadb_plugin(&w);
    w.table_until("late", "late is Ready on MariaDB", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")?;
        (t.data.pointer("/status/plugin") == Some(&json!("mariadb")))
            .then_some(())
            .ok_or_else(|| format!("plugin is {:?}", t.data.pointer("/status/plugin")))
    })
    .await;
    let table = w.ready_on("nobody", "MariaDB", ttl + T).await;
    assert_eq!(
        table.data.pointer("/status/plugin"),
        Some(&json!("mariadb"))
    );
    // Each table reached one plugin, once; the late one never reached the
    // plugin that was first.
    let mut calls: Vec<(String, String)> = w
        .calls()
        .iter()
        .filter(|c| c["call"] == "Reconcile")
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["plugin"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    calls.sort();
    assert_eq!(
        calls,
        [
            ("late".to_owned(), "mariadb".to_owned()),
            ("nobody".to_owned(), "mariadb".to_owned())
        ]
    );
    let events = w.events_for("late").await;
    assert!(
        events.iter().all(|(kind, _, _)| kind == "Normal"),
        "waiting out the grace is routine: {events:?}"
    );
}

/// A typo in `spec.preferredImplementation` gets a Warning and a condition
/// naming what is offered; fixing it on an object already placed says that
/// the choice is sticky and how to move. Each Warning comes once, not once
/// per reconcile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preference_not_honoured_says_why_once() {
    let w = world("typo", &["--heartbeat-ttl", "3s"]).await;
    let _pg = spawn_plugin(&w, &[]);
    w.until_plugin_up("postgresql", T).await;
    w.create_table("typo", "PostgreSQl-typo", json!({}), false)
        .await;
    let table = w
        .table_until("typo", "typo is served, with a notice", T, |t| {
            expect_condition(t, "Ready", "True", "Reconciled")?;
            expect_condition(t, "PluginAvailable", "True", "PreferenceNotOffered")
        })
        .await;
    let (_, _, message) = condition(&table, "PluginAvailable").unwrap();
    assert!(
        message.contains("\"PostgreSQl-typo\" is offered by no plugin")
            && message.contains("(offered: PostgreSQL)")
            && message.contains("check its spelling"),
        "{message}"
    );
    // A spec edit reconciles again: still one Warning.
    w.merge_table("typo", json!({"spec": {"serverName": "edited"}}))
        .await;
    w.table_until("typo", "the edit is reconciled", T, |t| {
        (t.data.pointer("/status/observedGeneration") == Some(&json!(2)))
            .then_some(())
            .ok_or_else(|| "generation 2 not observed".into())
    })
    .await;
    let warnings = |events: &[(String, String, String)], reason: &str| {
        events
            .iter()
            .filter(|(kind, r, _)| kind == "Warning" && r == reason)
            .count()
    };
    let events = w
        .until_events("typo", "PreferenceNotOffered", |e| {
            warnings(e, "PreferenceNotOffered") > 0
        })
        .await;
    assert_eq!(warnings(&events, "PreferenceNotOffered"), 1, "{events:?}");

    // Fixed, but the object stays where it is.
    let _maria = spawn_mariadb_plugin(&w);
    w.until_plugin_up("mariadb", T).await;
    w.merge_table(
        "typo",
        json!({"spec": {"preferredImplementation": "MariaDB"}}),
    )
    .await;
    let table = w
        .table_until("typo", "the sticky choice is explained", T, |t| {
            expect_condition(t, "PluginAvailable", "True", "PreferenceNotChosen")
        })
        .await;
    assert_eq!(
        table.data.pointer("/status/implementation"),
        Some(&json!("PostgreSQL"))
    );
    let (_, _, message) = condition(&table, "PluginAvailable").unwrap();
    assert!(
        message.contains("is MariaDB") && message.contains("annotate it kplug.io/reselect"),
        "{message}"
    );
    let events = w
        .until_events("typo", "PreferenceNotChosen", |e| {
            warnings(e, "PreferenceNotChosen") > 0
        })
        .await;
    assert_eq!(warnings(&events, "PreferenceNotChosen"), 1, "{events:?}");
    assert!(
        w.calls()
            .iter()
            .all(|c| c["name"] != "typo" || c["plugin"] == "postgresql"),
        "the object was never moved"
    );
}

/// `kplug.io/reselect` moves an object: Finalize on the old
/// implementation first, then the preferred one; the old plugin's status
/// goes, and so does the annotation. Once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reselect_finalizes_the_old_implementation_then_moves() {
    let w = world("reselect", &[]).await;
    let _pg = spawn_plugin(&w, &[]);
    let _maria = spawn_mariadb_plugin(&w);
    w.until_plugin_up("postgresql", T).await;
    w.until_plugin_up("mariadb", T).await;
    w.create_table("mover", "PostgreSQL", json!({}), false)
        .await;
    w.ready_on("mover", "PostgreSQL", T).await;

    w.merge_table(
        "mover",
        json!({"spec": {"preferredImplementation": "MariaDB"}}),
    )
    .await;
    w.table_until("mover", "the preference is noted", T, |t| {
        expect_condition(t, "PluginAvailable", "True", "PreferenceNotChosen")
    })
    .await;
    w.merge_table(
        "mover",
        json!({"metadata": {"annotations": {"kplug.io/reselect": "now"}}}),
    )
    .await;
    let table = w.ready_on("mover", "MariaDB", T).await;
    // On the preferred implementation now: the notice is gone.
    assert!(condition(&table, "PluginAvailable").is_none(), "{table:?}");
    assert_eq!(
        table.data.pointer("/status/plugin"),
        Some(&json!("mariadb"))
    );
    assert!(
        !table.annotations().contains_key("kplug.io/reselect"),
        "the annotation is removed: {:?}",
        table.annotations()
    );
    let old_fields: Vec<_> = table
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.manager.as_deref() == Some("kplug-plugin-postgresql"))
        .map(|m| m.fields_v1)
        .collect();
    // Its applied status is empty: it owns no field any more.
    assert!(
        old_fields
            .iter()
            .all(|f| f.as_ref().map(|f| &f.0) == Some(&json!({"f:status": {}}))),
        "the old plugin's status is gone: {old_fields:?}"
    );

    // Give a stale copy in the cache time to do harm, then read the calls:
    // Finalize on PostgreSQL once, and after it only MariaDB.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls: Vec<(String, String)> = w
        .calls()
        .iter()
        .filter(|c| c["name"] == "mover")
        .map(|c| {
            (
                c["call"].as_str().unwrap_or_default().to_owned(),
                c["plugin"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let finalize = calls
        .iter()
        .position(|(call, _)| call == "Finalize")
        .unwrap_or_else(|| panic!("no Finalize: {calls:?}"));
    assert_eq!(calls[finalize].1, "postgresql", "{calls:?}");
    assert!(
        calls[..finalize].iter().all(|(_, p)| p == "postgresql"),
        "{calls:?}"
    );
    assert!(
        calls[finalize + 1..]
            .iter()
            .all(|(call, p)| call == "Reconcile" && p == "mariadb"),
        "after the Finalize, only MariaDB's Reconcile: {calls:?}"
    );
    let reselected = |events: &[(String, String, String)]| {
        events
            .iter()
            .filter(|(kind, r, n)| {
                kind == "Normal"
                    && r == "Reselected"
                    && n.contains("left PostgreSQL (plugin postgresql)")
            })
            .count()
    };
    let events = w
        .until_events("mover", "the Reselected Event", |e| reselected(e) > 0)
        .await;
    assert_eq!(reselected(&events), 1, "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_choice_waits_for_its_plugin_and_converges_when_it_returns() {
    // A long resync proves convergence does not wait for it. Objects say
    // their plugin is gone once it has been gone for the TTL.
    let w = world("sticky", &["--resync", "1h", "--heartbeat-ttl", "3s"]).await;
    let pg = spawn_plugin(&w, &[]);
    w.create_users("users", json!({})).await;
    w.table_until("users", "Ready on PostgreSQL", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;

    // The chosen plugin stops; a MariaDB plugin (the preferred one!) arrives.
    signal(&pg, Signal::SIGTERM);
    let _maria = spawn_mariadb_plugin(&w);
    let waiting = w
        .table_until("users", "PluginAvailable=False", T, |t| {
            expect_condition(t, "PluginAvailable", "False", "PluginUnavailable")
        })
        .await;
    let (_, _, message) = condition(&waiting, "PluginAvailable").unwrap();
    assert!(message.contains("PostgreSQL"), "{message}");
    // Give the operator time to (wrongly) move it, then check it did not.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = w.tables().get("users").await.unwrap();
    assert_eq!(
        still.data.pointer("/status/implementation"),
        Some(&json!("PostgreSQL"))
    );
    expect_condition(&still, "Ready", "False", "PluginUnavailable").unwrap();
    assert!(
        w.calls().iter().all(|c| c["plugin"] != "mariadb"),
        "the MariaDB plugin must never be called"
    );

    // The PostgreSQL plugin comes back: converges at once, not at resync.
    let back = Instant::now();
    let _pg2 = spawn_plugin(&w, &[]);
    w.table_until("users", "Ready again", Duration::from_secs(15), |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
    eprintln!("converged {:?} after the plugin restarted", back.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_is_noticed_in_under_a_second() {
    let w = world("sigkill", &[]).await;
    let mut pg = spawn_plugin(&w, &[]);
    w.until_plugin_up("postgresql", T).await;
    assert_eq!(
        metric(&w.metrics().await, "kplug_plugins_registered"),
        Some(1.0)
    );

    signal(&pg, Signal::SIGKILL);
    let killed = Instant::now();
    let _ = pg.wait().await;
    let gone =
        kplug_testenv::eventually("plugin down in metrics", Duration::from_secs(5), || async {
            let m = w.metrics().await;
            (metric(&m, "kplug_plugin_up{plugin=\"postgresql\"}") == Some(0.0))
                .then(|| killed.elapsed())
                .ok_or(m)
        })
        .await;
    eprintln!("SIGKILL noticed after {gone:?}");
    assert!(gone < Duration::from_secs(1), "took {gone:?}");
    assert_eq!(
        metric(&w.metrics().await, "kplug_plugins_registered"),
        Some(0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigstop_is_removed_after_the_ttl() {
    let w = world("sigstop", &["--heartbeat-ttl", "3s"]).await;
    let pg = spawn_plugin(&w, &[]);
    w.until_plugin_up("postgresql", T).await;
    signal(&pg, Signal::SIGSTOP);
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        metric(&w.metrics().await, "kplug_plugin_up{plugin=\"postgresql\"}"),
        Some(1.0),
        "a frozen plugin keeps its socket open: only the TTL removes it"
    );
    let removed = kplug_testenv::eventually(
        "plugin removed after the TTL",
        Duration::from_secs(10),
        || async {
            let m = w.metrics().await;
            (metric(&m, "kplug_plugin_up{plugin=\"postgresql\"}") == Some(0.0))
                .then(|| stopped.elapsed())
                .ok_or(m)
        },
    )
    .await;
    eprintln!("frozen plugin removed after {removed:?} (TTL 3s)");
    assert!(
        removed >= Duration::from_millis(2500),
        "removed too early: {removed:?}"
    );
    signal(&pg, Signal::SIGKILL);
    signal(&pg, Signal::SIGCONT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_version_replaces_the_old_one_without_a_failed_reconcile() {
    let w = world("upgrade", &[]).await;
    let mut v1 = spawn_plugin(&w, &[]);
    w.create_users("users", json!({})).await;
    w.table_until("users", "reconciled by 1.0.0", T, |t| {
        (t.data.pointer("/status/pluginVersion") == Some(&json!("1.0.0")))
            .then_some(())
            .ok_or_else(|| "not yet".into())
    })
    .await;
    // A container restart with a new image: the old process drains and
    // exits, the new one starts on the same socket name.
    signal(&v1, Signal::SIGTERM);
    let exit = v1.wait().await.unwrap();
    assert!(exit.success(), "the SDK exits 0 after draining: {exit:?}");
    let _v2 = spawn_plugin(&w, &[("SCRIPTED_VERSION", "2.0.0")]);
    // A spec change makes the new version reconcile it.
    w.merge_table("users", json!({"spec": {"serverName": "other-cluster"}}))
        .await;
    let table = w
        .table_until("users", "reconciled by 2.0.0", T, |t| {
            expect_condition(t, "Ready", "True", "Reconciled")?;
            (t.data.pointer("/status/pluginVersion") == Some(&json!("2.0.0")))
                .then_some(())
                .ok_or_else(|| "not 2.0.0 yet".into())
        })
        .await;
    assert_eq!(
        table.data.pointer("/status/observedSpec/serverName"),
        Some(&json!("other-cluster"))
    );
    let m = w.metrics().await;
    let reconciles = |outcome| metric_sum(&m, "kplug_reconcile_total", &[("outcome", outcome)]);
    assert!(reconciles("ok") >= 2.0, "both versions reconciled: {m}");
    assert_eq!(reconciles("failed"), 0.0, "{m}");
    assert_eq!(reconciles("error"), 0.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_waits_for_finalize() {
    let w = world("delete", &[]).await;
    let _pg = spawn_plugin(&w, &[]);
    w.create_users("users", json!({"kplug.test/finalize-retries": "2"}))
        .await;
    w.table_until("users", "Ready", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;

    w.tables()
        .delete("users", &DeleteParams::default())
        .await
        .unwrap();
    // Still there while the plugin says "not yet" (two RETRY answers).
    let pending = w
        .table_until("users", "finalizing", T, |t| {
            expect_condition(t, "Reconciled", "False", "Finalizing")
        })
        .await;
    assert!(pending.metadata.deletion_timestamp.is_some());
    w.until_gone(&table_resource(), "users", T).await;
    let finalizes = w
        .calls()
        .into_iter()
        .filter(|c| c["call"] == "Finalize" && c["name"] == "users")
        .count();
    assert_eq!(finalizes, 3, "two RETRY answers, then done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_edit_reconciles_the_base() {
    let w = world("extedit", &["--resync", "1h"]).await;
    let _pg = spawn_plugin(&w, &[]);
    w.create_users("users", json!({})).await;
    w.table_until("users", "Ready", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;

    w.api(&pg_ext_resource())
        .patch(
            "users",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"partitionBy": "range"}})),
        )
        .await
        .unwrap();
    let ext = kplug_testenv::eventually("the plugin saw the new extension spec", T, || async {
        let ext = w
            .api(&pg_ext_resource())
            .get("users")
            .await
            .map_err(|e| e.to_string())?;
        (ext.data.pointer("/status/specSeen/partitionBy") == Some(&json!("range")))
            .then_some(ext)
            .ok_or("not yet".to_owned())
    })
    .await;
    assert_eq!(ext.data.pointer("/spec/partitionBy"), Some(&json!("range")));
    assert!(
        w.calls()
            .iter()
            .any(|c| c["extensions"][0]["spec"]["partitionBy"] == "range")
    );
}

use kube::ResourceExt;

const PG_EXTENSIONS: &str = "databasetablepostgresqlextensions";

/// The gap between a base's first reconcile and the first list of its
/// extension kind's watch: the list is held by the proxy, the extension is
/// edited, then the list completes. The edit must reach the plugin, with no
/// resync to rescue it (1 h).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_edit_before_the_watch_has_listed_reaches_the_plugin() {
    let proxy = api_proxy::ApiProxy::start().await;
    proxy.hold_lists(PG_EXTENSIONS);
    let w = world_with_kubeconfig("extgap", &["--resync", "1h"], proxy.kubeconfig()).await;
    let _pg = spawn_plugin(&w, &[]);
    w.create_users("users", json!({})).await;
    // The base's first reconcile has started the extension watch ...
    proxy.wait_for_held_list(PG_EXTENSIONS, T).await;
    // ... and has either called the plugin with what it read, or is waiting
    // for that watch to list (and says so).
    w.table_until("users", "first reconcile done", T, |t| {
        let called = w
            .calls()
            .iter()
            .any(|c| c["call"] == "Reconcile" && c["name"] == "users");
        if called {
            return Ok(());
        }
        expect_condition(
            t,
            "ExtensionsResolved",
            "Unknown",
            "WaitingForExtensionWatch",
        )
    })
    .await;
    w.set_partition_by("users", "range").await;
    proxy.release_lists(PG_EXTENSIONS);
    w.plugin_saw_partition_by("users", "range", T).await;
    w.table_until("users", "Ready", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
}

/// An edit made while the extension watch relists (its resource version
/// expired, its connection dropped) arrives in the list, not as an event;
/// it must reach the plugin all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_edit_during_a_relist_reaches_the_plugin() {
    let proxy = api_proxy::ApiProxy::start().await;
    let w = world_with_kubeconfig("extrelist", &["--resync", "1h"], proxy.kubeconfig()).await;
    let _pg = spawn_plugin(&w, &[]);
    w.create_users("users", json!({})).await;
    w.table_until("users", "Ready", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
    w.plugin_saw_partition_by("users", "hash", T).await;

    proxy.force_relist(PG_EXTENSIONS);
    proxy.wait_for_held_list(PG_EXTENSIONS, T).await;
    w.set_partition_by("users", "range").await;
    proxy.release_lists(PG_EXTENSIONS);
    w.plugin_saw_partition_by("users", "range", T).await;
}

/// How many tables the restart test makes: small in `make test`, 1,000
/// (`KPLUG_RESTART_OBJECTS=1000`) for the figure in the reliability notes.
fn restart_objects() -> usize {
    std::env::var("KPLUG_RESTART_OBJECTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40)
}

/// A plugin that restarts with the same version and offers reconciles
/// nothing: none of its objects was waiting for it. (Every registry change
/// used to reconcile every object: one Reconcile call per object.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_restart_with_the_same_offers_causes_no_reconcile() {
    use futures::StreamExt;

    let n = restart_objects();
    let w = world("restart", &["--resync", "1h"]).await;
    let mut plugin = spawn_plugin(&w, &[]);
    let started = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let w = &w;
            async move {
                w.create_table(&format!("t{i}"), "PostgreSQL", json!({}), false)
                    .await;
            }
        })
        .await;
    kplug_testenv::eventually("every table Ready", Duration::from_secs(120), || async {
        let tables = w
            .tables()
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let ready = tables
            .items
            .iter()
            .filter(|t| expect_condition(t, "Ready", "True", "Reconciled").is_ok())
            .count();
        (ready == n)
            .then_some(())
            .ok_or(format!("{ready}/{n} Ready"))
    })
    .await;
    eprintln!(
        "{n} tables created and Ready in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let before = reconcile_calls(&w);
    // One call each: an object's own status writes must not wake it again
    // (under load the watch delivered the echo of a reconcile's first
    // write after its last one, and that stale echo woke the object).
    let mut per_table: BTreeMap<String, usize> = BTreeMap::new();
    for call in w.calls().iter().filter(|c| c["call"] == "Reconcile") {
        *per_table
            .entry(call["name"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    per_table.retain(|_, calls| *calls != 1);
    assert!(
        before == n && per_table.is_empty(),
        "{before} Reconcile calls for {n} new tables; called more than once: {per_table:?}"
    );

    signal(&plugin, Signal::SIGTERM);
    assert!(plugin.wait().await.unwrap().success());
    let _plugin = spawn_plugin(&w, &[]);
    w.until_plugin_up("postgresql", T).await;
    // Count until no call has been made for 3 s, so that a storm is
    // counted whole (it used to take seconds to drain).
    let settled = reconcile_calls_when_quiet(&w, Duration::from_secs(3)).await;
    let caused = settled - before;
    eprintln!("a plugin restart with {n} Ready objects caused {caused} Reconcile call(s)");
    let extra: Vec<Value> = w
        .calls()
        .into_iter()
        .filter(|c| c["call"] == "Reconcile")
        .skip(before)
        .collect();
    assert_eq!(
        caused, 0,
        "no object was waiting for the plugin; the calls after every table was Ready: {extra:?}"
    );
}

/// The Reconcile calls the scripted plugin has logged so far.
fn reconcile_calls(w: &World) -> usize {
    w.calls()
        .iter()
        .filter(|c| c["call"] == "Reconcile")
        .count()
}

/// [`reconcile_calls`] once no call has been made for `quiet`, so that a
/// burst of calls is counted whole.
async fn reconcile_calls_when_quiet(w: &World, quiet: Duration) -> usize {
    let mut settled = reconcile_calls(w);
    loop {
        tokio::time::sleep(quiet).await;
        let now = reconcile_calls(w);
        if now == settled {
            return settled;
        }
        settled = now;
    }
}

/// In a pod the kubelet sends SIGTERM to the operator and to its plugin
/// sidecars, one container after another. A plugin signalled a moment after
/// the operator must still have its Unregister answered (the registry keeps
/// serving while plugins unregister), and both exit cleanly.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_stopped_just_after_the_operator_still_unregisters() {
    let mut world = world("sigterm-pod", &[]).await;
    let mut plugin = plugin_command(
        &world,
        world.sockets.path(),
        &[
            ("SCRIPTED_NAME", "mariadb"),
            ("SCRIPTED_IMPLEMENTATION", "MariaDB"),
        ],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .expect("start the scripted plugin");
    world.until_plugin_up("mariadb", T).await;

    signal(&world.operator, Signal::SIGTERM);
    // Long enough for the operator's controller to have stopped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(&plugin, Signal::SIGTERM);

    let mut log = String::new();
    let stdout = plugin.stdout.take().unwrap();
    let read = async {
        use tokio::io::AsyncReadExt;
        let mut stdout = stdout;
        stdout.read_to_string(&mut log).await.unwrap();
        plugin.wait().await.unwrap()
    };
    let plugin_status = tokio::time::timeout(T, read)
        .await
        .expect("the plugin exits after SIGTERM");
    assert!(plugin_status.success(), "plugin: {plugin_status}\n{log}");
    let shutdown = log
        .split_once("shutting down")
        .map(|(_, after)| after)
        .unwrap_or_else(|| panic!("no shutdown in the plugin's log:\n{log}"));
    assert!(
        shutdown.contains("unregistered") && !shutdown.contains("Unregister failed"),
        "the plugin's Unregister was not answered:\n{log}"
    );
    let operator_status = tokio::time::timeout(T, world.operator.wait())
        .await
        .expect("the operator exits after SIGTERM")
        .unwrap();
    assert!(operator_status.success(), "operator: {operator_status}");
}

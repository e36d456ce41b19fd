//! Lifecycle hooks and call deadlines, with real plugin processes on the
//! real control plane: the scripted plugin declares hooks (`SCRIPTED_HOOKS`)
//! and each object's annotations script what each hook answers.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

const T: Duration = Duration::from_secs(45);

/// The calls the scripted plugins logged for object `name`, as
/// `plugin/hook@phase` for hooks and `Reconcile`/`Finalize` for calls.
fn calls_for(w: &World, name: &str) -> Vec<String> {
    w.calls()
        .into_iter()
        .filter(|c| c["name"] == name)
        .map(|c| match c["call"].as_str() {
            Some("Hook") => format!(
                "{}/{}@{}",
                c["plugin"].as_str().unwrap_or_default(),
                c["hook"].as_str().unwrap_or_default(),
                c["phase"].as_str().unwrap_or_default()
            ),
            other => other.unwrap_or_default().to_owned(),
        })
        .collect()
}

fn hook_metric(m: &str, plugin: &str, hook: &str, outcome: &str) -> f64 {
    metric_sum(
        m,
        "kplug_hook_calls_total",
        &[("plugin", plugin), ("hook", hook), ("outcome", outcome)],
    )
}

/// Two plugins hook into DatabaseTable: `postgresql` (which also
/// implements it) and `auditor` (which serves another implementation that
/// no table here prefers).
async fn hooked_world(prefix: &str) -> (World, Vec<tokio::process::Child>) {
    let w = world(prefix, &[]).await;
    let postgresql = spawn_plugin(
        &w,
        &[(
            "SCRIPTED_HOOKS",
            "check:before-reconcile:sync-enforce:5,note:after-reconcile:sync-bypass:0,guard:before-finalize:sync-enforce:0",
        )],
    );
    let auditor = spawn_plugin(
        &w,
        &[
            ("SCRIPTED_NAME", "auditor"),
            ("SCRIPTED_IMPLEMENTATION", "Audit"),
            ("SCRIPTED_EXTENSIONS", ""),
            (
                "SCRIPTED_HOOKS",
                "early:before-reconcile:sync-bypass:-1,check:before-reconcile:sync-bypass:5,audit:after-reconcile:async:0,gone:after-finalize:sync-bypass:0",
            ),
        ],
    );
    w.until_plugin_up("postgresql", T).await;
    w.until_plugin_up("auditor", T).await;
    (w, vec![postgresql, auditor])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_in_declared_order_and_write_only_under_their_own_key() {
    let (w, _plugins) = hooked_world("hook-order").await;
    // The operator lists each plugin's hooks (`kubectl kplug plugins`).
    let listed = w.listed_plugins().await;
    let hooks_of = |name: &str| -> Vec<String> {
        listed["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["name"] == name)
            .flat_map(|p| p["hooks"].as_array().cloned().unwrap_or_default())
            .map(|h| {
                format!(
                    "{}:{}:{}:{}",
                    h["name"].as_str().unwrap_or_default(),
                    h["phase"].as_str().unwrap_or_default(),
                    h["behaviour"].as_str().unwrap_or_default(),
                    h["order"]
                )
            })
            .collect()
    };
    assert_eq!(
        hooks_of("postgresql"),
        [
            "check:before-reconcile:sync-enforce:5",
            "note:after-reconcile:sync-bypass:0",
            "guard:before-finalize:sync-enforce:0"
        ],
        "{listed}"
    );
    assert_eq!(hooks_of("auditor").len(), 4, "{listed}");
    w.create_table("ordered", "PostgreSQL", json!({}), false)
        .await;
    let table = w.ready_on("ordered", "PostgreSQL", T).await;
    // Before: by order, then plugin name (auditor's check before
    // postgresql's, both order 5). After: the sync hook is waited for; the
    // async one is queued (and may run at any time after).
    let calls = kplug_testenv::eventually("the async audit hook ran", T, || async {
        let calls = calls_for(&w, "ordered");
        calls
            .iter()
            .any(|c| c == "auditor/audit@after-reconcile")
            .then(|| calls.clone())
            .ok_or(calls)
    })
    .await;
    let sync: Vec<&str> = calls
        .iter()
        .map(String::as_str)
        .filter(|c| *c != "auditor/audit@after-reconcile")
        .take(5)
        .collect();
    assert_eq!(
        sync,
        [
            "auditor/early@before-reconcile",
            "auditor/check@before-reconcile",
            "postgresql/check@before-reconcile",
            "Reconcile",
            "postgresql/note@after-reconcile",
        ],
        "{calls:?}"
    );
    // Each hook's status is under status.hooks.<plugin>, next to (not
    // instead of) the implementation's own status.
    let status = &table.data["status"];
    assert_eq!(
        status["hooks"]["postgresql"]["check"]["phase"], "before-reconcile",
        "{status}"
    );
    assert_eq!(
        status["hooks"]["postgresql"]["note"]["phase"], "after-reconcile",
        "{status}"
    );
    assert_eq!(
        status["hooks"]["auditor"]["early"]["phase"], "before-reconcile",
        "{status}"
    );
    assert_eq!(status["pluginVersion"], "1.0.0", "{status}");

    // Deleting: the before-finalize hook, Finalize, then the after-finalize
    // hook; the object goes.
    w.tables()
        .delete("ordered", &Default::default())
        .await
        .unwrap();
    w.until_gone(&table_resource(), "ordered", T).await;
    let calls = calls_for(&w, "ordered");
    let finalizing: Vec<&str> = calls
        .iter()
        .map(String::as_str)
        .skip_while(|c| !c.ends_with("@before-finalize"))
        .collect();
    assert_eq!(
        finalizing,
        [
            "postgresql/guard@before-finalize",
            "Finalize",
            "auditor/gone@after-finalize"
        ],
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_sync_enforce_hook_stops_the_step_and_a_bypass_hook_does_not() {
    let (w, _plugins) = hooked_world("hook-fail").await;
    // `check` fails for both plugins: auditor's is sync-bypass (an Event,
    // and on), postgresql's is sync-enforce (the reconcile stops).
    w.create_table(
        "enforced",
        "PostgreSQL",
        json!({"kplug.test/hook-check": "fail"}),
        false,
    )
    .await;
    // `note` (after-reconcile, sync-bypass) fails: an Event, still Ready.
    w.create_table(
        "bypassed",
        "PostgreSQL",
        json!({"kplug.test/hook-note": "fail"}),
        false,
    )
    .await;
    let enforced = w
        .table_until("enforced", "the enforce hook stops the reconcile", T, |t| {
            expect_condition(t, "Reconciled", "False", "HookFailed")
        })
        .await;
    let (_, _, message) = condition(&enforced, "Reconciled").unwrap();
    assert!(
        message.contains("hook check of plugin postgresql 1.0.0 (before-reconcile, sync-enforce)")
            && message.contains("scripted failure of hook check")
            && message.contains("PostgreSQL was not called"),
        "{message}"
    );
    w.until_events(
        "enforced",
        "a HookFailed Event for each failed hook",
        |events| {
            let failed: Vec<&str> = events
                .iter()
                .filter(|(type_, reason, _)| type_ == "Warning" && reason == "HookFailed")
                .map(|(_, _, note)| note.as_str())
                .collect();
            failed
                .iter()
                .any(|n| n.contains("hook check of plugin postgresql"))
                && failed
                    .iter()
                    .any(|n| n.contains("hook check of plugin auditor") && n.contains("going on"))
        },
    )
    .await;
    w.ready_on("bypassed", "PostgreSQL", T).await;
    w.until_events(
        "bypassed",
        "a HookFailed Event naming the bypass hook",
        |events| {
            events.iter().any(|(type_, reason, note)| {
                type_ == "Warning"
                    && reason == "HookFailed"
                    && note.contains(
                        "hook note of plugin postgresql 1.0.0 (after-reconcile, sync-bypass)",
                    )
            })
        },
    )
    .await;
    // The implementation was never called for the enforced table, and the
    // hooks before the failing one ran.
    let calls = calls_for(&w, "enforced");
    assert!(!calls.iter().any(|c| c == "Reconcile"), "{calls:?}");
    assert!(
        calls.iter().any(|c| c == "auditor/early@before-reconcile"),
        "{calls:?}"
    );
    let m = w.metrics().await;
    assert!(
        hook_metric(&m, "postgresql", "check", "failed") >= 1.0,
        "{m}"
    );
    assert!(
        hook_metric(&m, "postgresql", "note", "failed") >= 1.0,
        "{m}"
    );
    assert!(
        metric_sum(
            &m,
            "kplug_reconcile_total",
            &[("outcome", "hook_failed"), ("plugin", "postgresql")]
        ) >= 1.0,
        "{m}"
    );

    // Once the hook passes, the reconcile goes on.
    w.merge_table(
        "enforced",
        json!({"metadata": {"annotations": {"kplug.test/hook-check": "ok"}}, "spec": {"serverName": "other"}}),
    )
    .await;
    w.ready_on("enforced", "PostgreSQL", T).await;

    // A failing before-finalize enforce hook keeps the finalizer (Finalize
    // is not called) until it passes.
    w.merge_table(
        "bypassed",
        json!({"metadata": {"annotations": {"kplug.test/hook-guard": "fail"}}}),
    )
    .await;
    w.tables()
        .delete("bypassed", &Default::default())
        .await
        .unwrap();
    let held = w
        .table_until("bypassed", "the guard hook holds the deletion", T, |t| {
            expect_condition(t, "Reconciled", "False", "HookFailed")
        })
        .await;
    let (_, _, message) = condition(&held, "Reconciled").unwrap();
    assert!(
        message.contains("hook guard") && message.contains("the finalizer stays"),
        "{message}"
    );
    assert!(
        !calls_for(&w, "bypassed").iter().any(|c| c == "Finalize"),
        "{:?}",
        calls_for(&w, "bypassed")
    );
    w.merge_table(
        "bypassed",
        json!({"metadata": {"annotations": {"kplug.test/hook-guard": "ok"}}}),
    )
    .await;
    w.until_gone(&table_resource(), "bypassed", T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_hook_that_hangs_never_delays_a_reconcile() {
    let (w, _plugins) = hooked_world("hook-async").await;
    // auditor's async `audit` hook hangs (until its 30 s deadline) for
    // every one of these tables: more than the 4 async workers.
    let names: Vec<String> = (0..6).map(|i| format!("hanging-{i}")).collect();
    let started = Instant::now();
    for name in &names {
        w.create_table(
            name,
            "PostgreSQL",
            json!({"kplug.test/hook-audit": "hang"}),
            false,
        )
        .await;
    }
    for name in &names {
        w.ready_on(name, "PostgreSQL", T).await;
    }
    let ready_after = started.elapsed();
    // Every table is Ready while the hooks still hang: the reconciles did
    // not wait for them (the hooks' deadline is 30 s).
    let m = w.metrics().await;
    let depth = metric(&m, "kplug_hook_queue_depth").unwrap_or_default();
    assert!(
        depth >= 4.0,
        "the hanging hooks are still queued or running: {depth} ({ready_after:?})\n{m}"
    );
    assert_eq!(hook_metric(&m, "auditor", "audit", "ok"), 0.0, "{m}");
    let audited = w.calls().iter().filter(|c| c["hook"] == "audit").count();
    assert!(audited >= 1, "the async hook was called");
    // A table that does not hang its audit is reconciled as fast.
    w.create_table("after", "PostgreSQL", json!({}), false)
        .await;
    w.ready_on("after", "PostgreSQL", T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_declared_deadline_is_a_timeout_and_the_plugin_stays_registered() {
    // The operator would wait 30 s; the plugin asks for 1 s on Reconcile.
    let w = world("deadline", &["--call-timeout", "30s"]).await;
    let _pg = spawn_plugin(&w, &[("SCRIPTED_RECONCILE_DEADLINE", "1")]);
    w.until_plugin_up("postgresql", T).await;
    w.create_table(
        "slow",
        "PostgreSQL",
        json!({"kplug.test/behavior": "sleep-3"}),
        false,
    )
    .await;
    let slow = w
        .table_until("slow", "the slow call times out at 1 s", T, |t| {
            expect_condition(t, "Reconciled", "False", "PluginTimeout")
        })
        .await;
    let (_, _, message) = condition(&slow, "Reconciled").unwrap();
    assert!(
        message.contains("postgresql") && message.contains("within 1s"),
        "{message}"
    );
    // The deadline the operator applies, as listed.
    let listed = w.listed_plugins().await;
    assert_eq!(
        listed["plugins"][0]["deadlines"],
        json!({"reconcile": 1.0, "finalize": 30.0, "hook": 30.0, "validate": 5.0, "default": 5.0}),
        "{listed}"
    );
    // Still registered and serving: a timeout is an outcome of one call.
    let m = w.metrics().await;
    assert_eq!(
        metric(&m, "kplug_plugin_up{plugin=\"postgresql\"}"),
        Some(1.0),
        "{m}"
    );
    assert!(
        metric_sum(
            &m,
            "kplug_plugin_calls_total",
            &[
                ("plugin", "postgresql"),
                ("call", "Reconcile"),
                ("outcome", "timeout")
            ]
        ) >= 1.0,
        "{m}"
    );
    w.create_table("quick", "PostgreSQL", json!({}), false)
        .await;
    w.ready_on("quick", "PostgreSQL", T).await;
}

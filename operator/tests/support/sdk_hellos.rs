//! The end-to-end scenario every SDK's hello plugin (`examples/hello`'s
//! `Greeting` kind, as `make sdk-hellos` builds it) goes through next to the
//! real `kplug-operator`: it registers; a Greeting with a
//! GreetingHelloExtension is reconciled (status on both, Ready, the plugin's
//! Event); a SIGTERM with a call in flight unregisters, drains the call and
//! exits 0; a SIGKILL is noticed in under 1 s; a deletion calls Finalize and
//! the object goes. `go_typescript_plugins.rs` and `java_plugins.rs` run it.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, Patch, PatchParams};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::*;

/// Generous: two operators, two plugins and the API server share the
/// machine's cores with whatever else runs. Only the SIGKILL bound is tight,
/// and that one is the protocol's promise.
const T: Duration = Duration::from_secs(60);

/// One SDK's hello plugin: the program that starts it, and its arguments.
pub struct Hello {
    /// The SDK's name, in messages and the test's namespace.
    pub sdk: &'static str,
    pub program: PathBuf,
    pub args: Vec<PathBuf>,
}

impl Hello {
    /// Starts the plugin next to `world`'s operator. Its log goes to
    /// `<socket dir>/hello-<n>.log`, shown when a check fails.
    fn spawn(&self, world: &World, n: u32) -> Plugin {
        let log = world.sockets.path().join(format!("hello-{n}.log"));
        let file = std::fs::File::create(&log).expect("the plugin's log file");
        let child = Command::new(&self.program)
            .args(&self.args)
            .env("KPLUG_SOCKET_DIR", world.sockets.path())
            // As the Rust plugins in the other tests: registration (and
            // re-registration after a restart) within half a second.
            .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("the plugin's log file"))
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start the {} hello plugin: {e}", self.sdk));
        Plugin { child, log }
    }
}

struct Plugin {
    child: Child,
    log: PathBuf,
}

impl Plugin {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

pub async fn end_to_end(hello: &Hello) {
    let prefix = format!("hello-{}", hello.sdk.to_lowercase());
    let w = world_for(&GREETING, &prefix, &[]).await;

    // Registered: the operator handshook it and routes work to it.
    let plugin = hello.spawn(&w, 1);
    registered(&w, &plugin).await;

    // Reconciled: the plugin's status on the Greeting and on its extension,
    // the operator's Ready, the plugin's Event.
    w.create(
        &greeting_ext_resource(),
        json!({
            "apiVersion": "example.com/v1", "kind": "GreetingHelloExtension",
            "metadata": {"name": "world"}, "spec": {"punctuation": "?"},
        }),
    )
    .await;
    w.create(
        &greeting_resource(),
        json!({
            "apiVersion": "example.com/v1", "kind": "Greeting",
            "metadata": {"name": "world"},
            "spec": {
                "salutation": "hi",
                "preferredImplementation": "Hello",
                "extensions": [{"apiVersion": "example.com/v1", "kind": "GreetingHelloExtension", "name": "world"}],
            },
        }),
    )
    .await;
    let greeting = greeted(&w, "hi, world?", &plugin).await;
    assert!(
        greeting
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "kplug.io/finalizer"),
        "the operator adds its finalizer: {:?}",
        greeting.metadata
    );
    w.until(
        &greeting_ext_resource(),
        "world",
        "the extension's status says which greeting used it",
        T,
        |ext| match ext.data.pointer("/status/lastUsedBy") {
            Some(by) if by == "world" => Ok(()),
            other => Err(format!("status.lastUsedBy is {other:?}")),
        },
    )
    .await;
    plugin_event(&w, "world", "Greeted", "hi, world?").await;

    let plugin = sigterm_drains_a_call_in_flight(&w, plugin, hello).await;
    let _plugin = sigkill_is_noticed_in_under_a_second(&w, plugin, hello).await;

    // Deleted: Finalize is called (its Event), then the object goes.
    w.api(&greeting_resource())
        .delete("world", &DeleteParams::default())
        .await
        .unwrap();
    w.until_gone(&greeting_resource(), "world", T).await;
    plugin_event(&w, "world", "SaidGoodbye", "goodbye, world").await;

    // Every Reconcile and Finalize call answered OK: none failed, timed out
    // or found the plugin gone (the drained one included). Probes are left
    // out: after the SIGKILL the operator may probe the dead plugin to tell
    // a dropped connection from a dead process, and that Probe fails.
    let m = w.metrics().await;
    let calls = |labels: &[(&str, &str)]| metric_sum(&m, "kplug_plugin_calls_total", labels);
    for call in ["Reconcile", "Finalize"] {
        let of_call = [("plugin", "hello"), ("call", call)];
        let ok = calls(&[of_call[0], of_call[1], ("outcome", "ok")]);
        assert!(ok >= 1.0, "{call} was called\n{m}");
        assert_eq!(calls(&of_call), ok, "every {call} answered OK\n{m}");
    }
}

/// Waits until the operator lists `plugin` as registered and ready, with
/// what it serves.
async fn registered(w: &World, plugin: &Plugin) {
    kplug_testenv::eventually("the plugin is registered and ready", T, || async {
        let listed = w.listed_plugins().await;
        let hello = listed["plugins"]
            .as_array()
            .and_then(|plugins| plugins.iter().find(|p| p["name"] == "hello"))
            .ok_or_else(|| format!("hello not listed: {listed}\nplugin log:\n{}", plugin.log()))?;
        let offer = &hello["offers"][0];
        let serves = hello["ready"] == true
            && offer["base"] == json!({"group": "example.com", "kind": "Greeting"})
            && offer["implementation"] == "Hello"
            && offer["extensions"]
                == json!([{"group": "example.com", "kind": "GreetingHelloExtension"}])
            && hello["capabilities"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c == "CAPABILITY_FINALIZE"));
        serves.then_some(()).ok_or(format!("listed as {hello}"))
    })
    .await;
    w.until_plugin_up("hello", T).await;
}

/// Waits until the Greeting `world` is Ready on Hello with `greeting`, and
/// returns it.
async fn greeted(w: &World, greeting: &str, plugin: &Plugin) -> kube::api::DynamicObject {
    w.until(
        &greeting_resource(),
        "world",
        &format!("world is Ready on Hello, greeted {greeting:?}"),
        T,
        |g| {
            expect_condition(g, "Ready", "True", "Reconciled")
                .map_err(|e| format!("{e}; plugin log:\n{}", plugin.log()))?;
            let observed = g.data.pointer("/status/observedGeneration");
            match (
                g.data.pointer("/status/implementation"),
                g.data.pointer("/status/greeting"),
            ) {
                (Some(i), Some(s))
                    if i == "Hello"
                        && s == greeting
                        && observed == g.metadata.generation.map(Value::from).as_ref() =>
                {
                    Ok(())
                }
                (i, s) => Err(format!(
                    "implementation {i:?}, greeting {s:?}, observedGeneration {observed:?} of {:?}",
                    g.metadata.generation
                )),
            }
        },
    )
    .await
}

/// Waits until the Normal Event `reason` with `note`, reported by the
/// plugin, is recorded on object `name`.
async fn plugin_event(w: &World, name: &str, reason: &str, note: &str) {
    let events = w.events_api();
    kplug_testenv::eventually(
        &format!("the plugin's {reason} Event on {name}"),
        T,
        || async {
            let all: Vec<Event> = events
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items;
            let seen: Vec<_> = all
                .iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                .map(|e| {
                    (
                        e.type_.as_deref(),
                        e.reason.as_deref(),
                        e.note.as_deref(),
                        e.reporting_controller.as_deref(),
                    )
                })
                .collect();
            seen.contains(&(
                Some("Normal"),
                Some(reason),
                Some(note),
                Some("kplug-operator/hello"),
            ))
            .then_some(())
            .ok_or(format!("{seen:?}"))
        },
    )
    .await;
}

/// SIGTERM while the operator has a call in flight to the plugin: the plugin
/// unregisters, the operator waits for the call, the plugin answers it,
/// drains and exits 0, and the call's status is written. Returns the next
/// instance of the plugin, registered.
///
/// To hold a call in flight without a slow handler in the example, the
/// plugin is frozen (SIGSTOP) before the call is made, and SIGTERM is sent
/// while it is frozen: when it resumes (SIGCONT) the request and the signal
/// are both waiting for it. A frozen plugin keeps its socket open, so the
/// operator neither fails the call nor drops the plugin before the TTL (15 s;
/// it is frozen for as long as the metric takes to show the call).
async fn sigterm_drains_a_call_in_flight(w: &World, mut plugin: Plugin, hello: &Hello) -> Plugin {
    // The Greeting is Ready at its generation, and the plugin's writes to
    // the extension's status change no version, so nothing else wakes it:
    // the one call in flight below is the one for this edit.
    signal(&plugin.child, Signal::SIGSTOP);
    w.api(&greeting_resource())
        .patch(
            "world",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"salutation": "hey"}})),
        )
        .await
        .unwrap();
    w.until_metric(
        "the Reconcile call is in flight",
        "kplug_plugin_calls_in_flight{plugin=\"hello\"}",
        T,
        |v| v == 1.0,
    )
    .await;
    signal(&plugin.child, Signal::SIGTERM);
    signal(&plugin.child, Signal::SIGCONT);
    let exit = tokio::time::timeout(T, plugin.child.wait())
        .await
        .unwrap_or_else(|_| panic!("the plugin exits after SIGTERM; log:\n{}", plugin.log()))
        .unwrap();
    assert!(
        exit.success(),
        "the SDK exits 0 after draining: {exit:?}; log:\n{}",
        plugin.log()
    );
    // The call in flight was answered, and its answer written.
    greeted(w, "hey, world?", &plugin).await;
    // It unregistered: removed as shutting down, not found dead.
    plugin_event_on_operator(w, "PluginUnregistered", "it unregistered (shutting down)").await;
    w.until_metric(
        "the plugin is down",
        "kplug_plugin_up{plugin=\"hello\"}",
        T,
        |v| v == 0.0,
    )
    .await;

    let next = hello.spawn(w, 2);
    registered(w, &next).await;
    next
}

/// Waits until the operator records Event `reason` about the plugin, with
/// `why` in its note, on its own (pretend) Pod.
async fn plugin_event_on_operator(w: &World, reason: &str, why: &str) {
    kplug_testenv::eventually(&format!("the operator's {reason} Event"), T, || async {
        let seen = w.events_for("kplug-operator-0").await;
        seen.iter()
            .any(|(_, r, note)| r == reason && note.contains("hello") && note.contains(why))
            .then_some(())
            .ok_or(format!("{seen:?}"))
    })
    .await;
}

/// SIGKILL: the operator notices the dead plugin in under 1 s (from its
/// connection dropping, long before the TTL). Returns the next instance,
/// registered.
async fn sigkill_is_noticed_in_under_a_second(
    w: &World,
    mut plugin: Plugin,
    hello: &Hello,
) -> Plugin {
    assert_eq!(
        metric(&w.metrics().await, "kplug_plugins_registered"),
        Some(1.0)
    );
    signal(&plugin.child, Signal::SIGKILL);
    let killed = Instant::now();
    let _ = plugin.child.wait().await;
    let gone =
        kplug_testenv::eventually("plugin down in metrics", Duration::from_secs(5), || async {
            let m = w.metrics().await;
            (metric(&m, "kplug_plugin_up{plugin=\"hello\"}") == Some(0.0))
                .then(|| killed.elapsed())
                .ok_or(m)
        })
        .await;
    eprintln!("{} hello: SIGKILL noticed after {gone:?}", hello.sdk);
    assert!(gone < Duration::from_secs(1), "took {gone:?}");
    assert_eq!(
        metric(&w.metrics().await, "kplug_plugins_registered"),
        Some(0.0)
    );
    plugin_event_on_operator(w, "PluginGone", "its connection dropped").await;

    // A new process on the same socket name (the dead one's socket file is
    // stale: the SDK removes it) registers again.
    let next = hello.spawn(w, 3);
    registered(w, &next).await;
    next
}

//! One reconcile call and what it does: extensions held or sent, retry
//! and failure, refused statuses, and the calls that are not made.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kplug_proto::v1::{Capability, Outcome as Answer};
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use serde_json::json;

use super::{RESYNC, World, greeting, hello, ok, recorded, with_outcome};
use crate::extensions::{Problem, Resolution};
use crate::plugin::CallError;
use crate::reconcile::Settings;
use crate::reconcile::apply::{EXTENSION_GRACE, grace_left};

#[tokio::test]
async fn a_wake_that_took_the_object_first_is_not_doubled() {
    let world = World::new();
    let waiting = std::sync::Arc::clone(&world.core.waiting);
    let reads = std::sync::atomic::AtomicUsize::new(0);
    // The plugin registers after the plan was made, while the wait is being
    // recorded, and the registry's wake-up takes the object: it is queued
    // already.
    world.core.backend.on_candidates(move |backend| {
        if reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 1 {
            backend.add_plugin("hello", "Hello", &[Capability::Reconcile]);
            let hello = crate::selection::Candidate {
                implementation: "Hello".into(),
                plugin: "hello".into(),
            };
            let woken = waiting.wake(&[hello]);
            assert_eq!(woken.len(), 1);
        }
    });
    let action = world.reconcile(&hello()).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert!(
        world.api.applies().is_empty(),
        "nothing written: the wake reconciles it"
    );
}

#[tokio::test]
async fn a_missing_extension_holds_the_call_and_says_which() {
    let world = World::new();
    world.plugin("hello", "Hello");
    let obj = greeting(json!({"preferredImplementation": "Hello",
        "extensions": [{"apiVersion": "example.com/v1", "kind": "GreetingStyle", "name": "loud"}]}));
    let action = world.reconcile(&obj).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_millis(500)));
    let (status, reason, message) = world.condition("ExtensionsResolved");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ExtensionNotFound")
    );
    assert!(message.contains("GreetingStyle loud"), "{message}");
    // No call was made: `Reconciled` has nothing to say.
    let conditions = world.operator_status()["conditions"].clone();
    assert!(
        !conditions.to_string().contains("\"Reconciled\""),
        "{conditions}"
    );
    assert!(
        world
            .events()
            .contains(&("Warning".into(), "ExtensionNotFound".into()))
    );
    assert!(world.core.backend.calls().is_empty());
    // A watch that has not listed yet is routine: no Event.
    world.core.backend.set_unsynced(true);
    let before = world.events().len();
    world
        .reconcile(&recorded(obj, "Hello", "hello"))
        .await
        .unwrap();
    assert_eq!(
        world.condition("ExtensionsResolved").1,
        "WaitingForExtensionWatch"
    );
    assert_eq!(world.events().len(), before);
}

#[tokio::test]
async fn a_new_object_waits_quietly_for_its_extensions_for_the_grace() {
    let world = World::new();
    world.plugin("hello", "Hello");
    let mut obj = greeting(json!({"preferredImplementation": "Hello",
        "extensions": [{"apiVersion": "example.com/v1", "kind": "GreetingStyle", "name": "loud"}]}));
    obj["metadata"]["creationTimestamp"] = json!(Time(Timestamp::now()));
    let action = world.reconcile(&obj).await.unwrap();
    assert_ne!(
        action,
        Action::await_change(),
        "looked at again when the grace ends"
    );
    assert!(
        world.api.applies().is_empty(),
        "no status written during the grace"
    );
    assert!(world.events().is_empty(), "no Event during the grace");
    assert!(world.core.backend.calls().is_empty());
    // Past the grace, the wait is written and a person told.
    let old = Timestamp::now() - SignedDuration::from_secs(6);
    obj["metadata"]["creationTimestamp"] = json!(Time(old));
    world
        .reconcile(&recorded(obj, "Hello", "hello"))
        .await
        .unwrap();
    assert_eq!(world.condition("ExtensionsResolved").1, "ExtensionNotFound");
    assert!(
        world
            .events()
            .contains(&("Warning".into(), "ExtensionNotFound".into()))
    );
}

#[test]
fn the_grace_is_for_new_objects_whose_extensions_are_only_missing() {
    let now = Timestamp::now();
    let at = |age_ms: i64| {
        let mut obj: DynamicObject = serde_json::from_value(greeting(json!({}))).unwrap();
        obj.metadata.creation_timestamp = Some(Time(now - SignedDuration::from_millis(age_ms)));
        obj
    };
    let missing = |problem| Resolution {
        problems: vec![(problem, "extension GreetingStyle loud not found".into())],
        ..Resolution::default()
    };
    let unlisted = Resolution {
        waiting: vec!["the GreetingStyle watch has not listed yet".into()],
        ..Resolution::default()
    };
    let left = |obj, resolution: &Resolution| grace_left(&obj, resolution, now);
    assert_eq!(
        left(at(1_500), &missing(Problem::NotFound)),
        Some(EXTENSION_GRACE - Duration::from_millis(1_500))
    );
    assert_eq!(
        left(at(1_500), &unlisted),
        Some(EXTENSION_GRACE - Duration::from_millis(1_500))
    );
    assert_eq!(
        left(at(5_000), &missing(Problem::NotFound)),
        None,
        "the grace is over"
    );
    assert_eq!(
        left(at(1_500), &missing(Problem::NotAllowed)),
        None,
        "a person has to act"
    );
    assert_eq!(left(at(1_500), &missing(Problem::KindNotServed)), None);
    // A clock behind the API server's: the object looks as if it came
    // from the future; the grace is never longer than itself.
    assert_eq!(left(at(-3_000), &unlisted), Some(EXTENSION_GRACE));
    // An object without a creation time (never from an API server).
    let mut bare = at(0);
    bare.metadata.creation_timestamp = None;
    assert_eq!(left(bare, &unlisted), None);
}

#[tokio::test]
async fn only_the_declared_extensions_are_sent() {
    let world = World::new();
    world.plugin("hello", "Hello");
    for (kind, name) in [("GreetingStyle", "loud"), ("GreetingColour", "red")] {
        world.core.backend.add_extension(super::dynamic(&json!({
            "apiVersion": "example.com/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "default"}})));
    }
    let obj = greeting(json!({"preferredImplementation": "Hello", "extensions": [
        {"apiVersion": "example.com/v1", "kind": "GreetingStyle", "name": "loud"},
        {"apiVersion": "example.com/v1", "kind": "GreetingColour", "name": "red"}]}));
    world.core.backend.answer("hello", Ok(ok(json!({}))));
    world
        .reconcile(&recorded(obj, "Hello", "hello"))
        .await
        .unwrap();
    assert_eq!(
        world.core.backend.calls(),
        [("hello".into(), "Reconcile", "Hello".into(), 1)]
    );
}

#[tokio::test]
async fn retry_comes_back_after_the_plugins_delay() {
    let world = World::new();
    world.plugin("hello", "Hello");
    let mut answer = with_outcome(Answer::Retry, "database starting");
    answer.retry_after = Some(prost_types::Duration {
        seconds: 3,
        nanos: 0,
    });
    world.core.backend.answer("hello", Ok(answer));
    let action = world
        .reconcile(&recorded(hello(), "Hello", "hello"))
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(3)));
    let (status, reason, message) = world.condition("Reconciled");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Retrying"));
    assert_eq!(message, "plugin hello 1.0.0: database starting");
    assert!(world.events().is_empty());
    assert!(world.counted("retry", "hello"));
}

#[tokio::test]
async fn failures_back_off_and_say_why() {
    let world = World::new();
    world.plugin("hello", "Hello");
    let obj = recorded(hello(), "Hello", "hello");
    let timeout = CallError::Timeout {
        plugin: "hello".into(),
        call: "Reconcile",
        after: Duration::from_secs(30),
    };
    let cases = [
        (
            Ok(with_outcome(Answer::Failed, "disk full")),
            "PluginFailed",
            "ReconcileFailed",
            "plugin hello 1.0.0: disk full",
        ),
        (
            Err(timeout),
            "PluginTimeout",
            "PluginTimeout",
            "did not answer Reconcile within 30s",
        ),
        (
            Ok(ok(json!({"conditions": []}))),
            "InvalidPluginResponse",
            "InvalidPluginResponse",
            "\"conditions\" belongs to the operator",
        ),
    ];
    let mut delay = Duration::from_millis(500);
    for (answer, reason, event, message) in cases {
        world.core.backend.answer("hello", answer);
        let action = world.reconcile(&obj).await.unwrap();
        assert_eq!(action, Action::requeue(delay), "{reason}");
        delay *= 2;
        let (status, got, text) = world.condition("Reconciled");
        assert_eq!((status.as_str(), got.as_str()), ("False", reason));
        assert!(text.contains(message), "{text}");
        assert_eq!(
            world.events().last().cloned(),
            Some(("Warning".into(), event.into()))
        );
    }
    // Nothing of the invalid answer was written as the plugin.
    assert!(
        world
            .api
            .applies()
            .iter()
            .all(|a| a.status.get("conditions").is_none() || a.manager == "kplug-operator")
    );
    // A success forgets the failures.
    world.core.backend.answer("hello", Ok(ok(json!({}))));
    assert_eq!(
        world.reconcile(&obj).await.unwrap(),
        Action::requeue(RESYNC)
    );
    world
        .core
        .backend
        .answer("hello", Ok(with_outcome(Answer::Failed, "again")));
    assert_eq!(
        world.reconcile(&obj).await.unwrap(),
        Action::requeue(Duration::from_millis(500))
    );
}

#[tokio::test]
async fn a_status_the_api_server_refuses_is_said_on_the_object() {
    let world = World::new();
    world.plugin("hello", "Hello");
    world.api.refuse_status_with("rows");
    world
        .core
        .backend
        .answer("hello", Ok(ok(json!({"rows": 1}))));
    world
        .reconcile(&recorded(hello(), "Hello", "hello"))
        .await
        .unwrap();
    let (_, reason, message) = world.condition("Reconciled");
    assert_eq!(reason, "StatusWriteFailed");
    assert!(message.contains("too many"), "{message}");
    assert!(
        world
            .events()
            .contains(&("Warning".into(), "StatusWriteFailed".into()))
    );
    assert!(
        world.operator_status().get("rows").is_none(),
        "the operator's conditions went out without the refused fields"
    );
}

#[tokio::test]
async fn a_plugin_without_reconcile_is_not_called() {
    let world = World::new();
    world
        .core
        .backend
        .add_plugin("hello", "Hello", &[Capability::Finalize]);
    let action = world
        .reconcile(&recorded(hello(), "Hello", "hello"))
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(RESYNC));
    assert_eq!(world.condition("Reconciled").1, "NotSupported");
    assert!(world.core.backend.calls().is_empty());
}

#[tokio::test]
async fn a_plugin_alone_is_not_held_to_its_share() {
    let world = World::with(Settings::default(), 1);
    world.plugin("hello", "Hello");
    let ar = world.core.target.api_resource.clone();
    let other = kube::runtime::reflector::ObjectRef::new_with("other", ar).within("default");
    let _taken = world.core.shares.try_take("hello", &other, true).unwrap();
    world.core.backend.answer("hello", Ok(ok(json!({}))));
    let action = world
        .reconcile(&recorded(hello(), "Hello", "hello"))
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(RESYNC));
    assert!(
        !world.counted("busy", ""),
        "no other plugin to keep a place for"
    );
    assert_eq!(world.core.backend.calls().len(), 1);
}

#[tokio::test]
async fn a_plugin_whose_share_is_taken_is_not_waited_for_in_a_worker_and_wakes_it_when_free() {
    let world = World::with(Settings::default(), 1);
    // Another plugin serves the kind: hello is held to its share.
    world.plugin("hello", "Hello").plugin("hola", "Hola");
    let ar = world.core.target.api_resource.clone();
    let other = kube::runtime::reflector::ObjectRef::new_with("other", ar).within("default");
    let taken = world.core.shares.try_take("hello", &other, false).unwrap();
    let object = recorded(hello(), "Hello", "hello");
    let action = world.reconcile(&object).await.unwrap();
    assert_eq!(
        action,
        Action::await_change(),
        "woken by the share, not a timer"
    );
    assert!(world.core.backend.calls().is_empty());
    assert!(world.counted("busy", ""));
    assert!(
        world.api.applies().is_empty(),
        "turned away before any write"
    );
    let mut woken = world.woken.lock().unwrap();
    assert!(woken.try_recv().is_err(), "the place is still taken");
    drop(taken);
    let woken = woken.try_recv().expect("the object turned away is woken");
    assert_eq!(
        (woken.name.as_str(), woken.namespace.as_deref()),
        (
            object["metadata"]["name"].as_str().unwrap(),
            object["metadata"]["namespace"].as_str(),
        )
    );
}

#[tokio::test]
async fn a_cache_behind_this_process_writes_calls_no_plugin() {
    let world = World::new();
    world.plugin("hello", "Hello").plugin("other", "Bonjour");
    let cached = super::dynamic(&recorded(hello(), "Hello", "hello"));
    // Moved meanwhile by this process: the cache still names the old choice.
    let moved = crate::selection::Recorded {
        implementation: "Bonjour".into(),
        plugin: Some("other".into()),
    };
    world.core.recent.chose(&cached, Some(moved));
    let action = crate::reconcile::reconcile(&cached, &world.core)
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(Duration::from_millis(200)));
    // Finalized meanwhile by this process: its own event reconciles it.
    world.core.recent.finalized(&cached);
    let action = crate::reconcile::reconcile(&cached, &world.core)
        .await
        .unwrap();
    assert_eq!(action, Action::await_change());
    assert!(world.core.backend.calls().is_empty());
    assert!(world.api.reads().is_empty(), "told without a read");
}

#[tokio::test]
async fn no_object_is_read_before_its_call() {
    // Recording the choice and the finalizer returned the live object:
    // a read would tell nothing more.
    let world = World::new();
    world.plugin("hello", "Hello");
    world.core.backend.answer("hello", Ok(ok(json!({}))));
    world.reconcile(&hello()).await.unwrap();
    assert_eq!(world.core.backend.calls().len(), 1);
    // An object with its choice and finalizer already recorded: what this
    // process wrote stands for the read.
    let mut again = recorded(hello(), "Hello", "hello");
    again["metadata"]["uid"] = json!("uid-2");
    again["metadata"]["finalizers"] = json!([world.core.settings.finalizer]);
    world.core.backend.answer("hello", Ok(ok(json!({}))));
    world.reconcile(&again).await.unwrap();
    assert_eq!(world.core.backend.calls().len(), 2);
    assert_eq!(world.api.reads(), Vec::<String>::new());
}

#[tokio::test]
async fn a_refused_operator_status_fails_the_reconcile() {
    let world = World::new();
    world.api.refuse_status_of("kplug-operator");
    let error = world.reconcile(&hello()).await.unwrap_err();
    assert_eq!(error.what(), "writing the status");
    assert!(
        error.api_message().contains("too many"),
        "{}",
        error.api_message()
    );
    assert!(world.counted("error", ""));
}

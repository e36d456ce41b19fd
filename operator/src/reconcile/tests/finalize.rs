//! Outcomes of deleting an object, and of moving it to another
//! implementation.

use std::time::Duration;

use kplug_proto::v1::{Capability, FinalizeResponse, Outcome as Answer};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::{World, greeting, ok, recorded};

fn deleted() -> Value {
    let mut obj = recorded(greeting(json!({})), "Hello", "hello");
    obj["metadata"]["deletionTimestamp"] = json!("2026-11-24T10:00:00Z");
    obj
}

fn answer(outcome: Answer, message: &str) -> FinalizeResponse {
    FinalizeResponse {
        outcome: outcome as i32,
        message: message.into(),
        ..FinalizeResponse::default()
    }
}

#[tokio::test]
async fn finalize_then_the_finalizer_goes() {
    let world = World::new();
    world.plugin("hello", "Hello");
    world
        .core
        .backend
        .answer_finalize("hello", Ok(answer(Answer::Ok, "dropped")));
    let action = world.reconcile(&deleted()).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert_eq!(
        world.core.backend.calls(),
        [("hello".into(), "Finalize", "Hello".into(), 0)]
    );
    let (_, patch) = world.api.patches().pop().unwrap();
    assert_eq!(
        patch[1],
        json!({"op": "remove", "path": "/metadata/finalizers/0"})
    );
    assert_eq!(world.events(), [("Normal".into(), "Finalized".into())]);
    assert!(world.counted("finalized", ""));
}

#[tokio::test]
async fn a_finalize_retry_or_failure_keeps_the_object() {
    let world = World::new();
    world.plugin("hello", "Hello");
    let mut retry = answer(Answer::Retry, "connections open");
    retry.retry_after = Some(prost_types::Duration {
        seconds: 5,
        nanos: 0,
    });
    world.core.backend.answer_finalize("hello", Ok(retry));
    assert_eq!(
        world.reconcile(&deleted()).await.unwrap(),
        Action::requeue(Duration::from_secs(5))
    );
    assert_eq!(world.condition("Reconciled").1, "Finalizing");
    world
        .core
        .backend
        .answer_finalize("hello", Ok(answer(Answer::Failed, "locked")));
    assert_eq!(
        world.reconcile(&deleted()).await.unwrap(),
        Action::requeue(Duration::from_millis(500))
    );
    let (status, reason, message) = world.condition("Reconciled");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FinalizeFailed")
    );
    assert_eq!(message, "plugin hello 1.0.0: locked");
    assert_eq!(
        world.events(),
        [("Warning".into(), "FinalizeFailed".into())]
    );
    assert!(world.api.patches().is_empty(), "the finalizer stays");
}

#[tokio::test]
async fn finalize_waits_for_the_recorded_plugin() {
    let world = World::new();
    world.plugin("other", "Bonjour");
    assert_eq!(
        world.reconcile(&deleted()).await.unwrap(),
        Action::await_change()
    );
    let (_, reason, message) = world.condition("PluginAvailable");
    assert_eq!(reason, "PluginUnavailable");
    assert!(
        message.contains("remove the finalizer kplug.io/finalizer by hand"),
        "{message}"
    );
    assert!(world.core.backend.calls().is_empty());
}

#[tokio::test]
async fn a_plugin_without_finalize_is_not_called() {
    let world = World::new();
    world
        .core
        .backend
        .add_plugin("hello", "Hello", &[Capability::Reconcile]);
    assert_eq!(
        world.reconcile(&deleted()).await.unwrap(),
        Action::await_change()
    );
    assert!(world.core.backend.calls().is_empty());
    assert_eq!(world.events(), [("Normal".into(), "Finalized".into())]);
}

#[tokio::test]
async fn without_the_finalizer_nothing_is_called() {
    let world = World::new();
    world.plugin("hello", "Hello");
    let mut obj = deleted();
    obj["metadata"]["finalizers"] = json!([]);
    assert_eq!(world.reconcile(&obj).await.unwrap(), Action::await_change());
    assert!(world.core.backend.calls().is_empty());
    assert!(world.api.applies().is_empty());
}

#[tokio::test]
async fn reselect_finalizes_the_old_choice_then_chooses_again() {
    let world = World::new();
    world.plugin("hello", "Hello").plugin("other", "Bonjour");
    let mut obj = recorded(
        greeting(json!({"preferredImplementation": "Bonjour"})),
        "Hello",
        "hello",
    );
    obj["metadata"]["annotations"] = json!({"kplug.io/reselect": "now"});
    world
        .core
        .backend
        .answer_finalize("hello", Ok(answer(Answer::Ok, "")));
    let action = world.reconcile(&obj).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::ZERO));
    assert_eq!(
        world.core.backend.calls(),
        [("hello".into(), "Finalize", "Hello".into(), 0)]
    );
    let applies = world.api.applies();
    assert!(
        applies
            .iter()
            .any(|a| a.manager == "kplug-plugin-hello" && a.status == json!({}))
    );
    assert!(
        world.operator_status().get("implementation").is_none(),
        "the choice is forgotten"
    );
    let (_, patch) = world.api.patches().pop().unwrap();
    assert_eq!(patch[1]["path"], "/metadata/annotations/kplug.io~1reselect");
    assert_eq!(world.events(), [("Normal".into(), "Reselected".into())]);
    // The next reconcile chooses the preference.
    let mut moved = obj.clone();
    moved["metadata"]["annotations"] = json!({});
    moved["status"] = json!({});
    world.core.backend.answer("other", Ok(ok(json!({}))));
    world.reconcile(&moved).await.unwrap();
    assert_eq!(world.operator_status()["implementation"], "Bonjour");
}

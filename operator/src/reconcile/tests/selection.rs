//! The choice of a plugin: waiting for one, recording it before the call,
//! keeping it, the start-up grace, and `--selection all`.

use std::time::Duration;

use kplug_proto::v1::Outcome as Answer;
use kube::runtime::controller::Action;
use serde_json::json;

use super::{RESYNC, World, greeting, hello, ok, recorded, with_outcome};
use crate::reconcile::{SelectionMode, Settings};

#[tokio::test]
async fn no_plugin_waits_and_says_where_plugins_register() {
    let world = World::new();
    let action = world.reconcile(&hello()).await.unwrap();
    assert_eq!(action, Action::await_change());
    let (status, reason, message) = world.condition("PluginAvailable");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NoPlugin"));
    assert!(
        message.contains("/var/run/kplug/registry.sock"),
        "{message}"
    );
    assert_eq!(world.condition("Ready").1, "NoPlugin");
    assert_eq!(world.events(), [("Warning".into(), "NoPlugin".into())]);
    assert!(world.counted("waiting", ""));
}

#[tokio::test]
async fn a_new_choice_is_recorded_before_the_plugin_is_called() {
    let world = World::new();
    world.plugin("hello", "Hello").plugin("other", "Bonjour");
    world
        .core
        .backend
        .answer("hello", Ok(ok(json!({"greeting": "hello, world"}))));
    let action = world.reconcile(&hello()).await.unwrap();
    assert_eq!(action, Action::requeue(RESYNC));
    // One write before the call: the finalizer and the choice.
    let patches = world.api.patches();
    assert_eq!(patches.len(), 1, "{patches:#?}");
    let ops = patches[0].1.as_array().unwrap();
    assert!(ops.contains(
        &json!({"op": "add", "path": "/metadata/finalizers", "value": ["kplug.io/finalizer"]})
    ));
    assert!(
        ops.contains(&json!({"op": "add", "path": "/metadata/annotations",
        "value": {"kplug.io/implementation": "Hello", "kplug.io/plugin": "hello"}}))
    );
    // One status write after it: the plugin's fields and the operator's.
    let applies = world.api.applies();
    assert_eq!(applies.len(), 1, "{applies:#?}");
    assert_eq!(applies[0].manager, "kplug-operator");
    assert_eq!(applies[0].status["implementation"], "Hello");
    assert_eq!(applies[0].status["plugin"], "hello");
    assert_eq!(applies[0].status["greeting"], "hello, world");
    // Ready says what the call said; Reconciled, True, is not written.
    let (status, reason, message) = world.condition("Ready");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Reconciled"));
    assert_eq!(message, "plugin hello 1.0.0: hello");
    let written = world.operator_status()["conditions"].clone();
    assert!(
        !written
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Reconciled"),
        "{written}"
    );
    // The preferred implementation chosen is no news: no Event.
    assert_eq!(world.events(), []);
    assert_eq!(
        world.core.backend.calls(),
        [("hello".into(), "Reconcile", "Hello".into(), 0)]
    );
    assert!(
        world.api.reads().is_empty(),
        "the record's answer stands for a read"
    );
    assert!(world.counted("ok", "hello"));
}

#[tokio::test]
async fn a_fallback_choice_is_news() {
    let world = World::new();
    world.plugin("other", "Bonjour");
    world.core.backend.answer("other", Ok(ok(json!({}))));
    world.reconcile(&greeting(json!({}))).await.unwrap();
    assert_eq!(
        world.events(),
        [("Normal".into(), "ImplementationSelected".into())]
    );
}

#[tokio::test]
async fn a_choice_recorded_in_the_annotations_is_kept_and_not_written_again() {
    let world = World::new();
    world.plugin("hello", "Hello").plugin("other", "Bonjour");
    world.core.backend.answer("other", Ok(ok(json!({}))));
    let mut obj = greeting(json!({"preferredImplementation": "Hello"}));
    obj["metadata"]["finalizers"] = json!(["kplug.io/finalizer"]);
    obj["metadata"]["annotations"] =
        json!({"kplug.io/implementation": "Bonjour", "kplug.io/plugin": "other"});
    world.reconcile(&obj).await.unwrap();
    assert!(world.api.patches().is_empty(), "nothing to record");
    assert_eq!(world.operator_status()["implementation"], "Bonjour");
    assert_eq!(
        world.core.backend.calls(),
        [("other".into(), "Reconcile", "Bonjour".into(), 0)]
    );
}

#[tokio::test]
async fn a_sticky_choice_whose_plugin_is_gone_waits_for_it() {
    let world = World::new();
    world.plugin("other", "Bonjour");
    let obj = recorded(hello(), "Hello", "hello");
    let action = world.reconcile(&obj).await.unwrap();
    assert_eq!(action, Action::await_change());
    let (status, reason, message) = world.condition("PluginAvailable");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "PluginUnavailable")
    );
    assert!(message.contains("sticky"), "{message}");
    // Not moved: the recorded choice is written again, nobody is called.
    assert_eq!(world.operator_status()["implementation"], "Hello");
    assert!(world.core.backend.calls().is_empty());
}

#[tokio::test]
async fn a_preference_no_plugin_offers_is_a_warning_once() {
    let world = World::new();
    world.plugin("other", "Bonjour");
    world.core.backend.answer("other", Ok(ok(json!({}))));
    let obj = greeting(json!({"preferredImplementation": "Pyhton"}));
    world.reconcile(&obj).await.unwrap();
    let (status, reason, _) = world.condition("PluginAvailable");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "PreferenceNotOffered")
    );
    assert!(
        world
            .events()
            .contains(&("Warning".into(), "PreferenceNotOffered".into()))
    );
    // The reason is on the object now: no second Event.
    let mut again = recorded(obj, "Bonjour", "other");
    again["status"]["conditions"] = world.operator_status()["conditions"].clone();
    world.core.backend.answer("other", Ok(ok(json!({}))));
    let before = world.events().len();
    world.reconcile(&again).await.unwrap();
    assert_eq!(world.events().len(), before);
}

#[tokio::test]
async fn the_start_up_grace_waits_for_the_preferred_implementation() {
    let world = World::new();
    world.plugin("other", "Bonjour");
    world.core.backend.set_grace([Some(Duration::from_secs(9))]);
    let action = world.reconcile(&hello()).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert_eq!(world.condition("PluginAvailable").1, "WaitingForPreferred");
    assert!(world.events().is_empty(), "routine: no Event");
    // The grace ends between the plan and the wait: look again at once.
    world
        .core
        .backend
        .set_grace([Some(Duration::from_secs(1)), None]);
    assert_eq!(
        world.reconcile(&hello()).await.unwrap(),
        Action::requeue(Duration::ZERO)
    );
}

#[tokio::test]
async fn with_every_plugin_the_first_failure_is_the_outcome() {
    let settings = Settings {
        selection: SelectionMode::All,
        ..Settings::default()
    };
    let world = World::with(settings, 6);
    world.plugin("a", "Alpha").plugin("b", "Beta");
    world.core.backend.answer("a", Ok(ok(json!({}))));
    world
        .core
        .backend
        .answer("b", Ok(with_outcome(Answer::Failed, "no")));
    let action = world.reconcile(&hello()).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_millis(500)));
    assert_eq!(world.condition("Reconciled").2, "plugin b 1.0.0: no");
    // Both plugins are there as asked: nothing to say in PluginAvailable.
    let written = world.operator_status()["conditions"].to_string();
    assert!(!written.contains("PluginAvailable"), "{written}");
    assert!(
        world.operator_status().get("implementation").is_none(),
        "nothing recorded"
    );
    assert!(world.counted("failed", "b"), "one count per plugin called");
    assert!(world.counted("ok", "a"));
    world.core.backend.answer("a", Ok(ok(json!({}))));
    world.core.backend.answer("b", Ok(ok(json!({}))));
    // The object as the cache has it after the first reconcile's writes (a
    // copy from before them is behind them: it would be looked at again).
    let mut again = hello();
    again["status"] = world.operator_status();
    again["metadata"]["finalizers"] = json!(["kplug.io/finalizer"]);
    assert_eq!(
        world.reconcile(&hello()).await.unwrap(),
        Action::requeue(Duration::from_millis(200)),
        "a copy from before its writes"
    );
    assert_eq!(
        world.reconcile(&again).await.unwrap(),
        Action::requeue(RESYNC)
    );
    assert_eq!(
        world.condition("Ready").2,
        "plugin a 1.0.0: hello; plugin b 1.0.0: hello"
    );
}

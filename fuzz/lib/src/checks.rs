//! The invariants every plugin response the operator accepts satisfies.

use k8s_openapi::api::core::v1::ObjectReference;
use kplug_checks::response::{Checked, reference};
use kplug_proto::v1::{self, Outcome};
use kplug_proto::{RESERVED_CONDITION_TYPES, RESERVED_STATUS_KEYS, limits};
use kube::core::DynamicObject;
use serde_json::Value;

use crate::debug;

/// `truncate_message`'s contract, stated independently.
fn check_message(what: &str, sent: &str, kept: &str) {
    let n = sent.chars().count();
    if n <= limits::MAX_MESSAGE_CHARS {
        assert_eq!(kept, sent, "{what}: a short message was changed");
    } else {
        assert_eq!(
            kept.chars().count(),
            limits::MAX_MESSAGE_CHARS,
            "{what}: a message of {n} characters was kept at {} characters",
            kept.chars().count()
        );
        assert!(kept.ends_with('…'), "{what}: a cut message has no ellipsis");
        let head: String = sent.chars().take(limits::MAX_MESSAGE_CHARS - 1).collect();
        assert!(
            kept.starts_with(&head),
            "{what}: a cut message is not a prefix"
        );
    }
}

fn check_common(
    checked: &Checked,
    outcome: i32,
    message: &str,
    retry_after: Option<prost_types::Duration>,
    events: &[v1::Event],
    base: &DynamicObject,
    sent: &[DynamicObject],
) {
    assert_ne!(
        checked.outcome,
        Outcome::Unspecified,
        "accepted OUTCOME_UNSPECIFIED"
    );
    assert_eq!(checked.outcome as i32, outcome, "the outcome changed");
    check_message("message", message, &checked.message);
    match (retry_after, checked.retry_after) {
        (None, None) => {}
        (Some(_), Some(d)) => assert!(
            (limits::MIN_RETRY_AFTER..=limits::MAX_RETRY_AFTER).contains(&d),
            "retry_after {d:?} is outside its bounds"
        ),
        (sent, kept) => panic!("retry_after {sent:?} became {kept:?}"),
    }
    assert!(
        checked.events.len() <= limits::MAX_EVENTS,
        "accepted {} events",
        checked.events.len()
    );
    assert_eq!(checked.events.len(), events.len(), "events were dropped");
    let allowed: Vec<ObjectReference> = std::iter::once(base).chain(sent).map(reference).collect();
    for (event, sent_event) in checked.events.iter().zip(events) {
        check_message("event message", &sent_event.message, &event.message);
        assert!(!event.reason.is_empty(), "an event without a reason");
        assert!(
            allowed.contains(&event.regarding),
            "an event about an object the plugin was not sent: {:?} (from {:?})",
            event.regarding,
            sent_event.regarding
        );
    }
}

/// Checks `check_reconcile` on `resp`: it never panics, and a response it
/// accepts satisfies every bound and rule (see the crate's README).
pub fn check_reconcile(resp: &v1::ReconcileResponse, base: &DynamicObject, sent: &[DynamicObject]) {
    let result = kplug_checks::response::check_reconcile(resp.clone(), base, sent);
    debug(&result.as_ref().map(|_| "accepted"));
    let Ok(checked) = result else {
        return;
    };
    check_common(
        &checked,
        resp.outcome,
        &resp.message,
        resp.retry_after,
        &resp.events,
        base,
        sent,
    );
    match (&checked.status, resp.status.is_empty()) {
        (None, true) => {}
        (Some(status), false) => {
            for key in RESERVED_STATUS_KEYS {
                assert!(
                    !status.contains_key(key),
                    "accepted a status with the operator's key {key:?}"
                );
            }
            let parsed: Value =
                serde_json::from_slice(&resp.status).expect("an accepted status is valid JSON");
            assert_eq!(parsed, Value::Object(status.clone()), "the status changed");
        }
        (kept, _) => panic!("a status of {} bytes became {kept:?}", resp.status.len()),
    }
    assert_eq!(
        checked.extension_statuses.len(),
        resp.extension_statuses.len(),
        "extension statuses were dropped"
    );
    for (obj, _) in &checked.extension_statuses {
        assert!(
            sent.contains(obj),
            "a status for an object the plugin was not sent: {:?}",
            reference(obj)
        );
    }
    check_conditions(&checked, &resp.conditions);
}

/// The conditions an accepted Reconcile response keeps, against those
/// `sent`: bounded, none dropped, none of the operator's types, each type
/// once, a valid status and a reason, messages cut as documented.
fn check_conditions(checked: &Checked, sent: &[v1::Condition]) {
    let conditions = &checked.conditions;
    assert!(
        conditions.len() <= limits::MAX_CONDITIONS,
        "accepted {} conditions",
        conditions.len()
    );
    assert_eq!(conditions.len(), sent.len(), "conditions were dropped");
    let mut types = std::collections::HashSet::new();
    for (c, sent_c) in conditions.iter().zip(sent) {
        assert!(!c.type_.is_empty(), "a condition with an empty type");
        assert!(
            !RESERVED_CONDITION_TYPES.contains(&c.type_.as_str()),
            "accepted the operator's condition type {:?}",
            c.type_
        );
        assert!(types.insert(&c.type_), "condition type {:?} twice", c.type_);
        assert!(
            ["True", "False", "Unknown"].contains(&c.status),
            "condition status {:?}",
            c.status
        );
        assert!(!c.reason.is_empty(), "a condition without a reason");
        check_message("condition message", &sent_c.message, &c.message);
    }
}

/// Checks `check_finalize` on `resp` like [`check_reconcile`].
pub fn check_finalize(resp: &v1::FinalizeResponse, base: &DynamicObject, sent: &[DynamicObject]) {
    let result = kplug_checks::response::check_finalize(resp.clone(), base, sent);
    debug(&result.as_ref().map(|_| "accepted"));
    let Ok(checked) = result else {
        return;
    };
    check_common(
        &checked,
        resp.outcome,
        &resp.message,
        resp.retry_after,
        &resp.events,
        base,
        sent,
    );
    assert!(
        checked.status.is_none(),
        "a Finalize response with a status"
    );
    assert!(
        checked.extension_statuses.is_empty(),
        "a Finalize response with extension statuses"
    );
    assert!(
        checked.conditions.is_empty(),
        "a Finalize response with conditions"
    );
}

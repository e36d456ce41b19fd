//! Checking what a plugin returns before anything of it is written: the
//! outcome, the JSON statuses, conditions, Events, children and the retry
//! delay.
//!
//! A response is checked completely ([`check_reconcile`],
//! [`check_finalize`], [`check_hook`]): bad JSON, a status that is not an
//! object, a key the operator owns, a status or an Event for an object the
//! plugin was not sent, a reserved condition type or a malformed child
//! make the whole response invalid, and the operator applies nothing of it
//! (its `InvalidPluginResponse` condition says why). What is kept is cut
//! to the bounds of `kplug_proto::limits`.

mod children;
mod condition;

use k8s_openapi::api::core::v1::ObjectReference;
use kplug_proto::limits;
use kplug_proto::v1::{self, ConditionStatus, EventType, Outcome};
use kube_core::{DynamicObject, Resource, ResourceExt};
use serde_json::{Map, Value};

use children::check_children;
pub use children::{ChildKey, Intent};
pub use condition::Condition;

/// An Event's type, as Kubernetes names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Nothing is wrong.
    Normal,
    /// Something may need attention.
    Warning,
}

/// An Event a plugin returned, checked.
#[derive(Clone, Debug)]
pub struct PluginEvent {
    /// The object it is about (the base or an extension that was sent).
    pub regarding: ObjectReference,
    /// Normal or Warning.
    pub severity: Severity,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// A checked `ReconcileResponse` (or `FinalizeResponse`).
#[derive(Clone, Debug)]
pub struct Checked {
    /// OK, RETRY or FAILED (never unspecified).
    pub outcome: Outcome,
    /// The plugin's message.
    pub message: String,
    /// When to call again, for RETRY.
    pub retry_after: Option<std::time::Duration>,
    /// The plugin's part of the base object's status.
    pub status: Option<Map<String, Value>>,
    /// Statuses for extensions, with the extension object.
    pub extension_statuses: Vec<(DynamicObject, Map<String, Value>)>,
    /// Plugin conditions on the base object.
    pub conditions: Vec<Condition>,
    /// Events to record.
    pub events: Vec<PluginEvent>,
    /// The children the plugin desires; `None` leaves them as they are.
    pub children: Option<Vec<Intent>>,
}

/// Checks a Reconcile response against what the plugin was sent.
///
/// # Errors
/// A message saying what is wrong, for the `InvalidPluginResponse` condition.
pub fn check_reconcile(
    resp: v1::ReconcileResponse,
    base: &DynamicObject,
    sent: &[DynamicObject],
) -> Result<Checked, String> {
    let outcome = check_outcome(resp.outcome)?;
    let status = if resp.status.is_empty() {
        None
    } else {
        let status = json_object(&resp.status, "status")?;
        if let Some(key) = kplug_proto::RESERVED_STATUS_KEYS
            .iter()
            .find(|k| status.contains_key(**k))
        {
            return Err(format!(
                "status key {key:?} belongs to the operator; report it differently (conditions go in the conditions field)"
            ));
        }
        Some(status)
    };
    let mut extension_statuses = Vec::new();
    for es in resp.extension_statuses {
        let target = es.target.unwrap_or_default();
        let Some(ext) = sent.iter().find(|o| same_object(o, &target)) else {
            return Err(format!(
                "status for {} {} {}/{}: the plugin was not sent that object",
                target.api_version, target.kind, target.namespace, target.name
            ));
        };
        let status = json_object(
            &es.status,
            &format!("status of {} {}", target.kind, target.name),
        )?;
        extension_statuses.push((ext.clone(), status));
    }
    let conditions = check_conditions(resp.conditions)?;
    let events = check_events(resp.events, base, sent)?;
    Ok(Checked {
        outcome,
        message: limits::truncate_message(&resp.message),
        retry_after: retry_after(resp.retry_after),
        status,
        extension_statuses,
        conditions,
        events,
        children: check_children(resp.children)?,
    })
}

/// Checks a Finalize response.
///
/// # Errors
/// A message saying what is wrong.
pub fn check_finalize(
    resp: v1::FinalizeResponse,
    base: &DynamicObject,
    sent: &[DynamicObject],
) -> Result<Checked, String> {
    Ok(Checked {
        outcome: check_outcome(resp.outcome)?,
        message: limits::truncate_message(&resp.message),
        retry_after: retry_after(resp.retry_after),
        status: None,
        extension_statuses: Vec::new(),
        conditions: Vec::new(),
        events: check_events(resp.events, base, sent)?,
        children: check_children(resp.children)?,
    })
}

/// Checks a Hook response: what is written (under `status.hooks.<plugin>`)
/// is `status`, and the Events may regard the base or an extension sent.
///
/// # Errors
/// A message saying what is wrong.
pub fn check_hook(
    resp: v1::HookResponse,
    base: &DynamicObject,
    sent: &[DynamicObject],
) -> Result<Checked, String> {
    let status = if resp.status.is_empty() {
        None
    } else {
        Some(json_object(&resp.status, "status")?)
    };
    Ok(Checked {
        outcome: check_outcome(resp.outcome)?,
        message: limits::truncate_message(&resp.message),
        retry_after: retry_after(resp.retry_after),
        status,
        extension_statuses: Vec::new(),
        conditions: Vec::new(),
        events: check_events(resp.events, base, sent)?,
        children: None,
    })
}

fn check_outcome(outcome: i32) -> Result<Outcome, String> {
    match Outcome::try_from(outcome) {
        Ok(Outcome::Unspecified) => {
            Err("outcome is OUTCOME_UNSPECIFIED; set OK, RETRY or FAILED".into())
        }
        Ok(o) => Ok(o),
        Err(_) => Err(format!("outcome {outcome} is not a known Outcome")),
    }
}

fn json_object(bytes: &[u8], what: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "{what} must be a JSON object, got {}",
            kind_of(&other)
        )),
        Err(e) => Err(format!("{what} is not valid JSON: {e}")),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A negative or unreadable delay means "now", which is then raised to the
/// shortest delay honoured: a plugin cannot make the operator spin.
///
/// Negative values never reach prost-types' conversion: it negates the
/// seconds, which overflows for `i64::MIN` (found by the `reconcile_response`
/// fuzz target).
fn retry_after(requested: Option<prost_types::Duration>) -> Option<std::time::Duration> {
    requested.map(|d| {
        let delay = if d.seconds < 0 || (d.seconds == 0 && d.nanos < 0) {
            std::time::Duration::ZERO
        } else {
            std::time::Duration::try_from(d).unwrap_or_default()
        };
        limits::clamp_retry_after(delay)
    })
}

fn check_conditions(conditions: Vec<v1::Condition>) -> Result<Vec<Condition>, String> {
    if conditions.len() > limits::MAX_CONDITIONS {
        return Err(format!(
            "{} conditions; at most {} are accepted",
            conditions.len(),
            limits::MAX_CONDITIONS
        ));
    }
    let mut types = std::collections::HashSet::new();
    conditions
        .into_iter()
        .map(|c| {
            let c = check_condition(c)?;
            if types.insert(c.type_.clone()) {
                Ok(c)
            } else {
                Err(format!(
                    "condition type {:?} appears more than once; send each type once",
                    c.type_
                ))
            }
        })
        .collect()
}

fn check_condition(c: v1::Condition) -> Result<Condition, String> {
    if c.r#type.is_empty() {
        return Err("a condition has an empty type".into());
    }
    if kplug_proto::RESERVED_CONDITION_TYPES.contains(&c.r#type.as_str()) {
        return Err(format!(
            "condition type {:?} is reserved for the operator",
            c.r#type
        ));
    }
    let status = match ConditionStatus::try_from(c.status) {
        Ok(ConditionStatus::True) => "True",
        Ok(ConditionStatus::False) => "False",
        _ => "Unknown",
    };
    Ok(Condition {
        type_: c.r#type,
        status,
        reason: if c.reason.is_empty() {
            "Unspecified".into()
        } else {
            c.reason
        },
        message: limits::truncate_message(&c.message),
    })
}

fn check_events(
    events: Vec<v1::Event>,
    base: &DynamicObject,
    sent: &[DynamicObject],
) -> Result<Vec<PluginEvent>, String> {
    if events.len() > limits::MAX_EVENTS {
        return Err(format!(
            "{} events; at most {} are accepted",
            events.len(),
            limits::MAX_EVENTS
        ));
    }
    events
        .into_iter()
        .map(|e| {
            let regarding = match &e.regarding {
                None => reference(base),
                Some(r) if same_object(base, r) => reference(base),
                Some(r) => match sent.iter().find(|o| same_object(o, r)) {
                    Some(o) => reference(o),
                    None => {
                        return Err(format!(
                            "event {:?} is about {} {}, which the plugin was not sent",
                            e.reason, r.kind, r.name
                        ));
                    }
                },
            };
            Ok(PluginEvent {
                regarding,
                severity: if e.r#type == EventType::Warning as i32 {
                    Severity::Warning
                } else {
                    Severity::Normal
                },
                reason: if e.reason.is_empty() {
                    "Plugin".into()
                } else {
                    e.reason
                },
                message: limits::truncate_message(&e.message),
            })
        })
        .collect()
}

/// A reference to `obj`, for an Event about it.
pub fn reference(obj: &DynamicObject) -> ObjectReference {
    let types = obj.types.clone().unwrap_or_default();
    ObjectReference {
        api_version: Some(types.api_version),
        kind: Some(types.kind),
        name: obj.meta().name.clone(),
        namespace: obj.namespace(),
        uid: obj.uid(),
        resource_version: obj.resource_version(),
        ..ObjectReference::default()
    }
}

/// Whether `target` names `obj` (the version may differ: same group and kind).
fn same_object(obj: &DynamicObject, target: &v1::ObjectRef) -> bool {
    let types = obj.types.clone().unwrap_or_default();
    let group = |api_version: &str| {
        api_version
            .rsplit_once('/')
            .map_or(String::new(), |(g, _)| g.to_owned())
    };
    types.kind == target.kind
        && group(&types.api_version) == group(&target.api_version)
        && obj.name_any() == target.name
        && obj.namespace().unwrap_or_default() == target.namespace
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(kind: &str, name: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": "ns"},
        }))
        .unwrap()
    }

    fn target(kind: &str, name: &str) -> v1::ObjectRef {
        v1::ObjectRef {
            api_version: "myorg.org/v1alpha1".into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn ok() -> v1::ReconcileResponse {
        v1::ReconcileResponse {
            outcome: Outcome::Ok as i32,
            ..Default::default()
        }
    }

    #[test]
    fn accepts_a_good_response() {
        let base = obj("DatabaseTable", "users");
        let ext = obj("PgExt", "users");
        let resp = v1::ReconcileResponse {
            status: br#"{"tableName":"users"}"#.to_vec(),
            extension_statuses: vec![v1::ObjectStatus {
                target: Some(target("PgExt", "users")),
                status: br#"{"partitions":4}"#.to_vec(),
            }],
            conditions: vec![v1::Condition {
                r#type: "TableReady".into(),
                status: ConditionStatus::True as i32,
                reason: "Created".into(),
                message: String::new(),
            }],
            ..ok()
        };
        let checked = check_reconcile(resp, &base, std::slice::from_ref(&ext)).unwrap();
        assert_eq!(checked.status.unwrap()["tableName"], "users");
        assert_eq!(checked.extension_statuses[0].1["partitions"], 4);
        assert_eq!(checked.conditions[0].status, "True");
    }

    fn condition(type_: &str, message: &str) -> v1::Condition {
        v1::Condition {
            r#type: type_.into(),
            status: ConditionStatus::True as i32,
            reason: "R".into(),
            message: message.into(),
        }
    }

    #[test]
    fn refuses_duplicate_condition_types_and_too_many_conditions_or_events() {
        let base = obj("DatabaseTable", "users");
        let twice = v1::ReconcileResponse {
            conditions: vec![condition("TableReady", ""), condition("TableReady", "")],
            ..ok()
        };
        let err = check_reconcile(twice, &base, &[]).unwrap_err();
        assert!(
            err.contains("\"TableReady\" appears more than once"),
            "{err}"
        );

        let many = v1::ReconcileResponse {
            conditions: (0..=limits::MAX_CONDITIONS)
                .map(|i| condition(&format!("C{i}"), ""))
                .collect(),
            ..ok()
        };
        let err = check_reconcile(many, &base, &[]).unwrap_err();
        assert!(err.contains("33 conditions; at most 32"), "{err}");

        let event = v1::Event {
            r#type: EventType::Normal as i32,
            reason: "R".into(),
            message: "m".into(),
            regarding: None,
        };
        let noisy = v1::FinalizeResponse {
            outcome: Outcome::Ok as i32,
            events: vec![event; limits::MAX_EVENTS + 1],
            ..Default::default()
        };
        let err = check_finalize(noisy, &base, &[]).unwrap_err();
        assert!(err.contains("17 events; at most 16"), "{err}");
    }

    #[test]
    fn long_messages_are_cut_and_retry_after_is_clamped() {
        let base = obj("DatabaseTable", "users");
        let long = "x".repeat(10_000);
        let resp = v1::ReconcileResponse {
            outcome: Outcome::Retry as i32,
            message: long.clone(),
            conditions: vec![condition("TableReady", &long)],
            retry_after: Some(prost_types::Duration {
                seconds: 0,
                nanos: 0,
            }),
            ..ok()
        };
        let checked = check_reconcile(resp, &base, &[]).unwrap();
        assert_eq!(checked.message.chars().count(), limits::MAX_MESSAGE_CHARS);
        assert_eq!(
            checked.conditions[0].message.chars().count(),
            limits::MAX_MESSAGE_CHARS
        );
        assert_eq!(checked.retry_after, Some(limits::MIN_RETRY_AFTER));
        let later = v1::ReconcileResponse {
            retry_after: Some(prost_types::Duration {
                seconds: 7 * 86400,
                nanos: 0,
            }),
            ..ok()
        };
        let checked = check_reconcile(later, &base, &[]).unwrap();
        assert_eq!(checked.retry_after, Some(limits::MAX_RETRY_AFTER));
        for (seconds, nanos) in [(-5, 0), (i64::MIN, 0), (i64::MIN, -999_999_999), (0, -1)] {
            let negative = v1::ReconcileResponse {
                retry_after: Some(prost_types::Duration { seconds, nanos }),
                ..ok()
            };
            let checked = check_reconcile(negative, &base, &[]).unwrap();
            assert_eq!(
                checked.retry_after,
                Some(limits::MIN_RETRY_AFTER),
                "{seconds}s {nanos}ns"
            );
        }
    }

    #[test]
    fn refuses_invalid_json_and_non_objects() {
        let base = obj("DatabaseTable", "users");
        let err = check_reconcile(
            v1::ReconcileResponse {
                status: b"{nope".to_vec(),
                ..ok()
            },
            &base,
            &[],
        )
        .unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
        let err = check_reconcile(
            v1::ReconcileResponse {
                status: b"[1]".to_vec(),
                ..ok()
            },
            &base,
            &[],
        )
        .unwrap_err();
        assert!(err.contains("must be a JSON object, got an array"), "{err}");
    }

    #[test]
    fn refuses_status_for_objects_not_sent() {
        let base = obj("DatabaseTable", "users");
        let resp = v1::ReconcileResponse {
            extension_statuses: vec![v1::ObjectStatus {
                target: Some(target("PgExt", "orders")),
                status: b"{}".to_vec(),
            }],
            ..ok()
        };
        let err = check_reconcile(resp, &base, &[obj("PgExt", "users")]).unwrap_err();
        assert!(err.contains("not sent"), "{err}");
    }

    #[test]
    fn refuses_operator_keys_and_reserved_conditions() {
        let base = obj("DatabaseTable", "users");
        let err = check_reconcile(
            v1::ReconcileResponse {
                status: br#"{"implementation":"x"}"#.to_vec(),
                ..ok()
            },
            &base,
            &[],
        )
        .unwrap_err();
        assert!(err.contains("implementation"), "{err}");
        let resp = v1::ReconcileResponse {
            conditions: vec![v1::Condition {
                r#type: "Ready".into(),
                ..Default::default()
            }],
            ..ok()
        };
        assert!(
            check_reconcile(resp, &base, &[])
                .unwrap_err()
                .contains("reserved")
        );
    }

    #[test]
    fn refuses_unspecified_outcome() {
        let base = obj("DatabaseTable", "users");
        let err = check_reconcile(v1::ReconcileResponse::default(), &base, &[]).unwrap_err();
        assert!(err.contains("UNSPECIFIED"), "{err}");
    }
}

//! What a plugin answers.

use std::time::Duration;

use kplug_proto::v1::{self, ConditionStatus, EventType, Outcome};
use serde::Serialize;
use serde_json::Value;

use crate::object::Object;

use kplug_proto::{
    RESERVED_CONDITION_TYPES as RESERVED_CONDITIONS, RESERVED_STATUS_KEYS as RESERVED_KEYS,
};

/// A plugin's answer to `Reconcile` (or `Finalize`, where only the outcome,
/// message, retry delay and events count).
///
/// ```
/// use kplug_sidecar::Response;
/// let done = Response::ok()
///     .message("table users is up to date")
///     .status(serde_json::json!({"columns": 2}));
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct Response {
    outcome: Outcome,
    message: String,
    retry_after: Option<Duration>,
    status: Option<Value>,
    extension_statuses: Vec<(v1::ObjectRef, Value)>,
    conditions: Vec<v1::Condition>,
    events: Vec<v1::Event>,
    /// The desired children; `None` leaves them as they are.
    children: Option<Vec<Value>>,
    problem: Option<String>,
    /// A reserved key in the base object's status: a problem for Reconcile
    /// and Finalize, not for a hook, whose status lands under
    /// `status.hooks.<plugin>` where no key is the operator's.
    reserved_key: Option<String>,
}

impl Response {
    fn new(outcome: Outcome) -> Self {
        Self {
            outcome,
            message: String::new(),
            retry_after: None,
            status: None,
            extension_statuses: Vec::new(),
            conditions: Vec::new(),
            events: Vec::new(),
            children: None,
            problem: None,
            reserved_key: None,
        }
    }

    /// Done: the object is reconciled (or cleaned up).
    pub fn ok() -> Self {
        Self::new(Outcome::Ok)
    }

    /// Not done yet, nothing wrong: call again after `after`.
    pub fn retry(after: Duration) -> Self {
        Self {
            retry_after: Some(after),
            ..Self::new(Outcome::Retry)
        }
    }

    /// Failed; the operator shows `message` on the object and retries with
    /// backoff.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(Outcome::Failed).message(message)
    }

    /// A message for humans (shown in the `Reconciled` condition).
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// The plugin's part of the base object's status (a JSON object). From
    /// a hook, it is written under `status.hooks.<plugin>`, where the
    /// operator's reserved keys may be used.
    pub fn status(mut self, status: impl Serialize) -> Self {
        match serde_json::to_value(&status) {
            Ok(Value::Object(map)) => {
                if let Some(key) = RESERVED_KEYS.iter().find(|k| map.contains_key(**k)) {
                    self.reserved_key
                        .get_or_insert(format!("status: key {key:?} is reserved for the operator"));
                }
                self.status = Some(Value::Object(map));
            }
            _ => {
                let _ = self.check_status(status, "status");
            }
        }
        self
    }

    /// The status of an extension the plugin was sent.
    pub fn extension_status(mut self, extension: &Object, status: impl Serialize) -> Self {
        let what = format!("status of {} {}", extension.kind(), extension.name());
        if let Some(v) = self.check_status(status, &what) {
            self.extension_statuses.push((extension.object_ref(), v));
        }
        self
    }

    /// A condition on the base object; `status` `None` means unknown.
    pub fn condition(
        mut self,
        type_: &str,
        status: Option<bool>,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        if RESERVED_CONDITIONS.contains(&type_) {
            self.problem.get_or_insert(format!(
                "condition type {type_:?} is reserved for the operator"
            ));
            return self;
        }
        self.conditions.push(v1::Condition {
            r#type: type_.to_owned(),
            status: match status {
                Some(true) => ConditionStatus::True,
                Some(false) => ConditionStatus::False,
                None => ConditionStatus::Unknown,
            } as i32,
            reason: reason.to_owned(),
            message: message.into(),
        });
        self
    }

    /// A Normal event on the base object.
    pub fn event(self, reason: &str, message: impl Into<String>) -> Self {
        self.push_event(EventType::Normal, reason, message.into(), None)
    }

    /// A Warning event on the base object.
    pub fn warning(self, reason: &str, message: impl Into<String>) -> Self {
        self.push_event(EventType::Warning, reason, message.into(), None)
    }

    /// An event on `regarding` (the base object or an extension sent).
    pub fn event_on(
        self,
        regarding: &Object,
        warning: bool,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        let kind = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.push_event(kind, reason, message.into(), Some(regarding.object_ref()))
    }

    fn push_event(
        mut self,
        kind: EventType,
        reason: &str,
        message: String,
        regarding: Option<v1::ObjectRef>,
    ) -> Self {
        self.events.push(v1::Event {
            r#type: kind as i32,
            reason: reason.to_owned(),
            message,
            regarding,
        });
        self
    }

    /// Adds a child: a Kubernetes object the operator applies for this
    /// base object, with `apiVersion`, `kind`, `metadata.name` and the
    /// fields the plugin manages. Any `Serialize` type will do: a
    /// `serde_json::json!` value, or a typed object such as
    /// `k8s_openapi::api::core::v1::ConfigMap`. Its kind must be one the
    /// offer declares ([`crate::Offer::child`]); the operator puts it in
    /// the base object's namespace, owns it and watches it.
    ///
    /// An answer that adds at least one child, or calls
    /// [`Response::children`], carries the whole set: on OK the operator
    /// deletes the children no longer listed. An answer without either
    /// leaves the children as they are.
    ///
    /// ```
    /// use kplug_sidecar::Response;
    /// use serde_json::json;
    /// let answer = Response::ok().child(json!({
    ///     "apiVersion": "v1", "kind": "ConfigMap",
    ///     "metadata": {"name": "greeting-world"},
    ///     "data": {"greeting": "hello, world"},
    /// }));
    /// ```
    pub fn child(mut self, object: impl Serialize) -> Self {
        let children = self.children.get_or_insert_with(Vec::new);
        match serde_json::to_value(object) {
            Ok(Value::Object(map)) => children.push(Value::Object(map)),
            Ok(_) => {
                self.problem
                    .get_or_insert_with(|| "a child must be a JSON object".into());
            }
            Err(e) => {
                self.problem
                    .get_or_insert_with(|| format!("a child cannot be encoded as JSON: {e}"));
            }
        }
        self
    }

    /// Sets the whole set of desired children (see [`Response::child`]);
    /// an empty set deletes every child on OK.
    pub fn children<T: Serialize>(mut self, objects: impl IntoIterator<Item = T>) -> Self {
        self.children = Some(Vec::new());
        for object in objects {
            self = self.child(object);
        }
        self
    }

    fn check_status(&mut self, status: impl Serialize, what: &str) -> Option<Value> {
        let problem = match serde_json::to_value(status) {
            Ok(Value::Object(map)) => match RESERVED_KEYS.iter().find(|k| map.contains_key(**k)) {
                Some(key) => format!("{what}: key {key:?} is reserved for the operator"),
                None => return Some(Value::Object(map)),
            },
            Ok(_) => format!("{what} must be a JSON object"),
            Err(e) => format!("{what} cannot be encoded as JSON: {e}"),
        };
        self.problem.get_or_insert(problem);
        None
    }

    /// The outcome.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The response as it would be sent, as JSON, for a plugin's own tests:
    /// `outcome` (`"OK"`, `"RETRY"`, `"FAILED"`), `message`,
    /// `retryAfterSeconds`, `status`, `extensionStatuses` (`{target,
    /// status}`), `conditions`, `events`, and `children` when the answer
    /// carries children. A builder mistake (a reserved
    /// key, a status that is not an object) shows as the FAILED response
    /// the operator would get. See [`crate::Request::from_json`].
    pub fn to_json(&self) -> Value {
        let r = self.clone().into_parts();
        let outcome = match r.outcome {
            Outcome::Ok => "OK",
            Outcome::Retry => "RETRY",
            Outcome::Failed => "FAILED",
            Outcome::Unspecified => "UNSPECIFIED",
        };
        let condition_status = |status: i32| match ConditionStatus::try_from(status) {
            Ok(ConditionStatus::True) => "True",
            Ok(ConditionStatus::False) => "False",
            _ => "Unknown",
        };
        let mut json = serde_json::json!({
            "outcome": outcome,
            "message": r.message,
            "retryAfterSeconds": r.retry_after.map(|d| d.as_secs_f64()),
            "status": r.status,
            "extensionStatuses": r.extension_statuses.iter().map(|(target, status)| serde_json::json!({
                "target": {"apiVersion": target.api_version, "kind": target.kind, "name": target.name, "namespace": target.namespace},
                "status": status,
            })).collect::<Vec<_>>(),
            "conditions": r.conditions.iter().map(|c| serde_json::json!({
                "type": c.r#type,
                "status": condition_status(c.status),
                "reason": c.reason,
                "message": c.message,
            })).collect::<Vec<_>>(),
            "events": r.events.iter().map(|e| serde_json::json!({
                "type": if e.r#type == EventType::Warning as i32 { "Warning" } else { "Normal" },
                "reason": e.reason,
                "message": e.message,
            })).collect::<Vec<_>>(),
        });
        // Only an answer that carries children has the key: without it the
        // operator leaves the children as they are.
        if let Some(children) = r.children {
            json["children"] = Value::Array(children);
        }
        json
    }

    /// A builder mistake (reserved key, status not an object), turned into
    /// FAILED when sent so the plugin author sees it on the resource.
    fn into_parts(self) -> Self {
        match self.problem.clone().or_else(|| self.reserved_key.clone()) {
            Some(problem) => Self::failed(format!("plugin bug: {problem}")),
            None => self,
        }
    }

    pub(crate) fn into_reconcile(self) -> v1::ReconcileResponse {
        let r = self.into_parts();
        v1::ReconcileResponse {
            outcome: r.outcome as i32,
            message: r.message,
            retry_after: r
                .retry_after
                .and_then(|d| prost_types::Duration::try_from(d).ok()),
            status: r.status.map(|s| json_bytes(&s)).unwrap_or_default(),
            extension_statuses: r
                .extension_statuses
                .into_iter()
                .map(|(target, status)| v1::ObjectStatus {
                    target: Some(target),
                    status: json_bytes(&status),
                })
                .collect(),
            conditions: r.conditions,
            events: r.events,
            children: r.children.as_deref().map(children_proto),
        }
    }

    /// The answer to a `Hook`: conditions and extension statuses are not a
    /// hook's to set, so a response with them is a plugin bug, sent as
    /// FAILED like the others.
    pub(crate) fn into_hook(self) -> v1::HookResponse {
        let r = if !self.conditions.is_empty() || !self.extension_statuses.is_empty() {
            Self::failed(
                "plugin bug: a hook's response sets conditions or extension statuses; a hook writes only its status (under status.hooks.<plugin>) and events",
            )
        } else if self.children.is_some() {
            Self::failed(
                "plugin bug: a hook's response sets children; only Reconcile and Finalize answers carry children",
            )
        } else {
            Self {
                reserved_key: None,
                ..self
            }
            .into_parts()
        };
        v1::HookResponse {
            outcome: r.outcome as i32,
            message: r.message,
            status: r.status.map(|s| json_bytes(&s)).unwrap_or_default(),
            events: r.events,
            retry_after: r
                .retry_after
                .and_then(|d| prost_types::Duration::try_from(d).ok()),
        }
    }

    pub(crate) fn into_finalize(self) -> v1::FinalizeResponse {
        let r = self.into_parts();
        v1::FinalizeResponse {
            outcome: r.outcome as i32,
            message: r.message,
            retry_after: r
                .retry_after
                .and_then(|d| prost_types::Duration::try_from(d).ok()),
            events: r.events,
            children: r.children.as_deref().map(children_proto),
        }
    }
}

fn children_proto(children: &[Value]) -> v1::Children {
    v1::Children {
        objects: children.iter().map(json_bytes).collect(),
    }
}

/// A status as the JSON bytes on the wire: `serde_json::to_vec` writes
/// straight into the buffer, where `to_string` (Display) goes through
/// `fmt` and checks every chunk it writes for UTF-8 again.
fn json_bytes(status: &Value) -> Vec<u8> {
    // A Value has string keys only: it always serializes.
    serde_json::to_vec(status).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reserved_keys_become_failed() {
        let r = Response::ok()
            .status(json!({"implementation": "x"}))
            .into_reconcile();
        assert_eq!(r.outcome, Outcome::Failed as i32);
        assert!(
            r.message.contains("\"implementation\" is reserved"),
            "{}",
            r.message
        );
        let r = Response::ok()
            .condition("Ready", Some(true), "R", "")
            .into_reconcile();
        assert_eq!(r.outcome, Outcome::Failed as i32);
        let r = Response::ok().status(json!([1, 2])).into_reconcile();
        assert!(r.message.contains("must be a JSON object"), "{}", r.message);
    }

    #[test]
    fn children_are_carried_only_when_set() {
        let none = Response::ok();
        assert_eq!(none.to_json().get("children"), None);
        assert_eq!(none.into_reconcile().children, None);
        let empty = Response::ok().children(Vec::<Value>::new());
        assert_eq!(empty.to_json()["children"], json!([]));
        assert_eq!(empty.into_reconcile().children.unwrap().objects.len(), 0);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let one = Response::ok().child(&cm).into_reconcile();
        let sent: Value = serde_json::from_slice(&one.children.unwrap().objects[0]).unwrap();
        assert_eq!(sent, cm);
        let bad = Response::ok().child(json!([1])).into_reconcile();
        assert_eq!(bad.outcome, Outcome::Failed as i32);
        assert!(
            bad.message.contains("a child must be a JSON object"),
            "{}",
            bad.message
        );
        let hook = Response::ok().child(&cm).into_hook();
        assert_eq!(hook.outcome, Outcome::Failed as i32);
    }

    #[test]
    fn to_json_shows_what_would_be_sent() {
        let r = Response::retry(Duration::from_secs(3))
            .message("waiting")
            .status(json!({"a": 1}))
            .condition("TableReady", Some(false), "Pending", "soon")
            .warning("Slow", "slow server");
        assert_eq!(
            r.to_json(),
            json!({
                "outcome": "RETRY", "message": "waiting", "retryAfterSeconds": 3.0,
                "status": {"a": 1}, "extensionStatuses": [],
                "conditions": [{"type": "TableReady", "status": "False", "reason": "Pending", "message": "soon"}],
                "events": [{"type": "Warning", "reason": "Slow", "message": "slow server"}],
            })
        );
        let mistake = Response::ok()
            .status(json!({"implementation": "x"}))
            .to_json();
        assert_eq!(mistake["outcome"], "FAILED");
        assert!(
            mistake["message"]
                .as_str()
                .unwrap()
                .starts_with("plugin bug:")
        );
    }

    #[test]
    fn builds_a_full_response() {
        let r = Response::retry(Duration::from_secs(3))
            .message("waiting")
            .status(json!({"a": 1}))
            .condition("TableReady", None, "Pending", "soon")
            .warning("Slow", "slow server")
            .into_reconcile();
        assert_eq!(r.outcome, Outcome::Retry as i32);
        assert_eq!(r.retry_after.unwrap().seconds, 3);
        assert_eq!(r.status, br#"{"a":1}"#);
        assert_eq!(r.conditions[0].status, ConditionStatus::Unknown as i32);
        assert_eq!(r.events[0].r#type, EventType::Warning as i32);
    }

    #[test]
    fn a_hook_may_use_reserved_keys_but_not_conditions() {
        let r = Response::ok()
            .status(json!({"implementation": "backed up"}))
            .into_hook();
        assert_eq!(r.outcome, Outcome::Ok as i32);
        assert_eq!(r.status, br#"{"implementation":"backed up"}"#);
        let r = Response::ok()
            .condition("BackedUp", Some(true), "Done", "")
            .into_hook();
        assert_eq!(r.outcome, Outcome::Failed as i32);
        assert!(
            r.message
                .starts_with("plugin bug: a hook's response sets conditions"),
            "{}",
            r.message
        );
        let r = Response::retry(Duration::from_secs(4)).into_hook();
        assert_eq!(r.retry_after.unwrap().seconds, 4);
        let r = Response::ok().status(json!([1])).into_hook();
        assert!(r.message.contains("must be a JSON object"), "{}", r.message);
    }
}

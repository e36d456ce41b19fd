//! The recorded choice of implementation is the operator's to write.
//!
//! The operator records the implementation it chose, and the plugin chosen
//! with it, in the annotations `kplug.io/implementation` and
//! `kplug.io/plugin` before it first calls the plugin (the reconcile's
//! record step). The choice is sticky: an edit by anyone else would move
//! the object to another implementation behind the operator's back, its
//! old plugin never cleaned up, or bind it to a plugin that does not serve
//! it. So the validating webhook refuses a create or an update that sets,
//! changes or removes them, unless it comes from the operator's own field
//! manager. Moving an object is `kplug.io/reselect`'s job.

use kube::api::DynamicObject;
use kube::core::admission::AdmissionRequest;

use crate::reconcile::RESELECT;
use crate::selection::{IMPLEMENTATION_ANNOTATION, PLUGIN_ANNOTATION, Recorded};

/// Why `req` may not be admitted, when it edits the recorded choice and
/// does not come from `field_manager` (the operator's).
pub(crate) fn refusal(
    req: &AdmissionRequest<DynamicObject>,
    object: &DynamicObject,
    field_manager: &str,
    label: &str,
) -> Option<String> {
    let before = req.old_object.as_ref().and_then(Recorded::annotated);
    let after = Recorded::annotated(object);
    if before == after || manager(req).as_deref() == Some(field_manager) {
        return None;
    }
    Some(format!(
        "{IMPLEMENTATION_ANNOTATION} and {PLUGIN_ANNOTATION} on {label} record the implementation the operator chose ({}), and only the operator writes them; leave them as they are. To move the object to another implementation, annotate it with {RESELECT}",
        before.map_or_else(
            || "none yet".to_owned(),
            |r| format!(
                "{} of plugin {}",
                r.implementation,
                r.plugin.unwrap_or_default()
            )
        ),
    ))
}

/// The field manager the request was sent with (`options.fieldManager`).
fn manager(req: &AdmissionRequest<DynamicObject>) -> Option<String> {
    let options = req.options.as_ref()?;
    options.0.get("fieldManager")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn request(
        old: Option<Value>,
        object: &Value,
        manager: Option<&str>,
    ) -> AdmissionRequest<DynamicObject> {
        let mut review = json!({
            "uid": "1",
            "kind": {"group": "example.com", "version": "v1", "kind": "Greeting"},
            "resource": {"group": "example.com", "version": "v1", "resource": "greetings"},
            "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
            "userInfo": {},
            "object": object,
            "oldObject": old,
        });
        if let Some(manager) = manager {
            review["options"] = json!({"fieldManager": manager});
        }
        serde_json::from_value(review).unwrap()
    }

    fn greeting(annotations: Value) -> Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Greeting",
            "metadata": {"name": "g", "namespace": "ns", "annotations": annotations},
        })
    }

    fn check(old: Option<Value>, new: Value, manager: Option<&str>) -> Option<String> {
        let req = request(old, &new, manager);
        let object: DynamicObject = serde_json::from_value(new).unwrap();
        refusal(&req, &object, "kplug-operator", "Greeting ns/g")
    }

    fn chosen(implementation: &str) -> Value {
        json!({"kplug.io/implementation": implementation, "kplug.io/plugin": "hello"})
    }

    #[test]
    fn the_operator_records_and_others_may_not() {
        assert_eq!(
            check(
                Some(greeting(json!({}))),
                greeting(chosen("Hello")),
                Some("kplug-operator")
            ),
            None
        );
        let refused = check(
            Some(greeting(json!({}))),
            greeting(chosen("Hello")),
            Some("kubectl-edit"),
        )
        .expect("refused");
        assert!(refused.contains("kplug.io/reselect"), "{refused}");
        assert!(
            check(
                Some(greeting(chosen("Hello"))),
                greeting(chosen("Bonjour")),
                None
            )
            .is_some()
        );
        assert!(
            check(Some(greeting(chosen("Hello"))), greeting(json!({})), None).is_some(),
            "removed"
        );
        assert!(
            check(None, greeting(chosen("Hello")), None).is_some(),
            "set at creation"
        );
    }

    #[test]
    fn other_edits_pass() {
        let mut other = chosen("Hello");
        other["team"] = json!("a");
        assert_eq!(
            check(Some(greeting(chosen("Hello"))), greeting(other), None),
            None
        );
        assert_eq!(check(None, greeting(json!({})), None), None);
    }
}

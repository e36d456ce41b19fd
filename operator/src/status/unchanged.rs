//! Whether a status apply would change nothing, so that it need not be
//! sent.
//!
//! An operator that starts (or a new leader term) reconciles every object
//! once, and most of them have not changed: their applies would each be a
//! request the API server answers with the object as it is. Measured over
//! 10,000 converged tables, they were three of the four requests per table
//! (`make bench`, P4). An apply is skipped only when it provably changes
//! nothing: every field it sets already holds the same value, and it would
//! remove nothing its field manager owns. Anything else (a value written
//! by someone else, a number spelled differently) is sent as before.

use kube::api::DynamicObject;
use serde_json::{Map, Value};

use super::OPERATOR_KEYS;

/// Whether `obj`'s status already is `status`, all that `manager` (the
/// operator's field manager) applies: the operator's part (conditions
/// compared by type, whatever their order) and the plugin's fields, each
/// with the same value, and no other top-level key owned by `manager` (the
/// apply would remove it).
pub(crate) fn holds_applied(obj: &DynamicObject, manager: &str, status: &Value) -> bool {
    let Some(applied) = status.as_object() else {
        return false;
    };
    let stored = obj.data.get("status");
    let same = applied.iter().all(|(key, value)| {
        let have = stored.and_then(|s| s.get(key));
        if key == "conditions" {
            same_conditions(Some(value), have)
        } else {
            have == Some(value)
        }
    });
    // The operator's own keys it leaves out are removed too (e.g. `plugin`
    // after a move), whoever else owns them.
    let operator_keys_left_out = OPERATOR_KEYS
        .iter()
        .any(|key| !applied.contains_key(*key) && stored.and_then(|s| s.get(*key)).is_some());
    same && !operator_keys_left_out
        && owned_status_keys(obj, manager)
            .unwrap_or_default()
            .iter()
            .all(|key| applied.contains_key(key))
}

/// The plugin's fields that `manager` (the operator's field manager)
/// applied before, as `obj` has them: every top-level status key it owns
/// but the operator's own. Applied again as they are, they change nothing
/// and stay owned.
pub(crate) fn kept_plugin_fields(obj: &DynamicObject, manager: &str) -> Map<String, Value> {
    let stored = obj.data.get("status");
    owned_status_keys(obj, manager)
        .unwrap_or_default()
        .into_iter()
        .filter(|key| !OPERATOR_KEYS.contains(&key.as_str()))
        .filter_map(|key| {
            let value = stored?.get(&key)?.clone();
            Some((key, value))
        })
        .collect()
}

/// Whether `obj`'s status already holds `status`, the part `manager`
/// applies: each of its keys has the same value, and `manager` owns no
/// other top-level key of the status (the apply would remove it). Without
/// a `managedFields` entry for `manager` on the status, a non-empty
/// `status` is a change: the apply would take ownership of its fields.
pub(crate) fn holds_manager_part(
    obj: &DynamicObject,
    manager: &str,
    status: &Map<String, Value>,
) -> bool {
    let stored = obj.data.get("status");
    if !status
        .iter()
        .all(|(key, value)| stored.and_then(|s| s.get(key)) == Some(value))
    {
        return false;
    }
    match owned_status_keys(obj, manager) {
        Some(owned) => owned.iter().all(|key| status.contains_key(key)),
        None => status.is_empty(),
    }
}

/// The top-level status keys `manager` owns on `obj`'s status
/// subresource, from `managedFields`, or `None` when it owns nothing
/// there.
pub(crate) fn owned_status_keys(obj: &DynamicObject, manager: &str) -> Option<Vec<String>> {
    let entries = obj.metadata.managed_fields.as_ref()?;
    let mut found = false;
    let mut keys = Vec::new();
    for entry in entries.iter().filter(|e| {
        e.manager.as_deref() == Some(manager) && e.subresource.as_deref() == Some("status")
    }) {
        found = true;
        let Some(fields) = entry.fields_v1.as_ref() else {
            continue;
        };
        // fieldsV1: {"f:status": {".": {}, "f:key": {...}, ...}}
        if let Some(Value::Object(status)) = fields.0.get("f:status") {
            keys.extend(
                status
                    .keys()
                    .filter_map(|k| k.strip_prefix("f:"))
                    .map(str::to_owned),
            );
        }
    }
    found.then_some(keys)
}

/// Two condition lists with the same conditions, by type, each equal in
/// every field.
fn same_conditions(want: Option<&Value>, have: Option<&Value>) -> bool {
    let (want, have) = (as_list(want), as_list(have));
    want.len() == have.len()
        && want.iter().all(|w| {
            let kind = w.get("type");
            have.iter().find(|h| h.get("type") == kind) == Some(w)
        })
}

/// A JSON array's items; none for anything else.
fn as_list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(status: Value, managed: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1", "kind": "T",
            "metadata": {"name": "t", "namespace": "ns", "managedFields": managed},
            "status": status,
        }))
        .unwrap()
    }

    fn ready(status: &str) -> Value {
        json!({"type": "Ready", "status": status, "reason": "R", "message": "m",
               "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2})
    }

    fn operator_part() -> Value {
        json!({
            "observedGeneration": 2,
            "implementation": "SQLite", "plugin": "sqlite",
            "conditions": [ready("True"), {"type": "Reconciled", "status": "True"}],
        })
    }

    #[test]
    fn the_operators_part_as_stored_is_unchanged_whatever_the_condition_order() {
        let mut stored = operator_part();
        stored["conditions"] = json!([{"type": "Reconciled", "status": "True"}, ready("True")]);
        stored["rows"] = json!(3); // a plugin's field: not the operator's
        assert!(holds_applied_by_operator(
            &obj(stored, json!([])),
            &operator_part()
        ));
    }

    #[test]
    fn any_difference_in_the_operators_part_is_a_change() {
        let changes = [
            (
                "a condition's status",
                json!({"conditions": [ready("False"), {"type": "Reconciled", "status": "True"}]}),
            ),
            (
                "a condition more",
                json!({"conditions": [ready("True"), {"type": "Reconciled", "status": "True"}, {"type": "X", "status": "True"}]}),
            ),
            ("a condition less", json!({"conditions": [ready("True")]})),
            ("the generation", json!({"observedGeneration": 1})),
            ("the implementation", json!({"implementation": "MariaDB"})),
        ];
        for (what, change) in changes {
            let mut stored = operator_part();
            for (k, v) in change.as_object().unwrap() {
                stored[k] = v.clone();
            }
            assert!(
                !holds_applied_by_operator(&obj(stored, json!([])), &operator_part()),
                "{what}"
            );
        }
        // A key the apply leaves out is removed by it: a change.
        let mut without_choice = operator_part();
        without_choice.as_object_mut().unwrap().remove("plugin");
        without_choice
            .as_object_mut()
            .unwrap()
            .remove("implementation");
        assert!(!holds_applied_by_operator(
            &obj(operator_part(), json!([])),
            &without_choice
        ));
        assert!(!holds_applied_by_operator(
            &obj(json!(null), json!([])),
            &operator_part()
        ));
    }

    fn holds_applied_by_operator(obj: &DynamicObject, status: &Value) -> bool {
        holds_applied(obj, "kplug-operator", status)
    }

    #[test]
    fn a_plugin_field_the_operator_applied_and_leaves_out_is_a_change_and_is_kept_until_then() {
        let mut stored = operator_part();
        stored["rows"] = json!(3);
        let managed = json!([
            {"manager": "kplug-operator", "operation": "Apply", "subresource": "status",
             "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:conditions": {}, "f:rows": {}, "f:implementation": {}}}},
        ]);
        let stored = obj(stored, managed);
        assert_eq!(
            kept_plugin_fields(&stored, "kplug-operator"),
            json!({"rows": 3}).as_object().unwrap().clone()
        );
        assert!(
            !holds_applied_by_operator(&stored, &operator_part()),
            "rows would be removed"
        );
        let mut with_rows = operator_part();
        with_rows["rows"] = json!(3);
        assert!(holds_applied_by_operator(&stored, &with_rows));
        assert!(kept_plugin_fields(&stored, "someone-else").is_empty());
    }

    fn managed(manager: &str, keys: &[&str]) -> Value {
        let fields: Map<String, Value> = std::iter::once((".".to_owned(), json!({})))
            .chain(keys.iter().map(|k| (format!("f:{k}"), json!({}))))
            .collect();
        json!([
            {"manager": "kplug-operator", "operation": "Apply", "subresource": "status",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {}}}},
            {"manager": manager, "operation": "Apply", "subresource": "status",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": fields}},
        ])
    }

    #[test]
    fn a_plugins_part_is_unchanged_only_when_it_would_set_and_remove_nothing() {
        let stored = json!({"rows": 3, "engine": {"name": "sqlite"}, "conditions": []});
        let part = |v: Value| v.as_object().unwrap().clone();
        let same = part(json!({"rows": 3, "engine": {"name": "sqlite"}}));
        let o = obj(
            stored.clone(),
            managed("kplug-plugin-sqlite", &["rows", "engine"]),
        );
        assert!(holds_manager_part(&o, "kplug-plugin-sqlite", &same));

        // A value that differs, a field more.
        assert!(!holds_manager_part(
            &o,
            "kplug-plugin-sqlite",
            &part(json!({"rows": 4, "engine": {"name": "sqlite"}}))
        ));
        assert!(!holds_manager_part(
            &o,
            "kplug-plugin-sqlite",
            &part(json!({"rows": 3, "engine": {"name": "sqlite"}, "new": 1}))
        ));
        // A field the plugin owns and no longer reports would be removed.
        assert!(!holds_manager_part(
            &o,
            "kplug-plugin-sqlite",
            &part(json!({"rows": 3}))
        ));
        // Values that are there but were written by someone else: the
        // apply would take them over.
        assert!(!holds_manager_part(&o, "kplug-plugin-other", &same));
        // Nothing to set and nothing owned.
        assert!(holds_manager_part(&o, "kplug-plugin-other", &Map::new()));
        // Owned keys of another subresource do not count.
        let main: Value = json!([{"manager": "kplug-plugin-sqlite", "operation": "Apply",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]);
        assert!(holds_manager_part(
            &obj(stored, main),
            "kplug-plugin-sqlite",
            &Map::new()
        ));
    }
}

//! When a child must be applied again, judged without comparing the
//! desired object with the live one (defaulted fields, another
//! controller's fields and the API server's rendering all differ, and
//! Metacontroller's users know the loops that come of it):
//! - the **intent** changed: the hash of what the operator last applied
//!   (after mutation) is on the child, in [`INTENT_HASH`];
//! - a **managed field drifted**: someone else took a field the operator
//!   applied (a `kubectl edit` moves the field's ownership to its own
//!   manager), or removed it. The child's `managedFields` entry of the
//!   operator's field manager then no longer covers the intent.
//!
//! A resync or a restart over converged children finds both unchanged in
//! the watch's cache, and writes nothing.

use serde_json::{Map, Value};

/// The annotation on a child holding the hash of the intent last applied.
pub(crate) const INTENT_HASH: &str = "kplug.io/intent-hash";

/// The hash of `intent`: SHA-256 of its canonical JSON (keys sorted at
/// every level), the first 16 bytes in hex.
pub(crate) fn intent_hash(intent: &Map<String, Value>) -> String {
    let mut canonical = Vec::new();
    write_canonical(&Value::Object(intent.clone()), &mut canonical);
    let digest = ring::digest::digest(&ring::digest::SHA256, &canonical);
    digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                // A string always serializes.
                out.extend(serde_json::to_vec(key).unwrap_or_default());
                out.push(b':');
                write_canonical(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend(serde_json::to_vec(scalar).unwrap_or_default()),
    }
}

/// Whether `fields` (a `managedFields` entry's `fieldsV1` of the
/// operator's manager) still covers every field of `intent` that server-side
/// apply tracks: each key of a map (`f:<key>`), each element of a list
/// keyed by its fields (`k:{...}`), each value of a set (`v:<json>`). A
/// list whose element the entry does not track by key or value is atomic
/// (`f:<list>: {}`) and covered as a whole.
///
/// `apiVersion` and `kind` are not fields, and `metadata.name` and
/// `metadata.namespace` are not tracked.
pub(crate) fn covers(fields: &Value, intent: &Map<String, Value>) -> bool {
    intent.iter().all(|(key, value)| match key.as_str() {
        "apiVersion" | "kind" => true,
        "metadata" => match value {
            Value::Object(meta) => {
                let meta: Map<String, Value> = meta
                    .iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "name" | "namespace"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                meta.is_empty()
                    || field(fields, key).is_some_and(|f| covers_value(f, &Value::Object(meta)))
            }
            _ => true,
        },
        _ => field(fields, key).is_some_and(|f| covers_value(f, value)),
    })
}

fn field<'a>(fields: &'a Value, key: &str) -> Option<&'a Value> {
    fields.get(format!("f:{key}"))
}

fn covers_value(fields: &Value, value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .all(|(key, v)| field(fields, key).is_some_and(|f| covers_value(f, v))),
        Value::Array(items) => covers_list(fields, items),
        // A scalar's entry is `{}` (or `{".": {}}`): present is covered.
        _ => true,
    }
}

/// A list: atomic when the entry tracks no element, else every element
/// must be tracked by its key fields or its value.
fn covers_list(fields: &Value, items: &[Value]) -> bool {
    let Some(entries) = fields.as_object() else {
        return true;
    };
    let tracked: Vec<(&String, &Value)> = entries
        .iter()
        .filter(|(k, _)| k.starts_with("k:") || k.starts_with("v:") || k.starts_with("i:"))
        .collect();
    if tracked.is_empty() {
        return true;
    }
    items.iter().all(|item| {
        tracked.iter().any(|(k, sub)| {
            if let Some(key) = k.strip_prefix("k:") {
                serde_json::from_str::<Map<String, Value>>(key).is_ok_and(|key| {
                    // An element entry without members is owned whole: the
                    // API server tracks an owner reference as
                    // `k:{"uid":"…"}: {}`.
                    let whole = sub.as_object().is_some_and(Map::is_empty);
                    key.iter().all(|(name, v)| item.get(name) == Some(v))
                        && (whole || covers_value(sub, item))
                })
            } else if let Some(set_value) = k.strip_prefix("v:") {
                serde_json::from_str::<Value>(set_value).is_ok_and(|v| &v == item)
            } else {
                // Tracked by index: the element is there.
                true
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_hash_ignores_key_order_and_sees_every_value() {
        let a = map(json!({"kind": "ConfigMap", "data": {"a": "1", "b": "2"}}));
        let b = map(json!({"data": {"b": "2", "a": "1"}, "kind": "ConfigMap"}));
        let c = map(json!({"data": {"b": "2", "a": "3"}, "kind": "ConfigMap"}));
        assert_eq!(intent_hash(&a), intent_hash(&b));
        assert_ne!(intent_hash(&a), intent_hash(&c));
        assert_eq!(intent_hash(&a).len(), 32);
    }

    fn deployment() -> Map<String, Value> {
        map(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx", "args": ["-g", "daemon off;"]}
            ]}}}
        }))
    }

    fn applied() -> Value {
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"web\"}": {".": {}, "f:name": {}, "f:image": {}, "f:args": {}}
            }}}}
        })
    }

    #[test]
    fn what_the_operator_applied_covers_its_intent() {
        assert!(covers(&applied(), &deployment()));
    }

    #[test]
    fn a_field_taken_or_removed_by_someone_else_is_drift() {
        // `kubectl scale` took replicas.
        let mut taken = applied();
        taken["f:spec"]
            .as_object_mut()
            .unwrap()
            .remove("f:replicas");
        assert!(!covers(&taken, &deployment()));
        // Someone set another image: the element's image is no longer ours.
        let mut image = applied();
        image["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]
            .as_object_mut()
            .unwrap()
            .remove("f:image");
        assert!(!covers(&image, &deployment()));
        // The container was removed, and with it the element's entry.
        let mut gone = applied();
        gone["f:spec"]["f:template"]["f:spec"]["f:containers"] = json!({});
        assert!(
            covers(&gone, &deployment()),
            "an empty entry is an atomic list"
        );
        gone["f:spec"]["f:template"]["f:spec"]
            .as_object_mut()
            .unwrap()
            .remove("f:containers");
        assert!(!covers(&gone, &deployment()));
    }

    #[test]
    fn an_entry_without_members_owns_its_value_whole() {
        let intent = map(json!({"metadata": {"name": "c", "ownerReferences": [
            {"apiVersion": "x/v1", "kind": "Base", "name": "b", "uid": "u1", "controller": true}
        ]}}));
        let fields =
            json!({"f:metadata": {"f:ownerReferences": {".": {}, "k:{\"uid\":\"u1\"}": {}}}});
        assert!(covers(&fields, &intent));
        let other =
            json!({"f:metadata": {"f:ownerReferences": {".": {}, "k:{\"uid\":\"u2\"}": {}}}});
        assert!(!covers(&other, &intent));
    }

    #[test]
    fn a_new_intent_field_is_not_covered_until_applied() {
        let mut intent = deployment();
        intent["spec"]["paused"] = json!(true);
        assert!(!covers(&applied(), &intent));
    }
}

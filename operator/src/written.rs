//! What the operator last wrote to each object's status, and which changes
//! to an object wake the controller.
//!
//! The controller is woken by a spec change (`metadata.generation`), not by
//! status writes: its own would loop. But a status the operator owns can be
//! changed by someone else: a replica that was not the leader, an old
//! leader that had not yet noticed, a person with `kubectl edit`. So the
//! operator remembers a fingerprint of the part it wrote (implementation,
//! plugin, observed generation, conditions without their timestamps) and an
//! object whose part differs from it is reconciled, and so repaired. Its own
//! writes match what it remembers, and wake nothing.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

/// A fingerprint of the operator's part of a status.
pub fn fingerprint(status: Option<&Value>) -> u64 {
    let mut hasher = DefaultHasher::new();
    let field = |key: &str| status.and_then(|s| s.get(key)).map(Value::to_string);
    field("implementation").hash(&mut hasher);
    field("plugin").hash(&mut hasher);
    field("observedGeneration").hash(&mut hasher);
    let mut conditions: Vec<Vec<Option<String>>> = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            ["type", "status", "reason", "message", "observedGeneration"]
                .iter()
                .map(|k| c.get(*k).map(Value::to_string))
                .collect()
        })
        .collect();
    conditions.sort();
    conditions.hash(&mut hasher);
    hasher.finish()
}

/// What is known of one object.
#[derive(Debug, Default)]
struct Seen {
    /// The last generation seen.
    generation: Option<i64>,
    /// The fingerprint of the status last written.
    written: Option<u64>,
}

/// Per object (by uid): what was seen and written.
#[derive(Debug, Default)]
pub struct Written {
    objects: Mutex<HashMap<String, Seen>>,
}

impl Written {
    /// Remembers that `status` (as sent) was written to `obj`.
    pub fn record(&self, obj: &DynamicObject, status: &Value) {
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        let entry = objects.entry(obj.uid().unwrap_or_default()).or_default();
        entry.written = Some(fingerprint(Some(status)));
    }

    /// Forgets every object, so that each wakes the controller once more:
    /// a new term as leader starts this way.
    pub fn clear(&self) {
        self.objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Forgets a deleted object.
    pub fn forget(&self, obj: &DynamicObject) {
        self.objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&obj.uid().unwrap_or_default());
    }

    /// Whether this version of `obj` needs a reconcile: its generation is
    /// new, or the operator's part of its status is not what the operator
    /// last wrote.
    pub fn wakes(&self, obj: &DynamicObject) -> bool {
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        let entry = objects.entry(obj.uid().unwrap_or_default()).or_default();
        let generation = obj.metadata.generation;
        if entry.generation != generation || entry.generation.is_none() {
            entry.generation = generation;
            return true;
        }
        match entry.written {
            Some(written) => fingerprint(obj.data.get("status")) != written,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(generation: i64, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1", "kind": "T",
            "metadata": {"name": "t", "namespace": "ns", "uid": "u1", "generation": generation},
            "status": status,
        }))
        .unwrap()
    }

    fn ours() -> Value {
        json!({
            "implementation": "SQLite", "plugin": "sqlite", "observedGeneration": 1,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
            ],
        })
    }

    #[test]
    fn a_new_generation_wakes_and_our_own_write_does_not() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        written.record(&obj(1, json!({})), &ours());
        // Our write comes back with the plugin's fields and a new timestamp.
        let mut echoed = ours();
        echoed["rows"] = json!(3);
        echoed["conditions"][0]["lastTransitionTime"] = json!("2026-01-02T00:00:00Z");
        assert!(!written.wakes(&obj(1, echoed)));
        assert!(written.wakes(&obj(2, ours())));
    }

    #[test]
    fn someone_else_changing_our_part_wakes_it() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        written.record(&obj(1, json!({})), &ours());
        let mut rogue = ours();
        rogue["conditions"][0]["status"] = json!("False");
        rogue["conditions"][0]["reason"] = json!("PluginUnavailable");
        assert!(written.wakes(&obj(1, rogue)));
        let mut moved = ours();
        moved["plugin"] = json!("aaa-evil");
        assert!(written.wakes(&obj(1, moved)));
    }

    #[test]
    fn objects_we_never_wrote_wake_only_on_generation() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({"anything": 1}))));
        assert!(!written.wakes(&obj(1, json!({"anything": 2}))));
    }

    #[test]
    fn after_clear_every_object_wakes_once_more() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        written.record(&obj(1, json!({})), &ours());
        assert!(!written.wakes(&obj(1, ours())), "our own write");
        written.clear();
        assert!(written.wakes(&obj(1, ours())), "a new term: once more");
        assert!(!written.wakes(&obj(1, ours())), "and then not again");
    }
}

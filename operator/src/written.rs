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
//!
//! One reconcile writes the status more than once (the choice, then the
//! outcome), and the watch can deliver the echo of an earlier write after
//! the later one was sent: under load, a reconcile outran its own echoes,
//! and the stale one woke the object for a second plugin call. So every
//! write not yet echoed is remembered, in order. A watch delivers one
//! object's versions in order, so the echo of write *k* means that the
//! writes before it will not be seen again: they are forgotten then.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

/// A fingerprint of the operator's part of a status.
pub(crate) fn fingerprint(status: Option<&Value>) -> u64 {
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

/// How many writes not yet echoed are remembered per object. A reconcile
/// writes at most three times; older entries can only be writes whose
/// echo was missed (a failed write, a relist), and are dropped first.
const UNECHOED: usize = 8;

/// How long after its last status write an object's cache is taken to be
/// behind it ([`Written::behind`]): an echo comes within a second or two; a
/// write whose echo never comes (one the API server refused after it was
/// remembered, or missed in a relist) must not hold the object longer.
const BEHIND_FOR: Duration = Duration::from_secs(10);

/// What is known of one object.
#[derive(Debug, Default)]
struct Seen {
    /// When the operator last wrote its status.
    last_write: Option<Instant>,
    /// The last generation seen.
    generation: Option<i64>,
    /// Fingerprints of the statuses written and not yet seen on the watch,
    /// oldest first; the last one is what the operator last wrote.
    written: VecDeque<u64>,
}

/// Per object (by uid): what was seen and written.
#[derive(Debug, Default)]
pub(crate) struct Written {
    objects: Mutex<HashMap<String, Seen>>,
}

impl Written {
    /// Remembers that `status` (as sent) was written to `obj`.
    pub(crate) fn record(&self, obj: &DynamicObject, status: &Value) {
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        let entry = objects.entry(obj.uid().unwrap_or_default()).or_default();
        let written = fingerprint(Some(status));
        entry.last_write = Some(Instant::now());
        if entry.written.back() != Some(&written) {
            if entry.written.len() == UNECHOED {
                entry.written.pop_front();
            }
            entry.written.push_back(written);
        }
    }

    /// Forgets the write of `status` to `obj` just remembered: the API
    /// server refused it, so no echo of it will come.
    pub(crate) fn refused(&self, obj: &DynamicObject, status: &Value) {
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = objects.get_mut(&obj.uid().unwrap_or_default())
            && entry.written.back() == Some(&fingerprint(Some(status)))
        {
            entry.written.pop_back();
        }
    }

    /// Remembers that a write of `obj`'s metadata (the record of its
    /// choice and finalizer) will be echoed with `status`, its status as it
    /// is: that echo is the operator's own, and wakes nothing. It is the
    /// oldest of the writes not echoed yet, never the last status written.
    pub(crate) fn expect_echo(&self, obj: &DynamicObject, status: &Value) {
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        let entry = objects.entry(obj.uid().unwrap_or_default()).or_default();
        let echo = fingerprint(Some(status));
        if !entry.written.contains(&echo) {
            if entry.written.len() == UNECHOED {
                entry.written.pop_back();
            }
            entry.written.push_front(echo);
        }
    }

    /// Forgets every object, so that each wakes the controller once more:
    /// a new term as leader starts this way.
    pub(crate) fn clear(&self) {
        self.objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Forgets a deleted object.
    pub(crate) fn forget(&self, obj: &DynamicObject) {
        self.objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&obj.uid().unwrap_or_default());
    }

    /// Whether the cached `obj` is behind a status this process wrote: its
    /// status is one of the writes not yet echoed, but not the last one
    /// (a later write was sent after it). A reconcile from it would act on
    /// what the operator has already replaced.
    pub(crate) fn behind(&self, obj: &DynamicObject) -> bool {
        let objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = objects.get(&obj.uid().unwrap_or_default()) else {
            return false;
        };
        let recent = entry.last_write.is_some_and(|at| at.elapsed() < BEHIND_FOR);
        let seen = fingerprint(obj.data.get("status"));
        recent && entry.written.back() != Some(&seen) && entry.written.contains(&seen)
    }

    /// Whether this version of `obj` needs a reconcile: its generation is
    /// new, or the operator's part of its status is none of the writes the
    /// operator has made and not yet seen echoed (someone else wrote it).
    pub(crate) fn wakes(&self, obj: &DynamicObject) -> bool {
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        let entry = objects.entry(obj.uid().unwrap_or_default()).or_default();
        let generation = obj.metadata.generation;
        let new_generation = entry.generation != generation || entry.generation.is_none();
        entry.generation = generation;
        if entry.written.is_empty() {
            return new_generation;
        }
        let seen = fingerprint(obj.data.get("status"));
        let ours = match entry.written.iter().position(|w| *w == seen) {
            Some(echoed) => {
                // Writes before the echoed one are behind it on the watch.
                entry.written.drain(..echoed);
                true
            }
            None => false,
        };
        new_generation || !ours
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

    fn pending() -> Value {
        json!({
            "implementation": "SQLite", "plugin": "sqlite", "observedGeneration": 1,
            "conditions": [
                {"type": "Ready", "status": "Unknown", "reason": "Pending", "message": "calling plugin sqlite",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
            ],
        })
    }

    #[test]
    fn a_late_echo_of_an_earlier_write_does_not_wake() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        // One reconcile: the choice, then the outcome, both sent before the
        // watch delivers either.
        written.record(&obj(1, json!({})), &pending());
        written.record(&obj(1, json!({})), &ours());
        assert!(!written.wakes(&obj(1, pending())), "the choice's echo");
        assert!(
            !written.wakes(&obj(1, pending())),
            "a second version with the same status (e.g. the finalizer added)"
        );
        assert!(!written.wakes(&obj(1, ours())), "the outcome's echo");
        // Once the outcome is echoed, the earlier status can only come back
        // from someone else writing it.
        assert!(written.wakes(&obj(1, pending())));
    }

    #[test]
    fn a_write_not_echoed_is_forgotten_after_a_later_echo() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        // A write that failed is never echoed.
        written.record(&obj(1, json!({})), &pending());
        written.record(&obj(1, json!({})), &ours());
        assert!(!written.wakes(&obj(1, ours())));
        assert!(written.wakes(&obj(1, pending())));
    }

    #[test]
    fn a_cached_status_of_an_earlier_write_is_behind() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        assert!(!written.behind(&obj(1, json!({}))), "nothing written");
        written.record(&obj(1, json!({})), &pending());
        assert!(!written.behind(&obj(1, pending())), "the last write");
        written.record(&obj(1, json!({})), &ours());
        assert!(
            written.behind(&obj(1, pending())),
            "replaced by a later write"
        );
        assert!(!written.behind(&obj(1, ours())));
        assert!(
            !written.behind(&obj(1, json!({"implementation": "X"}))),
            "someone else's status is not ours to call behind"
        );
    }

    #[test]
    fn the_echo_of_a_record_is_ours_and_never_the_last_write() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        written.record(&obj(1, json!({})), &ours());
        // A second reconcile from a stale copy records its metadata again.
        written.expect_echo(&obj(1, json!({})), &json!({}));
        assert!(!written.behind(&obj(1, ours())), "the status last written");
        assert!(written.behind(&obj(1, json!({}))));
        assert!(!written.wakes(&obj(1, json!({}))), "the record's echo");
        assert!(!written.wakes(&obj(1, ours())));
    }

    #[test]
    fn a_refused_write_is_not_waited_for() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        written.record(&obj(1, json!({})), &pending());
        written.record(&obj(1, json!({})), &ours());
        written.refused(&obj(1, json!({})), &ours());
        assert!(
            !written.behind(&obj(1, pending())),
            "its last write is the one that went out"
        );
    }

    #[test]
    fn only_the_latest_writes_are_remembered() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        written.record(&obj(1, json!({})), &pending());
        for i in 0..UNECHOED {
            let mut status = ours();
            status["conditions"][0]["message"] = json!(format!("write {i}"));
            written.record(&obj(1, json!({})), &status);
        }
        assert!(
            written.wakes(&obj(1, pending())),
            "the oldest write was dropped"
        );
    }

    #[test]
    fn a_new_generation_wakes_even_with_our_status() {
        let written = Written::default();
        assert!(written.wakes(&obj(1, json!({}))));
        written.record(&obj(1, json!({})), &ours());
        assert!(written.wakes(&obj(2, ours())));
        assert!(!written.wakes(&obj(2, ours())));
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

//! What each base object last saw of its extensions.
//!
//! Edge-triggered watching ("an extension changed, wake its bases") loses
//! edits: a change made before the watch has listed, or while it relists
//! after a disconnect, arrives as part of a list, not as a change. So the
//! bases are woken level-triggered instead: every base records the version
//! of each extension it was sent, and whenever the watch learns the state of
//! an extension (an event, or the end of a list) the bases that saw
//! something else are woken. The table here is that record; it is pure data
//! so that the rules can be tested without a cluster.

use std::collections::HashMap;
use std::hash::Hash;

use kube::ResourceExt;
use kube::api::DynamicObject;

/// One extension object, by kind and place.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ExtKey {
    pub(crate) group: String,
    pub(crate) kind: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
}

/// The version of an extension as far as a plugin is concerned: the
/// object's identity and its spec generation.
///
/// The plugin's own status writes (made on every reconcile) change neither,
/// so they wake nobody. Kinds without `metadata.generation` (most built-in
/// kinds) fall back to the resource version, which such kinds only change on
/// a real edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    uid: String,
    generation: String,
}

impl Version {
    pub(crate) fn of(obj: &DynamicObject) -> Self {
        let generation = match obj.metadata.generation {
            Some(generation) => generation.to_string(),
            None => format!("rv:{}", obj.resource_version().unwrap_or_default()),
        };
        Self {
            uid: obj.uid().unwrap_or_default(),
            generation,
        }
    }
}

/// What a base saw of one extension, or what the watch knows of it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The kind's watch had not listed yet: nothing is known.
    Unsynced,
    /// It did not exist.
    Absent,
    /// It existed at this version.
    At(Version),
}

/// Which base saw which version of which extension.
#[derive(Debug)]
pub(crate) struct SeenTable<B> {
    by_extension: HashMap<ExtKey, HashMap<B, Seen>>,
    by_base: HashMap<B, Vec<ExtKey>>,
}

impl<B> Default for SeenTable<B> {
    fn default() -> Self {
        Self {
            by_extension: HashMap::new(),
            by_base: HashMap::new(),
        }
    }
}

impl<B: Clone + Eq + Hash> SeenTable<B> {
    /// Replaces what `base` saw with `seen`.
    pub(crate) fn record(&mut self, base: &B, seen: &[(ExtKey, Seen)]) {
        self.forget(base);
        for (key, version) in seen {
            self.by_extension
                .entry(key.clone())
                .or_default()
                .insert(base.clone(), version.clone());
        }
        self.by_base
            .insert(base.clone(), seen.iter().map(|(k, _)| k.clone()).collect());
    }

    /// Forgets a base (deleted, or finalized).
    pub(crate) fn forget(&mut self, base: &B) {
        for key in self.by_base.remove(base).into_iter().flatten() {
            if let Some(bases) = self.by_extension.get_mut(&key) {
                bases.remove(base);
                if bases.is_empty() {
                    self.by_extension.remove(&key);
                }
            }
        }
    }

    /// The bases that saw something other than `current` of `key`. An
    /// unsynced `current` says nothing, so it makes nobody stale.
    pub(crate) fn stale(&self, key: &ExtKey, current: &Seen) -> Vec<B> {
        if *current == Seen::Unsynced {
            return Vec::new();
        }
        self.by_extension
            .get(key)
            .into_iter()
            .flatten()
            .filter(|(_, seen)| *seen != current)
            .map(|(base, _)| base.clone())
            .collect()
    }

    /// Every extension of `group`/`kind` that some base references.
    pub(crate) fn keys_of_kind(&self, group: &str, kind: &str) -> Vec<ExtKey> {
        self.by_extension
            .keys()
            .filter(|k| k.group == group && k.kind == kind)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> ExtKey {
        ExtKey {
            group: "myorg.org".into(),
            kind: "PgExt".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn at(uid: &str, generation: i64) -> Seen {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1", "kind": "PgExt",
            "metadata": {"name": "x", "uid": uid, "generation": generation, "resourceVersion": "7"},
        }))
        .unwrap();
        Seen::At(Version::of(&obj))
    }

    #[test]
    fn a_base_that_saw_the_current_version_is_not_stale() {
        let mut table = SeenTable::default();
        table.record(&"base", &[(key("users"), at("u1", 1))]);
        assert!(table.stale(&key("users"), &at("u1", 1)).is_empty());
    }

    #[test]
    fn a_newer_generation_a_recreation_or_a_deletion_makes_it_stale() {
        let mut table = SeenTable::default();
        table.record(&"base", &[(key("users"), at("u1", 1))]);
        assert_eq!(table.stale(&key("users"), &at("u1", 2)), vec!["base"]);
        assert_eq!(table.stale(&key("users"), &at("u2", 1)), vec!["base"]);
        assert_eq!(table.stale(&key("users"), &Seen::Absent), vec!["base"]);
    }

    #[test]
    fn a_base_that_resolved_before_the_watch_synced_is_stale_once_it_has() {
        let mut table = SeenTable::default();
        table.record(&"base", &[(key("users"), Seen::Unsynced)]);
        assert!(table.stale(&key("users"), &Seen::Unsynced).is_empty());
        assert_eq!(table.stale(&key("users"), &at("u1", 1)), vec!["base"]);
        assert_eq!(table.stale(&key("users"), &Seen::Absent), vec!["base"]);
    }

    #[test]
    fn a_missing_extension_that_appears_wakes_the_base() {
        let mut table = SeenTable::default();
        table.record(&"base", &[(key("users"), Seen::Absent)]);
        assert!(table.stale(&key("users"), &Seen::Absent).is_empty());
        assert_eq!(table.stale(&key("users"), &at("u1", 1)), vec!["base"]);
    }

    #[test]
    fn status_writes_do_not_change_the_version() {
        let obj = |rv: &str| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "myorg.org/v1", "kind": "PgExt",
                "metadata": {"name": "x", "uid": "u1", "generation": 3, "resourceVersion": rv},
            }))
            .unwrap()
        };
        assert_eq!(Version::of(&obj("10")), Version::of(&obj("11")));
    }

    #[test]
    fn kinds_without_generation_use_the_resource_version() {
        let obj = |rv: &str| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "x", "uid": "u1", "resourceVersion": rv},
            }))
            .unwrap()
        };
        assert_ne!(Version::of(&obj("10")), Version::of(&obj("11")));
    }

    #[test]
    fn record_replaces_and_forget_removes() {
        let mut table = SeenTable::default();
        table.record(
            &"base",
            &[(key("a"), Seen::Absent), (key("b"), Seen::Absent)],
        );
        table.record(&"base", &[(key("b"), Seen::Absent)]);
        assert!(table.stale(&key("a"), &at("u", 1)).is_empty());
        assert_eq!(table.keys_of_kind("myorg.org", "PgExt"), vec![key("b")]);
        table.forget(&"base");
        assert!(table.stale(&key("b"), &at("u", 1)).is_empty());
        assert!(table.keys_of_kind("myorg.org", "PgExt").is_empty());
    }

    #[test]
    fn every_base_of_an_extension_is_judged_on_its_own() {
        let mut table = SeenTable::default();
        table.record(&"old", &[(key("users"), at("u1", 1))]);
        table.record(&"new", &[(key("users"), at("u1", 2))]);
        assert_eq!(table.stale(&key("users"), &at("u1", 2)), vec!["old"]);
    }
}

//! `Default` patches: the rule on their paths, and their composition.
//!
//! A plugin may default the spec and the metadata's labels and annotations,
//! nothing else (`kplug_proto::limits::DEFAULT_PATCH_PREFIXES`): not the
//! status the operator owns, not the name, not another plugin's finalizer.
//! A patch that breaks the rule is refused as a whole, as an invalid
//! response. Accepted patches are applied in order, each to the object as
//! the ones before left it, so their concatenation is the one patch the API
//! server applies.

use json_patch::{Patch, PatchOperation};
use kplug_proto::limits::{MAX_PATCH_BYTES, default_patch_path_allowed};
use serde_json::Value;

/// Decodes a `DefaultResponse.patch` and checks its paths. Empty: nothing.
///
/// # Errors
/// Why the patch is refused, for the person who applied the object.
pub(crate) fn decode(bytes: &[u8]) -> Result<Patch, String> {
    if bytes.is_empty() {
        return Ok(Patch(Vec::new()));
    }
    if bytes.len() > MAX_PATCH_BYTES {
        return Err(format!(
            "its Default patch has {} bytes, more than the {MAX_PATCH_BYTES} the operator accepts",
            bytes.len()
        ));
    }
    let patch: Patch = serde_json::from_slice(bytes)
        .map_err(|e| format!("its Default patch is not a JSON Patch (RFC 6902): {e}"))?;
    for op in &patch.0 {
        for path in paths(op) {
            if !default_patch_path_allowed(path) {
                return Err(format!(
                    "its Default patch touches {path:?}; a default may only change /spec, /metadata/labels or /metadata/annotations, so the whole patch was refused"
                ));
            }
        }
    }
    Ok(patch)
}

/// Every path an operation reads or writes (`from` too, for move and copy:
/// moving `/status/x` into the spec would read what the plugin may not).
fn paths(op: &PatchOperation) -> Vec<&str> {
    let mut paths = vec![op.path().as_str()];
    match op {
        PatchOperation::Move(m) => paths.push(m.from.as_str()),
        PatchOperation::Copy(c) => paths.push(c.from.as_str()),
        _ => {}
    }
    paths
}

/// The patches of several plugins, applied in order.
#[derive(Debug, Default)]
pub(crate) struct Composed {
    operations: Vec<PatchOperation>,
}

impl Composed {
    /// Applies `patch` to `object` (already patched by the earlier ones)
    /// and keeps it. Nothing is changed when it does not apply.
    ///
    /// # Errors
    /// Why it does not apply (e.g. `add` under a member that is missing).
    pub(crate) fn apply(&mut self, object: &mut Value, patch: Patch) -> Result<(), String> {
        if patch.0.is_empty() {
            return Ok(());
        }
        // json_patch::patch undoes what it did when an operation fails.
        json_patch::patch(object, &patch.0)
            .map_err(|e| format!("its Default patch does not apply to the object: {e}"))?;
        self.operations.extend(patch.0);
        Ok(())
    }

    /// The combined patch, `None` when no plugin changed anything.
    pub(crate) fn into_patch(self) -> Option<Patch> {
        (!self.operations.is_empty()).then_some(Patch(self.operations))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bytes(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn only_the_spec_labels_and_annotations_may_be_patched() {
        for ok in [
            "/spec",
            "/spec/storageEngine",
            "/metadata/labels/app",
            "/metadata/annotations",
        ] {
            decode(&bytes(json!([{"op": "add", "path": ok, "value": 1}]))).unwrap();
        }
        for bad in [
            "/status/x",
            "/metadata/name",
            "/specx",
            "",
            "/metadata/finalizers/0",
        ] {
            let error = decode(&bytes(json!([
                {"op": "add", "path": "/spec/a", "value": 1},
                {"op": "add", "path": bad, "value": 2},
            ])))
            .unwrap_err();
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
        // Reading from elsewhere is refused too.
        let error = decode(&bytes(
            json!([{"op": "copy", "from": "/status/secret", "path": "/spec/x"}]),
        ))
        .unwrap_err();
        assert!(error.contains("/status/secret"), "{error}");
        let error = decode(&bytes(
            json!([{"op": "move", "from": "/metadata/name", "path": "/spec/x"}]),
        ))
        .unwrap_err();
        assert!(error.contains("/metadata/name"), "{error}");
    }

    #[test]
    fn malformed_and_huge_patches_are_refused_and_empty_is_nothing() {
        assert!(decode(b"").unwrap().0.is_empty());
        assert!(
            decode(b"{\"op\":\"add\"}")
                .unwrap_err()
                .contains("not a JSON Patch")
        );
        assert!(
            decode(b"not json")
                .unwrap_err()
                .contains("not a JSON Patch")
        );
        let huge = vec![b' '; MAX_PATCH_BYTES + 1];
        assert!(decode(&huge).unwrap_err().contains("bytes"));
    }

    #[test]
    fn patches_compose_in_order_and_a_failing_one_changes_nothing() {
        let mut object = json!({"metadata": {"name": "t"}, "spec": {"a": 1}});
        let mut composed = Composed::default();
        let first = decode(&bytes(
            json!([{"op": "add", "path": "/spec/engine", "value": "InnoDB"}]),
        ))
        .unwrap();
        composed.apply(&mut object, first).unwrap();
        // The second plugin sees the first one's default.
        let second = decode(&bytes(json!([
            {"op": "test", "path": "/spec/engine", "value": "InnoDB"},
            {"op": "add", "path": "/spec/b", "value": 2},
        ])))
        .unwrap();
        composed.apply(&mut object, second).unwrap();
        let broken = decode(&bytes(json!([
            {"op": "add", "path": "/spec/c", "value": 3},
            {"op": "add", "path": "/metadata/labels/x", "value": "y"},
        ])))
        .unwrap();
        let error = composed.apply(&mut object, broken).unwrap_err();
        assert!(error.contains("does not apply"), "{error}");
        assert_eq!(object["spec"], json!({"a": 1, "engine": "InnoDB", "b": 2}));
        // The combined patch does to the original what the steps did.
        let combined = composed.into_patch().unwrap();
        let mut original = json!({"metadata": {"name": "t"}, "spec": {"a": 1}});
        json_patch::patch(&mut original, &combined.0).unwrap();
        assert_eq!(original, object);
        assert!(Composed::default().into_patch().is_none());
    }
}

//! Multi-document YAML as JSON values, and small accessors for Kubernetes
//! objects.

use anyhow::{Context, Result};
use serde_json::Value;

/// Parses a multi-document YAML stream (as `kustomize build` prints) into
/// one JSON value per non-empty document.
pub fn documents(yaml: &str) -> Result<Vec<Value>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).context("parsing YAML")?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// `kind` of an object, or `""`.
pub fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or("")
}

/// `metadata.name` of an object, or `""`.
pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or("")
}

/// `Kind/name` of an object, for messages.
pub fn describe(object: &Value) -> String {
    format!("{}/{}", kind(object), name(object))
}

/// The one object of `kind` named `name`.
///
/// # Panics
///
/// When there is not exactly one.
pub fn the<'a>(objects: &'a [Value], kind_: &str, name_: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| kind(o) == kind_ && name(o) == name_)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {kind_}/{name_}, found {}; objects: {:?}",
        found.len(),
        objects.iter().map(describe).collect::<Vec<_>>()
    );
    found[0]
}

/// The elements of the array at `pointer` (none when absent).
pub fn items<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A kplug base object's readiness, from its JSON (`DynamicObject::data`):
/// the `Ready` condition's status and observedGeneration (-1 when absent),
/// and `status.implementation`.
pub fn readiness(object: &Value) -> (String, i64, String) {
    let ready = items(object, "/status/conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or_default();
    (
        ready["status"].as_str().unwrap_or_default().to_owned(),
        ready["observedGeneration"].as_i64().unwrap_or(-1),
        object["status"]["implementation"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_documents_and_skips_empty_ones() {
        let docs = documents("---\nkind: A\nmetadata: {name: a}\n---\n---\nkind: B\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(describe(&docs[0]), "A/a");
        assert_eq!(kind(&docs[1]), "B");
    }

    #[test]
    fn items_of_a_missing_array_are_empty() {
        let v = json!({"a": [1, 2]});
        assert_eq!(items(&v, "/a").len(), 2);
        assert!(items(&v, "/b").is_empty());
    }

    #[test]
    #[should_panic(expected = "expected exactly one ConfigMap/x")]
    fn the_names_what_is_missing() {
        the(
            &[json!({"kind": "Secret", "metadata": {"name": "x"}})],
            "ConfigMap",
            "x",
        );
    }
}

//! Checking the children a plugin desires (`ReconcileResponse.children`)
//! as a whole answer: each one a JSON object with `apiVersion`, `kind` and
//! a valid `metadata.name`, and no two with the same identity. What the
//! operator then allows of them (kinds, namespaces, sizes) is decided when
//! they are applied (the operator's `children` module), one child at a time.

use std::fmt;

use kplug_proto::v1;
use serde_json::{Map, Value};

/// A child's identity: group, kind and name (its namespace is always the
/// base object's; its version does not count, so a new version is the
/// same child, and a rename is a delete and a create).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChildKey {
    /// API group; empty for the core group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

impl fmt::Display for ChildKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{}.{} {}", self.kind, self.group, self.name)
        }
    }
}

/// One child a plugin desires, as it answered it.
#[derive(Clone, Debug, PartialEq)]
pub struct Intent {
    /// Its identity.
    pub key: ChildKey,
    /// Its version, from `apiVersion`.
    pub version: String,
    /// The object as the plugin answered it.
    pub object: Map<String, Value>,
    /// Its size as JSON, as the plugin sent it.
    pub bytes: usize,
}

impl Intent {
    /// `apiVersion`, as the object says.
    pub fn api_version(&self) -> String {
        if self.key.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.key.group, self.version)
        }
    }
}

/// Checks the children of an answer. `None` (no children message) stays
/// `None`: the children are left as they are.
///
/// # Errors
/// What is wrong, naming the child, for the `InvalidPluginResponse`
/// condition: the answer is then not used at all.
pub(super) fn check_children(
    children: Option<v1::Children>,
) -> Result<Option<Vec<Intent>>, String> {
    let Some(children) = children else {
        return Ok(None);
    };
    let mut intents: Vec<Intent> = Vec::with_capacity(children.objects.len());
    for (i, raw) in children.objects.iter().enumerate() {
        let intent = intent(raw).map_err(|problem| format!("child #{i}: {problem}"))?;
        if intents.iter().any(|other| other.key == intent.key) {
            return Err(format!(
                "child #{i}: {} is desired twice; each child appears once",
                intent.key
            ));
        }
        intents.push(intent);
    }
    Ok(Some(intents))
}

fn intent(raw: &[u8]) -> Result<Intent, String> {
    let object = match serde_json::from_slice::<Value>(raw) {
        Ok(Value::Object(object)) => object,
        Ok(_) => return Err("not a JSON object".into()),
        Err(e) => return Err(format!("not JSON: {e}")),
    };
    let text = |field: &str| object.get(field).and_then(Value::as_str).unwrap_or("");
    let api_version = text("apiVersion");
    let kind = text("kind");
    if api_version.is_empty() || kind.is_empty() {
        return Err("apiVersion and kind are required, e.g. \"v1\" and \"ConfigMap\"".into());
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    if version.is_empty() || group.contains('/') {
        return Err(format!(
            "apiVersion {api_version:?} is not <group>/<version> or <version>"
        ));
    }
    let name = object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(problem) = name_problem(name) {
        return Err(format!("{kind} {name:?}: metadata.name {problem}"));
    }
    Ok(Intent {
        key: ChildKey {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
        },
        version: version.to_owned(),
        bytes: raw.len(),
        object,
    })
}

/// Why `name` is not a Kubernetes object name (a DNS subdomain), if it is
/// not. Kinds with stricter names (a Service's is a DNS label) are held to
/// them by the API server when the child is applied.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is required (generateName is not supported: a child's name is its identity)");
    }
    if name.len() > 253 {
        return Some("is longer than 253 characters");
    }
    let valid = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!valid).then_some(
        "must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn children(objects: &[&str]) -> Option<v1::Children> {
        Some(v1::Children {
            objects: objects.iter().map(|o| o.as_bytes().to_vec()).collect(),
        })
    }

    #[test]
    fn no_message_leaves_the_children_and_an_empty_one_means_none() {
        assert_eq!(check_children(None).unwrap(), None);
        assert_eq!(check_children(children(&[])).unwrap(), Some(vec![]));
    }

    #[test]
    fn children_are_named_by_group_kind_and_name() {
        let got = check_children(children(&[
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"}}"#,
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(got[0].key.to_string(), "ConfigMap a");
        assert_eq!(got[1].key.to_string(), "Deployment.apps a");
        assert_eq!(got[1].api_version(), "apps/v1");
    }

    #[test]
    fn a_malformed_or_repeated_child_makes_the_answer_invalid() {
        for (objects, expected) in [
            (vec!["[1]"], "child #0: not a JSON object"),
            (vec!["{"], "child #0: not JSON"),
            (
                vec![r#"{"kind":"ConfigMap","metadata":{"name":"a"}}"#],
                "apiVersion and kind are required",
            ),
            (
                vec![r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#],
                "metadata.name is required",
            ),
            (
                vec![r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"A_b"}}"#],
                "must be lowercase",
            ),
            (
                vec![
                    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
                    r#"{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"a"}}"#,
                ],
                "child #1: ConfigMap a is desired twice",
            ),
        ] {
            let error = check_children(children(&objects)).unwrap_err();
            assert!(error.contains(expected), "{objects:?}: {error}");
        }
    }
}

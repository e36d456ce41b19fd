//! The objects a plugin's response is checked against.

use std::sync::LazyLock;

use kube::core::DynamicObject;
use serde_json::json;

/// What a plugin's response is checked against: the base object, and the
/// objects that may be sent to it (a prefix of them is, per input).
pub struct Fixture {
    /// The base object.
    pub base: DynamicObject,
    /// Candidates for `sent`.
    pub objects: Vec<DynamicObject>,
}

fn object(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> DynamicObject {
    let mut metadata =
        json!({ "name": name, "uid": format!("uid-{kind}-{name}"), "resourceVersion": "7" });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    serde_json::from_value(json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        "spec": {},
    }))
    .expect("a valid DynamicObject")
}

/// The objects of every response target.
pub static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| Fixture {
    base: object("myorg.org/v1alpha1", "DatabaseTable", "users", Some("ns")),
    objects: vec![
        object(
            "myorg.org/v1alpha1",
            "DatabaseTablePostgreSqlExtension",
            "users",
            Some("ns"),
        ),
        object(
            "myorg.org/v1alpha1",
            "DatabaseTableMariaDbExtension",
            "users",
            Some("ns"),
        ),
        object(
            "myorg.org/v1beta1",
            "DatabaseTablePostgreSqlExtension",
            "orders",
            Some("ns"),
        ),
        object("v1", "ConfigMap", "users", Some("ns")),
        object("other.org/v1", "Thing", "users", None),
    ],
});

impl Fixture {
    /// The objects sent: all of them less `fewer % (len + 1)`.
    pub fn sent(&self, fewer: u8) -> &[DynamicObject] {
        let n = self.objects.len();
        &self.objects[..n - usize::from(fewer) % (n + 1)]
    }
}

//! The extensions list of a base object: reading and checking its entries.

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::core::GroupVersionKind;
use serde_json::Value;

/// One entry of the extensions list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ExtensionRef {
    /// `group/version`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

impl ExtensionRef {
    /// The API group (empty for the core group).
    pub(crate) fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }

    pub(crate) fn gvk(&self) -> GroupVersionKind {
        let (group, version) = self
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &self.api_version));
        GroupVersionKind::gvk(group, version, &self.kind)
    }
}

impl std::fmt::Display for ExtensionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.api_version, self.kind, self.name)
    }
}

/// Reads the references at `path` (e.g. `["spec", "extensions"]`) of `obj`.
/// A missing field means no extensions.
///
/// # Errors
/// A message naming the field and the entry when the list is malformed.
pub(crate) fn references(
    obj: &DynamicObject,
    path: &[String],
) -> Result<Vec<ExtensionRef>, String> {
    let field = path.join(".");
    let mut value = &obj.data;
    for key in path {
        match value.get(key) {
            Some(v) => value = v,
            None => return Ok(Vec::new()),
        }
    }
    let Some(items) = value.as_array() else {
        if value.is_null() {
            return Ok(Vec::new());
        }
        return Err(format!("{field} must be a list of object references"));
    };
    let base_ns = obj.namespace();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let get = |key: &str| item.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
            let (Some(api_version), Some(kind), Some(name)) =
                (get("apiVersion"), get("kind"), get("name"))
            else {
                return Err(format!(
                    "{field}[{i}] needs apiVersion, kind and name"
                ));
            };
            if let Some(ns) = get("namespace")
                && Some(ns) != base_ns.as_deref()
            {
                return Err(format!(
                    "{field}[{i}] ({kind} {name}) is in namespace {ns}; extensions must be in the base object's namespace"
                ));
            }
            Ok(ExtensionRef {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                name: name.to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(data: Value) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": "users", "namespace": "ns"},
        }))
        .unwrap();
        o.data = data;
        o
    }

    fn path() -> Vec<String> {
        vec!["spec".into(), "extensions".into()]
    }

    #[test]
    fn reads_references() {
        let o = obj(json!({"spec": {"extensions": [
            {"apiVersion": "myorg.org/v1alpha1", "kind": "PgExt", "name": "users"},
            {"apiVersion": "myorg.org/v1alpha1", "kind": "MariaExt", "name": "users", "namespace": "ns"},
        ]}}));
        let refs = references(&o, &path()).unwrap();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].group(), "myorg.org");
        assert_eq!(refs[1].kind, "MariaExt");
    }

    #[test]
    fn missing_field_means_none() {
        assert!(
            references(&obj(json!({"spec": {}})), &path())
                .unwrap()
                .is_empty()
        );
        assert!(references(&obj(json!({})), &path()).unwrap().is_empty());
    }

    #[test]
    fn malformed_entries_are_named() {
        let err = references(
            &obj(json!({"spec": {"extensions": [{"kind": "X"}]}})),
            &path(),
        )
        .unwrap_err();
        assert!(err.contains("spec.extensions[0]"), "{err}");
        let err = references(&obj(json!({"spec": {"extensions": "users"}})), &path()).unwrap_err();
        assert!(err.contains("must be a list"), "{err}");
        let err = references(
            &obj(json!({"spec": {"extensions": [{"apiVersion": "a/v1", "kind": "X", "name": "n", "namespace": "other"}]}})),
            &path(),
        )
        .unwrap_err();
        assert!(err.contains("namespace other"), "{err}");
    }

    #[test]
    fn core_group_api_version() {
        let r = ExtensionRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "x".into(),
        };
        assert_eq!(r.group(), "");
        assert_eq!(r.gvk(), GroupVersionKind::gvk("", "v1", "ConfigMap"));
    }
}

//! The kind the operator manages, from `--resource <group>/<version>/<Kind>`.

use kplug_proto::v1::GroupKind;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};

/// The API of kind `ar` in `namespace`, or across all namespaces without
/// one (a cluster-scoped kind, or an operator that watches them all).
pub(crate) fn api_in(
    client: &kube::Client,
    ar: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// The managed kind, as discovered on the API server.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// How to reach it.
    pub api_resource: ApiResource,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl Target {
    /// Group and kind, as plugins name them in their offers.
    pub(crate) fn group_kind(&self) -> GroupKind {
        GroupKind {
            group: self.api_resource.group.clone(),
            kind: self.api_resource.kind.clone(),
        }
    }

    /// `Kind.group`, for messages.
    pub(crate) fn display(&self) -> String {
        if self.api_resource.group.is_empty() {
            self.api_resource.kind.clone()
        } else {
            format!("{}.{}", self.api_resource.kind, self.api_resource.group)
        }
    }

    /// Finds `gvk` on the API server.
    ///
    /// # Errors
    /// [`crate::Error::Resource`] when the string is malformed, the API
    /// server does not serve that kind, or the kind has no `/status`
    /// subresource.
    pub(crate) async fn discover(
        client: &kube::Client,
        gvk: &GroupVersionKind,
    ) -> Result<Self, crate::Error> {
        let resource = if gvk.group.is_empty() {
            format!("{}/{}", gvk.version, gvk.kind)
        } else {
            format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
        };
        let resource = resource.as_str();
        let (api_resource, caps) = pinned_kind(client, gvk).await.map_err(|e| crate::Error::Resource {
            resource: resource.to_owned(),
            message: format!(
                "the API server does not serve it ({e}); check the spelling (kinds are CamelCase) and that its CRD is installed: kubectl get crd"
            ),
        })?;
        // Everything the operator writes goes to /status; without the
        // subresource every write would fail on every object, forever.
        if !caps
            .subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status")
        {
            return Err(crate::Error::Resource {
                resource: resource.to_owned(),
                message: format!(
                    "{} has no status subresource, and kplug writes conditions and the plugins' status there; add `subresources: {{status: {{}}}}` to version {} in its CRD (spec.versions[].subresources), and keep unknown status fields (x-kubernetes-preserve-unknown-fields: true on status)",
                    api_resource.plural, api_resource.version
                ),
            });
        }
        Ok(Self {
            api_resource,
            namespaced: caps.scope == Scope::Namespaced,
        })
    }
}

/// Parses `<group>/<version>/<Kind>`, or `<version>/<Kind>` for the core
/// group.
///
/// # Errors
/// [`crate::Error::Resource`] with an example of the expected form.
pub(crate) fn parse(resource: &str) -> Result<GroupVersionKind, crate::Error> {
    let bad = |why: &str| crate::Error::Resource {
        resource: resource.to_owned(),
        message: format!(
            "{why}; expected <group>/<version>/<Kind>, e.g. myorg.org/v1alpha1/DatabaseTable"
        ),
    };
    let parts: Vec<&str> = resource.split('/').collect();
    let (group, version, kind) = match parts.as_slice() {
        [group, version, kind] => (*group, *version, *kind),
        [version, kind] => ("", *version, *kind),
        _ => return Err(bad("wrong number of '/'-separated parts")),
    };
    if version.is_empty() || kind.is_empty() {
        return Err(bad("empty version or kind"));
    }
    if !kind.starts_with(|c: char| c.is_ascii_uppercase()) {
        return Err(bad(
            "the kind must be CamelCase (DatabaseTable), not the plural resource name",
        ));
    }
    Ok(GroupVersionKind::gvk(group, version, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_group_version_kind() {
        let gvk = parse("myorg.org/v1alpha1/DatabaseTable").unwrap();
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("myorg.org", "v1alpha1", "DatabaseTable")
        );
        let core = parse("v1/ConfigMap").unwrap();
        assert_eq!(core.group, "");
    }

    #[test]
    fn explains_bad_input() {
        for bad in [
            "DatabaseTable",
            "a/b/c/d",
            "myorg.org/v1/databasetables",
            "myorg.org//X",
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(
                err.contains("expected <group>/<version>/<Kind>"),
                "{bad}: {err}"
            );
        }
    }
}

//! Which child kinds a plugin may have applied: `--child-kinds`, the
//! admin's allow-list, and the kinds that are never allowed whatever it
//! says.

use kube::core::GroupVersionKind;

/// Groups none of whose kinds is ever a child: RBAC (a child could grant
/// the plugin, or anyone, what the operator holds) and admission (a child
/// could switch off the checks that judge the others).
const NEVER_GROUPS: [&str; 3] = [
    "rbac.authorization.k8s.io",
    "admissionregistration.k8s.io",
    "apiregistration.k8s.io",
];

/// Single kinds that are never a child, by group and kind: a
/// ServiceAccount (an identity to run as), a Namespace and a CRD (they
/// change what exists for everyone).
const NEVER_KINDS: [(&str, &str); 3] = [
    ("", "ServiceAccount"),
    ("", "Namespace"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
];

/// Why a kind is never allowed, when it is not.
pub(crate) fn never_allowed(group: &str, kind: &str) -> Option<&'static str> {
    if NEVER_GROUPS.contains(&group) {
        return Some("RBAC, admission and API registration kinds are never applied for a plugin");
    }
    NEVER_KINDS
        .iter()
        .any(|(g, k)| *g == group && *k == kind)
        .then_some("ServiceAccounts, Namespaces and CRDs are never applied for a plugin")
}

/// One `--child-kinds` entry: a kind, for one plugin or for all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildKind {
    /// The plugin it is allowed for; every plugin when `None`.
    pub plugin: Option<String>,
    /// The kind, in the version the operator watches it in.
    pub gvk: GroupVersionKind,
}

/// The child kinds `--child-kinds` allows (none by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildKinds {
    entries: Vec<ChildKind>,
}

impl ChildKinds {
    /// The allow-list of `entries`.
    pub fn new(entries: Vec<ChildKind>) -> Self {
        Self { entries }
    }

    /// Parses one `--child-kinds` value: `[<plugin>=]<apiVersion>/<Kind>`
    /// items separated by commas, e.g. `v1/ConfigMap,apps/v1/Deployment`
    /// or `postgresql=v1/Secret`.
    ///
    /// # Errors
    /// What is wrong with the value, and the expected form.
    pub fn parse(value: &str) -> Result<Vec<ChildKind>, String> {
        value
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                let (plugin, kind) = match item.split_once('=') {
                    Some((plugin, kind)) => (Some(plugin.trim().to_owned()), kind.trim()),
                    None => (None, item),
                };
                if let Some(plugin) = &plugin {
                    kplug_proto::rules::validate_plugin_name(plugin)
                        .map_err(|e| format!("{item}: {e}"))?;
                }
                let gvk = crate::target::parse(kind).map_err(|e| match e {
                    crate::Error::Resource { message, .. } => {
                        format!("{item}: {message} (or [<plugin>=]v1/ConfigMap for the core group)")
                    }
                    other => format!("{item}: {other}"),
                })?;
                if let Some(why) = never_allowed(&gvk.group, &gvk.kind) {
                    return Err(format!("{item}: {why}"));
                }
                Ok(ChildKind { plugin, gvk })
            })
            .collect()
    }

    /// Every kind listed, once, in the order first listed: the kinds the
    /// operator watches.
    pub(crate) fn kinds(&self) -> Vec<GroupVersionKind> {
        let mut kinds: Vec<GroupVersionKind> = Vec::new();
        for entry in &self.entries {
            if !kinds
                .iter()
                .any(|k| k.group == entry.gvk.group && k.kind == entry.gvk.kind)
            {
                kinds.push(entry.gvk.clone());
            }
        }
        kinds
    }

    /// Whether `plugin` may have children of `group`/`kind` applied.
    pub(crate) fn allows(&self, plugin: &str, group: &str, kind: &str) -> bool {
        self.entries.iter().any(|e| {
            e.gvk.group == group
                && e.gvk.kind == kind
                && e.plugin.as_deref().is_none_or(|p| p == plugin)
        })
    }

    /// Whether nothing is allowed (no child watches, no children).
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_per_plugin_or_for_all() {
        let mut entries = ChildKinds::parse("v1/ConfigMap, apps/v1/Deployment").unwrap();
        entries.extend(ChildKinds::parse("postgresql=v1/Secret").unwrap());
        let kinds = ChildKinds::new(entries);
        assert!(kinds.allows("any", "", "ConfigMap"));
        assert!(kinds.allows("any", "apps", "Deployment"));
        assert!(kinds.allows("postgresql", "", "Secret"));
        assert!(!kinds.allows("mariadb", "", "Secret"));
        assert!(!kinds.allows("any", "batch", "Job"));
        assert_eq!(kinds.kinds().len(), 3);
    }

    #[test]
    fn never_allowed_kinds_and_bad_forms_are_refused_with_the_reason() {
        for (value, expected) in [
            ("rbac.authorization.k8s.io/v1/Role", "never applied"),
            ("v1/ServiceAccount", "never applied"),
            ("p=v1/Namespace", "never applied"),
            (
                "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
                "never applied",
            ),
            ("configmaps", "expected"),
            ("v1/configmap", "CamelCase"),
            ("Bad_Name=v1/ConfigMap", "invalid plugin name"),
        ] {
            let error = ChildKinds::parse(value).unwrap_err();
            assert!(error.contains(expected), "{value}: {error}");
        }
    }
}

//! Lifecycle mutation (CNPG-I's Lifecycle capability): plugins that patch
//! the children other plugins desire before they are applied, as a backup
//! plugin adds a sidecar and a volume to a Deployment's Pods.
//!
//! The admin decides who mutates what, and in which order, not the
//! plugins: `--mutators <plugin>=<apiVersion>/<Kind>` allows a mutator, and
//! mutators run in the order of the flag. A patch may touch only `/spec`,
//! `/metadata/labels` and `/metadata/annotations` (never a `kplug.io/`
//! key); the child's rules run again on the mutated object. The hash of
//! the mutated intent is what drift is judged by, so a deterministic
//! mutator never causes an apply loop. A mutator that is down, not ready,
//! or fails holds the applies it would change: applying without it and
//! again when it returns would roll every workload twice.

use json_patch::{Patch, PatchOperation};
use kplug_proto::limits::{MAX_PATCH_BYTES, mutation_path_problem};
use kplug_proto::v1::MutateRequest;
use kube::api::DynamicObject;
use kube::core::GroupVersionKind;
use serde_json::{Map, Value};

use crate::registry::Registry;
use crate::status::ChildKey;

/// `--mutators`: which plugin may patch which kind, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mutators {
    entries: Vec<(String, GroupVersionKind)>,
}

impl Mutators {
    /// The mutators of `entries`, in the order given.
    pub fn new(entries: Vec<(String, GroupVersionKind)>) -> Self {
        Self { entries }
    }

    /// Parses one `--mutators` value: `<plugin>=<apiVersion>/<Kind>` items
    /// separated by commas, e.g. `backup=apps/v1/Deployment`.
    ///
    /// # Errors
    /// What is wrong with the value, and the expected form.
    pub fn parse(value: &str) -> Result<Vec<(String, GroupVersionKind)>, String> {
        value
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                let Some((plugin, kind)) = item.split_once('=') else {
                    return Err(format!(
                        "{item}: expected <plugin>=<apiVersion>/<Kind>, e.g. backup=apps/v1/Deployment"
                    ));
                };
                let plugin = plugin.trim();
                kplug_proto::rules::validate_plugin_name(plugin)
                    .map_err(|e| format!("{item}: {e}"))?;
                let gvk = crate::target::parse(kind.trim()).map_err(|e| match e {
                    crate::Error::Resource { message, .. } => format!("{item}: {message}"),
                    other => format!("{item}: {other}"),
                })?;
                Ok((plugin.to_owned(), gvk))
            })
            .collect()
    }

    /// The plugins that mutate children of `group`/`kind`, in order.
    pub(crate) fn of(&self, group: &str, kind: &str) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|(_, gvk)| gvk.group == group && gvk.kind == kind)
            .map(|(plugin, _)| plugin.as_str())
            .collect()
    }
}

/// What the mutators made of a child.
#[derive(Debug)]
pub(crate) enum Mutated {
    /// The object to apply, and the mutators' warnings (`<mutator>:
    /// <warning>`).
    Object(Map<String, Value>, Vec<String>),
    /// Not applied now: a mutator is missing or failed (why, naming it).
    Held(String),
    /// A mutator's patch breaks the rules (why, naming it).
    Refused(String),
}

/// What one child's mutation needs.
pub(crate) struct Mutation<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) mutators: Vec<&'a str>,
    pub(crate) key: &'a ChildKey,
    pub(crate) live: Option<&'a DynamicObject>,
    pub(crate) base: Option<&'a DynamicObject>,
    pub(crate) implementation: &'a str,
}

/// Passes `object` through each mutator of the child's kind, in order.
pub(crate) async fn mutate(m: Mutation<'_>, mut object: Map<String, Value>) -> Mutated {
    // Serializing a DynamicObject cannot fail.
    let json = |o: &DynamicObject| serde_json::to_vec(o).unwrap_or_default();
    let mut warnings = Vec::new();
    for plugin in m.mutators {
        let Some(instance) = m.registry.get(plugin).filter(|i| i.is_ready()) else {
            return Mutated::Held(format!(
                "waiting for mutator {plugin} (--mutators), which is not registered or not ready"
            ));
        };
        if !instance.mutates(&m.key.group, &m.key.kind) {
            return Mutated::Held(format!(
                "mutator {plugin} (--mutators) does not declare Mutate for kind {}; update the plugin or the flag",
                m.key.kind
            ));
        }
        let request = MutateRequest {
            object: serde_json::to_vec(&object).unwrap_or_default(),
            live: m.live.map(json).unwrap_or_default(),
            base: m.base.map(json).unwrap_or_default(),
            implementation: m.implementation.to_owned(),
        };
        let answer = match instance.mutate(request).await {
            Ok(answer) => answer,
            Err(error) => return Mutated::Held(format!("mutator {plugin}: {error}")),
        };
        for warning in answer
            .warnings
            .iter()
            .take(kplug_proto::limits::MAX_WARNINGS)
        {
            warnings.push(format!(
                "mutator {plugin} on {}: {}",
                m.key,
                kplug_proto::limits::truncate_message(warning)
            ));
        }
        let patch = match decode(&answer.patch) {
            Ok(patch) => patch,
            Err(problem) => return Mutated::Refused(format!("mutator {plugin}: {problem}")),
        };
        let mut value = Value::Object(object);
        if let Err(e) = json_patch::patch(&mut value, &patch.0) {
            return Mutated::Refused(format!(
                "mutator {plugin}: its patch does not apply to the child: {e}"
            ));
        }
        object = match value {
            Value::Object(map) => map,
            _ => {
                return Mutated::Refused(format!(
                    "mutator {plugin}: its patch replaced the object"
                ));
            }
        };
    }
    Mutated::Object(object, warnings)
}

/// Decodes a `MutateResponse.patch` and checks its paths (empty: none).
fn decode(bytes: &[u8]) -> Result<Patch, String> {
    if bytes.is_empty() {
        return Ok(Patch(Vec::new()));
    }
    if bytes.len() > MAX_PATCH_BYTES {
        return Err(format!(
            "its patch has {} bytes, more than the {MAX_PATCH_BYTES} the operator accepts",
            bytes.len()
        ));
    }
    let patch: Patch = serde_json::from_slice(bytes)
        .map_err(|e| format!("its patch is not a JSON Patch (RFC 6902): {e}"))?;
    for op in &patch.0 {
        let mut paths = vec![op.path().as_str()];
        match op {
            PatchOperation::Move(m) => paths.push(m.from.as_str()),
            PatchOperation::Copy(c) => paths.push(c.from.as_str()),
            _ => {}
        }
        for path in paths {
            if let Some(problem) = mutation_path_problem(path) {
                return Err(format!(
                    "its patch touches {path:?}: {problem}; nothing of it was applied"
                ));
            }
        }
    }
    Ok(patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutators_are_per_plugin_and_kind_in_flag_order() {
        let mut entries = Mutators::parse("backup=apps/v1/Deployment").unwrap();
        entries.extend(Mutators::parse("audit=apps/v1/Deployment, audit=v1/ConfigMap").unwrap());
        let mutators = Mutators::new(entries);
        assert_eq!(mutators.of("apps", "Deployment"), ["backup", "audit"]);
        assert_eq!(mutators.of("", "ConfigMap"), ["audit"]);
        assert!(mutators.of("", "Secret").is_empty());
        for (bad, expected) in [
            ("apps/v1/Deployment", "expected <plugin>="),
            ("Bad=v1/ConfigMap", "invalid plugin name"),
        ] {
            let error = Mutators::parse(bad).unwrap_err();
            assert!(error.contains(expected), "{bad}: {error}");
        }
    }

    #[test]
    fn a_patch_may_touch_the_spec_and_foreign_labels_only() {
        let ok = br#"[{"op":"add","path":"/spec/template/spec/volumes","value":[]},
                      {"op":"add","path":"/metadata/labels/backup","value":"yes"}]"#;
        assert_eq!(decode(ok).unwrap().0.len(), 2);
        for (patch, expected) in [
            (
                r#"[{"op":"add","path":"/status/x","value":1}]"#,
                "may only change",
            ),
            (
                r#"[{"op":"replace","path":"/metadata/labels","value":{}}]"#,
                "not the whole map",
            ),
            (
                r#"[{"op":"remove","path":"/metadata/labels/kplug.io~1base-uid"}]"#,
                "are the operator's",
            ),
            (
                r#"[{"op":"move","from":"/metadata/name","path":"/spec/x"}]"#,
                "may only change",
            ),
            ("{}", "not a JSON Patch"),
        ] {
            let error = decode(patch.as_bytes()).unwrap_err();
            assert!(error.contains(expected), "{patch}: {error}");
        }
        assert!(decode(b"").unwrap().0.is_empty());
    }
}

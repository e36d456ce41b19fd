//! The children part of `kubectl kplug why`: the objects the plugin
//! desires for the object, as the operator lists them in `status.children`
//! (`{apiVersion, kind, name, plugin, state, message?}`), and which one
//! blocks it and why.

use serde_json::Value;

use crate::plugins::table;

/// One child as `status.children` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Child {
    /// `Deployment.apps`, or `ConfigMap` for the core group: as kubectl
    /// names a kind.
    kind: String,
    name: String,
    plugin: String,
    /// `Applied`, `Refused`, `Waiting`, `Failed` or `Deleting` (another
    /// word from a newer operator is shown as it is).
    state: String,
    /// Why it is not applied; empty when applied.
    message: String,
}

impl Child {
    /// `Deployment.apps users-server`, for sentences.
    fn display(&self) -> String {
        format!("{} {}", self.kind, self.name)
    }
}

/// The children `status` lists, in its order; none when it lists none.
pub(crate) fn listed(status: &Value) -> Vec<Child> {
    let text = |c: &Value, key: &str| c[key].as_str().unwrap_or_default().to_owned();
    status
        .get("children")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let api_version = text(c, "apiVersion");
            let kind = match api_version.rsplit_once('/') {
                Some((group, _)) => format!("{}.{group}", text(c, "kind")),
                None => text(c, "kind"),
            };
            Child {
                kind,
                name: text(c, "name"),
                plugin: text(c, "plugin"),
                state: text(c, "state"),
                message: text(c, "message"),
            }
        })
        .collect()
}

/// Prints the CHILDREN section: each child with its state, and the
/// message of one that is not applied.
pub(crate) fn print(children: &[Child]) {
    outln!("\nCHILDREN");
    if children.is_empty() {
        outln!("none");
        return;
    }
    let mut rows = vec![["KIND", "NAME", "PLUGIN", "STATE", "MESSAGE"].map(String::from)];
    for c in children {
        rows.push([
            c.kind.clone(),
            c.name.clone(),
            c.plugin.clone(),
            c.state.clone(),
            c.message.clone(),
        ]);
    }
    out!("{}", table(&rows));
}

/// What to do about the first child that holds the object back (refused,
/// waiting for a mutator, or refused by the API server), naming it and
/// its reason; `None` when every child is applied or going.
pub(crate) fn advice(children: &[Child]) -> Option<String> {
    let blocking = |state: &str| children.iter().find(|c| c.state == state);
    // The message ends the sentence: its own full stop would double it.
    let reason = |c: &Child| match c.message.trim_end_matches('.') {
        "" => "no reason given".to_owned(),
        message => message.to_owned(),
    };
    if let Some(c) = blocking("Refused") {
        return Some(format!(
            "Child {} of plugin {} is refused: {}. Do what the rule says: an admin allows child kinds with the operator's --child-kinds; otherwise the plugin (or the mutator the rule names) must change what it answers.",
            c.display(),
            c.plugin,
            reason(c)
        ));
    }
    if let Some(c) = blocking("Waiting") {
        return Some(format!(
            "Child {} of plugin {} is held for a mutator: {}. Start the mutator (kubectl kplug plugins lists what is registered and ready), or have the operator's admin take it out of --mutators; the child is applied once it answers.",
            c.display(),
            c.plugin,
            reason(c)
        ));
    }
    blocking("Failed").map(|c| {
        format!(
            "The API server refused child {} of plugin {}: {}. Fix what the plugin desires (its answer), or the cluster's policy that refuses it; the operator tries again by itself.",
            c.display(),
            c.plugin,
            reason(c)
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn status() -> Value {
        json!({"children": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "t-settings", "plugin": "keeper", "state": "Applied"},
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "t-server", "plugin": "keeper", "state": "Waiting",
             "message": "mutator backup is not registered"},
            {"apiVersion": "v1", "kind": "Secret", "name": "t-password", "plugin": "keeper", "state": "Refused",
             "message": "Secret is not allowed by the operator's --child-kinds"},
        ]})
    }

    #[test]
    fn children_are_listed_with_their_kind_as_kubectl_names_it() {
        let children = listed(&status());
        let kinds: Vec<_> = children.iter().map(|c| c.display()).collect();
        assert_eq!(
            kinds,
            [
                "ConfigMap t-settings",
                "Deployment.apps t-server",
                "Secret t-password"
            ]
        );
        assert_eq!(children[1].state, "Waiting");
        assert!(children[0].message.is_empty());
        assert!(listed(&json!({})).is_empty());
        assert!(listed(&Value::Null).is_empty());
    }

    #[test]
    fn the_advice_names_the_refused_child_first_then_the_waiting_one() {
        let children = listed(&status());
        let refused = advice(&children).unwrap();
        assert!(
            refused.starts_with(
                "Child Secret t-password of plugin keeper is refused: Secret is not allowed by the operator's --child-kinds."
            ),
            "{refused}"
        );
        let waiting = advice(&children[..2]).unwrap();
        assert!(
            waiting.starts_with(
                "Child Deployment.apps t-server of plugin keeper is held for a mutator: mutator backup is not registered."
            ),
            "{waiting}"
        );
        assert_eq!(advice(&children[..1]), None);
        let failed = listed(&json!({"children": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "plugin": "p", "state": "Failed"},
        ]}));
        assert!(
            advice(&failed).unwrap().starts_with(
                "The API server refused child ConfigMap x of plugin p: no reason given."
            ),
            "{failed:?}"
        );
    }
}

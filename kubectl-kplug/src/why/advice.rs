//! The WHAT TO DO of `kubectl kplug why`: one piece of advice, from what
//! blocks the object (its plugin, a child, a condition).

use serde_json::Value;

/// The advice at the end of `why`: never "nothing" while the plugin the
/// object needs is gone (its status is from before: the next reconcile
/// waits for it), a child that holds it back named with its reason, and
/// never the condition's message said again.
pub(super) fn what_to_do(
    ready: bool,
    plugin_advice: Option<String>,
    child_advice: Option<String>,
    conditions: &[Value],
) -> String {
    match (ready, plugin_advice, child_advice) {
        (true, None, None) => "Nothing: it is Ready.".to_owned(),
        (true, Some(advice), _) => format!(
            "It was Ready when last reconciled, but its plugin is not there now: the next reconcile waits for it. {advice}"
        ),
        (false, Some(advice), _) | (_, None, Some(advice)) => advice,
        (false, None, None) => conditions
            .iter()
            .find(|c| c["status"] == "False" && c["type"] != "Ready")
            .and_then(|c| c["reason"].as_str())
            .map_or_else(
                || "Wait for the operator to reconcile it, or check that the operator runs (kubectl kplug plugins).".to_owned(),
                advice_for_reason,
            ),
    }
}

/// What a person does about a blocking condition's reason.
fn advice_for_reason(reason: &str) -> String {
    match reason {
        "ExtensionNotFound" => "Create the extension the ExtensionsResolved condition names (in the object's namespace), or remove it from spec.extensions.".to_owned(),
        "ExtensionNotAllowed" => "Reference only extension kinds the operator allows (its --extension-kind flags), in the object's namespace.".to_owned(),
        "ExtensionKindNotServed" => "Install the CRD of the extension kind the ExtensionsResolved condition names, or fix its apiVersion and kind.".to_owned(),
        "InvalidReference" => "Fix spec.extensions: each entry needs apiVersion, kind and name.".to_owned(),
        "PluginFailed" | "ReconcileFailed" => "The plugin refused the object: fix the spec as the Reconciled condition says; the operator tries again on the next change.".to_owned(),
        "InvalidPluginResponse" => "The plugin broke the protocol: report it to its authors with the Reconciled condition's message (kubectl-kplug replay shows its raw answer).".to_owned(),
        "ChildRefused" => "The operator refuses a child the plugin desires (the Reconciled condition names it and the rule): its admin allows child kinds with --child-kinds, or the plugin must stop desiring it.".to_owned(),
        "WaitingForMutator" => "A child waits for a mutator the operator's --mutators names (the Ready condition says which): start it, or have the admin take it out of --mutators.".to_owned(),
        other => format!(
            "See the {other} condition above; the operator tries again by itself (the Events say when)."
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn what_to_do_never_contradicts_the_plugin_state_or_repeats_the_condition() {
        assert_eq!(what_to_do(true, None, None, &[]), "Nothing: it is Ready.");
        let gone = what_to_do(true, Some("Start the plugin hola.".into()), None, &[]);
        assert!(
            !gone.contains("Nothing") && gone.ends_with("Start the plugin hola."),
            "{gone}"
        );
        let missing = json!([
            {"type": "Ready", "status": "False", "reason": "ExtensionNotFound", "message": "extension X users not found"},
            {"type": "ExtensionsResolved", "status": "False", "reason": "ExtensionNotFound", "message": "extension X users not found"},
        ]);
        let advice = what_to_do(false, None, None, missing.as_array().unwrap());
        assert!(advice.starts_with("Create the extension"), "{advice}");
        assert!(!advice.contains("users not found"), "{advice}");
        // A child that holds it back is named in place of the condition's
        // reason; a missing plugin comes first.
        let refused = json!([
            {"type": "Ready", "status": "False", "reason": "ChildRefused", "message": "refused"},
            {"type": "Reconciled", "status": "False", "reason": "ChildRefused", "message": "refused"},
        ]);
        let child = Some("Child Secret s of plugin p is refused: not allowed.".to_owned());
        let advice = what_to_do(false, None, child.clone(), refused.as_array().unwrap());
        assert_eq!(advice, child.clone().unwrap());
        let advice = what_to_do(false, Some("Start the plugin p.".into()), child, &[]);
        assert_eq!(advice, "Start the plugin p.");
        let advice = what_to_do(false, None, None, refused.as_array().unwrap());
        assert!(
            advice.starts_with("The operator refuses a child"),
            "{advice}"
        );
    }
}

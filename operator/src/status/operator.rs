//! The status the operator applies to a base object, as a typed value:
//! built in one place ([`OperatorStatus::new`]) from the operator's
//! conditions, the plugins' conditions, the recorded choice and the plugin
//! fields it carries.

use kplug_checks::response::Condition;
use serde::Serialize;
use serde_json::{Map, Value};

use super::conditions::{OperatorConditions, find_condition, mark_trace};

/// A condition as written to `status.conditions` (metav1.Condition).
///
/// Not k8s-openapi's `Condition`: its time type would re-render a stored
/// `lastTransitionTime` (sub-second digits, another zone spelling), and a
/// status that differs only in how a time is spelled would be written again
/// on every reconcile. The stored string is kept as it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RenderedCondition {
    /// CamelCase type.
    #[serde(rename = "type")]
    pub(crate) type_: String,
    /// `True`, `False` or `Unknown`.
    pub(crate) status: &'static str,
    /// CamelCase reason.
    pub(crate) reason: String,
    /// Message for humans.
    pub(crate) message: String,
    /// When `status` last changed, in whole seconds (as metav1.Time).
    pub(crate) last_transition_time: String,
    /// The generation the condition was set at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) observed_generation: Option<i64>,
}

/// What the operator applies to a base object's status under its own field
/// manager: its own part, and under `--selection preferred` the one
/// plugin's fields (server-side apply removes a field it stops carrying).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OperatorStatus {
    /// The plugin's fields, at the top level of the status beside the
    /// operator's own. They never hold an operator key (a plugin's answer
    /// that does is refused as a whole, and kept fields leave them out);
    /// were one there, the operator's field below would win.
    #[serde(flatten)]
    pub(crate) plugin_fields: Map<String, Value>,
    /// The generation this status is about (`null` for an object without one).
    pub(crate) observed_generation: Option<i64>,
    /// The operator's conditions (`Ready` first), then the plugins'.
    pub(crate) conditions: Vec<RenderedCondition>,
    /// The recorded implementation, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) implementation: Option<String>,
    /// The plugin that serves it, when one is recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) plugin: Option<String>,
}

/// The recorded choice, as the status names it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Choice<'a> {
    /// The implementation.
    pub(crate) implementation: Option<&'a str>,
    /// The plugin that serves it.
    pub(crate) plugin: Option<&'a str>,
}

impl OperatorStatus {
    /// The status of an object whose stored status is `previous` (keeps
    /// each condition's `lastTransitionTime` while its status holds), at
    /// `generation`. `trace`, the reconcile's trace id, is named in the
    /// `Reconciled` message when that condition changes.
    pub(crate) fn new(
        previous: Option<&Value>,
        generation: Option<i64>,
        operator: &OperatorConditions,
        plugin_conditions: &[Condition],
        plugin_fields: Map<String, Value>,
        choice: Choice<'_>,
        trace: Option<&str>,
    ) -> Self {
        let previous_conditions = previous.and_then(|s| s.get("conditions"));
        let mut all = operator.all();
        all.extend(plugin_conditions.iter().cloned());
        if let Some(trace) = trace {
            mark_trace(previous_conditions, &mut all, trace);
        }
        Self {
            plugin_fields,
            observed_generation: generation,
            conditions: render_conditions(previous_conditions, &all, generation),
            implementation: choice.implementation.map(str::to_owned),
            plugin: choice.plugin.map(str::to_owned),
        }
    }

    /// As the JSON body of a server-side apply.
    pub(crate) fn to_value(&self) -> Value {
        // Strings, integers and maps of JSON values: this cannot fail.
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Renders conditions as Kubernetes condition objects, keeping each
/// `lastTransitionTime` from `previous` (the object's current
/// `status.conditions`) when the status did not change.
fn render_conditions(
    previous: Option<&Value>,
    conditions: &[Condition],
    generation: Option<i64>,
) -> Vec<RenderedCondition> {
    // Whole seconds, like metav1.Time.
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    conditions
        .iter()
        .map(|c| {
            let before = find_condition(previous, &c.type_);
            let since = before
                .filter(|p| p.get("status").and_then(Value::as_str) == Some(c.status))
                .and_then(|p| p.get("lastTransitionTime").and_then(Value::as_str))
                .map_or_else(|| now.clone(), str::to_owned);
            RenderedCondition {
                type_: c.type_.clone(),
                status: c.status,
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition_time: since,
                observed_generation: generation,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::types;
    use super::*;

    fn conditions(reconciled: Condition) -> OperatorConditions {
        OperatorConditions {
            plugin_available: Condition::new(types::PLUGIN_AVAILABLE, true, "PluginReady", "ok"),
            extensions_resolved: Condition::new(types::EXTENSIONS_RESOLVED, true, "Resolved", "ok"),
            reconciled,
        }
    }

    #[test]
    fn transition_time_is_kept_while_status_is_unchanged() {
        let previous = json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]);
        let same = render_conditions(
            Some(&previous),
            &[Condition::new("Ready", true, "R", "")],
            Some(3),
        );
        assert_eq!(same[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert_eq!(same[0].observed_generation, Some(3));
        let flipped = render_conditions(
            Some(&previous),
            &[Condition::new("Ready", false, "R", "")],
            None,
        );
        assert_ne!(flipped[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert_eq!(
            serde_json::to_value(&flipped[0])
                .unwrap()
                .get("observedGeneration"),
            None,
            "no generation, no field"
        );
    }

    #[test]
    fn the_status_is_the_plugin_fields_beside_the_operator_part() {
        let mut fields = Map::new();
        fields.insert("rows".into(), json!(3));
        let status = OperatorStatus::new(
            None,
            Some(2),
            &conditions(Condition::new(types::RECONCILED, true, "Done", "3 rows")),
            &[Condition::new("TableExists", true, "Found", "yes")],
            fields,
            Choice {
                implementation: Some("sqlite"),
                plugin: Some("sqlite-plugin"),
            },
            None,
        );
        let value = status.to_value();
        assert_eq!(value["rows"], 3);
        assert_eq!(value["observedGeneration"], 2);
        assert_eq!(value["implementation"], "sqlite");
        assert_eq!(value["plugin"], "sqlite-plugin");
        let types: Vec<&str> = value["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        // The plugin ready, the extensions found and the call that
        // succeeded say nothing more than Ready.
        assert_eq!(types, ["Ready", "TableExists"]);
        assert_eq!(value["conditions"][0]["observedGeneration"], 2);
    }

    #[test]
    fn without_a_choice_there_is_no_implementation_field() {
        let status = OperatorStatus::new(
            None,
            None,
            &OperatorConditions::reselecting("sqlite"),
            &[],
            Map::new(),
            Choice::default(),
            None,
        );
        let value = status.to_value();
        assert!(value.get("implementation").is_none() && value.get("plugin").is_none());
        assert_eq!(value["observedGeneration"], Value::Null);
    }

    #[test]
    fn an_operator_key_among_the_plugin_fields_loses_to_the_operator() {
        let mut fields = Map::new();
        fields.insert("implementation".into(), json!("forged"));
        let status = OperatorStatus::new(
            None,
            Some(1),
            &conditions(Condition::new(types::RECONCILED, true, "Done", "ok")),
            &[],
            fields,
            Choice {
                implementation: Some("sqlite"),
                plugin: None,
            },
            None,
        );
        assert_eq!(status.to_value()["implementation"], "sqlite");
    }

    #[test]
    fn the_trace_is_named_when_reconciled_changes() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let status = OperatorStatus::new(
            None,
            Some(1),
            &conditions(Condition::new(types::RECONCILED, true, "Done", "ok")),
            &[],
            Map::new(),
            Choice::default(),
            Some(trace),
        );
        // Reconciled is True, so not written: Ready names the trace.
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == types::READY)
            .unwrap();
        assert_eq!(ready.message, format!("ok (trace {trace})"));
    }
}

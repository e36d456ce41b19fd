//! The operator's conditions: one condition, and the four the operator
//! owns (rendered into `status.conditions` by [`super::operator`]).

use serde_json::Value;

use super::types;

/// A condition to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// CamelCase type.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: String,
    /// Message for humans.
    pub message: String,
}

impl Condition {
    /// A condition that holds (`ok`) or not.
    pub fn new(type_: &str, ok: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.to_owned(),
            status: if ok { "True" } else { "False" },
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A condition whose status is not known yet.
    pub fn unknown(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status: "Unknown",
            ..Self::new(type_, false, reason, message)
        }
    }

    /// Whether it holds.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// The operator's three conditions; [`OperatorConditions::ready`] derives
/// `Ready` from them.
#[derive(Clone, Debug)]
pub struct OperatorConditions {
    /// `PluginAvailable`.
    pub plugin_available: Condition,
    /// `ExtensionsResolved`.
    pub extensions_resolved: Condition,
    /// `Reconciled`.
    pub reconciled: Condition,
}

impl OperatorConditions {
    /// Waiting for a plugin: `PluginAvailable=False` with `reason` and
    /// `message`, the extensions not resolved yet, and `reconciled` (the
    /// wait's outcome).
    pub fn waiting_for_plugin(reason: &str, message: &str, reconciled: Condition) -> Self {
        Self {
            plugin_available: Condition::new(types::PLUGIN_AVAILABLE, false, reason, message),
            extensions_resolved: Condition::unknown(
                types::EXTENSIONS_RESOLVED,
                "Pending",
                "resolved once a plugin is available",
            ),
            reconciled,
        }
    }

    /// Cleaning up before the object goes: its plugin is there and its
    /// extensions resolved; `reconciled` says how the clean-up stands.
    pub fn finalizing(reconciled: Condition) -> Self {
        Self {
            plugin_available: Condition::new(
                types::PLUGIN_AVAILABLE,
                true,
                "PluginReady",
                "finalizing",
            ),
            extensions_resolved: Condition::new(
                types::EXTENSIONS_RESOLVED,
                true,
                "Resolved",
                "finalizing",
            ),
            reconciled,
        }
    }

    /// Moved off `implementation` (`kplug.io/reselect`): everything is
    /// pending until the next choice.
    pub fn reselecting(implementation: &str) -> Self {
        Self {
            plugin_available: Condition::unknown(
                types::PLUGIN_AVAILABLE,
                "Reselecting",
                format!("left {implementation}; choosing again"),
            ),
            extensions_resolved: Condition::unknown(
                types::EXTENSIONS_RESOLVED,
                "Pending",
                "not resolved yet",
            ),
            reconciled: Condition::unknown(types::RECONCILED, "Pending", "choosing again"),
        }
    }

    /// `Ready`: true when the others are; else false with the reason and
    /// message of the first one that is not.
    pub fn ready(&self) -> Condition {
        let parts = [
            &self.plugin_available,
            &self.extensions_resolved,
            &self.reconciled,
        ];
        match parts.into_iter().find(|c| !c.is_true()) {
            None => Condition::new(
                types::READY,
                true,
                "Reconciled",
                self.reconciled.message.clone(),
            ),
            Some(blocking) => Condition::new(
                types::READY,
                false,
                &blocking.reason,
                blocking.message.clone(),
            ),
        }
    }

    /// All four, `Ready` first.
    pub fn all(&self) -> Vec<Condition> {
        vec![
            self.ready(),
            self.plugin_available.clone(),
            self.extensions_resolved.clone(),
            self.reconciled.clone(),
        ]
    }
}

/// The condition `type_` among `conditions` (an object's
/// `status.conditions`), if there is one.
pub fn find_condition<'a>(conditions: Option<&'a Value>, type_: &str) -> Option<&'a Value> {
    conditions?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// Names `trace` in the `Reconciled` condition's message, so that a user
/// can go from an object to the trace of the reconcile that brought its
/// current state. A reconcile that changes nothing keeps the trace id
/// already written (and so writes nothing new), whichever trace it is in.
pub(super) fn mark_trace(previous: Option<&Value>, conditions: &mut [Condition], trace: &str) {
    let Some(reconciled) = conditions.iter_mut().find(|c| c.type_ == types::RECONCILED) else {
        return;
    };
    let before = find_condition(previous, types::RECONCILED);
    let field = |name: &str| before.and_then(|c| c.get(name)).and_then(Value::as_str);
    if let Some(message) = field("message")
        && field("status") == Some(reconciled.status)
        && field("reason") == Some(reconciled.reason.as_str())
        && without_trace(message) == reconciled.message
    {
        reconciled.message = message.to_owned();
        return;
    }
    reconciled.message = format!("{} (trace {trace})", reconciled.message);
}

/// `message` without the ` (trace <32 hex digits>)` that [`mark_trace`] adds.
fn without_trace(message: &str) -> &str {
    match message.rsplit_once(" (trace ") {
        Some((before, id))
            if id.len() == 33
                && id.ends_with(')')
                && id[..32].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            before
        }
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ready_follows_the_first_blocking_condition() {
        let c = OperatorConditions {
            plugin_available: Condition::new(types::PLUGIN_AVAILABLE, true, "PluginReady", "ok"),
            extensions_resolved: Condition::new(
                types::EXTENSIONS_RESOLVED,
                false,
                "ExtensionNotFound",
                "x missing",
            ),
            reconciled: Condition::new(types::RECONCILED, false, "WaitingForExtensions", "waiting"),
        };
        let ready = c.ready();
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            ("False", "ExtensionNotFound")
        );
    }

    #[test]
    fn the_trace_of_the_reconcile_that_changed_the_state_is_kept() {
        let trace_a = "4bf92f3577b34da6a3ce929d0e0e4736";
        let trace_b = "0af7651916cd43dd8448eb211c80319c";
        let reconciled =
            |ok, message: &str| vec![Condition::new(types::RECONCILED, ok, "Done", message)];
        let mut first = reconciled(true, "created");
        mark_trace(None, &mut first, trace_a);
        assert_eq!(first[0].message, format!("created (trace {trace_a})"));
        let previous = json!([{"type": "Reconciled", "status": "True", "reason": "Done", "message": first[0].message}]);
        let mut same = reconciled(true, "created");
        mark_trace(Some(&previous), &mut same, trace_b);
        assert_eq!(same, first, "nothing changed: the first trace is kept");
        let mut changed = reconciled(false, "created");
        mark_trace(Some(&previous), &mut changed, trace_b);
        assert_eq!(changed[0].message, format!("created (trace {trace_b})"));
        assert_eq!(without_trace("x (trace 1234)"), "x (trace 1234)");
    }
}

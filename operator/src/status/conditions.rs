//! The operator's conditions: the four it owns (rendered into
//! `status.conditions` by [`super::operator`]; the two that only say "all
//! is well" are left out, see [`OperatorConditions::all`]). A condition is
//! `kplug_checks::response::Condition`, the type a plugin's are checked
//! into.

use kplug_checks::response::Condition;
use serde_json::Value;

use super::types;

/// The reasons of a `PluginAvailable` or `ExtensionsResolved` that holds
/// with nothing more to say.
const ALL_WELL: [&str; 2] = ["PluginReady", "Resolved"];

/// Whether `condition` holds and says nothing more: a plugin ready for
/// what was asked, every extension found ([`OperatorConditions::all`]
/// leaves such ones out).
fn is_all_well(condition: &Condition) -> bool {
    condition.is_true() && ALL_WELL.contains(&condition.reason.as_str())
}

/// The operator's three conditions; [`OperatorConditions::ready`] derives
/// `Ready` from them.
#[derive(Clone, Debug)]
pub(crate) struct OperatorConditions {
    /// `PluginAvailable`.
    pub(crate) plugin_available: Condition,
    /// `ExtensionsResolved`.
    pub(crate) extensions_resolved: Condition,
    /// `Reconciled`.
    pub(crate) reconciled: Condition,
}

impl OperatorConditions {
    /// Waiting for a plugin: `PluginAvailable=False` with `reason` and
    /// `message`, the extensions not resolved yet, and `reconciled` (the
    /// wait's outcome).
    pub(crate) fn waiting_for_plugin(reason: &str, message: &str, reconciled: Condition) -> Self {
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
    pub(crate) fn finalizing(reconciled: Condition) -> Self {
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
    pub(crate) fn reselecting(implementation: &str) -> Self {
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
    pub(crate) fn ready(&self) -> Condition {
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

    /// What is written: `Ready` always, first, then of the three it sums
    /// up, in order, those that have something to say:
    /// - the first that does not hold (the one `Ready` names);
    /// - before it, `PluginAvailable` and `ExtensionsResolved` when they
    ///   carry a notice (a preference not honoured);
    /// - none after it: they are only pending on it (an object waiting for
    ///   a plugin has no extensions resolved and no call yet, and saying so
    ///   in two more conditions told a user nothing new).
    ///
    /// An object served as asked carries one condition of the operator's
    /// (`Ready`, with the plugin's message), and a waiting one two (`Ready`
    /// and the condition that blocks it), not four: the API server stores,
    /// diffs (server-side apply's managed fields list every field of every
    /// condition) and sends every condition on every write, and the four
    /// made a stored object 1.6 times an in-process controller's (3.5
    /// against 2.1 KB), and its writes that much dearer
    /// (`docs/performance.md`). Server-side apply removes a condition the
    /// operator stops writing.
    pub(crate) fn all(&self) -> Vec<Condition> {
        let parts = [
            &self.plugin_available,
            &self.extensions_resolved,
            &self.reconciled,
        ];
        let blocking = parts.iter().position(|c| !c.is_true());
        let mut all = vec![self.ready()];
        for (i, part) in parts.into_iter().enumerate() {
            let says_something = match blocking {
                Some(b) if i == b => true,
                Some(b) if i > b => false,
                // Before the blocking one, or none blocks: `Reconciled`
                // holds (`Ready` carries its message), the others say
                // something only with a notice.
                _ => !is_all_well(part) && part.type_ != types::RECONCILED,
            };
            if says_something {
                all.push(part.clone());
            }
        }
        all
    }
}

/// The condition `type_` among `conditions` (an object's
/// `status.conditions`), if there is one.
pub(crate) fn find_condition<'a>(conditions: Option<&'a Value>, type_: &str) -> Option<&'a Value> {
    conditions?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// Names `trace` in the `Reconciled` condition's message (`Ready`'s while
/// `Reconciled` is True and not written), so that a user
/// can go from an object to the trace of the reconcile that brought its
/// current state. A reconcile that changes nothing keeps the trace id
/// already written (and so writes nothing new), whichever trace it is in.
pub(super) fn mark_trace(previous: Option<&Value>, conditions: &mut [Condition], trace: &str) {
    // `Reconciled` when it is written, else `Ready`, which then says what
    // it would have said.
    let marked = if conditions.iter().any(|c| c.type_ == types::RECONCILED) {
        types::RECONCILED
    } else {
        types::READY
    };
    let Some(reconciled) = conditions.iter_mut().find(|c| c.type_ == marked) else {
        return;
    };
    let before = find_condition(previous, marked);
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

    /// A plugin ready, an extension missing, and so no call.
    fn extension_missing() -> OperatorConditions {
        OperatorConditions {
            plugin_available: Condition::new(types::PLUGIN_AVAILABLE, true, "PluginReady", "ok"),
            extensions_resolved: Condition::new(
                types::EXTENSIONS_RESOLVED,
                false,
                "ExtensionNotFound",
                "x missing",
            ),
            reconciled: Condition::new(types::RECONCILED, false, "WaitingForExtensions", "waiting"),
        }
    }

    #[test]
    fn ready_follows_the_first_blocking_condition() {
        let c = extension_missing();
        let ready = c.ready();
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            ("False", "ExtensionNotFound")
        );
    }

    #[test]
    fn only_conditions_with_something_to_say_are_written() {
        let types = |c: &OperatorConditions| -> Vec<String> {
            c.all().into_iter().map(|c| c.type_).collect()
        };
        let fine = OperatorConditions {
            plugin_available: Condition::new(types::PLUGIN_AVAILABLE, true, "PluginReady", "a 1.0"),
            extensions_resolved: Condition::new(types::EXTENSIONS_RESOLVED, true, "Resolved", "1"),
            reconciled: Condition::new(types::RECONCILED, true, "ReconcileSucceeded", "done"),
        };
        assert_eq!(types(&fine), ["Ready"]);
        let notice = OperatorConditions {
            plugin_available: Condition::new(
                types::PLUGIN_AVAILABLE,
                true,
                "PreferenceNotOffered",
                "Helo is offered by no plugin",
            ),
            ..fine.clone()
        };
        assert_eq!(types(&notice), ["Ready", "PluginAvailable"]);
        // What waits on the blocking condition is not written.
        assert_eq!(types(&extension_missing()), ["Ready", "ExtensionsResolved"]);
        let waiting = OperatorConditions::waiting_for_plugin(
            "NoPlugin",
            "none",
            Condition::new(types::RECONCILED, false, "WaitingForPlugin", "later"),
        );
        assert_eq!(types(&waiting), ["Ready", "PluginAvailable"]);
        let failed = OperatorConditions {
            reconciled: Condition::new(types::RECONCILED, false, "ReconcileFailed", "no"),
            ..notice.clone()
        };
        assert_eq!(types(&failed), ["Ready", "PluginAvailable", "Reconciled"]);
        let blocked_after_a_notice = OperatorConditions {
            plugin_available: notice.plugin_available.clone(),
            ..extension_missing()
        };
        assert_eq!(
            types(&blocked_after_a_notice),
            ["Ready", "PluginAvailable", "ExtensionsResolved"]
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

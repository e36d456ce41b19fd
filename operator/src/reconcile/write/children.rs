//! The children step of the write: after a plugin answered OK or RETRY
//! with a children message, its children are applied (and on OK pruned)
//! before the status that lists them is written.

use kplug_proto::v1;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;
use serde_json::{Value, json};

use super::super::outcome::ChildProblem;
use super::super::{Backend, Core, Outcome};
use crate::children::{ChildState, Sync};
use crate::selection::Candidate;
use crate::status::{Checked, Intent};

/// The key of `status.children`, the list of each child and its state.
pub(super) const STATUS_KEY: &str = "children";

/// Brings `target`'s children to its answer, unless the answer leaves them
/// as they are (no children message, a FAILED outcome). Returns their
/// states for the status (`None`: keep what it lists), and the outcome,
/// which a refused or failed child replaces.
pub(super) async fn sync<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    target: &Candidate,
    answer: &Checked,
    outcome: Outcome,
) -> (Option<Vec<ChildState>>, Outcome) {
    let Some(intents) = &answer.children else {
        return (None, outcome);
    };
    let prune = match answer.outcome {
        v1::Outcome::Ok => true,
        v1::Outcome::Retry => false,
        v1::Outcome::Failed | v1::Outcome::Unspecified => return (None, outcome),
    };
    let Some(instance) = core.backend.plugin(&target.plugin) else {
        return (None, outcome);
    };
    let plugin = instance.label();
    let Some(children) = &core.children else {
        // No kind is allowed at all: each child says so.
        let problem = none_allowed(intents);
        return (
            None,
            problem.map_or(outcome, |problem| Outcome::Children { plugin, problem }),
        );
    };
    let declared = instance
        .offer(&core.kind(), &target.implementation)
        .map(|o| o.children.clone())
        .unwrap_or_default();
    let report = children
        .sync(Sync {
            base: obj,
            base_ar: &core.target.api_resource,
            plugin: &target.plugin,
            implementation: &target.implementation,
            declared: &declared,
            intents,
            prune,
            prune_others: core.settings.selection == super::SelectionMode::Preferred,
        })
        .await;
    // A mutator's warnings are for the people who own the base.
    for warning in &report.warnings {
        let note = warning.clone();
        super::event(
            core,
            obj,
            EventType::Warning,
            "MutatorWarning",
            "ApplyChildren",
            note,
        )
        .await;
    }
    let outcome = match problem(report.failed, report.refused, report.held) {
        Some(problem) => Outcome::Children { plugin, problem },
        None => outcome,
    };
    (Some(report.states), outcome)
}

/// Each child refused, when `--child-kinds` allows no kind at all.
fn none_allowed(intents: &[Intent]) -> Option<ChildProblem> {
    let refused: Vec<String> = intents
        .iter()
        .map(|i| {
            format!(
                "{}: the operator allows no child kinds (--child-kinds)",
                i.key
            )
        })
        .collect();
    (!refused.is_empty()).then_some(ChildProblem::Refused(refused))
}

/// What went wrong with the children, the worst first: the API server's
/// refusal, then a rule's, then a mutator's absence.
fn problem(
    failed: Option<String>,
    refused: Vec<String>,
    held: Vec<String>,
) -> Option<ChildProblem> {
    if let Some(message) = failed {
        Some(ChildProblem::ApplyFailed(message))
    } else if !refused.is_empty() {
        Some(ChildProblem::Refused(refused))
    } else if !held.is_empty() {
        Some(ChildProblem::Held(held))
    } else {
        None
    }
}

/// `status.children` for `states`, or as the object has it when the
/// children were left as they are.
pub(super) fn status_value(obj: &DynamicObject, states: Option<Vec<ChildState>>) -> Option<Value> {
    match states {
        Some(states) if states.is_empty() => None,
        Some(states) => Some(json!(states)),
        None => obj.data.pointer("/status/children").cloned(),
    }
}

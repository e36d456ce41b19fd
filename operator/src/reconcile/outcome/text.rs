//! What a person reads of an outcome: the condition's reason and message.

use super::{Call, ChildProblem, Outcome, combine};

impl Outcome {
    /// The CamelCase reason of a call's outcome.
    pub(super) fn reason(&self) -> &'static str {
        match self {
            Self::Done {
                call: Call::Reconcile,
                ..
            } => "ReconcileSucceeded",
            Self::Done { .. } => "Finalizing",
            Self::Retry {
                call: Call::Reconcile,
                ..
            } => "Retrying",
            Self::Retry { .. } => "Finalizing",
            Self::Failed {
                call: Call::Reconcile,
                ..
            } => "PluginFailed",
            Self::Failed { .. } => "FinalizeFailed",
            Self::CallFailed { error, .. } => error.reason(),
            Self::Invalid { .. } => "InvalidPluginResponse",
            Self::StatusRefused { .. } => "StatusWriteFailed",
            Self::NotSupported { .. } => "NotSupported",
            Self::Children {
                problem: ChildProblem::Refused(_),
                ..
            } => "ChildRefused",
            Self::Children {
                problem: ChildProblem::Held(_),
                ..
            } => "WaitingForMutator",
            Self::Children { .. } => "ChildApplyFailed",
            Self::HookStopped { .. } => "HookFailed",
            Self::All(_) => "Reconciled",
            Self::WaitingForPlugin | Self::Woken | Self::Queued => "WaitingForPlugin",
            Self::WaitingForExtensions | Self::ExtensionsExpected { .. } => "WaitingForExtensions",
            Self::Busy => "PluginBusy",
            Self::Stale => "CacheBehind",
            Self::Vanished => "ObjectGone",
            Self::Reselected => "Reselected",
            Self::Finalized => "Finalized",
        }
    }

    /// What a person reads in the condition and the Event.
    pub(crate) fn message(&self) -> String {
        match self {
            Self::Done {
                plugin, message, ..
            }
            | Self::Retry {
                plugin, message, ..
            }
            | Self::Failed {
                plugin, message, ..
            } => with_plugin(plugin, message),
            Self::CallFailed { error, .. } => error.to_string(),
            Self::Invalid {
                call: Call::Reconcile,
                plugin,
                problem,
            } => format!(
                "plugin {plugin} returned an invalid response, nothing of it was written: {problem}"
            ),
            Self::Invalid {
                call: Call::Finalize,
                plugin,
                problem,
            } => format!("plugin {plugin} returned an invalid Finalize response: {problem}"),
            Self::StatusRefused {
                plugin,
                what,
                message,
            } => format!(
                "the API server refused plugin {plugin}'s status ({what}): {message}; nothing else of its answer was applied"
            ),
            Self::NotSupported { plugin } => {
                format!("plugin {plugin} does not advertise Reconcile")
            }
            Self::Children { plugin, problem } => format!("plugin {plugin}: {}", problem.message()),
            Self::HookStopped {
                plugin,
                hook,
                phase,
                implementation,
                message,
                ..
            } => format!(
                "hook {hook} of plugin {plugin} ({phase}, sync-enforce) did not succeed: {message}; {}",
                hook_stopped(phase, implementation)
            ),
            Self::All(outcomes) => combine(outcomes).message,
            Self::WaitingForPlugin
            | Self::Woken
            | Self::Queued
            | Self::WaitingForExtensions
            | Self::ExtensionsExpected { .. }
            | Self::Busy
            | Self::Stale
            | Self::Vanished
            | Self::Reselected
            | Self::Finalized => self.waiting_message().into(),
        }
    }

    /// What a person reads for an outcome that waits or ends without a
    /// call's answer.
    fn waiting_message(&self) -> &'static str {
        match self {
            Self::WaitingForPlugin | Self::Woken | Self::Queued => {
                "the plugin is called once it is available"
            }
            Self::WaitingForExtensions | Self::ExtensionsExpected { .. } => {
                "the plugin is not called until every referenced extension exists"
            }
            Self::Busy => {
                "the plugin's share of the workers is taken; looking again when a place is free"
            }
            Self::Stale => "the cached object is behind the API server; looking again shortly",
            Self::Vanished => "the object is gone or being deleted",
            Self::Reselected => "left the recorded implementation; choosing again",
            Self::Finalized => "clean-up done; the object can go",
            _ => "",
        }
    }
}

impl ChildProblem {
    /// What a person reads, after the plugin's name.
    fn message(&self) -> String {
        match self {
            Self::Refused(refused) => format!(
                "{} refused, nothing of it applied: {}",
                if refused.len() == 1 {
                    "a child was"
                } else {
                    "children were"
                },
                refused.join("; ")
            ),
            Self::ApplyFailed(message) => message.clone(),
            Self::Held(held) => format!(
                "not applied until the mutator can patch it (applying without it would roll the workload twice): {}",
                held.join("; ")
            ),
        }
    }
}

/// What a `sync-enforce` hook that did not succeed at `phase` held back.
fn hook_stopped(phase: &str, implementation: &str) -> String {
    match phase {
        "before-reconcile" => format!("{implementation} was not called"),
        "after-reconcile" => "the object is not Ready until it succeeds".to_owned(),
        "before-finalize" => {
            format!("{implementation}'s Finalize was not called; the finalizer stays")
        }
        _ => "the finalizer stays until it succeeds".to_owned(),
    }
}

/// `plugin <label>: <message>`, or `plugin <label>` when the plugin said
/// nothing.
fn with_plugin(label: &str, message: &str) -> String {
    if message.is_empty() {
        format!("plugin {label}")
    } else {
        format!("plugin {label}: {message}")
    }
}

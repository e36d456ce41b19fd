//! What a reconcile came to, and the one place that says what each outcome
//! means for the object: its `Reconciled` condition, the Warning Event, the
//! metric label and when to look at it again.

mod metrics;
mod text;

use std::time::Duration;

use kube::runtime::events::EventType;

use crate::backoff::FailureTracker;
use crate::plugin::CallError;
use crate::status::{Condition, types};

/// How soon an object whose cached copy is behind the API server is looked
/// at again.
pub(crate) const STALE_REQUEUE: Duration = Duration::from_millis(200);

/// How soon a plugin's RETRY is honoured when it gives no delay.
pub(crate) const DEFAULT_RETRY: Duration = Duration::from_secs(10);

/// When an object whose children wait for a mutator is looked at again.
pub(crate) const MUTATOR_RETRY: Duration = Duration::from_secs(5);

/// The call an outcome comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    Reconcile,
    Finalize,
}

impl Call {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Reconcile => "Reconcile",
            Self::Finalize => "Finalize",
        }
    }
}

/// What one reconcile (or one call in it) came to.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The plugin answered OK. `plugin` is its label (`name version`).
    Done {
        call: Call,
        plugin: String,
        message: String,
    },
    /// The plugin answered RETRY.
    Retry {
        call: Call,
        plugin: String,
        message: String,
        after: Duration,
    },
    /// The plugin answered FAILED.
    Failed {
        call: Call,
        plugin: String,
        message: String,
    },
    /// The call produced no answer (timeout, unreachable, gRPC error, too
    /// large, plugin gone).
    CallFailed { call: Call, error: CallError },
    /// The plugin's answer broke the protocol; nothing of it was used.
    Invalid {
        call: Call,
        plugin: String,
        problem: String,
    },
    /// The API server refused the plugin's status.
    StatusRefused {
        plugin: String,
        what: &'static str,
        message: String,
    },
    /// The chosen plugin does not advertise Reconcile.
    NotSupported { plugin: String },
    /// The plugin answered, and some of the children it desires were not
    /// applied: refused by a rule, or by the API server.
    Children {
        /// The plugin, as its label.
        plugin: String,
        /// What went wrong with the children.
        problem: ChildProblem,
    },
    /// A `sync-enforce` hook did not succeed, so the step stopped.
    HookStopped {
        /// The label of the plugin that declared the hook.
        plugin: String,
        hook: String,
        /// e.g. `before-reconcile`.
        phase: &'static str,
        /// The implementation the step is for.
        implementation: String,
        message: String,
        /// The hook's `retry_after`, with RETRY.
        retry_after: Option<Duration>,
    },
    /// Several plugins were called (`--selection all`), in order.
    All(Vec<Outcome>),
    /// Waiting for a plugin; the registry wakes the object.
    WaitingForPlugin,
    /// A plugin became ready while the wait was being recorded: look again
    /// at once.
    Woken,
    /// A plugin became ready while the wait was being recorded, and a
    /// wake-up has queued the object already.
    Queued,
    /// Waiting for extensions; their watches wake the object.
    WaitingForExtensions,
    /// A new object's extensions are not there yet, and nothing was
    /// written: they usually come with it. Their watches wake the object;
    /// `after` is when the grace ends and the wait is written.
    ExtensionsExpected { after: Duration },
    /// The plugin's share of the workers is taken.
    Busy,
    /// The cache is behind the API server.
    Stale,
    /// The object is gone, being deleted or replaced: its own event
    /// reconciles it.
    Vanished,
    /// The object was moved off its implementation: choose again at once.
    Reselected,
    /// Clean-up done and the finalizer removed.
    Finalized,
}

impl Outcome {
    /// The outcome of one call, or of several (`--selection all`).
    pub(crate) fn of_each(mut outcomes: Vec<Outcome>) -> Self {
        if outcomes.len() == 1 {
            outcomes.remove(0)
        } else {
            Self::All(outcomes)
        }
    }

    /// The `Reconciled` condition of what [`Outcome::of_each`] makes of
    /// `outcomes`.
    pub(crate) fn condition_of(outcomes: &[Outcome]) -> Condition {
        match outcomes {
            [one] => one.condition(),
            all => combine(all),
        }
    }

    /// The `Reconciled` condition for this outcome.
    pub(crate) fn condition(&self) -> Condition {
        let (reason, message) = (self.reason(), self.message());
        match self {
            Self::Done {
                call: Call::Reconcile,
                ..
            } => Condition::new(types::RECONCILED, true, reason, message),
            Self::All(outcomes) => combine(outcomes),
            Self::Done { .. } | Self::Finalized => {
                Condition::unknown(types::RECONCILED, reason, message)
            }
            _ => Condition::new(types::RECONCILED, false, reason, message),
        }
    }

    /// The Warning Event this outcome is worth, as (reason, action, note):
    /// failures a person may have to act on. Waits publish their own.
    pub(crate) fn event(&self) -> Option<(EventType, &'static str, &'static str, String)> {
        let (call, reason) = match self {
            Self::Failed {
                call: Call::Reconcile,
                ..
            } => (Call::Reconcile, "ReconcileFailed"),
            Self::Failed { call, .. }
            | Self::CallFailed { call, .. }
            | Self::Invalid { call, .. } => (*call, self.reason()),
            Self::StatusRefused { .. } | Self::Children { .. } => (Call::Reconcile, self.reason()),
            // The action is the step that stopped: kube's recorder folds
            // Events with one reason and action into a series, and a
            // bypass hook's failure on the same object is a `Hook` action.
            Self::HookStopped { phase, .. } if phase.ends_with("finalize") => {
                (Call::Finalize, self.reason())
            }
            Self::HookStopped { .. } => (Call::Reconcile, self.reason()),
            _ => return None,
        };
        Some((EventType::Warning, reason, call.name(), self.message()))
    }

    /// When to look at the object again (`None`: when it changes). Counts a
    /// failure of `uid` in `failures` for the outcomes that back off, and
    /// forgets its failures when it succeeded.
    pub(crate) fn requeue(
        &self,
        failures: &FailureTracker,
        uid: &str,
        resync: Duration,
    ) -> Option<Duration> {
        match self {
            Self::Done {
                call: Call::Reconcile,
                ..
            } => {
                failures.reset(uid);
                Some(resync)
            }
            Self::Retry { after, .. }
            | Self::HookStopped {
                retry_after: Some(after),
                ..
            } => Some(*after),
            // Held for a mutator: looked at again soon, as it may be back.
            Self::Children {
                problem: ChildProblem::Held(_),
                ..
            } => Some(MUTATOR_RETRY),
            Self::Failed { .. }
            | Self::HookStopped { .. }
            | Self::CallFailed { .. }
            | Self::Invalid { .. }
            | Self::StatusRefused { .. }
            | Self::Children { .. }
            | Self::WaitingForExtensions => Some(failures.failed(uid)),
            Self::NotSupported { .. } => Some(resync),
            // The soonest requested requeue wins; a failure anywhere backs
            // off, and only a full success forgets the failures.
            Self::All(outcomes) => {
                if outcomes.iter().all(|o| o.metric() == Some("ok")) {
                    failures.reset(uid);
                    return Some(resync);
                }
                outcomes
                    .iter()
                    .filter(|o| o.metric() != Some("ok"))
                    .filter_map(|o| o.requeue(failures, uid, resync))
                    .min()
            }
            Self::ExtensionsExpected { after } => Some(*after),
            Self::Woken | Self::Reselected => Some(Duration::ZERO),
            // Woken when its plugin's share has a place (crate::share).
            Self::Busy => None,
            Self::Stale => Some(STALE_REQUEUE),
            Self::Finalized => {
                failures.reset(uid);
                None
            }
            Self::Done { .. } | Self::WaitingForPlugin | Self::Queued | Self::Vanished => None,
        }
    }
}

/// What went wrong with a plugin's children ([`Outcome::Children`]).
#[derive(Debug)]
pub(crate) enum ChildProblem {
    /// Children refused by a rule, each `<child>: <rule>`; nothing of
    /// them was written.
    Refused(Vec<String>),
    /// The API server refused to apply or delete a child.
    ApplyFailed(String),
    /// Children held for a mutator that is down, not ready or failing,
    /// each `<child>: <why>`.
    Held(Vec<String>),
}

/// Several plugins' `Reconciled` conditions as one: the first that is not
/// true, else true with every message.
fn combine(outcomes: &[Outcome]) -> Condition {
    let conditions: Vec<Condition> = outcomes.iter().map(Outcome::condition).collect();
    if let [only] = conditions.as_slice() {
        return only.clone();
    }
    match conditions.iter().find(|c| !c.is_true()) {
        Some(failing) => failing.clone(),
        None => Condition::new(
            types::RECONCILED,
            true,
            "ReconcileSucceeded",
            conditions
                .iter()
                .map(|c| c.message.as_str())
                .filter(|m| !m.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

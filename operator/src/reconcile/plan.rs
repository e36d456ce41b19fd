//! What to do with an object, decided from what is known now, without
//! side effects: which implementations to call, or what to wait for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::DynamicObject;

use super::settings::{SelectionMode, Settings};
use super::{Backend, Core};
use crate::preference::Preference;
use crate::selection::{self, Candidate, Reason, Recorded, Selection};
use crate::status::{self, Condition, types};
use crate::waiting::Need;

/// What [`apply`] and [`finalize`] decide from.
pub(crate) struct Inputs<'a> {
    pub(crate) obj: &'a DynamicObject,
    pub(crate) settings: &'a Settings,
    /// `Kind.group`, for messages.
    pub(crate) kind: &'a str,
    /// Ready candidates for the kind.
    pub(crate) candidates: &'a [Candidate],
    /// Implementations offered since start (ready now or not).
    pub(crate) ever_offered: &'a [String],
    /// What is left of the registry's start-up grace.
    pub(crate) grace_left: Option<Duration>,
    /// Where plugins register, for messages.
    pub(crate) registry_socket: &'a Path,
    /// `name version` of each ready plugin.
    pub(crate) labels: &'a BTreeMap<String, String>,
}

/// What the plan needs of the registry, read once per reconcile.
pub(crate) struct Known {
    kind: String,
    candidates: Vec<Candidate>,
    ever_offered: Vec<String>,
    grace_left: Option<Duration>,
    registry_socket: PathBuf,
    labels: BTreeMap<String, String>,
}

impl Known {
    /// Reads what `core`'s backend knows now.
    pub(crate) fn read<B: Backend>(core: &Core<B>) -> Self {
        let kind = core.kind();
        let candidates = core.backend.candidates(&kind);
        let labels = candidates
            .iter()
            .filter_map(|c| core.backend.plugin(&c.plugin))
            .map(|p| (p.name.clone(), p.label()))
            .collect();
        Self {
            kind: core.target.display(),
            ever_offered: core.backend.ever_offered(&kind),
            grace_left: core.backend.start_up_grace_left(),
            registry_socket: core.backend.registry_socket(),
            candidates,
            labels,
        }
    }

    /// The inputs of a plan for `obj`.
    pub(crate) fn inputs<'a>(
        &'a self,
        obj: &'a DynamicObject,
        settings: &'a Settings,
    ) -> Inputs<'a> {
        Inputs {
            obj,
            settings,
            kind: &self.kind,
            candidates: &self.candidates,
            ever_offered: &self.ever_offered,
            grace_left: self.grace_left,
            registry_socket: &self.registry_socket,
            labels: &self.labels,
        }
    }
}

/// Wait for a plugin, saying why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wait {
    pub(crate) need: Need,
    /// `PluginAvailable`'s reason.
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

/// Call plugins.
#[derive(Clone, Debug)]
pub(crate) struct Calls {
    /// Whom to call, in order.
    pub(crate) targets: Vec<Candidate>,
    /// The one choice (`--selection preferred`): what the status shows.
    pub(crate) choice: Option<Recorded>,
    /// The choice, when the object does not record it yet: the record step
    /// writes it before the plugin is called.
    pub(crate) record: Option<Recorded>,
    /// The note of an `ImplementationSelected` Event, when the new choice
    /// is news: not the object's preference. Choosing the preferred
    /// implementation says nothing a person did not ask for, and the
    /// status shows it.
    pub(crate) selected: Option<String>,
    /// `PluginAvailable` while the calls go on.
    pub(crate) available: Condition,
    /// A Warning Event (reason, note) about the preference, when its reason
    /// is new on the object.
    pub(crate) notice: Option<(&'static str, String)>,
    /// With every plugin called, the object waits on for plugins that have
    /// not served it yet; otherwise its wait (if any) is over.
    pub(crate) waits_for: Option<Need>,
}

/// The plan for an object that is not being deleted.
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    Wait(Wait),
    Call(Box<Calls>),
}

/// The object's preferred implementation, unless empty.
pub(crate) fn preferred<'a>(obj: &'a DynamicObject, settings: &Settings) -> Option<&'a str> {
    let mut value = &obj.data;
    for key in &settings.preferred_field {
        value = value.get(key)?;
    }
    value.as_str().filter(|p| !p.is_empty())
}

/// Plans the reconcile of an object that is not being deleted.
pub(crate) fn apply(inputs: &Inputs<'_>) -> Plan {
    let preferred = preferred(inputs.obj, inputs.settings);
    let chosen = match inputs.settings.selection {
        SelectionMode::All => selection::select_all(inputs.candidates)
            .into_iter()
            .map(|c| (c, None))
            .collect(),
        SelectionMode::Preferred => match choose(inputs, preferred) {
            Ok(chosen) => chosen,
            Err(wait) => return Plan::Wait(wait),
        },
    };
    if chosen.is_empty() {
        return Plan::Wait(Wait {
            need: Need::AnyPlugin,
            reason: "NoPlugin",
            message: format!(
                "no ready plugin serves {}; waiting for one to register on {}",
                inputs.kind,
                inputs.registry_socket.display()
            ),
        });
    }
    Plan::Call(Box::new(calls(inputs, preferred, chosen)))
}

/// The one implementation for an object (`--selection preferred`), with
/// why; none when no plugin is ready; or what to wait for.
fn choose(
    inputs: &Inputs<'_>,
    preferred: Option<&str>,
) -> Result<Vec<(Candidate, Option<Reason>)>, Wait> {
    let recorded = Recorded::of(inputs.obj);
    match selection::select(recorded.as_ref(), preferred, inputs.candidates) {
        // Just after start-up the preferred plugin may not have registered
        // yet, and a fallback would stick for good.
        Selection::Chosen {
            reason: Reason::Fallback,
            ..
        } if preferred.is_some() && inputs.grace_left.is_some() => {
            let (preferred, left) = (preferred.unwrap_or_default(), inputs.grace_left);
            Err(Wait {
                need: Need::Preferred(preferred.to_owned()),
                reason: "WaitingForPreferred",
                message: format!(
                    "the preferred implementation {preferred} has no ready plugin yet; plugins may still be registering after the operator's start, so another is chosen only if none offers it within {}s",
                    left.unwrap_or_default().as_secs().max(1)
                ),
            })
        }
        Selection::Chosen { candidate, reason } => Ok(vec![(candidate, Some(reason))]),
        Selection::RecordedUnavailable { recorded } => Err(Wait {
            message: format!(
                "implementation {}{} (recorded) has no ready plugin; waiting for it to come back. The choice is sticky: the object is not moved to another implementation or plugin",
                recorded.implementation,
                recorded
                    .plugin
                    .as_deref()
                    .map(|p| format!(" of plugin {p}"))
                    .unwrap_or_default()
            ),
            need: Need::Recorded(recorded),
            reason: "PluginUnavailable",
        }),
        Selection::NoCandidates => Ok(vec![]),
    }
}

/// What to call, record and say for the `chosen` (not empty).
fn calls(
    inputs: &Inputs<'_>,
    preferred: Option<&str>,
    chosen: Vec<(Candidate, Option<Reason>)>,
) -> Calls {
    let (available, notice) = availability(inputs, preferred, &chosen);
    let (choice, record, selected, waits_for) = match chosen.as_slice() {
        [(candidate, Some(reason))] => {
            let choice = Recorded::from(candidate);
            let new = Recorded::of(inputs.obj).as_ref() != Some(&choice);
            let record = new.then(|| choice.clone());
            let selected =
                (new && *reason != Reason::Preferred).then(|| chose(candidate, *reason, preferred));
            (Some(choice), record, selected, None)
        }
        _ => {
            let served: BTreeSet<String> = chosen.iter().map(|(c, _)| c.plugin.clone()).collect();
            (None, None, None, Some(Need::PluginBeyond(served)))
        }
    };
    Calls {
        targets: chosen.into_iter().map(|(c, _)| c).collect(),
        choice,
        record,
        selected,
        available,
        notice,
        waits_for,
    }
}

/// `PluginAvailable` while the `chosen` are called, and a Warning about
/// the preference when its reason is new on the object.
fn availability(
    inputs: &Inputs<'_>,
    preferred: Option<&str>,
    chosen: &[(Candidate, Option<Reason>)],
) -> (Condition, Option<(&'static str, String)>) {
    let labels = chosen
        .iter()
        .map(|(c, _)| {
            inputs
                .labels
                .get(&c.plugin)
                .cloned()
                .unwrap_or_else(|| c.plugin.clone())
        })
        .collect::<Vec<_>>()
        .join(", ");
    // With one implementation chosen, say so when it is not the preferred.
    let preference = match chosen {
        [(candidate, Some(_))] => {
            Preference::of(preferred, candidate, inputs.ever_offered).notice(candidate)
        }
        _ => None,
    };
    match preference {
        Some((reason, notice)) => (
            Condition::new(
                types::PLUGIN_AVAILABLE,
                true,
                reason,
                format!("{labels}; {notice}"),
            ),
            // Once per change of reason, not once per reconcile.
            (previous_reason(inputs.obj, types::PLUGIN_AVAILABLE) != Some(reason))
                .then_some((reason, notice)),
        ),
        None => (
            Condition::new(types::PLUGIN_AVAILABLE, true, "PluginReady", labels),
            None,
        ),
    }
}

/// The note of the `ImplementationSelected` Event.
fn chose(candidate: &Candidate, reason: Reason, preferred: Option<&str>) -> String {
    let why = match reason {
        Reason::Preferred => "it is the preferred implementation".to_owned(),
        Reason::Fallback => match preferred {
            Some(p) => format!("the preferred implementation {p} has no ready plugin"),
            None => "no implementation is preferred".to_owned(),
        },
        Reason::Recorded => "it was recorded".to_owned(),
    };
    format!(
        "chose {} (plugin {}): {why}",
        candidate.implementation, candidate.plugin
    )
}

/// The plan for an object being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FinalizePlan {
    /// The finalizer is not (or no longer) there: nothing to clean up.
    Release,
    /// The recorded implementation's plugin must come back first.
    Wait(Wait),
    /// Call Finalize on these (nothing recorded: none), then release.
    Call(Vec<Candidate>),
}

/// Plans the clean-up of an object being deleted.
pub(crate) fn finalize(inputs: &Inputs<'_>) -> FinalizePlan {
    let obj = inputs.obj;
    let finalizer = &inputs.settings.finalizer;
    if !obj
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == finalizer)
    {
        return FinalizePlan::Release;
    }
    match inputs.settings.selection {
        SelectionMode::All => FinalizePlan::Call(selection::select_all(inputs.candidates)),
        SelectionMode::Preferred => match Recorded::of(obj) {
            None => FinalizePlan::Call(vec![]),
            Some(recorded) => match selection::select(Some(&recorded), None, inputs.candidates) {
                Selection::Chosen { candidate, .. } => FinalizePlan::Call(vec![candidate]),
                _ => FinalizePlan::Wait(Wait {
                    message: format!(
                        "cannot finalize: implementation {} has no ready plugin; the object stays until it is back (to skip clean-up, remove the finalizer {finalizer} by hand)",
                        recorded.implementation
                    ),
                    need: Need::Recorded(recorded),
                    reason: "PluginUnavailable",
                }),
            },
        },
    }
}

/// The reason of the condition `type_` in `obj`'s status, if it has one.
fn previous_reason<'a>(obj: &'a DynamicObject, type_: &str) -> Option<&'a str> {
    status::find_condition(obj.data.pointer("/status/conditions"), type_)?
        .get("reason")?
        .as_str()
}

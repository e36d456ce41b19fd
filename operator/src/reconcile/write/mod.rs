//! Every write of a reconcile to the API server, and its Events: the
//! record of a choice, the statuses after the calls, the finalizer's
//! removal, and a hook's answer ([`HookWriter`]).

mod children;
mod events;
mod hook;
mod record;

use events::{about, from_plugin};
pub(super) use events::{event, plugin_events};
pub(super) use hook::HookWriter;
pub(super) use record::{read_live, record, remove_finalizer, remove_reselect};

use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

use super::call::Called;
use super::plan::Calls;
use super::settings::SelectionMode;
use super::{Backend, Core, Outcome, ReconcileError};
use crate::selection::Candidate;
use crate::selection::Recorded;
use crate::status::{self, Checked, Choice, Condition, OperatorConditions, OperatorStatus};

/// The write step, after the calls: each plugin's status of the
/// extensions it answered for (and of the base, under `--selection all`),
/// then one status apply with the plugin's fields and the operator's
/// conditions (skipped when it would change nothing), then the plugins'
/// Events and the Warning of each outcome that has one.
///
/// The API server has the last word on the plugin's part (its schema,
/// etcd's size limit): if it refuses it, the operator's own conditions
/// still go out, at this generation, saying why (`StatusRefused`).
pub(super) async fn after_calls<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    calls: &Calls,
    extensions_resolved: Condition,
    called: Vec<(Candidate, Called)>,
) -> Result<Outcome, ReconcileError> {
    let preferred = core.settings.selection == SelectionMode::Preferred;
    let (targets, mut outcomes, mut answers) = plugin_parts(obj, core, called, !preferred).await;
    // The children before the status that lists them.
    let mut child_states = None;
    for ((target, outcome), answer) in targets.iter().zip(outcomes.iter_mut()).zip(&answers) {
        if let Some(answer) = answer {
            let taken = std::mem::replace(outcome, Outcome::Busy);
            let (states, synced) = children::sync(obj, core, target, answer, taken).await;
            *outcome = synced;
            if let Some(states) = states {
                child_states.get_or_insert_with(Vec::new).extend(states);
            }
        }
    }
    let plugin_conditions = one_per_type(answers.iter().flatten().flat_map(|a| &a.conditions));
    // Under `preferred` there is one target: its fields go with the
    // operator's part, and the children's states beside them.
    let fields = match answers.as_slice() {
        [Some(answer)] if preferred => {
            let mut fields = answer.status.clone().unwrap_or_default();
            match children::status_value(obj, child_states) {
                Some(states) => fields.insert(children::STATUS_KEY.into(), states),
                None => fields.remove(children::STATUS_KEY),
            };
            Some(fields)
        }
        _ => None,
    };
    let mut conditions = OperatorConditions {
        plugin_available: calls.available.clone(),
        extensions_resolved,
        reconciled: Outcome::condition_of(&outcomes),
    };
    let choice = calls.choice.as_ref();
    let plugin = match &fields {
        Some(fields) => (PluginFields::Answer(fields), &plugin_conditions[..]),
        None => (PluginFields::Kept, &plugin_conditions[..]),
    };
    match operator_status(obj, core, choice, &conditions, plugin).await {
        Err(error) if fields.is_some() => {
            outcomes[0] = refused(core, &targets[0], &error);
            answers[0] = None;
            conditions.reconciled = outcomes[0].condition();
            operator_status(obj, core, choice, &conditions, (PluginFields::Kept, &[])).await?;
        }
        result => {
            result?;
            if let (Some(fields), [target]) = (&fields, targets.as_slice()) {
                clear_legacy_plugin_fields(obj, core, &target.plugin, fields).await?;
            }
        }
    }
    for ((target, outcome), answer) in targets.iter().zip(&outcomes).zip(&answers) {
        if let Some(answer) = answer {
            plugin_events(core, &target.plugin, &answer.events, "Reconcile").await;
        }
        if let Some((type_, reason, action, note)) = outcome.event() {
            event(core, obj, type_, reason, action, note).await;
        }
    }
    Ok(Outcome::of_each(outcomes))
}

/// The plugins' conditions, one per type: under `--selection all` two
/// plugins may report the same type, and a list-map holds one entry per
/// key. The first that does not hold wins, else the first (in the plugins'
/// stable order).
fn one_per_type<'a>(conditions: impl Iterator<Item = &'a Condition>) -> Vec<Condition> {
    let mut kept: Vec<Condition> = Vec::new();
    for condition in conditions {
        match kept.iter_mut().find(|k| k.type_ == condition.type_) {
            Some(held) if held.is_true() && !condition.is_true() => *held = condition.clone(),
            Some(_) => {}
            None => kept.push(condition.clone()),
        }
    }
    kept
}

/// Writes each plugin's status of the extensions it answered for (and of
/// the base, with `base`), and splits the calls into their targets,
/// outcomes and answers; an answer the API server refused is none, and
/// its outcome says so.
async fn plugin_parts<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    called: Vec<(Candidate, Called)>,
    base: bool,
) -> (Vec<Candidate>, Vec<Outcome>, Vec<Option<Checked>>) {
    let (mut targets, mut outcomes, mut answers) = (Vec::new(), Vec::new(), Vec::new());
    for (target, Called { outcome, answer }) in called {
        let (outcome, answer) = match answer {
            Some(answer) => match plugin_status(obj, core, &target.plugin, &answer, base).await {
                Ok(()) => (outcome, Some(answer)),
                Err(error) => (refused(core, &target, &error), None),
            },
            None => (outcome, None),
        };
        targets.push(target);
        outcomes.push(outcome);
        answers.push(answer);
    }
    (targets, outcomes, answers)
}

/// The outcome of a plugin whose answer the API server refused.
fn refused<B: Backend>(core: &Core<B>, target: &Candidate, error: &ReconcileError) -> Outcome {
    let plugin = core
        .backend
        .plugin(&target.plugin)
        .map_or_else(|| target.plugin.clone(), |p| p.label());
    Outcome::StatusRefused {
        plugin,
        what: error.what(),
        message: error.api_message(),
    }
}

/// Objects written before the operator applied the plugin's fields have
/// them under the plugin's own field manager too. A field the plugin stops
/// reporting is then still owned by that manager, and stays: when the
/// answer leaves out a key it owns, its empty apply gives them up (the
/// operator's manager keeps the rest). Once per such object; nothing for
/// the others.
async fn clear_legacy_plugin_fields<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    plugin: &str,
    fields: &Map<String, Value>,
) -> Result<(), ReconcileError> {
    let owned = status::owned_status_keys(obj, &status::plugin_manager(plugin));
    if owned.is_some_and(|keys| keys.iter().any(|k| !fields.contains_key(k))) {
        clear_plugin_status(obj, core, plugin).await?;
    }
    Ok(())
}

/// What of the plugin's fields a status the operator applies carries.
///
/// Under `--selection preferred` the operator applies the whole status in one
/// write, under its own field manager: its own part and the one plugin's
/// fields. What the plugin stops reporting, the operator stops applying, and
/// server-side apply removes it. A write without a new answer (a wait, a
/// failed call) keeps what was applied before. Under `--selection all` each
/// plugin applies its own fields under its own field manager
/// ([`plugin_status`]), so that one plugin's answer never removes another's:
/// the operator's manager owns none of them, and keeps none.
pub(super) enum PluginFields<'a> {
    /// Keep the plugin fields the operator's manager applied before, as
    /// the object has them.
    Kept,
    /// The plugin's answer, in place of what was applied before.
    Answer(&'a Map<String, Value>),
    /// None: the object left its plugin (a move), and its fields go.
    Dropped,
}

/// Applies the operator's part of the status, with the plugin's fields
/// ([`PluginFields`]). `choice` must be what is recorded: a field the
/// operator's manager stops applying is removed by server-side apply.
/// Returns the object as the API server has it after the write (`obj` when
/// the write would have changed nothing, and was not sent).
pub(super) async fn operator_status<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    choice: Option<&Recorded>,
    conditions: &OperatorConditions,
    plugin: (PluginFields<'_>, &[Condition]),
) -> Result<DynamicObject, ReconcileError> {
    let (fields, plugin_conditions) = plugin;
    let manager = &core.settings.field_manager;
    let fields = match fields {
        PluginFields::Kept => status::kept_plugin_fields(obj, manager),
        PluginFields::Answer(answer) => answer.clone(),
        PluginFields::Dropped => Map::new(),
    };
    let trace = kplug_proto::telemetry::trace_id(&tracing::Span::current());
    let status = OperatorStatus::new(
        obj.data.get("status"),
        obj.metadata.generation,
        conditions,
        plugin_conditions,
        fields,
        Choice {
            implementation: choice.map(|c| c.implementation.as_str()),
            plugin: choice.and_then(|c| c.plugin.as_deref()),
        },
        trace.as_deref(),
    )
    .to_value();
    // Remembered before it is sent: its echo on the watch must already
    // match, or it would wake the object again. Remembered also when it is
    // not sent: the next version seen carries it.
    core.written.record(obj, &status);
    if status::holds_applied(obj, manager, &status) {
        tracing::debug!("the status is unchanged; not written");
        return Ok(obj.clone());
    }
    let params = PatchParams::apply(manager).force();
    let body = status::apply_body(obj, status.clone());
    let written = core
        .api(obj)
        .patch_status(&obj.name_any(), &params, &Patch::Apply(body))
        .await;
    written.map_err(|e| {
        core.written.refused(obj, &status);
        ReconcileError::new("writing the status", obj, e)
    })
}

/// Applies `plugin`'s part of the status of the extensions it answered
/// for, and with `base` of the base object too (`--selection all`; under
/// `preferred` the base's goes with the operator's, in [`operator_status`]),
/// as the plugin's own field manager. The writes go out together: they are
/// independent, and one after the other they were most of a reconcile's
/// time when the API server is the bottleneck. A write that would change
/// nothing is not sent (an operator's start reconciles every object; most
/// answers are what is already stored). `obj` and the extensions must be as
/// read before the call.
pub(super) async fn plugin_status<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    plugin: &str,
    checked: &Checked,
    base: bool,
) -> Result<(), ReconcileError> {
    let manager = status::plugin_manager(plugin);
    let params = PatchParams::apply(&manager).force();
    let base_status = checked.status.clone().unwrap_or_default();
    let base_unchanged = !base || status::holds_manager_part(obj, &manager, &base_status);
    let base = async {
        if base_unchanged {
            tracing::debug!(%plugin, "the plugin's status is unchanged; not written");
            return Ok(());
        }
        let base_status = Value::Object(base_status);
        core.api(obj)
            .patch_status(
                &obj.name_any(),
                &params,
                &Patch::Apply(status::apply_body(obj, base_status)),
            )
            .await
            .map(drop)
            .map_err(|e| ReconcileError::new("writing the plugin's status", obj, e))
    };
    let extensions = checked.extension_statuses.iter().map(|(ext, ext_status)| {
        let ar = core.backend.extension_api(ext);
        let api = crate::target::api_in(&core.client, &ar, ext.namespace().as_deref());
        let params = &params;
        let unchanged = status::holds_manager_part(ext, &manager, ext_status);
        async move {
            if unchanged {
                return Ok(());
            }
            api.patch_status(
                &ext.name_any(),
                params,
                &Patch::Apply(status::apply_body(ext, Value::Object(ext_status.clone()))),
            )
            .await
            .map(drop)
            .map_err(|e| {
                ReconcileError::new(
                    "writing an extension's status (does its CRD have a status subresource?)",
                    ext,
                    e,
                )
            })
        }
    });
    // The base's error first when both fail: it is the object reconciled.
    let (base, extensions) = futures::join!(base, futures::future::join_all(extensions));
    base?;
    extensions.into_iter().collect()
}

/// Removes what `plugin` wrote to the base's status (its field manager's
/// empty apply).
pub(super) async fn clear_plugin_status<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    plugin: &str,
) -> Result<(), ReconcileError> {
    core.api(obj)
        .patch_status(
            &obj.name_any(),
            &PatchParams::apply(&status::plugin_manager(plugin)).force(),
            &Patch::Apply(status::apply_body(obj, json!({}))),
        )
        .await
        .map(drop)
        .map_err(|e| ReconcileError::new("removing the old plugin's status", obj, e))
}

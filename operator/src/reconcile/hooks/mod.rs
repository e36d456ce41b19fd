//! Lifecycle hooks: `Plugin.Hook` calls around Reconcile and Finalize.
//!
//! Every ready plugin may declare hooks for a base kind, whichever
//! implementation reconciles its objects. At each phase, the hooks of the
//! object's kind are called in order (`order`, then plugin name, then hook
//! name), and their behaviour says what a result that is not OK does:
//! - `sync-enforce`: the step stops ([`Outcome::HookStopped`]): the
//!   `Reconciled` condition names the hook, a Warning Event, a retry with
//!   backoff (or after the hook's `retry_after`);
//! - `sync-bypass`: a `HookFailed` Warning Event, and the step goes on;
//! - `async`: queued on the bounded [`HookQueue`] and never waited for; a
//!   failure is a `HookFailed` Warning Event, a full queue drops the call
//!   with a `HookDropped` one.
//!
//! A hook writes status only under `status.hooks.<plugin>`, as a field
//! manager of its own (`kplug-plugin-<plugin>-hook-<hook>`), so that it
//! neither removes nor is removed by the plugin's Reconcile status or its
//! other hooks. Those writes do not wake the object: only the operator's
//! part of the status does ([`crate::written`]).

mod queue;

pub(crate) use queue::HookQueue;

use std::sync::Arc;
use std::time::Duration;

use kplug_proto::v1::{self, GroupKind, Hook, HookBehaviour, HookPhase, HookRequest};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use super::{Backend, Core, Outcome, call};
use crate::events::Events;
use crate::metrics::{CallOutcome, HookId, HookMetrics};
use crate::plugin::{PluginInstance, same_kind};
use crate::selection::Candidate;
use crate::status::{self, Checked};

/// One hook to call: the plugin instance that declared it, and its
/// declaration.
#[derive(Clone, Debug)]
pub(crate) struct Declared {
    pub(crate) instance: Arc<PluginInstance>,
    pub(crate) hook: Hook,
}

impl Declared {
    fn id(&self) -> HookId<'_> {
        HookId {
            plugin: self.instance.name(),
            hook: &self.hook.name,
            phase: phase_name(self.hook.phase),
            behaviour: behaviour_name(self.hook.behaviour),
        }
    }

    /// `hook <name> of plugin <name version> (<phase>, <behaviour>)`.
    fn describe(&self) -> String {
        let id = self.id();
        format!(
            "hook {} of plugin {} ({}, {})",
            id.hook,
            self.instance.label(),
            id.phase,
            id.behaviour
        )
    }
}

/// The hooks `instances` declared for `base` at `phase`, in calling order.
pub(crate) fn ordered(
    instances: impl IntoIterator<Item = Arc<PluginInstance>>,
    base: &GroupKind,
    phase: HookPhase,
) -> Vec<Declared> {
    let mut hooks: Vec<Declared> = instances
        .into_iter()
        .flat_map(|instance| {
            let hooks: Vec<Hook> = instance
                .hooks()
                .filter(|h| h.phase == phase as i32)
                .filter(|h| h.base.as_ref().is_some_and(|b| same_kind(b, base)))
                .cloned()
                .collect();
            hooks.into_iter().map(move |hook| Declared {
                instance: Arc::clone(&instance),
                hook,
            })
        })
        .collect();
    hooks.sort_by(|a, b| {
        (a.hook.order, a.instance.name(), &a.hook.name).cmp(&(
            b.hook.order,
            b.instance.name(),
            &b.hook.name,
        ))
    });
    hooks
}

/// How a phase is spelled in conditions, Events and metrics.
pub(crate) fn phase_name(phase: i32) -> &'static str {
    match HookPhase::try_from(phase) {
        Ok(HookPhase::BeforeReconcile) => "before-reconcile",
        Ok(HookPhase::AfterReconcile) => "after-reconcile",
        Ok(HookPhase::BeforeFinalize) => "before-finalize",
        Ok(HookPhase::AfterFinalize) => "after-finalize",
        _ => "unknown",
    }
}

/// How a behaviour is spelled in conditions, Events and metrics.
pub(crate) fn behaviour_name(behaviour: i32) -> &'static str {
    match HookBehaviour::try_from(behaviour) {
        Ok(HookBehaviour::SyncEnforce) => "sync-enforce",
        Ok(HookBehaviour::SyncBypass) => "sync-bypass",
        Ok(HookBehaviour::Async) => "async",
        _ => "unknown",
    }
}

/// What a hook's call came to, when it was not OK.
struct NotOk {
    message: String,
    retry_after: Option<Duration>,
}

/// Everything a hook call needs once it is detached from the reconcile (an
/// async hook runs after it returned).
#[derive(Clone)]
struct Context {
    client: Client,
    api_resource: ApiResource,
    namespaced: bool,
    events: Events,
    metrics: HookMetrics,
}

impl Context {
    fn of<B>(core: &Core<B>) -> Self {
        Self {
            client: core.client.clone(),
            api_resource: core.target.api_resource.clone(),
            namespaced: core.target.namespaced,
            events: core.events.clone(),
            metrics: core.metrics.hooks().clone(),
        }
    }

    /// Calls one hook and applies its answer: its status, its Events, its
    /// metrics. `Err` when it was not OK, with why.
    async fn call(
        &self,
        declared: &Declared,
        request: HookRequest,
        obj: &DynamicObject,
        sent: &[DynamicObject],
    ) -> Result<(), NotOk> {
        let instance = &declared.instance;
        let failed = |message: String| NotOk {
            message,
            retry_after: None,
        };
        let response = match instance.hook(request).await {
            Ok(response) => response,
            Err(error) => {
                self.metrics.count(declared.id(), error.metric().label());
                return Err(failed(error.to_string()));
            }
        };
        let checked = match status::check_hook(response, obj, sent) {
            Ok(checked) => checked,
            Err(problem) => {
                instance.count_answer("Hook", CallOutcome::Invalid);
                self.metrics
                    .count(declared.id(), CallOutcome::Invalid.label());
                return Err(failed(format!(
                    "an invalid response, nothing of it was used: {problem}"
                )));
            }
        };
        let answered = match checked.outcome {
            v1::Outcome::Ok => CallOutcome::Ok,
            v1::Outcome::Retry => CallOutcome::Retry,
            _ => CallOutcome::Failed,
        };
        instance.count_answer("Hook", answered);
        self.metrics.count(declared.id(), answered.label());
        if let Err(error) = self.write_status(declared, obj, &checked).await {
            return Err(failed(format!(
                "the API server refused its status: {error}"
            )));
        }
        for event in &checked.events {
            self.events
                .publish_from_plugin(
                    instance.name(),
                    &event.regarding,
                    event.severity,
                    &event.reason,
                    "Hook",
                    event.message.clone(),
                )
                .await;
        }
        match checked.outcome {
            v1::Outcome::Ok => Ok(()),
            _ => Err(NotOk {
                message: if checked.message.is_empty() {
                    format!(
                        "it answered {}",
                        checked.outcome.as_str_name().trim_start_matches("OUTCOME_")
                    )
                } else {
                    checked.message
                },
                retry_after: checked.retry_after,
            }),
        }
    }

    /// Writes the hook's status under `status.hooks.<plugin>`.
    async fn write_status(
        &self,
        declared: &Declared,
        obj: &DynamicObject,
        checked: &Checked,
    ) -> Result<(), kube::Error> {
        let Some(status) = &checked.status else {
            return Ok(());
        };
        let api: Api<DynamicObject> = match obj.namespace() {
            Some(ns) if self.namespaced => {
                Api::namespaced_with(self.client.clone(), &ns, &self.api_resource)
            }
            _ => Api::all_with(self.client.clone(), &self.api_resource),
        };
        let manager = format!(
            "{}-hook-{}",
            status::plugin_manager(declared.instance.name()),
            declared.hook.name
        );
        let body = json!({ "hooks": { declared.instance.name(): Value::Object(status.clone()) } });
        api.patch_status(
            &obj.name_any(),
            &PatchParams::apply(&manager).force(),
            &Patch::Apply(status::apply_body(obj, body)),
        )
        .await
        .map(drop)
    }

    async fn warn(&self, obj: &DynamicObject, reason: &str, note: String) {
        let reference = obj.object_ref(&self.api_resource);
        self.events
            .publish(&reference, EventType::Warning, reason, "Hook", note)
            .await;
    }
}

/// What the implementation's call came to, for the after-* phases.
pub(super) struct After<'a>(pub(super) &'a Outcome);

impl After<'_> {
    fn outcome(&self) -> (v1::Outcome, String) {
        let outcome = match self.0 {
            Outcome::Done { .. } => v1::Outcome::Ok,
            Outcome::Retry { .. } => v1::Outcome::Retry,
            _ => v1::Outcome::Failed,
        };
        (outcome, self.0.condition().message)
    }
}

/// Calls the hooks of `obj`'s kind at `phase`, around the call of
/// `candidate`. `Some` when a `sync-enforce` hook stopped the step: what to
/// report instead of going on.
pub(super) async fn run<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    phase: HookPhase,
    candidate: &Candidate,
    found: &[DynamicObject],
    after: Option<After<'_>>,
) -> Option<Outcome> {
    let hooks = core.backend.hooks(&core.kind(), phase);
    if hooks.is_empty() {
        return None;
    }
    // Hooks get what the implementation is sent.
    let sent = core
        .backend
        .plugin(&candidate.plugin)
        .map(|implementation| {
            call::extensions_for(
                &implementation,
                &core.kind(),
                &candidate.implementation,
                found,
            )
        })
        .unwrap_or_default();
    // Serializing a DynamicObject cannot fail.
    let json = |o: &DynamicObject| serde_json::to_vec(o).unwrap_or_default();
    let (outcome, message) = after
        .as_ref()
        .map_or_else(|| (v1::Outcome::Unspecified, String::new()), After::outcome);
    let context = Context::of(core);
    for declared in hooks {
        let request = HookRequest {
            hook: declared.hook.name.clone(),
            phase: phase as i32,
            implementation: candidate.implementation.clone(),
            object: json(obj),
            extensions: sent.iter().map(json).collect(),
            outcome: outcome as i32,
            message: message.clone(),
        };
        match HookBehaviour::try_from(declared.hook.behaviour) {
            Ok(HookBehaviour::Async) => {
                let job = (context.clone(), declared.clone(), obj.clone(), sent.clone());
                let queued = core.hook_queue.push(async move {
                    let (context, declared, obj, sent) = job;
                    if let Err(not_ok) = context.call(&declared, request, &obj, &sent).await {
                        let note = format!("{} failed: {}", declared.describe(), not_ok.message);
                        context.warn(&obj, "HookFailed", note).await;
                    }
                });
                if !queued {
                    context.metrics.count(declared.id(), "dropped");
                    let note = format!(
                        "{} was not called: the async hook queue is full (--async-hook-queue); hooks that hang or are slow fill it",
                        declared.describe()
                    );
                    context.warn(obj, "HookDropped", note).await;
                }
            }
            Ok(HookBehaviour::SyncBypass) => {
                if let Err(not_ok) = context.call(&declared, request, obj, &sent).await {
                    let note = format!(
                        "{} failed: {}; going on, as the hook asks",
                        declared.describe(),
                        not_ok.message
                    );
                    context.warn(obj, "HookFailed", note).await;
                }
            }
            Ok(HookBehaviour::SyncEnforce) => {
                if let Err(not_ok) = context.call(&declared, request, obj, &sent).await {
                    return Some(Outcome::HookStopped {
                        plugin: declared.instance.label(),
                        hook: declared.hook.name.clone(),
                        phase: phase_name(phase as i32),
                        implementation: candidate.implementation.clone(),
                        message: not_ok.message,
                        retry_after: not_ok.retry_after,
                    });
                }
            }
            // `hooks()` only yields known behaviours.
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use kplug_proto::v1::{Capability, Offer};

    use super::*;

    fn kind(kind: &str) -> GroupKind {
        GroupKind {
            group: "example.com".into(),
            kind: kind.into(),
        }
    }

    fn hook(name: &str, base: &str, phase: HookPhase, order: i32) -> Hook {
        Hook {
            name: name.into(),
            base: Some(kind(base)),
            phase: phase as i32,
            behaviour: HookBehaviour::SyncBypass as i32,
            order,
        }
    }

    fn plugin(name: &str, hooks: Vec<Hook>, capable: bool) -> Arc<PluginInstance> {
        let mut capabilities = vec![Capability::Reconcile];
        if capable {
            capabilities.push(Capability::Hooks);
        }
        let mut instance = PluginInstance::fake(name, "1.0", Vec::<Offer>::new(), capabilities);
        instance.hooks = hooks;
        Arc::new(instance)
    }

    fn names(hooks: &[Declared]) -> Vec<String> {
        hooks
            .iter()
            .map(|d| format!("{}/{}", d.instance.name(), d.hook.name))
            .collect()
    }

    #[tokio::test]
    async fn hooks_are_called_by_order_then_plugin_then_name() {
        let before = HookPhase::BeforeReconcile;
        let plugins = vec![
            plugin(
                "zeta",
                vec![
                    hook("b", "Table", before, 0),
                    hook("a", "Table", before, 0),
                    hook("late", "Table", before, 10),
                ],
                true,
            ),
            plugin(
                "alpha",
                vec![
                    hook("x", "Table", before, 0),
                    hook("early", "Table", before, -5),
                    // Another phase, another kind: not called here.
                    hook("after", "Table", HookPhase::AfterReconcile, -100),
                    hook("other", "Column", before, -100),
                ],
                true,
            ),
        ];
        assert_eq!(
            names(&ordered(plugins, &kind("Table"), before)),
            ["alpha/early", "alpha/x", "zeta/a", "zeta/b", "zeta/late"]
        );
    }

    #[tokio::test]
    async fn hooks_of_unknown_phase_or_behaviour_or_without_the_capability_are_never_called() {
        let before = HookPhase::BeforeReconcile;
        let mut newer = hook("newer", "Table", before, 0);
        newer.behaviour = 99;
        let plugins = vec![
            plugin("incapable", vec![hook("h", "Table", before, 0)], false),
            plugin(
                "newer",
                vec![newer, hook("known", "Table", before, 1)],
                true,
            ),
        ];
        assert_eq!(
            names(&ordered(plugins, &kind("Table"), before)),
            ["newer/known"]
        );
    }
}

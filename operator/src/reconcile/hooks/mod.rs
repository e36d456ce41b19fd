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
//! part of the status does ([`crate::written`]). This module calls the
//! hooks; what their answers write, the write module does
//! ([`HookWriter`]).

mod queue;

pub(crate) use queue::HookQueue;

use std::sync::Arc;
use std::time::Duration;

use kplug_proto::v1::{self, GroupKind, Hook, HookBehaviour, HookPhase, HookRequest};
use kube::api::DynamicObject;

use super::write::HookWriter;
use super::{Backend, Core, Outcome, call};
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
    writer: HookWriter,
    metrics: HookMetrics,
}

impl Context {
    fn of<B>(core: &Core<B>) -> Self {
        Self {
            writer: HookWriter::of(core),
            metrics: core.metrics.hooks().clone(),
        }
    }

    /// Calls one hook and has its answer written: its status, its Events;
    /// counts it. `Err` when it was not OK, with why.
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
        self.write(declared, obj, &checked).await.map_err(failed)?;
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

    /// Has a checked answer written: its status, then its Events.
    async fn write(
        &self,
        declared: &Declared,
        obj: &DynamicObject,
        checked: &Checked,
    ) -> Result<(), String> {
        let plugin = declared.instance.name();
        if let Some(status) = &checked.status {
            self.writer
                .status(plugin, &declared.hook.name, obj, status)
                .await
                .map_err(|error| format!("the API server refused its status: {error}"))?;
        }
        self.writer.plugin_events(plugin, &checked.events).await;
        Ok(())
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
    let template = request(obj, phase, candidate, &sent, after.as_ref());
    let context = Context::of(core);
    for declared in hooks {
        let request = HookRequest {
            hook: declared.hook.name.clone(),
            ..template.clone()
        };
        let call = Call {
            context: &context,
            declared,
            request,
            obj,
            sent: &sent,
        };
        match HookBehaviour::try_from(call.declared.hook.behaviour) {
            Ok(HookBehaviour::Async) => call.queue(&core.hook_queue).await,
            Ok(HookBehaviour::SyncBypass) => call.bypassing().await,
            Ok(HookBehaviour::SyncEnforce) => {
                if let Some(stopped) = call.enforcing(phase, candidate).await {
                    return Some(stopped);
                }
            }
            // `hooks()` only yields known behaviours.
            _ => {}
        }
    }
    None
}

/// The request every hook at `phase` gets, but for the hook's name.
fn request(
    obj: &DynamicObject,
    phase: HookPhase,
    candidate: &Candidate,
    sent: &[DynamicObject],
    after: Option<&After<'_>>,
) -> HookRequest {
    // Serializing a DynamicObject cannot fail.
    let json = |o: &DynamicObject| serde_json::to_vec(o).unwrap_or_default();
    let (outcome, message) =
        after.map_or_else(|| (v1::Outcome::Unspecified, String::new()), After::outcome);
    HookRequest {
        hook: String::new(),
        phase: phase as i32,
        implementation: candidate.implementation.clone(),
        object: json(obj),
        extensions: sent.iter().map(json).collect(),
        outcome: outcome as i32,
        message,
    }
}

/// One hook to call now, by its behaviour.
struct Call<'a> {
    context: &'a Context,
    declared: Declared,
    request: HookRequest,
    obj: &'a DynamicObject,
    sent: &'a [DynamicObject],
}

impl Call<'_> {
    /// `async`: onto the queue, never waited for; a full queue drops it.
    async fn queue(self, queue: &HookQueue) {
        let Call {
            context,
            declared,
            request,
            obj,
            sent,
        } = self;
        let job = (
            context.clone(),
            declared.clone(),
            obj.clone(),
            sent.to_vec(),
        );
        let queued = queue.push(async move {
            let (context, declared, obj, sent) = job;
            if let Err(not_ok) = context.call(&declared, request, &obj, &sent).await {
                let note = format!("{} failed: {}", declared.describe(), not_ok.message);
                context.writer.warn(&obj, "HookFailed", note).await;
            }
        });
        if !queued {
            context.metrics.count(declared.id(), "dropped");
            let note = format!(
                "{} was not called: the async hook queue is full (--async-hook-queue); hooks that hang or are slow fill it",
                declared.describe()
            );
            context.writer.warn(obj, "HookDropped", note).await;
        }
    }

    /// `sync-bypass`: waited for; a failure is a Warning, and the step goes on.
    async fn bypassing(self) {
        let result = self
            .context
            .call(&self.declared, self.request, self.obj, self.sent)
            .await;
        if let Err(not_ok) = result {
            let note = format!(
                "{} failed: {}; going on, as the hook asks",
                self.declared.describe(),
                not_ok.message
            );
            self.context.writer.warn(self.obj, "HookFailed", note).await;
        }
    }

    /// `sync-enforce`: waited for; a failure stops the step (`Some`).
    async fn enforcing(self, phase: HookPhase, candidate: &Candidate) -> Option<Outcome> {
        let result = self
            .context
            .call(&self.declared, self.request, self.obj, self.sent)
            .await;
        let not_ok = result.err()?;
        Some(Outcome::HookStopped {
            plugin: self.declared.instance.label(),
            hook: self.declared.hook.name.clone(),
            phase: phase_name(phase as i32),
            implementation: candidate.implementation.clone(),
            message: not_ok.message,
            retry_after: not_ok.retry_after,
        })
    }
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

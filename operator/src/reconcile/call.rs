//! Calling one plugin for one object: the request (the base and the
//! extensions its offer declared), the call and the checks of the answer.
//! Every way it can end is an [`Outcome`]; a valid answer comes back with
//! it, for the write step to apply. Nothing here writes to the API server.

use std::future::Future;
use std::time::{Instant, SystemTime};

use kplug_proto::v1::{self, Capability, FinalizeRequest, GroupKind, ReconcileRequest};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::core::GroupVersionKind;

use super::outcome::{Call, DEFAULT_RETRY};
use super::{Backend, Core, LastCall, Outcome};
use crate::metrics::CallOutcome;
use crate::plugin::{CallError, PluginInstance, same_kind};
use crate::selection::Candidate;
use crate::status::{self, Checked};

/// One call's outcome, and the plugin's answer when it gave a valid one.
pub(super) struct Called {
    /// What the call amounts to.
    pub(super) outcome: Outcome,
    /// The checked answer: the plugin's status, the extensions' statuses,
    /// its conditions and Events, for the write step.
    pub(super) answer: Option<Checked>,
}

impl From<Outcome> for Called {
    fn from(outcome: Outcome) -> Self {
        Self {
            outcome,
            answer: None,
        }
    }
}

/// What a plugin is sent about `obj`.
struct Sent {
    /// The extensions of the kinds the plugin's offer declared.
    extensions: Vec<DynamicObject>,
    /// The base object, as JSON.
    object_json: Vec<u8>,
    /// The extensions, as JSON.
    extensions_json: Vec<Vec<u8>>,
}

impl Sent {
    fn new(
        obj: &DynamicObject,
        instance: &PluginInstance,
        base: &GroupKind,
        implementation: &str,
        found: &[DynamicObject],
    ) -> Self {
        let extensions = extensions_for(instance, base, implementation, found);
        // Serializing a DynamicObject cannot fail.
        let json = |o: &DynamicObject| serde_json::to_vec(o).unwrap_or_default();
        Self {
            object_json: json(obj),
            extensions_json: extensions.iter().map(json).collect(),
            extensions,
        }
    }
}

/// The extensions in `found` of the kinds `instance` declared for
/// `implementation` of `base`; only those are sent.
pub(super) fn extensions_for(
    instance: &PluginInstance,
    base: &GroupKind,
    implementation: &str,
    found: &[DynamicObject],
) -> Vec<DynamicObject> {
    let Some(offer) = instance.offer(base, implementation) else {
        return Vec::new();
    };
    found
        .iter()
        .filter(|o| {
            let Some(gvk) = o
                .types
                .as_ref()
                .and_then(|t| GroupVersionKind::try_from(t).ok())
            else {
                return false;
            };
            let gk = GroupKind {
                group: gvk.group,
                kind: gvk.kind,
            };
            offer.extensions.iter().any(|e| same_kind(e, &gk))
        })
        .cloned()
        .collect()
}

/// Calls `Reconcile` on `candidate`, and checks its answer.
pub(super) async fn reconcile<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    candidate: &Candidate,
    found: &[DynamicObject],
) -> Called {
    let call = Call::Reconcile;
    let plugin = &candidate.plugin;
    let Some(instance) = core.backend.plugin(plugin) else {
        let error = CallError::Gone {
            plugin: plugin.clone(),
        };
        return Outcome::CallFailed { call, error }.into();
    };
    let label = instance.label();
    if !instance.has(Capability::Reconcile) {
        return Outcome::NotSupported { plugin: label }.into();
    }
    let sent = Sent::new(
        obj,
        &instance,
        &core.kind(),
        &candidate.implementation,
        found,
    );
    let children = match observed_children(obj, core, &instance, &candidate.implementation) {
        Some(children) => children,
        None => return Outcome::Stale.into(),
    };
    let request = ReconcileRequest {
        implementation: candidate.implementation.clone(),
        object: sent.object_json,
        extensions: sent.extensions_json,
        children,
    };
    let sent_call = core.backend.reconcile(plugin, request);
    let checked = exchange(core, obj, &instance, call, sent_call, |response| {
        status::check_reconcile(response, obj, &sent.extensions)
    });
    match checked.await {
        Ok(checked) => Called {
            outcome: answered(call, label, &checked),
            answer: Some(checked),
        },
        Err(outcome) => outcome.into(),
    }
}

/// Calls `Finalize` on `instance` for `candidate`'s implementation, and
/// checks its answer.
pub(super) async fn finalize<B: Backend>(
    obj: &DynamicObject,
    core: &Core<B>,
    instance: &PluginInstance,
    candidate: &Candidate,
    found: &[DynamicObject],
) -> Called {
    let call = Call::Finalize;
    let sent = Sent::new(
        obj,
        instance,
        &core.kind(),
        &candidate.implementation,
        found,
    );
    let children = match observed_children(obj, core, instance, &candidate.implementation) {
        Some(children) => children,
        None => return Outcome::Stale.into(),
    };
    let request = FinalizeRequest {
        implementation: candidate.implementation.clone(),
        object: sent.object_json,
        extensions: sent.extensions_json,
        children,
    };
    let sent_call = core.backend.finalize(&candidate.plugin, request);
    let checked = exchange(core, obj, instance, call, sent_call, |response| {
        status::check_finalize(response, obj, &sent.extensions)
    });
    match checked.await {
        Ok(checked) => Called {
            outcome: answered(call, instance.label(), &checked),
            answer: Some(checked),
        },
        Err(outcome) => outcome.into(),
    }
}

/// The children the plugin manages for `obj`, for its request: none when
/// its offer declares no child kinds. Until every child watch has listed,
/// they are not known (`None`), and the call waits ([`Outcome::Stale`]): a
/// plugin sent no children would desire them all again.
fn observed_children<B>(
    obj: &DynamicObject,
    core: &Core<B>,
    instance: &PluginInstance,
    implementation: &str,
) -> Option<Vec<Vec<u8>>> {
    let declares = instance
        .offer(&core.kind(), implementation)
        .is_some_and(|offer| !offer.children.is_empty());
    match &core.children {
        Some(children) if declares => children
            .synced()
            .then(|| children.observed_json(&obj.uid().unwrap_or_default(), &instance.name)),
        _ => Some(Vec::new()),
    }
}

/// Sends one call and checks its answer. The call is timed and recorded as
/// `obj`'s last (`kubectl kplug why`), and an answer is counted in
/// `kplug_plugin_calls_total` (a call without one is counted where it
/// failed, in the transport). No answer, or one the checks refuse, is the
/// outcome.
async fn exchange<B, R>(
    core: &Core<B>,
    obj: &DynamicObject,
    instance: &PluginInstance,
    call: Call,
    sent: impl Future<Output = Result<R, CallError>>,
    check: impl FnOnce(R) -> Result<Checked, String>,
) -> Result<Checked, Outcome> {
    let started = Instant::now();
    let (counted, result) = match sent.await {
        Err(error) => (error.metric(), Err(Outcome::CallFailed { call, error })),
        Ok(response) => {
            let checked = check(response);
            let answer = match &checked {
                Err(_) => CallOutcome::Invalid,
                Ok(checked) => match checked.outcome {
                    v1::Outcome::Ok => CallOutcome::Ok,
                    v1::Outcome::Retry => CallOutcome::Retry,
                    v1::Outcome::Failed | v1::Outcome::Unspecified => CallOutcome::Failed,
                },
            };
            instance.count_answer(call.name(), answer);
            let result = checked.map_err(|problem| Outcome::Invalid {
                call,
                plugin: instance.label(),
                problem,
            });
            (answer, result)
        }
    };
    remember(core, obj, &instance.name, call, counted, started);
    result
}

/// Records the call that just ended as `obj`'s last (`kubectl kplug why`).
fn remember<B>(
    core: &Core<B>,
    obj: &DynamicObject,
    plugin: &str,
    call: Call,
    outcome: CallOutcome,
    started: Instant,
) {
    core.last_calls.record(
        obj.uid().unwrap_or_default(),
        LastCall {
            plugin: plugin.to_owned(),
            call: call.name(),
            outcome: outcome.label(),
            took: started.elapsed(),
            at: SystemTime::now(),
        },
    );
}

/// What a valid answer of plugin `label` amounts to.
fn answered(call: Call, plugin: String, checked: &Checked) -> Outcome {
    let message = checked.message.clone();
    match checked.outcome {
        v1::Outcome::Ok => Outcome::Done {
            call,
            plugin,
            message,
        },
        v1::Outcome::Retry => Outcome::Retry {
            call,
            plugin,
            message,
            after: checked.retry_after.unwrap_or(DEFAULT_RETRY),
        },
        // check_* refuse an unspecified outcome.
        v1::Outcome::Failed | v1::Outcome::Unspecified => Outcome::Failed {
            call,
            plugin,
            message,
        },
    }
}

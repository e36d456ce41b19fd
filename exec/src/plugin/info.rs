//! What the plugin tells the operator about itself, from the manifest.

use std::time::Duration;

use kplug_sidecar::proto::limits::{MAX_ADMISSION_DEADLINE, MAX_CALL_DEADLINE};
use kplug_sidecar::{Call, CallPolicy, Hook, Offer, PluginInfo};

use crate::manifest::{self, Manifest};

/// How much longer than a command's `timeoutSeconds` the operator is asked
/// to wait, so that the answer saying the command was killed (with the end
/// of its stderr) reaches it before its own deadline.
const DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// The plugin's description for the operator, from the manifest: its
/// offers (with their child kinds, which make the SDK advertise CHILDREN),
/// its hooks, the kinds its mutate command patches, and a call policy per
/// command whose deadline is the command's `timeoutSeconds` and one second
/// more (within the operator's bounds), with the admission commands'
/// failure policies. The hooks share one policy (the protocol has one for
/// `Hook`): the longest hook's.
pub fn info(manifest: &Manifest) -> PluginInfo {
    let mut info = manifest.offers.iter().fold(
        PluginInfo::new(&manifest.name, &manifest.version).description(&manifest.description),
        |info, o| {
            let offer = o.extensions.iter().fold(
                Offer::new(&o.base.group, &o.base.kind, &o.implementation),
                |offer, e| offer.extension(&e.group, &e.kind),
            );
            let offer = o
                .children
                .iter()
                .fold(offer, |offer, c| offer.child(&c.api_version, &c.kind));
            info.offer(offer)
        },
    );
    for kind in manifest.mutate.iter().flat_map(|m| &m.kinds) {
        info = info.mutation(&kind.api_version, &kind.kind);
    }
    for policy in call_policies(manifest) {
        info = info.call_policy(policy);
    }
    for h in &manifest.hooks {
        let behaviour = match h.behaviour {
            manifest::Behaviour::SyncEnforce => kplug_sidecar::Behaviour::SyncEnforce,
            manifest::Behaviour::SyncBypass => kplug_sidecar::Behaviour::SyncBypass,
            manifest::Behaviour::Async => kplug_sidecar::Behaviour::Async,
        };
        info = info.hook(
            Hook::new(&h.name, &h.base.group, &h.base.kind, h.phase, behaviour).order(h.order),
        );
    }
    info
}

/// A call policy per command: a deadline of the command's `timeoutSeconds`
/// and one second more (within the operator's bounds), with the admission
/// commands' failure policies; the hooks share the longest hook's. Mutate
/// has one too: the operator's default deadline would otherwise be shorter
/// or longer than the command's own, and an answer that says the command
/// was killed is more use than the operator's timeout.
fn call_policies(manifest: &Manifest) -> Vec<CallPolicy> {
    let mut policies = vec![
        CallPolicy::new(Call::Reconcile)
            .deadline(deadline(manifest.reconcile.timeout(), MAX_CALL_DEADLINE)),
    ];
    if let Some(spec) = &manifest.finalize {
        policies.push(
            CallPolicy::new(Call::Finalize).deadline(deadline(spec.timeout(), MAX_CALL_DEADLINE)),
        );
    }
    for (call, spec) in [
        (Call::Validate, &manifest.validate),
        (Call::Default, &manifest.default),
    ] {
        let Some(spec) = spec else { continue };
        let mut policy = CallPolicy::new(call).deadline(deadline(
            spec.command_spec().timeout(),
            MAX_ADMISSION_DEADLINE,
        ));
        if let Some(failure_policy) = spec.failure_policy {
            policy = policy.failure_policy(match failure_policy {
                manifest::FailurePolicy::Fail => kplug_sidecar::FailurePolicy::Fail,
                manifest::FailurePolicy::Ignore => kplug_sidecar::FailurePolicy::Ignore,
            });
        }
        policies.push(policy);
    }
    if let Some(longest) = manifest
        .hooks
        .iter()
        .map(|h| h.command_spec().timeout())
        .max()
    {
        policies.push(CallPolicy::new(Call::Hook).deadline(deadline(longest, MAX_CALL_DEADLINE)));
    }
    if let Some(spec) = &manifest.mutate {
        policies.push(
            CallPolicy::new(Call::Mutate)
                .deadline(deadline(spec.command_spec().timeout(), MAX_CALL_DEADLINE)),
        );
    }
    policies
}

/// The time the operator may wait for a command that may run `timeout`.
fn deadline(timeout: Duration, max: Duration) -> Duration {
    (timeout + DEADLINE_MARGIN).min(max)
}

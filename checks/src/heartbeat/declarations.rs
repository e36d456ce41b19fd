//! The hooks and call policies a plugin declares, and their agreement
//! between its heartbeat and its `GetInfo`.

use kplug_proto::limits;
use kplug_proto::rules::validate_plugin_name;
use kplug_proto::v1::{Call, CallPolicy, Hook};

use super::DeclarationError;

/// The checks on the hooks and call policies a plugin declares, in its
/// heartbeat and again in `GetInfo`: bounded counts; hooks with a unique
/// DNS-label name, a base kind, a phase and a behaviour; at most one
/// policy per call, each naming its call, with a positive deadline when it
/// sets one.
///
/// Phases, behaviours and calls this operator does not know (a newer
/// plugin) are not refused: such a hook is never called, such a policy
/// never applies. Only the zero value, a field left unset, is refused.
///
/// # Errors
/// The first rule the declarations break: the counts first, then each
/// hook, then each policy.
pub fn check_declarations(
    name: &str,
    hooks: &[Hook],
    policies: &[CallPolicy],
) -> Result<(), DeclarationError> {
    let too_large = |field: &'static str, got: usize, max: usize| DeclarationError::TooLarge {
        name: name.to_owned(),
        field,
        got,
        max,
    };
    if hooks.len() > limits::MAX_HOOKS {
        return Err(too_large("hooks", hooks.len(), limits::MAX_HOOKS));
    }
    if policies.len() > limits::MAX_CALL_POLICIES {
        return Err(too_large(
            "call_policies",
            policies.len(),
            limits::MAX_CALL_POLICIES,
        ));
    }
    check_hooks(name, hooks)?;
    check_policies(name, policies)
}

/// Each hook: a unique DNS-label name, a base kind, a phase and a
/// behaviour.
fn check_hooks(name: &str, hooks: &[Hook]) -> Result<(), DeclarationError> {
    for (i, hook) in hooks.iter().enumerate() {
        let refuse = |problem| DeclarationError::Hook {
            name: name.to_owned(),
            hook: shown(&hook.name),
            problem,
        };
        // A hook's name is a DNS label for the same reasons as a plugin's:
        // it becomes part of conditions, Events and metric labels.
        if validate_plugin_name(&hook.name).is_err() {
            return Err(refuse(
                "the name must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters",
            ));
        }
        if hooks[..i].iter().any(|h| h.name == hook.name) {
            return Err(refuse(
                "declared twice; hook names are unique within a plugin",
            ));
        }
        if hook.base.as_ref().is_none_or(|b| b.kind.is_empty()) {
            return Err(refuse("no base kind; a hook names the kind it is for"));
        }
        if hook.phase == 0 {
            return Err(refuse(
                "no phase; choose before-reconcile, after-reconcile, before-finalize or after-finalize",
            ));
        }
        if hook.behaviour == 0 {
            return Err(refuse(
                "no behaviour; choose sync-enforce, sync-bypass or async",
            ));
        }
    }
    Ok(())
}

/// Each call policy: naming its call, one per call, with a positive
/// deadline when it sets one.
fn check_policies(name: &str, policies: &[CallPolicy]) -> Result<(), DeclarationError> {
    for (i, policy) in policies.iter().enumerate() {
        let refuse = |problem| DeclarationError::CallPolicy {
            name: name.to_owned(),
            call: Call::try_from(policy.call).map_or_else(
                |_| format!("call {}", policy.call),
                |c| c.as_str_name().to_owned(),
            ),
            problem,
        };
        if policy.call == 0 {
            return Err(refuse("no call; a policy names the call it is for"));
        }
        if policies[..i].iter().any(|p| p.call == policy.call) {
            return Err(refuse("declared twice; one policy per call"));
        }
        if let Some(deadline) = &policy.deadline {
            let positive = deadline.seconds >= 0
                && (0..1_000_000_000).contains(&deadline.nanos)
                && (deadline.seconds > 0 || deadline.nanos > 0);
            if !positive {
                return Err(refuse(
                    "the deadline must be positive (leave it unset for the operator's default)",
                ));
            }
        }
    }
    Ok(())
}

/// `name` quoted for a message, cut after 80 characters: a refused name can
/// be as long as the registry's message bound.
fn shown(name: &str) -> String {
    const SHOWN: usize = 80;
    match name.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{:?}…", &name[..cut]),
        None => format!("{name:?}"),
    }
}

/// Refuses a `GetInfo` whose hooks or call policies differ from the
/// heartbeat's: the operator would otherwise act on one description and
/// show another.
///
/// # Errors
/// [`DeclarationError::Disagree`], naming what differs.
pub fn check_agreement(
    name: &str,
    heartbeat: (&[Hook], &[CallPolicy]),
    info: (&[Hook], &[CallPolicy]),
) -> Result<(), DeclarationError> {
    let disagree = |field| DeclarationError::Disagree {
        name: name.to_owned(),
        field,
    };
    if heartbeat.0 != info.0 {
        return Err(disagree("hooks"));
    }
    if heartbeat.1 != info.1 {
        return Err(disagree("call policies"));
    }
    Ok(())
}

//! [`CallPolicies`]: how long the operator waits for each call to one
//! plugin, and what admission does when a call fails: the plugin's declared
//! [`CallPolicy`]s, within the bounds the operator sets.
//!
//! A plugin may ask for a deadline per call, but never for more than the
//! operator grants (`kplug_proto::limits`: [1 s, 10 min]; Validate and
//! Default at most 10 s, since the API server waits at most 30 s for a
//! webhook). A deadline that passes is an outcome of that call, never a sign
//! that the plugin is gone.

use std::time::Duration;

use kplug_proto::limits::{MAX_ADMISSION_DEADLINE, MAX_CALL_DEADLINE, MIN_CALL_DEADLINE};
use kplug_proto::v1::{Call, CallPolicy, FailurePolicy};

/// The operator's defaults, used for a call the plugin declared no
/// deadline for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Defaults {
    /// `Reconcile`, `Finalize` and `Hook` (`--call-timeout`).
    pub(crate) call: Duration,
    /// `Validate` and `Default` (`--admission-call-timeout`).
    pub(crate) admission: Duration,
}

/// One plugin's deadlines and admission failure policies, resolved once at
/// registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallPolicies {
    reconcile: Duration,
    finalize: Duration,
    hook: Duration,
    mutate: Duration,
    validate: Duration,
    default: Duration,
    validate_failure: FailurePolicy,
    default_failure: FailurePolicy,
}

impl CallPolicies {
    /// Resolves `declared` (already checked at registration: one per call,
    /// positive deadlines) against the operator's `defaults`. Calls this
    /// operator does not know are ignored.
    pub(crate) fn resolve(declared: &[CallPolicy], defaults: Defaults) -> Self {
        let find = |call: Call| declared.iter().find(|p| p.call == call as i32);
        let deadline = |call: Call, default: Duration, max: Duration| {
            let asked = find(call)
                .and_then(|p| p.deadline)
                .and_then(|d| Duration::try_from(d).ok());
            asked.unwrap_or(default).clamp(MIN_CALL_DEADLINE, max)
        };
        let failure = |call: Call| {
            find(call)
                .and_then(|p| FailurePolicy::try_from(p.failure_policy).ok())
                .unwrap_or(FailurePolicy::Unspecified)
        };
        Self {
            reconcile: deadline(Call::Reconcile, defaults.call, MAX_CALL_DEADLINE),
            finalize: deadline(Call::Finalize, defaults.call, MAX_CALL_DEADLINE),
            hook: deadline(Call::Hook, defaults.call, MAX_CALL_DEADLINE),
            mutate: deadline(Call::Mutate, defaults.call, MAX_CALL_DEADLINE),
            validate: deadline(Call::Validate, defaults.admission, MAX_ADMISSION_DEADLINE),
            default: deadline(Call::Default, defaults.admission, MAX_ADMISSION_DEADLINE),
            validate_failure: failure(Call::Validate),
            default_failure: failure(Call::Default),
        }
    }

    /// How long the operator waits for `call`.
    pub fn deadline(&self, call: Call) -> Duration {
        match call {
            Call::Finalize => self.finalize,
            Call::Hook => self.hook,
            Call::Validate => self.validate,
            Call::Default => self.default,
            Call::Mutate => self.mutate,
            Call::Reconcile | Call::Unspecified => self.reconcile,
        }
    }

    /// What admission does when `call` (Validate or Default) fails:
    /// `Unspecified` means the operator's `--webhook-failure-policy`.
    pub fn failure_policy(&self, call: Call) -> FailurePolicy {
        match call {
            Call::Validate => self.validate_failure,
            Call::Default => self.default_failure,
            _ => FailurePolicy::Unspecified,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: Defaults = Defaults {
        call: Duration::from_secs(30),
        admission: Duration::from_secs(5),
    };

    fn policy(call: Call, seconds: Option<i64>, failure: FailurePolicy) -> CallPolicy {
        CallPolicy {
            call: call as i32,
            deadline: seconds.map(|seconds| prost_types::Duration { seconds, nanos: 0 }),
            failure_policy: failure as i32,
        }
    }

    #[test]
    fn undeclared_calls_get_the_operators_defaults() {
        let p = CallPolicies::resolve(&[], DEFAULTS);
        for call in [Call::Reconcile, Call::Finalize, Call::Hook] {
            assert_eq!(p.deadline(call), Duration::from_secs(30), "{call:?}");
        }
        for call in [Call::Validate, Call::Default] {
            assert_eq!(p.deadline(call), Duration::from_secs(5), "{call:?}");
            assert_eq!(p.failure_policy(call), FailurePolicy::Unspecified);
        }
    }

    #[test]
    fn declared_deadlines_are_clamped_to_the_operators_bounds() {
        let p = CallPolicies::resolve(
            &[
                policy(Call::Reconcile, Some(2), FailurePolicy::Unspecified),
                policy(Call::Finalize, Some(100_000), FailurePolicy::Unspecified),
                policy(Call::Validate, Some(60), FailurePolicy::Fail),
                policy(Call::Default, None, FailurePolicy::Ignore),
                CallPolicy {
                    call: Call::Hook as i32,
                    deadline: Some(prost_types::Duration {
                        seconds: 0,
                        nanos: 1_000,
                    }),
                    failure_policy: 0,
                },
                // A call this operator does not know is ignored.
                CallPolicy {
                    call: 99,
                    deadline: Some(prost_types::Duration {
                        seconds: 9,
                        nanos: 0,
                    }),
                    failure_policy: 0,
                },
            ],
            DEFAULTS,
        );
        assert_eq!(p.deadline(Call::Reconcile), Duration::from_secs(2));
        assert_eq!(p.deadline(Call::Finalize), MAX_CALL_DEADLINE);
        assert_eq!(p.deadline(Call::Hook), MIN_CALL_DEADLINE);
        assert_eq!(p.deadline(Call::Validate), MAX_ADMISSION_DEADLINE);
        assert_eq!(p.deadline(Call::Default), Duration::from_secs(5));
        assert_eq!(p.failure_policy(Call::Validate), FailurePolicy::Fail);
        assert_eq!(p.failure_policy(Call::Default), FailurePolicy::Ignore);
        assert_eq!(
            p.failure_policy(Call::Reconcile),
            FailurePolicy::Unspecified
        );
    }

    #[test]
    fn an_operator_default_outside_the_bounds_is_clamped_too() {
        let p = CallPolicies::resolve(
            &[],
            Defaults {
                call: Duration::from_millis(10),
                admission: Duration::from_secs(29),
            },
        );
        assert_eq!(p.deadline(Call::Reconcile), MIN_CALL_DEADLINE);
        assert_eq!(p.deadline(Call::Validate), MAX_ADMISSION_DEADLINE);
    }
}

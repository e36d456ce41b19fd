//! The named checks, each with the protocol rule it holds a plugin to.
//!
//! Names are stable within a protocol version ([`PROTOCOL`](kplug_proto::PROTOCOL)):
//! scripts may pass them to `--only`. The rules quote `docs/protocol.md`,
//! whose section each names, so a failure says what to read.

/// One check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    /// Its name, for `--only` and the report.
    pub name: &'static str,
    /// The suite it belongs to.
    pub suite: &'static str,
    /// The rule, as the protocol states it.
    pub rule: &'static str,
    /// Whether a failure makes the kit exit non-zero.
    pub required: bool,
}

const fn check(name: &'static str, suite: &'static str, rule: &'static str) -> Check {
    Check {
        name,
        suite,
        rule,
        required: true,
    }
}

/// Every check, in the order the kit runs them.
pub const CHECKS: &[Check] = &[
    check(
        "backoff",
        "registration",
        "after the n-th failed heartbeat in a row, wait min(interval, 100 ms × 2^(n−1)) × (1 − 0.1·u), u in [0, 1), before the next (docs/protocol.md, Heartbeat)",
    ),
    check(
        "handshake",
        "registration",
        "the first heartbeat carries a DNS-label name, a fresh instance id, protocol kplug.v1, bounded version and description, hooks and call policies the operator accepts (hooks only with CAPABILITY_HOOKS), and socket plugins/<name>/plugin.sock, already served; GetInfo on that socket agrees with it, hooks and call policies included (Heartbeat; Handshake; Hooks; Call policies)",
    ),
    check(
        "probe",
        "registration",
        "Probe answers with ready and a message, within the call deadline (Probe)",
    ),
    check(
        "heartbeat-content",
        "registration",
        "every heartbeat carries the full description, unchanged: name, version, instance id, protocol, socket, offers, capabilities, hooks, call policies (Heartbeat)",
    ),
    check(
        "heartbeat-interval",
        "registration",
        "after the operator's first response, heartbeat at the interval it returns (Heartbeat)",
    ),
    check(
        "reconcile",
        "calls",
        "a Reconcile of each offer's base kind with its extensions gets a valid answer: OK, RETRY or FAILED; a status that is a JSON object without the operator's keys; statuses, conditions and events the operator accepts (Reconcile and Finalize)",
    ),
    check(
        "finalize",
        "calls",
        "a plugin with the FINALIZE capability gives a valid answer to Finalize (Reconcile and Finalize)",
    ),
    check(
        "mutate",
        "calls",
        "a plugin with CAPABILITY_MUTATE answers Mutate of each kind it declares with a JSON Patch limited to /spec and single labels and annotations outside kplug.io/, and answers the same request twice with the same patch and warnings: the operator judges drift by the mutated object (Mutate)",
    ),
    check(
        "bad-input",
        "calls",
        "an object that is not JSON gets OUTCOME_FAILED with a message, not a gRPC error, and the plugin goes on serving (Reconcile and Finalize)",
    ),
    check(
        "message-limit",
        "calls",
        "the plugin accepts messages of up to 64 MiB on its socket, not gRPC's 4 MiB default (Limits)",
    ),
    check(
        "cases",
        "calls",
        "the SDK's conformance plugin answers every case of the --cases file as specified (sidecar-sdk/conformance/README.md)",
    ),
    check(
        "live-socket",
        "sockets",
        "a socket another live instance serves is never stolen: a second instance fails at start-up and the first keeps serving (Plugin start-up, step 2)",
    ),
    check(
        "reregister",
        "registration",
        "when the operator restarts, keep heartbeating and register with the new one, with the same instance id (Heartbeat: operator restart)",
    ),
    check(
        "non-socket-file",
        "sockets",
        "a file at the socket path that is not a socket is never deleted: start-up fails (Plugin start-up, step 2)",
    ),
    check(
        "stale-socket",
        "sockets",
        "a socket left by a killed process (connect refused) is removed, and the plugin binds and registers (Plugin start-up, step 2)",
    ),
    check(
        "restart",
        "registration",
        "each process start heartbeats with a fresh instance id (Heartbeat)",
    ),
    check(
        "unregister",
        "shutdown",
        "on SIGTERM, first call Unregister with the plugin's name and instance id (Shutdown, step 1)",
    ),
    check(
        "drain",
        "shutdown",
        "until Unregister is answered the plugin serves calls, and calls in flight finish (Shutdown, steps 1 and 2)",
    ),
    check(
        "exit",
        "shutdown",
        "after Unregister, remove the socket and exit 0 within the grace period, 10 s (Shutdown, step 3)",
    ),
];

/// The check called `name`.
pub fn find(name: &str) -> Option<&'static Check> {
    CHECKS.iter().find(|c| c.name == name)
}

/// What a check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The plugin keeps the rule; what was seen.
    Pass(String),
    /// The plugin breaks the rule; how.
    Fail(String),
    /// Not run; why.
    Skip(String),
}

impl Verdict {
    /// A pass, or a failure with `problem`, from a check's finding.
    pub fn from_result(result: Result<String, String>) -> Self {
        match result {
            Ok(seen) => Self::Pass(seen),
            Err(problem) => Self::Fail(problem),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_rule_names_its_section() {
        let mut names: Vec<_> = CHECKS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CHECKS.len());
        for c in CHECKS {
            assert!(
                c.rule.ends_with(')'),
                "{}: the rule names no section",
                c.name
            );
            assert_eq!(find(c.name), Some(c));
        }
    }
}

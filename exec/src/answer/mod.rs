//! A command's answer: JSON on stdout, or the exit code alone.
//!
//! Reconcile, Finalize and hooks ([`response`], [`hook_response`]):
//!
//! - Exit 0 with JSON on stdout: the response it describes, with the gRPC
//!   response's fields in camelCase (the shape of the Rust SDK's
//!   `Response::to_json`):
//!   `{"outcome": "OK"|"RETRY"|"FAILED", "message", "retryAfterSeconds",
//!   "status": {...}, "extensionStatuses": [{"target": {"kind", "name"},
//!   "status": {...}}], "conditions": [{"type", "status": "True"|"False"|"Unknown",
//!   "reason", "message"}], "events": [{"type": "Normal"|"Warning", "reason",
//!   "message", "regarding": {"kind", "name"}}], "children": [{...}]}`;
//!   every field may be left out (`outcome` defaults to OK). `children`
//!   absent leaves the children as they are; present (even empty), it is
//!   the whole set the plugin desires, each a Kubernetes object.
//!   Finalize answers only `outcome`, `message`, `retryAfterSeconds`,
//!   `events` and `children` (the other fields are read and not sent).
//! - Exit 0 with nothing on stdout: OK.
//! - Exit 75 (`EX_TEMPFAIL`): RETRY after the default delay, with the end of
//!   stderr as the message.
//! - Any other exit, or a signal: FAILED, with the end of stderr.
//!
//! A hook answers the same way, but only `outcome`, `message`,
//! `retryAfterSeconds`, `status` and `events`: conditions, extension
//! statuses and children are not a hook's to set.
//!
//! Validate ([`validation`]):
//!
//! - Exit 0 with nothing on stdout: allowed.
//! - Exit 0 with `{"errors": [{"path", "value", "message"}], "warnings":
//!   [...]}`: refused when `errors` is not empty (`value` is any JSON value,
//!   or left out).
//! - Exit 1 to 125, other than 75: refused as a whole, with the end of
//!   stderr as the message.
//! - Exit 75: the command could not decide. The call fails, and so do
//!   exits of 126 and above (a program that could not be run, or died of a
//!   signal), a signal, a timeout and an answer that cannot be used: the
//!   plugin's failure policy then admits or refuses the object.
//!
//! Default ([`defaults`]):
//!
//! - Exit 0 with nothing on stdout: nothing to default.
//! - Exit 0 with `{"patch": [{"op": "add"|"replace"|"remove", "path",
//!   "value"}], "warnings": [...]}`: the JSON Patch to apply.
//! - Any other exit, a signal or a timeout: the call fails (failure
//!   policy).
//!
//! Mutate ([`mutation`]):
//!
//! - Exit 0 with nothing on stdout: no change.
//! - Exit 0 with `{"patch": [...], "warnings": [...]}`: the JSON Patch
//!   against the object sent, as for default, but only under `/spec` and
//!   single labels and annotations outside `kplug.io/`.
//! - Any other exit, a signal, a timeout or a patch outside those paths:
//!   the call fails with a gRPC error, and the operator holds the object
//!   (`WaitingForMutator`) until a call succeeds.

mod admission;
mod call;
mod mutate;
mod patch;

pub use admission::{defaults, validation};
pub use call::{hook_response, response};
pub use mutate::mutation;

use std::time::Duration;

use serde::de::DeserializeOwned;

/// The exit code that asks to be called again later (sysexits'
/// `EX_TEMPFAIL`).
pub const EXIT_RETRY: i32 = 75;

/// How a run that neither exited 0 nor timed out ended, for messages.
fn how(code: Option<i32>) -> String {
    code.map_or_else(
        || "was killed by a signal".to_owned(),
        |c| format!("exited {c}"),
    )
}

/// The message of a run past its deadline.
fn timed_out(program: &str, after: Duration, stderr_tail: &str) -> String {
    with_tail(
        format!(
            "{program} ran past its timeout of {} s and was killed with its process group (timeoutSeconds in the manifest)",
            after.as_secs_f64()
        ),
        stderr_tail,
    )
}

/// Whether a command printed nothing but whitespace: then its exit code
/// answers alone.
fn printed_nothing(stdout: &[u8]) -> bool {
    stdout.iter().all(u8::is_ascii_whitespace)
}

/// The answer a command that exited 0 printed, parsed as `T`: `None` when it
/// printed nothing, or the message `not_parsed` makes of the parse error.
fn stdout_answer<T: DeserializeOwned>(
    stdout: &[u8],
    not_parsed: impl FnOnce(serde_json::Error) -> String,
) -> Result<Option<T>, String> {
    if printed_nothing(stdout) {
        return Ok(None);
    }
    serde_json::from_slice(stdout).map(Some).map_err(not_parsed)
}

/// `message: stderr tail`, or the message alone.
fn with_tail(message: String, tail: &str) -> String {
    if tail.is_empty() {
        message
    } else {
        format!("{message}: {tail}")
    }
}

#[cfg(test)]
mod tests {
    use kplug_sidecar::Request;
    use serde_json::{Value, json};

    use super::*;
    use crate::command::Finished;

    fn request() -> Request {
        let object = |kind: &str| json!({"apiVersion": "myorg.org/v1", "kind": kind, "metadata": {"name": "users", "namespace": "shop"}, "spec": {}});
        Request::from_json(
            "SQLiteShell",
            object("DatabaseTable"),
            [object("DatabaseTableSqliteExtension")],
        )
        .unwrap()
    }

    fn exited(code: i32, stdout: &str, stderr: &str) -> Finished {
        Finished::Exited {
            code: Some(code),
            stdout: stdout.as_bytes().to_vec(),
            stderr_tail: stderr.to_owned(),
        }
    }

    fn answer(finished: Finished) -> Value {
        response("./reconcile.sh", &request(), finished).to_json()
    }

    #[test]
    fn the_exit_code_alone_answers() {
        assert_eq!(answer(exited(0, "", ""))["outcome"], "OK");
        let retry = answer(exited(75, "", "database locked"));
        assert_eq!(retry["outcome"], "RETRY");
        assert_eq!(retry["retryAfterSeconds"], 10.0);
        assert_eq!(
            retry["message"],
            "./reconcile.sh asked to retry (exit 75): database locked"
        );
        let failed = answer(exited(3, "{\"ignored\": true}", "no such column"));
        assert_eq!(failed["outcome"], "FAILED");
        assert_eq!(failed["message"], "./reconcile.sh exited 3: no such column");
    }

    #[test]
    fn json_on_stdout_is_the_response() {
        let out = json!({
            "outcome": "OK", "message": "table ready",
            "status": {"columns": 2},
            "extensionStatuses": [{"target": {"kind": "DatabaseTableSqliteExtension", "name": "users"}, "status": {"file": "/data/db"}}],
            "conditions": [{"type": "SchemaApplied", "status": "True", "reason": "Applied"}],
            "events": [{"reason": "Created", "message": "created users"},
                       {"type": "Warning", "reason": "Slow", "regarding": {"kind": "DatabaseTableSqliteExtension", "name": "users"}}],
        });
        let got = answer(exited(0, &out.to_string(), ""));
        assert_eq!(got["outcome"], "OK");
        assert_eq!(got["message"], "table ready");
        assert_eq!(got["status"], json!({"columns": 2}));
        assert_eq!(
            got["extensionStatuses"][0]["status"],
            json!({"file": "/data/db"})
        );
        assert_eq!(got["extensionStatuses"][0]["target"]["namespace"], "shop");
        assert_eq!(got["conditions"][0]["status"], "True");
        assert_eq!(got["events"][1]["type"], "Warning");
        let retry = answer(exited(
            0,
            r#"{"outcome": "RETRY", "retryAfterSeconds": 2.5}"#,
            "",
        ));
        assert_eq!(retry["retryAfterSeconds"], 2.5);
    }

    #[test]
    fn a_bad_answer_fails_with_what_is_wrong() {
        let bad = |stdout: &str| {
            answer(exited(0, stdout, ""))["message"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert!(bad("table ready").contains("not a JSON response"));
        assert!(bad(r#"{"outcome": "DONE"}"#).contains(r#"outcome "DONE""#));
        assert!(bad(r#"{"stauts": {}}"#).contains("stauts"));
        assert!(bad(r#"{"extensionStatuses": [{"target": {"kind": "Secret", "name": "x"}, "status": {}}]}"#).contains("Secret x was not sent"));
        assert!(bad(r#"{"status": {"conditions": []}}"#).contains("reserved"));
        // In the words every SDK uses for it.
        assert_eq!(
            bad(r#"{"children": [{"kind": "ConfigMap"}, 42]}"#),
            "./reconcile.sh answered: children[1] is a number; a child must be a JSON object: \
             a Kubernetes object with apiVersion, kind and metadata.name"
        );
    }

    #[test]
    fn a_timeout_is_a_failure_that_says_so() {
        let got = answer(Finished::TimedOut {
            after: Duration::from_secs(2),
            stderr_tail: "copying".into(),
        });
        assert_eq!(got["outcome"], "FAILED");
        assert!(
            got["message"]
                .as_str()
                .unwrap()
                .contains("ran past its timeout of 2 s")
        );
        assert!(got["message"].as_str().unwrap().ends_with(": copying"));
    }

    fn program_validation(finished: Finished) -> Result<Value, String> {
        validation("./validate.sh", finished).map(|v| v.to_json())
    }

    #[test]
    fn a_validation_comes_from_json_or_the_exit_code() {
        assert_eq!(
            program_validation(exited(0, " \n", "")).unwrap()["allowed"],
            true
        );
        let out = json!({
            "errors": [{"path": "spec.columns[1].type", "value": "varchar2", "message": "unknown type"},
                       {"path": "spec.name", "message": "required"}],
            "warnings": ["spec.comment is ignored"],
        });
        let refused = program_validation(exited(0, &out.to_string(), "")).unwrap();
        assert_eq!(refused["allowed"], false);
        assert_eq!(refused["errors"][0]["value"], "\"varchar2\"");
        assert_eq!(refused["errors"][1]["value"], "");
        assert_eq!(refused["warnings"], json!(["spec.comment is ignored"]));
        // Exit 1 to 125 (not 75) refuses the object as a whole.
        let whole = program_validation(exited(1, "", "tables named tmp are not allowed")).unwrap();
        assert_eq!(
            whole["errors"],
            json!([{"path": "", "value": "", "message": "tables named tmp are not allowed"}])
        );
        let silent = program_validation(exited(3, "", "")).unwrap();
        assert_eq!(
            silent["errors"][0]["message"],
            "refused by ./validate.sh (exit 3, nothing on stderr)"
        );
    }

    #[test]
    fn a_validate_command_that_cannot_decide_fails_the_call() {
        let e = program_validation(exited(75, "", "the catalogue is unreachable")).unwrap_err();
        assert_eq!(
            e,
            "./validate.sh could not decide (exit 75): the catalogue is unreachable"
        );
        let e = program_validation(exited(127, "", "jq: not found")).unwrap_err();
        assert!(
            e.starts_with("./validate.sh exited 127 (126 and above"),
            "{e}"
        );
        assert!(e.ends_with(": jq: not found"), "{e}");
        let e = program_validation(Finished::Exited {
            code: None,
            stdout: Vec::new(),
            stderr_tail: String::new(),
        })
        .unwrap_err();
        assert!(e.contains("was killed by a signal"), "{e}");
        let e = program_validation(Finished::TimedOut {
            after: Duration::from_secs(1),
            stderr_tail: String::new(),
        })
        .unwrap_err();
        assert!(e.contains("ran past its timeout of 1 s"), "{e}");
        let e = program_validation(exited(0, r#"{"allowed": false}"#, "")).unwrap_err();
        assert!(
            e.contains("not a validation") && e.contains("allowed"),
            "{e}"
        );
    }

    #[test]
    fn defaults_come_from_a_json_patch() {
        let defaults =
            |stdout: &str, code: i32| defaults("./default.sh", exited(code, stdout, "no"));
        assert!(defaults("", 0).unwrap().is_empty());
        let out = json!({
            "patch": [{"op": "add", "path": "/spec/engine", "value": "InnoDB"},
                      {"op": "replace", "path": "/metadata/labels/a", "value": "b"},
                      {"op": "remove", "path": "/metadata/annotations/c"}],
            "warnings": ["defaulted engine"],
        });
        let got = defaults(&out.to_string(), 0).unwrap().to_json();
        assert_eq!(got["patch"], out["patch"]);
        assert_eq!(got["warnings"], out["warnings"]);
        let outside = defaults(
            r#"{"patch": [{"op": "add", "path": "/status/x", "value": 1}]}"#,
            0,
        );
        assert!(
            outside.unwrap().to_json()["error"]
                .as_str()
                .unwrap()
                .contains("\"/status/x\"")
        );
        let bad = |stdout: &str| defaults(stdout, 0).unwrap_err();
        assert!(
            bad(r#"{"patch": [{"op": "move", "path": "/spec/a", "from": "/spec/b"}]}"#)
                .contains("from")
        );
        assert!(bad(r#"{"patch": [{"op": "copy", "path": "/spec/a"}]}"#).contains(r#"op "copy""#));
        assert!(bad(r#"{"patch": [{"op": "add", "path": "/spec/a"}]}"#).contains("has no value"));
        assert!(bad("engine=InnoDB").contains("not defaults"));
        assert_eq!(defaults("", 2).unwrap_err(), "./default.sh exited 2: no");
    }

    #[test]
    fn a_hook_answers_like_reconcile_without_conditions() {
        let hook = |finished| hook_response("./hook.sh", &request(), finished).to_json();
        assert_eq!(hook(exited(0, "", ""))["outcome"], "OK");
        assert_eq!(hook(exited(75, "", "busy"))["outcome"], "RETRY");
        assert_eq!(
            hook(exited(1, "", "no space"))["message"],
            "./hook.sh exited 1: no space"
        );
        let got = hook(exited(
            0,
            r#"{"outcome": "RETRY", "retryAfterSeconds": 3, "message": "copying", "status": {"lastBackup": "/b"}, "events": [{"reason": "BackedUp"}]}"#,
            "",
        ));
        assert_eq!(got["outcome"], "RETRY");
        assert_eq!(got["retryAfterSeconds"], 3.0);
        assert_eq!(got["status"], json!({"lastBackup": "/b"}));
        assert_eq!(got["events"][0]["reason"], "BackedUp");
        let conditions = hook(exited(0, r#"{"conditions": []}"#, ""));
        assert_eq!(conditions["outcome"], "FAILED");
        let message = conditions["message"].as_str().unwrap();
        assert!(
            message.contains("not a hook's response") && message.contains("conditions"),
            "{message}"
        );
    }
}

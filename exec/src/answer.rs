//! A command's answer: JSON on stdout, or the exit code alone.
//!
//! - Exit 0 with JSON on stdout: the response it describes, with the gRPC
//!   response's fields in camelCase (the shape of the Rust SDK's
//!   `Response::to_json`):
//!   `{"outcome": "OK"|"RETRY"|"FAILED", "message", "retryAfterSeconds",
//!   "status": {...}, "extensionStatuses": [{"target": {"kind", "name"},
//!   "status": {...}}], "conditions": [{"type", "status": "True"|"False"|"Unknown",
//!   "reason", "message"}], "events": [{"type": "Normal"|"Warning", "reason",
//!   "message", "regarding": {"kind", "name"}}]}`; every field may be left
//!   out (`outcome` defaults to OK).
//! - Exit 0 with nothing on stdout: OK.
//! - Exit 75 (`EX_TEMPFAIL`): RETRY after the default delay, with the end of
//!   stderr as the message.
//! - Any other exit, or a signal: FAILED, with the end of stderr.

use std::time::Duration;

use kplug_sidecar::{Object, Request, Response};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::command::Finished;

/// The exit code that asks to be called again later (sysexits'
/// `EX_TEMPFAIL`).
pub const EXIT_RETRY: i32 = 75;
/// The delay of a RETRY without `retryAfterSeconds`, as in every SDK.
const DEFAULT_RETRY: Duration = Duration::from_secs(10);

/// The JSON a command prints.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    retry_after_seconds: Option<f64>,
    #[serde(default)]
    status: Option<Map<String, Value>>,
    #[serde(default)]
    extension_statuses: Vec<ExtensionStatus>,
    #[serde(default)]
    conditions: Vec<ConditionAnswer>,
    #[serde(default)]
    events: Vec<EventAnswer>,
}

/// Which object: the kind and name of one that was sent (namespace and
/// apiVersion may be given too, and must then match).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Target {
    kind: String,
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    api_version: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtensionStatus {
    target: Target,
    status: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConditionAnswer {
    #[serde(rename = "type")]
    type_: String,
    status: Value,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventAnswer {
    #[serde(rename = "type", default)]
    type_: Option<String>,
    reason: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    regarding: Option<Target>,
}

/// The response to send for how `program`'s run for `request` ended.
pub fn response(program: &str, request: &Request, finished: Finished) -> Response {
    match finished {
        Finished::TimedOut { after, stderr_tail } => Response::failed(with_tail(
            format!(
                "{program} ran past its timeout of {} s and was killed with its process group (timeoutSeconds in the manifest)",
                after.as_secs_f64()
            ),
            &stderr_tail,
        )),
        Finished::Exited {
            code: Some(0),
            stdout,
            ..
        } => {
            if stdout.iter().all(u8::is_ascii_whitespace) {
                return Response::ok();
            }
            match serde_json::from_slice::<Answer>(&stdout) {
                Ok(answer) => build(answer, request).unwrap_or_else(|problem| {
                    Response::failed(format!("{program} answered: {problem}"))
                }),
                Err(e) => Response::failed(format!(
                    "{program} exited 0 but its stdout is not a JSON response ({e}); print one JSON object, or nothing and let the exit code answer"
                )),
            }
        }
        Finished::Exited {
            code: Some(EXIT_RETRY),
            stderr_tail,
            ..
        } => Response::retry(DEFAULT_RETRY).message(with_tail(
            format!("{program} asked to retry (exit {EXIT_RETRY})"),
            &stderr_tail,
        )),
        Finished::Exited {
            code, stderr_tail, ..
        } => {
            let how = code.map_or_else(
                || "was killed by a signal".to_owned(),
                |c| format!("exited {c}"),
            );
            Response::failed(with_tail(format!("{program} {how}"), &stderr_tail))
        }
    }
}

/// `message: stderr tail`, or the message alone.
fn with_tail(message: String, tail: &str) -> String {
    if tail.is_empty() {
        message
    } else {
        format!("{message}: {tail}")
    }
}

/// The response an answer describes, or what is wrong with it.
fn build(answer: Answer, request: &Request) -> Result<Response, String> {
    let mut response = match answer.outcome.as_deref().unwrap_or("OK") {
        "OK" => Response::ok().message(answer.message),
        "RETRY" => {
            let after = match answer.retry_after_seconds {
                None => DEFAULT_RETRY,
                Some(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s),
                Some(s) => return Err(format!("retryAfterSeconds {s} is not a number of seconds")),
            };
            Response::retry(after).message(answer.message)
        }
        "FAILED" => Response::failed(answer.message),
        other => {
            return Err(format!(
                "outcome {other:?}; use \"OK\", \"RETRY\" or \"FAILED\""
            ));
        }
    };
    if let Some(status) = answer.status {
        response = response.status(Value::Object(status));
    }
    for es in answer.extension_statuses {
        let extension = find(request.extensions(), &es.target)?;
        response = response.extension_status(extension, Value::Object(es.status));
    }
    for c in answer.conditions {
        let status = match &c.status {
            Value::Bool(b) => Some(*b),
            Value::String(s) if s == "True" => Some(true),
            Value::String(s) if s == "False" => Some(false),
            Value::String(s) if s == "Unknown" => None,
            Value::Null => None,
            other => {
                return Err(format!(
                    "condition {:?} has status {other}; use \"True\", \"False\" or \"Unknown\"",
                    c.type_
                ));
            }
        };
        response = response.condition(&c.type_, status, &c.reason, c.message);
    }
    for e in answer.events {
        let warning = match e.type_.as_deref().unwrap_or("Normal") {
            "Normal" => false,
            "Warning" => true,
            other => {
                return Err(format!(
                    "event {:?} has type {other:?}; use \"Normal\" or \"Warning\"",
                    e.reason
                ));
            }
        };
        let regarding = match &e.regarding {
            None => request.object(),
            Some(target) => find(
                std::iter::once(request.object()).chain(request.extensions()),
                target,
            )?,
        };
        response = response.event_on(regarding, warning, &e.reason, e.message);
    }
    Ok(response)
}

/// The object sent that `target` names.
fn find<'a>(
    objects: impl IntoIterator<Item = &'a Object>,
    target: &Target,
) -> Result<&'a Object, String> {
    objects
        .into_iter()
        .find(|o| {
            o.kind() == target.kind
                && o.name() == target.name
                && target.namespace.as_deref().is_none_or(|ns| ns == o.namespace())
                && target.api_version.as_deref().is_none_or(|v| v == o.api_version())
        })
        .ok_or_else(|| {
            format!(
                "{} {} was not sent in this call; a command may write only to the objects it is sent",
                target.kind, target.name
            )
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}

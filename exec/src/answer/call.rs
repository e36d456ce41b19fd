//! The answer of a reconcile, finalize or hook command (see the
//! [module docs](super)).

use std::time::Duration;

use kplug_sidecar::{Object, Request, Response};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{EXIT_RETRY, how, printed_nothing, timed_out, with_tail};
use crate::command::Finished;

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
    /// Absent: leave the children as they are; present: the whole set.
    #[serde(default)]
    children: Option<Vec<Value>>,
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

/// The JSON a hook prints: a response without conditions or extension
/// statuses.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct HookAnswer {
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    retry_after_seconds: Option<f64>,
    #[serde(default)]
    status: Option<Map<String, Value>>,
    #[serde(default)]
    events: Vec<EventAnswer>,
}

impl From<HookAnswer> for Answer {
    fn from(a: HookAnswer) -> Self {
        Self {
            outcome: a.outcome,
            message: a.message,
            retry_after_seconds: a.retry_after_seconds,
            status: a.status,
            extension_statuses: Vec::new(),
            conditions: Vec::new(),
            events: a.events,
            children: None,
        }
    }
}

/// The response to send for how `program`'s run for `request` ended.
pub fn response(program: &str, request: &Request, finished: Finished) -> Response {
    call_response(program, request, finished, false)
}

/// The response to a hook for how `program`'s run for `request` ended: as
/// [`response`], for the fields a hook may answer.
pub fn hook_response(program: &str, request: &Request, finished: Finished) -> Response {
    call_response(program, request, finished, true)
}

fn call_response(program: &str, request: &Request, finished: Finished, hook: bool) -> Response {
    match finished {
        Finished::TimedOut { after, stderr_tail } => {
            Response::failed(timed_out(program, after, &stderr_tail))
        }
        Finished::Exited {
            code: Some(0),
            stdout,
            ..
        } => {
            if printed_nothing(&stdout) {
                return Response::ok();
            }
            let parsed = if hook {
                serde_json::from_slice::<HookAnswer>(&stdout).map(Answer::from)
            } else {
                serde_json::from_slice::<Answer>(&stdout)
            };
            match parsed {
                Ok(answer) => build(answer, request).unwrap_or_else(|problem| {
                    Response::failed(format!("{program} answered: {problem}"))
                }),
                Err(e) if hook => Response::failed(format!(
                    "{program} exited 0 but its stdout is not a hook's response ({e}); print one JSON object with outcome, message, retryAfterSeconds, status and events (a hook sets no conditions, extension statuses or children), or nothing and let the exit code answer"
                )),
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
        } => Response::failed(with_tail(format!("{program} {}", how(code)), &stderr_tail)),
    }
}

/// The response an answer describes, or what is wrong with it.
fn build(mut answer: Answer, request: &Request) -> Result<Response, String> {
    let mut response = outcome(&mut answer)?;
    if let Some(status) = answer.status {
        response = response.status(Value::Object(status));
    }
    for es in answer.extension_statuses {
        let extension = find(request.extensions(), &es.target)?;
        response = response.extension_status(extension, Value::Object(es.status));
    }
    for c in answer.conditions {
        let status = condition_status(&c)?;
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
    if let Some(children) = answer.children {
        if let Some((i, child)) = children.iter().enumerate().find(|(_, c)| !c.is_object()) {
            return Err(format!(
                "children[{i}] is {}; a child must be a JSON object: a Kubernetes object with apiVersion, kind and metadata.name",
                json_type(child)
            ));
        }
        response = response.children(children);
    }
    Ok(response)
}

/// What kind of JSON value `value` is, for messages.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The response with the answer's outcome, retry delay and message.
fn outcome(answer: &mut Answer) -> Result<Response, String> {
    let message = std::mem::take(&mut answer.message);
    Ok(match answer.outcome.as_deref().unwrap_or("OK") {
        "OK" => Response::ok().message(message),
        "RETRY" => {
            let after = match answer.retry_after_seconds {
                None => DEFAULT_RETRY,
                Some(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s),
                Some(s) => return Err(format!("retryAfterSeconds {s} is not a number of seconds")),
            };
            Response::retry(after).message(message)
        }
        "FAILED" => Response::failed(message),
        other => {
            return Err(format!(
                "outcome {other:?}; use \"OK\", \"RETRY\" or \"FAILED\""
            ));
        }
    })
}

/// A condition's status: `true`, `false`, or `None` for Unknown.
fn condition_status(c: &ConditionAnswer) -> Result<Option<bool>, String> {
    match &c.status {
        Value::Bool(b) => Ok(Some(*b)),
        Value::String(s) if s == "True" => Ok(Some(true)),
        Value::String(s) if s == "False" => Ok(Some(false)),
        Value::String(s) if s == "Unknown" => Ok(None),
        Value::Null => Ok(None),
        other => Err(format!(
            "condition {:?} has status {other}; use \"True\", \"False\" or \"Unknown\"",
            c.type_
        )),
    }
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

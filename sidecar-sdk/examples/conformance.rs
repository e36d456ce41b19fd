//! The Rust SDK's conformance plugin: its behaviour, driven by the base
//! object's `spec.conformance`, is specified in
//! `sidecar-sdk/conformance/README.md`, and `kplug-conformance --cases
//! sidecar-sdk/conformance/cases.json` checks its answers (as
//! `tests/conformance.rs` does in `cargo test`).
//!
//! ```text
//! KPLUG_SOCKET_DIR=/tmp/kplug cargo run -p kplug-sidecar --example conformance
//! ```

use std::sync::Mutex;
use std::time::Duration;

use kplug_sidecar::proto::v1::Outcome;
use kplug_sidecar::{
    AdmissionRequest, Behaviour, BoxError, Call, CallPolicy, Defaults, FailurePolicy, Hook,
    HookCall, MutateCall, Mutation, Object, Offer, Operation, Phase, Plugin, PluginInfo, Readiness,
    Request, Response, Validation,
};
use serde_json::{Map, Value, json};

const GROUP: &str = "conformance.kplug.dev";

struct Conformance {
    readiness: Mutex<Readiness>,
}

#[derive(Debug)]
struct ConformanceError(String);

impl std::fmt::Display for ConformanceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConformanceError: {}", self.0)
    }
}

impl std::error::Error for ConformanceError {}

fn spec_c(request: &Request) -> Map<String, Value> {
    directives(request.object())
}

/// `spec.conformance` of `object`, an empty map when absent or not an object.
fn directives(object: &Object) -> Map<String, Value> {
    object
        .spec()
        .get("conformance")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn text(c: &Map<String, Value>, key: &str) -> String {
    c.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Steps 2 and 7 of the README: the outcome, then the events.
fn outcome(c: &Map<String, Value>, request: &Request) -> Result<Response, BoxError> {
    let message = text(c, "message");
    let mut response = match c.get("action").and_then(Value::as_str).unwrap_or("ok") {
        "retry" => {
            let after = c
                .get("retryAfterSeconds")
                .and_then(Value::as_f64)
                .unwrap_or(10.0);
            Response::retry(Duration::from_secs_f64(after)).message(message)
        }
        "fail" => Response::failed(message),
        "raise" => return Err(Box::new(ConformanceError(message))),
        _ => Response::ok().message(message),
    };
    for event in items(c, "events") {
        let reason = event["reason"].as_str().unwrap_or_default();
        let message = event["message"].as_str().unwrap_or_default();
        let warning = event["warning"].as_bool().unwrap_or(false);
        let regarding: Option<&Object> = match &event["regarding"] {
            Value::String(s) if s == "base" => Some(request.object()),
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| request.extensions().get(usize::try_from(n).ok()?)),
            _ => None,
        };
        response = match (regarding, warning) {
            (Some(obj), w) => response.event_on(obj, w, reason, message),
            (None, true) => response.warning(reason, message),
            (None, false) => response.event(reason, message),
        };
    }
    Ok(response)
}

/// The status the directives ask for: `status`, with the request echoed
/// (`echo`) and the observed children named (`echoChildren`).
fn reconcile_status(c: &Map<String, Value>, request: &Request) -> Option<Value> {
    let mut status = c.get("status").cloned();
    if c.get("echo").and_then(Value::as_bool) == Some(true) {
        let echo = json!({
            "implementation": request.implementation(),
            "name": request.name(),
            "namespace": request.namespace(),
            "generation": request.object().generation().unwrap_or(0),
            "extensions": request.extensions().iter().map(|e| format!("{}/{}", e.kind(), e.name())).collect::<Vec<_>>(),
            "data": request.object().spec().get("data").cloned().unwrap_or(Value::Null),
        });
        let mut merged = status
            .and_then(|s| s.as_object().cloned())
            .unwrap_or_default();
        merged.insert("echo".into(), echo);
        status = Some(Value::Object(merged));
    }
    if c.get("echoChildren").and_then(Value::as_bool) == Some(true) {
        let observed: Vec<String> = request
            .children()
            .iter()
            .map(|c| format!("{}/{}", c.kind(), c.name()))
            .collect();
        let mut merged = status
            .and_then(|s| s.as_object().cloned())
            .unwrap_or_default();
        merged.insert("observedChildren".into(), json!(observed));
        status = Some(Value::Object(merged));
    }
    status
}

impl Plugin for Conformance {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        let c = spec_c(&request);
        if c.get("action").and_then(Value::as_str) == Some("setReadiness") {
            let ready = c.get("ready").and_then(Value::as_bool).unwrap_or(true);
            *self.readiness.lock().unwrap() = if ready {
                Readiness::Ready
            } else {
                Readiness::NotReady(text(&c, "message"))
            };
            return Ok(Response::ok().message("readiness set"));
        }
        let mut response = outcome(&c, &request)?;
        let status = reconcile_status(&c, &request);
        if let Some(status) = status {
            response = response.status(status);
        }
        if let Some(children) = c.get("children").and_then(Value::as_array) {
            response = response.children(children.iter().cloned());
        }
        if let Some(ext_status) = c.get("extensionStatus") {
            for extension in request.extensions() {
                response = response.extension_status(extension, ext_status.clone());
            }
        }
        for condition in items(&c, "conditions") {
            response = response.condition(
                condition["type"].as_str().unwrap_or_default(),
                condition["status"].as_bool(),
                condition["reason"].as_str().unwrap_or_default(),
                condition["message"].as_str().unwrap_or_default(),
            );
        }
        Ok(response)
    }

    async fn finalize(&self, request: Request) -> Result<Response, BoxError> {
        outcome(&spec_c(&request), &request)
    }

    /// The README's Validate: `errors` (with or without a value),
    /// `warnings`, `echo`, and `"raise"`.
    async fn validate(&self, request: AdmissionRequest) -> Result<Validation, BoxError> {
        let c = directives(request.object());
        raise_if_asked(&c)?;
        let mut verdict = Validation::allowed();
        for error in items(&c, "errors") {
            let path = error["path"].as_str().unwrap_or_default();
            let message = error["message"].as_str().unwrap_or_default();
            verdict = match error.get("value") {
                Some(value) => verdict.error(path, value, message),
                None => verdict.error_at(path, message),
            };
        }
        for warning in strings(&c, "warnings") {
            verdict = verdict.warning(warning);
        }
        if c.get("echo").and_then(Value::as_bool) == Some(true) {
            let operation = match request.operation() {
                Operation::Create => "CREATE",
                Operation::Update => "UPDATE",
            };
            let old = request.old_object().map_or_else(
                || "none".to_owned(),
                |o| format!("{}/{}", o.kind(), o.name()),
            );
            verdict = verdict.warning(format!(
                "{operation} {} {}/{} old={old}",
                request.implementation(),
                request.object().kind(),
                request.object().name()
            ));
        }
        Ok(verdict)
    }

    /// The README's Default: `patch` through the SDK's builder, `warnings`,
    /// and `"raise"`.
    async fn defaults(&self, request: AdmissionRequest) -> Result<Defaults, BoxError> {
        let c = directives(request.object());
        raise_if_asked(&c)?;
        let mut defaults = Defaults::none();
        for op in items(&c, "patch") {
            let path = op["path"].as_str().unwrap_or_default();
            defaults = match op["op"].as_str().unwrap_or_default() {
                "add" => defaults.add(path, &op["value"]),
                "replace" => defaults.replace(path, &op["value"]),
                _ => defaults.remove(path),
            };
        }
        for warning in strings(&c, "warnings") {
            defaults = defaults.warning(warning);
        }
        Ok(defaults)
    }

    /// The README's Mutate: `c` is the base object's `spec.conformance`;
    /// `raise`, `patch`, `warnings` and `echo`.
    async fn mutate(&self, call: MutateCall) -> Result<Mutation, BoxError> {
        let c = call.base().map(directives).unwrap_or_default();
        raise_if_asked(&c)?;
        let mut mutation = Mutation::none();
        for op in items(&c, "patch") {
            let path = op["path"].as_str().unwrap_or_default();
            mutation = match op["op"].as_str().unwrap_or_default() {
                "add" => mutation.add(path, &op["value"]),
                "replace" => mutation.replace(path, &op["value"]),
                _ => mutation.remove(path),
            };
        }
        for warning in strings(&c, "warnings") {
            mutation = mutation.warning(warning);
        }
        if c.get("echo").and_then(Value::as_bool) == Some(true) {
            let object = call.object();
            let live = call.live().map_or("none", |l| l.name());
            mutation = mutation.warning(format!(
                "{} {}/{} live={live}",
                call.implementation(),
                object.kind(),
                object.name()
            ));
        }
        Ok(mutation)
    }

    /// The README's Hook: the outcome and events as for Finalize, `status`
    /// (reserved keys allowed) and `echo`.
    async fn hook(&self, call: HookCall) -> Result<Response, BoxError> {
        let request = call.request();
        let c = spec_c(request);
        let mut response = outcome(&c, request)?;
        let mut status = c.get("status").cloned();
        if c.get("echo").and_then(Value::as_bool) == Some(true) {
            let echo = json!({
                "hook": call.hook(),
                "phase": call.phase().map(|p| match p {
                    Phase::BeforeReconcile => "BEFORE_RECONCILE",
                    Phase::AfterReconcile => "AFTER_RECONCILE",
                    Phase::BeforeFinalize => "BEFORE_FINALIZE",
                    Phase::AfterFinalize => "AFTER_FINALIZE",
                }),
                "implementation": request.implementation(),
                "name": request.name(),
                "namespace": request.namespace(),
                "extensions": request.extensions().iter().map(|e| format!("{}/{}", e.kind(), e.name())).collect::<Vec<_>>(),
                "outcome": call.outcome().map(|o| match o {
                    Outcome::Ok => "OK",
                    Outcome::Retry => "RETRY",
                    Outcome::Failed => "FAILED",
                    Outcome::Unspecified => "UNSPECIFIED",
                }),
                "message": call.message(),
            });
            let mut merged = status
                .and_then(|s| s.as_object().cloned())
                .unwrap_or_default();
            merged.insert("echo".into(), echo);
            status = Some(Value::Object(merged));
        }
        if let Some(status) = status {
            response = response.status(status);
        }
        Ok(response)
    }

    async fn ready(&self) -> Readiness {
        self.readiness.lock().unwrap().clone()
    }
}

/// The items of the array directive `key`; none when it is absent or not an
/// array.
fn items<'a>(c: &'a Map<String, Value>, key: &str) -> impl Iterator<Item = &'a Value> {
    c.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// The README's `"raise"` for Validate and Default: the handler fails with
/// the directive's message.
fn raise_if_asked(c: &Map<String, Value>) -> Result<(), BoxError> {
    if c.get("action").and_then(Value::as_str) == Some("raise") {
        return Err(Box::new(ConformanceError(text(c, "message"))));
    }
    Ok(())
}

fn strings(c: &Map<String, Value>, key: &str) -> Vec<String> {
    items(c, key)
        .map(|w| w.as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The description of cases.json's "plugin": the offer, four hooks (one
/// per phase; the last for a kind it does not offer) and four call
/// policies.
fn info() -> PluginInfo {
    PluginInfo::new("conformance", "1.0.0")
        .description("kplug SDK conformance plugin")
        .offer(
            Offer::new(GROUP, "Widget", "Conformance")
                .extension(GROUP, "WidgetExtensionA")
                .extension(GROUP, "WidgetExtensionB")
                .child("v1", "ConfigMap")
                .child("apps/v1", "Deployment"),
        )
        .mutation("apps/v1", "Deployment")
        .hook(
            Hook::new(
                "audit",
                GROUP,
                "Widget",
                Phase::BeforeReconcile,
                Behaviour::SyncEnforce,
            )
            .order(-10),
        )
        .hook(Hook::new(
            "record",
            GROUP,
            "Widget",
            Phase::AfterReconcile,
            Behaviour::SyncBypass,
        ))
        .hook(Hook::new(
            "backup",
            GROUP,
            "Widget",
            Phase::BeforeFinalize,
            Behaviour::SyncEnforce,
        ))
        .hook(
            Hook::new(
                "notify",
                GROUP,
                "Gadget",
                Phase::AfterFinalize,
                Behaviour::Async,
            )
            .order(5),
        )
        .call_policy(CallPolicy::new(Call::Reconcile).deadline(Duration::from_secs(120)))
        .call_policy(
            CallPolicy::new(Call::Validate)
                .deadline(Duration::from_secs(2))
                .failure_policy(FailurePolicy::Fail),
        )
        .call_policy(
            CallPolicy::new(Call::Default)
                .deadline(Duration::from_millis(1500))
                .failure_policy(FailurePolicy::Ignore),
        )
        .call_policy(CallPolicy::new(Call::Hook))
}

#[tokio::main]
async fn main() -> Result<(), kplug_sidecar::Error> {
    let plugin = Conformance {
        readiness: Mutex::new(Readiness::Ready),
    };
    kplug_sidecar::serve(info(), plugin).await
}

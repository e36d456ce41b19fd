//! Runs the shared SDK conformance cases (`sidecar-sdk/conformance/cases.json`)
//! against a Rust conformance plugin served by this SDK over a real Unix
//! socket, with a real gRPC client. The Python SDK runs the same file
//! (`sidecar-sdk/python/tests/test_conformance.py`); the plugin's behaviour is
//! specified in `sidecar-sdk/conformance/README.md`.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{
    Capability, FinalizeRequest, GetInfoRequest, Outcome, ProbeRequest, ReconcileRequest,
};
use kplug_sidecar::{
    BoxError, Object, Offer, Plugin, PluginInfo, Readiness, Request, Response, Server,
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
    request
        .object()
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
    for event in c
        .get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
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
        if let Some(status) = status {
            response = response.status(status);
        }
        if let Some(ext_status) = c.get("extensionStatus") {
            for extension in request.extensions() {
                response = response.extension_status(extension, ext_status.clone());
            }
        }
        for condition in c
            .get("conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
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

    async fn ready(&self) -> Readiness {
        self.readiness.lock().unwrap().clone()
    }
}

fn info() -> PluginInfo {
    PluginInfo::new("conformance", "1.0.0")
        .description("kplug SDK conformance plugin")
        .offer(
            Offer::new(GROUP, "Widget", "Conformance")
                .extension(GROUP, "WidgetExtensionA")
                .extension(GROUP, "WidgetExtensionB"),
        )
}

fn outcome_name(o: i32) -> &'static str {
    match Outcome::try_from(o) {
        Ok(Outcome::Ok) => "OK",
        Ok(Outcome::Retry) => "RETRY",
        Ok(Outcome::Failed) => "FAILED",
        _ => "UNSPECIFIED",
    }
}

fn reference(r: Option<&kplug_proto::v1::ObjectRef>) -> Value {
    r.map_or(Value::Null, |r| json!({"apiVersion": r.api_version, "kind": r.kind, "namespace": r.namespace, "name": r.name}))
}

fn events(events: &[kplug_proto::v1::Event]) -> Value {
    events
        .iter()
        .map(|e| {
            let kind = if e.r#type == kplug_proto::v1::EventType::Warning as i32 { "Warning" } else { "Normal" };
            json!({"type": kind, "reason": e.reason, "message": e.message, "regarding": reference(e.regarding.as_ref())})
        })
        .collect()
}

fn retry_after(d: Option<&prost_types::Duration>) -> Value {
    d.map_or(Value::Null, |d| {
        json!(d.seconds as f64 + f64::from(d.nanos) / 1e9)
    })
}

/// Decodes status bytes, checking they are compact UTF-8 JSON.
fn status_json(bytes: &[u8], case: &str) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    let value: Value =
        serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{case}: status is not JSON: {e}"));
    assert_eq!(
        bytes.len(),
        serde_json::to_vec(&value).unwrap().len(),
        "{case}: status bytes are not compact JSON"
    );
    value
}

/// Compares JSON by value (1 == 1.0).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn encode(request: &Value) -> (String, Vec<u8>, Vec<Vec<u8>>) {
    let object = match request.get("object_raw").and_then(Value::as_str) {
        Some(raw) => raw.as_bytes().to_vec(),
        None => serde_json::to_vec(&request["object"]).unwrap(),
    };
    let extensions = request["extensions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| serde_json::to_vec(e).unwrap())
        .collect();
    (
        request["implementation"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        object,
        extensions,
    )
}

fn check_message(case: &str, expect: &Value, actual: &mut Map<String, Value>) {
    let message = actual.remove("message").unwrap();
    if let Some(part) = expect.get("message_contains").and_then(Value::as_str) {
        assert!(
            message.as_str().unwrap().contains(part),
            "{case}: message {message} should contain {part:?}"
        );
    } else {
        assert_eq!(Some(&message), expect.get("message"), "{case}: message");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_sdk_passes_the_shared_conformance_cases() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/cases.json");
    let cases: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(
        info(),
        Conformance {
            readiness: Mutex::new(Readiness::Ready),
        },
        dir.path(),
    );
    let socket = server.socket_path();
    tokio::spawn(server.run_until(std::future::pending()));
    while !socket.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut client = PluginClient::new(kplug_proto::socket::channel(&socket));
    let all = cases["cases"].as_array().unwrap();
    assert!(all.len() >= 20, "the case file looks truncated");
    for case in all {
        let name = case["name"].as_str().unwrap();
        let request = &case["request"];
        let expect = &case["expect"];
        match request["rpc"].as_str().unwrap() {
            "GetInfo" => {
                let info = client
                    .get_info(GetInfoRequest {})
                    .await
                    .unwrap()
                    .into_inner();
                let actual = json!({
                    "name": info.name, "version": info.version, "protocol": info.protocol, "description": info.description,
                    "offers": info.offers.iter().map(|o| {
                        let base = o.base.clone().unwrap_or_default();
                        json!({"base": {"group": base.group, "kind": base.kind}, "implementation": o.implementation,
                               "extensions": o.extensions.iter().map(|e| json!({"group": e.group, "kind": e.kind})).collect::<Vec<_>>()})
                    }).collect::<Vec<_>>(),
                    "capabilities": info.capabilities.iter().map(|c| match Capability::try_from(*c) {
                        Ok(Capability::Reconcile) => "RECONCILE", Ok(Capability::Finalize) => "FINALIZE", _ => "UNSPECIFIED",
                    }).collect::<Vec<_>>(),
                });
                assert!(same(&actual, expect), "{name}: got {actual}, want {expect}");
            }
            "Probe" => {
                let probe = client.probe(ProbeRequest {}).await.unwrap().into_inner();
                let actual = json!({"ready": probe.ready, "message": probe.message});
                assert!(same(&actual, expect), "{name}: got {actual}, want {expect}");
            }
            "Reconcile" => {
                let (implementation, object, extensions) = encode(request);
                let r = client
                    .reconcile(ReconcileRequest {
                        implementation,
                        object,
                        extensions,
                    })
                    .await
                    .unwrap()
                    .into_inner();
                let mut actual = json!({
                    "outcome": outcome_name(r.outcome),
                    "message": r.message,
                    "retry_after_seconds": retry_after(r.retry_after.as_ref()),
                    "status": status_json(&r.status, name),
                    "extension_statuses": r.extension_statuses.iter().map(|s| json!({
                        "target": reference(s.target.as_ref()), "status": status_json(&s.status, name),
                    })).collect::<Vec<_>>(),
                    "conditions": r.conditions.iter().map(|c| json!({
                        "type": c.r#type,
                        "status": match kplug_proto::v1::ConditionStatus::try_from(c.status) {
                            Ok(kplug_proto::v1::ConditionStatus::True) => "True",
                            Ok(kplug_proto::v1::ConditionStatus::False) => "False",
                            _ => "Unknown",
                        },
                        "reason": c.reason, "message": c.message,
                    })).collect::<Vec<_>>(),
                    "events": events(&r.events),
                });
                let map = actual.as_object_mut().unwrap();
                check_message(name, expect, map);
                let mut want = expect.as_object().unwrap().clone();
                want.remove("message");
                want.remove("message_contains");
                assert!(
                    same(&actual, &Value::Object(want.clone())),
                    "{name}: got {actual}, want {}",
                    Value::Object(want)
                );
            }
            "Finalize" => {
                let (implementation, object, extensions) = encode(request);
                let r = client
                    .finalize(FinalizeRequest {
                        implementation,
                        object,
                        extensions,
                    })
                    .await
                    .unwrap()
                    .into_inner();
                let mut actual = json!({
                    "outcome": outcome_name(r.outcome),
                    "message": r.message,
                    "retry_after_seconds": retry_after(r.retry_after.as_ref()),
                    "events": events(&r.events),
                });
                check_message(name, expect, actual.as_object_mut().unwrap());
                let mut want = expect.as_object().unwrap().clone();
                want.remove("message");
                want.remove("message_contains");
                assert!(
                    same(&actual, &Value::Object(want.clone())),
                    "{name}: got {actual}, want {}",
                    Value::Object(want)
                );
            }
            other => panic!("{name}: unknown rpc {other}"),
        }
    }
}

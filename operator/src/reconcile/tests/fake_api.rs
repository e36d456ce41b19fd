//! An in-memory API server for the reconcile's unit tests: a kube `Client`
//! over a tower service that keeps the objects, applies JSON patches, and
//! records every status apply and Event, so a test can say what was written.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::http::{Method, Request, Response, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

/// One status apply: who applied what.
#[derive(Clone, Debug)]
pub(super) struct StatusApply {
    /// The field manager.
    pub(super) manager: String,
    /// The applied `status`.
    pub(super) status: Value,
}

/// One Event created.
#[derive(Clone, Debug)]
pub(super) struct RecordedEvent {
    pub(super) type_: String,
    pub(super) reason: String,
}

#[derive(Default)]
struct State {
    /// Objects by `plural/namespace/name`.
    objects: HashMap<String, Value>,
    applies: Vec<StatusApply>,
    events: Vec<RecordedEvent>,
    patches: Vec<(String, Value)>,
    /// Reads of one object (GET), by `plural/namespace/name`.
    reads: Vec<String>,
    /// Field managers whose status applies are refused (422).
    refuse_manager: Option<String>,
    /// A status key whose applies are refused (422).
    refuse_key: Option<String>,
}

/// The fake API server's state; cheap to clone.
#[derive(Clone, Default)]
pub(super) struct FakeApi {
    state: Arc<Mutex<State>>,
}

impl FakeApi {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `obj` (its plural given) as the live object.
    pub(super) fn put(&self, plural: &str, obj: &Value) {
        let key = format!(
            "{plural}/{}/{}",
            obj["metadata"]["namespace"].as_str().unwrap_or_default(),
            obj["metadata"]["name"].as_str().unwrap_or_default()
        );
        self.lock().objects.insert(key, obj.clone());
    }

    /// Refuses status applies of `manager` from now on.
    pub(super) fn refuse_status_of(&self, manager: &str) {
        self.lock().refuse_manager = Some(manager.to_owned());
    }

    /// Refuses status applies that set `key` from now on.
    pub(super) fn refuse_status_with(&self, key: &str) {
        self.lock().refuse_key = Some(key.to_owned());
    }

    pub(super) fn applies(&self) -> Vec<StatusApply> {
        self.lock().applies.clone()
    }

    pub(super) fn events(&self) -> Vec<RecordedEvent> {
        self.lock().events.clone()
    }

    /// JSON patches, by object path.
    /// The objects read (GET) so far.
    pub(super) fn reads(&self) -> Vec<String> {
        self.lock().reads.clone()
    }

    pub(super) fn patches(&self) -> Vec<(String, Value)> {
        self.lock().patches.clone()
    }

    /// A client whose every request goes to this fake.
    pub(super) fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.handle(request).await) }
        });
        kube::Client::new(service, "default")
    }

    async fn handle(&self, request: Request<kube::client::Body>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let query = parts.uri.query().unwrap_or_default().to_owned();
        // /apis/<group>/<version>/namespaces/<ns>/<plural>[/<name>[/status]]
        let segments: Vec<&str> = parts.uri.path().split('/').skip(4).collect();
        match (&parts.method, segments.as_slice()) {
            (&Method::POST | &Method::PATCH, ["namespaces", _, "events", ..]) => {
                self.lock().events.push(RecordedEvent {
                    type_: body["type"].as_str().unwrap_or_default().to_owned(),
                    reason: body["reason"].as_str().unwrap_or_default().to_owned(),
                });
                let mut event = body;
                event["metadata"]["name"] = json!("event");
                respond(StatusCode::CREATED, &event)
            }
            (&Method::GET, ["namespaces", ns, plural, name]) => {
                let key = format!("{plural}/{ns}/{name}");
                let mut state = self.lock();
                state.reads.push(key.clone());
                match state.objects.get(&key) {
                    Some(obj) => respond(StatusCode::OK, obj),
                    None => not_found(name),
                }
            }
            (&Method::PATCH, ["namespaces", ns, plural, name, "status"]) => {
                let manager = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("fieldManager="))
                    .unwrap_or_default()
                    .to_owned();
                let mut state = self.lock();
                let refused_key = state
                    .refuse_key
                    .as_ref()
                    .is_some_and(|key| body["status"].get(key).is_some());
                if state.refuse_manager.as_deref() == Some(manager.as_str()) || refused_key {
                    return respond(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        &status_body(422, "Invalid", "status.rows: Invalid value: too many"),
                    );
                }
                let status = body["status"].clone();
                state.applies.push(StatusApply {
                    manager,
                    status: status.clone(),
                });
                // Each key applied replaces the stored one: enough of
                // server-side apply for reads that follow a write.
                match state.objects.get_mut(&format!("{plural}/{ns}/{name}")) {
                    Some(obj) => {
                        if !obj["status"].is_object() {
                            obj["status"] = json!({});
                        }
                        for (key, value) in status.as_object().into_iter().flatten() {
                            obj["status"][key] = value.clone();
                        }
                        respond(StatusCode::OK, obj)
                    }
                    None => not_found(name),
                }
            }
            (&Method::PATCH, ["namespaces", ns, plural, name]) => {
                let key = format!("{plural}/{ns}/{name}");
                let mut state = self.lock();
                state.patches.push((key.clone(), body.clone()));
                let Some(obj) = state.objects.get_mut(&key) else {
                    return not_found(name);
                };
                let patch: json_patch::Patch = match serde_json::from_value(body) {
                    Ok(patch) => patch,
                    Err(e) => {
                        return respond(
                            StatusCode::BAD_REQUEST,
                            &status_body(400, "BadRequest", &e.to_string()),
                        );
                    }
                };
                // The API server's JSON patch takes a `test` of null on a
                // missing path as passed (kube-runtime's finalizer helper
                // and the record step rely on it); json_patch does not.
                let patch = json_patch::Patch(
                    patch
                        .0
                        .into_iter()
                        .filter(|op| match op {
                            json_patch::PatchOperation::Test(test) => {
                                !(test.value.is_null() && obj.pointer(test.path.as_str()).is_none())
                            }
                            _ => true,
                        })
                        .collect(),
                );
                match json_patch::patch(obj, &patch) {
                    Ok(()) => respond(StatusCode::OK, obj),
                    Err(e) => respond(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        &status_body(422, "Invalid", &e.to_string()),
                    ),
                }
            }
            _ => respond(
                StatusCode::NOT_IMPLEMENTED,
                &status_body(501, "NotImplemented", parts.uri.path()),
            ),
        }
    }
}

fn respond(code: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = code;
    response.headers_mut().insert(
        "content-type",
        "application/json".parse().expect("a valid header"),
    );
    response
}

fn not_found(name: &str) -> Response<Full<Bytes>> {
    respond(
        StatusCode::NOT_FOUND,
        &status_body(404, "NotFound", &format!("\"{name}\" not found")),
    )
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    })
}

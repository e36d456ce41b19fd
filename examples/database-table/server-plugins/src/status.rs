//! The server's status, from the observed Deployment: Ready only once the
//! Deployment runs the desired template and is available.

use std::time::Duration;

use kplug_sidecar::{Object, Request, Response};
use serde_json::{Value, json};

use crate::server::{PORT, SETTINGS_HASH, ServerSpec, secret_name, settings_hash};

/// How soon to look again while the Deployment is not available; a change
/// to the Deployment reconciles the server sooner anyway (the operator
/// watches its children).
const RECHECK: Duration = Duration::from_secs(10);

/// What the observed Deployment says, against what is desired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// Its `status.readyReplicas`.
    pub ready_replicas: i64,
    /// Whether it runs the desired image and settings, all replicas
    /// updated, as its controller has observed.
    pub current: bool,
    /// Whether its `Available` condition is True.
    pub available: bool,
}

impl Rollout {
    /// The rollout of `deployment` (None: not created yet) against the
    /// desired image and settings.
    pub fn of(deployment: Option<&Object>, spec: &ServerSpec, settings: &str) -> Self {
        let Some(deployment) = deployment else {
            return Self::default();
        };
        let raw = deployment.raw();
        let status = &raw["status"];
        let count = |field: &str| status[field].as_i64().unwrap_or(0);
        let template = &raw["spec"]["template"];
        let image = template["spec"]["containers"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "postgres"))
            .map(|c| &c["image"]);
        let desired_template = image == Some(&json!(spec.image))
            && template["metadata"]["annotations"][SETTINGS_HASH] == settings_hash(settings);
        let observed =
            status["observedGeneration"].as_i64() >= raw["metadata"]["generation"].as_i64();
        let replicas = raw["spec"]["replicas"].as_i64().unwrap_or(1);
        Self {
            ready_replicas: count("readyReplicas"),
            current: desired_template && observed && count("updatedReplicas") == replicas,
            available: condition(status, "Available"),
        }
    }

    /// Ready: the desired template is rolled out and available.
    pub fn ready(&self) -> bool {
        self.current && self.available && self.ready_replicas > 0
    }
}

fn condition(status: &Value, type_: &str) -> bool {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

/// The answer, children aside: OK once the server is ready, RETRY while it
/// rolls out (RETRY still applies the children, and prunes none).
pub fn answer(request: &Request, spec: &ServerSpec, settings: &str) -> Response {
    let name = request.name();
    let rollout = Rollout::of(request.child("Deployment", name), spec, settings);
    let endpoint = format!("{name}.{}.svc:{PORT}", request.namespace());
    let status = json!({
        "readyReplicas": rollout.ready_replicas,
        "endpoint": endpoint,
        "credentialsSecret": secret_name(name),
        "image": spec.image,
    });
    if rollout.ready() {
        Response::ok()
            .message(format!("PostgreSQL serves at {endpoint}"))
            .status(status)
    } else {
        let what = if rollout.current {
            "to become available"
        } else {
            "to roll out"
        };
        Response::retry(RECHECK)
            .message(format!(
                "waiting for Deployment {name} {what} ({} ready)",
                rollout.ready_replicas
            ))
            .status(status)
    }
}

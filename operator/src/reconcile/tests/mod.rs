//! Unit tests of the reconcile: every [`Outcome`], with a fake API server
//! ([`fake_api`]) and fake plugins ([`fake_backend`]); no processes.

mod apply;
mod fake_api;
mod fake_backend;
mod finalize;
mod selection;

use std::sync::Arc;
use std::time::Duration;

use kplug_proto::v1::{Capability, ReconcileResponse};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use self::fake_api::FakeApi;
use self::fake_backend::FakeBackend;
use super::{Core, ReconcileError, Settings, reconcile};
use crate::backoff::{Backoff, FailureTracker};
use crate::events::Events;
use crate::metrics::{self, ReconcileMetrics};
use crate::share::Shares;
use crate::target::Target;

const PLURAL: &str = "greetings";
const RESYNC: Duration = Duration::from_secs(600);

/// A reconcile's world: the fake API server, the fake plugins, and the core.
struct World {
    api: FakeApi,
    core: Core<FakeBackend>,
    metrics: prometheus_client::registry::Registry,
    /// Objects the plugin shares woke (turned away while busy).
    woken: std::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<ObjectRef<DynamicObject>>>,
}

impl World {
    fn new() -> Self {
        Self::with(Settings::default(), 6)
    }

    fn with(settings: Settings, per_plugin: usize) -> Self {
        let api = FakeApi::default();
        let (wake, woken) = tokio::sync::mpsc::unbounded_channel();
        let client = api.client();
        let mut metrics = prometheus_client::registry::Registry::default();
        let core = Core {
            events: Events::new(client.clone(), Reporter::from("kplug-operator"), None),
            client,
            target: Target {
                api_resource: ApiResource {
                    group: "example.com".into(),
                    version: "v1".into(),
                    api_version: "example.com/v1".into(),
                    kind: "Greeting".into(),
                    plural: PLURAL.into(),
                },
                namespaced: true,
            },
            backend: FakeBackend::default(),
            metrics: ReconcileMetrics::register(&mut metrics),
            settings: Settings {
                resync: RESYNC,
                ..settings
            },
            failures: FailureTracker::new(Backoff::new(
                Duration::from_millis(500),
                Duration::from_secs(300),
            )),
            waiting: Arc::default(),
            shares: Shares::new(per_plugin, wake),
            written: Arc::default(),
            last_calls: Arc::default(),
            recent: Arc::default(),
            hook_queue: super::HookQueue::new(1, Default::default()),
            children: None,
        };
        core.backend.set_grace([None]);
        Self {
            api,
            core,
            metrics,
            woken: std::sync::Mutex::new(woken),
        }
    }

    fn plugin(&self, name: &str, implementation: &str) -> &Self {
        let caps = [Capability::Reconcile, Capability::Finalize];
        self.core.backend.add_plugin(name, implementation, &caps);
        self
    }

    /// Stores `obj` on the API server too, and reconciles it.
    async fn reconcile(&self, obj: &Value) -> Result<Action, ReconcileError> {
        self.api.put(PLURAL, obj);
        reconcile(&dynamic(obj), &self.core).await
    }

    /// The last status the operator applied.
    fn operator_status(&self) -> Value {
        self.api
            .applies()
            .into_iter()
            .rev()
            .find(|a| a.manager == "kplug-operator")
            .map(|a| a.status)
            .expect("the operator wrote a status")
    }

    /// `(status, reason)` of the condition `type_` the operator wrote last.
    fn condition(&self, type_: &str) -> (String, String, String) {
        let status = self.operator_status();
        let found = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_)
            .unwrap_or_else(|| panic!("no {type_} condition in {status}"));
        let text = |k: &str| found[k].as_str().unwrap_or_default().to_owned();
        (text("status"), text("reason"), text("message"))
    }

    /// `(type, reason)` of every Event.
    fn events(&self) -> Vec<(String, String)> {
        self.api
            .events()
            .into_iter()
            .map(|e| (e.type_, e.reason))
            .collect()
    }

    /// Whether one reconcile was counted with `outcome`, decided by
    /// `plugin` (empty: none).
    fn counted(&self, outcome: &str, plugin: &str) -> bool {
        metrics::encode(&self.metrics).contains(&format!(
            "kplug_reconcile_total{{outcome=\"{outcome}\",plugin=\"{plugin}\"}} 1"
        ))
    }
}

/// A greeting that prefers the `Hello` implementation.
fn hello() -> Value {
    greeting(json!({"preferredImplementation": "Hello"}))
}

fn greeting(spec: Value) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Greeting",
        "metadata": {"name": "world", "namespace": "default", "uid": "uid-1", "generation": 1, "resourceVersion": "1"},
        "spec": spec,
    })
}

/// `obj` recorded on `implementation` of `plugin`, with the finalizer.
fn recorded(mut obj: Value, implementation: &str, plugin: &str) -> Value {
    obj["status"] = json!({"implementation": implementation, "plugin": plugin});
    obj["metadata"]["finalizers"] = json!(["kplug.io/finalizer"]);
    obj
}

fn dynamic(obj: &Value) -> DynamicObject {
    serde_json::from_value(obj.clone()).expect("a valid object")
}

fn ok(status: Value) -> ReconcileResponse {
    ReconcileResponse {
        outcome: kplug_proto::v1::Outcome::Ok as i32,
        message: "hello".into(),
        status: status.to_string().into_bytes(),
        ..ReconcileResponse::default()
    }
}

fn with_outcome(outcome: kplug_proto::v1::Outcome, message: &str) -> ReconcileResponse {
    ReconcileResponse {
        outcome: outcome as i32,
        message: message.into(),
        ..ReconcileResponse::default()
    }
}

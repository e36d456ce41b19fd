//! Admission (Validate, Default), hooks and call policies over real Unix
//! sockets: capabilities inferred from the methods a plugin overrides, its
//! declarations in GetInfo and heartbeats (the operator's in-process
//! registry checks them and compares the two), and every handler answer,
//! error and bad input.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{self, Capability, GetInfoRequest, Outcome};
use kplug_sidecar::{
    AdmissionRequest, Behaviour, BoxError, Call, CallPolicy, Defaults, FailurePolicy, Hook,
    HookCall, Offer, Operation, Phase, Plugin, PluginInfo, Request, Response, Server, Validation,
};
use serde_json::{Value, json};
use support::start_registry;
use tokio::sync::oneshot;
use tonic::Code;
use tonic::transport::Channel;

/// Validates column types, defaults the storage engine, and runs two
/// hooks. An object named `broken` makes every handler fail.
struct Tables;

impl Plugin for Tables {
    async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
        Ok(Response::ok())
    }

    async fn validate(&self, request: AdmissionRequest) -> Result<Validation, BoxError> {
        if request.object().name() == "broken" {
            return Err("the type catalogue is unreachable".into());
        }
        let mut verdict = Validation::allowed();
        if request.operation() == Operation::Update {
            verdict = verdict.warning(format!(
                "changing {} from generation {:?}",
                request.object().name(),
                request.old_object().and_then(|o| o.generation())
            ));
        }
        let spec: Value = request.spec()?;
        for (i, column) in spec["columns"].as_array().into_iter().flatten().enumerate() {
            if column["type"] != "text" {
                verdict = verdict.error(
                    &format!("spec.columns[{i}].type"),
                    &column["type"],
                    format!(
                        "{} is not a {} type",
                        column["type"],
                        request.implementation()
                    ),
                );
            }
        }
        Ok(verdict)
    }

    async fn defaults(&self, request: AdmissionRequest) -> Result<Defaults, BoxError> {
        match request.object().name() {
            "broken" => Err("defaults unavailable".into()),
            "sneaky" => Ok(Defaults::none().add("/status/engine", "InnoDB")),
            _ => Ok(Defaults::none()
                .add("/spec/storageEngine", "InnoDB")
                .warning("storageEngine defaulted to InnoDB")),
        }
    }

    async fn hook(&self, call: HookCall) -> Result<Response, BoxError> {
        if call.request().name() == "broken" {
            return Err("backup disk full".into());
        }
        if call.request().name() == "panicky" {
            panic!("hook panicked on purpose");
        }
        Ok(Response::ok().status(json!({
            "hook": call.hook(),
            "phase": format!("{:?}", call.phase()),
            "implementation": call.request().implementation(),
            "extensions": call.request().extensions().len(),
            "after": call.outcome().map(|o| o.as_str_name()),
            "message": call.message(),
        })))
    }
}

/// Overrides nothing optional.
struct Plain;

impl Plugin for Plain {
    async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
        Ok(Response::ok())
    }
}

fn info(name: &str) -> PluginInfo {
    PluginInfo::new(name, "1.0.0")
        .offer(Offer::new("myorg.org", "DatabaseTable", "SQLite"))
        .hook(
            Hook::new(
                "backup",
                "myorg.org",
                "DatabaseTable",
                Phase::BeforeReconcile,
                Behaviour::SyncEnforce,
            )
            .order(-10),
        )
        .hook(Hook::new(
            "audit",
            "myorg.org",
            "DatabaseTable",
            Phase::AfterReconcile,
            Behaviour::Async,
        ))
        .call_policy(CallPolicy::new(Call::Reconcile).deadline(Duration::from_secs(120)))
        .call_policy(
            CallPolicy::new(Call::Validate)
                .deadline(Duration::from_millis(1500))
                .failure_policy(FailurePolicy::Ignore),
        )
}

/// Serves `plugin` in `dir` until the returned sender is dropped or used,
/// and waits until its socket exists.
async fn serve<P: Plugin>(
    dir: &Path,
    info: PluginInfo,
    plugin: P,
) -> (PluginClient<Channel>, oneshot::Sender<()>) {
    let server = Server::new(info, plugin, dir).heartbeat_interval(Duration::from_millis(200));
    let socket = server.socket_path();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    while !socket.exists() {
        assert!(!running.is_finished(), "the plugin stopped before serving");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (
        PluginClient::new(kplug_proto::socket::channel(&socket)),
        stop,
    )
}

fn table(name: &str, columns: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
        "metadata": {"name": name, "namespace": "shop", "generation": 3},
        "spec": {"columns": columns},
    }))
    .unwrap()
}

fn admission(name: &str, columns: Value, old: bool) -> (i32, Vec<u8>, Vec<u8>) {
    let object = table(name, columns);
    if old {
        (v1::Operation::Update as i32, object.clone(), object)
    } else {
        (v1::Operation::Create as i32, object, Vec::new())
    }
}

fn validate_request(name: &str, columns: Value, old: bool) -> v1::ValidateRequest {
    let (operation, object, old_object) = admission(name, columns, old);
    v1::ValidateRequest {
        implementation: "SQLite".into(),
        operation,
        object,
        old_object,
    }
}

fn default_request(name: &str) -> v1::DefaultRequest {
    let (operation, object, old_object) = admission(name, json!([]), false);
    v1::DefaultRequest {
        implementation: "SQLite".into(),
        operation,
        object,
        old_object,
    }
}

fn hook_request(name: &str, phase: v1::HookPhase, outcome: Outcome) -> v1::HookRequest {
    v1::HookRequest {
        hook: "audit".into(),
        phase: phase as i32,
        implementation: "SQLite".into(),
        object: table(name, json!([])),
        extensions: vec![
            serde_json::to_vec(&json!({
                "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableSqliteExtension",
                "metadata": {"name": name, "namespace": "shop"}, "spec": {},
            }))
            .unwrap(),
        ],
        outcome: outcome as i32,
        message: if outcome == Outcome::Unspecified {
            String::new()
        } else {
            "table altered".into()
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declarations_reach_getinfo_and_the_operators_registry() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, _stop_registry, _registry_task) = start_registry(dir.path());
    let (mut client, _stop) = serve(dir.path(), info("tables"), Tables).await;

    let got = client
        .get_info(GetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        got.capabilities,
        [
            Capability::Reconcile as i32,
            Capability::Validate as i32,
            Capability::Default as i32,
            Capability::Hooks as i32,
        ]
    );
    let names: Vec<_> = got
        .hooks
        .iter()
        .map(|h| (h.name.as_str(), h.order))
        .collect();
    assert_eq!(names, [("backup", -10), ("audit", 0)]);
    assert_eq!(got.hooks[0].phase, v1::HookPhase::BeforeReconcile as i32);
    assert_eq!(
        got.hooks[0].behaviour,
        v1::HookBehaviour::SyncEnforce as i32
    );
    assert_eq!(got.hooks[1].behaviour, v1::HookBehaviour::Async as i32);
    assert_eq!(got.call_policies.len(), 2);
    let validate = &got.call_policies[1];
    assert_eq!(validate.call, v1::Call::Validate as i32);
    assert_eq!(validate.failure_policy, v1::FailurePolicy::Ignore as i32);
    let deadline = validate.deadline.unwrap();
    assert_eq!((deadline.seconds, deadline.nanos), (1, 500_000_000));

    // The operator's handshake refuses a heartbeat whose hooks or policies
    // differ from GetInfo's, or break its rules: registering proves that
    // the heartbeats carry the same declarations.
    let start = Instant::now();
    while registry.get("tables").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the plugin did not register"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_answers_field_errors_warnings_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (mut client, _stop) = serve(dir.path(), info("tables"), Tables).await;

    let allowed = client
        .validate(validate_request("users", json!([{"type": "text"}]), false))
        .await
        .unwrap()
        .into_inner();
    assert!(allowed.errors.is_empty());
    assert!(allowed.warnings.is_empty());

    let refused = client
        .validate(validate_request(
            "users",
            json!([{"type": "text"}, {"type": "varchar2"}]),
            true,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        refused.errors,
        [v1::FieldError {
            path: "spec.columns[1].type".into(),
            value: "\"varchar2\"".into(),
            message: "\"varchar2\" is not a SQLite type".into(),
        }]
    );
    assert_eq!(refused.warnings, ["changing users from generation Some(3)"]);

    // A handler that cannot decide: a gRPC error with its message, so the
    // failure policy decides.
    let error = client
        .validate(validate_request("broken", json!([]), false))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Internal);
    assert_eq!(error.message(), "the type catalogue is unreachable");

    let mut not_json = validate_request("users", json!([]), false);
    not_json.object = b"{not json".to_vec();
    let error = client.validate(not_json).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    assert!(
        error.message().starts_with("kplug: "),
        "{}",
        error.message()
    );

    let mut no_operation = validate_request("users", json!([]), false);
    no_operation.operation = v1::Operation::Unspecified as i32;
    let error = client.validate(no_operation).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    assert!(
        error.message().contains("neither CREATE nor UPDATE"),
        "{}",
        error.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_answers_a_json_patch_within_the_allowed_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (mut client, _stop) = serve(dir.path(), info("tables"), Tables).await;

    let defaults = client
        .default(default_request("users"))
        .await
        .unwrap()
        .into_inner();
    let patch: Value = serde_json::from_slice(&defaults.patch).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/storageEngine", "value": "InnoDB"}])
    );
    assert_eq!(defaults.warnings, ["storageEngine defaulted to InnoDB"]);

    let error = client.default(default_request("broken")).await.unwrap_err();
    assert_eq!(error.code(), Code::Internal);
    assert_eq!(error.message(), "defaults unavailable");

    let error = client.default(default_request("sneaky")).await.unwrap_err();
    assert_eq!(error.code(), Code::Internal);
    assert!(
        error
            .message()
            .starts_with("plugin bug: a default may only change /spec"),
        "{}",
        error.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_answers_like_reconcile() {
    let dir = tempfile::tempdir().unwrap();
    let (mut client, _stop) = serve(dir.path(), info("tables"), Tables).await;

    let after = client
        .hook(hook_request(
            "users",
            v1::HookPhase::AfterReconcile,
            Outcome::Ok,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after.outcome, Outcome::Ok as i32);
    let status: Value = serde_json::from_slice(&after.status).unwrap();
    assert_eq!(
        status,
        json!({
            "hook": "audit", "phase": "Some(AfterReconcile)", "implementation": "SQLite",
            "extensions": 1, "after": "OUTCOME_OK", "message": "table altered",
        })
    );

    let before = client
        .hook(hook_request(
            "users",
            v1::HookPhase::BeforeReconcile,
            Outcome::Unspecified,
        ))
        .await
        .unwrap()
        .into_inner();
    let status: Value = serde_json::from_slice(&before.status).unwrap();
    assert_eq!(status["after"], Value::Null);

    for (name, message) in [
        ("broken", "backup disk full"),
        (
            "panicky",
            "the plugin's Hook handler panicked: hook panicked on purpose",
        ),
    ] {
        let failed = client
            .hook(hook_request(
                name,
                v1::HookPhase::BeforeReconcile,
                Outcome::Unspecified,
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(failed.outcome, Outcome::Failed as i32, "{name}");
        assert!(failed.message.starts_with(message), "{}", failed.message);
    }

    let mut not_json = hook_request(
        "users",
        v1::HookPhase::BeforeReconcile,
        Outcome::Unspecified,
    );
    not_json.object = b"[]".to_vec();
    let failed = client.hook(not_json).await.unwrap().into_inner();
    assert_eq!(failed.outcome, Outcome::Failed as i32);
    assert!(failed.message.starts_with("kplug: "), "{}", failed.message);
}

/// Reconciles `users`, panics on `panicky`, and waits for ever on `slow`,
/// saying when that call's handler is dropped.
struct Handlers {
    dropped: std::sync::Mutex<Option<oneshot::Sender<()>>>,
}

/// Sends on drop.
struct DropSignal(Option<oneshot::Sender<()>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(dropped) = self.0.take() {
            let _ = dropped.send(());
        }
    }
}

impl Plugin for Handlers {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        match request.name() {
            "panicky" => panic!("reconcile panicked on purpose"),
            "slow" => {
                let _signal = DropSignal(self.dropped.lock().unwrap().take());
                std::future::pending::<()>().await;
                unreachable!()
            }
            _ => Ok(Response::ok()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_fails_its_own_call_and_an_abandoned_call_drops_its_handler() {
    let dir = tempfile::tempdir().unwrap();
    let (dropped_tx, dropped) = oneshot::channel();
    let plugin = Handlers {
        dropped: std::sync::Mutex::new(Some(dropped_tx)),
    };
    let info = PluginInfo::new("handlers", "1.0.0").offer(Offer::new(
        "myorg.org",
        "DatabaseTable",
        "SQLite",
    ));
    let (mut client, _stop) = serve(dir.path(), info, plugin).await;
    let reconcile = |name: &str| v1::ReconcileRequest {
        children: Default::default(),
        implementation: "SQLite".into(),
        object: table(name, json!([])),
        extensions: vec![],
    };

    let failed = client
        .reconcile(reconcile("panicky"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(failed.outcome, Outcome::Failed as i32);
    assert_eq!(
        failed.message,
        "the plugin's Reconcile handler panicked: reconcile panicked on purpose"
    );
    let ok = client
        .reconcile(reconcile("users"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        ok.outcome,
        Outcome::Ok as i32,
        "the server outlives a panic"
    );

    // The operator gives up on a call at its deadline: the handler is
    // dropped then, not left running.
    let mut call = tonic::Request::new(reconcile("slow"));
    call.set_timeout(Duration::from_millis(200));
    let status = client.reconcile(call).await.unwrap_err();
    // tonic's server answers a passed grpc-timeout with CANCELLED.
    assert!(
        matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded),
        "{status}"
    );
    tokio::time::timeout(Duration::from_secs(10), dropped)
        .await
        .expect("the abandoned call's handler is dropped")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_without_them_advertises_none_and_answers_unimplemented() {
    let dir = tempfile::tempdir().unwrap();
    let (mut client, _stop) = serve(dir.path(), PluginInfo::new("plain", "1.0.0"), Plain).await;
    let got = client
        .get_info(GetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.capabilities, [Capability::Reconcile as i32]);
    assert!(got.hooks.is_empty() && got.call_policies.is_empty());

    let error = client
        .validate(validate_request("users", json!([]), false))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
    assert_eq!(error.message(), "plugin plain does not implement Validate");
    let error = client.default(default_request("users")).await.unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
    let error = client
        .hook(hook_request(
            "users",
            v1::HookPhase::BeforeReconcile,
            Outcome::Unspecified,
        ))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
}

#[tokio::test]
async fn bad_declarations_stop_the_plugin_at_start_up() {
    let hook = |name: &str| {
        Hook::new(
            name,
            "myorg.org",
            "DatabaseTable",
            Phase::BeforeFinalize,
            Behaviour::SyncBypass,
        )
    };
    let cases = [
        (
            PluginInfo::new("p", "1").hook(hook("Backup")),
            "plugin p cannot start: hook \"Backup\": its name must be a DNS label",
        ),
        (
            PluginInfo::new("p", "1").hook(hook("a")).hook(hook("a")),
            "hook \"a\": it is declared twice",
        ),
        (
            PluginInfo::new("p", "1")
                .call_policy(CallPolicy::new(Call::Hook))
                .call_policy(CallPolicy::new(Call::Hook)),
            "call policy for Hook: declared twice",
        ),
        (
            PluginInfo::new("p", "1")
                .call_policy(CallPolicy::new(Call::Finalize).deadline(Duration::ZERO)),
            "call policy for Finalize: the deadline must be positive",
        ),
    ];
    for (info, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let error = Server::new(info, Tables, dir.path())
            .run_until(std::future::pending())
            .await
            .unwrap_err();
        assert!(error.to_string().contains(expected), "{error}");
    }

    let dir = tempfile::tempdir().unwrap();
    let error = Server::new(PluginInfo::new("p", "1").hook(hook("a")), Plain, dir.path())
        .run_until(std::future::pending())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "plugin p cannot start: it declares hooks but does not implement Plugin::hook"
    );
}

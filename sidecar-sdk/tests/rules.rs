//! The Rust SDK against the protocol's rules in
//! `sidecar-sdk/conformance/rules.json`, one test per rule: the same file
//! the Python, Go and TypeScript SDKs test themselves against (see
//! `sidecar-sdk/conformance/README.md`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kplug_proto::rules::{self, SocketDirOrigin};
use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{Outcome, ReconcileRequest};
use kplug_sidecar::{
    BoxError, Error, Object, Offer, Plugin, PluginInfo, Request, Response, Server,
};
use serde_json::{Map, Value, json};

fn rules() -> Map<String, Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/rules.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["rules"].as_object().unwrap().clone()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// Answers every Reconcile with the size of the object it got.
struct Sizes;

impl Plugin for Sizes {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        let size = request.object().raw().to_string().len();
        Ok(Response::ok().status(json!({ "size": size })))
    }
}

fn info(name: &str) -> PluginInfo {
    PluginInfo::new(name, "1.0.0").offer(Offer::new("example.com", "Greeting", "Sizes"))
}

#[test]
fn every_rule_is_checked() {
    let mut names: Vec<_> = rules().keys().cloned().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "environment",
            "heartbeat_backoff",
            "message_limit",
            "plugin_name",
            "reserved_condition_types",
            "reserved_status_keys",
            "socket_dir",
        ],
        "rules.json has a rule this test does not check"
    );
}

#[tokio::test]
async fn plugin_name() {
    let rule = &rules()["plugin_name"];
    for name in strings(&rule["valid"]) {
        let dir = tempfile::tempdir().unwrap();
        // Starts (binds its socket) and stops at once.
        Server::new(info(name), Sizes, dir.path())
            .run_until(async {})
            .await
            .unwrap_or_else(|e| panic!("{name:?} refused: {e}"));
    }
    for case in rule["invalid"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = Server::new(info(name), Sizes, dir.path())
            .run_until(async {})
            .await
            .expect_err(name);
        assert!(matches!(err, Error::InvalidName(_)), "{name:?}: {err}");
        assert!(
            err.to_string().contains("use a DNS label"),
            "{name:?}: {err}"
        );
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "{name:?}: refused before anything is bound"
        );
    }
}

fn extension() -> Object {
    Object::new(
        json!({"apiVersion": "example.com/v1", "kind": "GreetingExtension",
                       "metadata": {"name": "e", "namespace": "default"}}),
    )
    .unwrap()
}

#[test]
fn reserved_status_keys() {
    let rule = &rules()["reserved_status_keys"];
    assert_eq!(
        strings(&rule["reserved"]),
        kplug_proto::RESERVED_STATUS_KEYS
    );
    for key in strings(&rule["reserved"]) {
        for response in [
            Response::ok().status(json!({ key: 1 })),
            Response::ok().extension_status(&extension(), json!({ key: 1 })),
        ] {
            let sent = response.to_json();
            assert_eq!(sent["outcome"], "FAILED", "{key}: {sent}");
            let message = sent["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("{key:?} is reserved for the operator")),
                "{key}: {message}"
            );
        }
    }
    for key in strings(&rule["allowed"]) {
        let sent = Response::ok()
            .status(json!({ key: 1 }))
            .extension_status(&extension(), json!({ key: 1 }))
            .to_json();
        assert_eq!(sent["outcome"], "OK", "{key}: {sent}");
        assert_eq!(sent["status"][key], 1);
    }
}

#[test]
fn reserved_condition_types() {
    let rule = &rules()["reserved_condition_types"];
    assert_eq!(
        strings(&rule["reserved"]),
        kplug_proto::RESERVED_CONDITION_TYPES
    );
    for type_ in strings(&rule["reserved"]) {
        let sent = Response::ok()
            .condition(type_, Some(true), "Done", "")
            .to_json();
        assert_eq!(sent["outcome"], "FAILED", "{type_}: {sent}");
        assert!(
            sent["message"].as_str().unwrap().contains(&format!(
                "condition type {type_:?} is reserved for the operator"
            )),
            "{sent}"
        );
    }
    for type_ in strings(&rule["allowed"]) {
        let sent = Response::ok()
            .condition(type_, Some(true), "Done", "")
            .to_json();
        assert_eq!(sent["outcome"], "OK", "{type_}: {sent}");
        assert_eq!(sent["conditions"][0]["type"], type_);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_limit() {
    let limit = rules()["message_limit"]["max_plugin_message_bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(
        usize::try_from(limit).unwrap(),
        kplug_proto::limits::MAX_PLUGIN_MESSAGE_BYTES
    );
    // An object above gRPC's 4 MiB default goes through: the server uses
    // the protocol's limit, not the default.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(info("sizes"), Sizes, dir.path());
    let socket = server.socket_path();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    while !socket.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let object = serde_json::to_vec(&json!({
        "apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {"data": "x".repeat(5 << 20)},
    }))
    .unwrap();
    let size = object.len();
    let mut client = PluginClient::new(kplug_proto::socket::channel(&socket))
        .max_encoding_message_size(usize::MAX);
    let response = client
        .reconcile(ReconcileRequest {
            children: Default::default(),
            implementation: "Sizes".into(),
            object,
            extensions: vec![],
        })
        .await
        .expect("a 5 MiB object is within the limit")
        .into_inner();
    assert_eq!(response.outcome, Outcome::Ok as i32, "{}", response.message);
    let status: Value = serde_json::from_slice(&response.status).unwrap();
    assert_eq!(status["size"], size);
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

/// What `Server::from_env` makes of the environment, printed by this test
/// binary run again as a child with the environment set (changing this
/// process's environment would race with the other tests).
#[test]
fn environment_child() {
    if std::env::var_os("KPLUG_RULES_CHILD").is_none() {
        return;
    }
    let line = match Server::from_env(info("env"), Sizes) {
        // Started, to see what it makes of a missing socket dir.
        Ok(server) if std::env::var_os("KPLUG_RULES_CHILD_RUN").is_some() => {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            match runtime.block_on(server.run_until(async {})) {
                Ok(()) => json!({ "ran": true }),
                Err(e) => json!({ "error": e.to_string() }),
            }
        }
        Ok(server) => json!({
            "socket": server.socket_path(),
            "seconds": server.configured_interval().as_secs_f64(),
        }),
        Err(e) => json!({ "error": e.to_string() }),
    };
    println!("from_env: {line}");
}

fn from_env(vars: &[(&str, &str)]) -> Value {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "environment_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_remove(kplug_proto::SOCKET_DIR_ENV)
        .env_remove(kplug_proto::rules::HEARTBEAT_INTERVAL_ENV)
        .env("KPLUG_RULES_CHILD", "1");
    for (k, v) in vars {
        child.env(k, v);
    }
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("from_env: ").map(|(_, answer)| answer))
        .unwrap_or_else(|| panic!("no answer from the child: {stdout}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn environment() {
    let rule = &rules()["environment"];
    let dir_var = rule["socket_dir"]["variable"].as_str().unwrap();
    let default_dir = rule["socket_dir"]["default"].as_str().unwrap();
    let interval = &rule["heartbeat_interval"];
    let interval_var = interval["variable"].as_str().unwrap();
    assert_eq!(dir_var, kplug_proto::SOCKET_DIR_ENV);
    assert_eq!(interval_var, kplug_proto::rules::HEARTBEAT_INTERVAL_ENV);

    let socket = |dir: &str| format!("{dir}/plugins/env/plugin.sock");
    let unset = from_env(&[]);
    assert_eq!(unset["socket"], socket(default_dir));
    assert_eq!(
        unset["seconds"].as_f64(),
        interval["default_seconds"].as_f64()
    );
    assert_eq!(from_env(&[(dir_var, "")])["socket"], socket(default_dir));
    assert_eq!(from_env(&[(dir_var, "/tmp/k")])["socket"], socket("/tmp/k"));

    for case in interval["valid"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let got = from_env(&[(interval_var, text)]);
        assert_eq!(
            got["seconds"].as_f64(),
            case["seconds"].as_f64(),
            "{text:?}: {got}"
        );
    }
    for text in strings(&interval["invalid"]) {
        let got = from_env(&[(interval_var, text)]);
        let error = got["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{text:?} accepted: {got}"));
        assert!(
            error.starts_with("plugin env cannot start: KPLUG_HEARTBEAT_INTERVAL="),
            "{text:?}: {error}"
        );
    }
}

#[test]
fn heartbeat_backoff() {
    let rule = &rules()["heartbeat_backoff"];
    let tolerance = rule["tolerance_seconds"].as_f64().unwrap();
    // The SDK's heartbeat loop calls kplug_proto::rules::backoff_delay with
    // its failure count and the interval in force as the cap.
    for sample in rule["samples"].as_array().unwrap() {
        let attempt = u32::try_from(sample["attempt"].as_u64().unwrap()).unwrap();
        let cap = Duration::from_secs_f64(sample["cap_seconds"].as_f64().unwrap());
        let unit = sample["unit"].as_f64().unwrap();
        let got = kplug_proto::rules::backoff_delay(attempt, cap, unit).as_secs_f64();
        let want = sample["delay_seconds"].as_f64().unwrap();
        assert!((got - want).abs() <= tolerance, "{sample}: {got}");
    }
    assert_eq!(
        rule["call_deadline_seconds"].as_f64(),
        Some(kplug_proto::rules::HEARTBEAT_CALL_DEADLINE.as_secs_f64())
    );
}

#[tokio::test]
async fn socket_dir() {
    let rule = &rules()["socket_dir"];
    let samples = rule["samples"].as_array().unwrap();
    // The SDK logs and returns the texts of kplug_proto::rules, with the
    // socket dir's origin: the program's (Server::new) or the
    // environment's (Server::from_env).
    let origin = |name: &str| match name {
        "default" => SocketDirOrigin::Default,
        "environment" => SocketDirOrigin::Environment,
        "program" => SocketDirOrigin::Program,
        other => panic!("unknown origin {other}"),
    };
    for sample in samples {
        let dir = Path::new(sample["socket_dir"].as_str().unwrap());
        let origin = origin(sample["origin"].as_str().unwrap());
        assert_eq!(
            rules::registry_waiting_message(dir, origin),
            sample["waiting"],
            "{sample}"
        );
        assert_eq!(
            rules::socket_dir_missing_message(dir, origin),
            sample["missing"],
            "{sample}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let err = Server::new(info("sizes"), Sizes, &missing)
        .run_until(async {})
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SocketDir { .. }), "{err}");
    let want = rules::socket_dir_missing_message(&missing, SocketDirOrigin::Program);
    assert_eq!(
        err.to_string(),
        format!("plugin sizes cannot start: {want}")
    );

    let var = kplug_proto::SOCKET_DIR_ENV;
    let child = from_env(&[
        (var, missing.to_str().unwrap()),
        ("KPLUG_RULES_CHILD_RUN", "1"),
    ]);
    let want = rules::socket_dir_missing_message(&missing, SocketDirOrigin::Environment);
    assert_eq!(
        child["error"],
        format!("plugin env cannot start: {want}"),
        "{child}"
    );
    assert!(!missing.exists(), "the socket dir is never created");
}

//! The SDK against the operator's real registry, in one process but over
//! real Unix sockets: registration, a Reconcile round trip, re-registration
//! after an operator restart, and the drain on shutdown.

mod support;

use std::time::{Duration, Instant};

use kplug_operator::Registry;
use kplug_proto::v1::registry_client::RegistryClient;
use kplug_proto::v1::{HeartbeatRequest, Outcome, ReconcileRequest};
use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response, Server};
use serde_json::{Value, json};
use support::start_registry;
use tokio::sync::oneshot;

struct Hello;

impl Plugin for Hello {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        if request.name() == "slow" {
            tokio::time::sleep(Duration::from_millis(800)).await;
        }
        Ok(Response::ok().status(json!({ "greeting": format!("hello, {}", request.name()) })))
    }
}

fn info() -> PluginInfo {
    PluginInfo::new("hello", "1.0.0").offer(Offer::new("example.com", "Greeting", "Hello"))
}

async fn wait_registered(registry: &Registry, what: &str) {
    let start = Instant::now();
    while registry.get("hello").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "hello did not register ({what})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn greeting(name: &str) -> ReconcileRequest {
    ReconcileRequest {
        children: Default::default(),
        implementation: "Hello".into(),
        object: serde_json::to_vec(&json!({
            "apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": name, "namespace": "default"}, "spec": {}
        }))
        .unwrap(),
        extensions: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_plugin_registers_reconciles_reregisters_and_drains() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, stop_registry, registry_task) = start_registry(dir.path());

    let (stop_plugin, plugin_stopped) = oneshot::channel::<()>();
    let server =
        Server::new(info(), Hello, dir.path()).heartbeat_interval(Duration::from_millis(200));
    let socket = server.socket_path();
    let plugin = tokio::spawn(server.run_until(async {
        let _ = plugin_stopped.await;
    }));

    wait_registered(&registry, "first start").await;
    let instance = registry.get("hello").unwrap();
    assert_eq!(instance.version(), "1.0.0");
    let response = instance.reconcile(greeting("world")).await.unwrap();
    assert_eq!(response.outcome, Outcome::Ok as i32);
    let status: Value = serde_json::from_slice(&response.status).unwrap();
    assert_eq!(status, json!({"greeting": "hello, world"}));

    // Operator restart: a new registry on the same socket dir learns of the
    // plugin from its next heartbeats.
    stop_registry.send(()).unwrap();
    registry_task.await.unwrap();
    let (registry, _stop_registry, _task) = start_registry(dir.path());
    wait_registered(&registry, "after the operator restarted").await;

    // Shutdown with a call in flight: the call completes, the plugin
    // unregisters, the socket is removed.
    let instance = registry.get("hello").unwrap();
    let in_flight = tokio::spawn(async move { instance.reconcile(greeting("slow")).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop_plugin.send(()).unwrap();
    let response = in_flight
        .await
        .unwrap()
        .expect("the call in flight must complete during the drain");
    assert_eq!(response.outcome, Outcome::Ok as i32);
    plugin.await.unwrap().unwrap();
    assert!(
        registry.get("hello").is_none(),
        "the plugin must be unregistered"
    );
    assert!(!socket.exists(), "the plugin's socket must be removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_handled_after_unregister_does_not_register_the_instance_again() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, _stop_registry, _registry_task) = start_registry(dir.path());
    let start = |stopped: oneshot::Receiver<()>| {
        let server =
            Server::new(info(), Hello, dir.path()).heartbeat_interval(Duration::from_millis(200));
        tokio::spawn(server.run_until(async {
            let _ = stopped.await;
        }))
    };

    // The first instance registers, then shuts down: it unregisters.
    let (stop_first, first_stopped) = oneshot::channel::<()>();
    let first = start(first_stopped);
    wait_registered(&registry, "first instance").await;
    let gone = registry.get("hello").unwrap();
    stop_first.send(()).unwrap();
    first.await.unwrap().unwrap();
    assert!(registry.get("hello").is_none());

    // The socket serves again (a second instance; the first served it
    // while it drained), so a handshake with the old id would succeed.
    let (_stop_second, second_stopped) = oneshot::channel::<()>();
    let _second = start(second_stopped);
    wait_registered(&registry, "second instance").await;
    let second = registry.get("hello").unwrap().instance_id().to_owned();

    // A heartbeat the first instance sent before its Unregister, handled
    // now: refused, and the second instance stays.
    let late = HeartbeatRequest {
        name: gone.name().to_owned(),
        version: gone.version().to_owned(),
        instance_id: gone.instance_id().to_owned(),
        protocol: kplug_proto::PROTOCOL.to_owned(),
        socket: kplug_proto::plugin_socket("hello"),
        offers: gone.offers().to_vec(),
        capabilities: gone.capabilities().iter().map(|c| *c as i32).collect(),
        ..HeartbeatRequest::default()
    };
    let registry_socket = dir.path().join(kplug_proto::REGISTRY_SOCKET);
    let answer = RegistryClient::new(kplug_proto::socket::channel(&registry_socket))
        .heartbeat(late)
        .await
        .unwrap()
        .into_inner();
    assert!(!answer.accepted, "the late heartbeat must be refused");
    assert!(answer.reason.contains("unregistered"), "{}", answer.reason);
    assert_eq!(registry.get("hello").unwrap().instance_id(), second);
}

#[tokio::test]
async fn invalid_plugin_name_is_refused_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let err = Server::new(PluginInfo::new("Not_A_Label", "1"), Hello, dir.path())
        .run_until(async {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("DNS label"), "{err}");
}

#[tokio::test]
async fn a_live_socket_is_not_stolen() {
    let dir = tempfile::tempdir().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let first = Server::new(info(), Hello, dir.path());
    let socket = first.socket_path();
    let first = tokio::spawn(first.run_until(async {
        let _ = stopped.await;
    }));
    let start = Instant::now();
    while !socket.exists() {
        assert!(start.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = Server::new(info(), Hello, dir.path())
        .run_until(async {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("another live process"), "{err}");
    stop.send(()).unwrap();
    first.await.unwrap().unwrap();
}

/// The hello-world example itself (`examples/hello.rs`), as a real process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hello_example_greets() {
    // target/<profile>/deps/hello-<hash> → target/<profile>/examples/hello
    let exe = std::env::current_exe().unwrap();
    let example = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/hello");
    assert!(
        example.is_file(),
        "{} missing: cargo test builds examples; run `cargo build -p kplug-sidecar --examples`",
        example.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let (registry, _stop, _task) = start_registry(dir.path());
    let mut child = tokio::process::Command::new(&example)
        .env("KPLUG_SOCKET_DIR", dir.path())
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.2")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_registered(&registry, "the example process").await;
    let mut request = greeting("kplug");
    request.object = serde_json::to_vec(&json!({
        "apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": "kplug", "namespace": "default"}, "spec": {"salutation": "hi"},
    }))
    .unwrap();
    let response = registry
        .get("hello")
        .unwrap()
        .reconcile(request)
        .await
        .unwrap();
    let status: Value = serde_json::from_slice(&response.status).unwrap();
    assert_eq!(status, json!({"greeting": "hi, kplug!"}));
    // SIGTERM: it unregisters and exits 0.
    nix_free_sigterm(child.id().unwrap());
    assert!(child.wait().await.unwrap().success());
    assert!(registry.get("hello").is_none());
}

fn nix_free_sigterm(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

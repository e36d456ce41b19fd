//! Bad input gets a clear condition or error, and nothing else breaks.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::process::Stdio;
use std::time::Duration;

use kplug_proto::v1::plugin_server::{Plugin, PluginServer};
use kplug_proto::v1::registry_client::RegistryClient;
use kplug_proto::v1::*;
use serde_json::json;
use support::*;

const T: Duration = Duration::from_secs(30);

fn heartbeat(name: &str, socket: &str, implementation: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        mutations: Default::default(),
        name: name.into(),
        version: "0.0.1".into(),
        instance_id: format!("{name}-instance"),
        protocol: "kplug.v1".into(),
        socket: socket.into(),
        offers: vec![Offer {
            children: Default::default(),
            base: Some(GroupKind {
                group: "myorg.org".into(),
                kind: "DatabaseTable".into(),
            }),
            implementation: implementation.into(),
            extensions: vec![GroupKind {
                group: "myorg.org".into(),
                kind: "DatabaseTablePostgreSqlExtension".into(),
            }],
        }],
        capabilities: vec![Capability::Reconcile as i32],
        hooks: Vec::new(),
        call_policies: Vec::new(),
    }
}

/// The `GetInfo` answer that matches `heartbeat(name, _, implementation)`.
fn info_as_heartbeat(name: &str, implementation: &str, description: &str) -> GetInfoResponse {
    let hb = heartbeat(name, "", implementation);
    GetInfoResponse {
        mutations: Default::default(),
        name: hb.name,
        version: hb.version,
        protocol: hb.protocol,
        offers: hb.offers,
        capabilities: hb.capabilities,
        description: description.into(),
        hooks: hb.hooks,
        call_policies: hb.call_policies,
    }
}

/// A `Probe` answer: ready.
fn ready() -> ProbeResponse {
    ProbeResponse {
        ready: true,
        message: String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_registrations_are_refused_with_a_reason() {
    let w = world("badreg", &[]).await;
    let mut registry = RegistryClient::new(kplug_proto::socket::channel(
        &w.sockets.path().join("registry.sock"),
    ));
    let outside = tempfile::tempdir().unwrap();
    let evil = outside.path().join("evil.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&evil).unwrap();
    std::os::unix::fs::symlink(&evil, w.sockets.path().join("link.sock")).unwrap();

    let cases = [
        (heartbeat("", "plugins/x.sock", "X"), "invalid plugin name"),
        (
            heartbeat("Bad_Name", "plugins/x.sock", "X"),
            "invalid plugin name",
        ),
        (heartbeat("escape", "../evil.sock", "X"), "'..'"),
        (
            heartbeat("absolute", evil.to_str().unwrap(), "X"),
            "outside the socket dir",
        ),
        (
            heartbeat("symlink", "link.sock", "X"),
            "outside the socket dir",
        ),
        (
            heartbeat("missing", "plugins/missing.sock", "X"),
            "No such file",
        ),
        (
            HeartbeatRequest {
                protocol: "kplug.v0".into(),
                ..heartbeat("old", "plugins/x.sock", "X")
            },
            "not supported",
        ),
    ];
    for (request, expected) in cases {
        let name = request.name.clone();
        let response = registry
            .heartbeat(request)
            .await
            .expect("refusals are answers, not errors")
            .into_inner();
        assert!(!response.accepted, "{name:?} must be refused");
        assert!(
            response.reason.contains(expected),
            "{name:?}: {:?} should mention {expected:?}",
            response.reason
        );
    }
    // The operator is unharmed: a good plugin still registers.
    let _pg = spawn_plugin(&w, &[]);
    kplug_testenv::eventually("a good plugin registers", T, || async {
        let m = w.metrics().await;
        (metric(&m, "kplug_plugins_registered") == Some(1.0))
            .then_some(())
            .ok_or(m)
    })
    .await;
    // Repeated events of one reason on one object become an event series
    // (kube's Recorder), so only the first refusal's note is kept.
    w.until_events("kplug-operator-0", "the PluginRefused Event", |events| {
        events.iter().any(|(t, r, n)| {
            t == "Warning" && r == "PluginRefused" && n.contains("invalid plugin name")
        })
    })
    .await;
}

/// A plugin written against the raw protocol that returns what the SDKs
/// would never build: invalid JSON, or a status for an object it was not sent.
struct Rogue;

// The calls it does not serve answer UNIMPLEMENTED (the generated default
// stubs), as the protocol asks of a call whose capability is not advertised.
#[tonic::async_trait]
impl Plugin for Rogue {
    async fn get_info(
        &self,
        _: tonic::Request<GetInfoRequest>,
    ) -> Result<tonic::Response<GetInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(info_as_heartbeat(
            "rogue",
            "Rogue",
            "returns broken responses",
        )))
    }
    async fn probe(
        &self,
        _: tonic::Request<ProbeRequest>,
    ) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        Ok(tonic::Response::new(ready()))
    }
    async fn reconcile(
        &self,
        request: tonic::Request<ReconcileRequest>,
    ) -> Result<tonic::Response<ReconcileResponse>, tonic::Status> {
        let object: serde_json::Value =
            serde_json::from_slice(&request.into_inner().object).unwrap();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut response = ReconcileResponse {
            outcome: Outcome::Ok as i32,
            ..Default::default()
        };
        if name == "invalid-json" {
            response.status = b"{\"rows\": 1,".to_vec();
        } else if name == "huge-status" {
            // 50 MB of small keys: valid JSON, so only the size bound can
            // stop it (decoded, it would take the operator past 1 GB).
            let mut status = String::from("{");
            let mut i = 0;
            while status.len() < 50_000_000 {
                status.push_str(&format!("\"k{i}\":0,"));
                i += 1;
            }
            status.push_str("\"end\":0}");
            response.status = status.into_bytes();
        } else if name == "too-big-for-etcd" {
            // Within the operator's 2 MiB, over etcd's 1.5 MiB request
            // limit: only the API server refuses it.
            let blob = "x".repeat(1_800_000);
            response.status = format!("{{\"blob\":\"{blob}\"}}").into_bytes();
        } else if name == "duplicate-conditions" {
            let condition = Condition {
                r#type: "TableReady".into(),
                status: ConditionStatus::True as i32,
                reason: "Twice".into(),
                message: String::new(),
            };
            response.conditions = vec![condition.clone(), condition];
        } else {
            response.extension_statuses.push(ObjectStatus {
                target: Some(ObjectRef {
                    api_version: "myorg.org/v1alpha1".into(),
                    kind: "DatabaseTablePostgreSqlExtension".into(),
                    namespace,
                    name: "somebody-else".into(),
                }),
                status: b"{\"owned\": true}".to_vec(),
            });
        }
        Ok(tonic::Response::new(response))
    }
    async fn finalize(
        &self,
        _: tonic::Request<FinalizeRequest>,
    ) -> Result<tonic::Response<FinalizeResponse>, tonic::Status> {
        Ok(tonic::Response::new(FinalizeResponse {
            outcome: Outcome::Ok as i32,
            ..Default::default()
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_plugin_responses_write_nothing_and_others_are_unaffected() {
    let w = world("rogue", &["--max-plugins", "2"]).await;
    let socket = w.sockets.path().join("plugins/rogue.sock");
    let listener = kplug_proto::socket::bind(&socket).await.unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PluginServer::new(Rogue))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
    );
    let registry_socket = w.sockets.path().join("registry.sock");
    tokio::spawn(async move {
        let mut registry = RegistryClient::new(kplug_proto::socket::channel(&registry_socket));
        loop {
            let _ = registry
                .heartbeat(heartbeat("rogue", "plugins/rogue.sock", "Rogue"))
                .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let _pg = spawn_plugin(&w, &[]);
    // Both registered first, so "healthy" really gets the PostgreSQL plugin.
    kplug_testenv::eventually("both plugins registered", T, || async {
        let m = w.metrics().await;
        (metric(&m, "kplug_plugins_registered") == Some(2.0))
            .then_some(())
            .ok_or(m)
    })
    .await;
    w.create(&pg_ext_resource(), json!({"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTablePostgreSqlExtension", "metadata": {"name": "somebody-else"}, "spec": {}})).await;
    w.create_table("invalid-json", "Rogue", json!({}), false)
        .await;
    w.create_table("foreign-status", "Rogue", json!({}), false)
        .await;
    w.create_table("huge-status", "Rogue", json!({}), false)
        .await;
    w.create_table("duplicate-conditions", "Rogue", json!({}), false)
        .await;
    w.create_table("too-big-for-etcd", "Rogue", json!({}), false)
        .await;
    w.create_table("healthy", "PostgreSQL", json!({}), false)
        .await;

    for (name, reason, expected) in [
        ("invalid-json", "InvalidPluginResponse", "not valid JSON"),
        ("foreign-status", "InvalidPluginResponse", "not sent"),
        (
            "duplicate-conditions",
            "InvalidPluginResponse",
            "\"TableReady\" appears more than once",
        ),
        (
            "huge-status",
            "PluginResponseTooLarge",
            "--max-response-size",
        ),
        (
            "too-big-for-etcd",
            "StatusWriteFailed",
            "the API server refused plugin rogue",
        ),
    ] {
        let table = w
            .table_until(name, reason, T, |t| {
                expect_condition(t, "Reconciled", "False", reason)
            })
            .await;
        let (_, _, message) = condition(&table, "Reconciled").unwrap();
        eprintln!("{name}: Reconciled=False {reason}: {message}");
        assert!(
            message.contains(expected) && message.contains("rogue"),
            "{name}: {message}"
        );
        // Written for the generation the plugin was called for, not left
        // stale at an old one.
        let reconciled = table
            .data
            .pointer("/status/conditions")
            .and_then(|c| c.as_array())
            .and_then(|c| c.iter().find(|c| c["type"] == "Reconciled"))
            .cloned()
            .unwrap();
        assert_eq!(
            reconciled["observedGeneration"],
            json!(table.metadata.generation),
            "{name}"
        );
        assert_eq!(
            table.data.pointer("/status/implementation"),
            Some(&json!("Rogue"))
        );
        assert_eq!(
            table.data.pointer("/status/rows"),
            None,
            "nothing of an invalid response is written"
        );
        let events = w
            .until_events(name, reason, |events| {
                events.iter().any(|(t, r, _)| t == "Warning" && r == reason)
            })
            .await;
        // Instance ids are what Unregister names: never shown to objects.
        assert!(!message.contains("rogue-instance"), "{message}");
        assert!(
            events
                .iter()
                .all(|(_, _, note)| !note.contains("rogue-instance")),
            "{events:?}"
        );
    }
    // The 50 MB answer was refused before it was decoded: the operator
    // never came near holding it.
    let peak = peak_rss_bytes(&w.operator);
    assert!(
        peak < 100 * 1024 * 1024,
        "operator peak RSS {} MiB",
        peak / 1024 / 1024
    );
    // Two plugins are registered, the most --max-plugins allows.
    let mut registry = RegistryClient::new(kplug_proto::socket::channel(
        &w.sockets.path().join("registry.sock"),
    ));
    let third = registry
        .heartbeat(heartbeat("third", "plugins/third.sock", "Third"))
        .await
        .unwrap()
        .into_inner();
    assert!(!third.accepted);
    assert!(third.reason.contains("--max-plugins"), "{}", third.reason);
    let other = w
        .api(&pg_ext_resource())
        .get("somebody-else")
        .await
        .unwrap();
    assert_eq!(
        other.data.get("status"),
        None,
        "a status for an object not sent is never written"
    );
    w.table_until("healthy", "the healthy table is unaffected", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_plugin_hits_its_deadline() {
    let w = world("hang", &["--call-timeout", "2s"]).await;
    let _pg = spawn_plugin(&w, &[]);
    w.create_table(
        "stuck",
        "PostgreSQL",
        json!({"kplug.test/behavior": "hang"}),
        false,
    )
    .await;
    w.create_table("fine", "PostgreSQL", json!({}), false).await;
    w.create_table(
        "refused",
        "PostgreSQL",
        json!({"kplug.test/behavior": "fail"}),
        false,
    )
    .await;
    let stuck = w
        .table_until("stuck", "PluginTimeout", T, |t| {
            expect_condition(t, "Reconciled", "False", "PluginTimeout")
        })
        .await;
    let (_, _, message) = condition(&stuck, "Reconciled").unwrap();
    assert!(
        message.contains("postgresql") && message.contains("2s"),
        "{message}"
    );
    w.table_until("fine", "the other table is unaffected", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
    w.table_until("refused", "the plugin's FAILED", T, |t| {
        expect_condition(t, "Reconciled", "False", "PluginFailed")
    })
    .await;
    // Each call is counted by what it came to, for the plugin that made it;
    // the latency buckets end at the deadline.
    let calls = |m: &str, outcome: &str| {
        metric_sum(
            m,
            "kplug_plugin_calls_total",
            &[
                ("plugin", "postgresql"),
                ("call", "Reconcile"),
                ("outcome", outcome),
            ],
        )
    };
    let m = kplug_testenv::eventually("calls and objects counted", T, || async {
        let m = w.metrics().await;
        let objects = |ready| metric_sum(&m, "kplug_objects", &[("ready", ready)]);
        (calls(&m, "timeout") >= 1.0
            && calls(&m, "ok") >= 1.0
            && calls(&m, "failed") >= 1.0
            && objects("true") == 1.0
            && objects("false") == 2.0)
            .then_some(m.clone())
            .ok_or(m)
    })
    .await;
    assert_eq!(calls(&m, "invalid") + calls(&m, "error"), 0.0, "{m}");
    for outcome in ["failed", "ok"] {
        assert!(
            metric_sum(
                &m,
                "kplug_reconcile_total",
                &[("outcome", outcome), ("plugin", "postgresql")]
            ) >= 1.0,
            "{outcome}: {m}"
        );
    }
    assert!(
        m.contains("kplug_plugin_call_duration_seconds_bucket{le=\"2.0\",plugin=\"postgresql\",call=\"Reconcile\"}"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_extension_is_named_and_resolved_when_created() {
    let w = world("missingext", &["--resync", "1h"]).await;
    let _pg = spawn_plugin(&w, &[]);
    // Only the MariaDB extension exists; the PostgreSQL one is missing.
    w.create(&maria_ext_resource(), json!({"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableMariaDbExtension", "metadata": {"name": "users"}, "spec": {}})).await;
    w.create_table("users", "PostgreSQL", json!({}), true).await;
    let table = w
        .table_until("users", "ExtensionNotFound", T, |t| {
            expect_condition(t, "ExtensionsResolved", "False", "ExtensionNotFound")
        })
        .await;
    let (_, _, message) = condition(&table, "ExtensionsResolved").unwrap();
    assert!(
        message.contains("DatabaseTablePostgreSqlExtension users not found"),
        "{message}"
    );
    assert!(
        w.calls().is_empty(),
        "the plugin is not called with a missing extension"
    );

    w.create(&pg_ext_resource(), json!({"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTablePostgreSqlExtension", "metadata": {"name": "users"}, "spec": {"partitionBy": "hash"}})).await;
    w.table_until("users", "Ready once the extension exists", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_or_malformed_resource_fails_fast_with_a_clear_error() {
    let _ = kplug_testenv::client().await;
    for (resource, expected) in [
        ("myorg.org/v1alpha1/NoSuchKind", "does not serve"),
        ("myorg.org/v1alpha1/databasetables", "CamelCase"),
        ("DatabaseTable", "expected <group>/<version>/<Kind>"),
    ] {
        let output = tokio::time::timeout(
            T,
            tokio::process::Command::new(kplug_testenv::workspace_binary("kplug-operator"))
                .args(["--resource", resource, "--metrics-addr", "127.0.0.1:0"])
                .arg("--socket-dir")
                .arg(tempfile::tempdir().unwrap().path())
                .env(
                    "KUBECONFIG",
                    kplug_testenv::control_plane().kubeconfig_path(),
                )
                .stdin(Stdio::null())
                .output(),
        )
        .await
        .expect("must not hang")
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{resource}: {stderr}");
        assert!(stderr.contains(expected), "{resource}: {stderr}");
    }
}

/// The peak resident set size of a running process (VmHWM).
fn peak_rss_bytes(child: &tokio::process::Child) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id().expect("running"))).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kib * 1024
}

/// Runs `kplug-operator` with `args` until it exits (it must, quickly).
async fn operator_exit(args: &[&str], socket_dir: &std::path::Path) -> (Option<i32>, String) {
    let output = tokio::time::timeout(
        T,
        tokio::process::Command::new(kplug_testenv::workspace_binary("kplug-operator"))
            .args(args)
            .arg("--socket-dir")
            .arg(socket_dir)
            .env(
                "KUBECONFIG",
                kplug_testenv::control_plane().kubeconfig_path(),
            )
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the operator must exit, not run on")
    .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

const NO_STATUS_CRD: &str = r"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: farewells.nostatus.kplug.test
spec:
  group: nostatus.kplug.test
  scope: Namespaced
  names: {plural: farewells, singular: farewell, kind: Farewell}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

/// A taken `--metrics-addr`, a registry socket another operator serves, a
/// TTL shorter than two heartbeats, a kind without a `/status` subresource
/// and allowed extension kinds that are not served each stop the operator
/// at start,
/// with exit code 2 and a message that says what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_fails_loudly_on_a_taken_port_a_live_registry_or_a_kind_without_status() {
    let w = world("startup", &[]).await;
    let resource = ["--resource", "myorg.org/v1alpha1/DatabaseTable"];

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let free_dir = tempfile::tempdir().unwrap();
    let (code, stderr) = operator_exit(
        &[&resource[..], &["--metrics-addr", &taken]].concat(),
        free_dir.path(),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--metrics-addr {taken}")) && stderr.contains("in use"),
        "{stderr}"
    );

    // `w`'s operator serves registry.sock in w.sockets.
    let (code, stderr) = operator_exit(
        &[&resource[..], &["--metrics-addr", "127.0.0.1:0"]].concat(),
        w.sockets.path(),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("registry.sock is served by another live process"),
        "{stderr}"
    );

    let (code, stderr) = operator_exit(
        &[
            &resource[..],
            &[
                "--metrics-addr",
                "127.0.0.1:0",
                "--heartbeat-interval",
                "5s",
                "--heartbeat-ttl",
                "6s",
            ],
        ]
        .concat(),
        free_dir.path(),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("shorter than twice --heartbeat-interval"),
        "{stderr}"
    );

    kplug_testenv::install_crd_yaml(&w.client, NO_STATUS_CRD)
        .await
        .unwrap();
    let (code, stderr) = operator_exit(
        &[
            "--resource",
            "nostatus.kplug.test/v1/Farewell",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        free_dir.path(),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("farewells has no status subresource")
            && stderr.contains("subresources: {status: {}}"),
        "{stderr}"
    );

    // An allowed extension kind the API server does not serve (misspelt,
    // and one from a group with no CRD at all); a served one passes.
    let (code, stderr) = operator_exit(
        &[
            &resource[..],
            &[
                "--metrics-addr",
                "127.0.0.1:0",
                "--extension-kind",
                "myorg.org/DatabaseTableSqliteExtension",
                "--extension-kind",
                "myorg.org/DatabaseTableSqlitExtension",
                "--extension-kind",
                "nowhere.kplug.test/Gizmo",
            ],
        ]
        .concat(),
        free_dir.path(),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "--extension-kind myorg.org/DatabaseTableSqlitExtension, nowhere.kplug.test/Gizmo: \
             the API server does not serve them"
        ) && stderr.contains("kubectl get crd")
            && !stderr.contains("DatabaseTableSqliteExtension,"),
        "{stderr}"
    );
}

/// A plugin that hangs on ten objects holds only its share of the workers:
/// another plugin's object still converges in seconds, not after the hung
/// calls' deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_plugin_holds_only_its_share_of_the_workers() {
    let w = world("share", &["--call-timeout", "60s"]).await;
    let _hung = spawn_plugin(&w, &[]);
    let _healthy = spawn_plugin(
        &w,
        &[
            ("SCRIPTED_NAME", "mariadb"),
            ("SCRIPTED_IMPLEMENTATION", "MariaDB"),
        ],
    );
    kplug_testenv::eventually("both plugins registered", T, || async {
        let m = w.metrics().await;
        (metric(&m, "kplug_plugins_registered") == Some(2.0))
            .then_some(())
            .ok_or(m)
    })
    .await;
    for i in 0..10 {
        w.create_table(
            &format!("stuck-{i}"),
            "PostgreSQL",
            json!({"kplug.test/behavior": "hang"}),
            false,
        )
        .await;
    }
    // Every worker the hung plugin may have is busy before the other
    // plugin's object arrives.
    kplug_testenv::eventually("the hung plugin has its calls", T, || async {
        let calls = w
            .calls()
            .iter()
            .filter(|c| c["call"] == "Reconcile" && c["plugin"] == "postgresql")
            .count();
        (calls >= 6).then_some(()).ok_or(format!("{calls} calls"))
    })
    .await;
    // T (30 s) is half the hung calls' deadline (60 s): an object that had
    // to wait for a worker held by them cannot pass.
    let started = std::time::Instant::now();
    w.create_table("healthy", "MariaDB", json!({}), false).await;
    w.table_until("healthy", "Ready while the other plugin hangs", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
    eprintln!(
        "the healthy plugin's object converged in {:?}",
        started.elapsed()
    );
}

/// A sidecar that offers another plugin's implementation under a name that
/// sorts first is refused: the real plugin keeps its objects, Finalize
/// included, and the refusal is a Warning Event and a metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_implementation_is_refused_and_the_owner_keeps_its_objects() {
    use kube::api::DeleteParams;

    let w = world("impostor", &[]).await;
    let _real = spawn_plugin(&w, &[]);
    w.create_table("users", "PostgreSQL", json!({}), false)
        .await;
    w.table_until("users", "Ready on the real plugin", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
    let _impostor = spawn_plugin(&w, &[("SCRIPTED_NAME", "aaa-evil")]);
    w.until_refused("ImplementationOwned", T).await;
    let refusals = w
        .until_events("kplug-operator-0", "the PluginRefused Event", |events| {
            events.iter().any(|(_, r, _)| r == "PluginRefused")
        })
        .await;
    assert!(
        refusals.iter().any(|(t, r, note)| t == "Warning"
            && r == "PluginRefused"
            && note.contains("belongs to plugin postgresql")
            && note.contains("aaa-evil")),
        "{refusals:?}"
    );
    // A new object, and an edit of the old one, still go to the owner.
    w.create_table("orders", "PostgreSQL", json!({}), false)
        .await;
    for name in ["users", "orders"] {
        let t = w
            .table_until(name, "Ready", T, |t| {
                expect_condition(t, "Ready", "True", "Reconciled")
            })
            .await;
        assert_eq!(t.data.pointer("/status/plugin"), Some(&json!("postgresql")));
    }
    w.tables()
        .delete("users", &DeleteParams::default())
        .await
        .unwrap();
    w.until_gone(&table_resource(), "users", T).await;
    let calls = w.calls();
    assert!(
        calls.iter().all(|c| c["plugin"] != "aaa-evil"),
        "the impostor was called: {calls:?}"
    );
    assert!(
        calls.iter().any(|c| c["call"] == "Finalize"
            && c["name"] == "users"
            && c["plugin"] == "postgresql"),
        "{calls:?}"
    );
}

/// A tenant who may create base objects lists things the operator must not
/// read as extensions: each is refused with a condition naming it, and no
/// watch is started for any of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_that_are_not_allowed_are_refused_and_never_watched() {
    // Namespaces are allow-listed here only to show that a cluster-scoped
    // kind is refused even then.
    let w = world("notallowed", &["--extension-kind", "core/Namespace"]).await;
    let _pg = spawn_plugin(&w, &[]);
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "db-password"}, "stringData": {"password": "hunter2"},
    }))
    .unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(w.client.clone(), &w.ns)
        .create(&Default::default(), &secret)
        .await
        .unwrap();
    w.create_table("victim", "PostgreSQL", json!({}), false)
        .await;
    let cases = [
        (
            "secret",
            json!({"apiVersion": "v1", "kind": "Secret", "name": "db-password"}),
            "--extension-kind core/Secret",
        ),
        (
            "configmap",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "kube-root-ca.crt"}),
            "--extension-kind core/ConfigMap",
        ),
        (
            "namespace",
            json!({"apiVersion": "v1", "kind": "Namespace", "name": "default"}),
            "cluster-scoped",
        ),
        (
            "another-base",
            json!({"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable", "name": "victim"}),
            "cannot be an extension of another one",
        ),
    ];
    for (name, reference, _) in &cases {
        w.create(
            &table_resource(),
            json!({
                "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
                "metadata": {"name": name},
                "spec": {
                    "serverName": "s", "preferredImplementation": "PostgreSQL",
                    "columns": [{"name": "id", "type": "uint64"}],
                    "extensions": [reference],
                },
            }),
        )
        .await;
    }
    for (name, _, expected) in &cases {
        let table = w
            .table_until(name, "ExtensionNotAllowed", T, |t| {
                expect_condition(t, "ExtensionsResolved", "False", "ExtensionNotAllowed")
            })
            .await;
        let (_, _, message) = condition(&table, "ExtensionsResolved").unwrap();
        eprintln!("{name}: {message}");
        assert!(message.contains(expected), "{name}: {message}");
        // No call was made, and `Reconciled` does not say it again.
        assert_eq!(condition(&table, "Reconciled"), None, "{name}");
        w.until_events(name, "the ExtensionNotAllowed Event", |events| {
            events
                .iter()
                .any(|(t, r, _)| t == "Warning" && r == "ExtensionNotAllowed")
        })
        .await;
    }
    let m = w.metrics().await;
    assert_eq!(metric(&m, "kplug_extension_watches"), Some(0.0), "{m}");
    // Nothing was sent to the plugin, and the victim's status is its own.
    assert!(
        w.calls()
            .iter()
            .all(|c| c["name"] == "victim" && c["extensions"] == json!([])),
        "{:?}",
        w.calls()
    );
}

/// A plugin can act only as itself: its name belongs to the UID that
/// registered it, so another container can neither register under it, nor
/// renew or unregister its instance, nor point the operator at its socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_name_belongs_to_its_uid_and_sockets_are_checked_on_every_dial() {
    const PLUGIN_UID: u32 = 65533;
    let w = world("uid", &[]).await;
    let (_real, instance_id) = spawn_plugin_as_uid(&w, PLUGIN_UID, &[]).await;
    w.until_plugin_up("postgresql", T).await;
    // This test process is root: another UID than the plugin's.
    let mut registry = RegistryClient::new(kplug_proto::socket::channel(
        &w.sockets.path().join("registry.sock"),
    ));
    let mut squatter = heartbeat("postgresql", "plugins/postgresql/plugin.sock", "PostgreSQL");
    for id in ["squatter-instance", instance_id.as_str()] {
        squatter.instance_id = id.to_owned();
        let answer = registry
            .heartbeat(squatter.clone())
            .await
            .unwrap()
            .into_inner();
        assert!(!answer.accepted, "{id}");
        assert!(
            answer
                .reason
                .contains(&format!("belongs to UID {PLUGIN_UID}"))
                && answer.reason.contains("UID 0"),
            "{}",
            answer.reason
        );
    }
    let removed = registry
        .unregister(UnregisterRequest {
            name: "postgresql".into(),
            instance_id: instance_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .removed;
    assert!(!removed, "Unregister from another UID must be refused");
    // A name of its own, pointing at the real plugin's socket: the dial
    // finds the socket served by another UID and refuses it.
    let pointer = heartbeat("pointer", "plugins/postgresql/plugin.sock", "Pointer");
    let answer = registry.heartbeat(pointer).await.unwrap().into_inner();
    assert!(!answer.accepted);
    assert!(
        answer.reason.contains(&format!(
            "served by a process of UID {PLUGIN_UID}, not UID 0"
        )),
        "{}",
        answer.reason
    );
    // The real plugin kept its registration and its objects.
    w.create_table("users", "PostgreSQL", json!({}), false)
        .await;
    w.table_until("users", "Ready on the real plugin", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
    let m = w.metrics().await;
    assert_eq!(
        metric(&m, "kplug_registrations_refused_total{reason=\"WrongUid\"}"),
        Some(3.0),
        "{m}"
    );
}

/// A plugin whose GetInfo never answers.
struct Hanging;

// The calls it does not serve answer UNIMPLEMENTED (the generated default
// stubs), as the protocol asks of a call whose capability is not advertised.
#[tonic::async_trait]
impl Plugin for Hanging {
    async fn get_info(
        &self,
        _: tonic::Request<GetInfoRequest>,
    ) -> Result<tonic::Response<GetInfoResponse>, tonic::Status> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Err(tonic::Status::unavailable("never"))
    }
    async fn probe(
        &self,
        _: tonic::Request<ProbeRequest>,
    ) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        Err(tonic::Status::unavailable("never"))
    }
    async fn reconcile(
        &self,
        _: tonic::Request<ReconcileRequest>,
    ) -> Result<tonic::Response<ReconcileResponse>, tonic::Status> {
        Err(tonic::Status::unavailable("never"))
    }
    async fn finalize(
        &self,
        _: tonic::Request<FinalizeRequest>,
    ) -> Result<tonic::Response<FinalizeResponse>, tonic::Status> {
        Err(tonic::Status::unavailable("never"))
    }
}

/// Handshakes that hang (eight names at once, each GetInfo never answered)
/// hold up no other plugin's registration: handshake locks are per name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_handshake_does_not_delay_another_plugins_registration() {
    let w = world("hanging-getinfo", &[]).await;
    let socket = w.sockets.path().join("plugins/hang.sock");
    let listener = kplug_proto::socket::bind(&socket).await.unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PluginServer::new(Hanging))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
    );
    let registry_socket = w.sockets.path().join("registry.sock");
    for i in 0..8 {
        let registry_socket = registry_socket.clone();
        tokio::spawn(async move {
            let mut registry = RegistryClient::new(kplug_proto::socket::channel(&registry_socket));
            let name = format!("hang-{i}");
            loop {
                let _ = registry
                    .heartbeat(heartbeat(&name, "plugins/hang.sock", &format!("Hang{i}")))
                    .await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
    // Let the hanging handshakes start first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let _pg = spawn_plugin(&w, &[]);
    w.until_plugin_up("postgresql", T).await;
    let took = started.elapsed();
    eprintln!("registered {took:?} after it started, next to eight hanging handshakes");
    // Queued behind the hanging ones, it would wait for several handshake
    // timeouts (2 s each); on its own it needs well under one.
    assert!(
        took < Duration::from_secs(5),
        "the real plugin waited {took:?}"
    );
}

/// A registered plugin's socket is swapped for a symlink to a socket outside
/// the socket dir, and the plugin dies: whatever the operator dials next
/// (the liveness check, renewals of the frozen instance, the reconcile of a
/// new object) never reaches the outside socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_swapped_for_a_symlink_is_never_followed() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let w = world("symlink", &[]).await;
    let (real, instance_id) = spawn_plugin_as_uid(&w, 0, &[]).await;
    w.until_plugin_up("postgresql", T).await;
    // Outside the socket dir: a socket that counts who connects.
    let outside = tempfile::tempdir().unwrap();
    let evil = outside.path().join("evil.sock");
    let listener = tokio::net::UnixListener::bind(&evil).unwrap();
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = {
        let reached = reached.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                reached.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        })
    };
    let socket = w.sockets.path().join("plugins/postgresql/plugin.sock");
    std::fs::rename(
        &socket,
        w.sockets.path().join("plugins/postgresql/moved.sock"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&evil, &socket).unwrap();
    let mut real = real;
    signal(&real, nix::sys::signal::Signal::SIGKILL);
    let _ = real.wait().await;

    // The frozen instance is kept alive by heartbeats from its UID, and an
    // object needs the plugin.
    w.create_table("users", "PostgreSQL", json!({}), false)
        .await;
    let mut registry = RegistryClient::new(kplug_proto::socket::channel(
        &w.sockets.path().join("registry.sock"),
    ));
    let mut renewal = heartbeat("postgresql", "plugins/postgresql/plugin.sock", "PostgreSQL");
    renewal.instance_id = instance_id;
    let mut answers = Vec::new();
    for _ in 0..8 {
        if let Ok(answer) = registry.heartbeat(renewal.clone()).await {
            answers.push(answer.into_inner());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    w.table_until("users", "not reconciled through the symlink", T, |t| {
        let (status, _, _) = condition(t, "Ready").ok_or("no Ready condition")?;
        (status != "True")
            .then_some(())
            .ok_or_else(|| "Ready is True".to_owned())
    })
    .await;
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "the operator connected to a socket outside the socket dir (heartbeat answers: {answers:?})"
    );
    let refused: Vec<&HeartbeatResponse> = answers.iter().filter(|a| !a.accepted).collect();
    eprintln!(
        "heartbeats through the symlink: {} refused of {}",
        refused.len(),
        answers.len()
    );
    counter.abort();
}

/// Clients that hold more connections to `registry.sock` than its cap
/// without ever speaking, and one that sends 10,000 heartbeats at once, keep
/// no real plugin from registering and do not grow the operator: idle
/// connections are closed within seconds, requests are bounded per
/// connection, and everything is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_request_floods_on_the_registry_are_bounded_and_released() {
    use tokio::io::AsyncReadExt;

    let w = world("flood", &[]).await;
    let registry_sock = w.sockets.path().join("registry.sock");
    // 300 connections that never send a byte: past the cap of 256.
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(
            tokio::net::UnixStream::connect(&registry_sock)
                .await
                .unwrap(),
        );
    }
    let started = std::time::Instant::now();
    let _plugin = spawn_plugin(&w, &[]);
    w.until_plugin_up("postgresql", T).await;
    eprintln!(
        "a real plugin registered {:?} after 300 idle connections were opened",
        started.elapsed()
    );
    let mut buf = [0u8; 64];
    for (i, conn) in idle.iter_mut().enumerate() {
        let read = tokio::time::timeout(T, conn.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("idle connection {i} is still held"));
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "idle connection {i}: the operator closes it, it does not speak first: {read:?}"
        );
    }
    eprintln!(
        "all 300 idle connections closed after {:?}",
        started.elapsed()
    );

    let client = RegistryClient::new(kplug_proto::socket::channel(&registry_sock));
    let flood = (0..10_000).map(|i| {
        let mut client = client.clone();
        async move {
            client
                .heartbeat(heartbeat(
                    &format!("flood-{i}"),
                    "plugins/none.sock",
                    "Flood",
                ))
                .await
                .map(|answer| answer.into_inner().accepted)
        }
    });
    let flooded = std::time::Instant::now();
    let answers = futures::future::join_all(flood).await;
    let accepted = answers.iter().filter(|a| matches!(a, Ok(true))).count();
    let refused = answers.iter().filter(|a| matches!(a, Ok(false))).count();
    eprintln!(
        "10,000 heartbeats at once: {refused} refused, {} failed, {accepted} accepted, in {:?}; operator peak RSS {} MiB",
        answers.len() - accepted - refused,
        flooded.elapsed(),
        peak_rss_bytes(&w.operator) / (1 << 20)
    );
    assert_eq!(accepted, 0, "no flood name has a socket to register");
    let noted = w
        .events_for("kplug-operator-0")
        .await
        .into_iter()
        .filter(|(_, reason, _)| reason == "PluginRefused")
        .count();
    eprintln!("PluginRefused Events for the flood: {noted}");
    assert!(
        noted <= 20,
        "a flood of refusals became {noted} Events on the API server"
    );
    assert!(
        peak_rss_bytes(&w.operator) < 100 << 20,
        "operator peak RSS {} MiB",
        peak_rss_bytes(&w.operator) / (1 << 20)
    );
    // The real plugin kept its registration, and serves an object.
    w.create_table("users", "PostgreSQL", json!({}), false)
        .await;
    w.table_until("users", "Ready", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
}

/// A well-formed plugin served in this test process: it answers GetInfo
/// with what its heartbeat says, and is always ready.
struct Fake {
    name: String,
    implementation: String,
}

// The calls it does not serve answer UNIMPLEMENTED (the generated default
// stubs), as the protocol asks of a call whose capability is not advertised.
#[tonic::async_trait]
impl Plugin for Fake {
    async fn get_info(
        &self,
        _: tonic::Request<GetInfoRequest>,
    ) -> Result<tonic::Response<GetInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(info_as_heartbeat(
            &self.name,
            &self.implementation,
            "",
        )))
    }
    async fn probe(
        &self,
        _: tonic::Request<ProbeRequest>,
    ) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        Ok(tonic::Response::new(ready()))
    }
}

/// The current resident set size of a running process (VmRSS).
fn rss_bytes(child: &tokio::process::Child) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id().expect("running"))).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib * 1024
}

/// 5,000 registrations at once: 100 of them real, well-formed plugins (each
/// on its own socket), the rest names with no socket. At most
/// `--max-plugins` (64) are registered; the rest are refused with a reason.
/// When the plugins go away, the registry, its metric series and the
/// operator's memory go back down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_are_capped_and_everything_is_released_when_plugins_leave() {
    const REAL: usize = 100;
    const ALL: usize = 5_000;
    // A short TTL: a gone plugin is removed after it, and its series after
    // another.
    let w = world("cap", &["--heartbeat-ttl", "10s"]).await;
    let idle_rss = rss_bytes(&w.operator);
    // Two rounds: what the first leaves behind (allocator pools) is reused
    // by the second, not added to.
    let mut released = Vec::new();
    for round in 1..=2 {
        let mut servers = Vec::new();
        for i in 0..REAL {
            let name = format!("cap-{i}");
            let listener =
                kplug_proto::socket::bind(&w.sockets.path().join(format!("plugins/{name}.sock")))
                    .await
                    .unwrap();
            servers.push(tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(PluginServer::new(Fake {
                        implementation: format!("Cap{i}"),
                        name,
                    }))
                    .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
            ));
        }
        let registry_sock = w.sockets.path().join("registry.sock");
        let client = RegistryClient::new(kplug_proto::socket::channel(&registry_sock));
        // The real plugins heartbeat throughout, as plugins do, on their own
        // connection (a flood on a loaded machine can outlast the TTL).
        let renewals = {
            let client = RegistryClient::new(kplug_proto::socket::channel(&registry_sock));
            tokio::spawn(async move {
                loop {
                    for i in 0..REAL {
                        let name = format!("cap-{i}");
                        let socket = format!("plugins/{name}.sock");
                        let _ = client
                            .clone()
                            .heartbeat(heartbeat(&name, &socket, &format!("Cap{i}")))
                            .await;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        };
        let registrations = (0..ALL).map(|i| {
            let mut client = client.clone();
            async move {
                let name = format!("cap-{i}");
                let socket = format!("plugins/{name}.sock");
                // Streams past the server's limit are refused (REFUSED_STREAM)
                // before the client learns the limit; a plugin sends again.
                let mut answer = Err(tonic::Status::unknown("not sent"));
                for _ in 0..20 {
                    answer = client
                        .heartbeat(heartbeat(&name, &socket, &format!("Cap{i}")))
                        .await
                        .map(|a| a.into_inner());
                    if answer.is_ok() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                (i, answer)
            }
        });
        let answers = futures::future::join_all(registrations).await;
        let accepted: Vec<usize> = answers
            .iter()
            .filter(|(_, a)| matches!(a, Ok(a) if a.accepted))
            .map(|(i, _)| *i)
            .collect();
        let too_many = answers
            .iter()
            .filter(|(i, a)| {
                *i < REAL && matches!(a, Ok(a) if !a.accepted && a.reason.contains("--max-plugins"))
            })
            .count();
        let failed: Vec<String> = answers
            .iter()
            .filter_map(|(i, a)| a.as_ref().err().map(|e| format!("cap-{i}: {e}")))
            .collect();
        assert!(failed.is_empty(), "no answer: {failed:?}");
        // Exactly the cap is registered, and stays so while they heartbeat.
        let m = kplug_testenv::eventually("64 plugins registered", T, || async {
            let m = w.metrics().await;
            (metric(&m, "kplug_plugins_registered") == Some(64.0))
                .then_some(m.clone())
                .ok_or(m)
        })
        .await;
        let loaded_rss = rss_bytes(&w.operator);
        eprintln!(
            "round {round}: {ALL} registrations: {} accepted, {too_many} real ones refused for the cap; RSS {} MiB idle, {} MiB with them",
            accepted.len(),
            idle_rss >> 20,
            loaded_rss >> 20
        );
        assert!(
            accepted.iter().all(|i| *i < REAL),
            "only real plugins register: {accepted:?}"
        );
        assert!(
            accepted.len() <= 64,
            "never more than the cap: {accepted:?}"
        );
        assert_eq!(
            accepted.len() + too_many,
            REAL,
            "every real plugin is accepted or refused for the cap"
        );
        assert!(
            m.contains("kplug_plugin_up{plugin=\"cap-"),
            "registered plugins have series: {m}"
        );
        assert!(loaded_rss < 100 << 20, "RSS {} MiB", loaded_rss >> 20);

        // The plugins go away: they stop heartbeating and unregister, as an
        // SDK does on SIGTERM, and stop serving.
        renewals.abort();
        let _ = renewals.await;
        for i in 0..REAL {
            let name = format!("cap-{i}");
            let _ = client
                .clone()
                .unregister(UnregisterRequest {
                    instance_id: format!("{name}-instance"),
                    name,
                })
                .await;
        }
        for server in servers {
            server.abort();
        }
        for i in 0..REAL {
            let _ = std::fs::remove_file(w.sockets.path().join(format!("plugins/cap-{i}.sock")));
        }
        kplug_testenv::eventually("every plugin is removed, with its series", T, || async {
            let m = w.metrics().await;
            (metric(&m, "kplug_plugins_registered") == Some(0.0)
                && !m.contains("kplug_plugin_up{plugin=\"cap-"))
            .then_some(())
            .ok_or(m)
        })
        .await;
        let released_rss = rss_bytes(&w.operator);
        eprintln!(
            "round {round}: after they left, RSS {} MiB",
            released_rss >> 20
        );
        released.push(released_rss);
    }
    assert!(
        released[1] < released[0] + (4 << 20),
        "the second round grew the operator from {} to {} MiB",
        released[0] >> 20,
        released[1] >> 20
    );
    // The real plugins' room is free again: a new one registers.
    let _pg = spawn_plugin(&w, &[]);
    w.until_plugin_up("postgresql", T).await;
}

/// The socket layout of the shipped manifests, played with file modes: the
/// socket dir and `plugins/` are writable by the operator alone (plugins
/// mount them read-only), and `plugins/postgresql/` by the real plugin's
/// UID alone (its own volume). A squatter of another UID, started first
/// under the same name, can take neither the name's directory nor its
/// socket, and says why; the real plugin then registers and serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_squatter_cannot_keep_the_real_plugin_out() {
    use std::os::unix::fs::PermissionsExt;
    const REAL_UID: u32 = 65533;
    const SQUATTER_UID: u32 = 65534;
    let w = world(
        "squat",
        &["--plugin-uid", &format!("postgresql={REAL_UID}")],
    )
    .await;
    let sockets = w.sockets.path();
    let mode = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(sockets, 0o755);
    std::fs::create_dir_all(sockets.join("plugins/postgresql")).unwrap();
    mode(&sockets.join("plugins"), 0o755);
    std::os::unix::fs::chown(
        sockets.join("plugins/postgresql"),
        Some(REAL_UID),
        Some(REAL_UID),
    )
    .unwrap();

    let scripted = |uid: u32| {
        let mut cmd =
            tokio::process::Command::new(kplug_testenv::workspace_binary("examples/scripted"));
        cmd.env("KPLUG_SOCKET_DIR", sockets)
            .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
            .env("RUST_LOG", "info")
            .uid(uid)
            .gid(uid)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    };
    let squatter = tokio::time::timeout(T, scripted(SQUATTER_UID).output())
        .await
        .expect("the squatter gives up at once")
        .unwrap();
    let said = String::from_utf8_lossy(&squatter.stderr).into_owned()
        + &String::from_utf8_lossy(&squatter.stdout);
    assert!(!squatter.status.success(), "{said}");
    assert!(
        said.contains("Another container holds this plugin's name")
            && said.contains(&format!("UID {REAL_UID}")),
        "the squatter is told why: {said}"
    );
    assert!(
        !sockets.join("plugins/postgresql/plugin.sock").exists(),
        "the squatter created nothing"
    );

    let _real = scripted(REAL_UID).spawn().unwrap();
    w.until_plugin_up("postgresql", T).await;
    w.create_table("users", "PostgreSQL", json!({}), false)
        .await;
    w.table_until("users", "Ready on the real plugin", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
}

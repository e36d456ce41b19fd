//! The admission webhooks for real: the operator registers its own
//! ValidatingWebhookConfiguration and MutatingWebhookConfiguration
//! (`--webhook-self-register`, reached at `--webhook-url` on this host with
//! the certificate it made), the real kube-apiserver calls them, and the
//! real `kubectl apply` shows what they answered. The plugins are the
//! example's SQLite plugin (Validate) and MariaDB plugin (Default: the
//! extension's storage engine; no MariaDB server is needed for that), and
//! the SQLiteShell shell plugin (Validate by a script, under kplug-exec).
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

const T: Duration = Duration::from_secs(45);

/// A world whose operator serves and self-registers the webhooks on a
/// port of its own, with `extra` flags; returns it and the port.
async fn webhook_world(prefix: &str, extra: &[&str]) -> (World, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let url = format!("https://127.0.0.1:{port}");
    let mut args = vec![
        "--webhook-addr",
        &addr,
        "--webhook-url",
        &url,
        "--webhook-self-register",
    ];
    args.extend_from_slice(extra);
    let w = world(prefix, &args).await;
    (w, port)
}

/// The configurations' name for the world's operator.
fn configuration_name(w: &World) -> String {
    format!("kplug.databasetables.myorg.org.{}", w.ns)
}

/// Deletes the world's webhook configurations (they only match its
/// namespace, but need not outlive the test).
async fn unregister(w: &World) {
    let name = configuration_name(w);
    let _ = Api::<ValidatingWebhookConfiguration>::all(w.client.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    let _ = Api::<MutatingWebhookConfiguration>::all(w.client.clone())
        .delete(&name, &DeleteParams::default())
        .await;
}

/// The outcome of one kubectl command.
struct Kubectl {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// The kubectl to run: `$KUBECTL`, else the one `make node-binaries`
/// builds next to kube-testenv (the API server's version), else the PATH's.
fn kubectl_program() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("KUBECTL").filter(|p| !p.is_empty()) {
        return path.into();
    }
    let built = kplug_testenv::testenv_binary().with_file_name("kubectl");
    if built.is_file() {
        built
    } else {
        "kubectl".into()
    }
}

/// Runs `kubectl args` in the world's namespace with `input` on stdin.
async fn kubectl(w: &World, args: &[&str], input: &Value) -> Kubectl {
    let program = kubectl_program();
    let mut child = Command::new(&program)
        .arg("--kubeconfig")
        .arg(kplug_testenv::control_plane().kubeconfig_path())
        .args(["-n", &w.ns])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "run {}: {e}; build it with `make node-binaries`, install kubectl, or set KUBECTL",
                program.display()
            )
        });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    Kubectl {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn apply(w: &World, object: &Value) -> Kubectl {
    kubectl(w, &["apply", "-f", "-"], object).await
}

fn table(name: &str, columns: &[(&str, &str)], extensions: Value) -> Value {
    let columns: Vec<Value> = columns
        .iter()
        .map(|(name, type_)| json!({"name": name, "type": type_}))
        .collect();
    json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
        "metadata": {"name": name},
        "spec": {
            "serverName": "main",
            "preferredImplementation": "SQLite",
            "columns": columns,
            "extensions": extensions,
        },
    })
}

/// Waits until the API server calls the world's webhooks (it picks up a new
/// configuration within a moment): a server-side dry run of `probe` is
/// reviewed, as `kplug_admission_total` shows.
async fn until_webhooks_called(w: &World, probe: &Value) {
    kplug_testenv::eventually("the API server calls the webhooks", T, || async {
        let _ = kubectl(w, &["apply", "--dry-run=server", "-f", "-"], probe).await;
        let m = w.metrics().await;
        if metric_sum(&m, "kplug_admission_total", &[]) > 0.0 {
            Ok(())
        } else {
            Err(m)
        }
    })
    .await;
}

fn sqlite_plugin(w: &World, data: &std::path::Path) -> Child {
    plugin(
        w,
        "sqlite-plugin",
        &["--data-dir", data.to_str().unwrap()],
        &[],
    )
}

/// The MariaDB plugin with no servers: it defaults, it cannot reconcile.
fn mariadb_plugin(w: &World) -> Child {
    plugin(w, "mariadb-plugin", &[], &[("KPLUG_MARIADB_SERVERS", "{}")])
}

fn plugin(w: &World, binary: &str, args: &[&str], envs: &[(&str, &str)]) -> Child {
    Command::new(kplug_testenv::workspace_binary(binary))
        .args(args)
        .env("KPLUG_SOCKET_DIR", w.sockets.path())
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {binary}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_shows_the_plugins_field_errors_and_gets_their_defaults() {
    let (w, _) = webhook_world("admission-apply", &[]).await;
    let data = tempfile::tempdir().unwrap();
    let _sqlite = sqlite_plugin(&w, data.path());
    let _mariadb = mariadb_plugin(&w);
    w.until_plugin_up("sqlite", T).await;
    w.until_plugin_up("mariadb", T).await;
    let bad = table("bad", &[("id", "int64"), ("name", "varchar2")], json!([]));
    until_webhooks_called(&w, &bad).await;

    // Refused, with the plugin's field error as kubectl prints it.
    let out = apply(&w, &bad).await;
    eprintln!("kubectl apply of an unknown column type:\n{}", out.stderr);
    assert!(
        !out.ok,
        "an unknown column type was admitted: {}",
        out.stdout
    );
    for part in [
        "is invalid",
        "spec.columns[1].type",
        "\"varchar2\"",
        "int32, int64, uint64, string, bool, float64, timestamp",
        "(plugin sqlite)",
    ] {
        assert!(out.stderr.contains(part), "{part:?} not in: {}", out.stderr);
    }
    assert!(
        w.tables().get_opt("bad").await.unwrap().is_none(),
        "a refused table was stored"
    );

    // Admitted; the extension's engine is the MariaDB plugin's default.
    let extension = json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableMariaDbExtension",
        "metadata": {"name": "good"}, "spec": {},
    });
    let out = apply(&w, &extension).await;
    assert!(out.ok, "{}", out.stderr);
    let good = table(
        "good",
        &[("id", "int64"), ("name", "string")],
        json!([{"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableMariaDbExtension", "name": "good"}]),
    );
    let out = apply(&w, &good).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(!out.stderr.contains("Warning"), "{}", out.stderr);
    let stored = w.api(&maria_ext_resource()).get("good").await.unwrap();
    assert_eq!(
        stored.data.pointer("/spec/storageEngine"),
        Some(&json!("InnoDB")),
        "{:?}",
        stored.data
    );
    w.ready_on("good", "SQLite", T).await;

    // A preference no plugin offers: admitted (the object will be served by
    // another implementation), with a warning that says how to fix it.
    let mut typo = table("typo", &[("id", "int64")], json!([]));
    typo["spec"]["preferredImplementation"] = json!("SQLlite");
    let out = apply(&w, &typo).await;
    assert!(out.ok, "{}", out.stderr);
    for part in [
        "Warning:",
        "spec.preferredImplementation \"SQLlite\" is offered by no plugin",
        "SQLite",
        "kplug.io/reselect",
    ] {
        assert!(out.stderr.contains(part), "{part:?} not in: {}", out.stderr);
    }
    // Applied again unchanged: no second warning.
    let out = apply(&w, &typo).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(!out.stderr.contains("SQLlite"), "{}", out.stderr);

    let m = w.metrics().await;
    let count = |webhook, plugin, outcome| {
        metric_sum(
            &m,
            "kplug_admission_total",
            &[
                ("webhook", webhook),
                ("plugin", plugin),
                ("outcome", outcome),
            ],
        )
    };
    assert!(count("validating", "sqlite", "invalid") >= 1.0, "{m}");
    assert!(count("validating", "sqlite", "allowed") >= 1.0, "{m}");
    assert!(count("mutating", "mariadb", "defaulted") >= 1.0, "{m}");
    unregister(&w).await;
}

/// Creates table `t` on SQLite, stops the plugin and changes `t`.
async fn change_while_the_plugin_is_down(w: &World) -> Kubectl {
    let data = tempfile::tempdir().unwrap();
    let mut sqlite = sqlite_plugin(w, data.path());
    w.until_plugin_up("sqlite", T).await;
    let t = table("t", &[("id", "int64")], json!([]));
    until_webhooks_called(w, &t).await;
    let out = apply(w, &t).await;
    assert!(out.ok, "{}", out.stderr);
    // Reconciled: the object is bound to the plugin (status.plugin).
    w.ready_on("t", "SQLite", T).await;
    sqlite.kill().await.unwrap();
    apply(
        w,
        &table("t", &[("id", "int64"), ("email", "string")], json!([])),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_is_down_refuses_under_fail() {
    let (w, _) = webhook_world("admission-fail", &["--webhook-failure-policy", "Fail"]).await;
    let out = change_while_the_plugin_is_down(&w).await;
    eprintln!(
        "kubectl apply while the plugin is down (Fail):\n{}",
        out.stderr
    );
    assert!(
        !out.ok,
        "admitted while its plugin was down: {}",
        out.stdout
    );
    for part in [
        "was not checked by plugin sqlite (Validate)",
        "failure policy Fail",
    ] {
        assert!(out.stderr.contains(part), "{part:?} not in: {}", out.stderr);
    }
    let stored = w.tables().get("t").await.unwrap();
    assert_eq!(stored.data["spec"]["columns"].as_array().unwrap().len(), 1);
    // What no plugin judges is not held up by it: removing the finalizer
    // (as someone unblocking a deletion would) changes no spec.
    let out = kubectl(
        &w,
        &[
            "patch",
            "databasetable",
            "t",
            "--type=json",
            "-p",
            "[{\"op\": \"remove\", \"path\": \"/metadata/finalizers\"}]",
        ],
        &json!(null),
    )
    .await;
    assert!(out.ok, "{}", out.stderr);
    let m = w.metrics().await;
    assert!(
        metric_sum(
            &m,
            "kplug_admission_total",
            &[("plugin", "sqlite"), ("outcome", "failed")]
        ) >= 1.0,
        "{m}"
    );
    unregister(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_is_down_admits_with_a_warning_under_ignore() {
    let (w, _) = webhook_world("admission-ignore", &["--webhook-failure-policy", "Ignore"]).await;
    let out = change_while_the_plugin_is_down(&w).await;
    eprintln!(
        "kubectl apply while the plugin is down (Ignore):\n{}",
        out.stderr
    );
    assert!(out.ok, "{}", out.stderr);
    for part in [
        "Warning:",
        "plugin sqlite: Validate failed",
        "failure policy Ignore",
    ] {
        assert!(out.stderr.contains(part), "{part:?} not in: {}", out.stderr);
    }
    // SQLite only validates: it is not reported as failing to default.
    assert!(!out.stderr.contains("Default failed"), "{}", out.stderr);
    let stored = w.tables().get("t").await.unwrap();
    assert_eq!(stored.data["spec"]["columns"].as_array().unwrap().len(), 2);
    unregister(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_plugins_objects_are_admitted_with_a_warning_and_the_configurations_are_written() {
    let (w, port) = webhook_world("admission-none", &[]).await;

    // Self-registration: both configurations, with the CA that signed the
    // certificate served (the API server's calls below prove it works).
    let name = configuration_name(&w);
    let validating = Api::<ValidatingWebhookConfiguration>::all(w.client.clone())
        .get(&name)
        .await
        .unwrap();
    let mutating = Api::<MutatingWebhookConfiguration>::all(w.client.clone())
        .get(&name)
        .await
        .unwrap();
    let v = serde_json::to_value(&validating.webhooks.unwrap()[0]).unwrap();
    let m = serde_json::to_value(&mutating.webhooks.unwrap()[0]).unwrap();
    for (hook, path) in [(&v, "/validate"), (&m, "/mutate")] {
        assert_eq!(
            hook["clientConfig"]["url"],
            format!("https://127.0.0.1:{port}{path}")
        );
        let ca: Vec<u8> = serde_json::from_value(hook["clientConfig"]["caBundle"].clone())
            .map(|k8s_openapi::ByteString(bytes)| bytes)
            .unwrap();
        assert!(
            String::from_utf8_lossy(&ca).contains("BEGIN CERTIFICATE"),
            "{hook}"
        );
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["sideEffects"], "None");
        assert_eq!(hook["timeoutSeconds"], 10);
        let resources: Vec<&str> = hook["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["resources"][0].as_str().unwrap())
            .collect();
        assert_eq!(
            resources,
            [
                "databasetables",
                "databasetablemariadbextensions",
                "databasetablepostgresqlextensions",
                "databasetablesqliteextensions"
            ]
        );
    }
    let managers: Vec<String> = validating
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| f.manager)
        .collect();
    assert_eq!(managers, ["kplug-operator"]);

    let t = table("t", &[("id", "int64")], json!([]));
    until_webhooks_called(&w, &t).await;
    let out = apply(&w, &t).await;
    eprintln!("kubectl apply with no plugin (allow):\n{}", out.stderr);
    assert!(out.ok, "{}", out.stderr);
    for part in [
        "Warning:",
        "no plugin was asked",
        "no ready plugin serves DatabaseTable.myorg.org",
    ] {
        assert!(out.stderr.contains(part), "{part:?} not in: {}", out.stderr);
    }

    // Bad input is answered 400, not with a crash; over TLS verified with
    // the configuration's CA bundle, as the API server does.
    let ca = ca_bundle(&w).await;
    for (body, says) in [
        (
            "{\"kind\": \"AdmissionReview\", \"request\": 3}",
            "not an admission.k8s.io/v1 AdmissionReview",
        ),
        (
            "not json at all",
            "not an admission.k8s.io/v1 AdmissionReview",
        ),
        (
            "{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\"}",
            "carries no request",
        ),
    ] {
        let answer = post(port, &ca, "/validate", body).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.contains(says), "{says:?} not in: {answer}");
    }
    unregister(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_plugins_objects_are_refused_under_no_plugin_deny() {
    let (w, _) = webhook_world("admission-deny", &["--webhook-no-plugin", "deny"]).await;
    let t = table("t", &[("id", "int64")], json!([]));
    until_webhooks_called(&w, &t).await;
    let out = apply(&w, &t).await;
    eprintln!("kubectl apply with no plugin (deny):\n{}", out.stderr);
    assert!(!out.ok, "admitted with no plugin: {}", out.stdout);
    for part in ["no plugin could be asked", "--webhook-no-plugin deny"] {
        assert!(out.stderr.contains(part), "{part:?} not in: {}", out.stderr);
    }
    assert!(w.tables().get_opt("t").await.unwrap().is_none());
    unregister(&w).await;
}

/// POSTs `body` to the webhook on `port` over TLS, trusting `ca` only;
/// returns the whole HTTP answer.
async fn post(port: u16, ca: &str, path: &str, body: &str) -> String {
    use rustls::pki_types::pem::PemObject;
    use tokio::io::AsyncReadExt;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("the webhook's certificate is trusted through the configuration's caBundle");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let _ = tls.read_to_string(&mut answer).await;
    answer
}

/// A CA and a certificate it signs for 127.0.0.1, as PEM: (ca.crt,
/// tls.crt, tls.key), as cert-manager writes a kubernetes.io/tls Secret.
fn issued_for_localhost(ca_name: &str) -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, ca_name);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

fn write_secret(dir: &std::path::Path, (ca, cert, key): &(String, String, String)) {
    // As the kubelet updates a Secret volume: the new files appear at once.
    for (name, text) in [("ca.crt", ca), ("tls.key", key), ("tls.crt", cert)] {
        let partial = dir.join(format!(".{name}.new"));
        std::fs::write(&partial, text).unwrap();
        std::fs::rename(&partial, dir.join(name)).unwrap();
    }
}

async fn ca_bundle(w: &World) -> String {
    let validating = Api::<ValidatingWebhookConfiguration>::all(w.client.clone())
        .get(&configuration_name(w))
        .await
        .unwrap();
    let hook = &validating.webhooks.unwrap()[0];
    let bundle = hook.client_config.ca_bundle.clone().unwrap();
    String::from_utf8(bundle.0).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_a_tls_secret_is_served_and_reloaded_when_renewed() {
    let certs = tempfile::tempdir().unwrap();
    let first = issued_for_localhost("first CA");
    write_secret(certs.path(), &first);
    let dir = certs.path().to_str().unwrap().to_owned();
    let (w, _) = webhook_world("admission-certs", &["--webhook-cert-dir", &dir]).await;
    assert_eq!(ca_bundle(&w).await, first.0);
    let t = table("t", &[("id", "int64")], json!([]));
    until_webhooks_called(&w, &t).await;
    let out = apply(&w, &t).await;
    assert!(
        out.ok && out.stderr.contains("no plugin was asked"),
        "{}",
        out.stderr
    );

    // Renewed by another CA: served, and the configurations follow.
    let second = issued_for_localhost("second CA");
    write_secret(certs.path(), &second);
    kplug_testenv::eventually("the configurations carry the new CA", T, || async {
        let bundle = ca_bundle(&w).await;
        if bundle == second.0 {
            Ok(())
        } else {
            Err(bundle)
        }
    })
    .await;
    kplug_testenv::eventually(
        "the API server trusts the renewed certificate",
        T,
        || async {
            let out = apply(
                &w,
                &table("t", &[("id", "int64"), ("b", "bool")], json!([])),
            )
            .await;
            if out.ok && out.stderr.contains("no plugin was asked") {
                Ok(())
            } else {
                Err(out.stderr)
            }
        },
    )
    .await;
    unregister(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_plugins_validate_script_refuses_at_kubectl_apply() {
    let (w, _) = webhook_world("admission-shell", &[]).await;
    let data = tempfile::tempdir().unwrap();
    let _shell = spawn_shell_plugin(&w, data.path());
    w.until_plugin_up("sqlite-sh", T).await;
    let shell_table = |name: &str, columns: &[(&str, &str)]| {
        let mut t = table(name, columns, json!([]));
        t["spec"]["preferredImplementation"] = json!("SQLiteShell");
        t
    };
    let bad = shell_table("bad", &[("id", "int64"), ("price", "money")]);
    until_webhooks_called(&w, &bad).await;
    let out = apply(&w, &bad).await;
    assert!(
        !out.ok,
        "an unknown column type was admitted: {}",
        out.stdout
    );
    for part in [
        "is invalid",
        "spec.columns[1].type",
        "\"money\"",
        "(plugin sqlite-sh)",
    ] {
        assert!(out.stderr.contains(part), "{part:?} not in: {}", out.stderr);
    }
    assert!(w.tables().get_opt("bad").await.unwrap().is_none());
    let good = shell_table("good", &[("id", "int64"), ("price", "float64")]);
    let out = apply(&w, &good).await;
    assert!(out.ok, "{}", out.stderr);
    w.ready_on("good", "SQLiteShell", T).await;
    unregister(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_selection_all_every_validating_plugin_of_the_kind_is_asked() {
    let (w, _) = webhook_world("admission-all", &["--selection", "all"]).await;
    let (rust_data, shell_data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _sqlite = sqlite_plugin(&w, rust_data.path());
    let _shell = spawn_shell_plugin(&w, shell_data.path());
    w.until_plugin_up("sqlite", T).await;
    w.until_plugin_up("sqlite-sh", T).await;
    let bad = table("bad", &[("id", "int64"), ("price", "money")], json!([]));
    until_webhooks_called(&w, &bad).await;
    let out = apply(&w, &bad).await;
    assert!(
        !out.ok,
        "an unknown column type was admitted: {}",
        out.stdout
    );
    // Both plugins refuse it, each naming itself.
    for part in [
        "spec.columns[1].type",
        "(plugin sqlite)",
        "(plugin sqlite-sh)",
    ] {
        assert!(out.stderr.contains(part), "{part:?} not in: {}", out.stderr);
    }
    let m = w.metrics().await;
    for plugin in ["sqlite", "sqlite-sh"] {
        assert!(
            metric_sum(
                &m,
                "kplug_admission_total",
                &[
                    ("webhook", "validating"),
                    ("plugin", plugin),
                    ("outcome", "invalid")
                ]
            ) >= 1.0,
            "{plugin}: {m}"
        );
    }
    unregister(&w).await;
}

//! `kubectl kplug` (the `kubectl-kplug` binary) against the real control
//! plane, a real operator and real plugin processes: `plugins` lists what is
//! registered, `why` names what blocks an object and what to do (a plugin
//! gone, a child refused or waiting for a mutator), `replay` sends a local
//! plugin the operator's request.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

// The operator's end-to-end test support: a namespace with the walkthrough's
// CRDs, the real kplug-operator and real plugin processes.
#[path = "../../operator/tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const T: Duration = Duration::from_secs(30);

/// Runs `kubectl-kplug args` with the control plane's kubeconfig:
/// (success, stdout, stderr).
async fn kplug(args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-kplug"))
        .args(args)
        .env(
            "KUBECONFIG",
            kplug_testenv::control_plane().kubeconfig_path(),
        )
        .output()
        .await
        .expect("run kubectl-kplug");
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.success(), text(out.stdout), text(out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_why_and_replay() {
    let w = world("kubectl", &[]).await;
    let _pg = spawn_plugin(&w, &[]);
    let mut maria = spawn_mariadb_plugin(&w);
    let operator = format!("http://127.0.0.1:{}", w.metrics_port);
    w.create_table("ready", "PostgreSQL", json!({}), false)
        .await;
    w.create_table("stuck", "MariaDB", json!({}), false).await;
    for name in ["ready", "stuck"] {
        w.table_until(name, "Ready", T, |t| {
            expect_condition(t, "Ready", "True", "Reconciled")
        })
        .await;
    }
    // The MariaDB plugin goes away; `stuck` is on it, and waits for it once
    // its spec changes.
    maria.kill().await.unwrap();
    kplug_testenv::eventually("mariadb removed", T, || async {
        let m = w.metrics().await;
        (metric(&m, "kplug_plugin_up{plugin=\"mariadb\"}") == Some(0.0))
            .then_some(())
            .ok_or(m)
    })
    .await;
    w.merge_table("stuck", json!({"spec": {"serverName": "other-cluster"}}))
        .await;
    w.table_until("stuck", "waiting for mariadb", T, |t| {
        match condition(t, "Ready") {
            Some((status, _, _)) if status == "False" => Ok(()),
            other => Err(format!("Ready is {other:?}")),
        }
    })
    .await;

    // plugins: what is registered, with what it offers.
    let (ok, out, err) = kplug(&["plugins", "--operator", &operator]).await;
    assert!(ok, "{err}");
    let row = out
        .lines()
        .find(|l| l.contains("postgresql"))
        .unwrap_or_else(|| panic!("no postgresql row:\n{out}"));
    for field in [
        "1.0.0",
        "true",
        "DatabaseTable.myorg.org=PostgreSQL (+DatabaseTablePostgreSqlExtension)",
    ] {
        assert!(row.contains(field), "{field} missing from: {row}");
    }

    // Without --operator: no operator Pod runs in this cluster, so it asks
    // the operators started on this machine for it (their adverts), this
    // one among them (other tests' operators share the control plane).
    let (ok, out, err) = kplug(&["plugins"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("{operator} (pid ")),
        "this operator is not listed:\n{out}"
    );
    assert!(
        out.lines().any(|l| l.contains("postgresql")),
        "no postgresql row:\n{out}"
    );

    // why, on an object waiting for a plugin: names it and says what to do.
    let (ok, out, err) = kplug(&[
        "why",
        "databasetable/stuck",
        "-n",
        &w.ns,
        "--operator",
        &operator,
    ])
    .await;
    assert!(ok, "{err}");
    for expected in [
        &format!("DatabaseTable {}/stuck", w.ns),
        "Implementation: MariaDB, plugin mariadb",
        "Preferred:      MariaDB",
        "Ready:          False (",
        "plugin mariadb, chosen for MariaDB, is not registered (registered: postgresql)",
        "Start the plugin that offers MariaDB for DatabaseTable (plugin mariadb)",
        "registry.sock",
        // The call before the plugin went: none since (it waits).
        "last call Reconcile to plugin mariadb: ok in ",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }

    let row = out
        .lines()
        .find(|l| l.starts_with("PluginAvailable"))
        .unwrap();
    assert_eq!(row.split_whitespace().nth(1), Some("False"), "{out}");
    let events = out.split("EVENTS").nth(1).unwrap();
    assert!(
        events
            .lines()
            .any(|l| l.contains("Warning") && l.contains("PluginUnavailable")),
        "the Warning Event is listed:\n{out}"
    );

    // why, on a Ready object: its plugin's state, and nothing to do.
    let (ok, out, err) = kplug(&[
        "why",
        "databasetables/ready",
        "-n",
        &w.ns,
        "--operator",
        &operator,
    ])
    .await;
    assert!(ok, "{err}");
    for expected in [
        "Implementation: PostgreSQL, plugin postgresql",
        "plugin postgresql 1.0.0 is registered, ready",
        "last call Reconcile to plugin postgresql: ok in ",
        "Nothing: it is Ready.",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }
    let events = out.split("EVENTS").nth(1).unwrap();
    assert!(
        events.contains("Normal"),
        "the object's Events are listed:\n{out}"
    );

    // replay: a plugin running on its own (no operator listens on its
    // socket dir) answers the request the operator would send.
    let local = tempfile::tempdir().unwrap();
    let _local = spawn_plugin_in(&w, local.path(), &[("SCRIPTED_VERSION", "9.9.9")]);
    let socket = local.path().join("plugins/postgresql/plugin.sock");
    wait_for_socket(&socket).await;
    let socket = socket.to_str().unwrap();
    let (ok, out, err) = kplug(&[
        "replay",
        "databasetable/ready",
        "-n",
        &w.ns,
        "--plugin-socket",
        socket,
    ])
    .await;
    assert!(ok, "{err}");
    let answer: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(answer["outcome"], "OK", "{answer}");
    assert_eq!(answer["status"]["pluginVersion"], "9.9.9", "{answer}");
    assert_eq!(
        answer["status"]["observedSpec"]["preferredImplementation"], "PostgreSQL",
        "{answer}"
    );
    assert!(err.contains("to plugin postgresql 9.9.9"), "{err}");

    // Bad input: a clear error, exit 1.
    let (ok, _, err) = kplug(&[
        "replay",
        "databasetable/ready",
        "-n",
        &w.ns,
        "--plugin-socket",
        socket,
        "--implementation",
        "Nope",
    ])
    .await;
    assert!(!ok);
    assert!(
        err.contains("does not offer Nope for DatabaseTable (it offers: PostgreSQL)"),
        "{err}"
    );
    let (ok, _, err) = kplug(&["why", "tables-of-nothing/x", "--operator", &operator]).await;
    assert!(!ok);
    assert!(err.contains("serves no kind tables-of-nothing"), "{err}");
    let (ok, _, err) = kplug(&[
        "why",
        "databasetable/missing",
        "-n",
        &w.ns,
        "--operator",
        &operator,
    ])
    .await;
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "DatabaseTable {ns}/missing not found (kubectl get databasetables -n {ns} lists them)",
            ns = w.ns
        )),
        "{err}"
    );
    assert!(!err.contains("Status {"), "no Debug text: {err}");

    // A reader that goes away (`| head -1`) ends it quietly: stdout is
    // closed before it writes anything.
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-kplug"))
        .args([
            "why",
            "databasetable/ready",
            "-n",
            &w.ns,
            "--operator",
            &operator,
        ])
        .env(
            "KUBECONFIG",
            kplug_testenv::control_plane().kubeconfig_path(),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(!err.contains("panicked"), "{err}");
}

/// kplug-exec serving `tests/fixtures/children` (a ConfigMap, a Service
/// and, for the table `refused`, a Secret per table) next to `w`'s
/// operator.
fn spawn_keeper(w: &World) -> tokio::process::Child {
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/children/plugin.yaml");
    tokio::process::Command::new(kplug_testenv::workspace_binary("kplug-exec"))
        .arg("--manifest")
        .arg(manifest)
        .env("KPLUG_SOCKET_DIR", w.sockets.path())
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start kplug-exec (cargo build -p kplug-exec)")
}

/// The children `table`'s status lists, as `(kind, name, state)`, once it
/// lists `count`.
async fn children_listed(w: &World, table: &str, count: usize) -> Vec<(String, String, String)> {
    let t = w
        .table_until(
            table,
            &format!("{table} lists {count} children"),
            T,
            |t| match t.data.pointer("/status/children").and_then(Value::as_array) {
                Some(list) if list.len() == count => Ok(()),
                other => Err(format!("status.children is {other:?}")),
            },
        )
        .await;
    let text = |c: &Value, key: &str| c[key].as_str().unwrap_or_default().to_owned();
    t.data["status"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (text(c, "kind"), text(c, "name"), text(c, "state")))
        .collect()
}

/// The row of `why`'s CHILDREN table for the child `name`, split on runs
/// of spaces: kind, name, plugin, state, message.
fn child_row(out: &str, name: &str) -> Vec<String> {
    let section = out
        .split("\nCHILDREN\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap_or_else(|| panic!("no CHILDREN section:\n{out}"));
    let row = section
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no row for {name}:\n{out}"));
    row.split("   ")
        .map(str::trim)
        .filter(|cell| !cell.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_lists_the_children_and_names_the_one_that_blocks() {
    // ConfigMaps and Services are allowed, Secrets are not; every Service
    // passes through the mutator `backup`, which never runs.
    let w = world(
        "kubectl-children",
        &[
            "--child-kinds",
            "v1/ConfigMap,v1/Service",
            "--mutators",
            "backup=v1/Service",
        ],
    )
    .await;
    let _keeper = spawn_keeper(&w);
    w.until_plugin_up("keeper-sh", T).await;
    let operator = format!("http://127.0.0.1:{}", w.metrics_port);
    w.create_table("refused", "Keeper", json!({}), false).await;
    w.create_table("waiting", "Keeper", json!({}), false).await;
    let listed = children_listed(&w, "refused", 3).await;
    assert_eq!(
        listed,
        [
            ("ConfigMap", "refused-settings", "Applied"),
            ("Service", "refused-server", "Waiting"),
            ("Secret", "refused-password", "Refused"),
        ]
        .map(|(k, n, s)| (k.to_owned(), n.to_owned(), s.to_owned()))
    );
    children_listed(&w, "waiting", 2).await;

    // A refused child: listed with its state and the rule, and named in
    // what to do.
    let why = |table: &'static str| {
        let (ns, operator) = (w.ns.clone(), operator.clone());
        async move {
            let (ok, out, err) = kplug(&[
                "why",
                &format!("databasetable/{table}"),
                "-n",
                &ns,
                "--operator",
                &operator,
            ])
            .await;
            assert!(ok, "{err}");
            // Plain text for a pipe: no escape codes, no Debug text.
            assert!(!out.contains('\u{1b}') && !out.contains("Some("), "{out}");
            out
        }
    };
    let out = why("refused").await;
    assert_eq!(
        child_row(&out, "refused-settings"),
        ["ConfigMap", "refused-settings", "keeper-sh", "Applied"],
        "{out}"
    );
    let secret = child_row(&out, "refused-password");
    assert_eq!(
        secret[..4],
        ["Secret", "refused-password", "keeper-sh", "Refused"],
        "{out}"
    );
    let rule = secret
        .get(4)
        .unwrap_or_else(|| panic!("no message for the refused Secret:\n{out}"));
    let advice = out.split("WHAT TO DO\n").nth(1).unwrap();
    assert!(
        advice.starts_with(&format!(
            "Child Secret refused-password of plugin keeper-sh is refused: {}.",
            rule.trim_end_matches('.')
        )),
        "{out}"
    );
    assert!(
        out.contains("Ready:          False (ChildRefused)"),
        "{out}"
    );

    // A child waiting for a mutator: named with what it waits for.
    let out = why("waiting").await;
    let service = child_row(&out, "waiting-server");
    assert_eq!(
        service[..4],
        ["Service", "waiting-server", "keeper-sh", "Waiting"],
        "{out}"
    );
    assert!(service[4].contains("mutator backup"), "{out}");
    let advice = out.split("WHAT TO DO\n").nth(1).unwrap();
    assert!(
        advice.starts_with(&format!(
            "Child Service waiting-server of plugin keeper-sh is held for a mutator: {}.",
            service[4].trim_end_matches('.')
        )),
        "{out}"
    );
}

async fn wait_for_socket(socket: &Path) {
    kplug_testenv::eventually("the local plugin's socket", T, || async {
        socket.exists().then_some(()).ok_or("not yet")
    })
    .await;
}

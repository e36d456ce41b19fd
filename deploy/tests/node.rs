//! The kustomize overlays on a real node (`kube-testenv --node`), applied the
//! way users apply them (`kubectl apply -k manifests/overlays/<set>`), with
//! the images of `make images` loaded into the node's containerd:
//! - every overlay: both replicas Ready (their probes pass, `/readyz`
//!   included) and a `DatabaseTable` converges on the overlay's
//!   implementation, SQLite inside the pod, MariaDB and PostgreSQL against
//!   the real servers on this machine's loopback;
//! - in the pod: only the operator container holds an API token; every
//!   container runs as its own non-root UID (the plugin's is the one the
//!   operator accepts its name from) with a read-only root filesystem
//!   (checked in the running processes); the pod has no route off the
//!   machine and no DNS server but its own loopback; a plugin container that
//!   is killed is restarted
//!   by the kubelet, registers again, and a table created meanwhile
//!   converges; a new plugin image tag rolls out with every table staying
//!   Ready (for the sqlite pod); in every overlay's pods, each plugin of a
//!   deleted pod unregisters, drains and exits within the grace period;
//! - nothing is left on the machine when the node stops, and no packet left
//!   the machine meanwhile (the uplinks' transmit counters, `Egress`).
//!
//! Root only; needs `make images`, `make node-binaries` and the databases'
//! DSNs in the environment (`make test` provides all three).
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kplug_deploy_tests::yaml::readiness;
use kplug_deploy_tests::{docs, http, repo_root};
use kplug_testenv::{ControlPlane, Egress, HostSnapshot, StartOptions, eventually, target_dir};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// One node per machine: the tests take turns.
static NODE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const NAMESPACE: &str = "kplug-system";
/// Bound for a rollout on a busy machine: image unpacking, probes.
const ROLLOUT: Duration = Duration::from_secs(180);
/// Bound for a table to converge once the plugins run.
const CONVERGE: Duration = Duration::from_secs(90);
/// The node's address, where pods reach the exposed host ports.
const NODE_IP: &str = "10.88.0.1";

fn image(name: &str) -> String {
    format!("ghcr.io/kplug/{name}:0.1.0")
}

/// The database ports on loopback, from the DSNs `make test` exports.
fn dsn(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the tests with `make test` (it starts the databases)")
    })
}

fn port_of(dsn: &str) -> u16 {
    dsn.rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no port in {dsn}"))
}

/// The same DSN as seen from a pod: the host's loopback port, exposed at
/// the node's address.
fn from_pod(dsn: &str) -> String {
    dsn.replace("@127.0.0.1:", &format!("@{NODE_IP}:"))
}

/// A node with the overlay's images and the database ports exposed.
fn start_node(images: &[&str]) -> ControlPlane {
    let ports = [
        port_of(&dsn("KPLUG_MARIADB_DSN")),
        port_of(&dsn("KPLUG_POSTGRES_DSN")),
    ];
    ControlPlane::start_with(StartOptions {
        node: true,
        load_images: images.iter().map(|name| image(name)).collect(),
        host_ports: ports.to_vec(),
        ..StartOptions::default()
    })
    .unwrap_or_else(|e| panic!("kube-testenv --node: {e}"))
}

/// Stops the node (dropping the control plane stops kube-testenv, which
/// removes its pods) and asserts that the machine is as `before`.
/// The machine before a node starts: what it could leave behind, and what
/// has been sent off the machine so far.
struct Before {
    host: HostSnapshot,
    egress: Egress,
}

impl Before {
    fn take() -> Self {
        Self {
            host: HostSnapshot::take(),
            egress: Egress::now(),
        }
    }

    /// Nothing left behind and no packet sent off the machine (through
    /// its uplinks, DNS queries included) since `take`.
    fn assert_clean(&self, what: &str) {
        let leaks = self.host.leaks(&HostSnapshot::take());
        assert!(
            leaks.is_empty(),
            "{what}: the node left this behind:\n{}",
            leaks.join("\n")
        );
        let sent = self.egress.sent_since();
        assert!(
            sent.is_empty(),
            "{what}: packets left the machine through {:?} (a pod, the node or a lookup \
             reached beyond it; or another process on this machine did meanwhile): {}",
            self.egress.interfaces(),
            sent.join(", ")
        );
    }
}

fn stop_and_check(control_plane: ControlPlane, before: &Before, what: &str) {
    tokio::task::block_in_place(|| drop(control_plane));
    before.assert_clean(what);
}

/// `kubectl` (from `make node-binaries`) against the control plane, from the
/// repository root, as a user types it.
fn kubectl(control_plane: &ControlPlane, args: &[&str]) -> Output {
    kubectl_command(control_plane)
        .args(args)
        .output()
        .expect("running kubectl")
}

/// The node's kubectl, on this control plane, from the repository root.
fn kubectl_command(control_plane: &ControlPlane) -> Command {
    let binary = target_dir().join("testenv").join("kubectl");
    assert!(
        binary.is_file(),
        "{} is missing: run `make node-binaries`",
        binary.display()
    );
    let mut command = Command::new(binary);
    command
        .env("KUBECONFIG", control_plane.kubeconfig_path())
        .current_dir(repo_root());
    command
}

fn kubectl_ok(control_plane: &ControlPlane, args: &[&str]) -> String {
    let output = kubectl(control_plane, args);
    assert!(
        output.status.success(),
        "kubectl {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What the pods say, for failure messages: statuses and the operator's
/// log.
fn diagnose(control_plane: &ControlPlane) -> String {
    let pods = kubectl(
        control_plane,
        &["-n", NAMESPACE, "get", "pods", "-o", "wide"],
    );
    let events = kubectl(control_plane, &["-n", NAMESPACE, "get", "events"]);
    let logs = kubectl(
        control_plane,
        &[
            "-n",
            NAMESPACE,
            "logs",
            "deploy/kplug-operator",
            "--all-containers",
            "--tail=40",
        ],
    );
    format!(
        "pods:\n{}\nevents:\n{}\nlogs:\n{}{}",
        String::from_utf8_lossy(&pods.stdout),
        String::from_utf8_lossy(&events.stdout),
        String::from_utf8_lossy(&logs.stdout),
        String::from_utf8_lossy(&logs.stderr)
    )
}

/// Waits until every replica of the operator runs the latest template and is
/// Ready: the probes (`/healthz`, `/readyz`) pass.
async fn rolled_out(client: &Client, control_plane: &ControlPlane) {
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    let done = tokio::time::timeout(ROLLOUT, async {
        loop {
            if let Ok(d) = deployments.get("kplug-operator").await {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let status = d.status.unwrap_or_default();
                if status.observed_generation == d.metadata.generation
                    && status.updated_replicas == Some(want)
                    && status.ready_replicas == Some(want)
                    && status.replicas == Some(want)
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    if done.is_err() {
        panic!(
            "kplug-operator not rolled out within {ROLLOUT:?}\n{}",
            tokio::task::block_in_place(|| diagnose(control_plane))
        );
    }
}

/// Waits until the operator of every pod has `count` plugins registered
/// (its `kplug_plugins_registered` gauge, read from the host at the pod's
/// address). A table created before its preferred implementation has
/// registered falls back to another one and keeps it.
async fn plugins_registered(client: &Client, count: usize) {
    eventually(
        &format!("{count} plugin(s) registered in every pod"),
        ROLLOUT,
        || async {
            let pods = operator_pods(client).await;
            if pods.is_empty() {
                return Err("no pods".to_owned());
            }
            for pod in pods {
                let ip: IpAddr = pod
                    .status
                    .and_then(|s| s.pod_ip)
                    .ok_or("a pod without an address")?
                    .parse()
                    .map_err(|e| format!("{e}"))?;
                let metrics = http::get(ip, 8080, "/metrics")?.1;
                match http::metric(&metrics, "kplug_plugins_registered") {
                    Some(n) if n == count as f64 => {}
                    n => {
                        return Err(format!(
                            "{}: kplug_plugins_registered {n:?}",
                            pod.metadata.name.unwrap_or_default()
                        ));
                    }
                }
            }
            Ok(())
        },
    )
    .await;
}

fn tables(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("myorg.org", "v1alpha1", "DatabaseTable"),
        "databasetables",
    );
    Api::namespaced_with(client.clone(), "default", &resource)
}

/// The walkthrough's `users` extensions, shared by every table here.
const EXTENSIONS: [(&str, &str, &str); 3] = [
    (
        "DatabaseTableMariaDbExtension",
        "databasetablemariadbextensions",
        r#"{"storageEngine": "InnoDB"}"#,
    ),
    (
        "DatabaseTablePostgreSqlExtension",
        "databasetablepostgresqlextensions",
        r#"{"partitionBy": "hash"}"#,
    ),
    (
        "DatabaseTableSqliteExtension",
        "databasetablesqliteextensions",
        r#"{"indexes": ["name"]}"#,
    ),
];

/// The walkthrough's `users` table under another name, preferring
/// `implementation`, with its three extensions.
async fn create_table(client: &Client, name: &str, implementation: &str) {
    for (kind, plural, spec) in EXTENSIONS {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("myorg.org", "v1alpha1", kind),
            plural,
        );
        let extension: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1alpha1",
            "kind": kind,
            "metadata": {"name": "users"},
            "spec": serde_json::from_str::<Value>(spec).unwrap(),
        }))
        .unwrap();
        match Api::<DynamicObject>::namespaced_with(client.clone(), "default", &resource)
            .create(&PostParams::default(), &extension)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("creating the {kind} users: {e}"),
        }
    }
    let table: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "myorg.org/v1alpha1",
        "kind": "DatabaseTable",
        "metadata": {"name": name},
        "spec": {
            "serverName": "authorization-cluster",
            "preferredImplementation": implementation,
            "columns": [{"name": "id", "type": "uint64"}, {"name": "name", "type": "string"}],
            "extensions": [
                {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableMariaDbExtension", "name": "users"},
                {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTablePostgreSqlExtension", "name": "users"},
                {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableSqliteExtension", "name": "users"},
            ],
        },
    }))
    .expect("a DatabaseTable");
    tables(client)
        .create(&PostParams::default(), &table)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
}

async fn converged(
    client: &Client,
    control_plane: &ControlPlane,
    name: &str,
    implementation: &str,
) {
    let tables = tables(client);
    let done = tokio::time::timeout(CONVERGE, async {
        loop {
            if let Ok(table) = tables.get(name).await {
                let (ready, observed, chosen) = readiness(&table.data);
                if ready == "True"
                    && Some(observed) == table.metadata.generation
                    && chosen == implementation
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    if done.is_err() {
        let table = tables.get(name).await.map(|t| t.data["status"].clone());
        panic!(
            "{name} not Ready on {implementation} within {CONVERGE:?}; status: {table:?}\n{}",
            tokio::task::block_in_place(|| diagnose(control_plane))
        );
    }
}

/// The Secret a database component references (its kustomization says how
/// users create it): serverName -> DSN, as seen from the pod.
fn create_servers_secret(control_plane: &ControlPlane, dir: &Path, plugin: &str, var: &str) {
    let file = dir.join(format!("{plugin}-servers.json"));
    std::fs::write(
        &file,
        json!({"authorization-cluster": from_pod(&dsn(var))}).to_string(),
    )
    .unwrap();
    let from_file = format!("--from-file=servers.json={}", file.display());
    // The overlay creates the namespace too; the Secret comes first here.
    let _ = kubectl(control_plane, &["create", "namespace", NAMESPACE]);
    kubectl_ok(
        control_plane,
        &[
            "-n",
            NAMESPACE,
            "create",
            "secret",
            "generic",
            &format!("kplug-{plugin}-servers"),
            &from_file,
        ],
    );
}

/// Each overlay on a node of its own: both replicas Ready, a table converging
/// on the overlay's implementation, nothing left behind.
#[tokio::test(flavor = "multi_thread")]
async fn every_overlay_runs_on_a_real_node_and_converges_a_table() {
    let _turn = NODE.lock().await;
    let secrets = tempfile::tempdir().unwrap();
    let overlays: [(&str, &[&str], &str); 4] = [
        ("sqlite", &["kplug-operator", "sqlite-plugin"], "SQLite"),
        ("mariadb", &["kplug-operator", "mariadb-plugin"], "MariaDB"),
        (
            "postgresql",
            &["kplug-operator", "postgresql-plugin"],
            "PostgreSQL",
        ),
        (
            "all",
            &[
                "kplug-operator",
                "sqlite-plugin",
                "mariadb-plugin",
                "postgresql-plugin",
            ],
            "PostgreSQL",
        ),
    ];
    for (overlay, images, implementation) in overlays {
        let before = Before::take();
        let control_plane = tokio::task::block_in_place(|| start_node(images));
        let client = control_plane.client().await.expect("client");
        tokio::task::block_in_place(|| {
            if images.contains(&"mariadb-plugin") {
                create_servers_secret(
                    &control_plane,
                    secrets.path(),
                    "mariadb",
                    "KPLUG_MARIADB_DSN",
                );
            }
            if images.contains(&"postgresql-plugin") {
                create_servers_secret(
                    &control_plane,
                    secrets.path(),
                    "postgresql",
                    "KPLUG_POSTGRES_DSN",
                );
            }
            kubectl_ok(
                &control_plane,
                &["apply", "-k", &format!("manifests/overlays/{overlay}")],
            );
        });
        rolled_out(&client, &control_plane).await;
        plugins_registered(&client, images.len() - 1).await;
        let name = format!("node-{overlay}");
        create_table(&client, &name, implementation).await;
        converged(&client, &control_plane, &name, implementation).await;
        let plugins: Vec<&str> = images
            .iter()
            .filter_map(|image| image.strip_suffix("-plugin"))
            .collect();
        for pod in operator_pods(&client).await {
            tokio::task::block_in_place(|| assert_confined(&pod, &plugins));
        }
        eprintln!(
            "overlay {overlay}: 2 replicas Ready and confined, {name} Ready on {implementation}"
        );
        tokio::task::block_in_place(|| kubectl_kplug_sees(&control_plane, &plugins, &name));

        // The table goes before the node does (its finalizer drops it in
        // the real database).
        tables(&client)
            .delete(&name, &Default::default())
            .await
            .expect("delete the table");
        eventually(
            &format!("{name} is finalized and gone"),
            CONVERGE,
            || async {
                match tables(&client).get_opt(&name).await {
                    Ok(None) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await;
        deleting_a_pod_drains_its_plugins(&client, &control_plane, &plugins).await;
        drop(client);
        stop_and_check(control_plane, &before, &format!("overlay {overlay}"));
    }
}

/// `kubectl kplug`, as kubectl runs it (found on the PATH as
/// `kubectl-kplug`), reaches each operator replica through the API server's
/// pod proxy: both replicas list the overlay's plugins, and `why` says the
/// table is Ready and names its last call (made by the leader).
fn kubectl_kplug_sees(control_plane: &ControlPlane, plugins: &[&str], table: &str) {
    let bin_dir = target_dir().join("debug");
    assert!(
        bin_dir.join("kubectl-kplug").is_file(),
        "target/debug/kubectl-kplug is missing: cargo build -p kubectl-kplug"
    );
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |args: &[&str]| {
        let output = kubectl_command(control_plane)
            .env("PATH", &path)
            .arg("kplug")
            .args(args)
            .output()
            .expect("running kubectl kplug");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "kubectl kplug {args:?}: {}\n{text}",
            String::from_utf8_lossy(&output.stderr)
        );
        text
    };
    let listed = run(&["plugins"]);
    for plugin in plugins {
        let replicas = listed
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some(*plugin))
            .count();
        assert_eq!(replicas, 2, "{plugin} on both replicas:\n{listed}");
    }
    let why = run(&["why", &format!("databasetable/{table}")]);
    for expected in [
        "Ready:          True",
        "last call Reconcile to plugin",
        "Nothing: it is Ready.",
    ] {
        assert!(why.contains(expected), "{expected:?} missing from:\n{why}");
    }
}

/// The main process of a running container, found from the host: the
/// container's id (from the pod's status) is in its processes' cgroup path.
struct ContainerProcess {
    pid: u32,
}

impl ContainerProcess {
    /// The lowest pid in the cgroup of `container` of `pod` (its first
    /// process), or None while it is not running.
    fn of(pod: &Pod, container: &str) -> Option<Self> {
        let id = pod
            .status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .iter()
            .find(|c| c.name == container && c.state.as_ref().is_some_and(|s| s.running.is_some()))?
            .container_id
            .as_ref()?
            .rsplit("://")
            .next()?
            .to_owned();
        std::fs::read_dir("/proc")
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
                let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
                cgroup.contains(&id).then_some(pid)
            })
            .min()
            .map(|pid| Self { pid })
    }

    fn root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.pid))
    }

    /// `path` as the container sees it, from the host: symbolic links are
    /// followed inside the container's root (an image's `/var/run -> /run`
    /// would otherwise lead to the host's `/run`).
    fn path(&self, path: &str) -> PathBuf {
        let root = self.root();
        let mut pending: Vec<String> = path.split('/').rev().map(str::to_owned).collect();
        let mut resolved = PathBuf::new();
        let mut links = 0;
        while let Some(part) = pending.pop() {
            match part.as_str() {
                "" | "." => continue,
                ".." => {
                    resolved.pop();
                    continue;
                }
                _ => {}
            }
            let candidate = resolved.join(&part);
            match std::fs::read_link(root.join(&candidate)) {
                Ok(target) => {
                    links += 1;
                    assert!(links < 40, "too many links resolving {path}");
                    let target = target.to_string_lossy().into_owned();
                    if target.starts_with('/') {
                        resolved = PathBuf::new();
                    }
                    pending.extend(target.split('/').rev().map(str::to_owned));
                }
                Err(_) => resolved = candidate,
            }
        }
        root.join(resolved)
    }

    /// The effective uid (`Uid:` in /proc/<pid>/status).
    fn uid(&self) -> u32 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1)?.parse().ok())
            .expect("a Uid line")
    }

    /// Whether its root filesystem is mounted read-only.
    fn read_only_root(&self) -> bool {
        let mounts = std::fs::read_to_string(format!("/proc/{}/mountinfo", self.pid)).unwrap();
        mounts.lines().any(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            fields.get(4) == Some(&"/")
                && fields
                    .get(5)
                    .is_some_and(|o| o.split(',').any(|o| o == "ro"))
        })
    }

    fn kill(&self) {
        let status = Command::new("kill")
            .args(["-KILL", &self.pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -KILL {}", self.pid);
    }
}

async fn operator_pods(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/name=kplug-operator"))
        .await
        .expect("list the operator's pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn restarts(pod: &Pod, container: &str) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == container))
        .map_or(0, |c| c.restart_count)
}

/// The UID each plugin's container runs as in the manifests, which the
/// operator accepts the plugin's name from (`KPLUG_PLUGIN_UID_<NAME>`).
const PLUGIN_UIDS: [(&str, u32); 3] =
    [("sqlite", 10001), ("mariadb", 10002), ("postgresql", 10003)];

/// Every running container of an operator pod, looked into from the host
/// (`/proc/<pid>/root`, `status`, `mountinfo`, its network namespace): only
/// the operator holds an API token; each container runs as the UID the
/// manifests give it, with a read-only root filesystem; each plugin's socket
/// is owned by that UID; and nothing the pod sends can leave the machine.
fn assert_confined(pod: &Pod, plugins: &[&str]) {
    let name = pod.name_any();
    let operator = ContainerProcess::of(pod, "operator")
        .unwrap_or_else(|| panic!("{name}: the operator's process"));
    assert!(
        operator
            .path("/var/run/secrets/kubernetes.io/serviceaccount/token")
            .is_file(),
        "{name}: the operator holds its token"
    );
    assert_eq!(operator.uid(), 65532, "{name}: the operator's user");
    assert!(
        operator.read_only_root(),
        "{name}: the operator's root filesystem is writable"
    );
    for plugin in plugins {
        let container = format!("{plugin}-plugin");
        let process = ContainerProcess::of(pod, &container)
            .unwrap_or_else(|| panic!("{name}: the process of {container}"));
        assert!(
            !process.path("/var/run/secrets").exists(),
            "{name}: {container} has a /var/run/secrets"
        );
        let uid = PLUGIN_UIDS
            .iter()
            .find(|(p, _)| p == plugin)
            .map(|(_, uid)| *uid)
            .unwrap();
        assert_eq!(process.uid(), uid, "{name}: {container}'s user");
        assert!(
            process.read_only_root(),
            "{name}: {container}'s root filesystem is writable"
        );
        // Its socket, created on that read-only root's volume, as its user.
        let socket = process.path(&format!("/var/run/kplug/plugins/{plugin}/plugin.sock"));
        // A replica that is not the leader may still be starting its
        // plugin (a Python one takes a moment to import).
        let started = std::time::Instant::now();
        let meta = loop {
            match std::fs::metadata(&socket) {
                Ok(meta) => break meta,
                Err(e) if started.elapsed() > CONVERGE => {
                    panic!("{name}: {container}'s socket {}: {e}", socket.display())
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        assert_eq!(
            std::os::unix::fs::MetadataExt::uid(&meta),
            uid,
            "{name}: the owner of {container}'s socket"
        );
    }
    // No route but the bridge and the Service range, and names resolve
    // against the pod's own loopback.
    let outside = Command::new("nsenter")
        .arg(format!("--net=/proc/{}/ns/net", operator.pid))
        .args(["bash", "-c", "exec 3<>/dev/tcp/192.0.2.1/80"])
        .output()
        .expect("running nsenter");
    let said = String::from_utf8_lossy(&outside.stderr);
    assert!(
        !outside.status.success() && said.contains("Network is unreachable"),
        "{name}: a connection from the pod to an outside address: {said}"
    );
    let resolv = std::fs::read_to_string(operator.path("/etc/resolv.conf"))
        .expect("the operator's resolv.conf");
    let nameservers: Vec<&str> = resolv
        .lines()
        .filter_map(|l| l.strip_prefix("nameserver "))
        .collect();
    assert_eq!(nameservers, ["127.0.0.1"], "{name}: {resolv}");
}

/// The SQLite overlay's pods, looked into from the host: tokens, users,
/// read-only roots; then a killed sidecar and a plugin upgrade.
#[tokio::test(flavor = "multi_thread")]
async fn the_sqlite_pod_is_confined_survives_a_killed_sidecar_and_an_upgrade() {
    let _turn = NODE.lock().await;
    let before = Before::take();
    let control_plane =
        tokio::task::block_in_place(|| start_node(&["kplug-operator", "sqlite-plugin"]));
    let client = control_plane.client().await.expect("client");
    tokio::task::block_in_place(|| {
        kubectl_ok(
            &control_plane,
            &["apply", "-k", "manifests/overlays/sqlite"],
        )
    });
    rolled_out(&client, &control_plane).await;
    plugins_registered(&client, 1).await;
    create_table(&client, "first", "SQLite").await;
    converged(&client, &control_plane, "first", "SQLite").await;

    for pod in operator_pods(&client).await {
        tokio::task::block_in_place(|| assert_confined(&pod, &["sqlite"]));
    }

    // A killed plugin container: the kubelet restarts it, it registers
    // again, and a table created while it was down converges.
    let pods = operator_pods(&client).await;
    for pod in &pods {
        ContainerProcess::of(pod, "sqlite-plugin")
            .expect("the plugin's process")
            .kill();
    }
    create_table(&client, "while-down", "SQLite").await;
    let pods_api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    for pod in &pods {
        let name = pod.name_any();
        eventually(
            &format!("{name}: the kubelet restarts sqlite-plugin"),
            ROLLOUT,
            || async {
                let pod = pods_api.get(&name).await.map_err(|e| e.to_string())?;
                if restarts(&pod, "sqlite-plugin") >= 1 {
                    Ok(())
                } else {
                    Err("no restart yet".to_owned())
                }
            },
        )
        .await;
    }
    converged(&client, &control_plane, "while-down", "SQLite").await;
    rolled_out(&client, &control_plane).await;

    // A new plugin image tag, set in an overlay of the user's own, rolls out
    // (a new pod Ready before an old one goes); every table stays Ready.
    let overlay = tempfile::Builder::new()
        .prefix("upgrade-")
        .tempdir_in(repo_root().join("target"))
        .unwrap();
    let base = pathdiff(
        &repo_root().join("manifests/overlays/sqlite"),
        overlay.path(),
    );
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {base}\nimages:\n- name: ghcr.io/kplug/sqlite-plugin\n  newTag: 0.1.1\n"
        ),
    )
    .unwrap();
    tag_in_node(
        &control_plane,
        &image("sqlite-plugin"),
        "ghcr.io/kplug/sqlite-plugin:0.1.1",
    );
    let overlay_arg = overlay.path().display().to_string();
    tokio::task::block_in_place(|| kubectl_ok(&control_plane, &["apply", "-k", &overlay_arg]));
    let watch_tables = {
        let tables = tables(&client);
        tokio::spawn(async move {
            let mut not_ready = Vec::new();
            loop {
                if let Ok(list) = tables.list(&ListParams::default()).await {
                    // The tables that were Ready before the rollout.
                    let before = ["first", "while-down"];
                    for table in list
                        .items
                        .into_iter()
                        .filter(|t| before.contains(&t.name_any().as_str()))
                    {
                        let (ready, _, _) = readiness(&table.data);
                        if ready != "True" {
                            not_ready.push(format!(
                                "{}: Ready={ready:?} {}",
                                table.name_any(),
                                table.data["status"]
                            ));
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                if not_ready.len() > 100 {
                    return not_ready;
                }
            }
        })
    };
    rolled_out(&client, &control_plane).await;
    for pod in operator_pods(&client).await {
        let spec_image = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == "sqlite-plugin"))
            .and_then(|c| c.image.clone());
        assert_eq!(
            spec_image.as_deref(),
            Some("ghcr.io/kplug/sqlite-plugin:0.1.1")
        );
    }
    create_table(&client, "after-upgrade", "SQLite").await;
    converged(&client, &control_plane, "after-upgrade", "SQLite").await;
    watch_tables.abort();
    let not_ready = match watch_tables.await {
        Ok(not_ready) => not_ready,
        Err(e) if e.is_cancelled() => Vec::new(),
        Err(e) => panic!("{e}"),
    };
    assert!(
        not_ready.is_empty(),
        "tables not Ready during the rollout:\n{}",
        not_ready.join("\n")
    );

    deleting_a_pod_drains_its_plugins(&client, &control_plane, &["sqlite"]).await;

    drop(client);
    stop_and_check(control_plane, &before, "the sqlite pod test");
}

/// Deleting a pod: the kubelet sends SIGTERM to every container; each of its
/// plugins (`<plugin>-plugin` containers) unregisters from the operator,
/// drains its calls and exits cleanly (status 0, not killed), within the
/// pod's `terminationGracePeriodSeconds`. Each container's log file on the
/// node is opened before the deletion and read to its end once the
/// container has stopped (`kubectl logs -f` can end before the last lines,
/// and the kubelet removes a stopped container's log file); a finalizer of
/// the test's holds the pod object until the containers' final states are
/// read.
async fn deleting_a_pod_drains_its_plugins(
    client: &Client,
    control_plane: &ControlPlane,
    plugins: &[&str],
) {
    const HOLD: &str = "kplug.test/hold-for-logs";
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let pod = operator_pods(client).await.remove(0);
    let name = pod.name_any();
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .expect("terminationGracePeriodSeconds");
    let containers: Vec<String> = plugins.iter().map(|p| format!("{p}-plugin")).collect();
    let mut log_files: Vec<std::fs::File> = containers
        .iter()
        .map(|container| {
            let dir = control_plane.data_dir().expect("a data dir").join(format!(
                "node/pod-logs/{NAMESPACE}_{name}_{}/{container}",
                pod.uid().unwrap()
            ));
            // `<restart count>.log`: the running container's is the newest.
            let newest = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|e| e == "log"))
                .max_by_key(|path| {
                    path.file_stem()
                        .and_then(|s| s.to_str()?.parse::<u32>().ok())
                        .unwrap_or(0)
                })
                .unwrap_or_else(|| panic!("no log file in {}", dir.display()));
            std::fs::File::open(&newest).unwrap()
        })
        .collect();
    pods.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [HOLD]}})),
    )
    .await
    .expect("hold the pod with a finalizer");
    pods.delete(&name, &Default::default())
        .await
        .expect("delete the pod");

    let (states, deleted_at) = eventually(
        &format!("{name}: {containers:?} stop after SIGTERM"),
        Duration::from_secs(u64::try_from(grace).unwrap() + 30),
        || async {
            let pod = pods.get(&name).await.map_err(|e| e.to_string())?;
            // deletionTimestamp is the deadline (request + grace period).
            let deleted_at = pod
                .metadata
                .deletion_timestamp
                .as_ref()
                .zip(pod.metadata.deletion_grace_period_seconds)
                .map(|(deadline, grace)| deadline.0.as_second() - grace);
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.clone())
                .unwrap_or_default();
            let states: Option<Vec<_>> = containers
                .iter()
                .map(|container| {
                    statuses
                        .iter()
                        .find(|c| &c.name == container)?
                        .state
                        .as_ref()?
                        .terminated
                        .clone()
                })
                .collect();
            states
                .zip(deleted_at)
                .ok_or_else(|| format!("{statuses:?}"))
        },
    )
    .await;
    // Read through the open files, even if they have been removed meanwhile.
    let texts: Vec<String> = log_files
        .iter_mut()
        .map(|file| {
            let mut text = String::new();
            std::io::Read::read_to_string(file, &mut text).unwrap();
            text
        })
        .collect();
    let released = pods
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    assert!(released.is_ok(), "release {name}: {released:?}");

    for ((container, state), text) in containers.iter().zip(states).zip(texts) {
        assert_eq!(
            state.exit_code, 0,
            "{name}: {container} did not exit cleanly after SIGTERM: {state:?}\n{text}"
        );
        let shutdown = text
            .split_once("shutting down")
            .map(|(_, after)| after)
            .unwrap_or_else(|| panic!("{name}: no shutdown in {container}'s log:\n{text}"));
        // Both SDKs say "unregistered" only when the operator answered.
        for said in ["unregistered", "stopped"] {
            assert!(
                shutdown.contains(said),
                "{name}: {container}'s log has no \"{said}\" after SIGTERM:\n{text}"
            );
        }
        for complaint in ["failed", "timed out", "still in flight"] {
            assert!(
                !shutdown.contains(complaint),
                "{name}: {container}'s shutdown: {complaint}:\n{text}"
            );
        }
        // Both stamps have whole seconds.
        let took = state.finished_at.expect("finishedAt").0.as_second() - deleted_at;
        assert!(
            (0..grace).contains(&took),
            "{name}: {container} stopped {took} s after the deletion, over its grace period \
             of {grace} s"
        );
        eprintln!("{name} deleted: {container} unregistered, drained and exited 0 within {took} s");
    }
}

/// Tags an image in the node's containerd: a "new release" of the same
/// content, as a registry would serve it.
fn tag_in_node(control_plane: &ControlPlane, from: &str, to: &str) {
    let socket = control_plane
        .data_dir()
        .expect("a node's control plane has a data directory")
        .join("node/containerd.sock");
    let output = Command::new("ctr")
        .args(["--address"])
        .arg(&socket)
        .args(["--namespace", "k8s.io", "images", "tag", from, to])
        .output()
        .expect("running ctr");
    assert!(
        output.status.success(),
        "ctr images tag: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `target` relative to `from` (both absolute, under the repository).
fn pathdiff(target: &Path, from: &Path) -> String {
    let depth = from
        .strip_prefix(repo_root())
        .expect("under the repository")
        .components()
        .count();
    let up = "../".repeat(depth);
    format!(
        "{up}{}",
        target.strip_prefix(repo_root()).unwrap().display()
    )
}

/// docs/deploy.md's "Try it on a local node", word for word: `users` Ready
/// on SQLite.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_node_walkthrough_of_the_docs_runs_word_for_word() {
    docs_walkthrough_on_a_node("Try it on a local node", "users ", &["SQLite", "True"]).await;
}

/// docs/deploy.md's worked example of a plugin container of your own (the
/// Python hello plugin, its image, component and overlay), word for word:
/// `world` Ready on Hello with its greeting.
#[tokio::test(flavor = "multi_thread")]
async fn the_docs_own_plugin_container_example_runs_word_for_word() {
    docs_walkthrough_on_a_node(
        "Add your own plugin container",
        "world ",
        &["Hello", "True", "Hello, world!!"],
    )
    .await;
}

/// A section of docs/deploy.md that runs a node, word for word: the first
/// shell's commands (the last of which is the node, left running), then the
/// second shell's as one script. The row of `kubectl get` starting with
/// `row` must contain each of `expected`. Then Ctrl-C (SIGINT) stops the
/// node, which must leave nothing behind, and nothing may have left the
/// machine.
async fn docs_walkthrough_on_a_node(section: &str, row: &str, expected: &[&str]) {
    let _turn = NODE.lock().await;
    let commands = docs::commands("docs/deploy.md", section);
    let split = commands
        .iter()
        .position(|c| c == "# in another shell:")
        .unwrap_or_else(|| panic!("no \"# in another shell:\" in {commands:#?}"));
    let (first, second) = (&commands[..split], &commands[split + 1..]);
    let (node_command, setup) = first.split_last().expect("a node command");
    assert!(
        node_command.contains("kube-testenv --node"),
        "the first shell ends with the node: {node_command}"
    );
    tokio::task::block_in_place(|| {
        for command in setup {
            docs::sh(command, None);
        }
    });

    let before = Before::take();
    let mut node = Command::new("bash")
        .args(["-c", &format!("exec {node_command}")])
        .current_dir(repo_root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("starting the node");
    let stdout = node.stdout.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("kube-testenv ready:") {
                let _ = ready_tx.send(line.clone());
            }
        }
    });
    let ready = ready_rx.recv_timeout(ROLLOUT);
    let outcome = ready.map(|_| tokio::task::block_in_place(|| docs::sh(&second.join("\n"), None)));
    // Ctrl-C, as the docs say, whatever happened.
    let interrupted = Command::new("kill")
        .args(["-INT", &node.id().to_string()])
        .status()
        .unwrap();
    let exit = tokio::task::block_in_place(|| node.wait()).unwrap();
    reader.join().unwrap();
    let printed =
        outcome.unwrap_or_else(|e| panic!("the node was not ready within {ROLLOUT:?}: {e}"));
    let found = printed
        .stdout
        .lines()
        .find(|line| line.starts_with(row))
        .unwrap_or_else(|| panic!("{section}: no `{row}` row in:\n{}", printed.all));
    for text in expected {
        assert!(found.contains(text), "{section}: no {text:?} in {found}");
    }
    assert!(
        interrupted.success() && exit.success(),
        "the node after Ctrl-C: {exit}"
    );
    before.assert_clean(section);
}

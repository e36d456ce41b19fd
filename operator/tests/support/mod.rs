//! Shared pieces of the operator's end-to-end tests: a namespace with the
//! walkthrough's CRDs, the real `kplug-operator` binary, and real plugin
//! processes (the SDK's `scripted` example) on a real socket dir.

#![allow(dead_code, unreachable_pub)]

pub mod api_proxy;
pub mod messages;
pub mod sdk_hellos;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

pub const CRDS: &str = include_str!("../../../examples/database-table/crds.yaml");

/// A kind a test's operator manages: its CRDs, and the operator's
/// `--resource` and `--extension-kind` flags for it.
pub struct Kind {
    pub crds: &'static str,
    pub resource: &'static str,
    pub extension_kinds: &'static [&'static str],
}

/// The walkthrough's `DatabaseTable` and its three extension kinds (most
/// tests).
pub const DATABASE_TABLE: Kind = Kind {
    crds: CRDS,
    resource: "myorg.org/v1alpha1/DatabaseTable",
    extension_kinds: &[
        "myorg.org/DatabaseTableMariaDbExtension",
        "myorg.org/DatabaseTablePostgreSqlExtension",
        "myorg.org/DatabaseTableSqliteExtension",
    ],
};

/// `examples/hello`'s `Greeting` and its `GreetingHelloExtension`: the kind
/// of every SDK's hello plugin.
pub const GREETING: Kind = Kind {
    crds: include_str!("../../../examples/hello/crd.yaml"),
    resource: "example.com/v1/Greeting",
    extension_kinds: &["example.com/GreetingHelloExtension"],
};

pub fn greeting_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Greeting"),
        "greetings",
    )
}

pub fn greeting_ext_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "GreetingHelloExtension"),
        "greetinghelloextensions",
    )
}

pub fn table_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("myorg.org", "v1alpha1", "DatabaseTable"),
        "databasetables",
    )
}

pub fn pg_ext_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("myorg.org", "v1alpha1", "DatabaseTablePostgreSqlExtension"),
        "databasetablepostgresqlextensions",
    )
}

pub fn maria_ext_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("myorg.org", "v1alpha1", "DatabaseTableMariaDbExtension"),
        "databasetablemariadbextensions",
    )
}

pub fn sqlite_ext_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("myorg.org", "v1alpha1", "DatabaseTableSqliteExtension"),
        "databasetablesqliteextensions",
    )
}

/// One test's world: a namespace, a socket dir, an operator process.
pub struct World {
    pub client: Client,
    pub ns: String,
    pub sockets: tempfile::TempDir,
    pub operator: Child,
    pub metrics_port: u16,
    pub log: PathBuf,
    /// Where to read the namespace's messages from when the world ends
    /// (see `check_messages`); `None` for a test's own control plane.
    pub messages_from: Option<PathBuf>,
}

impl Drop for World {
    /// Every condition and Event message the test produced is for people:
    /// no UUID, no Debug text, no escape codes. Checked at the end of every
    /// test that passed so far.
    fn drop(&mut self) {
        let Some(kubeconfig) = self.messages_from.clone() else {
            return;
        };
        if std::thread::panicking() {
            return;
        }
        let ns = self.ns.clone();
        let bad = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the message check")
                .block_on(messages::unfit(&kubeconfig, &ns))
        })
        .join()
        .expect("the message check");
        assert!(
            bad.is_empty(),
            "messages for people carry ids, Debug text or escape codes in {}:\n{}",
            self.ns,
            bad.join("\n")
        );
    }
}

pub async fn world(prefix: &str, operator_args: &[&str]) -> World {
    world_with_kubeconfig(
        prefix,
        operator_args,
        kplug_testenv::control_plane().kubeconfig_path(),
    )
    .await
}

/// [`world`] with an operator that manages `kind` instead of
/// `DatabaseTable`.
pub async fn world_for(kind: &Kind, prefix: &str, operator_args: &[&str]) -> World {
    let kubeconfig = kplug_testenv::control_plane().kubeconfig_path();
    let mut world = world_of(
        kind,
        kplug_testenv::client().await,
        prefix,
        operator_args,
        kubeconfig,
    )
    .await;
    world.messages_from = Some(kubeconfig.to_owned());
    world
}

/// [`world`] with an operator that reaches the API server through
/// `kubeconfig` (e.g. an [`api_proxy::ApiProxy`]'s).
pub async fn world_with_kubeconfig(
    prefix: &str,
    operator_args: &[&str],
    kubeconfig: &Path,
) -> World {
    let mut world = world_on(
        kplug_testenv::client().await,
        prefix,
        operator_args,
        kubeconfig,
    )
    .await;
    world.messages_from = Some(kplug_testenv::control_plane().kubeconfig_path().to_owned());
    world
}

/// [`world`] on the control plane that `client` and `kubeconfig` reach
/// (e.g. a test's own, to restart it).
pub async fn world_on(
    client: Client,
    prefix: &str,
    operator_args: &[&str],
    kubeconfig: &Path,
) -> World {
    world_of(&DATABASE_TABLE, client, prefix, operator_args, kubeconfig).await
}

/// [`world_on`] with an operator that manages `kind`.
pub async fn world_of(
    kind: &Kind,
    client: Client,
    prefix: &str,
    operator_args: &[&str],
    kubeconfig: &Path,
) -> World {
    kplug_testenv::install_crd_yaml(&client, kind.crds)
        .await
        .expect("install CRDs");
    let ns = kplug_testenv::namespace(&client, prefix)
        .await
        .expect("namespace");
    let sockets = tempfile::tempdir().expect("socket dir");
    let metrics_port = free_port();
    let operator = operator_command_for(
        kind,
        "kplug-operator-0",
        &ns,
        sockets.path(),
        metrics_port,
        operator_args,
        kubeconfig,
    )
    .spawn()
    .expect("start kplug-operator");
    let log = sockets.path().join("calls.jsonl");
    let world = World {
        client,
        ns,
        sockets,
        operator,
        metrics_port,
        log,
        messages_from: None,
    };
    // The registry socket appears once the operator has discovered the kind.
    kplug_testenv::eventually(
        "the operator serves its registry",
        Duration::from_secs(30),
        || async {
            if world.sockets.path().join("registry.sock").exists() {
                Ok(())
            } else {
                Err("no registry.sock yet")
            }
        },
    )
    .await;
    world
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn spawn_operator(
    ns: &str,
    sockets: &Path,
    metrics_port: u16,
    extra: &[&str],
    kubeconfig: &Path,
) -> Child {
    spawn_operator_as(
        "kplug-operator-0",
        ns,
        sockets,
        metrics_port,
        extra,
        kubeconfig,
    )
}

/// [`spawn_operator`] as the replica in (pretend) Pod `pod`: its leader
/// election identity, and where its registry Events go.
pub fn spawn_operator_as(
    pod: &str,
    ns: &str,
    sockets: &Path,
    metrics_port: u16,
    extra: &[&str],
    kubeconfig: &Path,
) -> Child {
    operator_command(pod, ns, sockets, metrics_port, extra, kubeconfig)
        .spawn()
        .expect("start kplug-operator")
}

/// The command [`spawn_operator_as`] runs (e.g. to send its output
/// elsewhere).
pub fn operator_command(
    pod: &str,
    ns: &str,
    sockets: &Path,
    metrics_port: u16,
    extra: &[&str],
    kubeconfig: &Path,
) -> Command {
    operator_command_for(
        &DATABASE_TABLE,
        pod,
        ns,
        sockets,
        metrics_port,
        extra,
        kubeconfig,
    )
}

/// [`operator_command`] for an operator that manages `kind`.
pub fn operator_command_for(
    kind: &Kind,
    pod: &str,
    ns: &str,
    sockets: &Path,
    metrics_port: u16,
    extra: &[&str],
    kubeconfig: &Path,
) -> Command {
    let mut cmd = Command::new(kplug_testenv::workspace_binary("kplug-operator"));
    cmd.args(["--resource", kind.resource, "--namespace", ns])
        .arg("--socket-dir")
        .arg(sockets)
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
        .args(["--heartbeat-interval", "500ms"]);
    for extension_kind in kind.extension_kinds {
        cmd.args(["--extension-kind", extension_kind]);
    }
    cmd.args(extra)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info,kplug_operator=debug")
        // Registry events go to a (pretend) operator Pod in the test namespace.
        .env("POD_NAME", pod)
        .env("POD_NAMESPACE", ns)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// kplug-exec serving the SQLiteShell example
/// (`examples/database-table/sqlite-shell-plugin`), keeping its files in
/// `data`.
pub fn spawn_shell_plugin(world: &World, data: &Path) -> Child {
    let manifest = kplug_testenv::workspace_root()
        .join("examples/database-table/sqlite-shell-plugin/plugin.yaml");
    Command::new(kplug_testenv::workspace_binary("kplug-exec"))
        .arg("--manifest")
        .arg(manifest)
        .env("KPLUG_SOCKET_DIR", world.sockets.path())
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
        .env("KPLUG_SQLITE_DATA_DIR", data)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start kplug-exec (cargo build -p kplug-exec)")
}

/// Starts the scripted plugin with `env` (see sidecar-sdk/examples/scripted.rs).
pub fn spawn_plugin(world: &World, env: &[(&str, &str)]) -> Child {
    spawn_plugin_in(world, world.sockets.path(), env)
}

/// The scripted plugin as `mariadb`, offering MariaDB with its extension.
pub fn spawn_mariadb_plugin(world: &World) -> Child {
    spawn_plugin(
        world,
        &[
            ("SCRIPTED_NAME", "mariadb"),
            ("SCRIPTED_IMPLEMENTATION", "MariaDB"),
            (
                "SCRIPTED_EXTENSIONS",
                "myorg.org/DatabaseTableMariaDbExtension",
            ),
        ],
    )
}

/// [`spawn_plugin`] as the unprivileged `uid` (as a plugin container with
/// its own `runAsUser`), with its log on a pipe. Returns the process and its
/// instance id, read from its "serving" log line.
pub async fn spawn_plugin_as_uid(world: &World, uid: u32, env: &[(&str, &str)]) -> (Child, String) {
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::AsyncBufReadExt;
    // A shared emptyDir is world-writable and sticky: each container can
    // create its socket, and only remove its own.
    std::fs::set_permissions(
        world.sockets.path(),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    let mut cmd = Command::new(kplug_testenv::workspace_binary("examples/scripted"));
    cmd.env("KPLUG_SOCKET_DIR", world.sockets.path())
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
        .env("RUST_LOG", "info")
        .uid(uid)
        .gid(uid)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .expect("start the scripted plugin as another UID");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let instance = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("instance_id=").nth(1) {
                let id = rest.split_whitespace().next().unwrap_or_default();
                return id.trim_matches('"').to_owned();
            }
        }
        panic!("the plugin exited before serving");
    })
    .await
    .expect("the plugin logs its instance id");
    // Keep draining its log so that it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, instance)
}

/// [`spawn_plugin`] next to another operator replica, on `sockets`.
pub fn spawn_plugin_in(world: &World, sockets: &Path, env: &[(&str, &str)]) -> Child {
    plugin_command(world, sockets, env)
        .spawn()
        .expect("start the scripted plugin")
}

/// The command [`spawn_plugin_in`] runs (e.g. to read its output).
pub fn plugin_command(world: &World, sockets: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(kplug_testenv::workspace_binary("examples/scripted"));
    cmd.env("KPLUG_SOCKET_DIR", sockets)
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
        .env("SCRIPTED_LOG", &world.log)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

pub fn signal(child: &Child, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().expect("running")).unwrap());
    nix::sys::signal::kill(pid, signal).expect("signal");
}

impl World {
    /// Patches the walkthrough's PostgreSQL extension `name` to `partitionBy`.
    pub async fn set_partition_by(&self, name: &str, partition_by: &str) {
        self.api(&pg_ext_resource())
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {"partitionBy": partition_by}})),
            )
            .await
            .unwrap();
    }

    /// Waits until the plugin has written that it saw `partitionBy` on the
    /// extension `name`.
    pub async fn plugin_saw_partition_by(&self, name: &str, partition_by: &str, timeout: Duration) {
        kplug_testenv::eventually(
            &format!("the plugin saw partitionBy {partition_by}"),
            timeout,
            || async {
                let ext = self
                    .api(&pg_ext_resource())
                    .get(name)
                    .await
                    .map_err(|e| e.to_string())?;
                let seen = ext.data.pointer("/status/specSeen/partitionBy").cloned();
                (seen == Some(json!(partition_by)))
                    .then_some(())
                    .ok_or(format!("status.specSeen.partitionBy is {seen:?}"))
            },
        )
        .await;
    }

    pub fn api(&self, ar: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, ar)
    }

    pub fn tables(&self) -> Api<DynamicObject> {
        self.api(&table_resource())
    }

    pub async fn create(&self, ar: &ApiResource, object: Value) -> DynamicObject {
        let mut obj: DynamicObject = serde_json::from_value(object).unwrap();
        obj.metadata.namespace = Some(self.ns.clone());
        self.api(ar)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", obj.name_any()))
    }

    /// The walkthrough's `users` table (prefers MariaDB) and its two extensions.
    pub async fn create_users(&self, name: &str, annotations: Value) {
        self.create(
            &maria_ext_resource(),
            json!({
                "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableMariaDbExtension",
                "metadata": {"name": name}, "spec": {"storageEngine": "InnoDB"},
            }),
        )
        .await;
        self.create(
            &pg_ext_resource(),
            json!({
                "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTablePostgreSqlExtension",
                "metadata": {"name": name}, "spec": {"partitionBy": "hash"},
            }),
        )
        .await;
        self.create_table(name, "MariaDB", annotations, true).await;
    }

    pub async fn create_table(
        &self,
        name: &str,
        preferred: &str,
        annotations: Value,
        with_extensions: bool,
    ) {
        let extensions = if with_extensions {
            json!([
                {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableMariaDbExtension", "name": name},
                {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTablePostgreSqlExtension", "name": name},
            ])
        } else {
            json!([])
        };
        self.create(&table_resource(), json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "serverName": "authorization-cluster",
                "preferredImplementation": preferred,
                "columns": [{"name": "id", "type": "uint64"}, {"name": "name", "type": "string"}],
                "extensions": extensions,
            },
        }))
        .await;
    }

    /// Waits until `check` accepts the table (it returns why not otherwise).
    /// Applies a JSON merge `patch` to table `name`.
    pub async fn merge_table(&self, name: &str, patch: Value) {
        self.api(&table_resource())
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await
            .unwrap();
    }

    /// Waits until table `name` is Ready on `implementation`, and returns it.
    pub async fn ready_on(
        &self,
        name: &str,
        implementation: &str,
        timeout: Duration,
    ) -> DynamicObject {
        self.table_until(
            name,
            &format!("{name} is Ready on {implementation}"),
            timeout,
            |t| {
                expect_condition(t, "Ready", "True", "Reconciled")?;
                match t.data.pointer("/status/implementation") {
                    Some(found) if found == implementation => Ok(()),
                    found => Err(format!("implementation is {found:?}")),
                }
            },
        )
        .await
    }

    pub async fn table_until<F>(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: F,
    ) -> DynamicObject
    where
        F: Fn(&DynamicObject) -> Result<(), String>,
    {
        self.until(&table_resource(), name, what, timeout, check)
            .await
    }

    /// Waits until `check` accepts object `name` of resource `ar` (it
    /// returns why not otherwise), and returns it.
    pub async fn until<F>(
        &self,
        ar: &ApiResource,
        name: &str,
        what: &str,
        timeout: Duration,
        check: F,
    ) -> DynamicObject
    where
        F: Fn(&DynamicObject) -> Result<(), String>,
    {
        let api = self.api(ar);
        kplug_testenv::eventually(what, timeout, || {
            let api = api.clone();
            let check = &check;
            async move {
                let obj = api.get(name).await.map_err(|e| e.to_string())?;
                match check(&obj) {
                    Ok(()) => Ok(obj),
                    Err(why) => Err(format!(
                        "{why}; status: {}",
                        obj.data.get("status").cloned().unwrap_or_default()
                    )),
                }
            }
        })
        .await
    }

    /// Waits until object `name` of resource `ar` is gone (deleted and
    /// finalized); on a timeout, says what its status still was.
    pub async fn until_gone(&self, ar: &ApiResource, name: &str, timeout: Duration) {
        let api = self.api(ar);
        kplug_testenv::eventually(&format!("{name} is gone"), timeout, || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                Ok(Some(o)) => Err(format!(
                    "still there; status: {}",
                    o.data.get("status").cloned().unwrap_or_default()
                )),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    }

    /// Waits until `series` on `/metrics` has a value that `holds`.
    pub async fn until_metric(
        &self,
        what: &str,
        series: &str,
        timeout: Duration,
        holds: impl Fn(f64) -> bool,
    ) {
        kplug_testenv::eventually(what, timeout, || async {
            let m = self.metrics().await;
            metric(&m, series).filter(|v| holds(*v)).map(drop).ok_or(m)
        })
        .await;
    }

    /// Waits until plugin `name` is registered and ready.
    pub async fn until_plugin_up(&self, name: &str, timeout: Duration) {
        let series = format!("kplug_plugin_up{{plugin=\"{name}\"}}");
        self.until_metric(&format!("plugin {name} is up"), &series, timeout, |v| {
            v == 1.0
        })
        .await;
    }

    /// Waits until a registration has been refused for `reason`.
    pub async fn until_refused(&self, reason: &str, timeout: Duration) {
        let series = format!("kplug_registrations_refused_total{{reason=\"{reason}\"}}");
        self.until_metric(
            &format!("a registration refused for {reason}"),
            &series,
            timeout,
            |v| v >= 1.0,
        )
        .await;
    }

    /// The operator's `/plugins` (what `kubectl kplug plugins` reads), as
    /// JSON; `Null` when it does not answer.
    pub async fn listed_plugins(&self) -> Value {
        let body = http_get(self.metrics_port, "/plugins")
            .await
            .unwrap_or_default();
        let json = body.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        serde_json::from_str(json).unwrap_or(Value::Null)
    }

    pub async fn metrics(&self) -> String {
        http_get(self.metrics_port, "/metrics")
            .await
            .unwrap_or_default()
    }

    /// The calls the scripted plugins logged.
    pub fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The Events of the test's namespace.
    pub fn events_api(&self) -> Api<k8s_openapi::api::events::v1::Event> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Waits until the Events about `name` satisfy `done`, and returns
    /// them. The operator writes an object's status before it records the
    /// Event that goes with it, so a test that has seen the condition must
    /// still wait for the Event.
    pub async fn until_events(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&[(String, String, String)]) -> bool,
    ) -> Vec<(String, String, String)> {
        kplug_testenv::eventually(what, Duration::from_secs(30), || async {
            let events = self.events_for(name).await;
            if done(&events) {
                Ok(events)
            } else {
                Err(events)
            }
        })
        .await
    }

    pub async fn events_for(&self, name: &str) -> Vec<(String, String, String)> {
        let api: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.ns);
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// A minimal HTTP/1.0 GET on loopback (no HTTP client dependency for tests).
pub async fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await.ok()?;
    Some(body)
}

/// The value of a metric line `name{labels} value` (exact prefix match).
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The sum of every series of metric `name` whose labels include all of
/// `labels` (0 when there is none): for counters whose other labels the test
/// does not care about.
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix('{')?;
            let (set, value) = rest.split_once("} ")?;
            labels
                .iter()
                .all(|(k, v)| set.split(',').any(|pair| pair == format!("{k}=\"{v}\"")))
                .then(|| value.trim().parse::<f64>().ok())?
        })
        .sum()
}

/// `(status, reason, message)` of condition `type_`.
pub fn condition(obj: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    obj.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find_map(|c| {
            (c.get("type")?.as_str()? == type_).then(|| {
                let s = |k: &str| {
                    c.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                (s("status"), s("reason"), s("message"))
            })
        })
}

pub fn expect_condition(
    obj: &DynamicObject,
    type_: &str,
    status: &str,
    reason: &str,
) -> Result<(), String> {
    match condition(obj, type_) {
        Some((s, r, _)) if s == status && r == reason => Ok(()),
        other => Err(format!("{type_} is {other:?}, want {status}/{reason}")),
    }
}

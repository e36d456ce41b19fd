//! The images, built for real by `make images` with the Docker engine, run
//! as containers:
//! - every image runs as its non-root user with a read-only root filesystem;
//!   each plugin creates its socket in the shared directory and, on SIGTERM
//!   (`docker stop`), exits cleanly and removes it; the distroless images
//!   have no shell;
//! - the operator and the four plugins (the shell one under kplug-exec),
//!   each in its own container and
//!   sharing only the socket directory, converge one table per
//!   implementation against a real API server and the real MariaDB and
//!   PostgreSQL servers; the operator's `/readyz` turns ready; a plugin
//!   container that is SIGKILLed comes back by its restart policy, registers
//!   again, and an edit made meanwhile converges; a deletion is finalized.
//!
//! They need the images (`make images`) and the databases' DSNs in the
//! environment (`make test` sets them); without either they fail, saying so.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::net::IpAddr;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kplug_deploy_tests::http;
use kplug_deploy_tests::repo_root;
use kplug_deploy_tests::tools::run;
use kplug_deploy_tests::yaml::{items, readiness};
use kplug_testenv::ControlPlane;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);
/// The uid every kplug image runs as.
const NONROOT: u32 = 65532;
const GROUP: &str = "myorg.org";
const PLUGINS: [&str; 4] = [
    "sqlite-plugin",
    "mariadb-plugin",
    "postgresql-plugin",
    "sqlite-shell-plugin",
];

/// The name a plugin image's plugin registers with: its image's without
/// `-plugin`, but for the shell plugin, named in its manifest.
fn plugin_name(image: &str) -> &str {
    match image {
        "sqlite-shell-plugin" => "sqlite-sh",
        other => other.trim_end_matches("-plugin"),
    }
}

fn docker() -> Command {
    Command::new(std::env::var("DOCKER").unwrap_or_else(|_| "docker".to_owned()))
}

fn image(name: &str) -> String {
    format!("ghcr.io/kplug/{name}:0.1.0")
}

/// `docker image inspect`, or a failure that says to run `make images`.
fn inspect(name: &str) -> Value {
    let output = run(docker().args(["image", "inspect", &image(name)])).unwrap_or_else(|e| {
        panic!(
            "{}: not built or no Docker engine ({e:#}); run `make images` (it starts the \
             engine when none runs)",
            image(name)
        )
    });
    let mut all: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    all.remove(0)
}

/// A container removed (with its anonymous volumes) when dropped, so a
/// failing test leaves nothing running.
struct Container {
    name: String,
}

impl Container {
    /// `docker run -d --name <unique> <args>`.
    fn run(role: &str, args: &[String]) -> Self {
        let name = format!("kplug-test-{}-{role}", std::process::id());
        let _ = docker().args(["rm", "-f", "-v", &name]).output();
        run(docker().args(["run", "-d", "--name", &name]).args(args))
            .unwrap_or_else(|e| panic!("starting the {role} container: {e:#}"));
        Self { name }
    }

    fn logs(&self) -> String {
        docker()
            .args(["logs", &self.name])
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default()
    }

    fn state(&self) -> Value {
        let output = run(docker().args(["inspect", "-f", "{{json .State}}", &self.name]))
            .expect("docker inspect");
        serde_json::from_slice(&output.stdout).unwrap()
    }

    fn restart_count(&self) -> u64 {
        let output = run(docker().args(["inspect", "-f", "{{.RestartCount}}", &self.name]))
            .expect("docker inspect");
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap()
    }

    /// `docker stop` (SIGTERM, then SIGKILL after `grace`): the exit code and
    /// how long the stop took.
    fn stop(&self, grace: Duration) -> (i64, Duration) {
        let started = Instant::now();
        run(docker().args(["stop", "-t", &grace.as_secs().to_string(), &self.name]))
            .expect("docker stop");
        let took = started.elapsed();
        (self.state()["ExitCode"].as_i64().unwrap(), took)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker().args(["rm", "-f", "-v", &self.name]).output();
    }
}

/// A directory shared with containers, owned by their user (as an emptyDir
/// or a fresh named volume is writable for them).
fn shared_dir(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(NONROOT), Some(NONROOT)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(()) => return,
            Err(last) if Instant::now() >= deadline => {
                panic!("{what}: not within {timeout:?}; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn mount(host: &Path, container: &str) -> String {
    format!("--volume={}:{container}", host.display())
}

/// The plugin-specific arguments of `docker run`: the SQLite plugin's data
/// directory, the database plugins' servers (the real ones of `make test`,
/// reached on the host's loopback).
fn plugin_args(plugin: &str, dir: &Path) -> Vec<String> {
    let dsn = |var: &str| {
        std::env::var(var).unwrap_or_else(|_| {
            panic!("{var} is not set: run the tests with `make test` (it starts the databases)")
        })
    };
    match plugin {
        "sqlite-plugin" | "sqlite-shell-plugin" => vec![
            "--network=none".to_owned(),
            mount(
                &shared_dir(dir, &format!("{plugin}-data")),
                "/var/lib/kplug-sqlite",
            ),
        ],
        "mariadb-plugin" => vec![
            "--network=host".to_owned(),
            format!(
                "--env=KPLUG_MARIADB_SERVERS={}",
                json!({"authorization-cluster": dsn("KPLUG_MARIADB_DSN")})
            ),
        ],
        _ => vec![
            "--network=host".to_owned(),
            format!(
                "--env=KPLUG_POSTGRES_SERVERS={}",
                json!({"authorization-cluster": dsn("KPLUG_POSTGRES_DSN")})
            ),
        ],
    }
}

#[test]
fn images_are_non_root_with_their_entrypoints() {
    for name in ["kplug-operator", "kplug-exec"].into_iter().chain(PLUGINS) {
        let config = &inspect(name)["Config"];
        let user = config["User"].as_str().unwrap_or_default();
        let uid: u32 = user.split(':').next().unwrap().parse().unwrap_or(0);
        assert_eq!(uid, NONROOT, "{}: USER {user:?}", image(name));
        assert!(
            items(config, "/Env")
                .iter()
                .any(|e| e == "KPLUG_SOCKET_DIR=/var/run/kplug"),
            "{}: {}",
            image(name),
            config["Env"]
        );
        assert!(
            !items(config, "/Entrypoint").is_empty(),
            "{}: no entrypoint",
            image(name)
        );
    }
    // distroless: no shell to exec into, nothing but the binary and its
    // libraries.
    for name in ["kplug-operator", "sqlite-plugin", "mariadb-plugin"] {
        let output = docker()
            .args([
                "run",
                "--rm",
                "--entrypoint",
                "/bin/sh",
                &image(name),
                "-c",
                "true",
            ])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{} has a shell", image(name));
    }
}

/// Each plugin image, alone, read-only, with no network: it binds
/// `plugins/<name>/plugin.sock` in the shared directory as its user while
/// it waits for a registry, and `docker stop` ends it cleanly (exit 0, well
/// within the grace period) with the socket removed.
#[test]
fn plugins_run_read_only_create_their_socket_and_stop_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    for plugin in PLUGINS {
        let sockets = shared_dir(dir.path(), &format!("{plugin}-sockets"));
        let mut args = vec![
            "--read-only".to_owned(),
            "--tmpfs=/tmp".to_owned(),
            mount(&sockets, "/var/run/kplug"),
        ];
        args.extend(plugin_args(plugin, dir.path()));
        // Alone: no network even for the database plugins (they connect
        // only when a table is reconciled).
        args.retain(|a| !a.starts_with("--network="));
        args.push("--network=none".to_owned());
        args.push(image(plugin));
        let container = Container::run(&format!("{plugin}-alone"), &args);
        let name = plugin_name(plugin);
        let socket = sockets.join("plugins").join(name).join("plugin.sock");
        wait_for(&format!("{plugin} binds its socket"), T, || {
            let meta = std::fs::metadata(&socket)
                .map_err(|e| format!("{e}; logs:\n{}", container.logs()))?;
            if meta.file_type().is_socket() && meta.uid() == NONROOT {
                Ok(())
            } else {
                Err(format!("{socket:?}: {meta:?}"))
            }
        });
        let (code, took) = container.stop(Duration::from_secs(20));
        assert_eq!(
            code,
            0,
            "{plugin} exit code after SIGTERM; logs:\n{}",
            container.logs()
        );
        assert!(
            took < Duration::from_secs(10),
            "{plugin} took {took:?} to stop on SIGTERM"
        );
        assert!(
            !socket.exists(),
            "{plugin} left its socket behind; logs:\n{}",
            container.logs()
        );
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1alpha1", kind), plural)
}

async fn until_ready(
    tables: &Api<DynamicObject>,
    name: &str,
    implementation: &str,
    logs: impl Fn() -> String,
) {
    kplug_testenv::eventually(
        &format!("{name} is Ready on {implementation} for its latest generation"),
        T,
        || async {
            let table = tables.get(name).await.map_err(|e| e.to_string())?;
            let (ready, observed, chosen) = readiness(&table.data);
            if ready == "True"
                && Some(observed) == table.metadata.generation
                && chosen == implementation
            {
                Ok(())
            } else {
                Err(format!("status: {}\n{}", table.data["status"], logs()))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_converge_a_table_per_implementation_and_survive_a_plugin_kill() {
    // A control plane of this test's own: the shared one has operators of
    // other tests watching every namespace.
    let control_plane = tokio::task::spawn_blocking(|| {
        ControlPlane::start(&kplug_testenv::testenv_binary()).expect("a control plane")
    })
    .await
    .unwrap();
    let client = kplug_testenv::client_from_kubeconfig(control_plane.kubeconfig_path())
        .await
        .unwrap();
    kplug_testenv::install_crd_yaml(
        &client,
        &std::fs::read_to_string(repo_root().join("examples/database-table/crds.yaml")).unwrap(),
    )
    .await
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    // The kubeconfig, readable by the operator's user only (it holds the
    // admin's key): a file of its own, owned by that user.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::copy(control_plane.kubeconfig_path(), &kubeconfig).unwrap();
    std::os::unix::fs::chown(&kubeconfig, Some(NONROOT), Some(NONROOT)).unwrap();
    std::fs::set_permissions(&kubeconfig, std::fs::Permissions::from_mode(0o600)).unwrap();
    let sockets = shared_dir(dir.path(), "sockets");
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();

    // The API server listens on the host's loopback: the operator shares the
    // host's network namespace (in a pod, it is the pod's).
    let operator = Container::run(
        "operator",
        &[
            "--read-only".to_owned(),
            "--network=host".to_owned(),
            mount(&sockets, "/var/run/kplug"),
            format!("{}:ro", mount(&kubeconfig, "/etc/kplug/kubeconfig")),
            "--env=KUBECONFIG=/etc/kplug/kubeconfig".to_owned(),
            "--env=POD_NAME=kplug-operator-images-test".to_owned(),
            "--env=POD_NAMESPACE=default".to_owned(),
            "--env=RUST_LOG=info".to_owned(),
            image("kplug-operator"),
            "--resource=myorg.org/v1alpha1/DatabaseTable".to_owned(),
            "--extension-kind=myorg.org/DatabaseTableMariaDbExtension".to_owned(),
            "--extension-kind=myorg.org/DatabaseTablePostgreSqlExtension".to_owned(),
            "--extension-kind=myorg.org/DatabaseTableSqliteExtension".to_owned(),
            "--heartbeat-interval=1s".to_owned(),
            "--heartbeat-ttl=4s".to_owned(),
            format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        ],
    );
    let mut plugins = Vec::new();
    for plugin in PLUGINS {
        let mut args = vec![
            "--read-only".to_owned(),
            "--tmpfs=/tmp".to_owned(),
            "--restart=unless-stopped".to_owned(),
            mount(&sockets, "/var/run/kplug"),
            "--env=KPLUG_HEARTBEAT_INTERVAL=1".to_owned(),
        ];
        args.extend(plugin_args(plugin, dir.path()));
        args.push(image(plugin));
        plugins.push(Container::run(plugin, &args));
    }
    let logs = || {
        let mut all = format!("--- operator\n{}", operator.logs());
        for (plugin, container) in PLUGINS.iter().zip(&plugins) {
            all.push_str(&format!("--- {plugin}\n{}", container.logs()));
        }
        all
    };

    // Ready once the caches have synced (the pod's readiness probe).
    let loopback = IpAddr::from([127, 0, 0, 1]);
    kplug_testenv::eventually("the operator's /readyz answers 200", T, || async {
        match http::get(loopback, metrics_port, "/readyz") {
            Ok((200, _)) => Ok(()),
            other => Err(format!("{other:?}\n{}", operator.logs())),
        }
    })
    .await;
    // Every plugin registered before the tables are created: a table whose
    // preferred implementation has not registered yet falls back to
    // another one, and keeps it (the soak saw a PostgreSQL table land on
    // MariaDB because the Python plugin registered 0.5 s later).
    kplug_testenv::eventually("the four plugins are registered", T, || async {
        let metrics = http::get(loopback, metrics_port, "/metrics")?.1;
        match http::metric(&metrics, "kplug_plugins_registered") {
            Some(n) if n == PLUGINS.len() as f64 => Ok(()),
            n => Err(format!("kplug_plugins_registered {n:?}\n{}", logs())),
        }
    })
    .await;

    let ns = kplug_testenv::namespace(&client, "images").await.unwrap();
    let tables = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &resource("DatabaseTable", "databasetables"),
    );
    // Names of this run's own: the tables live on in the real database
    // servers, and a table belongs to the object that made it. Not
    // `sqlite-…` or `pg-…`: those prefixes are the databases' own.
    let run_id = ns.rsplit('-').next().unwrap().to_owned();
    let sqlite_table = format!("users-sqlite-{run_id}");
    let implementations = [
        (sqlite_table.clone(), "SQLite"),
        (format!("users-mariadb-{run_id}"), "MariaDB"),
        (format!("users-postgresql-{run_id}"), "PostgreSQL"),
        (format!("users-sqlite-shell-{run_id}"), "SQLiteShell"),
    ];
    for (name, implementation) in &implementations {
        let table: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1alpha1",
            "kind": "DatabaseTable",
            "metadata": {"name": name},
            "spec": {
                "serverName": "authorization-cluster",
                "preferredImplementation": implementation,
                "columns": [{"name": "id", "type": "uint64"}, {"name": "name", "type": "string"}],
            },
        }))
        .unwrap();
        tables.create(&PostParams::default(), &table).await.unwrap();
    }
    for (name, implementation) in &implementations {
        until_ready(&tables, name, implementation, logs).await;
    }

    // SIGKILL the SQLite plugin: Docker restarts its container (the restart
    // policy), it registers again, and an edit made while it was gone
    // converges.
    let sqlite = &plugins[0];
    let restarts = sqlite.restart_count();
    // From outside, like the OOM killer: `docker kill` counts as a manual
    // stop, which the restart policy leaves alone.
    let pid = sqlite.state()["Pid"].as_i64().expect("the plugin's pid");
    run(Command::new("kill").args(["-KILL", &pid.to_string()])).unwrap();
    tables
        .patch(
            &sqlite_table,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"columns": [
                {"name": "id", "type": "uint64"},
                {"name": "name", "type": "string"},
                {"name": "email", "type": "string"},
            ]}})),
        )
        .await
        .unwrap();
    until_ready(&tables, &sqlite_table, "SQLite", logs).await;
    assert!(
        sqlite.restart_count() > restarts,
        "the SQLite plugin's container was restarted by its policy: {}",
        sqlite.state()
    );
    let table = tables.get(&sqlite_table).await.unwrap();
    assert_eq!(
        table.data["status"]["columns"],
        json!(3),
        "the plugin reports the new column: {}",
        table.data["status"]
    );

    // Deletion is finalized by each plugin.
    for (name, _) in &implementations {
        tables.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for (name, _) in &implementations {
        kplug_testenv::eventually(&format!("{name} is gone"), T, || async {
            match tables.get_opt(name).await {
                Ok(None) => Ok(()),
                Ok(Some(t)) => Err(format!("still there: {}\n{}", t.data["status"], logs())),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    }

    // SIGTERM: every container stops cleanly, well within its grace period.
    for (plugin, container) in PLUGINS.iter().zip(&plugins) {
        let (code, took) = container.stop(Duration::from_secs(20));
        assert_eq!(
            code,
            0,
            "{plugin}: exit code on SIGTERM\n{}",
            container.logs()
        );
        assert!(took < Duration::from_secs(10), "{plugin} took {took:?}");
    }
    let (code, took) = operator.stop(Duration::from_secs(20));
    assert_eq!(
        code,
        0,
        "operator: exit code on SIGTERM\n{}",
        operator.logs()
    );
    assert!(took < Duration::from_secs(10), "the operator took {took:?}");
    let operator_logs = operator.logs();
    let panics: Vec<&str> = operator_logs
        .lines()
        .filter(|l| l.contains("panicked"))
        .collect();
    assert!(
        panics.is_empty(),
        "the operator panicked:\n{}",
        panics.join("\n")
    );
    drop(control_plane);
}

/// docs/deploy.md's "Images": the `docker build` commands a user runs by
/// hand, word for word. They must make the images `make images` made: the
/// same filesystem layers and the same way to run (entrypoint, command,
/// user, environment, working directory), so the page and the Makefile
/// cannot drift apart. (Not the same image ids: `docker compose up --build`
/// builds the same images with its own labels, and either may have tagged
/// them last.)
#[test]
fn the_documented_image_builds_make_the_same_images_as_make_images() {
    let content = || -> Vec<Value> {
        [
            "kplug-operator",
            "sqlite-plugin",
            "mariadb-plugin",
            "postgresql-plugin",
            "kplug-exec",
            "sqlite-shell-plugin",
            "postgresql-server-plugin",
            "backup-plugin",
        ]
        .iter()
        .map(|name| {
            let image = inspect(name);
            let config = &image["Config"];
            json!({
                "image": name,
                "layers": image["RootFS"]["Layers"],
                "entrypoint": config["Entrypoint"],
                "cmd": config["Cmd"],
                "user": config["User"],
                "env": config["Env"],
                "workdir": config["WorkingDir"],
            })
        })
        .collect()
    };
    let before = content();
    let commands = kplug_deploy_tests::docs::commands("docs/deploy.md", "Images");
    assert_eq!(commands.len(), 8, "one build per image: {commands:#?}");
    for command in &commands {
        assert!(command.starts_with("docker build "), "{command}");
        kplug_deploy_tests::docs::sh(command, None);
    }
    assert_eq!(
        content(),
        before,
        "the documented builds made other images than `make images` (or the sources changed \
         since `make images` ran: run it again first)"
    );
}

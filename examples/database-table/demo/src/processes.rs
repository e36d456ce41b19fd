//! The operator and the plugins, as processes sharing one socket dir (as
//! sidecars share an `emptyDir`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::json;
use tokio::process::{Child, Command};

/// The processes the demo started.
pub(crate) struct Processes {
    operator: Child,
    plugins: Vec<Child>,
}

/// Starts `kplug-operator` and the plugins, their logs and sockets in
/// `work`: the SQLite plugin always, MariaDB and PostgreSQL when their
/// servers are configured.
pub(crate) fn start(work: &Path, kubeconfig: &Path) -> Result<Processes> {
    let sockets = work.join("sockets");
    // The plugins start beside the operator, maybe before it has made the
    // socket dir, and a plugin never makes it: made here first.
    std::fs::create_dir_all(&sockets).context("create the socket dir")?;
    let sqlite_dir = work.join("sqlite");
    let operator = operator(work, &sockets, kubeconfig)?;
    let plugin_env = |extra: Vec<(&'static str, String)>| {
        let mut env = vec![
            ("KPLUG_SOCKET_DIR", sockets.display().to_string()),
            ("KPLUG_HEARTBEAT_INTERVAL", "1".to_owned()),
        ];
        env.extend(extra);
        env
    };
    let mut plugins = vec![spawn(
        &binary("sqlite-plugin")?,
        &["--data-dir", sqlite_dir.to_str().context("path")?],
        &plugin_env(vec![]),
        &work.join("sqlite-plugin.log"),
    )?];
    println!(
        "    operator: logs in {}",
        work.join("operator.log").display()
    );
    println!(
        "    plugin sqlite (SQLite files in {})",
        sqlite_dir.display()
    );
    if let Ok(dsn) = std::env::var("KPLUG_MARIADB_DSN") {
        let servers = json!({"authorization-cluster": dsn}).to_string();
        plugins.push(spawn(
            &binary("mariadb-plugin")?,
            &[],
            &plugin_env(vec![("KPLUG_MARIADB_SERVERS", servers)]),
            &work.join("mariadb-plugin.log"),
        )?);
        println!("    plugin mariadb (KPLUG_MARIADB_DSN is set)");
    }
    let python = kplug_testenv::workspace_root()
        .join("examples/database-table/postgresql-plugin/.venv/bin/python");
    if let (Ok(dsn), true) = (std::env::var("KPLUG_POSTGRES_DSN"), python.exists()) {
        let servers = json!({"authorization-cluster": dsn}).to_string();
        plugins.push(spawn(
            &python,
            &["-m", "kplug_postgresql_plugin"],
            &plugin_env(vec![("KPLUG_POSTGRES_SERVERS", servers)]),
            &work.join("postgresql-plugin.log"),
        )?);
        println!("    plugin postgresql (KPLUG_POSTGRES_DSN is set)");
    }
    Ok(Processes { operator, plugins })
}

/// The generic operator, managing `DatabaseTable` with its three extension
/// kinds.
fn operator(work: &Path, sockets: &Path, kubeconfig: &Path) -> Result<Child> {
    let kube_env = [
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("RUST_LOG", "info".to_owned()),
    ];
    spawn(
        &binary("kplug-operator")?,
        &[
            "--resource",
            "myorg.org/v1alpha1/DatabaseTable",
            "--socket-dir",
            sockets.to_str().context("path")?,
            "--metrics-addr",
            "127.0.0.1:0",
            // A short start-up grace (one heartbeat TTL), so that the table
            // preferring MariaDB is seen waiting and then falling back
            // within seconds.
            "--heartbeat-interval",
            "1s",
            "--heartbeat-ttl",
            "5s",
            "--extension-kind",
            "myorg.org/DatabaseTableMariaDbExtension",
            "--extension-kind",
            "myorg.org/DatabaseTablePostgreSqlExtension",
            "--extension-kind",
            "myorg.org/DatabaseTableSqliteExtension",
        ],
        &kube_env,
        &work.join("operator.log"),
    )
}

impl Processes {
    /// SIGTERM to every process (the plugins unregister and drain), then
    /// waits up to `grace` for each.
    pub(crate) async fn stop(self, grace: Duration) {
        let Self { operator, plugins } = self;
        for process in plugins.iter().chain(std::iter::once(&operator)) {
            if let Some(pid) = process.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        for mut child in plugins.into_iter().chain(std::iter::once(operator)) {
            let _ = tokio::time::timeout(grace, child.wait()).await;
        }
    }
}

fn binary(name: &str) -> Result<PathBuf> {
    let dir = std::env::current_exe()?
        .parent()
        .context("no parent dir")?
        .to_owned();
    let path = dir.join(name);
    if !path.is_file() {
        bail!(
            "{} is missing: build it with `cargo build -p {name}` (make demo does)",
            path.display()
        );
    }
    Ok(path)
}

fn spawn(program: &Path, args: &[&str], env: &[(&str, String)], log: &Path) -> Result<Child> {
    let log_file = std::fs::File::create(log)?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn()
        .with_context(|| format!("starting {}", program.display()))
}

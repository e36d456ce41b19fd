//! `kplug-demo` (run by `make demo`): the database-table walkthrough, live.
//!
//! It starts a local Kubernetes control plane (kube-testenv), installs the
//! example's CRDs, runs the generic `kplug-operator` and the SQLite plugin
//! as sidecar-style processes sharing one socket dir, applies the sample
//! `users` table (which prefers MariaDB), shows it converge to SQLite with
//! its status and the real SQLite schema, edits a column and shows the
//! change. The MariaDB and PostgreSQL plugins join when their servers are
//! configured (`KPLUG_MARIADB_DSN`, `KPLUG_POSTGRES_DSN`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const CRDS: &str = include_str!("../../crds.yaml");
const SAMPLE: &str = include_str!("../../samples/users.yaml");

/// Runs the kplug database-table walkthrough on a local control plane.
#[derive(Debug, Parser)]
#[command(name = "kplug-demo", version)]
struct Args {
    /// Keep everything running at the end (until Ctrl-C) and print how to
    /// reach the control plane
    #[arg(long)]
    keep: bool,
    /// Where logs, sockets and the SQLite files go
    #[arg(long, default_value = "target/demo")]
    work_dir: PathBuf,
}

fn step(n: u32, text: &str) {
    // Bold for a person at a terminal; plain text in a pipe or a log.
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        println!("\n\x1b[1m[{n}/6] {text}\x1b[0m");
    } else {
        println!("\n[{n}/6] {text}");
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

fn table_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("myorg.org", "v1alpha1", "DatabaseTable"),
        "databasetables",
    )
}

fn condition(obj: &DynamicObject, type_: &str) -> (String, String) {
    obj.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_owned(),
                c["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .unwrap_or_default()
}

fn print_row(obj: &DynamicObject) {
    let implementation = obj
        .data
        .pointer("/status/implementation")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let (ready, reason) = condition(obj, "Ready");
    println!(
        "    {:<8} {:<16} {:<6} {}",
        obj.name_any(),
        implementation,
        ready,
        reason
    );
}

async fn wait_ready(
    api: &Api<DynamicObject>,
    name: &str,
    generation: i64,
) -> Result<DynamicObject> {
    let started = Instant::now();
    let mut last = String::new();
    println!("    NAME     IMPLEMENTATION   READY  REASON");
    loop {
        let obj = api.get(name).await?;
        let (ready, reason) = condition(&obj, "Ready");
        let observed = obj
            .data
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let line = format!("{ready}/{reason}/{observed}");
        if line != last {
            print_row(&obj);
            last = line;
        }
        if ready == "True" && observed >= generation {
            return Ok(obj);
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("{name} did not become Ready within 60s; see target/demo/*.log");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The `users` table and its indexes, as SQLite keeps them (one statement
/// per line).
fn sqlite_schema(path: &Path) -> Result<String> {
    let conn = rusqlite::Connection::open(path)?;
    let mut stmt = conn.prepare(
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'users' AND sql IS NOT NULL \
         ORDER BY type = 'index', name",
    )?;
    let statements: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(statements.join("\n      "))
}

async fn apply_sample(client: &Client, ns: &str) -> Result<()> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(SAMPLE).context("parsing samples/users.yaml")?;
    // Extensions first, so the table resolves them at once.
    let mut documents: Vec<Value> = documents.into_iter().filter(|d| !d.is_null()).collect();
    documents.sort_by_key(|d| d["kind"] == "DatabaseTable");
    for doc in documents {
        let obj: DynamicObject = serde_json::from_value(doc)?;
        let types = obj
            .types
            .clone()
            .context("a sample without apiVersion/kind")?;
        let (group, version) = types
            .api_version
            .split_once('/')
            .unwrap_or(("", &types.api_version));
        let plural = format!("{}s", types.kind.to_lowercase());
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, &types.kind),
            &plural,
        );
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar)
            .create(&PostParams::default(), &obj)
            .await?;
        println!("    created {} {}", types.kind, obj.name_any());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let work = std::path::absolute(&args.work_dir)?;
    let _ = std::fs::remove_dir_all(&work);
    let sockets = work.join("sockets");
    let sqlite_dir = work.join("sqlite");
    std::fs::create_dir_all(&sqlite_dir)?;

    step(
        1,
        "starting a local Kubernetes control plane (kube-apiserver + etcd)",
    );
    let control_plane = kplug_testenv::ControlPlane::start(&kplug_testenv::testenv_binary())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "    kube-apiserver {} ready in {:.1}s",
        control_plane.version(),
        control_plane.ready_in().as_secs_f64()
    );
    let kubeconfig = control_plane.kubeconfig_path().to_owned();
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    let client = Client::try_from(config)?;
    kplug_testenv::install_crd_yaml(&client, CRDS).await?;
    println!(
        "    installed the CRDs DatabaseTable, DatabaseTableMariaDbExtension, DatabaseTablePostgreSqlExtension, DatabaseTableSqliteExtension"
    );

    step(
        2,
        "starting kplug-operator and the plugins (sidecar-style, one socket dir)",
    );
    let kube_env = [
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("RUST_LOG", "info".to_owned()),
    ];
    let operator = spawn(
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
    )?;
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

    step(
        3,
        "applying examples/database-table/samples/users.yaml (prefers MariaDB)",
    );
    let ns = "default";
    apply_sample(&client, ns).await?;

    step(4, "watching users converge");
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &table_resource());
    let users = wait_ready(&api, "users", 1).await?;
    print_status(&users)?;
    let db = sqlite_dir.join("authorization-cluster.db");
    if db.exists() {
        println!(
            "\n    the real table in {}:\n      {}",
            db.display(),
            sqlite_schema(&db)?
        );
    }

    step(
        5,
        "editing users: id becomes int64, column email (string) is added",
    );
    let columns = json!([{"name": "id", "type": "int64"}, {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]);
    api.patch(
        "users",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"columns": columns}})),
    )
    .await?;
    let users = wait_ready(&api, "users", 2).await?;
    print_status(&users)?;
    if db.exists() {
        println!("    the real table now:\n      {}", sqlite_schema(&db)?);
    }

    step(6, "events recorded for users");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    for e in events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("users"))
    {
        println!(
            "    {:<8} {:<24} {}",
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.note.unwrap_or_default()
        );
    }

    if args.keep {
        println!(
            "\nEverything keeps running. In another shell:\n    export KUBECONFIG={}\nCtrl-C stops it all.",
            kubeconfig.display()
        );
        tokio::signal::ctrl_c().await?;
    }
    println!("\nstopping the plugins, the operator and the control plane...");
    for plugin in plugins.iter().chain(std::iter::once(&operator)) {
        if let Some(pid) = plugin.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
    for mut child in plugins.into_iter().chain(std::iter::once(operator)) {
        let _ = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
    }
    drop(control_plane);
    println!("demo done.");
    println!(
        "next: write your own kind and plugin (docs/your-own-kind.md), or run \
         `target/debug/kplug-demo --keep` to keep this one running and look around \
         (kubectl, kubectl kplug why)."
    );
    Ok(())
}

/// The status as `kubectl get -o yaml` would show it, conditions as a table.
fn print_status(obj: &DynamicObject) -> Result<()> {
    let mut status = obj.data["status"].clone();
    let conditions = status.as_object_mut().and_then(|s| s.remove("conditions"));
    println!(
        "\n    status of {} (conditions below):\n{}",
        obj.name_any(),
        indent(&serde_json::to_string_pretty(&status)?)
    );
    println!("    CONDITION            STATUS  REASON               MESSAGE");
    for c in conditions
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
        println!(
            "    {:<20} {:<7} {:<20} {}",
            s("type"),
            s("status"),
            s("reason"),
            s("message")
        );
    }
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("      {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

//! Chaos with nothing lost. `DatabaseTable`s served by the SQLite plugin
//! converge while, all at once:
//! - the leader's plugin is SIGKILLed every 2 s (and started again, as the
//!   kubelet would);
//! - the leading operator replica is SIGKILLed twice (two replicas, one
//!   Lease, each with its own plugin on its own socket dir; both plugins keep
//!   their SQLite files on one shared data dir, as they would on one
//!   database server);
//! - the API server restarts once, with its data;
//! - spec edits (added, dropped and retyped columns), extension edits (the
//!   indexes of `DatabaseTableSqliteExtension`) and deletions interleave.
//!
//! The end state is then checked against the API server and against
//! SQLite's own catalog: every live object Ready for its latest generation,
//! every table exactly its spec (columns, declared types, indexes), every
//! deleted object gone with its table dropped, and nothing else in the
//! databases. The counts are printed.
//!
//! `make test` runs the bounded form: 60 tables (`KPLUG_CHAOS_TABLES`) for
//! at least 24 s (`KPLUG_CHAOS_SECONDS`); `make chaos` runs 500 for 40 s.
//! The edit schedule comes from a seed that is printed;
//! `KPLUG_CHAOS_SEED` replays one.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kplug_testenv::{ControlPlane, StartOptions};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use support::*;
use tokio::process::{Child, Command};

/// The Lease: short, so that the two failovers fit in the bounded run.
const LEASE: &str = "4s";
/// When a killed leader's Lease has surely expired.
const LEASE_EXPIRED: Duration = Duration::from_secs(5);
/// A live object that has not converged this long after the chaos stopped
/// is stuck: without a wake-up it would wait for the 1 h resync.
const SETTLE: Duration = Duration::from_secs(120);
/// SQLite files: tables are spread over this many "servers".
const SERVERS: usize = 4;

/// The column sets a spec edit picks from: every one keeps `id` and `name`
/// (the indexable columns), and each step between two of them adds, drops
/// or retypes a column (a retype rebuilds the table).
const COLUMNS: [&[(&str, &str)]; 4] = [
    &[("id", "int64"), ("name", "string")],
    &[("id", "int64"), ("name", "string"), ("extra", "bool")],
    &[("id", "string"), ("name", "string")],
    &[("id", "int64"), ("name", "int32")],
];
/// The index sets an extension edit picks from.
const INDEXES: [&[&str]; 4] = [&[], &["name"], &["id"], &["id", "name"]];

/// How the SQLite plugin declares each spec type: the oracle the catalog
/// is checked against.
fn declared(spec_type: &str) -> &'static str {
    match spec_type {
        "int64" => "BIGINT",
        "int32" => "INTEGER",
        "string" => "TEXT",
        "bool" => "BOOLEAN",
        other => panic!("no declared type for {other}"),
    }
}

/// xorshift64*: a seeded schedule, replayable without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What one table should be.
#[derive(Clone, Debug)]
struct Want {
    server: String,
    columns: usize,
    indexes: usize,
    created: bool,
    deleted: bool,
}

impl Want {
    fn spec_columns(&self) -> Value {
        COLUMNS[self.columns]
            .iter()
            .map(|(name, t)| json!({"name": name, "type": t}))
            .collect()
    }

    fn index_list(&self) -> Value {
        json!(INDEXES[self.indexes])
    }
}

#[derive(Default)]
struct Counts {
    created: AtomicUsize,
    spec_edits: AtomicUsize,
    extension_edits: AtomicUsize,
    deletions: AtomicUsize,
    plugin_kills: AtomicUsize,
    operator_kills: AtomicUsize,
    api_retries: AtomicUsize,
}

fn count(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn read(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::Relaxed)
}

/// The driver's view of the cluster: its API handles and the model.
#[derive(Clone)]
struct Driver {
    tables: Api<DynamicObject>,
    extensions: Api<DynamicObject>,
    model: Arc<Mutex<BTreeMap<String, Want>>>,
    counts: Arc<Counts>,
}

/// Retries `call` until it succeeds (the API server restarts under the
/// driver, as under any client), or until `done` accepts its error.
async fn retrying<F, Fut, T>(
    counts: &Counts,
    what: &str,
    done: fn(&kube::Error) -> bool,
    mut call: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match call().await {
            Ok(_) => return,
            Err(e) if done(&e) => return,
            Err(e) if Instant::now() < deadline => {
                count(&counts.api_retries);
                verbose(&format!("{what}: {e}; retrying"));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("{what}: still failing after 90 s: {e}"),
        }
    }
}

/// A line on stderr with `KPLUG_CHAOS_VERBOSE` set.
fn verbose(line: &str) {
    if std::env::var_os("KPLUG_CHAOS_VERBOSE").is_some() {
        eprintln!("chaos: {line}");
    }
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn never(_: &kube::Error) -> bool {
    false
}

impl Driver {
    async fn create(&self, name: &str) {
        let want = self.model.lock().unwrap()[name].clone();
        let extension: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableSqliteExtension",
            "metadata": {"name": name}, "spec": {"indexes": want.index_list()},
        }))
        .unwrap();
        let post = PostParams::default();
        // A create whose answer was lost in the restart is done.
        let exists = |e: &kube::Error| status_code(e) == Some(409);
        retrying(
            &self.counts,
            &format!("create extension {name}"),
            exists,
            || self.extensions.create(&post, &extension),
        )
        .await;
        let table: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
            "metadata": {"name": name},
            "spec": {
                "serverName": want.server,
                "preferredImplementation": "SQLite",
                "deletionPolicy": "Delete",
                "columns": want.spec_columns(),
                "extensions": [{"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTableSqliteExtension", "name": name}],
            },
        }))
        .unwrap();
        retrying(&self.counts, &format!("create {name}"), exists, || {
            self.tables.create(&post, &table)
        })
        .await;
        self.model.lock().unwrap().get_mut(name).unwrap().created = true;
        count(&self.counts.created);
    }

    /// One random edit or deletion of a created, live table (none before
    /// the first is created).
    /// The model changes only once the API server has taken the change.
    async fn disturb(&self, rng: &mut Rng) {
        let (name, kind, patch, want) = {
            let model = self.model.lock().unwrap();
            let live: Vec<&String> = model
                .iter()
                .filter(|(_, w)| w.created && !w.deleted)
                .map(|(name, _)| name)
                .collect();
            if live.is_empty() {
                return;
            }
            let name = live[rng.below(live.len())].clone();
            let mut want = model[&name].clone();
            let (kind, patch) = match rng.below(5) {
                0 => {
                    want.deleted = true;
                    ("delete", Value::Null)
                }
                1 | 2 => {
                    want.columns =
                        (want.columns + 1 + rng.below(COLUMNS.len() - 1)) % COLUMNS.len();
                    ("spec", json!({"spec": {"columns": want.spec_columns()}}))
                }
                _ => {
                    want.indexes =
                        (want.indexes + 1 + rng.below(INDEXES.len() - 1)) % INDEXES.len();
                    ("extension", json!({"spec": {"indexes": want.index_list()}}))
                }
            };
            (name, kind, patch, want)
        };
        let (params, merge, delete) = (
            PatchParams::default(),
            Patch::Merge(&patch),
            DeleteParams::default(),
        );
        match kind {
            "delete" => {
                let gone = |e: &kube::Error| status_code(e) == Some(404);
                retrying(&self.counts, &format!("delete {name}"), gone, || {
                    self.tables.delete(&name, &delete)
                })
                .await;
                count(&self.counts.deletions);
            }
            "spec" => {
                retrying(&self.counts, &format!("edit {name}"), never, || {
                    self.tables.patch(&name, &params, &merge)
                })
                .await;
                count(&self.counts.spec_edits);
            }
            _ => {
                retrying(
                    &self.counts,
                    &format!("edit extension {name}"),
                    never,
                    || self.extensions.patch(&name, &params, &merge),
                )
                .await;
                count(&self.counts.extension_edits);
            }
        }
        self.model.lock().unwrap().insert(name, want);
    }
}

fn table_name(i: usize) -> String {
    format!("chaos-{i:04}")
}

/// One operator replica: its Pod name, socket dir, metrics port, operator
/// and plugin.
struct Replica {
    pod: String,
    sockets: PathBuf,
    metrics_port: u16,
    operator: Option<Child>,
    plugin: Option<Child>,
}

struct Cluster {
    ns: String,
    kubeconfig: PathBuf,
    data: PathBuf,
    logs: PathBuf,
    replicas: Vec<Replica>,
}

fn log_file(dir: &Path, name: &str) -> std::fs::File {
    std::fs::File::options()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .unwrap()
}

impl Cluster {
    fn start_operator(&mut self, i: usize) {
        let replica = &self.replicas[i];
        let log = format!("{}.log", replica.pod);
        let operator = operator_command(
            &replica.pod,
            &self.ns,
            &replica.sockets,
            replica.metrics_port,
            &["--lease-duration", LEASE, "--resync", "1h"],
            &self.kubeconfig,
        )
        .stdout(log_file(&self.logs, &log))
        .stderr(log_file(&self.logs, &log))
        .spawn()
        .expect("start kplug-operator");
        self.replicas[i].operator = Some(operator);
    }

    fn start_plugin(&mut self, i: usize) {
        let replica = &self.replicas[i];
        let plugin = Command::new(kplug_testenv::workspace_binary("sqlite-plugin"))
            .arg("--data-dir")
            .arg(&self.data)
            .env("KPLUG_SOCKET_DIR", &replica.sockets)
            .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log_file(&self.logs, &format!("sqlite-plugin-{i}.log")))
            .stderr(log_file(&self.logs, &format!("sqlite-plugin-{i}.log")))
            .kill_on_drop(true)
            .spawn()
            .expect("start sqlite-plugin");
        self.replicas[i].plugin = Some(plugin);
    }

    /// The replica that leads now, if any says so.
    async fn leader(&self) -> Option<usize> {
        for (i, replica) in self.replicas.iter().enumerate() {
            let metrics = http_get(replica.metrics_port, "/metrics").await;
            if metrics.and_then(|m| metric(&m, "kplug_leader")) == Some(1.0) {
                return Some(i);
            }
        }
        None
    }
}

async fn kill(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        signal(&child, Signal::SIGKILL);
        let _ = child.wait().await;
    }
}

/// SIGKILLs the leader's plugin every 2 s (replica 0's while no replica
/// leads) and starts it again 300 ms later, until `stop`.
async fn plugin_killer(
    cluster: Arc<tokio::sync::Mutex<Cluster>>,
    counts: Arc<Counts>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
        let i = {
            let mut cluster = cluster.lock().await;
            let i = cluster.leader().await.unwrap_or(0);
            kill(&mut cluster.replicas[i].plugin).await;
            i
        };
        count(&counts.plugin_kills);
        tokio::time::sleep(Duration::from_millis(300)).await;
        cluster.lock().await.start_plugin(i);
    }
}

/// Waits for a leader, SIGKILLs its operator, and starts it again once the
/// Lease has expired (so the other replica takes over first; a container
/// restarted at once would take its own Lease back). Returns which replica
/// it was.
async fn kill_leader(cluster: &Arc<tokio::sync::Mutex<Cluster>>, counts: &Counts) -> usize {
    let i = kplug_testenv::eventually("a replica leads", Duration::from_secs(60), || async {
        cluster
            .lock()
            .await
            .leader()
            .await
            .ok_or("no replica says kplug_leader 1")
    })
    .await;
    kill(&mut cluster.lock().await.replicas[i].operator).await;
    count(&counts.operator_kills);
    tokio::time::sleep(LEASE_EXPIRED).await;
    cluster.lock().await.start_operator(i);
    i
}

/// What is wrong with one object at the end, if anything.
#[derive(Debug, PartialEq)]
enum Verdict {
    Ok,
    /// A live object not Ready for its latest generation.
    Stuck(String),
    /// A table that differs from its spec.
    Wrong(String),
    /// A deleted object still there, or its table; a live object's table
    /// missing.
    Lost(String),
}

/// The table's columns (name, declared type) and this plugin's indexed
/// columns, from SQLite's catalog; `None` when the table does not exist.
type Catalog = Option<(Vec<(String, String)>, BTreeSet<String>)>;

fn catalog(db: &Path, table: &str) -> Catalog {
    if !db.exists() {
        return None;
    }
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, type FROM pragma_table_info(?1)")
        .unwrap();
    let columns: Vec<(String, String)> = stmt
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    if columns.is_empty() {
        return None;
    }
    let mut stmt = conn
        .prepare(
            "SELECT i.name FROM pragma_index_list(?1) AS l, pragma_index_info(l.name) AS i \
             WHERE l.origin = 'c' AND l.name LIKE 'kplug_ix_%'",
        )
        .unwrap();
    let indexes = stmt
        .query_map([table], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    Some((columns, indexes))
}

/// Every table in the SQLite file `db` (none when it does not exist).
fn all_tables(db: &Path) -> BTreeSet<String> {
    if !db.exists() {
        return BTreeSet::new();
    }
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn judge(name: &str, want: &Want, object: Option<&DynamicObject>, data: &Path) -> Verdict {
    let table = name.replace('-', "_");
    let db = data.join(format!("{}.db", want.server));
    let found = catalog(&db, &table);
    if want.deleted {
        return match (object, found) {
            (None, None) => Verdict::Ok,
            (Some(_), _) => Verdict::Lost(format!("{name}: deleted, still in the API")),
            (None, Some(_)) => Verdict::Lost(format!(
                "{name}: deleted, its table {table} is still in {}",
                db.display()
            )),
        };
    }
    let Some(object) = object else {
        return Verdict::Lost(format!("{name}: live, but gone from the API"));
    };
    let generation = object.metadata.generation;
    let ready = condition(object, "Ready");
    let observed = object
        .data
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    if !matches!(&ready, Some((status, reason, _)) if status == "True" && reason == "Reconciled")
        || observed != generation
    {
        return Verdict::Stuck(format!(
            "{name}: generation {generation:?}, observedGeneration {observed:?}, Ready {ready:?}"
        ));
    }
    let expected_columns: Vec<(String, String)> = COLUMNS[want.columns]
        .iter()
        .map(|(n, t)| ((*n).to_owned(), declared(t).to_owned()))
        .collect();
    let expected_indexes: BTreeSet<String> = INDEXES[want.indexes]
        .iter()
        .map(|c| (*c).to_owned())
        .collect();
    match found {
        None => Verdict::Lost(format!(
            "{name}: Ready, but table {table} is not in {}",
            db.display()
        )),
        Some((columns, indexes)) if columns != expected_columns || indexes != expected_indexes => {
            Verdict::Wrong(format!(
                "{name}: table {table} has columns {columns:?} and indexes {indexes:?}; the spec says {expected_columns:?} and {expected_indexes:?}"
            ))
        }
        Some(_) => Verdict::Ok,
    }
}

/// How many tables, for how long at least, and the seed.
fn settings() -> (usize, Duration, u64) {
    let number = |key: &str, default: u64| {
        std::env::var(key)
            .ok()
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{key} is a number, not {v:?}"))
            })
            .unwrap_or(default)
    };
    let tables = usize::try_from(number("KPLUG_CHAOS_TABLES", 60)).unwrap();
    let chaos = Duration::from_secs(number("KPLUG_CHAOS_SECONDS", 24).max(20));
    let seed = std::env::var("KPLUG_CHAOS_SEED")
        .ok()
        .map(|v| v.parse().expect("KPLUG_CHAOS_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    (tables, chaos, seed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_loses_nothing() {
    let (n, chaos, seed) = settings();
    eprintln!(
        "chaos: {n} tables, at least {chaos:?}, seed {seed} (KPLUG_CHAOS_SEED={seed} replays the schedule)"
    );
    let mut control_plane =
        tokio::task::block_in_place(|| ControlPlane::start_with(StartOptions::default()))
            .expect("a control plane of this test's own");
    let client = control_plane.client().await.unwrap();
    kplug_testenv::install_crd_yaml(&client, CRDS)
        .await
        .expect("install CRDs");
    let ns = kplug_testenv::namespace(&client, "chaos")
        .await
        .expect("namespace");
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("sqlite");
    let logs = kplug_testenv::target_dir().join("chaos");
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).unwrap();
    let replicas = (0..2)
        .map(|i| {
            let sockets = work.path().join(format!("sockets-{i}"));
            std::fs::create_dir_all(&sockets).unwrap();
            Replica {
                pod: format!("kplug-operator-{i}"),
                sockets,
                metrics_port: free_port(),
                operator: None,
                plugin: None,
            }
        })
        .collect();
    let cluster = Arc::new(tokio::sync::Mutex::new(Cluster {
        ns: ns.clone(),
        kubeconfig: control_plane.kubeconfig_path().to_owned(),
        data: data.clone(),
        logs: logs.clone(),
        replicas,
    }));
    {
        let mut c = cluster.lock().await;
        for i in 0..2 {
            c.start_operator(i);
            c.start_plugin(i);
        }
    }

    let ar = |kind: &str, plural: &str| {
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("myorg.org", "v1alpha1", kind),
            plural,
        )
    };
    let driver = Driver {
        tables: Api::namespaced_with(client.clone(), &ns, &table_resource()),
        extensions: Api::namespaced_with(
            client.clone(),
            &ns,
            &ar(
                "DatabaseTableSqliteExtension",
                "databasetablesqliteextensions",
            ),
        ),
        model: Arc::new(Mutex::new(
            (0..n)
                .map(|i| {
                    let want = Want {
                        server: format!("chaos-{}", i % SERVERS),
                        columns: i % COLUMNS.len(),
                        indexes: (i / COLUMNS.len()) % INDEXES.len(),
                        created: false,
                        deleted: false,
                    };
                    (table_name(i), want)
                })
                .collect(),
        )),
        counts: Arc::new(Counts::default()),
    };
    let counts = driver.counts.clone();
    let started = Instant::now();

    // Creations, 8 at a time (edits pick among the created).
    let creator = {
        let driver = driver.clone();
        tokio::spawn(async move {
            futures::stream::iter(0..n)
                .for_each_concurrent(8, |i| {
                    let driver = driver.clone();
                    async move { driver.create(&table_name(i)).await }
                })
                .await;
        })
    };
    // Edits and deletions: about half as many as tables (at least 30),
    // spread over the first three quarters of the chaos.
    let disturbances = (n / 2).max(30);
    // Stopping lets each task finish what it is doing (an edit the model
    // has not recorded yet, a plugin being started again).
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let disturber = {
        let (driver, mut stopping) = (driver.clone(), stopping.clone());
        tokio::spawn(async move {
            let mut rng = Rng(seed);
            let pause = chaos * 3 / 4 / u32::try_from(disturbances).unwrap();
            for _ in 0..disturbances {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
                driver.disturb(&mut rng).await;
            }
        })
    };
    let killer = tokio::spawn(plugin_killer(cluster.clone(), counts.clone(), stopping));

    // The scheduled blows: leader, API server, leader.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let first = kill_leader(&cluster, &counts).await;
    eprintln!(
        "chaos: killed the leading operator (replica {first}) at {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let timing =
        tokio::task::block_in_place(|| control_plane.restart()).expect("restart the API server");
    eprintln!(
        "chaos: API server restarted at {:?} (down {:?})",
        started.elapsed(),
        timing.total()
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let second = kill_leader(&cluster, &counts).await;
    eprintln!(
        "chaos: killed the leading operator (replica {second}) at {:?}",
        started.elapsed()
    );

    creator.await.expect("creations");
    let remaining = chaos.saturating_sub(started.elapsed());
    tokio::time::sleep(remaining).await;
    let _ = stop.send(true);
    disturber.await.expect("edits and deletions");
    killer.await.expect("the plugin killer");
    let chaos_ended = Instant::now();
    eprintln!("chaos: stopped after {:?}; settling", started.elapsed());

    // Settle: poll the API server and SQLite until every object is right,
    // or until SETTLE says the rest is stuck.
    let model = driver.model.lock().unwrap().clone();
    let verdicts = loop {
        let objects: BTreeMap<String, DynamicObject> =
            match driver.tables.list(&Default::default()).await {
                Ok(list) => list
                    .items
                    .into_iter()
                    .map(|o| (o.metadata.name.clone().unwrap(), o))
                    .collect(),
                Err(e) => panic!("list the tables after the chaos: {e}"),
            };
        let verdicts: Vec<Verdict> = model
            .iter()
            .map(|(name, want)| judge(name, want, objects.get(name), &data))
            .filter(|v| *v != Verdict::Ok)
            .collect();
        if verdicts.is_empty() || chaos_ended.elapsed() > SETTLE {
            break verdicts;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let settled = chaos_ended.elapsed();

    // Nothing else in the databases: no leftover rebuild table, no table of
    // an object that never was.
    let expected: BTreeSet<String> = model
        .iter()
        .filter(|(_, w)| !w.deleted)
        .map(|(name, _)| name.replace('-', "_"))
        .collect();
    let mut strays = Vec::new();
    for s in 0..SERVERS {
        let db = data.join(format!("chaos-{s}.db"));
        for table in all_tables(&db) {
            if !expected.contains(&table) {
                strays.push(format!("{table} in {}", db.display()));
            }
        }
    }

    let live = model.values().filter(|w| !w.deleted).count();
    let (mut lost, mut wrong, mut stuck) = (Vec::new(), Vec::new(), Vec::new());
    for verdict in verdicts {
        match verdict {
            Verdict::Lost(why) => lost.push(why),
            Verdict::Wrong(why) => wrong.push(why),
            Verdict::Stuck(why) => stuck.push(why),
            Verdict::Ok => {}
        }
    }
    eprintln!(
        "\nchaos report (seed {seed}):\n\
         | tables created | spec edits | extension edits | deletions | plugin SIGKILLs | operator SIGKILLs | API server restarts | API calls retried | live at the end | settled after | lost | wrong | stuck | stray tables |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n\
         | {} | {} | {} | {} | {} | {} | 1 | {} | {live} | {settled:.1?} | {} | {} | {} | {} |\n\
         logs: {}",
        read(&counts.created),
        read(&counts.spec_edits),
        read(&counts.extension_edits),
        read(&counts.deletions),
        read(&counts.plugin_kills),
        read(&counts.operator_kills),
        read(&counts.api_retries),
        lost.len(),
        wrong.len(),
        stuck.len(),
        strays.len(),
        logs.display(),
    );
    for why in lost
        .iter()
        .chain(&wrong)
        .chain(&stuck)
        .chain(&strays)
        .take(20)
    {
        eprintln!("  {why}");
    }
    assert_eq!(read(&counts.created), n, "every table was created");
    assert!(
        read(&counts.plugin_kills) >= 5,
        "the plugin was killed throughout the chaos"
    );
    assert!(
        lost.is_empty() && wrong.is_empty() && stuck.is_empty() && strays.is_empty(),
        "after the chaos: {} lost, {} wrong, {} stuck, {} stray tables (listed above; logs in {})",
        lost.len(),
        wrong.len(),
        stuck.len(),
        strays.len(),
        logs.display()
    );
}

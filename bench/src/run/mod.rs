//! `kplug-bench run`: P2–P4 on a control plane of the benchmark's own
//! ([`Bench`], a fresh one per measurement): P2 in [`p2`], P3 in [`p3`],
//! P4 in [`p4`].

mod p2;
mod p3;
mod p4;
mod p5;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kplug_testenv::{ControlPlane, StartOptions};
use kube::Client;

use crate::apiserver;
use crate::objects::{self, Watch};
use crate::processes::{Operator, Process, Setup};
use crate::report::{self, Row};

/// The plugin every part runs.
const PLUGIN: &str = "sqlite";
/// How long the processes are left alone after the last object converged,
/// before the API requests and CPU time are read: late work counts.
const SETTLE: Duration = Duration::from_secs(2);
/// P4's window of CPU time at rest, once caught up.
const AT_REST: Duration = Duration::from_secs(10);

/// `kplug-bench run`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// P2: tables (each with an extension) converged by kplug and by the
    /// in-process baseline.
    #[arg(long, default_value_t = 2000)]
    tables: usize,
    /// P2: measurements of each, alternating which goes first (the API
    /// server's store grows with every round); the table shows the mean.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// P3: tables waiting for the plugin when it registers.
    #[arg(long, default_value_t = 1000)]
    waiting: usize,
    /// P4: tables (and as many extensions) held by the operator and by the
    /// bare reflector.
    #[arg(long, default_value_t = 10000)]
    footprint: usize,
    /// P5: tables (each with an extension and three ConfigMap children)
    /// held by the operator and by the bare reflector.
    #[arg(long, default_value_t = 1000)]
    children: usize,
    /// Where the table goes. Default: `<target dir>/bench/report.md`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// P1's table from the same `make bench` (the polyglot benchmark's
    /// `polyglot.md`), whose rows go first in this table, with their goals.
    #[arg(long)]
    p1: Option<PathBuf>,
    /// The parts to run (e.g. `--parts p3` while working on P3); the table
    /// has only their rows.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "p2,p3,p4,p5")]
    parts: Vec<Part>,
}

/// A part of the end-to-end benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Part {
    /// New tables converged.
    P2,
    /// Waiting tables when their plugin registers.
    P3,
    /// The operator's start over converged tables, and its footprint.
    P4,
    /// The footprint with children, and a restart over them.
    P5,
}

/// Runs every part and writes the table.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.tables > 0
            && args.waiting > 0
            && args.footprint > 0
            && args.children > 0
            && args.rounds > 0,
        "--tables, --waiting, --footprint, --children and --rounds must be at least 1"
    );
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| kplug_testenv::target_dir().join("bench/report.md"));
    let bench_dir = out.parent().context("--out has no directory")?.to_owned();
    let work = bench_dir.join("end-to-end");
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    std::fs::create_dir_all(&work)?;
    progress(&format!("logs of every process in {}", work.display()));
    let mut rows = p1_rows(&args)?;
    if args.parts.contains(&Part::P2) {
        rows.extend(p2::converge(&work, args.tables, args.rounds).await?);
    }
    if args.parts.contains(&Part::P3) {
        rows.extend(p3::waiting_rounds(&work, args.waiting, args.rounds).await?);
    }
    if args.parts.contains(&Part::P4) {
        rows.extend(Bench::start(&work).await?.footprint(args.footprint).await?);
    }
    if args.parts.contains(&Part::P5) {
        rows.extend(Bench::start(&work).await?.children(args.children).await?);
    }
    let table = report::markdown(&caption(&args), &rows);
    println!("{table}");
    std::fs::write(&out, &table).with_context(|| format!("writing {}", out.display()))?;
    progress(&format!("wrote {}", out.display()));
    Ok(())
}

/// P1's rows, from its table (`--p1`), when given.
fn p1_rows(args: &Args) -> anyhow::Result<Vec<Row>> {
    Ok(match &args.p1 {
        Some(path) => std::fs::read_to_string(path)
            .map_err(anyhow::Error::from)
            .and_then(|table| report::p1_rows(&table))
            .with_context(|| format!("P1's table {} (make bench-polyglot)", path.display()))?,
        None => Vec::new(),
    })
}

/// What the table measured, and how.
fn caption(args: &Args) -> String {
    format!(
        "P1: the polyglot benchmark's table (each SDK against its bare gRPC library, alone \
         and with the standard JSON library; `make bench-polyglot`), {p1}. P2–P4: kplug-operator and the SQLite plugin ({build}, each a process) against \
         the baselines in one run, on {} cores, each measurement on a fresh kube-apiserver (warmed up \
         with 8 tables). \
         P2: {tables} `DatabaseTable`s, each with a `DatabaseTableSqliteExtension`, \
         created 32 at a time (after one converged before the window: not the start-up); kplug against an in-process kube-rs controller calling the \
         same plugin code with the same writes (`kplug-bench baseline`), both under a leader \
         Lease; mean of {rounds} \
         round(s), alternating which goes first. Wall time: first create to last `Ready`; \
         API requests: `apiserver_request_total` for resources, less the benchmark's own \
         creates and the API server's own housekeeping (its Service's endpoints, its identity \
         Lease); CPU: user + system from `/proc`, from the first create until {settle} s after \
         the last `Ready`. P3: {waiting} tables waiting when the plugin starts (and, as a \
         yardstick, when the in-process baseline starts), the median of as many rounds, \
         alternating too; the SIGKILL is timed until the \
         operator's `/plugins` no longer lists the plugin; the restart's Reconcile calls are \
         the operator's `kplug_plugin_calls_total`. P4: {footprint} tables and {footprint} \
         extensions; the operator is restarted over them (the plugin stays) and measured once \
         it has caught up (no reconcile for {settle} s), the bare reflector (`kplug-bench \
         reflector`) once it holds them all plus {settle} s; then each for {rest} s at rest. \
         P4's API requests are counted over the same window, the same way. Every API request \
         count is `apiserver_request_total` (a request counts when it ends) plus the watches \
         opened and still open (`apiserver_longrunning_requests`): a streaming list is one WATCH. \
         P5: {children} tables, each with an extension and three ConfigMap children the plugin \
         (`kplug-bench children-plugin`) desires, converged with `--child-kinds v1/ConfigMap`; \
         the operator restarted over them as in P4, against a bare reflector of the tables, \
         extensions and labelled ConfigMaps; the writes to ConfigMaps are counted from \
         `apiserver_request_total` over the restart.",
        std::thread::available_parallelism().map_or(0, usize::from),
        tables = args.tables,
        rounds = args.rounds,
        waiting = args.waiting,
        footprint = args.footprint,
        children = args.children,
        rest = AT_REST.as_secs(),
        settle = SETTLE.as_secs(),
        build = if cfg!(debug_assertions) {
            "a debug build: the numbers say nothing"
        } else {
            "release build"
        },
        p1 = args
            .p1
            .as_ref()
            .map_or_else(|| "not run".to_owned(), |p| format!("from {}", p.display())),
    )
}

fn progress(line: &str) {
    eprintln!("kplug-bench: {line}");
}

/// One control plane of the benchmark's own, with the walkthrough's CRDs:
/// each measurement gets a fresh one, so that none runs on an API server
/// (and etcd) grown by the measurements before it. On a shared one, the
/// last of four 2,000-table runs took twice as long as the first.
struct Bench {
    control_plane: ControlPlane,
    client: Client,
    setup: Setup,
    work: PathBuf,
    /// kube-testenv: the API server and etcd, in one process.
    api_server: i32,
}

/// The timeout for `n` objects to converge: generous, since it only stops
/// a run that is broken.
fn converge_timeout(n: usize) -> Duration {
    Duration::from_secs(120) + Duration::from_millis(100) * u32::try_from(n).unwrap_or(u32::MAX)
}

impl Bench {
    /// Starts a control plane, installs the CRDs and warms it up.
    async fn start(work: &Path) -> anyhow::Result<Self> {
        progress("starting a control plane");
        let control_plane =
            tokio::task::spawn_blocking(|| ControlPlane::start_with(StartOptions::default()))
                .await?
                .context("starting kube-testenv (build it with `make testenv`)")?;
        let client = kplug_testenv::client_from_kubeconfig(control_plane.kubeconfig_path()).await?;
        kplug_testenv::install_crd_yaml(&client, objects::CRDS).await?;
        let bench = Self {
            client,
            setup: Setup {
                kubeconfig: control_plane.kubeconfig_path().to_owned(),
                logs: work.to_owned(),
            },
            work: work.to_owned(),
            api_server: i32::try_from(control_plane.pid())?,
            control_plane,
        };
        bench.warm_up().await?;
        Ok(bench)
    }

    /// Stops the control plane (and waits for it).
    async fn stop(self) -> anyhow::Result<()> {
        let Self {
            mut control_plane, ..
        } = self;
        tokio::task::spawn_blocking(move || control_plane.stop()).await??;
        Ok(())
    }

    /// A fresh namespace and a data dir for `what`.
    async fn place(&self, what: &str) -> anyhow::Result<(String, PathBuf)> {
        let ns = kplug_testenv::namespace(&self.client, what).await?;
        let data = self.work.join(format!("data-{ns}"));
        std::fs::create_dir_all(&data)?;
        Ok((ns, data))
    }

    /// Starts the operator for `ns` and the plugin, and waits until the
    /// plugin is registered and ready.
    async fn kplug(
        &self,
        ns: &str,
        data: &Path,
        sockets: &Path,
    ) -> anyhow::Result<(Operator, Process)> {
        let operator = self.setup.operator(ns, sockets)?;
        let plugin = self.setup.plugin(&operator, data, ns)?;
        until_listed(&operator, true).await?;
        Ok((operator, plugin))
    }

    /// Converges a few tables (through the baseline) before anything is
    /// measured: the first objects of the CRDs on a fresh API server took
    /// about 2 s longer to show up in a watch, which made whichever went
    /// first look slow.
    async fn warm_up(&self) -> anyhow::Result<()> {
        const TABLES: usize = 8;
        progress("warming the API server up");
        let (ns, data) = self.place("warm-up").await?;
        let mut watch = Watch::tables(&self.client, &ns);
        let baseline = self.setup.baseline(&ns, &data)?;
        objects::create(&self.client, &ns, 0..TABLES).await?;
        watch
            .until(TABLES, objects::is_ready, "Ready", converge_timeout(TABLES))
            .await?;
        baseline.stop().await
    }
}

/// `KPLUG_BENCH_API_PROFILE`: the seconds of the API server's CPU profile
/// each P2 measurement takes from its start ([`apiserver::profile`]).
fn api_profile_seconds() -> Option<u64> {
    std::env::var("KPLUG_BENCH_API_PROFILE")
        .ok()
        .and_then(|s| s.parse().ok())
}

impl Bench {
    /// With `KPLUG_BENCH_API_PROFILE=<seconds>`, a CPU profile of the API
    /// server from now, as `apiserver-<ns>.pprof`.
    fn api_profile(&self, ns: &str) -> Option<tokio::task::JoinHandle<anyhow::Result<()>>> {
        api_profile_seconds().map(|seconds| {
            let (client, to) = (
                self.client.clone(),
                self.work.join(format!("apiserver-{ns}.pprof")),
            );
            tokio::spawn(async move { apiserver::profile(&client, seconds, &to).await })
        })
    }

    /// Keeps the first table of `ns` and its extension as the API server
    /// stores them (managed fields included) in `sample-<label>.json`, read
    /// after everything was measured: what each controller's writes cost
    /// the API server grows with the size of what it stores.
    async fn keep_sample(&self, ns: &str, label: &str) -> anyhow::Result<()> {
        let name = objects::name(0);
        let mut sample = serde_json::Map::new();
        for (what, ar) in [
            ("table", objects::table_resource()),
            ("extension", objects::extension_resource()),
        ] {
            let api: kube::Api<kube::api::DynamicObject> =
                kube::Api::namespaced_with(self.client.clone(), ns, &ar);
            let obj = api.get(&name).await?;
            let bytes = serde_json::to_vec(&obj)?.len();
            sample.insert(format!("{what}Bytes"), bytes.into());
            sample.insert(what.to_owned(), serde_json::to_value(obj)?);
        }
        let path = self.work.join(format!("sample-{label}.json"));
        std::fs::write(&path, serde_json::to_vec_pretty(&sample)?)
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Keeps all of the API server's metrics as
    /// `apiserver-metrics-<ns>-<what>.txt`: for what else a measurement cost
    /// it (its watch events, its storage's retries), compared by hand.
    async fn keep_api_metrics(&self, ns: &str, what: &str) -> anyhow::Result<()> {
        let metrics = apiserver::metrics(&self.client).await?;
        let path = self.work.join(format!("apiserver-metrics-{ns}-{what}.txt"));
        std::fs::write(&path, metrics).with_context(|| format!("writing {}", path.display()))
    }

    /// The API requests served since `before`, counted as P2 counts them;
    /// their breakdown by verb and resource is kept as
    /// `requests-<ns>-<what>.txt`.
    async fn requests_since(
        &self,
        before: &apiserver::Requests,
        ns: &str,
        what: &str,
    ) -> anyhow::Result<u64> {
        self.keep_api_metrics(ns, what).await?;
        let (n, breakdown) = apiserver::requests(&self.client).await?.since(before);
        std::fs::write(
            self.work.join(format!("requests-{ns}-{what}.txt")),
            breakdown,
        )?;
        Ok(n)
    }
}

/// Polls the operator's `/plugins` (every millisecond, so that the time is
/// the operator's, not the poll's) until the plugin is listed and ready
/// (`listed`) or gone; returns when.
async fn until_listed(operator: &Operator, listed: bool) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = operator.plugin_ready(PLUGIN).await;
        let done = match ready {
            Ok(Some(ready)) => listed && ready,
            Ok(None) => !listed,
            Err(_) => false,
        };
        if done {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!(
                "the operator's /plugins did {} list {PLUGIN} after 60 s; see its log",
                if listed { "not" } else { "still" }
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until the operator's reconciles stop: `kplug_reconcile_total`
/// unchanged for [`SETTLE`]. Returns how long that took.
async fn until_quiet(operator: &Operator) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut last = -1.0;
    let mut since = Instant::now();
    loop {
        let now = operator
            .metric("kplug_reconcile_total", &[])
            .await
            .unwrap_or(-1.0);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= SETTLE && now >= 0.0 {
            return Ok(start.elapsed());
        }
        if start.elapsed() > Duration::from_secs(600) {
            bail!("the operator did not stop reconciling within 600 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

//! `kplug-bench run`: P2–P4 on a control plane of the benchmark's own.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kplug_testenv::{ControlPlane, StartOptions};
use kube::Client;

use crate::apiserver;
use crate::objects::{self, Watch};
use crate::processes::{Operator, Process, Setup, Usage};
use crate::report::{self, Figure, Goal, Row};

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
    /// Where the table goes. Default: `<target dir>/bench/report.md`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// P1's table from the same `make bench` (the polyglot benchmark's
    /// `polyglot.md`), whose rows go first in this table, with their goals.
    #[arg(long)]
    p1: Option<PathBuf>,
    /// The parts to run (e.g. `--parts p3` while working on P3); the table
    /// has only their rows.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "p2,p3,p4")]
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
}

/// Runs every part and writes the table.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.tables > 0 && args.waiting > 0 && args.footprint > 0 && args.rounds > 0,
        "--tables, --waiting, --footprint and --rounds must be at least 1"
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
    let mut rows = match &args.p1 {
        Some(path) => report::p1_rows(&std::fs::read_to_string(path).with_context(|| {
            format!(
                "reading P1's table {} (make bench-polyglot)",
                path.display()
            )
        })?),
        None => Vec::new(),
    };
    if args.parts.contains(&Part::P2) {
        rows.extend(converge(&work, args.tables, args.rounds).await?);
    }
    if args.parts.contains(&Part::P3) {
        rows.extend(waiting_rounds(&work, args.waiting, args.rounds).await?);
    }
    if args.parts.contains(&Part::P4) {
        rows.extend(Bench::start(&work).await?.footprint(args.footprint).await?);
    }

    let caption = format!(
        "P1: the polyglot benchmark's table (each SDK against its bare gRPC library; \
         `make bench-polyglot`), {p1}. P2–P4: kplug-operator and the SQLite plugin ({build}, each a process) against \
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
         opened and still open (`apiserver_longrunning_requests`): a streaming list is one WATCH.",
        std::thread::available_parallelism().map_or(0, usize::from),
        tables = args.tables,
        rounds = args.rounds,
        waiting = args.waiting,
        footprint = args.footprint,
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
    );
    let table = report::markdown(&caption, &rows);
    println!("{table}");
    std::fs::write(&out, &table).with_context(|| format!("writing {}", out.display()))?;
    progress(&format!("wrote {}", out.display()));
    Ok(())
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

/// What one P2 measurement found.
#[derive(Debug, Default, Clone, Copy)]
struct Converged {
    wall: Duration,
    requests: u64,
    cpu: Duration,
    operator_cpu: Duration,
    api_server_cpu: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    Kplug,
    Baseline,
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

/// P2: `n` tables converged by kplug and by the baseline, `rounds` times
/// each, each time on a fresh control plane.
async fn converge(work: &Path, n: usize, rounds: usize) -> anyhow::Result<Vec<Row>> {
    let mut kplug = Vec::new();
    let mut baseline = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Who::Kplug, Who::Baseline]
        } else {
            [Who::Baseline, Who::Kplug]
        };
        for who in order {
            progress(&format!(
                "P2 round {}/{rounds}: {n} tables through {who:?}",
                round + 1
            ));
            let bench = Bench::start(work).await?;
            let measured = bench.converge_once(n, who).await?;
            bench.stop().await?;
            progress(&format!("P2: {measured:?}"));
            match who {
                Who::Kplug => kplug.push(measured),
                Who::Baseline => baseline.push(measured),
            }
        }
    }
    let (k, b) = (mean(&kplug), mean(&baseline));
    let case = format!("{n} tables converged");
    let row = |measure, kplug, baseline, goal| Row {
        part: "P2",
        case: case.clone(),
        measure,
        kplug,
        baseline,
        goal,
    };
    Ok(vec![
        row(
            "wall time",
            Figure::Time(k.wall),
            Some(Figure::Time(b.wall)),
            Goal::Ratio(1.15),
        ),
        row(
            "API requests",
            Figure::Count(k.requests),
            Some(Figure::Count(b.requests)),
            Goal::Ratio(1.0),
        ),
        row(
            "CPU in all (the controller's processes, the API server and etcd)",
            Figure::Time(k.cpu + k.api_server_cpu),
            Some(Figure::Time(b.cpu + b.api_server_cpu)),
            Goal::Ratio(1.15),
        ),
        row(
            "CPU (kplug: operator + plugin)",
            Figure::Time(k.cpu),
            Some(Figure::Time(b.cpu)),
            Goal::None,
        ),
        row(
            "CPU, the operator alone",
            Figure::Time(k.operator_cpu),
            Some(Figure::Time(b.cpu)),
            Goal::None,
        ),
        row(
            "CPU of the API server and etcd meanwhile",
            Figure::Time(k.api_server_cpu),
            Some(Figure::Time(b.api_server_cpu)),
            Goal::None,
        ),
    ])
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

    async fn converge_once(&self, n: usize, who: Who) -> anyhow::Result<Converged> {
        let (ns, data) = self.place(&format!("p2-{who:?}").to_lowercase()).await?;
        let sockets = tempfile::tempdir()?;
        let mut processes = Vec::new();
        let mut operator = None;
        match who {
            Who::Kplug => {
                let (o, plugin) = self.kplug(&ns, &data, sockets.path()).await?;
                processes.push(plugin);
                operator = Some(o);
            }
            Who::Baseline => processes.push(self.setup.baseline(&ns, &data)?),
        }
        // Both have listed their (empty) namespace by now. Each converges
        // one table before the window too: the start-up is not what is
        // measured (kplug-operator starts an extension kind's watch when an
        // object first references it).
        tokio::time::sleep(Duration::from_secs(1)).await;
        objects::create(&self.client, &ns, n..n + 1).await?;
        Watch::tables(&self.client, &ns)
            .until(1, objects::is_ready, "Ready", converge_timeout(1))
            .await?;
        let cpu = |operator: &Option<Operator>,
                   processes: &[Process]|
         -> anyhow::Result<(Duration, Duration)> {
            let own = operator.as_ref().map(|o| o.process.usage()).transpose()?;
            let mut total = own.map_or(Duration::ZERO, |u| u.cpu);
            for p in processes {
                total += p.usage()?.cpu;
            }
            Ok((total, own.map_or(Duration::ZERO, |u| u.cpu)))
        };
        let mut watch = Watch::tables(&self.client, &ns);
        let requests_before = apiserver::requests(&self.client).await?;
        let (cpu_before, operator_before) = cpu(&operator, &processes)?;
        let api_server_before = Usage::of(self.api_server)?.cpu;
        let profile = self.api_profile(&ns);
        let start = Instant::now();
        let own_requests = objects::create(&self.client, &ns, 0..n).await?;
        // The n new ones, and the one converged before.
        let last = watch
            .until(n + 1, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        tokio::time::sleep(SETTLE).await;
        let (requests, breakdown) = apiserver::requests(&self.client)
            .await?
            .since(&requests_before);
        std::fs::write(self.work.join(format!("requests-{ns}.txt")), breakdown)?;
        if let Some(profile) = profile {
            profile.await??;
        }
        let (cpu_after, operator_after) = cpu(&operator, &processes)?;
        let api_server_after = Usage::of(self.api_server)?.cpu;
        self.keep_sample(&ns, &ns).await?;
        if let Some(operator) = operator {
            operator.stop(&self.work).await?;
        }
        for process in processes {
            process.stop().await?;
        }
        Ok(Converged {
            wall: last - start,
            requests: requests.saturating_sub(own_requests),
            cpu: cpu_after - cpu_before,
            operator_cpu: operator_after - operator_before,
            api_server_cpu: api_server_after - api_server_before,
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

    /// P3: a plugin registering while `n` tables wait for it, its SIGKILL,
    /// and its restart.
    async fn reaction(self, n: usize) -> anyhow::Result<(Duration, Vec<Row>)> {
        let (ns, data) = self.place("p3").await?;
        let sockets = tempfile::tempdir()?;
        progress(&format!("P3: {n} tables waiting for the plugin"));
        let operator = self.setup.operator(&ns, sockets.path())?;
        let mut watch = Watch::tables(&self.client, &ns);
        objects::create(&self.client, &ns, 0..n).await?;
        watch
            .until(
                n,
                objects::is_seen,
                "seen by the operator",
                converge_timeout(n),
            )
            .await?;
        tokio::time::sleep(SETTLE).await;
        self.keep_sample(&ns, &format!("{ns}-waiting")).await?;

        progress("P3: the plugin starts");
        let requests_before = apiserver::requests(&self.client).await?;
        self.keep_api_metrics(&ns, "start").await?;
        let (api_before, operator_before) = (
            Usage::of(self.api_server)?.cpu,
            operator.process.usage()?.cpu,
        );
        let profile = self.api_profile(&ns);
        let start = Instant::now();
        let plugin = self.setup.plugin(&operator, &data, "p3-first")?;
        let registered = until_listed(&operator, true).await?;
        let last = watch
            .until(n, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        let waiting = last - start;
        let requests = self.requests_since(&requests_before, &ns, "ready").await?;
        if let Some(profile) = profile {
            profile.await??;
        }
        progress(&format!(
            "P3: registered after {:?}, all Ready after {waiting:?} ({}), {requests} API requests; \
             CPU: the API server {:?}, the operator {:?}, the plugin {:?}",
            registered - start,
            watch.pace(start),
            Usage::of(self.api_server)?.cpu - api_before,
            operator.process.usage()?.cpu - operator_before,
            plugin.usage()?.cpu,
        ));
        tokio::time::sleep(SETTLE).await;

        let reconciles = [("plugin", PLUGIN), ("call", "Reconcile")];
        self.keep_sample(&ns, &ns).await?;
        let calls_before = operator
            .metric("kplug_plugin_calls_total", &reconciles)
            .await?;
        progress("P3: SIGKILL to the plugin");
        let killed = Instant::now();
        plugin.kill().await?;
        let removed = until_listed(&operator, false).await? - killed;
        progress(&format!(
            "P3: removed after {removed:?}; the plugin starts again"
        ));
        let _again = self.setup.plugin(&operator, &data, "p3-again")?;
        until_listed(&operator, true).await?;
        tokio::time::sleep(SETTLE * 2).await;
        let calls = operator
            .metric("kplug_plugin_calls_total", &reconciles)
            .await?
            - calls_before;
        operator.stop(&self.work).await?;
        self.stop().await?;
        let row = |case: String, measure, kplug, baseline, goal| Row {
            part: "P3",
            case,
            measure,
            kplug,
            baseline,
            goal,
        };
        Ok((
            waiting,
            vec![
                row(
                    "plugin SIGKILLed → removed".into(),
                    "time",
                    Figure::Time(removed),
                    None,
                    Goal::Under(Figure::Time(Duration::from_millis(100))),
                ),
                row(
                    format!("plugin restarted, {n} tables unchanged"),
                    "Reconcile calls",
                    Figure::Count(calls as u64),
                    None,
                    Goal::Zero,
                ),
            ],
        ))
    }

    /// What P3's first figure costs without kplug: the in-process baseline
    /// started over `n` tables that wait for it.
    async fn waiting_baseline(self, n: usize) -> anyhow::Result<Duration> {
        let (ns, data) = self.place("p3-baseline").await?;
        progress(&format!("P3: the baseline started over {n} new tables"));
        let mut watch = Watch::tables(&self.client, &ns);
        objects::create(&self.client, &ns, 0..n).await?;
        let requests_before = apiserver::requests(&self.client).await?;
        self.keep_api_metrics(&ns, "start").await?;
        let api_before = Usage::of(self.api_server)?.cpu;
        let profile = self.api_profile(&ns);
        let start = Instant::now();
        let baseline = self.setup.baseline(&ns, &data)?;
        let last = watch
            .until(n, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        let requests = self.requests_since(&requests_before, &ns, "ready").await?;
        if let Some(profile) = profile {
            profile.await??;
        }
        progress(&format!(
            "P3: the baseline: all Ready after {:?} ({}), {requests} API requests; \
             CPU: the API server {:?}, the baseline {:?}",
            last - start,
            watch.pace(start),
            Usage::of(self.api_server)?.cpu - api_before,
            baseline.usage()?.cpu,
        ));
        self.keep_sample(&ns, &ns).await?;
        baseline.stop().await?;
        self.stop().await?;
        Ok(last - start)
    }

    /// P4: the operator over `n` tables and `n` extensions, against a bare
    /// reflector of them.
    async fn footprint(self, n: usize) -> anyhow::Result<Vec<Row>> {
        let (ns, data) = self.place("p4").await?;
        let sockets = tempfile::tempdir()?;
        progress(&format!("P4: {n} tables and {n} extensions"));
        objects::create(&self.client, &ns, 0..n).await?;
        let mut watch = Watch::tables(&self.client, &ns);
        let (operator, plugin) = self.kplug(&ns, &data, sockets.path()).await?;
        watch
            .until(n, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        operator.stop(&self.work).await?;

        progress("P4: the bare reflector");
        let requests_before = apiserver::requests(&self.client).await?;
        let synced = self.work.join("reflector.synced");
        let reflector = self.setup.reflector(&ns, 2 * n, &synced)?;
        let deadline = Instant::now() + converge_timeout(n);
        while !synced.exists() {
            if Instant::now() > deadline {
                bail!("the reflector did not hold {} objects in time", 2 * n);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(SETTLE).await;
        let bare = reflector.usage()?;
        let bare_requests = self
            .requests_since(&requests_before, &ns, "reflector")
            .await?;
        tokio::time::sleep(AT_REST).await;
        let bare_at_rest = reflector.usage()?.cpu - bare.cpu;
        reflector.stop().await?;

        progress("P4: the operator, restarted over them");
        let requests_before = apiserver::requests(&self.client).await?;
        let operator = self.setup.operator(&ns, sockets.path())?;
        until_listed(&operator, true).await?;
        let caught_up = until_quiet(&operator).await?;
        progress(&format!("P4: the operator caught up in {caught_up:?}"));
        let kplug = operator.process.usage()?;
        let kplug_requests = self
            .requests_since(&requests_before, &ns, "restart")
            .await?;
        tokio::time::sleep(AT_REST).await;
        let kplug_at_rest = operator.process.usage()?.cpu - kplug.cpu;
        operator.stop(&self.work).await?;
        plugin.stop().await?;
        self.stop().await?;
        let case = format!("{n} tables + {n} extensions");
        let row = |measure, kplug: Figure, bare: Figure, goal| Row {
            part: "P4",
            case: case.clone(),
            measure,
            kplug,
            baseline: Some(bare),
            goal,
        };
        Ok(vec![
            row(
                "RSS",
                Figure::Bytes(kplug.rss),
                Figure::Bytes(bare.rss),
                Goal::Ratio(1.5),
            ),
            row(
                "CPU at rest, 10 s",
                Figure::Time(kplug_at_rest),
                Figure::Time(bare_at_rest),
                Goal::Ratio(1.5),
            ),
            row(
                "CPU from start until caught up",
                Figure::Time(kplug.cpu),
                Figure::Time(bare.cpu),
                Goal::None,
            ),
            row(
                "API requests from start until caught up",
                Figure::Count(kplug_requests),
                Figure::Count(bare_requests),
                Goal::Ratio(1.1),
            ),
        ])
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

/// P3 `rounds` times, alternating which of kplug and the in-process
/// baseline goes first: each on a fresh API server, and the machine's
/// noise from one run to the next was as large as the gap measured. The
/// time is the median of the rounds; the SIGKILL and restart rows are the
/// last round's.
async fn waiting_rounds(work: &Path, n: usize, rounds: usize) -> anyhow::Result<Vec<Row>> {
    let (mut kplug, mut in_process, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 1 {
            in_process.push(Bench::start(work).await?.waiting_baseline(n).await?);
        }
        let (waiting, rows) = Bench::start(work).await?.reaction(n).await?;
        kplug.push(waiting);
        rest = rows;
        if round % 2 == 0 {
            in_process.push(Bench::start(work).await?.waiting_baseline(n).await?);
        }
        progress(&format!(
            "P3 round {}: kplug {waiting:?}, the in-process controller {:?}",
            round + 1,
            in_process.last().copied().unwrap_or_default()
        ));
    }
    // The median: one run in a few is far off either way (a baseline
    // round took 9.4 s against 5.0–6.4 s for the others), and a mean
    // would follow it.
    let median = |all: &mut Vec<Duration>| {
        all.sort_unstable();
        let mid = all.len() / 2;
        if all.len().is_multiple_of(2) {
            (all[mid - 1] + all[mid]) / 2
        } else {
            all[mid]
        }
    };
    let mut rows = vec![Row {
        part: "P3",
        case: format!(
            "plugin started → {n} waiting tables Ready (baseline: the in-process controller started over {n} new tables)"
        ),
        measure: "time",
        kplug: Figure::Time(median(&mut kplug)),
        baseline: Some(Figure::Time(median(&mut in_process))),
        goal: Goal::Ratio(1.15),
    }];
    rows.extend(rest);
    Ok(rows)
}

fn mean(all: &[Converged]) -> Converged {
    let n = u32::try_from(all.len().max(1)).unwrap_or(1);
    Converged {
        wall: all.iter().map(|c| c.wall).sum::<Duration>() / n,
        requests: all.iter().map(|c| c.requests).sum::<u64>() / u64::from(n),
        cpu: all.iter().map(|c| c.cpu).sum::<Duration>() / n,
        operator_cpu: all.iter().map(|c| c.operator_cpu).sum::<Duration>() / n,
        api_server_cpu: all.iter().map(|c| c.api_server_cpu).sum::<Duration>() / n,
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

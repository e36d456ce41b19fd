//! `Reconcile` round trip through each SDK (Rust, Go, TypeScript, Python),
//! next to the same service in that language's bare gRPC library (tonic,
//! grpc-go, @grpc/grpc-js, grpcio), measured in one run the same way.
//!
//! Every server is a process of its own, serving on a Unix socket: the SDK
//! ones through their SDK's normal entry point (`serve`, `Main`, `run`) on
//! `$KPLUG_SOCKET_DIR/plugins/echo/plugin.sock`, the bare ones on
//! `$KPLUG_BENCH_SOCKET`. The SDK plugins decode the object and answer
//! `{"echo": spec}`; the bare services copy the object's bytes into the
//! status. The driver measures a socket, whatever serves it: from a tonic
//! client, the latency of sequential calls (p50, p99) and the throughput
//! with a fixed number of calls in flight, for each payload size.
//!
//! An SDK and its baseline run side by side and are measured in alternating
//! rounds, so that machine noise (other builds on the box) hits both; the
//! ratio kplug / baseline is the number to read, more than the absolute
//! times. The table is printed and written to `target/bench/polyglot.md`.
//!
//! Run: `make bench` (it builds the Go, TypeScript and Python servers
//! first), or `cargo bench -p kplug-sidecar --bench polyglot` once they are
//! built. Settings, from the environment:
//!
//! - `KPLUG_BENCH_SDKS`: which pairs, default `rust,go,typescript,python`
//! - `KPLUG_BENCH_SIZES`: payload sizes in bytes, default `64,8192`
//! - `KPLUG_BENCH_CALLS`: sequential calls per server and size, default 5000
//! - `KPLUG_BENCH_INFLIGHT_CALLS`: calls of the throughput measurement per
//!   server and size, default 20000
//! - `KPLUG_BENCH_INFLIGHT`: calls in flight for the throughput, default 16
//! - `KPLUG_BENCH_ROUNDS`: alternating rounds the calls are split into,
//!   default 10
//! - `KPLUG_BENCH_OUT`: where the table goes, default
//!   `<target dir>/bench/polyglot.md`
//!
//! `cargo test --all-targets` runs bench targets without `--bench`; this one
//! then returns at once, since its servers are built by `make bench`.

mod echo;
mod servers;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::plugin_server::PluginServer;
use kplug_proto::v1::{Outcome, ReconcileRequest};
use serde_json::{Value, json};
use tonic::transport::Channel;

use echo::{Bare, Echo, echo_info, request};
use servers::{Pair, Running, pair};

/// Set (to `rust-sdk` or `rust-bare`) when this binary is started as the
/// Rust pair's server: the Rust servers are processes like the others.
const SERVE_ENV: &str = "KPLUG_BENCH_SERVE";
/// The Unix socket a bare server serves on.
const SOCKET_ENV: &str = "KPLUG_BENCH_SOCKET";
/// How long a server may take to answer its first Probe (Python and Node
/// start in well under a second, but the box may be busy).
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn main() {
    match std::env::var(SERVE_ENV).as_deref() {
        Ok("rust-sdk") => return serve_rust_sdk(),
        Ok("rust-bare") => return serve_rust_bare(),
        Ok(other) => panic!("{SERVE_ENV}={other}: expected rust-sdk or rust-bare"),
        Err(_) => {}
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("polyglot: not benchmarking without --bench (run `make bench`)");
        return;
    }
    let config = Config::from_env();
    // A current-thread client: it takes one core at most, leaving the other
    // to the server under test (the benchmark box has two).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for pair in &config.pairs {
        eprintln!("polyglot: {} vs {}...", pair.sdk_name, pair.baseline_name);
        rows.extend(rt.block_on(measure_pair(&config, pair)));
    }
    let table = table(&config, &rows);
    println!("\n{table}");
    if let Some(dir) = config.out.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&config.out, &table)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", config.out.display()));
    println!("written to {}", config.out.display());
}

// --- the Rust pair's servers ---------------------------------------------

/// The Rust SDK's echo plugin, served as plugins serve: `kplug_sidecar::serve`
/// with its settings from the environment, on the default runtime.
fn serve_rust_sdk() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(kplug_sidecar::serve(echo_info(), Echo))
        .unwrap();
}

/// The same service in bare tonic, on the same runtime, on `$KPLUG_BENCH_SOCKET`.
fn serve_rust_bare() {
    let socket = std::env::var(SOCKET_ENV).unwrap_or_else(|_| panic!("{SOCKET_ENV} is not set"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        tonic::transport::Server::builder()
            .add_service(PluginServer::new(Bare))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
            .await
            .unwrap();
    });
}

// --- configuration ---------------------------------------------------------

struct Config {
    pairs: Vec<Pair>,
    sizes: Vec<usize>,
    calls: usize,
    inflight_calls: usize,
    inflight: usize,
    rounds: usize,
    out: PathBuf,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a valid number")),
        Err(_) => default,
    }
}

impl Config {
    fn from_env() -> Config {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        // Where the Makefile builds (its TARGET_DIR): $CARGO_TARGET_DIR, or
        // target/ at the root of the repository.
        let target = match std::env::var_os("CARGO_TARGET_DIR") {
            Some(dir) => root.join(dir),
            None => root.join("target"),
        };
        let sizes = std::env::var("KPLUG_BENCH_SIZES")
            .unwrap_or_else(|_| "64,8192".into())
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("KPLUG_BENCH_SIZES: {s:?} is not a size"))
            })
            .collect();
        let pairs = std::env::var("KPLUG_BENCH_SDKS")
            .unwrap_or_else(|_| "rust,go,typescript,python".into())
            .split(',')
            .map(|name| pair(name.trim(), root, &target))
            .collect();
        let out = std::env::var_os("KPLUG_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| target.join("bench/polyglot.md"));
        let config = Config {
            pairs,
            sizes,
            calls: env_or("KPLUG_BENCH_CALLS", 5000),
            inflight_calls: env_or("KPLUG_BENCH_INFLIGHT_CALLS", 20000),
            inflight: env_or("KPLUG_BENCH_INFLIGHT", 16),
            rounds: env_or("KPLUG_BENCH_ROUNDS", 10),
            out,
        };
        assert!(
            config.rounds > 0 && config.inflight > 0 && config.calls >= config.rounds,
            "KPLUG_BENCH_ROUNDS and KPLUG_BENCH_INFLIGHT must be positive, KPLUG_BENCH_CALLS at least the rounds"
        );
        config
    }
}

// --- measuring ---------------------------------------------------------------

async fn call(client: &mut PluginClient<Channel>, req: &ReconcileRequest) -> Vec<u8> {
    let response = client.reconcile(req.clone()).await.unwrap().into_inner();
    assert_eq!(
        response.outcome,
        Outcome::Ok as i32,
        "Reconcile failed: {}",
        response.message
    );
    response.status
}

/// One server's numbers for one payload size, summed over the rounds.
#[derive(Default)]
struct Samples {
    latencies: Vec<Duration>,
    inflight_calls: usize,
    inflight_time: Duration,
}

impl Samples {
    fn percentile(&self, p: usize) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
    }

    fn throughput(&self) -> f64 {
        self.inflight_calls as f64 / self.inflight_time.as_secs_f64()
    }
}

async fn sequential(
    client: &mut PluginClient<Channel>,
    req: &ReconcileRequest,
    calls: usize,
    samples: &mut Samples,
) {
    for _ in 0..calls {
        let start = Instant::now();
        call(client, req).await;
        samples.latencies.push(start.elapsed());
    }
}

/// `calls` calls, `inflight` at a time on the one connection (as the
/// operator calls a plugin).
async fn concurrent(
    client: &PluginClient<Channel>,
    req: &ReconcileRequest,
    calls: usize,
    inflight: usize,
    samples: &mut Samples,
) {
    let left = Arc::new(AtomicUsize::new(calls));
    let start = Instant::now();
    let workers: Vec<_> = (0..inflight)
        .map(|_| {
            let (mut client, req, left) = (client.clone(), req.clone(), left.clone());
            tokio::spawn(async move {
                // Take a call while there is one left.
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
                {
                    call(&mut client, &req).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    samples.inflight_time += start.elapsed();
    samples.inflight_calls += calls;
}

/// The first answer says the server echoes what it should: the SDK plugins
/// `{"echo": spec}`, the bare services the object's bytes.
async fn check_echo(client: &mut PluginClient<Channel>, req: &ReconcileRequest, sdk: bool) {
    let status = call(client, req).await;
    if sdk {
        let object: Value = serde_json::from_slice(&req.object).unwrap();
        let status: Value = serde_json::from_slice(&status).expect("the status is JSON");
        assert_eq!(status, json!({ "echo": object["spec"] }));
    } else {
        assert_eq!(status, req.object);
    }
}

/// One row of the table.
struct Row {
    case: String,
    size: usize,
    kplug: Samples,
    baseline: Samples,
}

async fn measure_pair(config: &Config, pair: &Pair) -> Vec<Row> {
    let mut sdk = Running::start(&pair.sdk);
    let mut bare = Running::start(&pair.bare);
    let mut clients = [bare.client().await, sdk.client().await];
    let mut rows = Vec::new();
    for &size in &config.sizes {
        let req = request(size);
        check_echo(&mut clients[0], &req, false).await;
        check_echo(&mut clients[1], &req, true).await;
        // Warm up (connections, allocators, Node's JIT), not measured.
        let mut scratch = Samples::default();
        for client in &mut clients {
            sequential(client, &req, (config.calls / 10).max(10), &mut scratch).await;
            let calls = (config.inflight_calls / 10).max(config.inflight);
            concurrent(client, &req, calls, config.inflight, &mut scratch).await;
        }
        let mut samples = [Samples::default(), Samples::default()];
        let seq_calls = config.calls / config.rounds;
        let inflight_calls = (config.inflight_calls / config.rounds).max(config.inflight);
        for round in 0..config.rounds {
            // Alternate who goes first, so neither always follows the other.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                sequential(&mut clients[i], &req, seq_calls, &mut samples[i]).await;
            }
            for i in order {
                let (client, samples) = (&clients[i], &mut samples[i]);
                concurrent(client, &req, inflight_calls, config.inflight, samples).await;
            }
        }
        let [baseline, kplug] = samples;
        rows.push(Row {
            case: format!("{} / {}", pair.sdk_name, pair.baseline_name),
            size,
            kplug,
            baseline,
        });
    }
    rows
}

// --- the table ---------------------------------------------------------------

fn size_label(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn table(config: &Config, rows: &[Row]) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    writeln!(
        out,
        "# Reconcile round trip: each SDK vs its bare gRPC library\n"
    )
    .unwrap();
    writeln!(
        out,
        "Unix socket, tonic client, each server a process of its own; {} sequential calls \
         (latency) and {} calls with {} in flight (throughput) per server and payload, in {} \
         alternating rounds; {cores} cores. ratio = kplug / baseline: above 1 the SDK is slower \
         in latency, below 1 it is slower in throughput.\n",
        config.calls, config.inflight_calls, config.inflight, config.rounds
    )
    .unwrap();
    writeln!(
        out,
        "| case | payload | metric | kplug | baseline | ratio |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---:|---:|---:|").unwrap();
    for row in rows {
        let size = size_label(row.size);
        for (metric, p) in [("p50", 50), ("p99", 99)] {
            let (k, b) = (row.kplug.percentile(p), row.baseline.percentile(p));
            writeln!(
                out,
                "| {} | {size} | {metric} | {} | {} | {:.2} |",
                row.case,
                micros(k),
                micros(b),
                k.as_secs_f64() / b.as_secs_f64()
            )
            .unwrap();
        }
        let (k, b) = (row.kplug.throughput(), row.baseline.throughput());
        writeln!(
            out,
            "| {} | {size} | calls/s, {} in flight | {k:.0} | {b:.0} | {:.2} |",
            row.case,
            config.inflight,
            k / b
        )
        .unwrap();
    }
    out
}

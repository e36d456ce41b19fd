//! `Reconcile` round trip through each SDK (Rust, Go, TypeScript, Python,
//! Java), next to two servers of the same service in that language's bare
//! gRPC library (tonic, grpc-go, @grpc/grpc-js, grpcio, grpc-java), all
//! measured in one run the same way.
//!
//! Three servers per language, each a process of its own serving on a Unix
//! socket:
//!
//! - **kplug**: the SDK's echo plugin, through the SDK's normal entry point
//!   (`serve`, `Main`, `run`, `Kplug.main`) on
//!   `$KPLUG_SOCKET_DIR/plugins/echo/plugin.sock`. It decodes the object and
//!   answers the status `{"echo": spec}`.
//! - **bare**: the bare gRPC server on `$KPLUG_BENCH_SOCKET`, copying the
//!   object's bytes into the status: gRPC alone, the floor.
//! - **bare+JSON**: the bare gRPC server decoding the object and encoding
//!   `{"echo": spec}` with the language's standard JSON library
//!   (`serde_json::Value`, `encoding/json` into `map[string]any`,
//!   `JSON.parse`/`JSON.stringify`, Python's `json`, Jackson's
//!   `ObjectMapper`): the plugin an author would write by hand, without the
//!   SDK.
//!
//! The driver measures a socket, whatever serves it: from a tonic client,
//! the latency of sequential calls (p50, p99) and the throughput with a
//! fixed number of calls in flight, for each payload size. A language's
//! three servers run side by side and are measured in the same rounds, in
//! an order that rotates, so that machine noise (other builds on the box)
//! hits all three; the ratios kplug / bare and kplug / bare+JSON are the
//! numbers to read, more than the absolute times. The table is printed and
//! written to `target/bench/polyglot.md`.
//!
//! Run: `make bench-polyglot` (it builds the Go, TypeScript, Python and
//! Java servers first with `make bench-servers`), or `cargo bench -p
//! kplug-sidecar --bench polyglot` once they are built. Settings, from the
//! environment:
//!
//! - `KPLUG_BENCH_SDKS`: which languages, default
//!   `rust,go,typescript,python,java`
//! - `KPLUG_BENCH_SIZES`: payload sizes in bytes, default `64,8192`
//! - `KPLUG_BENCH_CALLS`: sequential calls per server and size, default 5000
//! - `KPLUG_BENCH_INFLIGHT_CALLS`: calls of the throughput measurement per
//!   server and size, default 20000
//! - `KPLUG_BENCH_INFLIGHT`: calls in flight for the throughput, default 16
//! - `KPLUG_BENCH_ROUNDS`: rounds the calls are split into, default 10
//! - `KPLUG_BENCH_OUT`: where the table goes, default
//!   `<target dir>/bench/polyglot.md`
//!
//! `cargo test --all-targets` runs bench targets without `--bench`; this one
//! then returns at once, since its servers are built by `make bench-servers`.

mod echo;
mod measure;
mod servers;
mod table;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kplug_proto::v1::plugin_server::PluginServer;

use echo::{Bare, Echo, echo_info};
use servers::{Language, language};

/// Set (to `rust-sdk`, `rust-bare` or `rust-bare-json`) when this binary is
/// started as one of the Rust servers: they are processes like the others.
const SERVE_ENV: &str = "KPLUG_BENCH_SERVE";
/// The Unix socket a bare server serves on.
const SOCKET_ENV: &str = "KPLUG_BENCH_SOCKET";
/// How long a server may take to answer its first Probe (Python, Node and
/// the JVM start in a second or two, but the box may be busy).
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn main() {
    match std::env::var(SERVE_ENV).as_deref() {
        Ok("rust-sdk") => return serve_rust_sdk(),
        Ok("rust-bare") => return serve_rust_bare(Bare::Bytes),
        Ok("rust-bare-json") => return serve_rust_bare(Bare::Json),
        Ok(other) => {
            panic!("{SERVE_ENV}={other}: expected rust-sdk, rust-bare or rust-bare-json")
        }
        Err(_) => {}
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("polyglot: not benchmarking without --bench (run `make bench-polyglot`)");
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
    for language in &config.languages {
        eprintln!("polyglot: {}...", language.case);
        rows.extend(rt.block_on(measure::language(&config, language)));
    }
    let table = table::markdown(&config, &rows);
    println!("\n{table}");
    if let Some(dir) = config.out.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&config.out, &table)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", config.out.display()));
    println!("written to {}", config.out.display());
}

// --- the Rust servers ----------------------------------------------------

/// The Rust SDK's echo plugin, served as plugins serve: `kplug_sidecar::serve`
/// with its settings from the environment, on the default runtime.
fn serve_rust_sdk() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(kplug_sidecar::serve(echo_info(), Echo))
        .unwrap();
}

/// The same service in bare tonic, with or without `serde_json`, on the
/// same runtime, on `$KPLUG_BENCH_SOCKET`.
fn serve_rust_bare(bare: Bare) {
    let socket = std::env::var(SOCKET_ENV).unwrap_or_else(|_| panic!("{SOCKET_ENV} is not set"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        tonic::transport::Server::builder()
            .add_service(PluginServer::new(bare))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
            .await
            .unwrap();
    });
}

// --- configuration ---------------------------------------------------------

struct Config {
    languages: Vec<Language>,
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
        let languages = std::env::var("KPLUG_BENCH_SDKS")
            .unwrap_or_else(|_| "rust,go,typescript,python,java".into())
            .split(',')
            .map(|name| language(name.trim(), root, &target))
            .collect();
        let out = std::env::var_os("KPLUG_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| target.join("bench/polyglot.md"));
        let config = Config {
            languages,
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

//! `kplug-bench`: the end-to-end part of `make bench` (P2–P4 of the
//! performance issue), each figure next to what an operator author would
//! pick instead, measured on the same API server in the same run:
//!
//! - **P2, converging many objects**: `DatabaseTable`s (each with a
//!   `DatabaseTableSqliteExtension`) created concurrently and converged by
//!   the SQLite plugin through `kplug-operator`, against an in-process
//!   kube-rs controller ([`baseline`]) calling the same SQLite code (the
//!   example plugin's library) with the same writes. Wall time, API
//!   requests (from the API server's `apiserver_request_total`) and CPU
//!   seconds (from `/proc`).
//! - **P3, reaction**: a plugin registers while objects wait for it; a
//!   plugin is SIGKILLed; a plugin restarts with nothing changed.
//! - **P4, footprint**: the operator's RSS and CPU with many bases and
//!   extensions, against a bare kube-rs reflector ([`reflector`]) of the
//!   same objects.
//! - **P5, children**: the same with three ConfigMap children per base
//!   ([`children_plugin`]), and the requests of a restart over them.
//!
//! `kplug-bench run` starts its own control plane (`make testenv`), the
//! operator, the plugin and the baselines as processes of their own, prints
//! one markdown table and writes it under `target/bench/`. The `baseline`
//! and `reflector` subcommands are those baselines; `run` starts them.

mod apiserver;
mod baseline;
mod children_plugin;
mod objects;
mod processes;
mod reflector;
mod report;
mod run;

use clap::{Parser, Subcommand};

/// End-to-end benchmarks of kplug against an in-process kube-rs controller
/// and a bare reflector, on a real API server (`make bench` runs them).
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs P2–P4 and prints (and saves) the table.
    Run(run::Args),
    /// The P2 baseline: an in-process kube-rs controller for
    /// `DatabaseTable`s, calling the SQLite plugin's code directly.
    Baseline(baseline::Args),
    /// The P4 and P5 baseline: a bare kube-rs reflector of the tables and
    /// their SQLite extensions (and, for P5, their ConfigMaps); prints
    /// `synced <objects>` once the lists are in.
    Reflector(reflector::Args),
    /// P5's plugin: the SQLite plugin desiring three ConfigMaps per table.
    ChildrenPlugin(children_plugin::Args),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // The measured controllers run on the same multi-threaded runtime as
    // kplug-operator, so that the runtime is not what differs.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Run(args) => runtime.block_on(run::run(args)),
        Command::Baseline(args) => runtime.block_on(baseline::run(args)),
        Command::Reflector(args) => runtime.block_on(reflector::run(args)),
        Command::ChildrenPlugin(args) => runtime.block_on(children_plugin::run(args)),
    }
}

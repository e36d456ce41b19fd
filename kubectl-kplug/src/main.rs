//! `kubectl-kplug`: `kubectl kplug plugins | why | replay`, for operators
//! built on kplug. See `--help`.

/// `print!` to stdout that ends the program quietly when stdout is a
/// closed pipe (`kubectl kplug why ... | head -5`), as kubectl does,
/// instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*), false) };
}

/// [`out!`] with a newline, as `println!`.
macro_rules! outln {
    () => { $crate::output::write(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*), true) };
}

mod children;
mod operator;
mod output;
mod plugins;
mod replay;
mod target;
mod why;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// What a CLI command can fail with: a message that says what to do.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// Inspect kplug: the plugins registered with the operator, why an object
/// is (not) progressing, and a plugin's answer to an object without the
/// operator.
///
/// Install it on your PATH as `kubectl-kplug` and kubectl runs it as
/// `kubectl kplug`. It uses the kubeconfig the way kubectl does
/// ($KUBECONFIG, ~/.kube/config; the context's namespace).
///
/// Examples:
///   kubectl kplug plugins
///   kubectl kplug why databasetable/users -n shop
///   kubectl kplug replay databasetable/users --plugin-socket /tmp/kplug/plugins/sqlite/plugin.sock
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-kplug",
    bin_name = "kubectl kplug",
    version,
    verbatim_doc_comment
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The plugins registered with each operator replica: version, what
    /// they offer, ready, last heartbeat
    Plugins(plugins::Args),
    /// Why an object is or is not progressing: its implementation and
    /// plugin, conditions, children, recent Events, the plugin's state, and
    /// what to do
    Why(why::Args),
    /// Send a plugin running locally the request the operator would send for
    /// an object, and print its answer: a development loop with no operator
    Replay(replay::Args),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = async {
        let client = kube::Client::try_default().await.map_err(|e| {
            format!("cannot reach the Kubernetes API: {e}; set KUBECONFIG or a kubectl context")
        })?;
        match cli.command {
            Command::Plugins(args) => plugins::run(&client, &args).await,
            Command::Why(args) => why::run(&client, &args).await,
            Command::Replay(args) => replay::run(&client, &args).await,
        }
    }
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kubectl kplug: {error}");
            ExitCode::FAILURE
        }
    }
}

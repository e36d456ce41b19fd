//! The `kplug-exec` command.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kplug_exec::manifest::Manifest;

/// Serves a kplug plugin whose calls run executables: a shell script, a
/// Python file, any program. Each call (reconcile, finalize, validate,
/// default, hook, mutate) runs the manifest's command with the request as JSON on
/// stdin and KPLUG_CALL, KPLUG_IMPLEMENTATION, KPLUG_NAMESPACE and
/// KPLUG_NAME set (and KPLUG_HOOK, KPLUG_PHASE for a hook); the command
/// answers with JSON on stdout, or with its exit code alone (0 OK, 75
/// retry, anything else failed, with the end of stderr as the message;
/// for validate, 0 allows, 1 to 125 refuse, 75 and 126+ could not decide).
///
/// Like every plugin it serves on $KPLUG_SOCKET_DIR (default
/// /var/run/kplug) and registers with the operator by heartbeat.
#[derive(Debug, Parser)]
#[command(name = "kplug-exec", version)]
struct Args {
    /// The plugin's manifest (YAML): name, version, offers (with their
    /// child kinds), the reconcile command and the optional finalize,
    /// validate, default and mutate commands and hooks, each with its
    /// timeout and concurrency. Relative program paths
    /// are relative to its directory.
    #[arg(
        long,
        env = "KPLUG_EXEC_MANIFEST",
        value_name = "FILE",
        default_value = "/etc/kplug-exec/plugin.yaml"
    )]
    manifest: PathBuf,

    /// Check the manifest, print what it declares, and exit.
    #[arg(long)]
    check: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let manifest = match Manifest::load(&args.manifest) {
        Ok(manifest) => manifest,
        Err(e) => {
            eprintln!("kplug-exec: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!(
            "{}: plugin {} {}, {} offer(s), calls: {}",
            args.manifest.display(),
            manifest.name,
            manifest.version,
            manifest.offers.len(),
            manifest.summary()
        );
        for line in manifest.children_summary() {
            println!("  {line}");
        }
        return ExitCode::SUCCESS;
    }
    match kplug_exec::serve(&manifest, &args.manifest).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kplug-exec: {e}");
            ExitCode::FAILURE
        }
    }
}

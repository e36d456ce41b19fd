//! `sqlite-plugin`: serves the SQLite implementation of `DatabaseTable`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// kplug plugin keeping DatabaseTable resources as tables in SQLite files
/// named <data-dir>/<spec.serverName>.db. Registers with the operator on
/// $KPLUG_SOCKET_DIR/registry.sock.
#[derive(Debug, Parser)]
#[command(name = "sqlite-plugin", version)]
struct Args {
    /// Directory holding the SQLite files (created if missing)
    #[arg(
        long,
        env = "KPLUG_SQLITE_DATA_DIR",
        default_value = "/var/lib/kplug-sqlite"
    )]
    data_dir: PathBuf,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The message, not its Debug form: it says what to do.
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&args.data_dir).map_err(|e| {
        format!(
            "cannot create the data dir {}: {e}",
            args.data_dir.display()
        )
    })?;
    kplug_sidecar::serve(
        sqlite_plugin::info(),
        sqlite_plugin::SqlitePlugin::new(args.data_dir),
    )
    .await?;
    Ok(())
}

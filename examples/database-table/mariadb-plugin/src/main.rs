//! `mariadb-plugin`: serves the MariaDB implementation of `DatabaseTable`.
//!
//! Configuration: `KPLUG_MARIADB_SERVERS_FILE` (a JSON file) or
//! `KPLUG_MARIADB_SERVERS` (JSON): `{"<serverName>": "mysql://user:pw@host:port/db"}`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The message, not its Debug form: it says what to do.
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        println!(
            "mariadb-plugin: kplug plugin for DatabaseTable on MariaDB.\n\n\
             Environment:\n  KPLUG_SOCKET_DIR            socket dir shared with the operator (default /var/run/kplug)\n  \
             KPLUG_MARIADB_SERVERS_FILE  JSON file: {{\"<serverName>\": \"mysql://user:pw@host:port/db\"}}\n  \
             KPLUG_MARIADB_SERVERS       the same JSON, inline\n  KPLUG_HEARTBEAT_INTERVAL    seconds between heartbeats (default 5)"
        );
        return Ok(());
    }
    let servers = mariadb_plugin::servers_from_env()?;
    kplug_sidecar::serve(
        mariadb_plugin::info(),
        mariadb_plugin::MariaDbPlugin::new(servers),
    )
    .await?;
    Ok(())
}

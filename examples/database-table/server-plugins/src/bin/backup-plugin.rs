//! `backup-plugin`: patches PostgreSQL Deployments with a backup sidecar
//! and a shared volume before the operator applies them (`Mutate`).

#[tokio::main]
async fn main() -> Result<(), kplug_sidecar::Error> {
    kplug_sidecar::serve(
        database_server_plugins::backup_info(),
        database_server_plugins::backup::Backup,
    )
    .await
}

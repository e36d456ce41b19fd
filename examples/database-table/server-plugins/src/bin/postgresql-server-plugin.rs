//! `postgresql-server-plugin`: serves the PostgreSQL implementation of
//! `DatabaseServer` as Kubernetes children the operator applies.

#[tokio::main]
async fn main() -> Result<(), kplug_sidecar::Error> {
    kplug_sidecar::serve(
        database_server_plugins::server_info(),
        database_server_plugins::server::PostgresServer,
    )
    .await
}

//! The `DatabaseServer` example of the database-table walkthrough: plugins
//! that manage Kubernetes objects without API credentials.
//!
//! - [`server`]: the PostgreSQL implementation of `DatabaseServer` (plugin
//!   `postgresql-server`). It answers with the objects it desires (a
//!   Deployment running PostgreSQL, a Service, a Secret with a generated
//!   password, a ConfigMap of settings) and the operator applies, owns,
//!   watches and prunes them; its status comes from the observed
//!   Deployment ([`status`]).
//! - [`backup`]: the `backup` plugin's `Mutate`. It patches every
//!   PostgreSQL Deployment before the operator applies it, adding a backup
//!   sidecar and a volume shared with the server, as a CNPG-I backup plugin
//!   does.

pub mod backup;
pub mod server;
pub mod status;

use kplug_sidecar::{Offer, PluginInfo};

/// The base kind's API group.
pub const GROUP: &str = "myorg.org";
/// The base kind.
pub const KIND: &str = "DatabaseServer";

/// What the `postgresql-server` plugin offers: PostgreSQL for
/// `DatabaseServer`, with the four kinds of children it desires.
pub fn server_info() -> PluginInfo {
    PluginInfo::new("postgresql-server", env!("CARGO_PKG_VERSION"))
        .description("PostgreSQL servers for DatabaseServer, as a Deployment, a Service, a Secret and a ConfigMap")
        .offer(
            Offer::new(GROUP, KIND, server::IMPLEMENTATION)
                .child("apps/v1", "Deployment")
                .child("v1", "Service")
                .child("v1", "ConfigMap")
                .child("v1", "Secret"),
        )
}

/// What the `backup` plugin is: a mutator of Deployments, offering no
/// implementation of its own.
pub fn backup_info() -> PluginInfo {
    PluginInfo::new("backup", env!("CARGO_PKG_VERSION"))
        .description(
            "adds a pg_dumpall sidecar and a shared backup volume to PostgreSQL Deployments",
        )
        .mutation("apps/v1", "Deployment")
}

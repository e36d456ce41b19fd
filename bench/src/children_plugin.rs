//! `kplug-bench children-plugin`: the SQLite plugin, desiring three
//! ConfigMaps for each table besides (P5). The children are what a real
//! plugin's would be: small, and the same on every call.

use std::path::PathBuf;

use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response};
use serde_json::json;
use sqlite_plugin::SqlitePlugin;

/// Children desired per table.
pub(crate) const PER_TABLE: usize = 3;

/// `kplug-bench children-plugin`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Directory holding the SQLite files.
    #[arg(long)]
    data_dir: PathBuf,
}

struct WithChildren(SqlitePlugin);

impl Plugin for WithChildren {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        let name = request.name().to_owned();
        let children = (0..PER_TABLE).map(|i| {
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{name}-{i}")},
                "data": {"table": name, "part": i.to_string()},
            })
        });
        let response = self.0.reconcile(request).await?;
        Ok(response.children(children))
    }
}

/// Serves until stopped.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)?;
    let info = PluginInfo::new("sqlite", "bench")
        .description("the SQLite plugin, with three ConfigMaps per table")
        .offer(
            Offer::new("myorg.org", "DatabaseTable", "SQLite")
                .extension("myorg.org", "DatabaseTableSqliteExtension")
                .child("v1", "ConfigMap"),
        );
    kplug_sidecar::serve(info, WithChildren(SqlitePlugin::new(args.data_dir))).await?;
    Ok(())
}

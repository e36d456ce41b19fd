//! The P4 baseline: the least any controller of these objects holds, a
//! kube-rs reflector (a watch and an in-memory store) of the tables and of
//! their SQLite extensions, as `DynamicObject`s like kplug-operator's.

use std::path::PathBuf;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};

use crate::objects::{extension_resource, table_resource};

/// `kplug-bench reflector`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The namespace whose tables and extensions it reflects.
    #[arg(long)]
    namespace: String,
    /// How many objects (tables and extensions) to wait for.
    #[arg(long)]
    objects: usize,
    /// Written (`synced <objects>`) once the stores hold `--objects`.
    #[arg(long)]
    synced_file: PathBuf,
    /// Also the ConfigMaps labelled `kplug.io/base-uid`: the tables'
    /// children (P5), as the operator's child watch lists them.
    #[arg(long)]
    children: bool,
}

/// Reflects until the process is stopped.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let mut stores = Vec::new();
    let mut watches = Vec::new();
    let mut kinds = vec![
        (table_resource(), watcher::Config::default()),
        (extension_resource(), watcher::Config::default()),
    ];
    if args.children {
        let config_maps = ApiResource::erase::<ConfigMap>(&());
        kinds.push((
            config_maps,
            watcher::Config::default().labels("kplug.io/base-uid"),
        ));
    }
    for (ar, config) in kinds {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &args.namespace, &ar);
        let writer = Writer::new(ar);
        stores.push(writer.as_reader());
        watches.push(
            watcher(api, config)
                .default_backoff()
                .reflect(writer)
                .boxed(),
        );
    }
    let mut events = futures::stream::select_all(watches);
    let mut synced = false;
    while let Some(event) = events.next().await {
        if let Err(error) = event {
            tracing::warn!(%error, "watch");
            continue;
        }
        let held: usize = stores.iter().map(|s| s.len()).sum();
        if !synced && held >= args.objects {
            synced = true;
            std::fs::write(&args.synced_file, format!("synced {held}\n"))?;
        }
    }
    Ok(())
}

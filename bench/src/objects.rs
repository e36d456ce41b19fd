//! The benchmark's objects: `DatabaseTable`s, each with a
//! `DatabaseTableSqliteExtension` of the same name, created concurrently,
//! and a watch that tells when they have all converged.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The walkthrough's CRDs.
pub(crate) const CRDS: &str = include_str!("../../examples/database-table/crds.yaml");
/// `kplug-operator --resource` for the tables.
pub(crate) const RESOURCE: &str = "myorg.org/v1alpha1/DatabaseTable";
/// Every extension kind of the walkthrough (the operator is started as the
/// demo starts it).
pub(crate) const EXTENSION_KINDS: [&str; 3] = [
    "myorg.org/DatabaseTableMariaDbExtension",
    "myorg.org/DatabaseTablePostgreSqlExtension",
    "myorg.org/DatabaseTableSqliteExtension",
];
/// The SQLite servers (database files) the tables are spread over, so that
/// SQLite's one writer per file is not what the benchmark measures.
const SERVERS: usize = 8;
/// Creations in flight at once.
const CREATING: usize = 32;

/// `DatabaseTable`.
pub(crate) fn table_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "myorg.org",
        "v1alpha1",
        "DatabaseTable",
    ))
}

/// `DatabaseTableSqliteExtension`.
pub(crate) fn extension_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "myorg.org",
        "v1alpha1",
        sqlite_plugin::EXTENSION,
    ))
}

fn table(name: &str, i: usize) -> Value {
    json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
        "metadata": {"name": name},
        "spec": {
            "serverName": format!("bench-{}", i % SERVERS),
            "preferredImplementation": "SQLite",
            "columns": [
                {"name": "id", "type": "uint64"},
                {"name": "name", "type": "string"},
                {"name": "created", "type": "timestamp"},
            ],
            "extensions": [
                {"apiVersion": "myorg.org/v1alpha1", "kind": sqlite_plugin::EXTENSION, "name": name},
            ],
        },
    })
}

fn extension(name: &str) -> Value {
    json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": sqlite_plugin::EXTENSION,
        "metadata": {"name": name},
        "spec": {"indexes": ["name"]},
    })
}

/// The name of table (and extension) `i`.
pub(crate) fn name(i: usize) -> String {
    format!("t-{i:05}")
}

/// Creates tables (and their extensions) `range` in `ns`, [`CREATING`] at
/// a time, each extension before its table. Returns the API requests made.
pub(crate) async fn create(
    client: &Client,
    ns: &str,
    range: std::ops::Range<usize>,
) -> anyhow::Result<u64> {
    let tables: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &table_resource());
    let extensions: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &extension_resource());
    let count = range.len() as u64;
    stream::iter(range)
        .map(|i| {
            let (tables, extensions) = (&tables, &extensions);
            async move {
                let name = name(i);
                let pp = PostParams::default();
                let ext: DynamicObject = serde_json::from_value(extension(&name))?;
                extensions
                    .create(&pp, &ext)
                    .await
                    .with_context(|| format!("creating extension {ns}/{name}"))?;
                let obj: DynamicObject = serde_json::from_value(table(&name, i))?;
                tables
                    .create(&pp, &obj)
                    .await
                    .with_context(|| format!("creating table {ns}/{name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CREATING)
        .try_collect::<()>()
        .await?;
    Ok(2 * count)
}

/// Whether `obj`'s `Ready` condition is True for its current generation.
pub(crate) fn is_ready(obj: &DynamicObject) -> bool {
    let generation = obj.metadata.generation;
    let status = obj.data.get("status");
    let observed = status
        .and_then(|s| s.get("observedGeneration"))
        .and_then(Value::as_i64);
    observed == generation
        && status
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

/// Whether the controller has written `obj`'s status at all (a table
/// waiting for its plugin has `Ready=False`).
pub(crate) fn is_seen(obj: &DynamicObject) -> bool {
    obj.data
        .get("status")
        .and_then(|s| s.get("observedGeneration"))
        .is_some()
}

/// A watch of the tables of a namespace, started before the work it waits
/// for, so that no change is missed.
pub(crate) struct Watch {
    events: futures::stream::BoxStream<'static, Result<DynamicObject, watcher::Error>>,
    ns: String,
    /// When the last [`Watch::until`] saw each table pass, in order.
    passed: Vec<Instant>,
}

impl Watch {
    /// Starts watching the tables of `ns`.
    pub(crate) fn tables(client: &Client, ns: &str) -> Self {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &table_resource());
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        Self {
            events,
            ns: ns.to_owned(),
            passed: Vec::new(),
        }
    }

    /// Waits until `count` tables pass `check`, and returns when the last
    /// one did (as this watch saw it).
    pub(crate) async fn until(
        &mut self,
        count: usize,
        check: fn(&DynamicObject) -> bool,
        what: &str,
        timeout: Duration,
    ) -> anyhow::Result<Instant> {
        let mut done = HashSet::new();
        self.passed.clear();
        let deadline = tokio::time::Instant::now() + timeout;
        while done.len() < count {
            let next = tokio::time::timeout_at(deadline, self.events.next()).await;
            match next {
                Err(_) => bail!(
                    "{} of {count} tables in {} {what} after {timeout:?}; \
                     see the logs in the bench directory",
                    done.len(),
                    self.ns
                ),
                Ok(None) => bail!("the watch of the tables in {} ended", self.ns),
                Ok(Some(Err(e))) => tracing::warn!(error = %e, "watching the tables"),
                Ok(Some(Ok(obj))) => {
                    if check(&obj) {
                        if done.insert(obj.name_any()) {
                            self.passed.push(Instant::now());
                        }
                    } else {
                        done.remove(&obj.name_any());
                    }
                }
            }
        }
        Ok(Instant::now())
    }

    /// How long after `start` the last [`Watch::until`] saw its first
    /// table pass, half, 90% and 99% of them: where the time went (a slow
    /// start, a slow pace, or a few late ones).
    pub(crate) fn pace(&self, start: Instant) -> String {
        let at = |i: usize| {
            self.passed
                .get(i)
                .map_or(Duration::ZERO, |t| t.saturating_duration_since(start))
        };
        let n = self.passed.len();
        format!(
            "first after {:?}, half after {:?}, 90% after {:?}, 99% after {:?}",
            at(0),
            at(n / 2),
            at(n * 9 / 10),
            at(n * 99 / 100)
        )
    }
}

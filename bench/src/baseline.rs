//! The P2 baseline: what an operator author would write instead of kplug.
//! A kube-rs [`Controller`] in one process that calls the SQLite plugin's
//! code (the example's library, the very `Plugin` implementation kplug
//! calls over gRPC) directly, and makes the writes kplug makes: the
//! finalizer, the extension's status, the table's status (a `Ready`
//! condition, the plugin's conditions and fields) and the plugin's Events.
//!
//! It is written as a careful author would: the tables' and extensions'
//! watches skip changes that leave the generation alone (so its own status
//! writes wake nothing), an extension's change wakes the tables that name
//! it, and as many objects are reconciled at once as kplug-operator's
//! default `--workers`. It reconciles while it holds a leader Lease, as a
//! controller deployed with a Deployment does (kubebuilder's scaffold runs
//! its manager with `--leader-elect`; a rolling update runs two Pods at
//! once), with kplug-operator's Lease settings and library.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kplug_sidecar::{Plugin, Request};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{PredicateConfig, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use kube_lease_manager::LeaseManagerBuilder;
use serde_json::{Map, Value, json};
use sqlite_plugin::SqlitePlugin;

use crate::objects::{extension_resource, table_resource};

/// The baseline's finalizer.
const FINALIZER: &str = "bench.kplug.dev/baseline";
/// Its field manager for status.
const MANAGER: &str = "kplug-bench-baseline";
/// Retry after a failed reconcile (kplug backs off from 1 s as well).
const RETRY: Duration = Duration::from_secs(1);

/// `kplug-bench baseline`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The namespace whose `DatabaseTable`s it reconciles.
    #[arg(long)]
    namespace: String,
    /// Where the SQLite databases go (the plugin's `--data-dir`).
    #[arg(long)]
    data_dir: PathBuf,
    /// Objects reconciled at once (kplug-operator's `--workers` default).
    #[arg(long, default_value_t = 8)]
    workers: u16,
    /// Seconds the leader Lease stays valid without renewal; it is renewed
    /// a third of that before it expires (kplug-operator's defaults).
    #[arg(long, default_value_t = 15)]
    lease_duration: u64,
}

struct Context {
    client: Client,
    plugin: SqlitePlugin,
    extensions: Store<DynamicObject>,
    recorder: Recorder,
}

/// A reconcile that did not complete, with what it was doing.
#[derive(Debug)]
struct Failed(String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

fn failed(what: &str, obj: &DynamicObject) -> impl FnOnce(&dyn std::fmt::Display) -> Failed {
    let at = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
    move |e| Failed(format!("{what} of {at}: {e}"))
}

/// Runs the controller until the process is stopped.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)?;
    let client = Client::try_default().await?;
    let lease = LeaseManagerBuilder::new(client.clone(), "kplug-bench-baseline")
        .with_namespace(&args.namespace)
        .with_identity(format!("baseline-{}", std::process::id()))
        .with_duration(args.lease_duration)
        .with_grace((args.lease_duration / 3).max(1))
        .build()
        .await?;
    let (mut leading, _renewing) = lease.watch().await;
    leading.wait_for(|leading| *leading).await?;
    let (tables_ar, extensions_ar) = (table_resource(), extension_resource());
    let (table_changes, store) = watch(&client, &args.namespace, &tables_ar);
    let (extension_changes, extension_store) = watch(&client, &args.namespace, &extensions_ar);
    let referrers = store.clone();
    let ar = tables_ar.clone();
    let naming = move |extension: DynamicObject| {
        let name = extension.name_any();
        referrers
            .state()
            .into_iter()
            .filter(|table| extension_name(table).as_deref() == Some(name.as_str()))
            .map(|table| ObjectRef::from_obj_with(&*table, ar.clone()))
            .collect::<Vec<_>>()
    };
    let context = Arc::new(Context {
        recorder: Recorder::new(client.clone(), Reporter::from(MANAGER)),
        client,
        plugin: SqlitePlugin::new(args.data_dir),
        extensions: extension_store,
    });
    let controller = Controller::for_stream_with(table_changes, store, tables_ar)
        .with_config(kube::runtime::Config::default().concurrency(args.workers))
        .watches_stream_with(extension_changes, naming, extensions_ar)
        .run(reconcile, |_, _, _| Action::requeue(RETRY), context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::warn!(%error, "reconcile");
            }
        });
    tokio::select! {
        () = controller => Ok(()),
        lost = leading.wait_for(|leading| !*leading) => {
            lost?;
            anyhow::bail!("lost the leader Lease")
        }
    }
}

/// A cached watch of `ar`'s objects in `namespace`: their spec changes,
/// and the cache.
fn watch(
    client: &Client,
    namespace: &str,
    ar: &ApiResource,
) -> (
    impl futures::Stream<Item = Result<DynamicObject, watcher::Error>> + use<>,
    Store<DynamicObject>,
) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, ar);
    let writer = Writer::new(ar.clone());
    let store = writer.as_reader();
    let changes = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(predicates::generation, PredicateConfig::default());
    (changes, store)
}

/// The name of the SQLite extension `table` names, if any.
fn extension_name(table: &DynamicObject) -> Option<String> {
    table.data["spec"]["extensions"]
        .as_array()?
        .iter()
        .find(|e| e["kind"] == sqlite_plugin::EXTENSION)
        .and_then(|e| e["name"].as_str())
        .map(str::to_owned)
}

async fn reconcile(table: Arc<DynamicObject>, context: Arc<Context>) -> Result<Action, Failed> {
    let ns = table.namespace().unwrap_or_default();
    let api: Api<DynamicObject> =
        Api::namespaced_with(context.client.clone(), &ns, &table_resource());
    let extension = match extension_name(&table) {
        None => None,
        Some(name) => {
            let at = ObjectRef::new_with(&name, extension_resource()).within(&ns);
            match context.extensions.get(&at) {
                Some(extension) => Some(extension),
                // Its watch wakes the table when it appears.
                None => return Ok(Action::requeue(RETRY)),
            }
        }
    };
    let request = Request::from_json(
        "SQLite",
        serde_json::to_value(&*table).map_err(|e| failed("encoding", &table)(&e))?,
        extension
            .iter()
            .map(|e| serde_json::to_value(&**e))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed("encoding the extension", &table)(&e))?,
    )
    .map_err(|e| failed("decoding", &table)(&e))?;

    if table.metadata.deletion_timestamp.is_some() {
        return finalize(&table, &api, &context, request).await;
    }
    if !table.finalizers().iter().any(|f| f == FINALIZER) {
        let mut finalizers = table.finalizers().to_vec();
        finalizers.push(FINALIZER.to_owned());
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": table.resource_version()}});
        api.patch(
            &table.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .map_err(|e| failed("adding the finalizer", &table)(&e))?;
    }

    let response = context
        .plugin
        .reconcile(request)
        .await
        .map_err(|e| failed("reconciling", &table)(&e))?
        .to_json();
    write(&table, &api, &context, extension.as_deref(), &response).await?;
    Ok(match response["outcome"].as_str() {
        Some("OK") => Action::await_change(),
        Some("RETRY") => Action::requeue(Duration::from_secs_f64(
            response["retryAfterSeconds"].as_f64().unwrap_or(1.0),
        )),
        _ => Action::requeue(RETRY),
    })
}

/// Calls Finalize for a table being deleted, and lets it go once the
/// plugin is done.
async fn finalize(
    table: &DynamicObject,
    api: &Api<DynamicObject>,
    context: &Context,
    request: Request,
) -> Result<Action, Failed> {
    if !table.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let finalized = context
        .plugin
        .finalize(request)
        .await
        .map_err(|e| failed("finalizing", table)(&e))?
        .to_json();
    if finalized["outcome"] != "OK" {
        return Ok(Action::requeue(RETRY));
    }
    let rest: Vec<_> = table
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .collect();
    let patch =
        json!({"metadata": {"finalizers": rest, "resourceVersion": table.resource_version()}});
    api.patch(
        &table.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await
    .map_err(|e| failed("removing the finalizer", table)(&e))?;
    Ok(Action::await_change())
}

/// Writes the plugin's answer: the extension's status, the table's status
/// with the conditions, and the plugin's Events.
async fn write(
    table: &DynamicObject,
    api: &Api<DynamicObject>,
    context: &Context,
    extension: Option<&DynamicObject>,
    response: &Value,
) -> Result<(), Failed> {
    let ns = table.namespace().unwrap_or_default();
    let apply = PatchParams::apply(MANAGER).force();
    if let Some(extension) = extension {
        let extensions: Api<DynamicObject> =
            Api::namespaced_with(context.client.clone(), &ns, &extension_resource());
        for status in response["extensionStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let body = json!({
                "apiVersion": "myorg.org/v1alpha1", "kind": sqlite_plugin::EXTENSION,
                "status": status["status"],
            });
            extensions
                .patch_status(&extension.name_any(), &apply, &Patch::Apply(body))
                .await
                .map_err(|e| failed("writing the extension's status", table)(&e))?;
        }
    }
    let ok = response["outcome"] == "OK";
    let mut status: Map<String, Value> =
        response["status"].as_object().cloned().unwrap_or_default();
    status.insert(
        "observedGeneration".into(),
        json!(table.metadata.generation),
    );
    status.insert("implementation".into(), json!("SQLite"));
    status.insert("conditions".into(), conditions(table, response, ok));
    let body =
        json!({"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable", "status": status});
    api.patch_status(&table.name_any(), &apply, &Patch::Apply(body))
        .await
        .map_err(|e| failed("writing the status", table)(&e))?;

    let reference = table.object_ref(&table_resource());
    for event in response["events"].as_array().into_iter().flatten() {
        let event = Event {
            type_: if event["type"] == "Warning" {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: event["reason"].as_str().unwrap_or_default().to_owned(),
            note: event["message"].as_str().map(str::to_owned),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(error) = context.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, "publishing an Event");
        }
    }
    Ok(())
}

/// `Ready` and the plugin's conditions, each keeping its
/// `lastTransitionTime` while its status stays the same.
fn conditions(table: &DynamicObject, response: &Value, ok: bool) -> Value {
    let previous = table.data["status"]["conditions"].as_array();
    // Whole seconds, like metav1.Time.
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let since = |type_: &str, status: &str| {
        previous
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_ && c["status"] == status)
            .and_then(|c| c["lastTransitionTime"].as_str())
            .map_or_else(|| now.clone(), str::to_owned)
    };
    let condition = |type_: &str, status: &str, reason: &Value, message: &Value| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "observedGeneration": table.metadata.generation,
            "lastTransitionTime": since(type_, status),
        })
    };
    let (status, reason) = if ok {
        ("True", "Reconciled")
    } else {
        ("False", "ReconcileFailed")
    };
    let mut all = vec![condition(
        "Ready",
        status,
        &json!(reason),
        &response["message"],
    )];
    for c in response["conditions"].as_array().into_iter().flatten() {
        let type_ = c["type"].as_str().unwrap_or_default();
        let status = c["status"].as_str().unwrap_or("Unknown");
        all.push(condition(type_, status, &c["reason"], &c["message"]));
    }
    Value::Array(all)
}

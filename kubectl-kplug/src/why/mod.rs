//! `kubectl kplug why KIND/NAME`: one screen that says why an object is or
//! is not progressing, and what to do.

mod advice;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use crate::Error;
use crate::children;
use crate::operator::{Replica, Source};
use crate::plugins::table;
use crate::target::{Target, text};
use advice::what_to_do;

/// How many of the object's Events are shown, newest last.
const EVENTS: usize = 10;

/// `kubectl kplug why`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The object, as KIND/NAME (e.g. databasetable/users)
    object: String,

    /// The object's namespace (default: the kubeconfig context's)
    #[arg(short, long)]
    namespace: Option<String>,

    #[command(flatten)]
    source: Source,
}

/// Prints the object's implementation and plugin, its conditions, its
/// children and their state, recent Events, the plugin's state at the
/// operator, and what to do.
///
/// # Errors
/// When the object cannot be read. An operator that cannot be asked is
/// said in the output instead.
pub(crate) async fn run(client: &kube::Client, args: &Args) -> Result<(), Error> {
    let target = Target::resolve(client, &args.object, args.namespace.as_deref()).await?;
    let obj = target.get(client).await?;
    let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
    let record = Record::of(&obj, &status);
    record.print(&target, &obj, &status);
    let conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = conditions.iter().find(|c| c["type"] == "Ready");
    print_ready_and_trace(ready, &conditions);
    print_conditions(&conditions);
    let children = children::listed(&status);
    children::print(&children);

    outln!("\nEVENTS (newest last)");
    out!("{}", events(client, &obj, &target.namespace).await);

    outln!("\nPLUGIN");
    let advice = print_plugin(client, &args.source, &target, &record).await;
    print_last_calls(client, &args.source, &obj).await;

    outln!("\nWHAT TO DO");
    let ready_true = ready.is_some_and(|c| c["status"] == "True");
    let blocking_child = children::advice(&children);
    outln!(
        "{}",
        what_to_do(ready_true, advice, blocking_child, &conditions)
    );
    Ok(())
}

/// What the object says of its implementation: the record (annotations),
/// else the status (objects recorded before the annotations), and the
/// implementation its spec prefers.
struct Record {
    implementation: Option<String>,
    plugin: Option<String>,
    preferred: Option<String>,
}

impl Record {
    fn of(obj: &DynamicObject, status: &Value) -> Self {
        let annotation = |key: &str| obj.metadata.annotations.as_ref()?.get(key).cloned();
        Self {
            implementation: annotation(kplug_operator::IMPLEMENTATION_ANNOTATION)
                .or_else(|| text(status, "/implementation")),
            plugin: annotation(kplug_operator::PLUGIN_ANNOTATION)
                .or_else(|| text(status, "/plugin")),
            preferred: text(&obj.data, "/spec/preferredImplementation"),
        }
    }

    /// The first lines: the object, its implementation and plugin, and the
    /// preferred implementation.
    fn print(&self, target: &Target, obj: &DynamicObject, status: &Value) {
        outln!(
            "{} (generation {}, observed {})",
            target.display(),
            obj.metadata.generation.unwrap_or_default(),
            observed(status),
        );
        outln!(
            "Implementation: {}{}",
            self.implementation.as_deref().unwrap_or("none chosen yet"),
            self.plugin
                .as_deref()
                .map(|p| format!(", plugin {p}"))
                .unwrap_or_default(),
        );
        outln!(
            "Preferred:      {}",
            self.preferred.as_deref().unwrap_or("(none)")
        );
    }
}

/// The PLUGIN section: the state, on each replica, of the plugin that
/// serves (or should serve) the object. Returns advice when the plugin is
/// what blocks.
async fn print_plugin(
    client: &kube::Client,
    source: &Source,
    target: &Target,
    record: &Record,
) -> Option<String> {
    let kind_group = (target.resource.group.clone(), target.resource.kind.clone());
    let wanted = record
        .implementation
        .as_deref()
        .or(record.preferred.as_deref());
    match source.replicas(client).await {
        Err(error) => {
            outln!("the operator could not be asked: {error}");
            None
        }
        Ok(replicas) => plugin_state(&replicas, &kind_group, wanted, record.plugin.as_deref()),
    }
}

/// The generation the status was written for, or `never`.
fn observed(status: &Value) -> String {
    status
        .get("observedGeneration")
        .and_then(Value::as_i64)
        .map_or_else(|| "never".to_owned(), |g| g.to_string())
}

/// The Ready condition on one line, and the trace of the reconcile that
/// brought the current state when a condition names it.
fn print_ready_and_trace(ready: Option<&Value>, conditions: &[Value]) {
    match ready {
        Some(c) => outln!(
            "Ready:          {} ({}): {}",
            c["status"].as_str().unwrap_or("?"),
            c["reason"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        ),
        None => outln!("Ready:          no condition yet: the operator has not reconciled it"),
    }
    // Reconciled names it; Ready does while Reconciled is True (and so
    // not written).
    if let Some(trace) = ["Reconciled", "Ready"]
        .iter()
        .find_map(|t| conditions.iter().find(|c| c["type"] == *t))
        .and_then(|c| c["message"].as_str())
        .and_then(|m| m.rsplit_once("(trace ")?.1.strip_suffix(')'))
    {
        outln!("Trace:          {trace} (the reconcile that brought the current state)");
    }
}

/// The conditions, as a table.
fn print_conditions(conditions: &[Value]) {
    outln!("\nCONDITIONS");
    let mut rows = vec![["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"].map(String::from)];
    for c in conditions {
        rows.push([
            c["type"].as_str().unwrap_or("").to_owned(),
            c["status"].as_str().unwrap_or("").to_owned(),
            c["reason"].as_str().unwrap_or("").to_owned(),
            c["lastTransitionTime"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())
                .map(age)
                .unwrap_or_default(),
            c["message"].as_str().unwrap_or("").to_owned(),
        ]);
    }
    out!("{}", table(&rows));
}

/// Each replica's last call for `obj`. An operator that cannot be asked
/// was said with the plugins.
async fn print_last_calls(client: &kube::Client, source: &Source, obj: &DynamicObject) {
    match source
        .last_calls(client, &obj.uid().unwrap_or_default())
        .await
    {
        Ok(calls) if calls.is_empty() => outln!("last call: none since the operator started"),
        Ok(calls) => {
            for (replica, call) in calls {
                outln!(
                    "{replica}: last call {} to plugin {}: {} in {:.0} ms, {:.0}s ago",
                    call.call,
                    call.plugin,
                    call.outcome,
                    call.took_seconds * 1000.0,
                    call.seconds_ago
                );
            }
        }
        Err(_) => {}
    }
}

/// Prints the state of the plugin that serves (or should serve) the
/// object on each replica. Returns advice when the plugin is what blocks.
fn plugin_state(
    replicas: &[Replica],
    (group, kind): &(String, String),
    implementation: Option<&str>,
    recorded_plugin: Option<&str>,
) -> Option<String> {
    let Some(implementation) = implementation else {
        outln!("no implementation chosen or preferred");
        return None;
    };
    let mut advice = None;
    for replica in replicas {
        let offering: Vec<_> = replica
            .plugins
            .iter()
            .filter(|p| {
                recorded_plugin.is_none_or(|r| r == p.name)
                    && p.offers_for(group, kind)
                        .iter()
                        .any(|o| o.implementation.eq_ignore_ascii_case(implementation))
            })
            .collect();
        if offering.is_empty() {
            advice = Some(not_offered(replica, implementation, kind, recorded_plugin));
        }
        for plugin in offering {
            outln!(
                "{}: plugin {} {} is registered, {}, last heartbeat {:.0}s ago",
                replica.source,
                plugin.name,
                plugin.version,
                if plugin.ready {
                    "ready"
                } else {
                    "NOT ready (its Probe says so)"
                },
                plugin.last_heartbeat_seconds_ago
            );
            if !plugin.ready {
                advice = Some(format!(
                    "Plugin {} is registered but its Probe says not ready: its logs say why (kubectl logs POD -c {}).",
                    plugin.name, plugin.name
                ));
            }
        }
    }
    advice
}

/// Prints that no registered plugin of `replica` offers `implementation`
/// (or that the recorded plugin is not registered), and returns what to do.
fn not_offered(
    replica: &Replica,
    implementation: &str,
    kind: &str,
    recorded_plugin: Option<&str>,
) -> String {
    let registered: Vec<&str> = replica.plugins.iter().map(|p| p.name.as_str()).collect();
    let registered = if registered.is_empty() {
        "none".to_owned()
    } else {
        registered.join(", ")
    };
    match recorded_plugin {
        None => outln!(
            "{}: no registered plugin offers {implementation} (registered: {registered})",
            replica.source
        ),
        Some(p) => outln!(
            "{}: plugin {p}, chosen for {implementation}, is not registered (registered: {registered})",
            replica.source
        ),
    }
    format!(
        "Start the plugin that offers {implementation} for {kind}{}: a sidecar container of the operator's Pod that registers on {}/registry.sock. If it runs, its logs say why it does not register (kubectl logs POD -c CONTAINER), and so do the operator's PluginRefused Events (kubectl get events --field-selector reason=PluginRefused -n OPERATOR-NAMESPACE). To move the object to another implementation instead, see `kplug.io/reselect` in docs/your-own-kind.md.",
        recorded_plugin
            .map(|p| format!(" (plugin {p})"))
            .unwrap_or_default(),
        replica.socket_dir,
    )
}

/// The object's Events, newest last.
async fn events(client: &kube::Client, obj: &DynamicObject, namespace: &str) -> String {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let uid = obj.uid().unwrap_or_default();
    let list = match api
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await
    {
        Ok(list) => list.items,
        Err(error) => return format!("cannot list its Events: {error}\n"),
    };
    let when = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
    };
    let mut events = list;
    events.sort_by_key(when);
    let skip = events.len().saturating_sub(EVENTS);
    let mut rows = vec![["AGE", "TYPE", "REASON", "FROM", "MESSAGE"].map(String::from)];
    for e in events.iter().skip(skip) {
        rows.push([
            when(e).map(age).unwrap_or_default(),
            e.type_.clone().unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
            e.reporting_component
                .clone()
                .filter(|c| !c.is_empty())
                .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
                .unwrap_or_default(),
            e.message.clone().unwrap_or_default(),
        ]);
    }
    if rows.len() == 1 {
        return "none\n".to_owned();
    }
    table(&rows)
}

/// `5s`, `3m`, `2h`, `4d` since `then`.
fn age(then: Timestamp) -> String {
    let seconds = Timestamp::now().duration_since(then).as_secs().max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

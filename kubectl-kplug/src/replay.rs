//! `kubectl kplug replay KIND/NAME --plugin-socket PATH`: the request the
//! operator would send a plugin for an object, sent to a plugin running
//! locally, and its answer printed. No operator, no status written.

use std::path::PathBuf;
use std::time::Duration;

use kplug_proto::limits;
use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{
    Condition, Event, FinalizeRequest, GetInfoRequest, Offer, Outcome, ReconcileRequest,
};
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::Error;
use crate::target::{Target, text};

/// Which call to send.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Call {
    /// Reconcile, as for an object that exists
    Reconcile,
    /// Finalize, as for an object being deleted
    Finalize,
}

/// `kubectl kplug replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The object, as KIND/NAME (e.g. databasetable/users)
    object: String,

    /// The object's namespace (default: the kubeconfig context's)
    #[arg(short, long)]
    namespace: Option<String>,

    /// The plugin's socket: SOCKET_DIR/plugins/NAME/plugin.sock
    #[arg(long, value_name = "PATH")]
    plugin_socket: PathBuf,

    /// The implementation to ask for (default: status.implementation, else
    /// spec.preferredImplementation, else the plugin's only offer for the
    /// kind)
    #[arg(long)]
    implementation: Option<String>,

    /// The call to send
    #[arg(long, value_enum, default_value = "reconcile")]
    call: Call,

    /// Where the object lists its extensions (the operator's
    /// --extensions-field)
    #[arg(long, default_value = "spec.extensions")]
    extensions_field: String,

    /// How long to wait for the answer
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    timeout: Duration,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let (number, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| s.split_at(i));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s}: expected e.g. 500ms, 30s, 2m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("{s}: expected e.g. 500ms, 30s, 2m")),
    }
}

/// Sends the object and its extensions to the plugin and prints the answer.
///
/// # Errors
/// When the object cannot be read, the plugin cannot be reached, or it
/// offers nothing for the object's kind.
pub(crate) async fn run(client: &kube::Client, args: &Args) -> Result<(), Error> {
    let target = Target::resolve(client, &args.object, args.namespace.as_deref()).await?;
    let obj = target.get(client).await?;
    let socket = args.plugin_socket.display().to_string();
    let mut plugin = PluginClient::new(kplug_proto::socket::channel(&args.plugin_socket))
        .max_decoding_message_size(limits::DEFAULT_MAX_RESPONSE_BYTES);
    let info = plugin
        .get_info(GetInfoRequest {})
        .await
        .map_err(|e| {
            format!(
                "GetInfo on {socket}: {}: is the plugin running there?",
                e.message()
            )
        })?
        .into_inner();
    let offers: Vec<&Offer> = info
        .offers
        .iter()
        .filter(|o| {
            o.base.as_ref().is_some_and(|b| {
                b.kind == target.resource.kind
                    && b.group.eq_ignore_ascii_case(&target.resource.group)
            })
        })
        .collect();
    let implementation = implementation(args, &obj, &offers, &info.name)?;
    let offer = offers
        .iter()
        .find(|o| o.implementation.eq_ignore_ascii_case(&implementation))
        .ok_or_else(|| {
            format!(
                "plugin {} does not offer {implementation} for {} (it offers: {})",
                info.name,
                target.resource.kind,
                names(&offers)
            )
        })?;
    let extensions =
        declared_extensions(client, &obj, &target, &args.extensions_field, offer).await?;
    eprintln!(
        "sending {:?} for {} ({implementation}, {} extension(s)) to plugin {} {} on {socket}",
        args.call,
        target.display(),
        extensions.len(),
        info.name,
        info.version
    );
    let request = Sent {
        implementation: offer.implementation.clone(),
        object: serde_json::to_vec(&obj)?,
        extensions,
    };
    let answer = send(&mut plugin, args, request, &socket).await?;
    outln!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(())
}

/// The implementation to ask for: `--implementation`, else the one the
/// object records, else its preference, else the plugin's only offer.
fn implementation(
    args: &Args,
    obj: &DynamicObject,
    offers: &[&Offer],
    plugin: &str,
) -> Result<String, Error> {
    let implementation = args
        .implementation
        .clone()
        .or_else(|| {
            obj.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(kplug_operator::IMPLEMENTATION_ANNOTATION).cloned())
        })
        .or_else(|| text(&obj.data, "/status/implementation"))
        .or_else(|| text(&obj.data, "/spec/preferredImplementation"))
        .or_else(|| (offers.len() == 1).then(|| offers[0].implementation.clone()))
        .ok_or_else(|| {
            format!(
                "which implementation? pass --implementation (plugin {plugin} offers: {})",
                names(offers)
            )
        })?;
    Ok(implementation)
}

/// The object's extensions, as JSON, that the operator would send: those
/// of the kinds `offer` declares, in the order the object lists them.
async fn declared_extensions(
    client: &kube::Client,
    obj: &DynamicObject,
    target: &Target,
    extensions_field: &str,
    offer: &Offer,
) -> Result<Vec<Vec<u8>>, Error> {
    let mut extensions = Vec::new();
    for ext in referenced(client, obj, &target.namespace, extensions_field).await? {
        let kind = ext
            .types
            .as_ref()
            .map(|t| t.kind.clone())
            .unwrap_or_default();
        if offer.extensions.iter().any(|e| e.kind == kind) {
            extensions.push(serde_json::to_vec(&ext)?);
        }
    }
    Ok(extensions)
}

/// What a replayed call sends.
struct Sent {
    implementation: String,
    object: Vec<u8>,
    extensions: Vec<Vec<u8>>,
}

/// Sends `args.call` and returns the plugin's answer, as printed.
async fn send(
    plugin: &mut PluginClient<tonic::transport::Channel>,
    args: &Args,
    sent: Sent,
    socket: &str,
) -> Result<Value, Error> {
    let Sent {
        implementation,
        object,
        extensions,
    } = sent;
    Ok(match args.call {
        Call::Reconcile => {
            let mut request = tonic::Request::new(ReconcileRequest {
                implementation,
                object,
                extensions,
                children: Vec::new(),
            });
            request.set_timeout(args.timeout);
            let r = plugin
                .reconcile(request)
                .await
                .map_err(|e| called(socket, "Reconcile", &e))?
                .into_inner();
            let ext: Vec<Value> = r.extension_statuses.iter().map(|s| {
                json!({"object": s.target.as_ref().map(|t| format!("{}/{}", t.kind, t.name)), "status": parsed(&s.status)})
            }).collect();
            answer(
                r.outcome,
                &r.message,
                Some(parsed(&r.status)),
                ext,
                &r.conditions,
                &r.events,
                r.retry_after,
            )
        }
        Call::Finalize => {
            let mut request = tonic::Request::new(FinalizeRequest {
                children: Default::default(),
                implementation,
                object,
                extensions,
            });
            request.set_timeout(args.timeout);
            let r = plugin
                .finalize(request)
                .await
                .map_err(|e| called(socket, "Finalize", &e))?
                .into_inner();
            answer(
                r.outcome,
                &r.message,
                None,
                Vec::new(),
                &[],
                &r.events,
                r.retry_after,
            )
        }
    })
}

fn called(socket: &str, call: &str, status: &tonic::Status) -> Error {
    format!(
        "{call} on {socket} failed: {:?}: {}",
        status.code(),
        status.message()
    )
    .into()
}

fn names(offers: &[&Offer]) -> String {
    if offers.is_empty() {
        return "nothing for this kind".to_owned();
    }
    offers
        .iter()
        .map(|o| o.implementation.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// JSON bytes as a value; bytes that are not JSON as a string saying so.
fn parsed(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        json!(format!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(bytes)
        ))
    })
}

fn answer(
    outcome: i32,
    message: &str,
    status: Option<Value>,
    extension_statuses: Vec<Value>,
    conditions: &[Condition],
    events: &[Event],
    retry_after: Option<prost_types::Duration>,
) -> Value {
    let outcome = Outcome::try_from(outcome).map_or_else(
        |_| format!("unknown ({outcome})"),
        |o| o.as_str_name().trim_start_matches("OUTCOME_").to_owned(),
    );
    let mut out = json!({"outcome": outcome, "message": message});
    if let Some(status) = status {
        out["status"] = status;
        out["extensionStatuses"] = json!(extension_statuses);
    }
    out["conditions"] = json!(conditions.iter().map(|c| json!({"type": c.r#type, "status": c.status().as_str_name(), "reason": c.reason, "message": c.message})).collect::<Vec<_>>());
    out["events"] = json!(events.iter().map(|e| json!({"type": e.r#type().as_str_name(), "reason": e.reason, "message": e.message})).collect::<Vec<_>>());
    if let Some(after) = retry_after {
        out["retryAfterSeconds"] = json!(after.seconds);
    }
    out
}

/// The extensions `obj` lists at `field`, read from `namespace`. A missing
/// one is said on stderr and left out (the operator would wait for it).
async fn referenced(
    client: &kube::Client,
    obj: &DynamicObject,
    namespace: &str,
    field: &str,
) -> Result<Vec<DynamicObject>, Error> {
    let pointer = format!("/{}", field.replace('.', "/"));
    let Some(entries) = obj.data.pointer(&pointer).and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for entry in entries {
        let (Some(api_version), Some(kind), Some(name)) = (
            entry["apiVersion"].as_str(),
            entry["kind"].as_str(),
            entry["name"].as_str(),
        ) else {
            eprintln!("note: {field} entry {entry} is not {{apiVersion, kind, name}}; left out");
            continue;
        };
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|e| {
                format!("the API server does not serve extension kind {kind} ({api_version}): {e}")
            })?;
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        match api.get_opt(name).await? {
            Some(mut ext) => {
                ext.types.get_or_insert_with(|| kube::api::TypeMeta {
                    api_version: api_version.to_owned(),
                    kind: kind.to_owned(),
                });
                found.push(ext);
            }
            None => eprintln!(
                "note: extension {kind} {namespace}/{name} does not exist; the operator would wait for it instead of calling the plugin"
            ),
        }
    }
    Ok(found)
}

//! A kplug plugin written from the protocol alone (`kplug-proto` and tonic,
//! no SDK), correct by default, that breaks one rule on request:
//! `broken-plugin --break <rule>`. The kit's tests run it to show that each
//! check fails a plugin breaking the rule it names.
//!
//! It offers `conformance.kplug.dev/Widget` (implementation `Broken`) with
//! one extension kind, and answers every Reconcile with OK and a status on
//! the base and each extension.

mod lifecycle;

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use kplug_proto::limits::MAX_PLUGIN_MESSAGE_BYTES;
use kplug_proto::rules::parse_heartbeat_interval;
use kplug_proto::v1::plugin_server::{Plugin, PluginServer};
use kplug_proto::v1::*;
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};
use tokio_stream::wrappers::UnixListenerStream;

use lifecycle::{bind, heartbeat, shut_down};

const NAME: &str = "broken";
const GROUP: &str = "conformance.kplug.dev";

/// The rule to break; each makes one check of the kit fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Break {
    /// handshake: heartbeats with protocol "kplug.v0".
    WrongProtocol,
    /// handshake: heartbeats declare a hook that GetInfo does not.
    HooksDisagree,
    /// heartbeat-content: a new version in every heartbeat.
    ChangingVersion,
    /// heartbeat-interval: keeps KPLUG_HEARTBEAT_INTERVAL, ignoring the
    /// operator's answer.
    IgnoreInterval,
    /// backoff: retries every 10 ms.
    NoBackoff,
    /// reregister: stops heartbeating after a failure once registered.
    GiveUp,
    /// probe: Probe is unimplemented.
    NoProbe,
    /// reconcile: the status sets the operator's `conditions` key.
    ReservedStatusKey,
    /// finalize: answers OUTCOME_UNSPECIFIED.
    FinalizeUnspecified,
    /// bad-input: a gRPC error for an object that is not JSON.
    ErrorOnBadJson,
    /// message-limit: gRPC's default 4 MiB limit.
    SmallMessages,
    /// live-socket: removes the socket at start, even a live one.
    StealSocket,
    /// non-socket-file: removes whatever is at the socket path.
    DeleteAnything,
    /// stale-socket: never removes a socket, so cannot start over a stale one.
    KeepStale,
    /// restart: the same instance id at every start.
    FixedInstanceId,
    /// unregister: exits on SIGTERM without Unregister.
    NoUnregister,
    /// drain: stops serving before Unregister.
    StopServingFirst,
    /// exit: exits 1 after a clean shutdown.
    ExitNonzero,
    /// mutate: a different patch for every Mutate, the same request or not.
    RandomMutation,
}

/// A plugin from the protocol alone, breaking one rule on request.
#[derive(Debug, Parser)]
struct Args {
    /// The rule to break (none by default).
    #[arg(long = "break", value_enum)]
    broken: Option<Break>,
}

#[derive(Clone, Copy)]
struct Service(Option<Break>);

fn offers() -> Vec<Offer> {
    let kind = |kind: &str| GroupKind {
        group: GROUP.into(),
        kind: kind.into(),
    };
    vec![Offer {
        children: Default::default(),
        base: Some(kind("Widget")),
        implementation: "Broken".into(),
        extensions: vec![kind("WidgetExtensionA")],
    }]
}

/// No hooks, except for the heartbeat with `--break hooks-disagree`.
/// (Without CAPABILITY_HOOKS, so no Hook call ever comes.)
fn hooks(broken: Option<Break>, in_heartbeat: bool) -> Vec<Hook> {
    if broken == Some(Break::HooksDisagree) && in_heartbeat {
        vec![Hook {
            name: "audit".into(),
            base: offers()[0].base.clone(),
            phase: HookPhase::AfterReconcile as i32,
            behaviour: HookBehaviour::Async as i32,
            order: 0,
        }]
    } else {
        Vec::new()
    }
}

fn capabilities() -> Vec<i32> {
    vec![
        Capability::Reconcile as i32,
        Capability::Finalize as i32,
        Capability::Mutate as i32,
    ]
}

/// It patches Deployments (a label, the same each time unless told to
/// break the rule).
fn mutations() -> Vec<Mutation> {
    vec![Mutation {
        kind: Some(GroupVersionKind {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
        }),
    }]
}

/// Mutate calls answered so far, for `--break random-mutation`.
static MUTATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn reference(object: &Value) -> ObjectRef {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    ObjectRef {
        api_version: text(&object["apiVersion"]),
        kind: text(&object["kind"]),
        namespace: text(&object["metadata"]["namespace"]),
        name: text(&object["metadata"]["name"]),
    }
}

#[tonic::async_trait]
impl Plugin for Service {
    async fn get_info(
        &self,
        _: tonic::Request<GetInfoRequest>,
    ) -> Result<tonic::Response<GetInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(GetInfoResponse {
            mutations: mutations(),
            name: NAME.into(),
            version: "1.0.0".into(),
            protocol: kplug_proto::PROTOCOL.into(),
            offers: offers(),
            capabilities: capabilities(),
            description: "breaks one protocol rule on request".into(),
            hooks: hooks(self.0, false),
            call_policies: Vec::new(),
        }))
    }

    async fn probe(
        &self,
        _: tonic::Request<ProbeRequest>,
    ) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        if self.0 == Some(Break::NoProbe) {
            return Err(tonic::Status::unimplemented("no Probe here"));
        }
        Ok(tonic::Response::new(ProbeResponse {
            ready: true,
            message: String::new(),
        }))
    }

    async fn reconcile(
        &self,
        request: tonic::Request<ReconcileRequest>,
    ) -> Result<tonic::Response<ReconcileResponse>, tonic::Status> {
        let request = request.into_inner();
        let object: Value = match serde_json::from_slice(&request.object) {
            Ok(object) => object,
            Err(e) if self.0 == Some(Break::ErrorOnBadJson) => {
                return Err(tonic::Status::internal(e.to_string()));
            }
            Err(e) => {
                return Ok(tonic::Response::new(ReconcileResponse {
                    outcome: Outcome::Failed as i32,
                    message: format!("the base object is not valid JSON: {e}"),
                    ..Default::default()
                }));
            }
        };
        let status = if self.0 == Some(Break::ReservedStatusKey) {
            json!({ "conditions": [] })
        } else {
            json!({ "seen": object["metadata"]["name"] })
        };
        let extension_statuses = request
            .extensions
            .iter()
            .filter_map(|e| serde_json::from_slice::<Value>(e).ok())
            .map(|e| ObjectStatus {
                target: Some(reference(&e)),
                status: br#"{"usedBy":"Broken"}"#.to_vec(),
            })
            .collect();
        Ok(tonic::Response::new(ReconcileResponse {
            outcome: Outcome::Ok as i32,
            status: status.to_string().into_bytes(),
            extension_statuses,
            ..Default::default()
        }))
    }

    async fn finalize(
        &self,
        _: tonic::Request<FinalizeRequest>,
    ) -> Result<tonic::Response<FinalizeResponse>, tonic::Status> {
        let outcome = if self.0 == Some(Break::FinalizeUnspecified) {
            Outcome::Unspecified
        } else {
            Outcome::Ok
        };
        Ok(tonic::Response::new(FinalizeResponse {
            outcome: outcome as i32,
            ..Default::default()
        }))
    }

    // It advertises none of the capabilities VALIDATE, DEFAULT, HOOKS: the
    // operator never calls those, and the generated default stubs answer
    // UNIMPLEMENTED, as the protocol says.

    async fn mutate(
        &self,
        _: tonic::Request<kplug_proto::v1::MutateRequest>,
    ) -> Result<tonic::Response<kplug_proto::v1::MutateResponse>, tonic::Status> {
        let n = MUTATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let value = if self.0 == Some(Break::RandomMutation) {
            format!("call-{n}")
        } else {
            "yes".to_owned()
        };
        let patch = json!([{"op": "add", "path": "/metadata/labels/broken", "value": value}]);
        Ok(tonic::Response::new(kplug_proto::v1::MutateResponse {
            patch: patch.to_string().into_bytes(),
            warnings: Vec::new(),
        }))
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let broken = Args::parse().broken;
    let dir = PathBuf::from(
        std::env::var_os(kplug_proto::SOCKET_DIR_ENV)
            .unwrap_or_else(|| kplug_proto::DEFAULT_SOCKET_DIR.into()),
    );
    let interval = parse_heartbeat_interval(
        std::env::var(kplug_proto::rules::HEARTBEAT_INTERVAL_ENV)
            .ok()
            .as_deref(),
    )
    .map_err(|e| e.to_string())?;
    let listener = bind(&dir, broken).await?;
    let instance_id = if broken == Some(Break::FixedInstanceId) {
        "always-the-same".to_owned()
    } else {
        uuid::Uuid::new_v4().to_string()
    };
    let limit = if broken == Some(Break::SmallMessages) {
        4 * 1024 * 1024
    } else {
        MAX_PLUGIN_MESSAGE_BYTES
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                PluginServer::new(Service(broken))
                    .max_decoding_message_size(limit)
                    .max_encoding_message_size(limit),
            )
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                stopped.await.ok();
            }),
    );
    let beats = tokio::spawn(heartbeat(
        dir.clone(),
        instance_id.clone(),
        interval,
        broken,
    ));
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    term.recv().await;
    beats.abort();
    shut_down(&dir, &instance_id, broken, stop, &mut server).await;
    std::fs::remove_file(dir.join(kplug_proto::plugin_socket(NAME))).ok();
    if broken == Some(Break::ExitNonzero) {
        std::process::exit(1);
    }
    Ok(())
}

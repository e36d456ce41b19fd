//! What the Rust benches share: the SDK's echo plugin, the same service in
//! bare tonic (the baselines, with and without `serde_json`), and the request
//! they answer. The other languages' bench servers answer the same way
//! (polyglot.rs).

use kplug_proto::v1::plugin_server::Plugin as PluginApi;
use kplug_proto::v1::*;
use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response};
use serde_json::{Value, json};

/// The SDK plugin: decodes the object, echoes its spec into the status.
pub(crate) struct Echo;

impl Plugin for Echo {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        Ok(Response::ok().status(json!({ "echo": request.object().spec() })))
    }
}

/// What the echo plugins offer.
pub(crate) fn echo_info() -> PluginInfo {
    PluginInfo::new("echo", "1").offer(Offer::new("myorg.org", "DatabaseTable", "Echo"))
}

/// The baselines: the same service in bare tonic.
pub(crate) enum Bare {
    /// Copies the object's bytes into the status: gRPC alone.
    Bytes,
    /// Decodes the object into a `serde_json::Value` and encodes
    /// `{"echo": spec}` with `serde_json`: what a plugin written by hand on
    /// tonic and the standard JSON crate would do.
    #[allow(
        dead_code,
        reason = "roundtrip.rs, which shares this module, runs only Bytes"
    )]
    Json,
}

#[tonic::async_trait]
impl PluginApi for Bare {
    async fn get_info(
        &self,
        _: tonic::Request<GetInfoRequest>,
    ) -> Result<tonic::Response<GetInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(GetInfoResponse::default()))
    }
    async fn probe(
        &self,
        _: tonic::Request<ProbeRequest>,
    ) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        Ok(tonic::Response::new(ProbeResponse {
            ready: true,
            message: String::new(),
        }))
    }
    async fn reconcile(
        &self,
        request: tonic::Request<ReconcileRequest>,
    ) -> Result<tonic::Response<ReconcileResponse>, tonic::Status> {
        let object = request.into_inner().object;
        let status = match self {
            Bare::Bytes => object,
            Bare::Json => {
                let object: Value = serde_json::from_slice(&object).map_err(|e| {
                    tonic::Status::invalid_argument(format!("the object is not JSON: {e}"))
                })?;
                serde_json::to_vec(&json!({ "echo": object["spec"] })).unwrap()
            }
        };
        Ok(tonic::Response::new(ReconcileResponse {
            outcome: Outcome::Ok as i32,
            status,
            ..Default::default()
        }))
    }
    async fn finalize(
        &self,
        _: tonic::Request<FinalizeRequest>,
    ) -> Result<tonic::Response<FinalizeResponse>, tonic::Status> {
        Ok(tonic::Response::new(FinalizeResponse::default()))
    }

    // It advertises none of the capabilities VALIDATE, DEFAULT, HOOKS, so the operator never calls these; answered as the protocol says.
    async fn validate(
        &self,
        _: tonic::Request<kplug_proto::v1::ValidateRequest>,
    ) -> Result<tonic::Response<kplug_proto::v1::ValidateResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented(
            "the bare echo server does not implement Validate",
        ))
    }
    async fn default(
        &self,
        _: tonic::Request<kplug_proto::v1::DefaultRequest>,
    ) -> Result<tonic::Response<kplug_proto::v1::DefaultResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented(
            "the bare echo server does not implement Default",
        ))
    }
    async fn hook(
        &self,
        _: tonic::Request<kplug_proto::v1::HookRequest>,
    ) -> Result<tonic::Response<kplug_proto::v1::HookResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented(
            "the bare echo server does not implement Hook",
        ))
    }

    async fn mutate(
        &self,
        _: tonic::Request<kplug_proto::v1::MutateRequest>,
    ) -> Result<tonic::Response<kplug_proto::v1::MutateResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("Mutate"))
    }
}

/// A DatabaseTable-like object whose whole JSON is about `size` bytes.
fn object(size: usize) -> Vec<u8> {
    let mut obj = json!({
        "apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
        "metadata": {"name": "users", "namespace": "default"},
        "spec": {"pad": ""},
    });
    let base = serde_json::to_vec(&obj).unwrap().len();
    obj["spec"]["pad"] = json!("x".repeat(size.saturating_sub(base)));
    serde_json::to_vec(&obj).unwrap()
}

/// The Reconcile request of the benches: the object of about `size` bytes.
pub(crate) fn request(size: usize) -> ReconcileRequest {
    ReconcileRequest {
        children: Default::default(),
        implementation: "Echo".into(),
        object: object(size),
        extensions: vec![],
    }
}

//! Finalize support is inferred: overriding `Plugin::finalize` is the only
//! thing a plugin does to be called before its objects are deleted.

use std::time::Duration;

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{Capability, FinalizeRequest, GetInfoRequest, Outcome};
use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response, Server};
use serde_json::json;
use tokio::sync::oneshot;

/// Overrides `finalize`, and does nothing else for it.
struct Tables;

impl Plugin for Tables {
    async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
        Ok(Response::ok())
    }

    async fn finalize(&self, request: Request) -> Result<Response, BoxError> {
        Ok(Response::retry(Duration::from_secs(2))
            .message(format!("dropping table {}", request.name())))
    }
}

/// Keeps the default `finalize`.
struct NoCleanUp;

impl Plugin for NoCleanUp {
    async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
        Ok(Response::ok())
    }
}

/// Forwards to another plugin: it finalizes exactly when that one does.
struct Logged<P>(P);

impl<P: Plugin> Plugin for Logged<P> {
    fn reconcile(
        &self,
        request: Request,
    ) -> impl Future<Output = Result<Response, BoxError>> + Send {
        self.0.reconcile(request)
    }

    fn finalize(
        &self,
        request: Request,
    ) -> impl Future<Output = Result<Response, BoxError>> + Send {
        self.0.finalize(request)
    }
}

fn info(name: &str) -> PluginInfo {
    PluginInfo::new(name, "1.0.0").offer(Offer::new("myorg.org", "DatabaseTable", "Tables"))
}

/// Serves `plugin` on a fresh socket dir and calls GetInfo; `finalize`,
/// when given, is sent as a Finalize request for an object of that name.
async fn serve_and_ask<P: Plugin>(
    name: &str,
    plugin: P,
    finalize: Option<&str>,
) -> (Vec<i32>, Option<(i32, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(info(name), plugin, dir.path());
    let socket = server.socket_path();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    while !socket.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut client = PluginClient::new(kplug_proto::socket::channel(&socket));
    let capabilities = client
        .get_info(GetInfoRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities;
    let mut answer = None;
    if let Some(object) = finalize {
        let response = client
            .finalize(FinalizeRequest {
                children: Default::default(),
                implementation: "Tables".into(),
                object: serde_json::to_vec(&json!({
                    "apiVersion": "myorg.org/v1", "kind": "DatabaseTable",
                    "metadata": {"name": object, "namespace": "default"},
                }))
                .unwrap(),
                extensions: vec![],
            })
            .await
            .unwrap()
            .into_inner();
        answer = Some((response.outcome, response.message));
    }
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    (capabilities, answer)
}

const RECONCILE: i32 = Capability::Reconcile as i32;
const FINALIZE: i32 = Capability::Finalize as i32;

#[tokio::test]
async fn overriding_finalize_is_enough_to_be_called() {
    let (capabilities, answer) = serve_and_ask("tables", Tables, Some("users")).await;
    assert_eq!(capabilities, [RECONCILE, FINALIZE]);
    assert_eq!(
        answer,
        Some((Outcome::Retry as i32, "dropping table users".to_owned()))
    );
}

#[tokio::test]
async fn a_plugin_without_finalize_does_not_advertise_it() {
    let (capabilities, _) = serve_and_ask("no-clean-up", NoCleanUp, None).await;
    assert_eq!(capabilities, [RECONCILE]);
}

#[tokio::test]
async fn a_forwarding_wrapper_finalizes_when_the_wrapped_plugin_does() {
    let (capabilities, answer) =
        serve_and_ask("logged-tables", Logged(Tables), Some("orders")).await;
    assert_eq!(capabilities, [RECONCILE, FINALIZE]);
    assert_eq!(
        answer,
        Some((Outcome::Retry as i32, "dropping table orders".to_owned()))
    );
    let (capabilities, _) = serve_and_ask("logged-none", Logged(NoCleanUp), None).await;
    assert_eq!(capabilities, [RECONCILE]);
}

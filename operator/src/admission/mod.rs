//! Admission: the validating and mutating webhooks the operator serves over
//! HTTPS (`--webhook-addr`), which ask plugins to `Validate` and `Default`
//! objects of the managed kind and of its extension kinds as they are
//! created and changed (docs/protocol.md, "Admission: Validate and
//! Default").
//!
//! - `/mutate` asks each plugin ([`asked`]) for its defaults, in order,
//!   checks each patch's paths ([`patch`]) and answers with the combined
//!   patch. The API server then calls `/validate` with the defaulted object.
//! - `/validate` asks the plugins at once and refuses the object with their
//!   field errors ([`respond`]: a Status with reason `Invalid`, which
//!   kubectl prints field by field).
//! - A call that fails follows the plugin's failure policy, else
//!   `--webhook-failure-policy`; an object no plugin can be asked about,
//!   `--webhook-no-plugin`.
//! - The certificate ([`tls`]) comes from `--webhook-cert-dir` or is made
//!   at start; with `--webhook-self-register` the operator writes both
//!   webhook configurations itself ([`register`]).
//!
//! What a review came to is an [`outcome::Outcome`]: the one place it
//! becomes the answer, the samples of `kplug_admission_total` and the log
//! line (debug; refusals and failures at info). [`review`] decides whether
//! an object is this operator's to judge; [`calls`] makes the plugins'
//! calls under their failure policies.

mod asked;
mod calls;
mod choice;
mod config;
mod outcome;
mod patch;
mod preference;
mod register;
mod respond;
mod review;
mod tls;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kube::api::ApiResource;

pub use config::{ClientConfig, FailurePolicy, NoPlugin, WebhookConfig};

use crate::extensions::AllowList;
use crate::metrics::AdmissionMetrics;
use crate::reconcile::Settings;
use crate::registry::Registry;
use crate::target::Target;
use register::{Registration, Resource};
use review::{BadRequest, Reviewer, Webhook};
use tls::{Certificates, TlsListener};

/// The largest review read: an object and its old version, each up to the
/// API server's own limit (about 1.5 MiB in etcd), with room to spare.
const MAX_REVIEW_BYTES: usize = 16 * 1024 * 1024;

/// What [`start`] needs from the rest of the operator.
pub(crate) struct Parts<'a> {
    pub(crate) client: &'a kube::Client,
    pub(crate) target: &'a Target,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) registry: &'a Registry,
    pub(crate) settings: &'a Settings,
    pub(crate) extension_kinds: &'a AllowList,
    pub(crate) metrics: &'a mut prometheus_client::registry::Registry,
}

/// The webhooks, bound and ready to serve.
pub(crate) struct Webhooks {
    listener: TlsListener,
    app: Router,
    certificates: Certificates,
    reload_from: Option<std::path::PathBuf>,
    registration: Option<(Registration, kube::Client, String)>,
}

/// Binds `config.addr`, gets a certificate and, with self-registration,
/// writes the webhook configurations (so that a start-up that cannot is an
/// error, not a log line).
///
/// # Errors
/// [`crate::Error::Config`] naming the flag or the configuration at fault.
pub(crate) async fn start(
    config: &WebhookConfig,
    parts: Parts<'_>,
) -> Result<Webhooks, crate::Error> {
    let certificates = match (&config.cert_dir, &config.client) {
        (Some(dir), _) => Certificates::from_dir(dir),
        (None, Some(client)) => Certificates::self_signed(&client.host_names()),
        (None, None) => Err(
            "--webhook-addr needs --webhook-cert-dir, --webhook-url or --webhook-service".into(),
        ),
    }
    .map_err(crate::Error::Config)?;
    let tcp = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|e| {
            crate::Error::Config(format!(
                "--webhook-addr {}: {e}; is another process using it? Choose another address",
                config.addr
            ))
        })?;
    let listener = TlsListener::new(tcp, &certificates).map_err(crate::Error::Config)?;
    let reviewer = Reviewer {
        registry: parts.registry.clone(),
        base: parts.target.group_kind(),
        settings: parts.settings.clone(),
        namespace: parts.namespace.map(str::to_owned),
        extension_kinds: parts.extension_kinds.clone(),
        failure_policy: config.failure_policy,
        no_plugin: config.no_plugin,
        metrics: AdmissionMetrics::register(parts.metrics),
        known: Arc::default(),
    };
    let app = Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(Arc::new(reviewer));
    let registration = match (&config.client, config.self_register) {
        (Some(client_config), true) => {
            Some(self_register(config, client_config, &parts, &certificates).await?)
        }
        _ => None,
    };
    Ok(Webhooks {
        listener,
        app,
        certificates,
        reload_from: config.cert_dir.clone(),
        registration,
    })
}

/// Writes both webhook configurations (`--webhook-self-register`): the
/// registration, and the client and field manager that rewrite it when the
/// CA bundle changes.
async fn self_register(
    config: &WebhookConfig,
    client_config: &ClientConfig,
    parts: &Parts<'_>,
    certificates: &Certificates,
) -> Result<(Registration, kube::Client, String), crate::Error> {
    let mut resources = vec![resource(&parts.target.api_resource)];
    for (group, kind) in parts.extension_kinds.kinds() {
        resources.push(extension_resource(parts.client, group, kind).await?);
    }
    let registration = Registration::new(
        config,
        client_config.clone(),
        resources,
        parts.namespace.map(str::to_owned),
    );
    let ca = certificates.ca_bundle().borrow().clone();
    registration
        .apply(parts.client, &ca, &parts.settings.field_manager)
        .await?;
    tracing::info!(name = %registration.name, "webhook configurations applied");
    Ok((
        registration,
        parts.client.clone(),
        parts.settings.field_manager.clone(),
    ))
}

impl Webhooks {
    /// Serves until `shutdown`; rereads the certificate files and writes
    /// the configurations again when the CA bundle changes.
    pub(crate) async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        tracing::info!(addr = %self.listener.local(), "serving admission webhooks");
        let reload = self
            .reload_from
            .map(|dir| tokio::spawn(self.certificates.clone().reload_from(dir)));
        let reregister = self.registration.map(|(registration, client, manager)| {
            let mut ca = self.certificates.ca_bundle();
            tokio::spawn(async move {
                while ca.changed().await.is_ok() {
                    let bundle = ca.borrow_and_update().clone();
                    match registration.apply(&client, &bundle, &manager).await {
                        Ok(()) => tracing::info!(name = %registration.name, "webhook configurations updated with the new CA bundle"),
                        Err(error) => tracing::warn!(%error, "webhook configurations not updated"),
                    }
                }
            })
        });
        if let Err(error) = axum::serve(self.listener, self.app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(%error, "admission webhooks stopped");
        }
        for task in [reload, reregister].into_iter().flatten() {
            task.abort();
        }
    }
}

fn resource(ar: &ApiResource) -> Resource {
    Resource {
        group: ar.group.clone(),
        plural: ar.plural.clone(),
    }
}

/// The plural of an allowed extension kind, from discovery (already known
/// to be served: the operator checked at start).
async fn extension_resource(
    client: &kube::Client,
    group: &str,
    kind: &str,
) -> Result<Resource, crate::Error> {
    let found = kube::discovery::group(client, group)
        .await
        .ok()
        .and_then(|g| g.recommended_kind(kind));
    match found {
        Some((ar, _)) => Ok(resource(&ar)),
        None => Err(crate::Error::Config(format!(
            "--webhook-self-register: the extension kind {kind}.{group} is not served; install its CRD or remove its --extension-kind"
        ))),
    }
}

async fn validate(State(reviewer): State<Arc<Reviewer>>, body: Bytes) -> Response {
    answer(reviewer.review(Webhook::Validating, &body).await)
}

async fn mutate(State(reviewer): State<Arc<Reviewer>>, body: Bytes) -> Response {
    answer(reviewer.review(Webhook::Mutating, &body).await)
}

fn answer(
    review: Result<kube::core::admission::AdmissionReview<kube::core::DynamicObject>, BadRequest>,
) -> Response {
    match review.map(|r| serde_json::to_vec(&r)) {
        Ok(Ok(body)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the answer could not be encoded: {e}\n"),
        )
            .into_response(),
        Err(BadRequest(message)) => {
            (StatusCode::BAD_REQUEST, format!("{message}\n")).into_response()
        }
    }
}

//! What one review came to, and the one place that says what each outcome
//! means: the answer the API server gets, the samples of
//! `kplug_admission_total` and the log line (as the reconcile's `Outcome`
//! does for a reconcile).
//!
//! A review that asked plugins is counted by their parts, one sample per
//! plugin ([`Part`]); one that asked none is counted once, with an empty
//! `plugin` label.
//!
//! Admission records no Events: a refused object was never stored, so there
//! is nothing to attach one to, and the client reads the refusal itself.

use json_patch::Patch;
use kube::core::admission::AdmissionResponse;

use super::config::NoPlugin;
use super::respond::{self, PluginFieldError};
use super::review::{BadRequest, Webhook};
use crate::metrics::AdmissionMetrics;

/// The object under review, for messages: `DatabaseTable team-a/users`.
pub(super) struct Subject {
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) label: String,
}

/// One plugin's part in a review: the `outcome` label of its sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    /// Answered with no field error (`Validate`) or an empty patch
    /// (`Default`).
    Allowed,
    /// `Validate` answered with field errors.
    Invalid,
    /// `Default` answered with a patch.
    Defaulted,
    /// The call failed under the failure policy `Fail`.
    Failed,
    /// The call failed under the failure policy `Ignore`.
    Ignored,
}

impl Part {
    fn label(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Invalid => "invalid",
            Self::Defaulted => "defaulted",
            Self::Failed => "failed",
            Self::Ignored => "ignored",
        }
    }
}

/// What one review of an object this operator manages came to.
#[derive(Debug)]
pub(super) enum Outcome {
    /// The review cannot be judged (it carries no object, or the object
    /// cannot be encoded): refused, 400.
    BadRequest(String),
    /// The operator's own refusal (an edit of the recorded choice):
    /// refused, 403.
    Denied(String),
    /// An update that changes nothing a plugin judges (the operator's own
    /// finalizer patch, another controller's metadata), or of an object
    /// being deleted: admitted without asking.
    Unchanged,
    /// No plugin asks to be asked: admitted.
    NoneAsks,
    /// No plugin can be asked (`why`, for the client); `--webhook-no-plugin`
    /// says what follows.
    NoPlugin { policy: NoPlugin, why: String },
    /// The plugins were asked: each one's part, in the order asked, and
    /// what they came to.
    Asked {
        parts: Vec<(String, Part)>,
        answer: Answer,
    },
}

/// What the plugins asked came to.
#[derive(Debug)]
pub(super) enum Answer {
    /// Admitted, with the plugins' warnings and their combined patch.
    Allowed {
        warnings: Vec<String>,
        patch: Option<Patch>,
    },
    /// Refused for the plugins' field errors: 422, `Invalid`.
    Invalid {
        errors: Vec<PluginFieldError>,
        warnings: Vec<String>,
    },
    /// Refused because calls failed under the failure policy `Fail`: 503.
    Unavailable {
        refusals: Vec<String>,
        warnings: Vec<String>,
    },
}

impl Outcome {
    /// Counts the review, logs it and turns it into the answer to
    /// `response`'s request.
    pub(super) fn conclude(
        self,
        webhook: Webhook,
        subject: &Subject,
        metrics: &AdmissionMetrics,
        response: AdmissionResponse,
    ) -> AdmissionResponse {
        self.count(webhook, metrics);
        match self {
            Self::BadRequest(message) => {
                respond::refused(response, 400, "BadRequest", &message, vec![])
            }
            Self::Denied(message) => respond::refused(response, 403, "Forbidden", &message, vec![]),
            Self::Unchanged => {
                tracing::debug!(webhook = webhook.label(), object = %subject.label, "admission: spec, labels and annotations unchanged (or being deleted); allowed");
                response
            }
            Self::NoneAsks => {
                tracing::debug!(webhook = webhook.label(), object = %subject.label, "admission: no plugin asks to be asked; allowed");
                response
            }
            Self::NoPlugin { policy, why } => no_plugin(webhook, subject, policy, &why, response),
            Self::Asked { parts, answer } => {
                answer.respond(webhook, subject, parts.len(), response)
            }
        }
    }

    /// The samples of `kplug_admission_total`.
    fn count(&self, webhook: Webhook, metrics: &AdmissionMetrics) {
        let review = match self {
            Self::BadRequest(_) => "bad_request",
            Self::Denied(_) => "denied",
            Self::Unchanged | Self::NoneAsks => "allowed",
            Self::NoPlugin {
                policy: NoPlugin::Allow,
                ..
            } => "no_plugin_allowed",
            Self::NoPlugin {
                policy: NoPlugin::Deny,
                ..
            } => "no_plugin_denied",
            Self::Asked { parts, .. } => {
                for (plugin, part) in parts {
                    metrics.count(webhook.label(), plugin, part.label());
                }
                return;
            }
        };
        metrics.count(webhook.label(), "", review);
    }
}

impl Answer {
    fn respond(
        self,
        webhook: Webhook,
        subject: &Subject,
        asked: usize,
        response: AdmissionResponse,
    ) -> AdmissionResponse {
        match self {
            Self::Allowed { warnings, patch } => {
                match webhook {
                    Webhook::Validating => {
                        tracing::debug!(webhook = "validating", object = %subject.label, plugins = asked, "admission: allowed");
                    }
                    Webhook::Mutating => {
                        tracing::debug!(webhook = "mutating", object = %subject.label, patched = patch.is_some(), "admission: allowed");
                    }
                }
                allowed(response, warnings, patch)
            }
            Self::Invalid { errors, warnings } => {
                let response = respond::invalid(
                    response,
                    &subject.group,
                    &subject.kind,
                    &subject.name,
                    &errors,
                    warnings,
                );
                tracing::info!(webhook = webhook.label(), object = %subject.label, refusal = %response.result.message, "admission: refused for field errors");
                response
            }
            Self::Unavailable { refusals, warnings } => respond::refused(
                response,
                503,
                "ServiceUnavailable",
                &refusals.join("; "),
                warnings,
            ),
        }
    }
}

/// The answer when no plugin can be asked, under `--webhook-no-plugin`.
fn no_plugin(
    webhook: Webhook,
    subject: &Subject,
    policy: NoPlugin,
    why: &str,
    response: AdmissionResponse,
) -> AdmissionResponse {
    match policy {
        NoPlugin::Allow => {
            tracing::debug!(webhook = webhook.label(), object = %subject.label, why, "admission: no plugin asked; allowed");
            // Both webhooks see the object; one warning is enough.
            let warnings = match webhook {
                Webhook::Validating => vec![respond::cut(format!(
                    "no plugin was asked about {}: {why}; admitted unchecked (--webhook-no-plugin allow)",
                    subject.label
                ))],
                Webhook::Mutating => vec![],
            };
            allowed(response, warnings, None)
        }
        NoPlugin::Deny => {
            let message = format!(
                "no plugin could be asked about {}: {why}; refused (--webhook-no-plugin deny). Try again once a plugin serving it is registered",
                subject.label
            );
            tracing::info!(webhook = webhook.label(), object = %subject.label, %message, "admission: refused");
            respond::refused(response, 403, "Forbidden", &message, vec![])
        }
    }
}

/// Admits with `warnings` and `patch`; a patch that cannot be encoded (it
/// was decoded from JSON, so this does not happen) refuses, 500.
fn allowed(
    response: AdmissionResponse,
    warnings: Vec<String>,
    patch: Option<Patch>,
) -> AdmissionResponse {
    respond::allowed(response, warnings, patch).unwrap_or_else(|e| {
        respond::refused(
            AdmissionResponse::invalid(&e),
            500,
            "InternalError",
            &e,
            vec![],
        )
    })
}

/// A request body that is not an `AdmissionReview` with a request:
/// counted, logged and answered 400 by the caller.
pub(super) fn unreadable(
    webhook: Webhook,
    metrics: &AdmissionMetrics,
    message: String,
) -> BadRequest {
    metrics.count(webhook.label(), "", "bad_request");
    tracing::info!(webhook = webhook.label(), %message, "admission: bad request");
    BadRequest(message)
}

#[cfg(test)]
mod tests {
    use kube::core::DynamicObject;
    use kube::core::admission::{AdmissionRequest, AdmissionReview};
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;
    use serde_json::{Value, json};

    use super::*;

    fn response() -> AdmissionResponse {
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "myorg.org", "version": "v1alpha1", "kind": "DatabaseTable"},
                "resource": {"group": "myorg.org", "version": "v1alpha1", "resource": "databasetables"},
                "name": "users", "namespace": "shop", "operation": "CREATE",
                "userInfo": {}, "object": {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable", "metadata": {"name": "users"}},
            }
        }))
        .unwrap();
        let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
        AdmissionResponse::from(&request)
    }

    fn subject() -> Subject {
        Subject {
            group: "myorg.org".into(),
            kind: "DatabaseTable".into(),
            name: "users".into(),
            label: "DatabaseTable.myorg.org shop/users".into(),
        }
    }

    /// Concludes `outcome` for `webhook`: what the API server is sent, and
    /// the `kplug_admission_total` samples.
    fn concluded(outcome: Outcome, webhook: Webhook) -> (Value, String) {
        let mut registry = Registry::default();
        let metrics = AdmissionMetrics::register(&mut registry);
        let response = outcome.conclude(webhook, &subject(), &metrics, response());
        let mut samples = String::new();
        encode(&mut samples, &registry).unwrap();
        let sent = serde_json::to_value(response.into_review()).unwrap()["response"].clone();
        (sent, samples)
    }

    #[test]
    fn a_review_that_asked_plugins_is_counted_by_each_ones_part() {
        let (sent, samples) = concluded(
            Outcome::Asked {
                parts: vec![
                    ("sqlite".into(), Part::Allowed),
                    ("audit".into(), Part::Ignored),
                ],
                answer: Answer::Allowed {
                    warnings: vec!["plugin audit: Validate failed".into()],
                    patch: None,
                },
            },
            Webhook::Validating,
        );
        assert_eq!(sent["allowed"], true);
        assert_eq!(sent["warnings"], json!(["plugin audit: Validate failed"]));
        assert!(
            samples.contains(
                r#"kplug_admission_total{webhook="validating",plugin="sqlite",outcome="allowed"} 1"#
            ),
            "{samples}"
        );
        assert!(
            samples.contains(
                r#"kplug_admission_total{webhook="validating",plugin="audit",outcome="ignored"} 1"#
            ),
            "{samples}"
        );
        assert!(!samples.contains(r#"plugin="""#), "{samples}");
    }

    #[test]
    fn a_review_that_asked_none_is_counted_once_with_an_empty_plugin() {
        let no_plugin = |policy| Outcome::NoPlugin {
            policy,
            why: "no ready plugin serves DatabaseTable.myorg.org".into(),
        };
        let (sent, samples) = concluded(no_plugin(NoPlugin::Deny), Webhook::Validating);
        assert_eq!(sent["allowed"], false);
        assert_eq!(sent["status"]["code"], 403);
        assert_eq!(sent["status"]["reason"], "Forbidden");
        let message = sent["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("no plugin could be asked about DatabaseTable.myorg.org shop/users: no ready plugin serves")
                && message.contains("(--webhook-no-plugin deny)"),
            "{message}"
        );
        assert!(
            samples.contains(
                r#"kplug_admission_total{webhook="validating",plugin="",outcome="no_plugin_denied"} 1"#
            ),
            "{samples}"
        );
        // Both webhooks see the object: only the validating one warns.
        let (sent, samples) = concluded(no_plugin(NoPlugin::Allow), Webhook::Mutating);
        assert_eq!(sent["allowed"], true);
        assert!(sent.get("warnings").is_none(), "{sent}");
        assert!(
            samples.contains(
                r#"kplug_admission_total{webhook="mutating",plugin="",outcome="no_plugin_allowed"} 1"#
            ),
            "{samples}"
        );
        let (sent, _) = concluded(no_plugin(NoPlugin::Allow), Webhook::Validating);
        assert_eq!(sent["warnings"].as_array().map(Vec::len), Some(1), "{sent}");
    }

    #[test]
    fn refusals_carry_their_code_and_every_failure() {
        let (sent, samples) = concluded(
            Outcome::Asked {
                parts: vec![("a".into(), Part::Failed), ("b".into(), Part::Failed)],
                answer: Answer::Unavailable {
                    refusals: vec!["a is down".into(), "b is down".into()],
                    warnings: vec![],
                },
            },
            Webhook::Validating,
        );
        assert_eq!(sent["status"]["code"], 503);
        assert_eq!(sent["status"]["reason"], "ServiceUnavailable");
        assert_eq!(sent["status"]["message"], "a is down; b is down");
        assert!(
            samples.contains(
                r#"kplug_admission_total{webhook="validating",plugin="b",outcome="failed"} 1"#
            ),
            "{samples}"
        );
        let (sent, samples) = concluded(
            Outcome::BadRequest("the review carries no object".into()),
            Webhook::Mutating,
        );
        assert_eq!(sent["status"]["code"], 400);
        assert_eq!(sent["status"]["reason"], "BadRequest");
        assert!(
            samples.contains(
                r#"kplug_admission_total{webhook="mutating",plugin="",outcome="bad_request"} 1"#
            ),
            "{samples}"
        );
        let (sent, _) = concluded(
            Outcome::Denied("an edit of the choice".into()),
            Webhook::Validating,
        );
        assert_eq!(sent["status"]["code"], 403);
    }
}

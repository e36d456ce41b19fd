//! The answers the webhooks give the API server: allowed (with a patch and
//! warnings), invalid (the plugins' field errors), or refused (a failure).
//!
//! Field errors go out as a Status with reason `Invalid` and one cause per
//! error, so that kubectl prints each one as Kubernetes prints its own
//! validation errors (`The DatabaseTable "t" is invalid: spec.columns[1].type:
//! Invalid value: "varchar2": ... (plugin sqlite)`). kubectl shows only the
//! causes of an `Invalid` status, so each cause names its plugin.

use json_patch::Patch;
use kplug_proto::limits::{MAX_WARNING_CHARS, truncate_message};
use kplug_proto::v1::FieldError;
use kube::core::Status;
use kube::core::admission::AdmissionResponse;
use kube::core::response::{StatusCause, StatusDetails};

/// One plugin's field error.
#[derive(Clone, Debug)]
pub(crate) struct PluginFieldError {
    /// The plugin that refused.
    pub(crate) plugin: String,
    /// What it said.
    pub(crate) error: FieldError,
}

impl PluginFieldError {
    /// `Invalid value: "varchar2": <message> (plugin sqlite)`, as Kubernetes
    /// words its own field errors; without a value, the message alone.
    fn message(&self) -> String {
        let message = truncate_message(&self.error.message);
        if self.error.value.is_empty() {
            format!("{message} (plugin {})", self.plugin)
        } else {
            format!(
                "Invalid value: {}: {message} (plugin {})",
                truncate_message(&self.error.value),
                self.plugin
            )
        }
    }

    /// `spec.columns[1].type: Invalid value: ...`, for the status message
    /// and the log.
    fn line(&self) -> String {
        if self.error.path.is_empty() {
            self.message()
        } else {
            format!("{}: {}", self.error.path, self.message())
        }
    }
}

/// A warning of `plugin`, cut to what the API server passes on.
pub(crate) fn warning(plugin: &str, text: &str) -> String {
    cut(format!("plugin {plugin}: {text}"))
}

/// `text` cut to what the API server passes on.
pub(crate) fn cut(text: String) -> String {
    if text.chars().count() <= MAX_WARNING_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_WARNING_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Admits, with `warnings` and the combined `patch` (if any).
///
/// # Errors
/// The patch could not be serialized (it was decoded from JSON, so this
/// does not happen); the caller refuses the object then.
pub(crate) fn allowed(
    response: AdmissionResponse,
    warnings: Vec<String>,
    patch: Option<Patch>,
) -> Result<AdmissionResponse, String> {
    let mut response = match patch {
        Some(patch) => response
            .with_patch(patch)
            .map_err(|e| format!("the combined Default patch could not be encoded: {e}"))?,
        None => response,
    };
    response.warnings = (!warnings.is_empty()).then_some(warnings);
    Ok(response)
}

/// Refuses `name` (of `kind` in `group`) for the plugins' field errors.
pub(crate) fn invalid(
    response: AdmissionResponse,
    group: &str,
    kind: &str,
    name: &str,
    errors: &[PluginFieldError],
    warnings: Vec<String>,
) -> AdmissionResponse {
    let message = errors
        .iter()
        .map(PluginFieldError::line)
        .collect::<Vec<_>>()
        .join("; ");
    let causes = errors
        .iter()
        .map(|e| StatusCause {
            reason: if e.error.value.is_empty() {
                "FieldValueRequired".into()
            } else {
                "FieldValueInvalid".into()
            },
            message: e.message(),
            field: e.error.path.clone(),
        })
        .collect();
    let mut response = response.deny(&message);
    response.result = Status::failure(&message, "Invalid")
        .with_code(422)
        .with_details(StatusDetails {
            name: name.to_owned(),
            group: group.to_owned(),
            kind: kind.to_owned(),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        });
    response.warnings = (!warnings.is_empty()).then_some(warnings);
    response
}

/// Refuses the object with `message` (a failed call under the Fail policy,
/// no plugin under `--webhook-no-plugin deny`): `code` and `reason` as the
/// API server's own errors (kubectl prints `Error from server (reason)`).
pub(crate) fn refused(
    response: AdmissionResponse,
    code: u16,
    reason: &str,
    message: &str,
    warnings: Vec<String>,
) -> AdmissionResponse {
    let mut response = response.deny(message);
    response.result = Status::failure(message, reason).with_code(code);
    response.warnings = (!warnings.is_empty()).then_some(warnings);
    response
}

#[cfg(test)]
mod tests {
    use kube::core::DynamicObject;
    use kube::core::admission::{AdmissionRequest, AdmissionReview};
    use serde_json::{Value, json};

    use super::*;

    fn response() -> AdmissionResponse {
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "myorg.org", "version": "v1alpha1", "kind": "DatabaseTable"},
                "resource": {"group": "myorg.org", "version": "v1alpha1", "resource": "databasetables"},
                "name": "users", "namespace": "default", "operation": "CREATE",
                "userInfo": {}, "object": {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable", "metadata": {"name": "users"}},
            }
        }))
        .unwrap();
        let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
        AdmissionResponse::from(&request)
    }

    fn sent(response: AdmissionResponse) -> Value {
        serde_json::to_value(response.into_review()).unwrap()["response"].clone()
    }

    #[test]
    fn field_errors_become_an_invalid_status_with_one_cause_each() {
        let errors = [
            PluginFieldError {
                plugin: "sqlite".into(),
                error: FieldError {
                    path: "spec.columns[1].type".into(),
                    value: "\"varchar2\"".into(),
                    message: "unknown type; use one of: int32, string".into(),
                },
            },
            PluginFieldError {
                plugin: "audit".into(),
                error: FieldError {
                    path: String::new(),
                    value: String::new(),
                    message: "needs an owner label".into(),
                },
            },
        ];
        let r = sent(invalid(
            response(),
            "myorg.org",
            "DatabaseTable",
            "users",
            &errors,
            vec![],
        ));
        assert_eq!(r["uid"], "u-1");
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["reason"], "Invalid");
        assert_eq!(r["status"]["code"], 422);
        assert_eq!(r["status"]["details"]["kind"], "DatabaseTable");
        assert_eq!(r["status"]["details"]["name"], "users");
        let causes = r["status"]["details"]["causes"].as_array().unwrap();
        assert_eq!(causes[0]["field"], "spec.columns[1].type");
        assert_eq!(
            causes[0]["message"],
            "Invalid value: \"varchar2\": unknown type; use one of: int32, string (plugin sqlite)"
        );
        assert_eq!(causes[1]["reason"], "FieldValueRequired");
        assert_eq!(causes[1]["message"], "needs an owner label (plugin audit)");
        let message = r["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("spec.columns[1].type: Invalid value: \"varchar2\""),
            "{message}"
        );
        assert!(
            message.ends_with("; needs an owner label (plugin audit)"),
            "{message}"
        );
        assert!(r.get("patch").is_none());
    }

    #[test]
    fn allowed_carries_the_patch_and_warnings() {
        let patch: Patch = serde_json::from_value(
            json!([{"op": "add", "path": "/spec/storageEngine", "value": "InnoDB"}]),
        )
        .unwrap();
        let r = sent(
            allowed(
                response(),
                vec![warning("mariadb", "defaulted")],
                Some(patch),
            )
            .unwrap(),
        );
        assert_eq!(r["allowed"], true);
        assert_eq!(r["patchType"], "JSONPatch");
        assert_eq!(r["warnings"], json!(["plugin mariadb: defaulted"]));
        // kube sends the bytes as a JSON array, which the API server reads
        // as well as base64.
        let patch: Vec<u8> = serde_json::from_value(r["patch"].clone()).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&patch).unwrap(),
            json!([{"op": "add", "path": "/spec/storageEngine", "value": "InnoDB"}])
        );
        let plain = sent(allowed(response(), vec![], None).unwrap());
        assert!(
            plain.get("patch").is_none() && plain.get("warnings").is_none(),
            "{plain}"
        );
    }

    #[test]
    fn refusals_carry_code_reason_and_message() {
        let r = sent(refused(
            response(),
            503,
            "ServiceUnavailable",
            "plugin sqlite is down",
            vec!["w".into()],
        ));
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["code"], 503);
        assert_eq!(r["status"]["reason"], "ServiceUnavailable");
        assert_eq!(r["status"]["message"], "plugin sqlite is down");
        assert_eq!(r["warnings"], json!(["w"]));
    }

    #[test]
    fn long_warnings_are_cut() {
        let w = warning("p", &"x".repeat(1000));
        assert_eq!(w.chars().count(), MAX_WARNING_CHARS);
        assert!(w.starts_with("plugin p: x") && w.ends_with('…'));
    }
}

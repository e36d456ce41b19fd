//! A warning at `kubectl apply` for a preference that no plugin offers.
//!
//! The choice of an implementation is sticky: an object whose
//! `spec.preferredImplementation` no plugin offers (a typo, most often:
//! `Helo`) is served by another implementation and stays on it, Ready. Its
//! `PluginAvailable` condition and a Warning Event say so afterwards
//! (`crate::preference`); with the webhooks on, the person applying it is
//! told at once, while the fix is one edit away.
//!
//! # Guarantees
//! - A warning only: the object is admitted as the plugins answered.
//! - Only when the preference is new (a create, or an edit of the field),
//!   and only once some implementation was offered since the operator
//!   started (before that, a plugin that is still registering cannot be
//!   told from a typo).

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};

use super::asked::preferred;
use super::respond;
use crate::reconcile::Settings;

/// Adds the warning to an admitted `response` when the object's preference
/// is offered by no implementation in `ever_offered` (see the
/// [module docs](self)).
pub(super) fn warn_if_not_offered(
    req: &AdmissionRequest<DynamicObject>,
    settings: &Settings,
    ever_offered: &[String],
    mut response: AdmissionResponse,
) -> AdmissionResponse {
    if !response.allowed || ever_offered.is_empty() {
        return response;
    }
    let Some(object) = &req.object else {
        return response;
    };
    let field = &settings.preferred_field;
    let Some(wanted) = preferred(object, field) else {
        return response;
    };
    let unchanged = req
        .old_object
        .as_ref()
        .is_some_and(|old| preferred(old, field) == Some(wanted));
    if unchanged || ever_offered.iter().any(|o| o.eq_ignore_ascii_case(wanted)) {
        return response;
    }
    let warning = respond::cut(format!(
        "{} {wanted:?} is offered by no plugin (offered: {}): the object will be served by \
         another implementation and stay on it. Fix the spelling; to move an object \
         already served, annotate it kplug.io/reselect",
        field.join("."),
        ever_offered.join(", ")
    ));
    response.warnings.get_or_insert_with(Vec::new).push(warning);
    response
}

#[cfg(test)]
mod tests {
    use kube::core::admission::AdmissionReview;
    use serde_json::json;

    use super::*;

    fn request(preferred: &str, old: Option<&str>) -> AdmissionRequest<DynamicObject> {
        let object = |p: &str| {
            json!({"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
                   "metadata": {"name": "t", "namespace": "ns"},
                   "spec": {"preferredImplementation": p}})
        };
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
                "kind": {"group": "myorg.org", "version": "v1alpha1", "kind": "DatabaseTable"},
                "resource": {"group": "myorg.org", "version": "v1alpha1", "resource": "databasetables"},
                "name": "t", "namespace": "ns", "userInfo": {},
                "object": object(preferred),
                "oldObject": old.map(object),
            },
        }))
        .unwrap();
        review.try_into().unwrap()
    }

    fn warnings(req: &AdmissionRequest<DynamicObject>, offered: &[&str]) -> Vec<String> {
        let offered: Vec<String> = offered.iter().map(|s| (*s).to_owned()).collect();
        let response = AdmissionResponse::from(req);
        warn_if_not_offered(req, &Settings::default(), &offered, response)
            .warnings
            .unwrap_or_default()
    }

    #[test]
    fn a_preference_no_plugin_offers_is_warned_about_once() {
        let typo = warnings(&request("SQLlite", None), &["SQLite", "MariaDB"]);
        assert_eq!(typo.len(), 1, "{typo:?}");
        for part in ["\"SQLlite\"", "SQLite, MariaDB", "kplug.io/reselect"] {
            assert!(typo[0].contains(part), "{part} not in {}", typo[0]);
        }
        // Offered (in any case), unchanged by an edit, or nothing offered yet.
        assert!(warnings(&request("sqlite", None), &["SQLite"]).is_empty());
        assert!(warnings(&request("SQLlite", Some("SQLlite")), &["SQLite"]).is_empty());
        assert!(warnings(&request("SQLlite", None), &[]).is_empty());
        // A new typo in an edit is.
        assert_eq!(
            warnings(&request("SQLlite", Some("SQLite")), &["SQLite"]).len(),
            1
        );
    }
}

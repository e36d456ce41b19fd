//! Kubernetes Events, so failures show in `kubectl describe` and not only
//! in a log line.
//!
//! Events are published with the `events.k8s.io/v1` API. The operator needs:
//!
//! ```yaml
//! - apiGroups: ["events.k8s.io"]
//!   resources: ["events"]
//!   verbs: ["create", "patch"]
//! ```
//!
//! The operator's own Events are reported as its controller name
//! (`kplug-operator`); those a plugin returns as `kplug-operator/<plugin>`,
//! so that a reader sees which plugin spoke.
//!
//! Registry events (plugin registered, replaced, gone, refused) are about no
//! resource in particular; they are recorded on the operator's own Pod when
//! `POD_NAME` and `POD_NAMESPACE` are set (the Deployment in `manifests/`
//! sets them with the downward API), and only logged otherwise.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Longest note the Events API accepts.
const MAX_NOTE: usize = 1024;

/// Publishes Events; failures to publish are logged, never fatal.
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    controller: String,
    recorder: Recorder,
    operator_pod: Option<ObjectReference>,
    // One recorder per plugin, reporting as `<controller>/<plugin>`, so that
    // `kubectl describe` says which plugin an Event came from.
    plugins: Arc<Mutex<HashMap<String, Recorder>>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("operator_pod", &self.operator_pod)
            .finish_non_exhaustive()
    }
}

/// Severity of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Expected.
    Normal,
    /// Needs attention.
    Warning,
}

impl Events {
    /// Events reported as `controller` (e.g. `kplug-operator`), with the
    /// operator Pod taken from `POD_NAME`/`POD_NAMESPACE` when set.
    pub fn new(client: kube::Client, controller: &str) -> Self {
        let pod_name = std::env::var("POD_NAME").ok().filter(|s| !s.is_empty());
        let pod_namespace = std::env::var("POD_NAMESPACE")
            .ok()
            .filter(|s| !s.is_empty());
        let operator_pod = match (pod_name, pod_namespace) {
            (Some(name), Some(namespace)) => Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name),
                namespace: Some(namespace),
                ..ObjectReference::default()
            }),
            _ => None,
        };
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            controller: controller.to_owned(),
            operator_pod,
            plugins: Arc::default(),
        }
    }

    /// Records an event that `plugin` returned, reported as
    /// `<controller>/<plugin>` (e.g. `kplug-operator/postgresql`): the
    /// "From" of `kubectl describe`.
    pub async fn publish_from_plugin(
        &self,
        plugin: &str,
        regarding: &ObjectReference,
        severity: Severity,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        let recorder = self
            .plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(plugin.to_owned())
            .or_insert_with(|| {
                Recorder::new(
                    self.client.clone(),
                    Reporter {
                        controller: format!("{}/{plugin}", self.controller),
                        instance: std::env::var("POD_NAME").ok(),
                    },
                )
            })
            .clone();
        publish_with(&recorder, regarding, severity, reason, action, note.into()).await;
    }

    /// Records an event about `regarding`.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        severity: Severity,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        publish_with(
            &self.recorder,
            regarding,
            severity,
            reason,
            action,
            note.into(),
        )
        .await;
    }

    /// Records an event about the operator itself (its Pod), if known.
    pub async fn publish_operator(
        &self,
        severity: Severity,
        reason: &str,
        note: impl Into<String>,
    ) {
        if let Some(pod) = &self.operator_pod {
            self.publish(pod, severity, reason, "Registry", note).await;
        }
    }
}

/// Publishes one event with `recorder`; a failure is logged.
async fn publish_with(
    recorder: &Recorder,
    regarding: &ObjectReference,
    severity: Severity,
    reason: &str,
    action: &str,
    note: String,
) {
    let note = truncate(note);
    let event = Event {
        type_: match severity {
            Severity::Normal => EventType::Normal,
            Severity::Warning => EventType::Warning,
        },
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, regarding).await {
        tracing::warn!(
            %error,
            reason,
            object = regarding.name.as_deref().unwrap_or_default(),
            "could not record an Event (does the operator's RBAC allow creating events.k8s.io events?)"
        );
    }
}

fn truncate(mut note: String) -> String {
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    note
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_notes_are_cut_on_a_char_boundary() {
        let s = "é".repeat(1000);
        let cut = super::truncate(s);
        assert!(cut.len() <= super::MAX_NOTE);
        assert!(cut.ends_with("..."));
        assert_eq!(super::truncate("short".into()), "short");
    }
}

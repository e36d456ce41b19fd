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
//! it is known (the binary reads `POD_NAME` and `POD_NAMESPACE`, which the
//! Deployment in `manifests/` sets with the downward API), and only logged
//! otherwise.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Longest note the Events API accepts.
const MAX_NOTE: usize = 1024;

/// Publishes Events; failures to publish are logged, never fatal.
#[derive(Clone)]
pub(crate) struct Events {
    client: kube::Client,
    reporter: Reporter,
    recorder: Recorder,
    operator_pod: Option<ObjectReference>,
    // One recorder per plugin, reporting as `<controller>/<plugin>`, so that
    // `kubectl describe` says which plugin an Event came from.
    plugins: Arc<Mutex<HashMap<String, Recorder>>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("reporter", &self.reporter)
            .field("operator_pod", &self.operator_pod)
            .finish_non_exhaustive()
    }
}

impl Events {
    /// Events reported as `reporter`; registry Events (about no resource in
    /// particular) are recorded on `operator_pod` when it is known.
    pub(crate) fn new(
        client: kube::Client,
        reporter: Reporter,
        operator_pod: Option<ObjectReference>,
    ) -> Self {
        Self {
            recorder: Recorder::new(client.clone(), reporter.clone()),
            client,
            reporter,
            operator_pod,
            plugins: Arc::default(),
        }
    }

    /// Records an event that `plugin` returned, reported as
    /// `<controller>/<plugin>` (e.g. `kplug-operator/postgresql`): the
    /// "From" of `kubectl describe`.
    pub(crate) async fn publish_from_plugin(
        &self,
        plugin: &str,
        regarding: &ObjectReference,
        type_: EventType,
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
                        controller: format!("{}/{plugin}", self.reporter.controller),
                        instance: self.reporter.instance.clone(),
                    },
                )
            })
            .clone();
        publish_with(&recorder, regarding, type_, reason, action, note.into()).await;
    }

    /// Records an event about `regarding`.
    pub(crate) async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        publish_with(
            &self.recorder,
            regarding,
            type_,
            reason,
            action,
            note.into(),
        )
        .await;
    }

    /// Records an event about the operator itself (its Pod), if known.
    pub(crate) async fn publish_operator(
        &self,
        type_: EventType,
        reason: &str,
        note: impl Into<String>,
    ) {
        if let Some(pod) = &self.operator_pod {
            self.publish(pod, type_, reason, "Registry", note).await;
        }
    }
}

/// Publishes one event with `recorder`; a failure is logged.
async fn publish_with(
    recorder: &Recorder,
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let note = truncate(note);
    let event = Event {
        type_,
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

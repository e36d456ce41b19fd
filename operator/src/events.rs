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
//! Repeats are aggregated as client-go's event broadcaster does: an Event
//! is written on its first and second occurrence (the second makes it a
//! series), and then counted here and written again only once per
//! [`SERIES_HEARTBEAT`] while it keeps happening ([`Series`]). A retry loop
//! that fails the same way every few seconds costs two writes, not one per
//! try. The count on the API server is then what was written; the
//! operator's metrics and logs count every occurrence.
//!
//! Registry events (plugin registered, replaced, gone, refused) are about no
//! resource in particular; they are recorded on the operator's own Pod when
//! it is known (the binary reads `POD_NAME` and `POD_NAMESPACE`, which the
//! Deployment in `manifests/` sets with the downward API), and only logged
//! otherwise.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kplug_checks::response::Severity;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Longest note the Events API accepts.
const MAX_NOTE: usize = 1024;

/// How often an Event that keeps happening is written again (client-go's
/// event series heartbeat).
pub(crate) const SERIES_HEARTBEAT: Duration = Duration::from_secs(30 * 60);

/// One kind of Event about one object, as kube's recorder folds them into
/// a series: who reports it, about what, its type, reason and action.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    controller: String,
    regarding: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    type_: &'static str,
    reason: String,
    action: String,
}

/// How often each kind of Event happened, and when it was last written.
#[derive(Debug, Default)]
pub(crate) struct Series {
    seen: Mutex<HashMap<SeriesKey, (u64, Instant)>>,
}

impl Series {
    /// Counts one occurrence; whether it is to be written: the first and
    /// second, then one per [`SERIES_HEARTBEAT`].
    fn occurs(&self, key: SeriesKey, now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        // Kinds not seen for a heartbeat start over; dropped when the map
        // grows, so that it holds what recent reconciles said.
        if seen.len() >= 1024 && seen.len().is_power_of_two() {
            seen.retain(|_, (_, last)| now.duration_since(*last) < SERIES_HEARTBEAT);
        }
        let (count, last_written) = seen.entry(key).or_insert((0, now));
        *count += 1;
        if *count <= 2 || now.duration_since(*last_written) >= SERIES_HEARTBEAT {
            *last_written = now;
            return true;
        }
        false
    }
}

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
    series: Arc<Series>,
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
            series: Arc::default(),
        }
    }

    /// Records an event that `plugin` returned, reported as
    /// `<controller>/<plugin>` (e.g. `kplug-operator/postgresql`): the
    /// "From" of `kubectl describe`.
    pub(crate) async fn publish_from_plugin(
        &self,
        plugin: &str,
        regarding: &ObjectReference,
        severity: Severity,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        let type_ = match severity {
            Severity::Normal => EventType::Normal,
            Severity::Warning => EventType::Warning,
        };
        let controller = format!("{}/{plugin}", self.reporter.controller);
        if !self.occurs(&controller, regarding, type_, reason, action) {
            return;
        }
        let recorder = self
            .plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(plugin.to_owned())
            .or_insert_with(|| {
                Recorder::new(
                    self.client.clone(),
                    Reporter {
                        controller,
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
        if !self.occurs(&self.reporter.controller, regarding, type_, reason, action) {
            return;
        }
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

    /// Counts one occurrence of an Event; whether to write it ([`Series`]).
    fn occurs(
        &self,
        controller: &str,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
    ) -> bool {
        let key = SeriesKey {
            controller: controller.to_owned(),
            regarding: (
                regarding.namespace.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
                regarding.kind.clone(),
            ),
            type_: match type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            },
            reason: reason.to_owned(),
            action: action.to_owned(),
        };
        let written = self.series.occurs(key, Instant::now());
        if !written {
            tracing::debug!(
                reason,
                object = regarding.name.as_deref().unwrap_or_default(),
                "a repeated Event, counted and not written"
            );
        }
        written
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
    use super::*;

    fn key(reason: &str) -> SeriesKey {
        SeriesKey {
            controller: "kplug-operator".into(),
            regarding: (Some("ns".into()), Some("t".into()), Some("u1".into()), None),
            type_: "Warning",
            reason: reason.into(),
            action: "Reconcile".into(),
        }
    }

    #[test]
    fn a_repeat_is_written_twice_then_once_per_heartbeat() {
        let series = Series::default();
        let start = Instant::now();
        let written: Vec<bool> = (0..5)
            .map(|i| series.occurs(key("ReconcileFailed"), start + Duration::from_secs(i)))
            .collect();
        assert_eq!(written, [true, true, false, false, false]);
        assert!(series.occurs(
            key("ReconcileFailed"),
            start + SERIES_HEARTBEAT + Duration::from_secs(5)
        ));
        assert!(!series.occurs(
            key("ReconcileFailed"),
            start + SERIES_HEARTBEAT + Duration::from_secs(6)
        ));
        assert!(
            series.occurs(key("Other"), start),
            "another reason is another series"
        );
    }

    #[test]
    fn long_notes_are_cut_on_a_char_boundary() {
        let s = "é".repeat(1000);
        let cut = super::truncate(s);
        assert!(cut.len() <= super::MAX_NOTE);
        assert!(cut.ends_with("..."));
        assert_eq!(super::truncate("short".into()), "short");
    }
}

//! The reconciles' metrics ([`ReconcileMetrics`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::HookMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadyLabels {
    ready: &'static str,
}

/// Objects of the managed kind by their `Ready` condition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadyCounts {
    /// `Ready` is `True`.
    pub(crate) ready: u64,
    /// `Ready` is `False`.
    pub(crate) not_ready: u64,
    /// No `Ready` condition yet (never reconciled), or `Unknown`.
    pub(crate) unknown: u64,
}

impl ReadyCounts {
    /// Counts one object whose `Ready` status is `status` (`None`: none).
    pub(crate) fn add(&mut self, status: Option<&str>) {
        match status {
            Some("True") => self.ready += 1,
            Some("False") => self.not_ready += 1,
            _ => self.unknown += 1,
        }
    }
}

/// Where `kplug_objects` is read from at each scrape: the controller's cache,
/// set by [`crate::Delegate::wakeups`].
type CountObjects = Arc<dyn Fn() -> ReadyCounts + Send + Sync>;

/// `kplug_objects`, computed at each scrape, so that it is what the objects
/// say (whoever wrote it) and never drifts from deleted objects: the sum
/// over the caches of every kind the process manages, one source per kind.
#[derive(Clone, Default)]
struct Objects(Arc<Mutex<BTreeMap<String, CountObjects>>>);

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<String> = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        f.debug_struct("Objects").field("kinds", &kinds).finish()
    }
}

impl Collector for Objects {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sources: Vec<CountObjects> = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        // Before a controller runs, there is nothing to say (not zero).
        if sources.is_empty() {
            return Ok(());
        }
        let mut counts = ReadyCounts::default();
        for count in sources {
            let more = count();
            counts.ready += more.ready;
            counts.not_ready += more.not_ready;
            counts.unknown += more.unknown;
        }
        let family = Family::<ReadyLabels, Gauge>::default();
        for (ready, n) in [
            ("true", counts.ready),
            ("false", counts.not_ready),
            ("unknown", counts.unknown),
        ] {
            family
                .get_or_create(&ReadyLabels { ready })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        let metric = encoder.encode_descriptor(
            "kplug_objects",
            "Objects of the managed kind by their Ready condition (unknown: not reconciled yet)",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)
    }
}

/// The reconciles' metrics. Cheap to clone; clones share the values.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReconcileMetrics {
    reconciles: Family<OutcomeLabels, Counter>,
    extension_watches: Gauge,
    extension_watches_by_kind: Arc<Mutex<BTreeMap<String, usize>>>,
    objects: Objects,
    hooks: HookMetrics,
}

impl ReconcileMetrics {
    /// Creates the reconciles' metrics and registers them in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "kplug_reconcile",
            "Reconciles by outcome and the plugin that decided it",
            metrics.reconciles.clone(),
        );
        registry.register(
            "kplug_extension_watches",
            "Extension kinds watched (allow-listed kinds that some object references)",
            metrics.extension_watches.clone(),
        );
        registry.register_collector(Box::new(metrics.objects.clone()));
        Self {
            hooks: HookMetrics::register(registry),
            ..metrics
        }
    }

    /// The hooks' metrics.
    pub(crate) fn hooks(&self) -> &HookMetrics {
        &self.hooks
    }

    /// Counts one reconcile outcome, decided by `plugin` (empty: none).
    pub(crate) fn count_reconcile(&self, outcome: &'static str, plugin: &str) {
        self.reconciles
            .get_or_create(&OutcomeLabels {
                outcome,
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// Sets the number of extension kinds watched for the base `kind`
    /// (the gauge is the sum over the kinds of the process).
    pub(crate) fn set_extension_watches(&self, kind: &str, n: usize) {
        let mut watches = self
            .extension_watches_by_kind
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        watches.insert(kind.to_owned(), n);
        let total: usize = watches.values().sum();
        self.extension_watches
            .set(i64::try_from(total).unwrap_or(i64::MAX));
    }

    /// Reads the objects of `kind` for `kplug_objects` from `count` at each
    /// scrape. The first call per kind wins: one delegate, one cache.
    pub(crate) fn count_objects_with(
        &self,
        kind: &str,
        count: impl Fn() -> ReadyCounts + Send + Sync + 'static,
    ) {
        self.objects
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(kind.to_owned())
            .or_insert_with(|| Arc::new(count));
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode;
    use super::*;

    #[test]
    fn outcomes_carry_the_plugin() {
        let mut registry = Registry::default();
        let m = ReconcileMetrics::register(&mut registry);
        m.count_reconcile("ok", "sqlite");
        m.count_reconcile("waiting", "");
        let text = encode(&registry);
        assert!(
            text.contains("kplug_reconcile_total{outcome=\"ok\",plugin=\"sqlite\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kplug_reconcile_total{outcome=\"waiting\",plugin=\"\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn objects_are_counted_at_each_scrape() {
        let mut registry = Registry::default();
        let m = ReconcileMetrics::register(&mut registry);
        assert!(!encode(&registry).contains("kplug_objects"));
        let objects = Arc::new(std::sync::Mutex::new(vec![Some("True"), None]));
        let seen = Arc::clone(&objects);
        m.count_objects_with("Table", move || {
            let mut counts = ReadyCounts::default();
            for status in seen.lock().unwrap().iter() {
                counts.add(*status);
            }
            counts
        });
        let text = encode(&registry);
        assert!(text.contains("kplug_objects{ready=\"true\"} 1"), "{text}");
        assert!(
            text.contains("kplug_objects{ready=\"unknown\"} 1"),
            "{text}"
        );
        objects.lock().unwrap().push(Some("False"));
        let text = encode(&registry);
        assert!(text.contains("kplug_objects{ready=\"false\"} 1"), "{text}");
    }
}

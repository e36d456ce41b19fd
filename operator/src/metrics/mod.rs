//! Prometheus metrics, registered into the caller's
//! [`prometheus_client::registry::Registry`] and served on `/metrics` by the
//! binary.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `kplug_plugins_registered` | gauge | | plugins registered and ready |
//! | `kplug_plugin_up` | gauge | `plugin` | 1 while the plugin is registered and ready, 0 after it went away |
//! | `kplug_plugin_call_duration_seconds` | histogram | `plugin`, `call`, `code` | latency of calls to plugins, by gRPC outcome |
//! | `kplug_heartbeats_total` | counter | `result` | heartbeats received (`accepted`, `refused`) |
//! | `kplug_registrations_refused_total` | counter | `reason` | heartbeats refused, by reason |
//! | `kplug_reconcile_total` | counter | `outcome` | reconciles by outcome (see [`crate::reconcile::Outcome::metric`]) |
//! | `kplug_extension_watches` | gauge | | extension kinds watched |
//! | `kplug_leader` | gauge | | 1 while this replica reconciles (the binary's) |

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    plugin: String,
    call: &'static str,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

type HistogramFamily = Family<CallLabels, Histogram, fn() -> Histogram>;

/// The plugin registry's metrics. Cheap to clone; clones share the values.
#[derive(Clone)]
pub(crate) struct PluginMetrics {
    plugins_registered: Gauge,
    plugin_up: Family<PluginLabels, Gauge>,
    call_duration: HistogramFamily,
    heartbeats: Family<ResultLabels, Counter>,
    refusals: Family<ReasonLabels, Counter>,
    /// The call series of each plugin, so that they can go with it.
    call_series: Arc<Mutex<HashMap<String, HashSet<CallLabels>>>>,
}

impl std::fmt::Debug for PluginMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginMetrics").finish_non_exhaustive()
    }
}

/// 0.5 ms .. ~16 s: Unix-socket round trips are sub-millisecond, real
/// reconciles (DDL on a database) take seconds.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl PluginMetrics {
    /// Creates the registry's metrics and registers them in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            plugins_registered: Gauge::default(),
            plugin_up: Family::default(),
            call_duration: Family::new_with_constructor(call_histogram),
            heartbeats: Family::default(),
            refusals: Family::default(),
            call_series: Arc::default(),
        };
        registry.register(
            "kplug_plugins_registered",
            "Plugins registered and ready",
            metrics.plugins_registered.clone(),
        );
        registry.register(
            "kplug_plugin_up",
            "1 while the plugin is registered and ready, 0 once it went away",
            metrics.plugin_up.clone(),
        );
        registry.register(
            "kplug_plugin_call_duration_seconds",
            "Latency of calls from the operator to plugins",
            metrics.call_duration.clone(),
        );
        registry.register(
            "kplug_heartbeats",
            "Heartbeats received by the registry",
            metrics.heartbeats.clone(),
        );
        registry.register(
            "kplug_registrations_refused",
            "Heartbeats refused by the registry, by reason (e.g. ImplementationOwned: an impostor)",
            metrics.refusals.clone(),
        );
        metrics
    }

    /// Sets the number of ready plugins.
    pub(crate) fn set_plugins_registered(&self, n: usize) {
        self.plugins_registered
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Marks a plugin up or down.
    pub(crate) fn set_plugin_up(&self, plugin: &str, up: bool) {
        self.plugin_up
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .set(i64::from(up));
    }

    /// Records the latency of one call to a plugin.
    pub(crate) fn observe_call(
        &self,
        plugin: &str,
        call: &'static str,
        code: &str,
        took: Duration,
    ) {
        let labels = CallLabels {
            plugin: plugin.to_owned(),
            call,
            code: code.to_owned(),
        };
        self.call_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.call_series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(labels.plugin.clone())
            .or_default()
            .insert(labels);
    }

    /// Removes every series of `plugin` (it has been gone for the TTL), so
    /// that plugins that come and go do not grow `/metrics` for ever.
    pub(crate) fn forget_plugin(&self, plugin: &str) {
        self.plugin_up.remove(&PluginLabels {
            plugin: plugin.to_owned(),
        });
        let series = self
            .call_series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(plugin);
        for labels in series.into_iter().flatten() {
            self.call_duration.remove(&labels);
        }
    }

    /// Counts one heartbeat.
    pub(crate) fn count_heartbeat(&self, accepted: bool) {
        let result = if accepted { "accepted" } else { "refused" };
        self.heartbeats
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Counts one refused heartbeat.
    pub(crate) fn count_refusal(&self, reason: &'static str) {
        self.refusals.get_or_create(&ReasonLabels { reason }).inc();
    }
}

/// The reconciles' metrics. Cheap to clone; clones share the values.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReconcileMetrics {
    reconciles: Family<OutcomeLabels, Counter>,
    extension_watches: Gauge,
}

impl ReconcileMetrics {
    /// Creates the reconciles' metrics and registers them in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "kplug_reconcile",
            "Reconciles by outcome",
            metrics.reconciles.clone(),
        );
        registry.register(
            "kplug_extension_watches",
            "Extension kinds watched (allow-listed kinds that some object references)",
            metrics.extension_watches.clone(),
        );
        metrics
    }

    /// Counts one reconcile outcome.
    pub(crate) fn count_reconcile(&self, outcome: &'static str) {
        self.reconciles
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Sets the number of extension kinds watched.
    pub(crate) fn set_extension_watches(&self, n: usize) {
        self.extension_watches
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// The Prometheus text exposition of every metric in `registry`.
pub(crate) fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_the_documented_names() {
        let mut registry = Registry::default();
        let plugins = PluginMetrics::register(&mut registry);
        let reconciles = ReconcileMetrics::register(&mut registry);
        plugins.set_plugins_registered(2);
        plugins.set_plugin_up("postgresql", true);
        plugins.set_plugin_up("mariadb", false);
        plugins.observe_call("postgresql", "Reconcile", "ok", Duration::from_millis(3));
        reconciles.count_reconcile("ok");
        let text = encode(&registry);
        assert!(text.contains("kplug_plugins_registered 2"), "{text}");
        assert!(
            text.contains("kplug_plugin_up{plugin=\"postgresql\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kplug_plugin_up{plugin=\"mariadb\"} 0"),
            "{text}"
        );
        assert!(text.contains("kplug_plugin_call_duration_seconds_count{plugin=\"postgresql\",call=\"Reconcile\",code=\"ok\"} 1"), "{text}");
        assert!(
            text.contains("kplug_reconcile_total{outcome=\"ok\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn a_forgotten_plugin_leaves_no_series() {
        let mut registry = Registry::default();
        let m = PluginMetrics::register(&mut registry);
        m.set_plugin_up("gone", false);
        m.observe_call("gone", "Reconcile", "Ok", Duration::from_millis(3));
        m.observe_call("kept", "Reconcile", "Ok", Duration::from_millis(3));
        m.forget_plugin("gone");
        let text = encode(&registry);
        assert!(!text.contains("\"gone\""), "{text}");
        assert!(text.contains("plugin=\"kept\""), "{text}");
    }
}

//! The registry's and the plugin calls' metrics ([`PluginMetrics`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// What one call to a plugin came to: the `outcome` label of
/// `kplug_plugin_calls_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CallOutcome {
    /// Answered OK (every Probe that answered).
    Ok,
    /// Answered RETRY.
    Retry,
    /// Answered FAILED.
    Failed,
    /// Answered, but the answer broke the protocol and was not used.
    Invalid,
    /// No answer before the deadline.
    Timeout,
    /// No process, a connection that failed, or an instance draining.
    Unavailable,
    /// A gRPC error status instead of an answer.
    Error,
}

impl CallOutcome {
    /// The label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Retry => "retry",
            Self::Failed => "failed",
            Self::Invalid => "invalid",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::Error => "error",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    plugin: String,
    call: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallOutcomeLabels {
    plugin: String,
    call: &'static str,
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    protocol: &'static str,
}

/// Histogram buckets from 0.5 ms, doubling, up to the call deadline (the
/// last bucket): Unix-socket round trips are sub-millisecond, real
/// reconciles (DDL on a database) take seconds, and a call that reaches the
/// deadline is a timeout.
#[derive(Clone, Debug)]
struct Buckets(Arc<[f64]>);

impl Buckets {
    fn up_to(deadline: Duration) -> Self {
        let top = deadline.as_secs_f64().max(0.001);
        let mut buckets: Vec<f64> = std::iter::successors(Some(0.0005), |b| Some(b * 2.0))
            .take_while(|b| *b < top)
            .collect();
        buckets.push(top);
        Self(buckets.into())
    }
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

/// Every series of one plugin, so that they can go with it.
#[derive(Default)]
struct Series {
    durations: HashSet<CallLabels>,
    calls: HashSet<CallOutcomeLabels>,
}

/// The plugin registry's and the plugin calls' metrics. Cheap to clone;
/// clones share the values.
#[derive(Clone)]
pub(crate) struct PluginMetrics {
    plugins_registered: Gauge,
    plugin_up: Family<PluginLabels, Gauge>,
    calls: Family<CallOutcomeLabels, Counter>,
    call_duration: Family<CallLabels, Histogram, Buckets>,
    in_flight: Family<PluginLabels, Gauge>,
    queued: Family<PluginLabels, Gauge>,
    heartbeats: Family<ResultLabels, Counter>,
    refusals: Family<ReasonLabels, Counter>,
    series: Arc<Mutex<HashMap<String, Series>>>,
}

impl std::fmt::Debug for PluginMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginMetrics").finish_non_exhaustive()
    }
}

impl PluginMetrics {
    /// Creates the registry's metrics and registers them in `registry`,
    /// with latency buckets up to `call_deadline`, and `kplug_build_info`.
    pub(crate) fn register(registry: &mut Registry, call_deadline: Duration) -> Self {
        let metrics = Self {
            plugins_registered: Gauge::default(),
            plugin_up: Family::default(),
            calls: Family::default(),
            call_duration: Family::new_with_constructor(Buckets::up_to(call_deadline)),
            in_flight: Family::default(),
            queued: Family::default(),
            heartbeats: Family::default(),
            refusals: Family::default(),
            series: Arc::default(),
        };
        registry.register(
            "kplug_build",
            "The operator's version and the plugin protocol it speaks",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                protocol: kplug_proto::PROTOCOL,
            }),
        );
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
            "kplug_plugin_calls",
            "Calls from the operator to plugins, by outcome: ok, retry, failed (the plugin's answer), invalid (an answer that broke the protocol), timeout, unavailable, error (a gRPC error status)",
            metrics.calls.clone(),
        );
        registry.register(
            "kplug_plugin_call_duration_seconds",
            "Latency of calls from the operator to plugins; the top bucket is the call deadline",
            metrics.call_duration.clone(),
        );
        registry.register(
            "kplug_plugin_calls_in_flight",
            "Calls being served by the plugin",
            metrics.in_flight.clone(),
        );
        registry.register(
            "kplug_plugin_calls_queued",
            "Calls waiting for one of the plugin's in-flight permits (--max-in-flight)",
            metrics.queued.clone(),
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
    pub(crate) fn observe_call(&self, plugin: &str, call: &'static str, took: Duration) {
        let labels = CallLabels {
            plugin: plugin.to_owned(),
            call,
        };
        self.call_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.with_series(plugin, |series| series.durations.insert(labels));
    }

    /// Counts one call to a plugin by what it came to.
    pub(crate) fn count_call(&self, plugin: &str, call: &'static str, outcome: CallOutcome) {
        let labels = CallOutcomeLabels {
            plugin: plugin.to_owned(),
            call,
            outcome: outcome.label(),
        };
        self.calls.get_or_create(&labels).inc();
        self.with_series(plugin, |series| series.calls.insert(labels));
    }

    /// Counts a call waiting for a permit of `plugin` until the guard drops.
    pub(crate) fn queued(&self, plugin: &str) -> GaugeGuard {
        GaugeGuard::inc(&self.queued, plugin)
    }

    /// Counts a call in flight to `plugin` until the guard drops.
    pub(crate) fn in_flight(&self, plugin: &str) -> GaugeGuard {
        GaugeGuard::inc(&self.in_flight, plugin)
    }

    /// Removes every series of `plugin` (it has been gone for the TTL), so
    /// that plugins that come and go do not grow `/metrics` for ever.
    pub(crate) fn forget_plugin(&self, plugin: &str) {
        let labels = PluginLabels {
            plugin: plugin.to_owned(),
        };
        self.plugin_up.remove(&labels);
        self.in_flight.remove(&labels);
        self.queued.remove(&labels);
        let series = self
            .series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(plugin);
        for series in series.into_iter() {
            for labels in &series.durations {
                self.call_duration.remove(labels);
            }
            for labels in &series.calls {
                self.calls.remove(labels);
            }
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

    fn with_series(&self, plugin: &str, record: impl FnOnce(&mut Series) -> bool) {
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        record(series.entry(plugin.to_owned()).or_default());
    }
}

/// One unit of a gauge, given back when dropped: a call stays counted as
/// queued or in flight however it ends (answer, error, timeout, a caller
/// that went away).
#[must_use = "the gauge goes down when the guard drops"]
pub(crate) struct GaugeGuard(Gauge);

impl GaugeGuard {
    fn inc(family: &Family<PluginLabels, Gauge>, plugin: &str) -> Self {
        let gauge = family
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .clone();
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode;
    use super::*;

    #[test]
    fn exposes_the_documented_names() {
        let mut registry = Registry::default();
        let m = PluginMetrics::register(&mut registry, Duration::from_secs(30));
        m.set_plugins_registered(2);
        m.set_plugin_up("postgresql", true);
        m.set_plugin_up("mariadb", false);
        m.observe_call("postgresql", "Reconcile", Duration::from_millis(3));
        m.count_call("postgresql", "Reconcile", CallOutcome::Timeout);
        let text = encode(&registry);
        for line in [
            "kplug_plugins_registered 2",
            "kplug_plugin_up{plugin=\"postgresql\"} 1",
            "kplug_plugin_up{plugin=\"mariadb\"} 0",
            "kplug_plugin_call_duration_seconds_count{plugin=\"postgresql\",call=\"Reconcile\"} 1",
            "kplug_plugin_calls_total{plugin=\"postgresql\",call=\"Reconcile\",outcome=\"timeout\"} 1",
            &format!(
                "kplug_build_info{{version=\"{}\",protocol=\"kplug.v1\"}} 1",
                env!("CARGO_PKG_VERSION")
            ),
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }

    #[test]
    fn the_top_bucket_is_the_deadline() {
        let mut registry = Registry::default();
        let m = PluginMetrics::register(&mut registry, Duration::from_secs(30));
        m.observe_call("p", "Reconcile", Duration::from_secs(20));
        let text = encode(&registry);
        let bucket = |le: &str| format!("_bucket{{le=\"{le}\",plugin=\"p\",call=\"Reconcile\"}}");
        assert!(text.contains(&format!("{} 0", bucket("16.384"))), "{text}");
        assert!(text.contains(&format!("{} 1", bucket("30.0"))), "{text}");
        assert!(!text.contains("le=\"32.768\""), "{text}");
    }

    #[test]
    fn queued_and_in_flight_go_down_when_the_call_ends() {
        let mut registry = Registry::default();
        let m = PluginMetrics::register(&mut registry, Duration::from_secs(1));
        let queued = m.queued("p");
        let in_flight = m.in_flight("p");
        let text = encode(&registry);
        assert!(
            text.contains("kplug_plugin_calls_queued{plugin=\"p\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kplug_plugin_calls_in_flight{plugin=\"p\"} 1"),
            "{text}"
        );
        drop((queued, in_flight));
        let text = encode(&registry);
        assert!(
            text.contains("kplug_plugin_calls_queued{plugin=\"p\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("kplug_plugin_calls_in_flight{plugin=\"p\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn a_forgotten_plugin_leaves_no_series() {
        let mut registry = Registry::default();
        let m = PluginMetrics::register(&mut registry, Duration::from_secs(1));
        m.set_plugin_up("gone", false);
        for plugin in ["gone", "kept"] {
            m.observe_call(plugin, "Reconcile", Duration::from_millis(3));
            m.count_call(plugin, "Reconcile", CallOutcome::Ok);
            drop(m.in_flight(plugin));
        }
        m.forget_plugin("gone");
        let text = encode(&registry);
        assert!(!text.contains("\"gone\""), "{text}");
        assert!(text.contains("plugin=\"kept\""), "{text}");
    }
}

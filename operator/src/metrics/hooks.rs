//! The hooks' metrics ([`HookMetrics`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One hook, and what a call of it came to.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    plugin: String,
    hook: String,
    phase: &'static str,
    behaviour: &'static str,
    outcome: &'static str,
}

/// Names one hook for its metrics.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HookId<'a> {
    /// The plugin that declared it.
    pub(crate) plugin: &'a str,
    /// Its name.
    pub(crate) hook: &'a str,
    /// Its phase, e.g. `before-reconcile`.
    pub(crate) phase: &'static str,
    /// Its behaviour, e.g. `sync-enforce`.
    pub(crate) behaviour: &'static str,
}

/// `kplug_hook_calls_total` and `kplug_hook_queue_depth`. Cheap to clone;
/// clones share the values.
#[derive(Clone, Debug, Default)]
pub(crate) struct HookMetrics {
    calls: Family<HookLabels, Counter>,
    queued: Gauge,
}

impl HookMetrics {
    /// Creates the hooks' metrics and registers them in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "kplug_hook_calls",
            "Hook calls by plugin, hook, phase, behaviour and outcome: ok, retry, failed (the hook's answer), invalid, timeout, unavailable, error, dropped (an async hook whose queue was full)",
            metrics.calls.clone(),
        );
        registry.register(
            "kplug_hook_queue_depth",
            "Async hook calls queued or running",
            metrics.queued.clone(),
        );
        metrics
    }

    /// Counts one call of `hook` by what it came to.
    pub(crate) fn count(&self, hook: HookId<'_>, outcome: &'static str) {
        self.calls
            .get_or_create(&HookLabels {
                plugin: hook.plugin.to_owned(),
                hook: hook.hook.to_owned(),
                phase: hook.phase,
                behaviour: hook.behaviour,
                outcome,
            })
            .inc();
    }

    /// The async queue's depth.
    pub(crate) fn queue(&self) -> &Gauge {
        &self.queued
    }
}

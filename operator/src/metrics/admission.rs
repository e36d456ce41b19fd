//! The admission webhooks' metrics ([`AdmissionMetrics`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AdmissionLabels {
    webhook: &'static str,
    plugin: String,
    outcome: &'static str,
}

/// `kplug_admission_total`. Cheap to clone; clones share the values.
#[derive(Clone, Debug, Default)]
pub(crate) struct AdmissionMetrics {
    admissions: Family<AdmissionLabels, Counter>,
}

impl AdmissionMetrics {
    /// Creates the metric and registers it in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "kplug_admission",
            "Admission reviews by webhook (validating, mutating), the plugin asked (empty: none) and outcome",
            metrics.admissions.clone(),
        );
        metrics
    }

    /// Counts one plugin's part in one review (or the review, with `plugin`
    /// empty when none was asked).
    pub(crate) fn count(&self, webhook: &'static str, plugin: &str, outcome: &'static str) {
        self.admissions
            .get_or_create(&AdmissionLabels {
                webhook,
                plugin: plugin.to_owned(),
                outcome,
            })
            .inc();
    }
}

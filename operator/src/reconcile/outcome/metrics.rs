//! What `kplug_reconcile_total` counts for each [`Outcome`].

use super::{Call, Outcome};

impl Outcome {
    /// The `outcome` label of `kplug_reconcile_total` for this outcome
    /// (`None`: not counted), without the other outcomes of `All`.
    pub(super) fn metric(&self) -> Option<&'static str> {
        match self {
            Self::Done {
                call: Call::Reconcile,
                ..
            } => Some("ok"),
            Self::Retry { .. } => Some("retry"),
            Self::Failed { .. }
            | Self::CallFailed { .. }
            | Self::Invalid { .. }
            | Self::StatusRefused { .. }
            | Self::NotSupported { .. } => Some("failed"),
            Self::Children { .. } => Some("children_failed"),
            Self::HookStopped { .. } => Some("hook_failed"),
            Self::WaitingForPlugin
            | Self::WaitingForExtensions
            | Self::ExtensionsExpected { .. } => Some("waiting"),
            Self::Busy => Some("busy"),
            Self::Finalized => Some("finalized"),
            Self::All(_)
            | Self::Done { .. }
            | Self::Woken
            | Self::Queued
            | Self::Stale
            | Self::Vanished
            | Self::Reselected => None,
        }
    }

    /// What `kplug_reconcile_total` counts for this outcome: `(outcome,
    /// plugin)` pairs, the plugin empty when none decided it. With every
    /// plugin (`All`), one pair per plugin called.
    pub(crate) fn metrics(&self) -> Vec<(&'static str, &str)> {
        match self {
            Self::All(outcomes) => outcomes.iter().flat_map(Self::metrics).collect(),
            other => other
                .metric()
                .map(|label| (label, other.plugin().unwrap_or_default()))
                .into_iter()
                .collect(),
        }
    }

    /// The plugin this outcome comes from, by name.
    fn plugin(&self) -> Option<&str> {
        match self {
            Self::Done { plugin, .. }
            | Self::Retry { plugin, .. }
            | Self::Failed { plugin, .. }
            | Self::Invalid { plugin, .. }
            | Self::StatusRefused { plugin, .. }
            | Self::Children { plugin, .. }
            | Self::HookStopped { plugin, .. }
            | Self::NotSupported { plugin } => {
                // A label is `name version`; a plugin name has no spaces
                // (kplug_proto::rules::validate_plugin_name).
                Some(
                    plugin
                        .split_once(' ')
                        .map_or(plugin.as_str(), |(name, _)| name),
                )
            }
            Self::CallFailed { error, .. } => Some(error.plugin()),
            _ => None,
        }
    }
}

//! [`CallError`]: why a call to a plugin produced no response, and whether
//! trying again may help.

use std::time::Duration;

use crate::metrics::CallOutcome;

/// A call to a plugin that did not produce a response.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The plugin did not answer within the deadline.
    #[error("plugin {plugin} did not answer {call} within {after:?}; it may be hung or overloaded")]
    Timeout {
        /// The plugin name.
        plugin: String,
        /// The call, e.g. `Reconcile`.
        call: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// The plugin could not be reached (it exited, is restarting or draining).
    #[error("plugin {plugin} is unreachable for {call}: {message}")]
    Unavailable {
        /// The plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// What the transport said.
        message: String,
    },
    /// The plugin answered with a gRPC error.
    #[error("plugin {plugin} failed {call}: {code:?}: {message}")]
    Status {
        /// The plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// The gRPC code.
        code: tonic::Code,
        /// The gRPC message.
        message: String,
    },
    /// No ready instance of the plugin is registered.
    #[error("plugin {plugin} is not registered (or not ready)")]
    Gone {
        /// The plugin name.
        plugin: String,
    },
    /// The response was larger than the operator decodes.
    #[error(
        "plugin {plugin} answered {call} with more than {limit} bytes, the most the operator reads (--max-response-size); nothing of it was used: report less status"
    )]
    TooLarge {
        /// The plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// The bound, in bytes.
        limit: usize,
    },
}

impl CallError {
    /// The plugin called, by name.
    pub fn plugin(&self) -> &str {
        match self {
            Self::Timeout { plugin, .. }
            | Self::Unavailable { plugin, .. }
            | Self::Status { plugin, .. }
            | Self::Gone { plugin }
            | Self::TooLarge { plugin, .. } => plugin,
        }
    }

    /// The `outcome` label of `kplug_plugin_calls_total` for this failure.
    pub(crate) fn metric(&self) -> CallOutcome {
        match self {
            Self::Timeout { .. } => CallOutcome::Timeout,
            Self::Unavailable { .. } | Self::Gone { .. } => CallOutcome::Unavailable,
            Self::Status { .. } => CallOutcome::Error,
            Self::TooLarge { .. } => CallOutcome::Invalid,
        }
    }

    /// Whether retrying (possibly on a newer instance) may help.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Gone { .. })
    }

    /// A CamelCase reason for conditions and Events.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Timeout { .. } => "PluginTimeout",
            Self::Unavailable { .. } | Self::Gone { .. } => "PluginUnreachable",
            Self::Status { .. } => "PluginError",
            Self::TooLarge { .. } => "PluginResponseTooLarge",
        }
    }
}

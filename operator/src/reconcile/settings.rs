//! How a [`crate::Delegate`] reconciles: selection, fields, finalizer.

use std::time::Duration;

/// How implementations are chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SelectionMode {
    /// One implementation per object: recorded, else preferred, else the
    /// first in a stable order. The choice is recorded in
    /// `status.implementation` and sticks.
    #[default]
    Preferred,
    /// Every plugin that serves the kind, in a stable order.
    All,
}

impl SelectionMode {
    /// Every mode, as [`std::fmt::Display`] spells it.
    pub const NAMES: [&str; 2] = ["preferred", "all"];
}

impl std::fmt::Display for SelectionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Preferred => "preferred",
            Self::All => "all",
        })
    }
}

impl std::str::FromStr for SelectionMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "preferred" => Ok(Self::Preferred),
            "all" => Ok(Self::All),
            other => Err(format!(
                "unknown selection mode {other:?}; use one of: {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// Reconcile settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Selection mode.
    pub selection: SelectionMode,
    /// Path of the extensions list, e.g. `["spec", "extensions"]`.
    pub extensions_field: Vec<String>,
    /// Path of the preferred implementation, e.g. `["spec", "preferredImplementation"]`.
    pub preferred_field: Vec<String>,
    /// Finalizer name.
    pub finalizer: String,
    /// The operator's field manager.
    pub field_manager: String,
    /// Requeue after a successful reconcile, to catch drift.
    pub resync: Duration,
    /// Async hook calls that may wait to run; more are dropped, with a
    /// Warning Event.
    pub async_hook_queue: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            selection: SelectionMode::Preferred,
            extensions_field: vec!["spec".into(), "extensions".into()],
            preferred_field: vec!["spec".into(), "preferredImplementation".into()],
            finalizer: "kplug.io/finalizer".into(),
            field_manager: "kplug-operator".into(),
            resync: Duration::from_secs(600),
            async_hook_queue: 256,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_from_their_names() {
        for name in SelectionMode::NAMES {
            let mode: SelectionMode = name.parse().unwrap();
            assert_eq!(mode.to_string(), name);
        }
        let error = "every".parse::<SelectionMode>().unwrap_err();
        assert!(error.contains("preferred, all"), "{error}");
    }
}

//! Choosing the implementation (and so the plugin) for an object.
//!
//! # Expected flow (`--selection preferred`, the default)
//! 1. The choice already recorded (the annotations
//!    [`IMPLEMENTATION_ANNOTATION`] and [`PLUGIN_ANNOTATION`], or
//!    `status.implementation` and `status.plugin` on objects recorded before
//!    them) is kept (sticky): a table created in MariaDB is never
//!    silently re-created in PostgreSQL, and is never handed to another
//!    plugin that later offers the same implementation name. If its plugin
//!    is not ready, the object waits ([`Selection::RecordedUnavailable`]) and
//!    says so in its conditions. (Objects recorded before `status.plugin`
//!    existed bind the implementation only, until their next choice is
//!    written.)
//! 2. Otherwise `spec.preferredImplementation`, when a ready plugin offers it.
//!    For one heartbeat TTL after the registry starts, a preference no
//!    ready plugin offers is waited for rather than fallen back from (the
//!    operator's sidecars register one after another; see
//!    [`crate::waiting`]).
//! 3. Otherwise the first ready candidate in a stable order (implementation
//!    name, then plugin name), so every operator replica and every restart
//!    picks the same one.
//!
//! Implementation names match ASCII case-insensitively (`mariadb` finds
//! `MariaDB`); the plugin's spelling is what gets recorded.
//!
//! # `--selection all`
//! [`select_all`] returns every ready candidate in the same stable order;
//! each plugin is called and writes its own part of the status.

/// One implementation offered by one ready plugin for the object's kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Candidate {
    /// The implementation name, as the plugin spells it.
    pub(crate) implementation: String,
    /// The plugin offering it.
    pub(crate) plugin: String,
}

/// The annotation that records the chosen implementation, durably, before
/// the plugin is first called (with the finalizer, in one write).
pub const IMPLEMENTATION_ANNOTATION: &str = "kplug.io/implementation";
/// The annotation that records the plugin chosen with it.
pub const PLUGIN_ANNOTATION: &str = "kplug.io/plugin";

/// The choice recorded on an object: in its annotations
/// ([`IMPLEMENTATION_ANNOTATION`], [`PLUGIN_ANNOTATION`]), or, for objects
/// recorded before the annotations existed, in `status.implementation` and
/// `status.plugin`. The status shows the choice either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Recorded {
    /// The implementation.
    pub implementation: String,
    /// The plugin chosen with it.
    pub plugin: Option<String>,
}

impl Recorded {
    /// What `obj` records, if anything: its annotations first, else its
    /// status.
    pub(crate) fn of(obj: &kube::api::DynamicObject) -> Option<Self> {
        Self::annotated(obj).or_else(|| Self::in_status(obj))
    }

    /// What `obj`'s annotations record.
    pub(crate) fn annotated(obj: &kube::api::DynamicObject) -> Option<Self> {
        let annotations = obj.metadata.annotations.as_ref()?;
        let text = |key: &str| annotations.get(key).filter(|s| !s.is_empty()).cloned();
        Some(Self {
            implementation: text(IMPLEMENTATION_ANNOTATION)?,
            plugin: text(PLUGIN_ANNOTATION),
        })
    }

    /// What `obj`'s status records (how choices were recorded before the
    /// annotations, and what the status shows).
    pub(crate) fn in_status(obj: &kube::api::DynamicObject) -> Option<Self> {
        let status = obj.data.get("status")?;
        let text = |key: &str| {
            status
                .get(key)
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        Some(Self {
            implementation: text("implementation")?,
            plugin: text("plugin"),
        })
    }
}

impl From<&Candidate> for Recorded {
    fn from(candidate: &Candidate) -> Self {
        Self {
            implementation: candidate.implementation.clone(),
            plugin: Some(candidate.plugin.clone()),
        }
    }
}

/// Why a candidate was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// It was already recorded in the object's status.
    Recorded,
    /// The object prefers it.
    Preferred,
    /// Nothing was recorded and the preference (if any) is not offered: the
    /// first candidate in the stable order.
    Fallback,
}

/// The outcome of [`select`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Selection {
    /// Use this candidate.
    Chosen {
        /// The chosen implementation and plugin.
        candidate: Candidate,
        /// Why it was chosen.
        reason: Reason,
    },
    /// The recorded choice has no ready plugin: wait for it.
    RecordedUnavailable {
        /// What the status records.
        recorded: Recorded,
    },
    /// No ready plugin serves the kind at all.
    NoCandidates,
}

/// Chooses an implementation; see the [module docs](self) for the rules.
pub(crate) fn select(
    recorded: Option<&Recorded>,
    preferred: Option<&str>,
    candidates: &[Candidate],
) -> Selection {
    let ordered = select_all(candidates);
    let offered = |name: &str| {
        ordered
            .iter()
            .find(|c| c.implementation.eq_ignore_ascii_case(name))
            .cloned()
    };
    if let Some(recorded) = recorded.filter(|r| !r.implementation.is_empty()) {
        let found = ordered.iter().find(|c| {
            c.implementation
                .eq_ignore_ascii_case(&recorded.implementation)
                && recorded.plugin.as_ref().is_none_or(|p| *p == c.plugin)
        });
        return match found {
            Some(candidate) => Selection::Chosen {
                candidate: candidate.clone(),
                reason: Reason::Recorded,
            },
            None => Selection::RecordedUnavailable {
                recorded: recorded.clone(),
            },
        };
    }
    if let Some(candidate) = preferred.filter(|p| !p.is_empty()).and_then(offered) {
        return Selection::Chosen {
            candidate,
            reason: Reason::Preferred,
        };
    }
    match ordered.into_iter().next() {
        Some(candidate) => Selection::Chosen {
            candidate,
            reason: Reason::Fallback,
        },
        None => Selection::NoCandidates,
    }
}

/// Every candidate, in the stable order (implementation, then plugin),
/// without duplicates.
pub(crate) fn select_all(candidates: &[Candidate]) -> Vec<Candidate> {
    let mut ordered = candidates.to_vec();
    ordered.sort_by(|a, b| {
        a.implementation
            .to_ascii_lowercase()
            .cmp(&b.implementation.to_ascii_lowercase())
            .then_with(|| a.plugin.cmp(&b.plugin))
    });
    ordered.dedup();
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(implementation: &str, plugin: &str) -> Candidate {
        Candidate {
            implementation: implementation.into(),
            plugin: plugin.into(),
        }
    }

    fn chosen(s: Selection) -> (String, Reason) {
        match s {
            Selection::Chosen { candidate, reason } => (candidate.plugin, reason),
            other => panic!("expected a choice, got {other:?}"),
        }
    }

    #[test]
    fn preferred_wins_when_offered() {
        let all = [c("PostgreSQL", "pg"), c("MariaDB", "maria")];
        assert_eq!(
            chosen(select(None, Some("MariaDB"), &all)),
            ("maria".into(), Reason::Preferred)
        );
    }

    #[test]
    fn preference_is_case_insensitive() {
        let all = [c("PostgreSQL", "pg"), c("MariaDB", "maria")];
        assert_eq!(chosen(select(None, Some("mariadb"), &all)).0, "maria");
    }

    #[test]
    fn falls_back_to_stable_order_when_preference_missing() {
        let a = [c("SQLite", "sqlite"), c("PostgreSQL", "pg")];
        let b = [c("PostgreSQL", "pg"), c("SQLite", "sqlite")];
        // Same answer whatever order the registry listed them in.
        assert_eq!(
            chosen(select(None, Some("MariaDB"), &a)),
            ("pg".into(), Reason::Fallback)
        );
        assert_eq!(chosen(select(None, Some("MariaDB"), &b)).0, "pg");
        assert_eq!(chosen(select(None, None, &a)).0, "pg");
    }

    #[test]
    fn recorded_choice_is_sticky_over_preference() {
        let all = [c("PostgreSQL", "pg"), c("MariaDB", "maria")];
        assert_eq!(
            chosen(select(
                Some(&rec("PostgreSQL", None)),
                Some("MariaDB"),
                &all
            )),
            ("pg".into(), Reason::Recorded)
        );
    }

    #[test]
    fn recorded_but_gone_waits_instead_of_moving() {
        let all = [c("MariaDB", "maria")];
        assert_eq!(
            select(Some(&rec("PostgreSQL", None)), Some("MariaDB"), &all),
            Selection::RecordedUnavailable {
                recorded: rec("PostgreSQL", None)
            }
        );
    }

    fn rec(implementation: &str, plugin: Option<&str>) -> Recorded {
        Recorded {
            implementation: implementation.into(),
            plugin: plugin.map(str::to_owned),
        }
    }

    #[test]
    fn the_recorded_plugin_binds_too() {
        // Another plugin offering the recorded implementation name (after
        // the owner's claim lapsed) does not get the object.
        let all = [c("SQLite", "aaa-evil")];
        let recorded = rec("SQLite", Some("sqlite"));
        assert_eq!(
            select(Some(&recorded), None, &all),
            Selection::RecordedUnavailable {
                recorded: recorded.clone()
            }
        );
        let all = [c("SQLite", "aaa-evil"), c("SQLite", "sqlite")];
        assert_eq!(
            chosen(select(Some(&recorded), None, &all)),
            ("sqlite".into(), Reason::Recorded)
        );
    }

    #[test]
    fn nothing_registered() {
        assert_eq!(select(None, Some("MariaDB"), &[]), Selection::NoCandidates);
        assert_eq!(
            select(Some(&rec("X", None)), None, &[]),
            Selection::RecordedUnavailable {
                recorded: rec("X", None)
            }
        );
    }

    #[test]
    fn empty_strings_count_as_unset() {
        let all = [c("PostgreSQL", "pg")];
        assert_eq!(
            chosen(select(Some(&rec("", None)), Some(""), &all)),
            ("pg".into(), Reason::Fallback)
        );
    }

    #[test]
    fn two_plugins_same_implementation_pick_by_plugin_name() {
        let all = [c("PostgreSQL", "pg-b"), c("PostgreSQL", "pg-a")];
        assert_eq!(chosen(select(None, Some("PostgreSQL"), &all)).0, "pg-a");
    }

    #[test]
    fn select_all_is_ordered_and_deduplicated() {
        let all = [c("b", "2"), c("A", "1"), c("b", "2"), c("a", "0")];
        let names: Vec<_> = select_all(&all).into_iter().map(|c| c.plugin).collect();
        assert_eq!(names, ["0", "1", "2"]);
    }
}

//! Whether an object's `spec.preferredImplementation` is honoured, and what
//! to tell its owner when it is not.
//!
//! A preference can go unhonoured for two reasons, and each needs a
//! different fix from a person:
//! - **no plugin has ever offered it** since the operator started: most
//!   likely a typo ("Pyhton"), or a plugin that is not deployed;
//! - **it is offered, but the object is on another implementation**: the
//!   preference had no ready plugin when the choice was made, or it was
//!   changed after. The choice is sticky, so the object stays.
//!
//! Both show as `PluginAvailable` (still `True`: the object is served) with
//! a reason of their own, and a Warning Event when the reason first
//! appears.

use crate::selection::Candidate;

/// How a preference stands against the chosen candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Preference {
    /// No preference, or the chosen implementation is the preferred one.
    Honoured,
    /// No plugin registered since start has offered the preference.
    NotOffered {
        /// The preference, as written.
        preferred: String,
        /// What has been offered for the kind, in the plugins' spelling.
        offered: Vec<String>,
    },
    /// The preference is (or was) offered, but the object is on another
    /// implementation and stays there.
    NotChosen {
        /// The preference, as written.
        preferred: String,
    },
}

impl Preference {
    /// Compares `preferred` with the `chosen` candidate; `ever_offered` is
    /// every implementation offered for the kind since start.
    pub(crate) fn of(preferred: Option<&str>, chosen: &Candidate, ever_offered: &[String]) -> Self {
        let Some(preferred) = preferred.filter(|p| !p.is_empty()) else {
            return Self::Honoured;
        };
        if chosen.implementation.eq_ignore_ascii_case(preferred) {
            return Self::Honoured;
        }
        if ever_offered
            .iter()
            .any(|o| o.eq_ignore_ascii_case(preferred))
        {
            Self::NotChosen {
                preferred: preferred.to_owned(),
            }
        } else {
            Self::NotOffered {
                preferred: preferred.to_owned(),
                offered: ever_offered.to_vec(),
            }
        }
    }

    /// The `PluginAvailable` reason, and what to add to its message, when
    /// the preference is not honoured.
    pub(crate) fn notice(&self, chosen: &Candidate) -> Option<(&'static str, String)> {
        let on = format!(
            "the object is on {} (plugin {}) and stays there: the choice is sticky",
            chosen.implementation, chosen.plugin
        );
        match self {
            Self::Honoured => None,
            Self::NotOffered { preferred, offered } => Some((
                "PreferenceNotOffered",
                format!(
                    "spec.preferredImplementation {preferred:?} is offered by no plugin registered since the operator started (offered: {}); check its spelling, or deploy a plugin that offers it. {on}; to move it once the preference is right (the old implementation cleans up with Finalize first), annotate it kplug.io/reselect",
                    if offered.is_empty() {
                        "none".to_owned()
                    } else {
                        offered.join(", ")
                    }
                ),
            )),
            Self::NotChosen { preferred } => Some((
                "PreferenceNotChosen",
                format!(
                    "spec.preferredImplementation is {preferred}, but {on} (it is kept once recorded). To move it (the old implementation cleans up with Finalize first), annotate it kplug.io/reselect"
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg() -> Candidate {
        Candidate {
            implementation: "PostgreSQL".into(),
            plugin: "postgresql".into(),
        }
    }

    fn offered() -> Vec<String> {
        vec!["MariaDB".into(), "PostgreSQL".into()]
    }

    #[test]
    fn no_preference_or_the_chosen_one_is_honoured() {
        assert_eq!(
            Preference::of(None, &pg(), &offered()),
            Preference::Honoured
        );
        assert_eq!(
            Preference::of(Some(""), &pg(), &offered()),
            Preference::Honoured
        );
        assert_eq!(
            Preference::of(Some("postgresql"), &pg(), &offered()),
            Preference::Honoured
        );
        assert_eq!(Preference::Honoured.notice(&pg()), None);
    }

    #[test]
    fn a_preference_never_offered_is_named_with_what_is() {
        let preference = Preference::of(Some("Pyhton"), &pg(), &offered());
        let (reason, message) = preference.notice(&pg()).unwrap();
        assert_eq!(reason, "PreferenceNotOffered");
        assert!(message.contains("\"Pyhton\""), "{message}");
        assert!(message.contains("kplug.io/reselect"), "{message}");
        assert!(
            message.contains("(offered: MariaDB, PostgreSQL)"),
            "{message}"
        );
        assert!(message.contains("check its spelling"), "{message}");
        assert!(
            message.contains("on PostgreSQL (plugin postgresql)"),
            "{message}"
        );
    }

    #[test]
    fn an_offered_preference_on_another_implementation_says_how_to_move() {
        let preference = Preference::of(Some("mariadb"), &pg(), &offered());
        assert_eq!(
            preference,
            Preference::NotChosen {
                preferred: "mariadb".into()
            }
        );
        let (reason, message) = preference.notice(&pg()).unwrap();
        assert_eq!(reason, "PreferenceNotChosen");
        assert!(message.contains("sticky"), "{message}");
        assert!(
            message.contains("annotate it kplug.io/reselect"),
            "{message}"
        );
    }

    #[test]
    fn nothing_offered_yet_says_none() {
        let (_, message) = Preference::of(Some("X"), &pg(), &[]).notice(&pg()).unwrap();
        assert!(message.contains("(offered: none)"), "{message}");
    }
}

//! Which plugin owns each implementation name.
//!
//! An implementation name (`SQLite`) is what objects record and prefer, so
//! it must mean one plugin. Otherwise any sidecar could offer `SQLite` under
//! a name that sorts first and take over every SQLite object, Finalize
//! included.
//!
//! # Expected flow
//! - An owner named in the operator's configuration
//!   (`--implementation-owner SQLite=sqlite`) is the only plugin that may
//!   offer that implementation.
//! - Otherwise the first plugin that registers with it claims it
//!   ([`Ownership::claim`]).
//! - When the owner leaves ([`Ownership::release`]), its claim is kept for
//!   the hold period (the heartbeat TTL), so that its restart finds its
//!   implementations still its own; after that anyone may claim them.
//!
//! # Guarantees
//! - A plugin offering an implementation another plugin owns is refused as a
//!   whole (never routed to, never silently preferred), with a reason that
//!   names the owner.
//! - Matching ignores ASCII case, as selection does.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A plugin offered an implementation that another plugin owns.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "implementation {implementation:?} belongs to plugin {owner} ({how}); plugin {plugin} may not offer it. Give it another implementation name, or configure the owner with --implementation-owner"
)]
pub struct Impostor {
    /// The implementation offered.
    pub implementation: String,
    /// The plugin that owns it.
    pub owner: String,
    /// The plugin that offered it.
    pub plugin: String,
    /// Why the owner owns it.
    pub how: &'static str,
}

#[derive(Debug)]
struct Claim {
    plugin: String,
    released: Option<Instant>,
}

/// The owners of implementation names.
#[derive(Debug)]
pub struct Ownership {
    configured: HashMap<String, String>,
    claims: Mutex<HashMap<String, Claim>>,
    hold: Duration,
}

impl Ownership {
    /// `configured` maps implementation names to their owning plugins; other
    /// implementations are first come, first served, and a released claim
    /// lapses after `hold`.
    pub fn new(configured: impl IntoIterator<Item = (String, String)>, hold: Duration) -> Self {
        Self {
            configured: configured
                .into_iter()
                .map(|(implementation, plugin)| (implementation.to_ascii_lowercase(), plugin))
                .collect(),
            claims: Mutex::default(),
            hold,
        }
    }

    /// Checks that `plugin` may offer every one of `implementations`, and
    /// claims those nobody owns. Nothing is claimed when one is refused.
    ///
    /// # Errors
    /// [`Impostor`] for the first implementation another plugin owns.
    pub fn claim<'a>(
        &self,
        plugin: &str,
        implementations: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Result<(), Impostor> {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        for implementation in implementations.clone() {
            let key = implementation.to_ascii_lowercase();
            let impostor = |owner: &str, how| Impostor {
                implementation: implementation.to_owned(),
                owner: owner.to_owned(),
                plugin: plugin.to_owned(),
                how,
            };
            if let Some(owner) = self.configured.get(&key) {
                if owner != plugin {
                    return Err(impostor(owner, "configured with --implementation-owner"));
                }
                continue;
            }
            if let Some(claim) = claims.get(&key) {
                let lapsed = claim.released.is_some_and(|at| at.elapsed() >= self.hold);
                if claim.plugin != plugin && !lapsed {
                    return Err(impostor(&claim.plugin, "it registered with it first"));
                }
            }
        }
        for implementation in implementations {
            let key = implementation.to_ascii_lowercase();
            if !self.configured.contains_key(&key) {
                claims.insert(
                    key,
                    Claim {
                        plugin: plugin.to_owned(),
                        released: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// `plugin` left: its claims lapse unless it is back within the hold.
    pub fn release(&self, plugin: &str) {
        let now = Instant::now();
        for claim in self
            .claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values_mut()
            .filter(|c| c.plugin == plugin && c.released.is_none())
        {
            claim.released = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_come_first_served_and_the_owner_may_come_back() {
        let ownership = Ownership::new([], Duration::from_secs(60));
        ownership.claim("sqlite", ["SQLite"]).unwrap();
        let err = ownership.claim("aaa-evil", ["sqlite"]).unwrap_err();
        assert_eq!(err.owner, "sqlite");
        assert!(
            err.to_string().contains("registered with it first"),
            "{err}"
        );
        ownership.release("sqlite");
        // Within the hold, the owner's restart finds it still its own ...
        assert!(ownership.claim("aaa-evil", ["SQLite"]).is_err());
        ownership.claim("sqlite", ["SQLite"]).unwrap();
    }

    #[test]
    fn a_released_claim_lapses_after_the_hold() {
        let ownership = Ownership::new([], Duration::ZERO);
        ownership.claim("old", ["Impl"]).unwrap();
        ownership.release("old");
        ownership.claim("new", ["Impl"]).unwrap();
        assert!(ownership.claim("old", ["Impl"]).is_err());
    }

    #[test]
    fn configured_owners_are_the_only_ones() {
        let ownership =
            Ownership::new([("SQLite".to_owned(), "sqlite".to_owned())], Duration::ZERO);
        let err = ownership.claim("other", ["sqlite"]).unwrap_err();
        assert!(err.to_string().contains("--implementation-owner"), "{err}");
        ownership.claim("sqlite", ["SQLite"]).unwrap();
    }

    #[test]
    fn a_refused_plugin_claims_nothing() {
        let ownership = Ownership::new([], Duration::from_secs(60));
        ownership.claim("a", ["A"]).unwrap();
        assert!(ownership.claim("b", ["B", "A"]).is_err());
        ownership.claim("c", ["B"]).unwrap();
    }
}

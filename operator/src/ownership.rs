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
pub(crate) struct Impostor {
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
struct Claim<V> {
    owner: V,
    released: Option<Instant>,
}

/// First come, first served claims on keys, kept for `hold` after their
/// owner releases them.
#[derive(Debug)]
struct Claims<V> {
    claims: HashMap<String, Claim<V>>,
    hold: Duration,
}

impl<V: Clone + PartialEq> Claims<V> {
    fn new(hold: Duration) -> Self {
        Self {
            claims: HashMap::new(),
            hold,
        }
    }

    /// The owner of `key` other than `who`, if its claim holds.
    fn other_owner(&self, key: &str, who: &V) -> Option<&V> {
        self.claims.get(key).and_then(|claim| {
            let lapsed = claim.released.is_some_and(|at| at.elapsed() >= self.hold);
            (claim.owner != *who && !lapsed).then_some(&claim.owner)
        })
    }

    fn claim(&mut self, key: String, who: &V) {
        self.claims.insert(
            key,
            Claim {
                owner: who.clone(),
                released: None,
            },
        );
    }

    fn release(&mut self, who: &V) {
        let now = Instant::now();
        for claim in self
            .claims
            .values_mut()
            .filter(|c| c.owner == *who && c.released.is_none())
        {
            claim.released = Some(now);
        }
    }
}

/// The owners of implementation names.
#[derive(Debug)]
pub(crate) struct Ownership {
    configured: HashMap<String, String>,
    claims: Mutex<Claims<String>>,
}

impl Ownership {
    /// `configured` maps implementation names to their owning plugins; other
    /// implementations are first come, first served, and a released claim
    /// lapses after `hold`.
    pub(crate) fn new(
        configured: impl IntoIterator<Item = (String, String)>,
        hold: Duration,
    ) -> Self {
        Self {
            configured: configured
                .into_iter()
                .map(|(implementation, plugin)| (implementation.to_ascii_lowercase(), plugin))
                .collect(),
            claims: Mutex::new(Claims::new(hold)),
        }
    }

    /// Checks that `plugin` may offer every one of `implementations`, and
    /// claims those nobody owns. Nothing is claimed when one is refused.
    ///
    /// # Errors
    /// [`Impostor`] for the first implementation another plugin owns.
    pub(crate) fn claim<'a>(
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
            if let Some(owner) = claims.other_owner(&key, &plugin.to_owned()) {
                return Err(impostor(owner, "it registered with it first"));
            }
        }
        for implementation in implementations {
            let key = implementation.to_ascii_lowercase();
            if !self.configured.contains_key(&key) {
                claims.claim(key, &plugin.to_owned());
            }
        }
        Ok(())
    }

    /// `plugin` left: its claims lapse unless it is back within the hold.
    pub(crate) fn release(&self, plugin: &str) {
        self.claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release(&plugin.to_owned());
    }
}

/// A process registered, renewed or unregistered a plugin name another UID
/// owns.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "plugin name {name} belongs to UID {owner} ({how}); a process with UID {uid} may not register, renew or unregister it. Give each plugin container its own runAsUser, and map names to UIDs with --plugin-uid"
)]
pub(crate) struct WrongUid {
    /// The plugin name.
    pub name: String,
    /// The UID that owns it.
    pub owner: u32,
    /// The caller's UID.
    pub uid: u32,
    /// Why the owner owns it.
    pub how: &'static str,
}

/// Which UID may act as each plugin name: configured (`--plugin-uid
/// NAME=UID`), else the first UID that registers it, until the name has been
/// gone for the hold period.
#[derive(Debug)]
pub(crate) struct NameOwners {
    configured: HashMap<String, u32>,
    claims: Mutex<Claims<u32>>,
}

impl NameOwners {
    /// `configured` maps plugin names to UIDs; other names are first come,
    /// first served, and a released name lapses after `hold`.
    pub(crate) fn new(configured: impl IntoIterator<Item = (String, u32)>, hold: Duration) -> Self {
        Self {
            configured: configured.into_iter().collect(),
            claims: Mutex::new(Claims::new(hold)),
        }
    }

    /// Checks that `uid` may act as `name` (without claiming it).
    ///
    /// # Errors
    /// [`WrongUid`] naming the owner.
    pub(crate) fn check(&self, name: &str, uid: u32) -> Result<(), WrongUid> {
        let wrong = |owner: u32, how| WrongUid {
            name: name.to_owned(),
            owner,
            uid,
            how,
        };
        if let Some(&owner) = self.configured.get(name) {
            return if owner == uid {
                Ok(())
            } else {
                Err(wrong(owner, "configured with --plugin-uid"))
            };
        }
        match self
            .claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .other_owner(name, &uid)
        {
            Some(&owner) => Err(wrong(owner, "it registered the name first")),
            None => Ok(()),
        }
    }

    /// [`Self::check`], then claims `name` for `uid`.
    ///
    /// # Errors
    /// [`WrongUid`] naming the owner.
    pub(crate) fn claim(&self, name: &str, uid: u32) -> Result<(), WrongUid> {
        self.check(name, uid)?;
        if !self.configured.contains_key(name) {
            self.claims
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .claim(name.to_owned(), &uid);
        }
        Ok(())
    }

    /// The name's instance left: its claim lapses after the hold.
    pub(crate) fn release(&self, name: &str) {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(claim) = claims.claims.get_mut(name)
            && claim.released.is_none()
        {
            claim.released = Some(Instant::now());
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
    fn a_name_belongs_to_the_uid_that_registered_it_or_the_configured_one() {
        let owners = NameOwners::new([("sqlite".to_owned(), 65533)], Duration::from_secs(60));
        assert!(owners.claim("sqlite", 65533).is_ok());
        let err = owners.claim("sqlite", 0).unwrap_err();
        assert!(err.to_string().contains("--plugin-uid"), "{err}");
        owners.claim("other", 1000).unwrap();
        let err = owners.check("other", 1001).unwrap_err();
        assert_eq!(err.owner, 1000);
        owners.release("other");
        assert!(owners.check("other", 1001).is_err(), "held for the TTL");
        let lapsing = NameOwners::new([], Duration::ZERO);
        lapsing.claim("p", 1).unwrap();
        lapsing.release("p");
        lapsing.claim("p", 2).unwrap();
    }

    #[test]
    fn a_refused_plugin_claims_nothing() {
        let ownership = Ownership::new([], Duration::from_secs(60));
        ownership.claim("a", ["A"]).unwrap();
        assert!(ownership.claim("b", ["B", "A"]).is_err());
        ownership.claim("c", ["B"]).unwrap();
    }
}

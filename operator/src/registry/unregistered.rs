//! Instances that unregistered, remembered for the heartbeat TTL.
//!
//! A plugin stops heartbeating at SIGTERM, but a heartbeat it sent just
//! before may be handled after its Unregister (two streams on one
//! connection, or a retry already in the air). Its socket still serves while
//! it drains, so the handshake would succeed and register a process that is
//! about to exit; its exit would then be reported as `PluginGone`. An
//! instance id is fresh per process start, so refusing the ids that
//! unregistered costs a restarted plugin nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct Unregistered {
    /// How long an id is remembered: a late heartbeat is at most a
    /// heartbeat's deadline old, far below the TTL.
    ttl: Duration,
    ids: Mutex<HashMap<String, Instant>>,
}

impl Unregistered {
    pub(super) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            ids: Mutex::default(),
        }
    }

    /// Remembers `instance_id`, forgetting the ids older than the TTL (so
    /// the map holds at most the unregistrations of one TTL).
    pub(super) fn insert(&self, instance_id: &str, now: Instant) {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.retain(|_, at| now.saturating_duration_since(*at) < self.ttl);
        ids.insert(instance_id.to_owned(), now);
    }

    /// Whether `instance_id` unregistered within the TTL.
    pub(super) fn contains(&self, instance_id: &str, now: Instant) -> bool {
        let ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.get(instance_id)
            .is_some_and(|at| now.saturating_duration_since(*at) < self.ttl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_remembered_for_the_ttl_then_forgotten() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(15);
        let unregistered = Unregistered::new(ttl);
        unregistered.insert("a", t0);
        assert!(unregistered.contains("a", t0 + Duration::from_secs(14)));
        assert!(!unregistered.contains("b", t0));
        assert!(!unregistered.contains("a", t0 + ttl));
        // Old ids are dropped when new ones come.
        unregistered.insert("b", t0 + ttl);
        assert_eq!(unregistered.ids.lock().unwrap().len(), 1);
    }
}

//! What this process did to objects that its cache may not show yet: the
//! objects it finalized, and the choices it recorded or dropped. It stands
//! for a read of the object before each plugin call.
//!
//! The controller's cache can lag behind the API server. Two lags are
//! dangerous, and both come from this process's own writes:
//! - a **finalized** object whose removal the cache has not seen: a queued
//!   wake-up would call its plugin again, and the plugin would create what
//!   its Finalize just removed (seen under load in the chaos suite);
//! - a **choice** recorded or dropped (a move) that the cache has not seen:
//!   a stale copy names the old implementation, and its plugin would serve
//!   the object again.
//!
//! Reading each object before its call guarded against both, at one GET
//! per reconcile: 10,000 GETs for an operator's start over 10,000 objects
//! (`kplug-bench` P4). Remembering the writes guards against both for
//! nothing.
//!
//! # Guarantees
//! - A reconcile whose object this process finalized, or whose cached
//!   choice differs from the one this process last recorded, does not call
//!   a plugin ([`Recent::behind`]).
//! - A choice is forgotten once the cache shows it, a finalized object
//!   after [`KEEP`] (far beyond any watch lag seen; its uid is never
//!   reused).
//!
//! # Caveats
//! - Only this process's writes are remembered. Another writer of the
//!   choice is refused at admission (when the webhooks are on), and a new
//!   leader starts its watches after it took the Lease, that is after the
//!   previous leader stopped writing: its first list already has what the
//!   previous leader wrote.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::DynamicObject;

use crate::selection::Recorded;

/// How long a finalized object is remembered.
pub(crate) const KEEP: Duration = Duration::from_secs(600);

/// What this process last did to one object.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Done {
    /// Finalized: the finalizer removed.
    Finalized,
    /// Recorded this choice (`None`: dropped it, for a move).
    Chose(Option<Recorded>),
}

/// Why a cached object is behind what this process wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Behind {
    /// This process finalized it.
    Finalized,
    /// Its cached choice is not the one this process last recorded.
    Choice,
}

/// Per object (by uid), what this process did and when.
#[derive(Debug, Default)]
pub(crate) struct Recent {
    objects: Mutex<HashMap<String, (Done, Instant)>>,
}

impl Recent {
    /// Remembers that `obj` was finalized.
    pub(crate) fn finalized(&self, obj: &DynamicObject) {
        self.remember(obj, Done::Finalized);
    }

    /// Remembers that `choice` was recorded on `obj` (`None`: the choice
    /// was dropped).
    pub(crate) fn chose(&self, obj: &DynamicObject, choice: Option<Recorded>) {
        self.remember(obj, Done::Chose(choice));
    }

    fn remember(&self, obj: &DynamicObject, done: Done) {
        let now = Instant::now();
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        // Finalized objects are the only entries nothing else removes.
        if objects.len() >= 1024 && objects.len().is_power_of_two() {
            objects.retain(|_, (_, at)| now.duration_since(*at) < KEEP);
        }
        objects.insert(obj.uid().unwrap_or_default(), (done, now));
    }

    /// Whether the cached `obj` is behind what this process wrote to it.
    /// A choice the cache shows is forgotten.
    pub(crate) fn behind(&self, obj: &DynamicObject) -> Option<Behind> {
        let uid = obj.uid().unwrap_or_default();
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        let (done, at) = objects.get(&uid)?;
        match done {
            Done::Finalized if at.elapsed() < KEEP => Some(Behind::Finalized),
            Done::Finalized => {
                objects.remove(&uid);
                None
            }
            Done::Chose(choice) if Recorded::of(obj) != *choice => Some(Behind::Choice),
            Done::Chose(_) => {
                objects.remove(&uid);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(annotations: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Greeting",
            "metadata": {"name": "g", "namespace": "ns", "uid": "u1", "annotations": annotations},
        }))
        .unwrap()
    }

    fn hello() -> Recorded {
        Recorded {
            implementation: "Hello".into(),
            plugin: Some("hello".into()),
        }
    }

    #[test]
    fn nothing_done_is_never_behind() {
        assert_eq!(Recent::default().behind(&obj(json!({}))), None);
    }

    #[test]
    fn a_choice_is_behind_until_the_cache_shows_it_then_forgotten() {
        let recent = Recent::default();
        let cached = obj(json!({}));
        recent.chose(&cached, Some(hello()));
        assert_eq!(recent.behind(&cached), Some(Behind::Choice));
        let caught_up = obj(json!({
            "kplug.io/implementation": "Hello", "kplug.io/plugin": "hello",
        }));
        assert_eq!(recent.behind(&caught_up), None);
        assert_eq!(recent.behind(&cached), None, "forgotten once shown");
    }

    #[test]
    fn a_dropped_choice_is_behind_while_the_cache_still_names_it() {
        let recent = Recent::default();
        let old = obj(json!({
            "kplug.io/implementation": "Hello", "kplug.io/plugin": "hello",
        }));
        recent.chose(&old, None);
        assert_eq!(recent.behind(&old), Some(Behind::Choice));
        assert_eq!(recent.behind(&obj(json!({}))), None);
    }

    #[test]
    fn a_finalized_object_stays_behind() {
        let recent = Recent::default();
        let cached = obj(json!({}));
        recent.finalized(&cached);
        assert_eq!(recent.behind(&cached), Some(Behind::Finalized));
        assert_eq!(recent.behind(&cached), Some(Behind::Finalized));
    }
}

//! The last plugin call of each object, in memory, for `kubectl kplug why`
//! (served on the operator's `/calls/<uid>`): its duration is what a
//! condition cannot say without a status write on every call.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

/// One call to a plugin and what it came to.
#[derive(Clone, Debug)]
pub(crate) struct LastCall {
    /// The plugin called, by name.
    pub(crate) plugin: String,
    /// `Reconcile` or `Finalize`.
    pub(crate) call: &'static str,
    /// `kplug_plugin_calls_total`'s outcome label.
    pub(crate) outcome: &'static str,
    /// How long the call took.
    pub(crate) took: Duration,
    /// When it ended.
    pub(crate) at: SystemTime,
}

impl LastCall {
    /// As JSON, for the endpoint.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "plugin": self.plugin,
            "call": self.call,
            "outcome": self.outcome,
            "tookSeconds": self.took.as_secs_f64(),
            "secondsAgo": self.at.elapsed().unwrap_or_default().as_secs_f64(),
        })
    }
}

/// The last call of each object, by UID; an object's entry goes when it is
/// finalized (with the finalizer off, when the process restarts).
#[derive(Debug, Default)]
pub(crate) struct LastCalls(Mutex<HashMap<String, LastCall>>);

impl LastCalls {
    /// Records the call that just ended for object `uid`.
    pub(crate) fn record(&self, uid: String, call: LastCall) {
        self.lock().insert(uid, call);
    }

    /// The last call of object `uid`.
    pub(crate) fn get(&self, uid: &str) -> Option<LastCall> {
        self.lock().get(uid).cloned()
    }

    /// Forgets object `uid` (it is gone).
    pub(crate) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, LastCall>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_call_until_the_object_is_forgotten() {
        let calls = LastCalls::default();
        let call = |outcome, ms| LastCall {
            plugin: "sqlite".into(),
            call: "Reconcile",
            outcome,
            took: Duration::from_millis(ms),
            at: SystemTime::now(),
        };
        calls.record("u1".into(), call("retry", 5));
        calls.record("u1".into(), call("ok", 12));
        let last = calls.get("u1").unwrap().to_json();
        assert_eq!(last["outcome"], "ok");
        assert_eq!(last["tookSeconds"], 0.012);
        calls.forget("u1");
        assert!(calls.get("u1").is_none());
    }
}

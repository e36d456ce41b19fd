//! Exponential backoff, for retrying plugin calls and failed reconciles.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Exponential backoff: `initial`, doubled after every failure, capped at
/// `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
}

impl Backoff {
    /// A backoff starting at `initial` and never exceeding `max`.
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max: max.max(initial),
        }
    }

    /// The delay before retry number `attempt` (0 for the first retry).
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        // 2^31 * anything overflows long before; saturate instead.
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// Counts consecutive failures per key (an object's UID) and turns them into
/// a growing requeue delay; a success resets the count.
#[derive(Debug)]
pub(crate) struct FailureTracker {
    backoff: Backoff,
    failures: Mutex<HashMap<String, u32>>,
}

impl FailureTracker {
    /// A tracker using `backoff` for the delays.
    pub(crate) fn new(backoff: Backoff) -> Self {
        Self {
            backoff,
            failures: Mutex::default(),
        }
    }

    /// Records one more failure for `key` and returns how long to wait.
    pub(crate) fn failed(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.to_owned()).or_default();
        let delay = self.backoff.delay(*count);
        *count = count.saturating_add(1);
        delay
    }

    /// Forgets the failures of `key` (it succeeded, or it is gone).
    pub(crate) fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_then_caps() {
        let b = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
        let delays: Vec<_> = (0..7).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(delays, [250, 500, 1000, 2000, 4000, 5000, 5000]);
    }

    #[test]
    fn huge_attempts_do_not_overflow() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(300));
        assert_eq!(b.delay(64), Duration::from_secs(300));
    }

    #[test]
    fn max_below_initial_is_raised() {
        let b = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(b.delay(0), Duration::from_secs(2));
        assert_eq!(b.delay(5), Duration::from_secs(2));
    }

    #[test]
    fn tracker_grows_per_key_and_resets() {
        let t = FailureTracker::new(Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(60),
        ));
        assert_eq!(t.failed("a"), Duration::from_secs(1));
        assert_eq!(t.failed("a"), Duration::from_secs(2));
        assert_eq!(
            t.failed("b"),
            Duration::from_secs(1),
            "keys are independent"
        );
        assert_eq!(t.failed("a"), Duration::from_secs(4));
        t.reset("a");
        assert_eq!(t.failed("a"), Duration::from_secs(1));
    }
}

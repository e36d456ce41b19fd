//! Keeping a flood of bad heartbeats from becoming a flood of Events.
//!
//! Every container in the pod can call `registry.sock`, and each refused
//! heartbeat used to be written to the API server as a `PluginRefused`
//! Event on the operator's Pod (measured: 10,000 heartbeats with made-up
//! names, 10,000 Events, 5 ms each). A [`Throttle`] lets through one notice
//! per key (plugin name and reason) per period, and a fixed number per
//! period in all; the refusals metric still counts every one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Which notices may go out now.
#[derive(Debug)]
pub(crate) struct Throttle {
    period: Duration,
    budget: usize,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// When each key last went out, in the current period (so at most
    /// `budget` entries).
    last: HashMap<String, Instant>,
    period_start: Instant,
    used: usize,
}

impl Throttle {
    /// At most one notice per key per `period`, and `budget` per `period`
    /// in all.
    pub(crate) fn new(period: Duration, budget: usize) -> Self {
        Self {
            period,
            budget,
            state: Mutex::new(State {
                last: HashMap::new(),
                period_start: Instant::now(),
                used: 0,
            }),
        }
    }

    /// Whether a notice about `key` may go out at `now`.
    pub(crate) fn admit(&self, key: &str, now: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_duration_since(state.period_start) >= self.period {
            state.period_start = now;
            state.used = 0;
            let period = self.period;
            state
                .last
                .retain(|_, at| now.saturating_duration_since(*at) < period);
        }
        if state
            .last
            .get(key)
            .is_some_and(|at| now.saturating_duration_since(*at) < self.period)
        {
            return false;
        }
        if state.used >= self.budget {
            return false;
        }
        state.used += 1;
        state.last.insert(key.to_owned(), now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_notice_per_key_per_period() {
        let throttle = Throttle::new(Duration::from_secs(60), 10);
        let t0 = Instant::now();
        assert!(throttle.admit("evil/ImplementationOwned", t0));
        assert!(!throttle.admit("evil/ImplementationOwned", t0 + Duration::from_secs(59)));
        assert!(throttle.admit("other/WrongUid", t0 + Duration::from_secs(1)));
        assert!(throttle.admit("evil/ImplementationOwned", t0 + Duration::from_secs(61)));
    }

    #[test]
    fn a_flood_of_new_keys_is_cut_at_the_budget_and_memory_stays_bounded() {
        let throttle = Throttle::new(Duration::from_secs(60), 20);
        let t0 = Instant::now();
        let admitted = (0..10_000)
            .filter(|i| throttle.admit(&format!("flood-{i}/Unreachable"), t0))
            .count();
        assert_eq!(admitted, 20);
        assert_eq!(throttle.state.lock().unwrap().last.len(), 20);
        // The next period has a budget again.
        assert!(throttle.admit("flood-x/Unreachable", t0 + Duration::from_secs(60)));
    }
}

//! Each plugin's share of the controller's workers.
//!
//! A reconcile holds a worker for as long as its plugin takes to answer. A
//! plugin that hangs would, one object at a time, take every worker and
//! stall the objects of every other plugin. So each plugin may have at most
//! [`Shares::per_plugin`] reconciles in progress (fewer than there are
//! workers), and a reconcile that finds its plugin's share taken does not
//! wait for it inside a worker: it is requeued shortly
//! ([`BUSY_REQUEUE`]), leaving the worker to other objects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How soon an object whose plugin's share is taken is looked at again.
pub(crate) const BUSY_REQUEUE: Duration = Duration::from_secs(1);

/// The shares, by plugin name.
#[derive(Debug)]
pub(crate) struct Shares {
    per_plugin: usize,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Shares {
    /// Shares of `per_plugin` reconciles each (at least one).
    pub(crate) fn new(per_plugin: usize) -> Self {
        Self {
            per_plugin: per_plugin.max(1),
            slots: Mutex::default(),
        }
    }

    /// Reconciles one plugin may have in progress.
    #[cfg(test)]
    pub(crate) fn per_plugin(&self) -> usize {
        self.per_plugin
    }

    /// A place in `plugin`'s share, or `None` when it is all taken. The place
    /// is given back when the permit is dropped.
    pub(crate) fn try_take(&self, plugin: &str) -> Option<OwnedSemaphorePermit> {
        let slots = Arc::clone(
            self.slots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(plugin.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_plugin))),
        );
        slots.try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_gets_its_share_and_no_more_and_others_are_unaffected() {
        let shares = Shares::new(2);
        let a1 = shares.try_take("a");
        let a2 = shares.try_take("a");
        assert!(a1.is_some() && a2.is_some());
        assert!(shares.try_take("a").is_none(), "a's share is taken");
        assert!(shares.try_take("b").is_some(), "b has its own");
        drop(a1);
        assert!(shares.try_take("a").is_some(), "a place came back");
    }

    #[test]
    fn a_share_is_at_least_one() {
        assert_eq!(Shares::new(0).per_plugin(), 1);
    }
}

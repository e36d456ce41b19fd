//! Each plugin's share of the controller's workers.
//!
//! A reconcile holds a worker for as long as its plugin takes to answer. A
//! plugin that hangs would, one object at a time, take every worker and
//! stall the objects of every other plugin. So each plugin may have at most
//! [`Shares::per_plugin`] reconciles in progress (fewer than there are
//! workers), and a reconcile that finds its plugin's share taken does not
//! wait for it inside a worker: the object is turned away, and woken when a
//! place in that share is given back, first turned away first woken.
//!
//! A plugin that serves the kind alone has no one to be kept from: it may
//! have a reconcile in every worker, as an in-process controller would
//! (`kplug-bench` P3: with 6 of 8 workers, 1,000 waiting tables took
//! 1.5 times as long as the in-process controller's 8, and every object was
//! turned away once). When a second plugin registers, the first is held to
//! its share again as its calls end (within a call's deadline).
//!
//! That wake is the only way back in, and each object turned away is woken
//! once, unless it got a place meanwhile. `kplug-bench` P2 (2,000 new
//! tables) measured the alternatives: a requeue after a fixed second made
//! the spare workers turn objects away 20,000 times, and woke a quarter of
//! the tables again after they had converged, each a plugin call and three
//! writes for nothing. A new leader term reconciles every object anyway, so
//! a wake sent to a term that ends is not lost.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc::UnboundedSender;

type Object = ObjectRef<DynamicObject>;

/// The shares, by plugin name.
#[derive(Debug)]
pub(crate) struct Shares {
    per_plugin: usize,
    shares: Mutex<HashMap<String, Arc<Share>>>,
    wake: UnboundedSender<Object>,
}

/// One plugin's share: its free places, and the objects turned away while
/// there were none. One lock for both, so that a place given back between
/// a refusal and the record of the refused object cannot miss it.
#[derive(Debug)]
struct Share {
    /// Places a plugin among others may take.
    size: usize,
    state: Mutex<ShareState>,
    wake: UnboundedSender<Object>,
}

#[derive(Debug)]
struct ShareState {
    /// Places taken (more than the share while the plugin was alone).
    taken: usize,
    /// The objects turned away, in turn; an entry no longer in `waiting`
    /// got a place meanwhile and is skipped.
    turned_away: VecDeque<Object>,
    waiting: HashSet<Object>,
}

impl ShareState {
    /// The object turned away longest ago that still waits.
    fn next(&mut self) -> Option<Object> {
        while let Some(object) = self.turned_away.pop_front() {
            if self.waiting.remove(&object) {
                return Some(object);
            }
        }
        None
    }
}

/// A place in a plugin's share, given back when dropped (waking the object
/// turned away longest ago, if any).
#[derive(Debug)]
pub(crate) struct Place {
    share: Arc<Share>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let next = {
            let mut state = self.share.state.lock().unwrap_or_else(|e| e.into_inner());
            state.taken -= 1;
            // Only objects turned away wait, and only a plugin with others
            // turns them away; a place above the share frees none.
            if state.taken < self.share.size {
                state.next()
            } else {
                None
            }
        };
        if let Some(object) = next {
            // A closed channel: the operator is stopping.
            let _ = self.share.wake.send(object);
        }
    }
}

impl Shares {
    /// Shares of `per_plugin` reconciles each (at least one); objects turned
    /// away are woken through `wake` (the controller's `reconcile_on`).
    pub(crate) fn new(per_plugin: usize, wake: UnboundedSender<Object>) -> Self {
        Self {
            per_plugin: per_plugin.max(1),
            shares: Mutex::default(),
            wake,
        }
    }

    /// Reconciles one plugin may have in progress.
    #[cfg(test)]
    pub(crate) fn per_plugin(&self) -> usize {
        self.per_plugin
    }

    /// A place in `plugin`'s share for `object`, or `None` when it is all
    /// taken: `object` is then woken when a place is given back. `alone`:
    /// no other plugin serves the kind, and the share is every worker.
    pub(crate) fn try_take(&self, plugin: &str, object: &Object, alone: bool) -> Option<Place> {
        let share = Arc::clone(
            self.shares
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(plugin.to_owned())
                .or_insert_with(|| {
                    Arc::new(Share {
                        size: self.per_plugin,
                        state: Mutex::new(ShareState {
                            taken: 0,
                            turned_away: VecDeque::new(),
                            waiting: HashSet::new(),
                        }),
                        wake: self.wake.clone(),
                    })
                }),
        );
        let mut state = share.state.lock().unwrap_or_else(|e| e.into_inner());
        if !alone && state.taken >= share.size {
            if state.waiting.insert(object.clone()) {
                state.turned_away.push_back(object.clone());
            }
            return None;
        }
        state.taken += 1;
        // Woken by something else first: it needs no wake of its own.
        state.waiting.remove(object);
        drop(state);
        Some(Place { share })
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ApiResource;
    use kube::core::GroupVersionKind;
    use tokio::sync::mpsc;

    use super::*;

    fn object(name: &str) -> Object {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Thing"));
        ObjectRef::new_with(name, ar).within("default")
    }

    #[test]
    fn a_plugin_gets_its_share_and_no_more_and_others_are_unaffected() {
        let (wake, _woken) = mpsc::unbounded_channel();
        let shares = Shares::new(2, wake);
        let a1 = shares.try_take("a", &object("1"), false);
        let a2 = shares.try_take("a", &object("2"), false);
        assert!(a1.is_some() && a2.is_some());
        assert!(
            shares.try_take("a", &object("3"), false).is_none(),
            "a's share is taken"
        );
        assert!(
            shares.try_take("b", &object("3"), false).is_some(),
            "b has its own"
        );
        drop(a1);
        assert!(
            shares.try_take("a", &object("3"), false).is_some(),
            "a place came back"
        );
    }

    #[test]
    fn objects_turned_away_are_woken_in_turn_as_places_come_back() {
        let (wake, mut woken) = mpsc::unbounded_channel();
        let shares = Shares::new(1, wake);
        let place = shares.try_take("a", &object("1"), false).unwrap();
        assert!(shares.try_take("a", &object("2"), false).is_none());
        assert!(shares.try_take("a", &object("3"), false).is_none());
        assert!(
            shares.try_take("a", &object("2"), false).is_none(),
            "turned away again"
        );
        assert!(
            woken.try_recv().is_err(),
            "nothing is woken while the place is held"
        );
        drop(place);
        assert_eq!(
            woken.try_recv().unwrap(),
            object("2"),
            "first turned away, first woken"
        );
        assert!(woken.try_recv().is_err(), "one place, one object woken");
        let place = shares.try_take("a", &object("2"), false).unwrap();
        drop(place);
        assert_eq!(woken.try_recv().unwrap(), object("3"));
        drop(shares.try_take("a", &object("4"), false).unwrap());
        assert!(woken.try_recv().is_err(), "each object is woken once");
    }

    #[test]
    fn an_object_that_got_a_place_meanwhile_is_not_woken_again() {
        let (wake, mut woken) = mpsc::unbounded_channel();
        let shares = Shares::new(2, wake);
        let first = shares.try_take("a", &object("1"), false).unwrap();
        let second = shares.try_take("a", &object("2"), false).unwrap();
        assert!(shares.try_take("a", &object("3"), false).is_none());
        assert!(shares.try_take("a", &object("4"), false).is_none());
        drop(first);
        assert_eq!(woken.try_recv().unwrap(), object("3"));
        // 4 comes back by itself (say, an edit) and takes the place 3 was
        // woken for; 3 is turned away again.
        let fourth = shares.try_take("a", &object("4"), false).unwrap();
        assert!(shares.try_take("a", &object("3"), false).is_none());
        drop(second);
        assert_eq!(
            woken.try_recv().unwrap(),
            object("3"),
            "4 is not woken: it has a place"
        );
        drop(fourth);
        assert!(woken.try_recv().is_err(), "nobody else waits");
    }

    #[test]
    fn a_plugin_alone_takes_every_worker_and_is_held_to_its_share_once_not() {
        let (wake, mut woken) = mpsc::unbounded_channel();
        let shares = Shares::new(1, wake);
        let alone: Vec<Place> = (0..3)
            .map(|i| shares.try_take("a", &object(&i.to_string()), true).unwrap())
            .collect();
        // b registers: a is above its share, and turns objects away until
        // its calls end.
        assert!(shares.try_take("a", &object("3"), false).is_none());
        let mut alone = alone.into_iter();
        drop(alone.next());
        drop(alone.next());
        assert!(
            woken.try_recv().is_err(),
            "still at its share: nobody is woken"
        );
        drop(alone.next());
        assert_eq!(woken.try_recv().unwrap(), object("3"));
        assert!(shares.try_take("a", &object("3"), false).is_some());
    }

    #[test]
    fn a_share_is_at_least_one() {
        let (wake, _woken) = mpsc::unbounded_channel();
        assert_eq!(Shares::new(0, wake).per_plugin(), 1);
    }
}

//! Objects waiting for a plugin, and which of them a registry change wakes.
//!
//! # Expected flow
//! - A reconcile that finds no ready plugin for an object records what the
//!   object needs ([`Waiting::wait`]): any plugin serving the kind, or the
//!   one implementation recorded in its status. It then waits without a
//!   requeue.
//! - On every change of the registry's ready set, [`Waiting::wake`] returns
//!   the objects whose need is now met, and forgets them; they are
//!   reconciled at once.
//! - A reconcile that reaches a plugin forgets the object ([`Waiting::done`]).
//! - For one heartbeat TTL after the registry starts, an object whose
//!   preferred implementation is not offered waits for it
//!   ([`Need::Preferred`]) instead of falling back: the operator's sidecars
//!   register over a second or two, and the choice is sticky. The object is
//!   woken when the implementation is offered, or when the grace ends.
//!   Likewise an object whose recorded plugin has not registered yet keeps
//!   its status during the grace (an operator's restart must not flip every
//!   object to "waiting" for a heartbeat), and is woken to say the plugin
//!   is missing if it has not come when the grace ends.
//! - When a plugin leaves, nothing happens at once: a restart (a rolling
//!   update of its container) is back within seconds. If its
//!   implementations are still not offered after a grace period (the
//!   heartbeat TTL), the objects recorded on them are reconciled, so that
//!   their conditions say the plugin is unavailable ([`wake_on_changes`]).
//!
//! # Guarantees
//! - A registry change reconciles only objects it can help: a plugin that
//!   restarts with the same offers wakes nobody who was not waiting for it,
//!   and objects in backoff keep their backoff.
//! - With `--selection all`, each object records the plugins that served it
//!   ([`Need::PluginBeyond`]), and a ready plugin not among them wakes it: a
//!   plugin name new to the kind reaches every object, a new instance of a
//!   known one reaches none.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kplug_proto::v1::GroupKind;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use crate::registry::Registry;
use crate::selection::{Candidate, Recorded};

/// What a waiting object needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// Any ready plugin that serves the kind.
    AnyPlugin,
    /// The recorded choice's plugin, offering its implementation.
    Recorded(Recorded),
    /// A ready plugin other than these, which served it last
    /// (`--selection all`).
    PluginBeyond(BTreeSet<String>),
    /// A plugin offering the preferred implementation, while the registry's
    /// start-up grace lasts; when it ends the object falls back.
    Preferred(String),
}

impl Need {
    /// Whether a plugin among the ready `candidates` meets this need.
    pub(crate) fn met_by(&self, candidates: &[Candidate]) -> bool {
        match self {
            Need::AnyPlugin => !candidates.is_empty(),
            Need::Recorded(recorded) => candidates.iter().any(|c| {
                c.implementation
                    .eq_ignore_ascii_case(&recorded.implementation)
                    && recorded.plugin.as_ref().is_none_or(|p| *p == c.plugin)
            }),
            Need::PluginBeyond(served) => candidates.iter().any(|c| !served.contains(&c.plugin)),
            Need::Preferred(preferred) => candidates
                .iter()
                .any(|c| c.implementation.eq_ignore_ascii_case(preferred)),
        }
    }
}

/// The table of waiting objects.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    needs: Mutex<HashMap<ObjectRef<DynamicObject>, Need>>,
}

impl Waiting {
    /// Records that `object` waits for `need`.
    pub(crate) fn wait(&self, object: ObjectRef<DynamicObject>, need: Need) {
        self.needs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(object, need);
    }

    /// Forgets every object: a new term as leader reconciles them all, and
    /// each records its need again.
    pub(crate) fn clear(&self) {
        self.needs.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Forgets `object` (it reached its plugin, or is gone). Returns
    /// whether it was still waiting: `false` when a [`Waiting::wake`] took
    /// it first, and so has already asked for its reconcile.
    pub(crate) fn done(&self, object: &ObjectRef<DynamicObject>) -> bool {
        self.needs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(object)
            .is_some()
    }

    /// The objects waiting for their preferred implementation (they may
    /// fall back now) or for their recorded plugin (they kept their status
    /// while plugins registered, and now say that it is missing), forgotten
    /// here: the start-up grace is over.
    pub(crate) fn end_start_up_grace(&self) -> Vec<ObjectRef<DynamicObject>> {
        let mut needs = self.needs.lock().unwrap_or_else(|e| e.into_inner());
        let woken: Vec<_> = needs
            .iter()
            .filter(|(_, need)| matches!(need, Need::Preferred(_) | Need::Recorded(_)))
            .map(|(object, _)| object.clone())
            .collect();
        for object in &woken {
            needs.remove(object);
        }
        woken
    }

    /// The objects whose need the ready `candidates` meet, forgotten here
    /// (a reconcile that still finds nothing records them again).
    pub(crate) fn wake(&self, candidates: &[Candidate]) -> Vec<ObjectRef<DynamicObject>> {
        let mut needs = self.needs.lock().unwrap_or_else(|e| e.into_inner());
        let woken: Vec<_> = needs
            .iter()
            .filter(|(_, need)| need.met_by(candidates))
            .map(|(object, _)| object.clone())
            .collect();
        for object in &woken {
            needs.remove(object);
        }
        woken
    }
}

/// The managed objects now (the controller's cache), for
/// [`wake_on_changes`].
pub(crate) type Snapshot = Arc<dyn Fn() -> Vec<DynamicObject> + Send + Sync>;

/// Where [`wake_on_changes`] looks and what it sends.
#[derive(Clone)]
pub(crate) struct Wakeups {
    /// The registry whose changes are followed.
    pub registry: Registry,
    /// The waiting objects.
    pub waiting: Arc<Waiting>,
    /// The managed kind.
    pub kind: GroupKind,
    /// How to name its objects.
    pub api_resource: ApiResource,
    /// The controller's cache of its objects.
    pub snapshot: Snapshot,
    /// How long a plugin may be gone before its objects are told.
    pub grace: Duration,
    /// Where objects to reconcile are sent.
    pub wake: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
}

/// Follows the registry's changes until it is dropped: wakes the objects
/// waiting for what became ready, and, after [`Wakeups::grace`], the
/// objects recorded on implementations that left and did not come back.
pub(crate) async fn wake_on_changes(w: Wakeups) {
    let mut changes = w.registry.changes();
    let mut previous = w.registry.candidates(&w.kind);
    let grace = w.registry.start_up_grace_left();
    let grace_over = tokio::time::sleep(grace.unwrap_or_default());
    tokio::pin!(grace_over);
    let mut in_grace = grace.is_some();
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { break },
            () = &mut grace_over, if in_grace => {
                // The registry's clock decides (a reconcile asks it whether
                // the grace is over): it starts when the registry serves,
                // which can be after this loop started.
                if let Some(left) = w.registry.start_up_grace_left() {
                    grace_over.as_mut().reset(tokio::time::Instant::now() + left);
                    continue;
                }
                in_grace = false;
                for object in w.waiting.end_start_up_grace() {
                    let _ = w.wake.send(object);
                }
                continue;
            }
        }
        let current = w.registry.candidates(&w.kind);
        for object in w.waiting.wake(&current) {
            let _ = w.wake.send(object);
        }
        let offered: BTreeSet<&str> = current.iter().map(|c| c.implementation.as_str()).collect();
        let mut left: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for gone in previous
            .iter()
            .filter(|c| !offered.contains(c.implementation.as_str()))
        {
            left.entry(gone.plugin.clone())
                .or_default()
                .insert(gone.implementation.clone());
        }
        for (plugin, implementations) in left {
            tokio::spawn(tell_after_grace(w.clone(), plugin, implementations));
        }
        previous = current;
    }
}

/// Objects recorded on implementations that are still not offered after
/// the grace period are reconciled (and then say so). With
/// `--selection all` nothing is recorded, and nothing is woken: the other
/// plugins' calls do not depend on the one that left.
async fn tell_after_grace(w: Wakeups, plugin: String, implementations: BTreeSet<String>) {
    tokio::time::sleep(w.grace).await;
    let offered: BTreeSet<String> = w
        .registry
        .candidates(&w.kind)
        .into_iter()
        .map(|c| c.implementation)
        .collect();
    let still_gone: BTreeSet<&String> = implementations.difference(&offered).collect();
    if still_gone.is_empty() {
        return;
    }
    let objects: Vec<_> = (w.snapshot)()
        .into_iter()
        .filter(|obj| Recorded::of(obj).is_some_and(|r| still_gone.contains(&r.implementation)))
        .collect();
    tracing::info!(
        plugin,
        implementations = ?still_gone,
        objects = objects.len(),
        "plugin still gone after {:?}; reconciling its objects so that they say so",
        w.grace
    );
    for obj in objects {
        let _ = w
            .wake
            .send(ObjectRef::from_obj_with(&obj, w.api_resource.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str) -> ObjectRef<DynamicObject> {
        let ar = kube::api::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "myorg.org",
            "v1alpha1",
            "DatabaseTable",
        ));
        ObjectRef::new_with(name, ar).within("ns")
    }

    fn candidate(plugin: &str, implementation: &str) -> Candidate {
        Candidate {
            plugin: plugin.into(),
            implementation: implementation.into(),
        }
    }

    fn recorded(implementation: &str, plugin: Option<&str>) -> Recorded {
        Recorded {
            implementation: implementation.into(),
            plugin: plugin.map(str::to_owned),
        }
    }

    fn woken(objects: Vec<ObjectRef<DynamicObject>>) -> Vec<String> {
        let mut names: Vec<_> = objects.into_iter().map(|o| o.name).collect();
        names.sort();
        names
    }

    fn none() -> Vec<String> {
        Vec::new()
    }

    #[test]
    fn a_plugin_wakes_only_the_objects_it_can_serve() {
        let waiting = Waiting::default();
        waiting.wait(object("any"), Need::AnyPlugin);
        waiting.wait(object("sqlite"), Need::Recorded(recorded("SQLite", None)));
        waiting.wait(object("maria"), Need::Recorded(recorded("MariaDB", None)));
        waiting.wait(
            object("bound"),
            Need::Recorded(recorded("SQLite", Some("other-sqlite"))),
        );
        let wake = waiting.wake(&[candidate("sqlite-plugin", "SQLite")]);
        assert_eq!(woken(wake), ["any", "sqlite"]);
        // Woken objects are forgotten; the MariaDB one still waits.
        assert_eq!(
            woken(waiting.wake(&[candidate("sqlite-plugin", "SQLite")])),
            none()
        );
        let wake = waiting.wake(&[candidate("mariadb-plugin", "MariaDB")]);
        assert_eq!(woken(wake), ["maria"]);
    }

    #[test]
    fn clear_forgets_every_waiting_object() {
        let waiting = Waiting::default();
        waiting.wait(object("any"), Need::AnyPlugin);
        waiting.clear();
        assert_eq!(
            woken(waiting.wake(&[candidate("sqlite-plugin", "SQLite")])),
            none()
        );
    }

    #[test]
    fn a_change_with_nothing_ready_wakes_nobody() {
        let waiting = Waiting::default();
        waiting.wait(object("any"), Need::AnyPlugin);
        waiting.wait(object("all"), Need::PluginBeyond(BTreeSet::new()));
        assert_eq!(woken(waiting.wake(&[])), none());
    }

    #[test]
    fn done_objects_are_not_woken() {
        let waiting = Waiting::default();
        waiting.wait(object("a"), Need::AnyPlugin);
        assert!(waiting.done(&object("a")), "it was waiting");
        assert_eq!(woken(waiting.wake(&[candidate("p", "P")])), none());
    }

    #[test]
    fn a_preference_waits_for_its_implementation_or_the_end_of_the_grace() {
        let waiting = Waiting::default();
        waiting.wait(object("maria"), Need::Preferred("mariadb".into()));
        waiting.wait(object("pg"), Need::Preferred("PostgreSQL".into()));
        waiting.wait(object("any"), Need::AnyPlugin);
        assert_eq!(
            woken(waiting.wake(&[candidate("mariadb", "MariaDB")])),
            ["any", "maria"]
        );
        assert_eq!(woken(waiting.end_start_up_grace()), ["pg"]);
        assert_eq!(woken(waiting.end_start_up_grace()), none());
    }

    #[test]
    fn the_end_of_the_grace_wakes_objects_whose_recorded_plugin_did_not_come() {
        let waiting = Waiting::default();
        let recorded = Recorded {
            implementation: "MariaDB".into(),
            plugin: Some("mariadb".into()),
        };
        waiting.wait(object("served"), Need::Recorded(recorded));
        waiting.wait(object("any"), Need::AnyPlugin);
        assert_eq!(woken(waiting.end_start_up_grace()), ["served"]);
        assert_eq!(woken(waiting.wake(&[candidate("p", "P")])), ["any"]);
    }

    #[test]
    fn done_after_a_wake_says_the_wake_came_first() {
        let waiting = Waiting::default();
        waiting.wait(object("a"), Need::AnyPlugin);
        assert_eq!(woken(waiting.wake(&[candidate("p", "P")])), ["a"]);
        assert!(!waiting.done(&object("a")), "the wake took it");
    }

    #[test]
    fn selection_all_wakes_an_object_for_a_plugin_that_has_not_served_it() {
        let waiting = Waiting::default();
        let served =
            |names: &[&str]| Need::PluginBeyond(names.iter().map(|n| (*n).to_owned()).collect());
        waiting.wait(object("full"), served(&["a", "b"]));
        waiting.wait(object("partial"), served(&["a"]));
        // b restarted: the object it served is not woken, the other one is.
        let wake = waiting.wake(&[candidate("a", "A"), candidate("b", "B")]);
        assert_eq!(woken(wake), ["partial"]);
        // A plugin new to the kind reaches the rest.
        let wake = waiting.wake(&[
            candidate("a", "A"),
            candidate("b", "B"),
            candidate("c", "C"),
        ]);
        assert_eq!(woken(wake), ["full"]);
    }
}

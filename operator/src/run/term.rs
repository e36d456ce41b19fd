//! One term as leader: a controller per managed kind, built anew each
//! term.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{StreamExt, TryStreamExt};
use kube::api::DynamicObject;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{Controller, WatchStreamExt, watcher};

use super::Config;
use crate::delegate::Delegate;
use crate::http::Readiness;
use crate::relist;
use crate::target::Target;

/// What one term as leader needs: the controllers are built anew each time
/// (a fresh list, so a new leader reconciles every object once).
pub(super) struct Term {
    /// Each managed kind's delegate.
    pub(super) kinds: Vec<(Arc<Delegate<DynamicObject>>, Target)>,
    pub(super) client: kube::Client,
    pub(super) config: Config,
    pub(super) readiness: Readiness,
}

impl Term {
    /// Runs a controller per kind until `stopped` (gracefully) or until
    /// dropped. Ready once every kind's cache holds its first list.
    pub(super) async fn run(
        &self,
        stopped: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ) {
        let stopped = futures::FutureExt::shared(Box::pin(stopped));
        let synced = Arc::new(AtomicUsize::new(0));
        let controllers = self.kinds.iter().map(|(delegate, target)| {
            let stopped = stopped.clone();
            let synced = Arc::clone(&synced);
            let all = self.kinds.len();
            let readiness = self.readiness.clone();
            let on_synced = move || {
                if synced.fetch_add(1, Ordering::AcqRel) + 1 == all && readiness.set_ready() {
                    tracing::info!("controller caches synced; ready");
                }
            };
            self.run_kind(delegate, target, stopped, on_synced)
        });
        futures::future::join_all(controllers).await;
    }

    /// Runs the controller of one kind until `stopped`.
    async fn run_kind(
        &self,
        delegate: &Arc<Delegate<DynamicObject>>,
        target: &Target,
        stopped: impl std::future::Future<Output = ()> + Send + Sync + 'static,
        on_synced: impl Fn() + Send + Sync + 'static,
    ) {
        let namespace = self
            .config
            .namespace
            .as_deref()
            .filter(|_| target.namespaced);
        let api = crate::target::api_in(&self.client, &target.api_resource, namespace);
        // A new term reconciles every object once. What the last term knew
        // is not enough: its requeues (backoffs, retries after an API
        // error) ended with it, and an object whose status is still what
        // this process last wrote would otherwise not wake at all (the
        // chaos soak found 9 objects left waiting for a plugin that was
        // back, after a term lost while the API server restarted).
        delegate.new_term();
        let writer = Writer::new(target.api_resource.clone());
        let store = writer.as_reader();
        // Ready once the first list is in the cache. This is read off the
        // stream rather than from `store.wait_until_ready()`: that future
        // keeps only the waker of its last poller, and the controller polls
        // it too, so a second waiter is never woken (/readyz stayed 503).
        let once = std::sync::Once::new();
        // Spec changes wake an object, and so does a change by anyone else
        // to the status the operator owns (crate::written); its own status
        // writes do not (they would loop).
        let wants = Arc::clone(delegate);
        let objects = watcher(api, self.config.initial_list.watcher_config())
            .default_backoff()
            .reflect(writer);
        // A relist's wake-ups once the cache holds it (crate::relist).
        let objects = relist::after_the_swap(objects, store.clone(), target.api_resource.clone())
            .inspect(move |event| {
                if matches!(event, Ok(watcher::Event::InitDone)) {
                    once.call_once(&on_synced);
                }
            })
            .applied_objects()
            .try_filter(move |obj| std::future::ready(wants.wants(obj)));
        // A registry change (a plugin registered, became ready, went away)
        // reconciles only the objects it concerns (crate::waiting), and a
        // child's change its base. The stream stops following them when
        // this term ends, however it ends.
        let wakeups = delegate.wakeups(store.clone());
        Controller::for_stream_with(objects, store, target.api_resource.clone())
            .with_config(kube::runtime::Config::default().concurrency(self.config.concurrency))
            .reconcile_on(wakeups)
            .graceful_shutdown_on(stopped)
            .run(
                |obj, delegate| async move { delegate.reconcile(obj).await },
                |obj, error, delegate| delegate.error_policy(obj, error),
                Arc::clone(delegate),
            )
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(%error, "controller event");
                }
            })
            .await;
    }
}

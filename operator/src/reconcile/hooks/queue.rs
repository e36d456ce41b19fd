//! [`HookQueue`]: where async hooks wait to be called, bounded so that a
//! hanging hook can never hold up a reconcile or grow memory without end.

use std::future::Future;
use std::sync::OnceLock;

use futures::StreamExt;
use futures::future::BoxFuture;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Async hook calls run at once. Each waits at most for its deadline, so a
/// hook that hangs holds one of these for that long and no more.
const WORKERS: usize = 4;

/// A bounded queue of async hook calls, served by [`WORKERS`] at a time.
pub(crate) struct HookQueue {
    capacity: usize,
    sender: OnceLock<mpsc::Sender<BoxFuture<'static, ()>>>,
    /// `kplug_hook_queue_depth`: queued or running.
    depth: Gauge,
}

impl std::fmt::Debug for HookQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookQueue")
            .field("capacity", &self.capacity)
            .field("depth", &self.depth.get())
            .finish()
    }
}

impl HookQueue {
    /// A queue holding at most `capacity` calls (at least 1) that are not
    /// running yet.
    pub(crate) fn new(capacity: usize, depth: Gauge) -> Self {
        Self {
            capacity: capacity.max(1),
            sender: OnceLock::new(),
            depth,
        }
    }

    /// Queues `call` without waiting; `false` when the queue is full (the
    /// call is dropped). The workers start with the first call, inside the
    /// runtime that reconciles.
    pub(crate) fn push(&self, call: impl Future<Output = ()> + Send + 'static) -> bool {
        let sender = self.sender.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(self.capacity);
            tokio::spawn(ReceiverStream::new(receiver).for_each_concurrent(WORKERS, |call| call));
            sender
        });
        let depth = self.depth.clone();
        let call = async move {
            call.await;
            depth.dec();
        };
        self.depth.inc();
        if sender.try_send(Box::pin(call)).is_ok() {
            true
        } else {
            self.depth.dec();
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Notify;

    use super::*;

    async fn until(what: &str, met: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while !met() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{what}"));
    }

    #[tokio::test]
    async fn calls_run_without_the_caller_waiting_and_a_full_queue_drops() {
        let queue = HookQueue::new(2, Gauge::default());
        let release = Arc::new(Notify::new());
        let started = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let hanging = || {
            let (release, started, done) = (release.clone(), started.clone(), done.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                release.notified().await;
                done.fetch_add(1, Ordering::SeqCst);
            }
        };
        // WORKERS calls start and hang, without the caller waiting.
        for running in 1..=WORKERS {
            assert!(queue.push(hanging()));
            until("a worker starts", || {
                started.load(Ordering::SeqCst) == running
            })
            .await;
        }
        // 2 more wait in the queue; the next is dropped.
        assert!(queue.push(hanging()));
        assert!(queue.push(hanging()));
        assert!(!queue.push(hanging()));
        assert_eq!(queue.depth.get(), WORKERS as i64 + 2);
        // Released, every queued call runs, and the depth goes back to 0.
        until("every call runs", || {
            release.notify_waiters();
            done.load(Ordering::SeqCst) == WORKERS + 2
        })
        .await;
        until("the depth is 0", || queue.depth.get() == 0).await;
        assert_eq!(started.load(Ordering::SeqCst), WORKERS + 2);
    }
}

//! Garbage collection: instances whose heartbeats stop are removed after the
//! TTL, and instances whose process dies are removed as soon as their
//! connection drops and their socket refuses a dial.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::EventType;

use super::Registry;
use crate::connection::{Liveness, liveness};
use crate::plugin::PluginInstance;

impl Registry {
    pub(super) async fn collect_garbage(self) {
        let ttl = self.shared.config.heartbeat_ttl;
        let tick = (ttl / 5).clamp(Duration::from_millis(100), Duration::from_secs(1));
        let mut interval = tokio::time::interval(tick);
        loop {
            interval.tick().await;
            let expired: Vec<_> = self
                .read()
                .values()
                .filter(|p| p.silent_for() > ttl)
                .map(|p| (p.name.clone(), p.instance_id.clone(), p.silent_for()))
                .collect();
            for (name, instance_id, silent) in expired {
                let why = format!(
                    "no heartbeat for {:.1}s (TTL {ttl:?})",
                    silent.as_secs_f64()
                );
                self.remove(&name, &instance_id, &why, EventType::Warning)
                    .await;
            }
            // Handshake locks of names nobody is handshaking as: a client
            // sending many names must not grow this table for ever.
            self.shared
                .handshakes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, lock| Arc::strong_count(lock) > 1);
        }
    }

    /// Waits for the connection-closed signal of `instance` and removes it
    /// when its socket refuses a dial; a live socket means the connection
    /// dropped for another reason and the channel will reconnect.
    pub(super) fn watch_liveness(&self, instance: &Arc<PluginInstance>) {
        let registry = self.clone();
        let instance = Arc::downgrade(instance);
        tokio::spawn(async move {
            loop {
                let Some(current) = instance.upgrade() else {
                    return;
                };
                let closed = current.closed.clone();
                let (socket, uid) = (current.socket.clone(), current.uid);
                let (name, id) = (current.name.clone(), current.instance_id.clone());
                drop(current);
                let gone = |why: String| format!("its connection dropped and {why}");
                closed.notified().await;
                if registry.current(&name, &id).is_none() {
                    return;
                }
                if let Liveness::Gone(why) = liveness(&socket, uid).await {
                    registry
                        .remove(&name, &id, &gone(why), EventType::Warning)
                        .await;
                    return;
                }
                // A dial can still succeed while a killed process is being
                // torn down (its listening socket may close after the
                // connection did): dial again, a few times over 50 ms, so
                // that a SIGKILL is noticed as soon as the teardown ends
                // (one 50 ms wait made that the notice time; kplug-bench
                // P3). A socket still taking dials then may be a live
                // plugin, and the channel only reconnects on the next call.
                // So call: a Probe either re-arms this watch on a fresh
                // connection or shows the plugin is gone.
                let mut gone_now = None;
                for _ in 0..10 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    if let Liveness::Gone(why) = liveness(&socket, uid).await {
                        gone_now = Some(why);
                        break;
                    }
                }
                if let Some(why) = gone_now {
                    registry
                        .remove(&name, &id, &gone(why), EventType::Warning)
                        .await;
                    return;
                }
                let Some(current) = instance.upgrade() else {
                    return;
                };
                let probed = current.probe().await;
                drop(current);
                if probed.is_err()
                    && let Liveness::Gone(why) = liveness(&socket, uid).await
                {
                    registry
                        .remove(&name, &id, &gone(why), EventType::Warning)
                        .await;
                    return;
                }
            }
        });
    }
}

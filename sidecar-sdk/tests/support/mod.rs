//! Shared by the SDK's tests that run against the operator's real
//! registry in-process.

use std::path::Path;
use std::time::Duration;

use kplug_operator::{Registry, RegistryConfig};
use tokio::sync::oneshot;

/// The operator's registry on `dir`, answering heartbeats every 200 ms;
/// it stops when the sender is used, and the task ends then.
pub(crate) fn start_registry(
    dir: &Path,
) -> (Registry, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let registry = Registry::new(
        RegistryConfig {
            socket_dir: dir.to_owned(),
            heartbeat_interval: Duration::from_millis(200),
            ..RegistryConfig::default()
        },
        &mut prometheus_client::registry::Registry::default(),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(registry.clone().serve(async {
        let _ = stopped.await;
    }));
    let task = tokio::spawn(async move {
        task.await.unwrap().unwrap();
    });
    (registry, stop, task)
}

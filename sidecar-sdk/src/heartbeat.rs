//! Registering with the operator, and staying registered.

use std::hash::{BuildHasher, RandomState};
use std::path::PathBuf;
use std::time::Duration;

use kplug_proto::v1::HeartbeatRequest;
use kplug_proto::v1::registry_client::RegistryClient;
use tokio::sync::watch;
use tonic::transport::Channel;

/// Deadline of one heartbeat call.
const CALL_DEADLINE: Duration = Duration::from_secs(2);
/// First retry delay after a failed heartbeat.
const FIRST_RETRY: Duration = Duration::from_millis(100);

/// Sends heartbeats until `stop` turns true: at the operator's interval
/// while accepted, with exponential backoff (capped at the interval, up to
/// 10 % jitter) while the operator is unreachable. An operator restart
/// needs nothing special: the next heartbeat registers again.
pub(crate) async fn run(
    channel: Channel,
    registry: PathBuf,
    request: HeartbeatRequest,
    mut interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut client = RegistryClient::new(channel);
    let mut registered = false;
    let mut failures: u32 = 0;
    loop {
        let mut call = tonic::Request::new(request.clone());
        call.set_timeout(CALL_DEADLINE);
        let result = tokio::time::timeout(CALL_DEADLINE, client.heartbeat(call)).await;
        let delay = match result {
            Ok(Ok(response)) => {
                let response = response.into_inner();
                if let Some(wanted) = response
                    .interval
                    .and_then(|d| Duration::try_from(d).ok())
                    .filter(|d| !d.is_zero())
                {
                    interval = wanted;
                }
                if response.accepted {
                    if !registered {
                        tracing::info!(plugin = request.name, registry = %registry.display(), "registered with the operator");
                    }
                    if !response.reason.is_empty() {
                        tracing::info!(
                            plugin = request.name,
                            note = response.reason,
                            "operator says"
                        );
                    }
                } else {
                    tracing::error!(
                        plugin = request.name,
                        reason = response.reason,
                        "the operator refused the registration; fix the plugin or the operator"
                    );
                }
                registered = response.accepted;
                failures = 0;
                interval
            }
            Ok(Err(status)) => {
                log_failure(
                    &request.name,
                    &registry,
                    registered,
                    failures,
                    status.message(),
                );
                registered = false;
                backoff(&mut failures, interval)
            }
            Err(_) => {
                log_failure(
                    &request.name,
                    &registry,
                    registered,
                    failures,
                    "no answer within 2s",
                );
                registered = false;
                backoff(&mut failures, interval)
            }
        };
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

fn log_failure(
    plugin: &str,
    registry: &std::path::Path,
    registered: bool,
    failures: u32,
    why: &str,
) {
    // Log a change of state and the first failure, not every retry.
    if registered || failures == 0 {
        tracing::warn!(plugin, registry = %registry.display(), why, "cannot reach the operator's registry; retrying with backoff");
    }
}

fn backoff(failures: &mut u32, cap: Duration) -> Duration {
    let base = FIRST_RETRY
        .saturating_mul(1u32.checked_shl((*failures).min(31)).unwrap_or(u32::MAX))
        .min(cap);
    *failures = failures.saturating_add(1);
    base + jitter(base / 10)
}

/// A random duration up to `max`, from the standard library's per-process
/// random hasher keys (no RNG dependency for one number).
fn jitter(max: Duration) -> Duration {
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(RandomState::new().hash_one(std::time::Instant::now()) % nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_jitters_at_most_ten_percent() {
        let cap = Duration::from_secs(1);
        let mut failures = 0;
        let delays: Vec<Duration> = (0..6).map(|_| backoff(&mut failures, cap)).collect();
        let bases = [100, 200, 400, 800, 1000, 1000].map(Duration::from_millis);
        for (d, b) in delays.iter().zip(bases) {
            assert!(
                *d >= b && *d <= b + b / 10,
                "{d:?} not within 10% above {b:?}"
            );
        }
    }
}

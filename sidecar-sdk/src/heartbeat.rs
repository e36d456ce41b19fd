//! Registering with the operator, and staying registered.

use std::hash::{BuildHasher, RandomState};
use std::path::PathBuf;
use std::time::Duration;

use kplug_proto::rules::{self, HEARTBEAT_CALL_DEADLINE as CALL_DEADLINE, SocketDirOrigin};
use kplug_proto::v1::registry_client::RegistryClient;
use kplug_proto::v1::{HeartbeatRequest, HeartbeatResponse};
use tokio::sync::watch;
use tonic::transport::Channel;

/// Sends heartbeats until `stop` turns true: at the operator's interval
/// while accepted, with the protocol's backoff
/// ([`kplug_proto::rules::backoff_delay`]: exponential, capped at the
/// interval, up to 10 % shorter at random) while the operator is
/// unreachable. An operator restart needs nothing special: the next
/// heartbeat registers again.
///
/// The first failure of a run of them is logged at warning level, and the
/// retries after it at debug level. Before the operator ever answered, a
/// `registry.sock` that is missing or refuses connections is logged as
/// [`rules::registry_waiting_message`]: where the plugin looks, where that
/// came from (`KPLUG_SOCKET_DIR`, the default or the program) and what to
/// do.
pub(crate) async fn run(
    channel: Channel,
    registry: Registry,
    request: HeartbeatRequest,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut client = RegistryClient::new(channel);
    let mut state = State {
        registry,
        interval,
        registered: false,
        answered: false,
        failures: 0,
    };
    loop {
        let mut call = tonic::Request::new(request.clone());
        call.set_timeout(CALL_DEADLINE);
        let result = tokio::time::timeout(CALL_DEADLINE, client.heartbeat(call)).await;
        let delay = match result {
            Ok(Ok(response)) => state.answered(&request.name, response.into_inner()),
            Ok(Err(status)) => state.failed(&request.name, status.message()).await,
            Err(_) => {
                let why = format!("no answer within {CALL_DEADLINE:?}");
                state.failed(&request.name, &why).await
            }
        };
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Where the operator's registry is, and where that came from.
pub(crate) struct Registry {
    /// The socket dir.
    pub(crate) socket_dir: PathBuf,
    /// Where the socket dir came from, for messages.
    pub(crate) origin: SocketDirOrigin,
}

impl Registry {
    /// `registry.sock` in the socket dir.
    pub(crate) fn path(&self) -> PathBuf {
        self.socket_dir.join(kplug_proto::REGISTRY_SOCKET)
    }
}

/// Where the heartbeats stand, between two of them.
struct State {
    /// The registry, for messages.
    registry: Registry,
    /// The operator's interval (the configured one until it asks for
    /// another).
    interval: Duration,
    /// Whether the last heartbeat was accepted.
    registered: bool,
    /// Whether the operator ever answered (accepting or not).
    answered: bool,
    /// Heartbeats failed in a row.
    failures: u32,
}

impl State {
    /// Takes in the operator's answer: the wait until the next heartbeat.
    fn answered(&mut self, plugin: &str, response: HeartbeatResponse) -> Duration {
        if let Some(wanted) = response
            .interval
            .and_then(|d| Duration::try_from(d).ok())
            .filter(|d| !d.is_zero())
        {
            self.interval = wanted;
        }
        if response.accepted {
            if !self.registered {
                tracing::info!(plugin, registry = %self.registry.path().display(), "registered with the operator");
            }
            if !response.reason.is_empty() {
                tracing::info!(plugin, note = response.reason, "operator says");
            }
        } else {
            tracing::error!(
                plugin,
                reason = response.reason,
                "the operator refused the registration; fix the plugin or the operator"
            );
        }
        self.registered = response.accepted;
        self.answered = true;
        self.failures = 0;
        self.interval
    }

    /// Takes in a heartbeat that got no answer: the wait until the next.
    async fn failed(&mut self, plugin: &str, why: &str) -> Duration {
        // Log a change of state and the first failure at warning level, the
        // retries at debug level.
        if self.registered || self.failures == 0 {
            let path = self.registry.path();
            if !self.answered && !kplug_proto::socket::is_live(&path).await {
                let message = rules::registry_waiting_message(
                    &self.registry.socket_dir,
                    self.registry.origin,
                );
                tracing::warn!(plugin, why, "{message}");
            } else {
                tracing::warn!(plugin, registry = %path.display(), why, "cannot reach the operator's registry; retrying with backoff");
            }
        }
        self.registered = false;
        let delay = backoff(&mut self.failures, self.interval);
        tracing::debug!(plugin, why, failures = self.failures, next_try_in = ?delay, "heartbeat failed");
        delay
    }
}

/// The wait after one more failed heartbeat; `failures` counts them.
fn backoff(failures: &mut u32, cap: Duration) -> Duration {
    *failures = failures.saturating_add(1);
    rules::backoff_delay(*failures, cap, random_unit())
}

/// A number drawn uniformly from `[0, 1)`, from the standard library's
/// per-process random hasher keys (no RNG dependency for one number).
fn random_unit() -> f64 {
    let bits = RandomState::new().hash_one(std::time::Instant::now()) >> 11;
    // 53 random bits: every value is exact in an f64, and below 1.
    (bits as f64) / ((1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_follows_the_protocol_and_never_exceeds_the_cap() {
        let cap = Duration::from_secs(1);
        let mut failures = 0;
        let delays: Vec<Duration> = (0..6).map(|_| backoff(&mut failures, cap)).collect();
        let bases = [100, 200, 400, 800, 1000, 1000].map(Duration::from_millis);
        for (d, b) in delays.iter().zip(bases) {
            assert!(
                *d <= b && *d >= b.mul_f64(0.9),
                "{d:?} not within 10% below {b:?}"
            );
        }
        assert_eq!(failures, 6);
    }

    #[test]
    fn random_units_are_in_range_and_vary() {
        let units: Vec<f64> = (0..50).map(|_| random_unit()).collect();
        assert!(units.iter().all(|u| (0.0..1.0).contains(u)), "{units:?}");
        let mut distinct = units.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        assert!(distinct.len() > 40, "{units:?}");
    }
}

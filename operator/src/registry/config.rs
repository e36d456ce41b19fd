//! [`RegistryConfig`]: the registry's settings, their defaults and checks.

use std::path::PathBuf;
use std::time::Duration;

use kplug_proto::limits;

/// Registry settings.
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// The shared socket dir; `registry.sock` is created in it.
    pub socket_dir: PathBuf,
    /// A plugin not heard from for this long is removed.
    pub heartbeat_ttl: Duration,
    /// How often plugins are asked to heartbeat.
    pub heartbeat_interval: Duration,
    /// Deadline of `Reconcile`, `Finalize` and `Hook` calls, unless the
    /// plugin declares its own (within [1 s, 10 min]).
    pub call_timeout: Duration,
    /// Deadline of `Validate` and `Default` calls, unless the plugin
    /// declares its own (within [1 s, 10 s]).
    pub admission_call_timeout: Duration,
    /// Deadline of the handshake calls (`GetInfo`, `Probe`).
    pub handshake_timeout: Duration,
    /// Calls in flight per plugin instance.
    pub max_in_flight: u32,
    /// Attempts of a call that fails in transport (including the first).
    pub call_attempts: u32,
    /// Largest `Reconcile`/`Finalize` response decoded; larger ones are
    /// refused before decoding.
    pub max_response_bytes: usize,
    /// Plugin names registered at once; more are refused.
    pub max_plugins: usize,
    /// Connections open on `registry.sock` at once; more are closed.
    pub max_connections: usize,
    /// Implementation names and the plugin that owns each
    /// (`--implementation-owner`); others are first come, first served.
    pub implementation_owners: Vec<(String, String)>,
    /// Plugin names and the UID that may register each (`--plugin-uid`);
    /// others belong to the first UID that registers them.
    pub plugin_uids: Vec<(String, u32)>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            socket_dir: PathBuf::from(kplug_proto::DEFAULT_SOCKET_DIR),
            heartbeat_ttl: Duration::from_secs(15),
            heartbeat_interval: Duration::from_secs(5),
            call_timeout: Duration::from_secs(30),
            admission_call_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(2),
            max_in_flight: 16,
            call_attempts: 4,
            max_response_bytes: kplug_proto::limits::DEFAULT_MAX_RESPONSE_BYTES,
            max_plugins: 64,
            max_connections: 256,
            implementation_owners: Vec::new(),
            plugin_uids: Vec::new(),
        }
    }
}

impl RegistryConfig {
    /// The defaults, with the socket dir from `KPLUG_SOCKET_DIR` when it is
    /// set (as the plugins read it), else `/var/run/kplug`.
    pub fn from_env() -> Self {
        Self {
            socket_dir: std::env::var_os(kplug_proto::SOCKET_DIR_ENV)
                .filter(|dir| !dir.is_empty())
                .map_or_else(
                    || PathBuf::from(kplug_proto::DEFAULT_SOCKET_DIR),
                    PathBuf::from,
                ),
            ..Self::default()
        }
    }

    /// Checks settings that cannot work together.
    ///
    /// # Errors
    /// [`crate::Error::Config`] naming the flags and what to change.
    pub fn validate(&self) -> Result<(), crate::Error> {
        if self.heartbeat_ttl < 2 * self.heartbeat_interval {
            return Err(crate::Error::Config(format!(
                "--heartbeat-ttl {:?} is shorter than twice --heartbeat-interval {:?}: every plugin would be removed between two heartbeats. Raise the TTL or shorten the interval",
                self.heartbeat_ttl, self.heartbeat_interval
            )));
        }
        let bounds = |flag: &str, value: Duration, max: Duration| {
            if (limits::MIN_CALL_DEADLINE..=max).contains(&value) {
                Ok(())
            } else {
                Err(crate::Error::Config(format!(
                    "{flag} {value:?} is outside [{:?}, {max:?}], the deadlines the operator grants a call; choose one within",
                    limits::MIN_CALL_DEADLINE
                )))
            }
        };
        bounds(
            "--call-timeout",
            self.call_timeout,
            limits::MAX_CALL_DEADLINE,
        )?;
        bounds(
            "--admission-call-timeout",
            self.admission_call_timeout,
            limits::MAX_ADMISSION_DEADLINE,
        )
    }
}

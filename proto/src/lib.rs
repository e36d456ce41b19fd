//! The `kplug.v1` gRPC contract between a kplug operator and its plugins.
//!
//! Generated at build time from `proto/kplug/v1/*.proto` (the source of
//! truth, documented field by field). The operator serves [`v1::registry_server`]
//! and calls [`v1::plugin_client`]; plugins serve [`v1::plugin_server`] and call
//! [`v1::registry_client`].
//!
//! It is also the one source of the rules both sides apply: plugin names,
//! reserved status keys and condition types, bounds, environment variables
//! and the heartbeat backoff ([`rules`], [`limits`] and the constants
//! below). SDKs in other languages check their copies against
//! `sidecar-sdk/conformance/rules.json`, which a test of this crate keeps
//! equal to this code.

// W3C trace context across plugin calls and OTLP export: its docs are in
// the module (inner docs only, so that its links resolve there).
#[cfg(feature = "telemetry")]
pub mod telemetry;

/// Messages and services of package `kplug.v1`.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::too_many_lines)]
pub mod v1 {
    tonic::include_proto!("kplug.v1");
}

/// The protocol string plugins and operators exchange in heartbeats and
/// `GetInfo`; peers that speak another protocol are refused.
pub const PROTOCOL: &str = "kplug.v1";

/// File name of the operator's registry socket inside the socket dir.
pub const REGISTRY_SOCKET: &str = "registry.sock";

/// Directory (inside the socket dir) holding one directory per plugin.
pub const PLUGINS_DIR: &str = "plugins";

/// File name of a plugin's socket inside its own directory,
/// `plugins/<name>/`.
pub const PLUGIN_SOCKET: &str = "plugin.sock";

/// Where the plugin `name` serves, relative to the socket dir (as its
/// heartbeat says): `plugins/<name>/plugin.sock`.
///
/// Each plugin has a directory of its own so that, in Kubernetes, it can be
/// a volume of its own: writable only by that plugin's container, and
/// read-only (connecting needs no write access) for the operator. No other
/// container can then create, replace or squat on a plugin's socket.
pub fn plugin_socket(name: &str) -> String {
    format!("{PLUGINS_DIR}/{name}/{PLUGIN_SOCKET}")
}

/// Default socket dir: the shared `emptyDir` mount point.
pub const DEFAULT_SOCKET_DIR: &str = "/var/run/kplug";

/// Environment variable that overrides the socket dir.
pub const SOCKET_DIR_ENV: &str = "KPLUG_SOCKET_DIR";

/// Status keys the operator owns: a plugin's status may not set them.
/// `plugin` is the plugin chosen with `implementation`.
pub const RESERVED_STATUS_KEYS: [&str; 4] = [
    "implementation",
    "plugin",
    "observedGeneration",
    "conditions",
];

/// Condition types the operator owns: a plugin may not report them.
pub const RESERVED_CONDITION_TYPES: [&str; 4] = [
    "Ready",
    "PluginAvailable",
    "ExtensionsResolved",
    "Reconciled",
];

pub mod limits;
pub mod rules;
pub mod shutdown;
pub mod socket;
